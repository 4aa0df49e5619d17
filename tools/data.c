/*
 * data.c — the tool's data sets: a split of IDX files as Fashion-MNIST lays
 * them out (any image size and class count), the model input made from its
 * rows, and accuracy / confusion counts of a model on one split.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EVAL_BATCH 256 /* small enough that a CNN batch's buffers stay in the allocator's cache */

/* Mean and standard deviation of the Fashion-MNIST training pixels (in [0, 1]): every input is
 * standardized with them, a fixed transform as torchvision's Normalize((0.2860,), (0.3530,)). */
#define PIXEL_MEAN 0.2860
#define PIXEL_STD 0.3530

bool cli_data_file(const char *dir, const char *name, char *path, size_t len) {
    snprintf(path, len, "%s/%s.gz", dir, name);
    if (access(path, R_OK) == 0) return true;
    snprintf(path, len, "%s/%s", dir, name);
    return access(path, R_OK) == 0;
}

/* dir/<split>-<kind>-ubyte[.gz] as a tensor (scoped), or NULL after one error line. */
static nb_tensor *load_file(const char *cmd, const char *dir, const char *split, const char *kind) {
    char name[64], path[4096];
    snprintf(name, sizeof name, "%s-%s-ubyte", split, kind);
    if (!cli_data_file(dir, name, path, sizeof path)) {
        cli_error(cmd, CLI_FAIL,
                  "cannot read %s/%s[.gz]: install the Debian package dataset-fashion-mnist (it fills %s) "
                  "or pass --data DIR with IDX files of that name",
                  dir, name, NB_FASHION_MNIST_DIR);
        return NULL;
    }
    nb_tensor *t = nb_idx_load(path);
    if (!t) cli_error(cmd, CLI_FAIL, "%s", nb_last_message());
    return t;
}

/* Images u8 [N, H, W] and labels u8 [N] into s; CLI_OK or CLI_FAIL after one error line. */
static int convert(const char *cmd, const char *dir, nb_tensor *img, nb_tensor *lab, cli_split *s) {
    if (nb_dtype_of(img) != NB_U8 || nb_ndim(img) != 3 || nb_dtype_of(lab) != NB_U8 || nb_ndim(lab) != 1 ||
        nb_shape(lab)[0] != nb_shape(img)[0] || nb_shape(img)[0] == 0)
        return cli_error(cmd, CLI_FAIL, "%s: images of rank %d, %s and labels of rank %d, %s are not u8 [N, H, W] "
                         "and u8 [N] with the same N > 0", dir, nb_ndim(img), nb_dtype_name(nb_dtype_of(img)),
                         nb_ndim(lab), nb_dtype_name(nb_dtype_of(lab)));
    const int64_t *sh = nb_shape(img);
    s->n = sh[0];
    s->height = sh[1];
    s->width = sh[2];
    s->classes = 0;
    const uint8_t *l = nb_data_ptr(lab);
    for (int64_t i = 0; i < s->n; i++) s->classes = l[i] >= s->classes ? l[i] + 1 : s->classes;
    /* references of our own: the scope around the conversion drops its copies */
    s->images = nb_retain(nb_reshape(nb_div(nb_cast(img, NB_F32), 255.0), NB_SHAPE(s->n, s->height * s->width)));
    s->labels = nb_retain(nb_cast(lab, NB_I64));
    return s->images && s->labels ? CLI_OK : cli_nb_error(cmd, "converting the data");
}

int cli_load_split(const char *cmd, const char *dir, bool train, cli_split *s) {
    *s = (cli_split){0};
    const char *root = dir ? dir : NB_FASHION_MNIST_DIR, *split = train ? "train" : "t10k";
    nb_scope_begin();
    nb_tensor *img = load_file(cmd, root, split, "images-idx3"), *lab = img ? load_file(cmd, root, split, "labels-idx1") : NULL;
    int rc = lab ? convert(cmd, root, img, lab, s) : CLI_FAIL;
    nb_scope_end();
    if (rc != CLI_OK) cli_split_free(s);
    return rc;
}

void cli_split_free(cli_split *s) {
    nb_release(s->images);
    nb_release(s->labels);
    s->images = s->labels = NULL;
}

nb_tensor *cli_model_input(const char *model, const cli_geom *g, nb_tensor *rows) {
    nb_tensor *x = nb_mul(nb_sub(rows, PIXEL_MEAN), 1 / PIXEL_STD);
    return strcmp(model, "cnn") ? x : nb_reshape(x, NB_SHAPE(-1, 1, g->height, g->width));
}

/* Correct predictions in one batch; adds to confusion (classes x classes) when given.  -1 on error. */
static int64_t score_batch(nb_tensor *logits, nb_tensor *y, int64_t classes, int64_t *confusion) {
    nb_tensor *pred = nb_argmax(logits, 1, false);
    int64_t b = nb_numel(y), correct = 0;
    if (!pred) return -1;
    const int64_t *pv = nb_data_ptr(pred), *yv = nb_data_ptr(y);
    for (int64_t i = 0; i < b; i++) {
        correct += pv[i] == yv[i];
        if (confusion && yv[i] >= 0 && yv[i] < classes && pv[i] >= 0 && pv[i] < classes)
            confusion[yv[i] * classes + pv[i]]++;
    }
    return correct;
}

int64_t cli_evaluate(nb_module *m, const char *model, const cli_geom *g, const cli_split *s, int64_t *confusion) {
    int64_t correct = 0;
    nb_module_train(m, false);
    nb_no_grad_begin();
    nb_scope_begin();
    nb_tensor *order = nb_arange(0, (double)s->n, 1, NB_I64);
    for (int64_t at = 0; at < s->n && correct >= 0 && order; at += EVAL_BATCH) {
        nb_scope_begin();
        nb_tensor *x = nb_take_rows(s->images, order, at, EVAL_BATCH), *y = nb_take_rows(s->labels, order, at, EVAL_BATCH);
        nb_tensor *logits = x && y ? nb_module_forward(m, cli_model_input(model, g, x)) : NULL;
        int64_t c = logits ? score_batch(logits, y, g->classes, confusion) : -1;
        correct = c < 0 ? -1 : correct + c;
        nb_scope_end();
    }
    if (!order) correct = -1;
    nb_scope_end();
    nb_no_grad_end();
    nb_module_train(m, true);
    return correct;
}
