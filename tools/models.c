/*
 * models.c — the two models of `nabla train`, sized for the data set's
 * images and classes, and their checkpoints: building them, telling which
 * one a safetensors file holds, and loading / saving parameters by
 * torch-style names.
 */
#include "cli.h"

#include <stdlib.h>
#include <string.h>

/* Append child to seq; false when child is NULL or the append failed (error set). */
static bool add(nb_module *seq, const char *name, nb_module *child) {
    return child && nb_sequential_add(seq, name, child) == NB_OK;
}

/* H*W-256-128-classes with ReLU (784-256-128-10 for Fashion-MNIST). */
static bool build_mlp(nb_module *s, const cli_geom *g) {
    return add(s, "fc1", nb_nn_linear(g->height * g->width, 256, true)) && add(s, NULL, nb_nn_relu()) &&
           add(s, "fc2", nb_nn_linear(256, 128, true)) && add(s, NULL, nb_nn_relu()) &&
           add(s, "fc3", nb_nn_linear(128, g->classes, true));
}

/* [1, H, W] → conv3x3(32)+ReLU+pool2 → conv3x3(64)+ReLU+pool2 → [64·(H/4)·(W/4)] → 128 → classes.
 * The padded convolutions keep H x W; each 2x2 pool floors it to half, so two give floor(H/4). */
static bool build_cnn(nb_module *s, const cli_geom *g) {
    nb_conv2d_opts same = {{1, 1}, {1, 1}, {1, 1}, 1};
    return add(s, "conv1", nb_nn_conv2d(1, 32, 3, 3, same, true)) && add(s, NULL, nb_nn_relu()) &&
           add(s, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))) &&
           add(s, "conv2", nb_nn_conv2d(32, 64, 3, 3, same, true)) && add(s, NULL, nb_nn_relu()) &&
           add(s, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))) && add(s, NULL, nb_nn_flatten(1, -1)) &&
           add(s, "fc1", nb_nn_linear(64 * (g->height / 4) * (g->width / 4), 128, true)) &&
           add(s, NULL, nb_nn_relu()) && add(s, "fc2", nb_nn_linear(128, g->classes, true));
}

bool cli_model_known(const char *name) { return !strcmp(name, "mlp") || !strcmp(name, "cnn"); }

int cli_model_fits(const char *cmd, const char *name, const cli_geom *g) {
    if (!strcmp(name, "cnn") && (g->height < 4 || g->width < 4))
        return cli_error(cmd, CLI_FAIL,
                         "the cnn needs images of at least 4x4 (two 2x2 poolings), the data set's are %lldx%lld; "
                         "use --model mlp",
                         (long long)g->height, (long long)g->width);
    return CLI_OK;
}

nb_module *cli_model_new(const char *name, const cli_geom *g) {
    if (!cli_model_known(name)) return NULL;
    nb_module *s = nb_nn_sequential();
    if (s && !(strcmp(name, "mlp") ? build_cnn(s, g) : build_mlp(s, g))) {
        nb_module_free(s);
        s = NULL;
    }
    return s;
}

/* ---- checkpoints ---- */

static bool has_tensor(nb_safetensors *h, const char *name) {
    for (int i = 0, n = nb_safetensors_count(h); i < n; i++)
        if (!strcmp(nb_safetensors_name(h, i), name)) return true;
    return false;
}

const char *cli_model_of_checkpoint(const char *cmd, nb_safetensors *h, const char *path) {
    if (has_tensor(h, "conv1.weight")) return "cnn";
    if (has_tensor(h, "fc1.weight")) return "mlp";
    cli_error(cmd, CLI_FAIL, "checkpoint %s holds no known model (no 'conv1.weight' for cnn or 'fc1.weight' for mlp)", path);
    return NULL;
}

