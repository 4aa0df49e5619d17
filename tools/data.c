/* data.c — the Fashion-MNIST splits for the tool, and accuracy / confusion counts of a model on one split. */
#include "cli.h"

#include <string.h>

#define EVAL_BATCH 256 /* small enough that a CNN batch's buffers stay in the allocator's cache */

/* Mean and standard deviation of the Fashion-MNIST training pixels (in [0, 1]); inputs are standardized with them. */
#define PIXEL_MEAN 0.2860
#define PIXEL_STD 0.3530

int cli_load_split(const char *cmd, const char *dir, bool train, nb_tensor **images, nb_tensor **labels) {
    if (nb_fashion_mnist_load(dir, train, images, labels) == NB_OK) return CLI_OK;
    return cli_error(cmd, CLI_FAIL, "%s", nb_last_message());
}

nb_tensor *cli_model_input(const char *model, nb_tensor *rows) {
    nb_tensor *x = nb_mul(nb_sub(rows, PIXEL_MEAN), 1 / PIXEL_STD);
    return strcmp(model, "cnn") ? x : nb_reshape(x, NB_SHAPE(-1, 1, 28, 28));
}

/* Correct predictions in one batch; adds to confusion when given.  -1 on error. */
static int64_t score_batch(nb_tensor *logits, nb_tensor *y, int64_t *confusion) {
    nb_tensor *pred = nb_argmax(logits, 1, false);
    int64_t b = nb_numel(y), correct = 0;
    if (!pred) return -1;
    const int64_t *pv = nb_data_ptr(pred), *yv = nb_data_ptr(y);
    for (int64_t i = 0; i < b; i++) {
        correct += pv[i] == yv[i];
        if (confusion && yv[i] >= 0 && yv[i] < 10 && pv[i] >= 0 && pv[i] < 10) confusion[yv[i] * 10 + pv[i]]++;
    }
    return correct;
}

int64_t cli_evaluate(nb_module *m, const char *model, nb_tensor *images, nb_tensor *labels, int64_t *confusion) {
    int64_t n = nb_size(images, 0), correct = 0;
    nb_module_train(m, false);
    nb_no_grad_begin();
    nb_scope_begin();
    nb_tensor *order = nb_arange(0, (double)n, 1, NB_I64);
    for (int64_t s = 0; s < n && correct >= 0 && order; s += EVAL_BATCH) {
        nb_scope_begin();
        nb_tensor *x = nb_take_rows(images, order, s, EVAL_BATCH), *y = nb_take_rows(labels, order, s, EVAL_BATCH);
        nb_tensor *logits = x && y ? nb_module_forward(m, cli_model_input(model, x)) : NULL;
        int64_t c = logits ? score_batch(logits, y, confusion) : -1;
        correct = c < 0 ? -1 : correct + c;
        nb_scope_end();
    }
    if (!order) correct = -1;
    nb_scope_end();
    nb_no_grad_end();
    nb_module_train(m, true);
    return correct;
}