int64_t cli_checkpoint_classes(const char *cmd, nb_safetensors *h, const char *model, const char *path) {
    const char *last = strcmp(model, "cnn") ? "fc3.weight" : "fc2.weight";
    nb_scope_begin();
    nb_tensor *w = has_tensor(h, last) ? nb_safetensors_get(h, last) : NULL;
    int64_t classes = w && nb_ndim(w) == 2 ? nb_shape(w)[0] : -1;
    nb_scope_end();
    nb_clear_error();
    if (classes < 1)
        cli_error(cmd, CLI_FAIL, "checkpoint %s: no 2-D tensor '%s' (the %s model's output layer)", path, last, model);
    return classes;
}

static void shape_str(const nb_tensor *t, char *buf, size_t len) {
    size_t k = (size_t)snprintf(buf, len, "[");
    for (int d = 0; d < nb_ndim(t) && k < len; d++)
        k += (size_t)snprintf(buf + k, len - k, d ? ", %lld" : "%lld", (long long)nb_shape(t)[d]);
    if (k < len) snprintf(buf + k, len - k, "]");
}

static bool same_shape(const nb_tensor *a, const nb_tensor *b) {
    if (nb_ndim(a) != nb_ndim(b)) return false;
    for (int d = 0; d < nb_ndim(a); d++)
        if (nb_shape(a)[d] != nb_shape(b)[d]) return false;
    return true;
}

/* Copy parameter i of m from h; CLI_OK or CLI_FAIL after one error line.  Runs inside a scope. */
static int load_one(const char *cmd, nb_module *m, int i, const char *model, nb_safetensors *h, const char *path) {
    const char *name = nb_module_param_name(m, i);
    if (!has_tensor(h, name))
        return cli_error(cmd, CLI_FAIL, "checkpoint %s has no tensor '%s', which the %s model needs", path, name, model);
    nb_tensor *p = nb_module_param(m, i), *t = nb_safetensors_get(h, name);
    if (!p || !t) return cli_nb_error(cmd, path);
    if (!same_shape(p, t)) {
        char have[160], want[160];
        shape_str(t, have, sizeof have);
        shape_str(p, want, sizeof want);
        return cli_error(cmd, CLI_FAIL, "checkpoint %s: tensor '%s' has shape %s but the %s model needs %s", path, name,
                         have, model, want);
    }
    return nb_copy_(p, t) == NB_OK ? CLI_OK : cli_nb_error(cmd, path);
}

int cli_load_params(const char *cmd, nb_module *m, const char *model, nb_safetensors *h, const char *path) {
    int n = nb_module_param_count(m), rc = CLI_OK;
    nb_scope_begin();
    nb_no_grad_begin();
    for (int i = 0; i < n && rc == CLI_OK; i++) rc = load_one(cmd, m, i, model, h, path);
    nb_no_grad_end();
    nb_scope_end();
    if (rc == CLI_OK && nb_safetensors_count(h) != n) /* strict, like torch's load_state_dict */
        for (int i = 0; i < nb_safetensors_count(h) && rc == CLI_OK; i++) {
            const char *name = nb_safetensors_name(h, i);
            nb_tensor *p = nb_module_param_named(m, name);
            nb_release(p);
            if (!p) rc = cli_error(cmd, CLI_FAIL, "checkpoint %s: unexpected tensor '%s' for the %s model", path, name, model);
        }
    nb_clear_error();
    return rc;
}

int cli_save_params(const char *cmd, nb_module *m, const char *path) {
    int n = nb_module_param_count(m);
    const char **names = calloc((size_t)n + 1, sizeof *names);
    nb_tensor **ts = calloc((size_t)n + 1, sizeof *ts);
    int rc = names && ts ? CLI_OK : cli_error(cmd, CLI_FAIL, "saving %s: out of memory", path);
    nb_scope_begin();
    for (int i = 0; i < n && rc == CLI_OK; i++) names[i] = nb_module_param_name(m, i);
    if (rc == CLI_OK && nb_module_params(m, ts, n) != n) rc = cli_nb_error(cmd, path);
    if (rc == CLI_OK && nb_safetensors_save(path, names, ts, n) != NB_OK) rc = cli_nb_error(cmd, "saving the checkpoint");
    nb_scope_end();
    free(names);
    free(ts);
    return rc;
}
