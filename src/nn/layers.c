/*
 * layers.c — the layers (N1): Linear, Conv2d, Embedding, LayerNorm,
 * Dropout, ReLU, Flatten, MaxPool2d, each a module with torch's default
 * initialization drawn from this thread's generator.
 */
#include "nn_internal.h"

#include <math.h>

/* ---- parameters: float32 leaves that require grad, owned by the module ---- */

/* Move t out of the caller's private scope and flag it as a parameter. */
static nb_tensor *as_param(nb_tensor *t) {
    t = nb__scope_take(t);
    if (t && nb_set_requires_grad(t, true) != NB_OK) {
        nb_release(t);
        t = NULL;
    }
    return t;
}

/* U(-bound, bound), as torch's init.uniform_ (and kaiming_uniform_ with a = √5, whose bound is 1/√fan_in). */
static nb_tensor *param_uniform(const int64_t *shape, int nd, double bound) {
    nb_scope_begin();
    nb_tensor *t = as_param(nb_sub(nb_mul(nb_rand(shape, nd, NB_F32), 2 * bound), bound));
    nb_scope_end();
    return t;
}

static nb_tensor *param_normal(const int64_t *shape, int nd) {
    nb_scope_begin();
    nb_tensor *t = as_param(nb_randn(shape, nd, NB_F32));
    nb_scope_end();
    return t;
}

static nb_tensor *param_full(const int64_t *shape, int nd, double value) {
    nb_scope_begin();
    nb_tensor *t = as_param(nb_full(shape, nd, value, NB_F32));
    nb_scope_end();
    return t;
}

/* m, or NULL (m freed) when m or one of its parameters failed to be created. */
static nb_module *checked(nb_module *m) {
    for (int i = 0; m && i < m->nparam; i++)
        if (!m->param[i]) {
            nb_module_free(m);
            return NULL;
        }
    return m;
}

static bool sizes_positive(const char *kind, int n, const int64_t *v) {
    for (int i = 0; i < n; i++)
        if (v[i] < 1) {
            nb__error_set(NB_ERR_ARG, "%s: sizes must be >= 1, got %lld", kind, (long long)v[i]);
            return false;
        }
    return true;
}

#define W_ (m->param[0])
#define B_ (m->nparam > 1 ? m->param[1] : NULL)

/* ---- Linear ---- */

static nb_tensor *linear_forward(nb_module *m, nb_tensor *x) { return nb_linear(x, W_, B_); }
static nb_tensor *linear_relu_forward(nb_module *m, nb_tensor *x) { return nb__linear_relu(x, W_, B_); }

nb_module *nb_nn_linear(int64_t in_features, int64_t out_features, bool bias) {
    if (!sizes_positive("Linear", 2, (int64_t[]){in_features, out_features})) return NULL;
    nb_module *m = nb__module_new("Linear", linear_forward);
    if (m) m->forward_relu = linear_relu_forward;
    double bound = 1 / sqrt((double)in_features);
    if (m) nb__module_add_param(m, "weight", param_uniform(NB_SHAPE(out_features, in_features), bound));
    if (m && bias) nb__module_add_param(m, "bias", param_uniform(NB_SHAPE(out_features), bound));
    return checked(m);
}

/* ---- Conv2d ---- */

static nb_tensor *conv2d_forward(nb_module *m, nb_tensor *x) { return nb_conv2d(x, W_, B_, m->cfg.conv); }
static nb_tensor *conv2d_relu_forward(nb_module *m, nb_tensor *x) { return nb__conv2d_relu(x, W_, B_, m->cfg.conv); }

nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh, int64_t kw, nb_conv2d_opts opts,
                        bool bias) {
    if (!sizes_positive("Conv2d", 4, (int64_t[]){in_channels, out_channels, kh, kw})) return NULL;
    if (opts.groups < 1 || in_channels % opts.groups || out_channels % opts.groups) {
        nb__error_set(NB_ERR_ARG, "Conv2d: groups = %lld must divide both %lld input and %lld output channels",
                      (long long)opts.groups, (long long)in_channels, (long long)out_channels);
        return NULL;
    }
    nb_module *m = nb__module_new("Conv2d", conv2d_forward);
    if (!m) return NULL;
    m->forward_relu = conv2d_relu_forward;
    m->cfg.conv = opts;
    int64_t cin = in_channels / opts.groups;
    double bound = 1 / sqrt((double)(cin * kh * kw));
    nb__module_add_param(m, "weight", param_uniform(NB_SHAPE(out_channels, cin, kh, kw), bound));
    if (bias) nb__module_add_param(m, "bias", param_uniform(NB_SHAPE(out_channels), bound));
    return checked(m);
}

/* ---- Embedding ---- */

static nb_tensor *embedding_forward(nb_module *m, nb_tensor *x) { return nb_embedding(W_, x); }

nb_module *nb_nn_embedding(int64_t num, int64_t dim) {
    if (!sizes_positive("Embedding", 2, (int64_t[]){num, dim})) return NULL;
    nb_module *m = nb__module_new("Embedding", embedding_forward);
    if (m) nb__module_add_param(m, "weight", param_normal(NB_SHAPE(num, dim)));
    return checked(m);
}

/* ---- LayerNorm ---- */

static nb_tensor *layer_norm_forward(nb_module *m, nb_tensor *x) {
    return nb_layer_norm(x, m->cfg.norm.nnorm, m->nparam ? W_ : NULL, B_, m->cfg.norm.eps);
}

nb_module *nb_nn_layer_norm(const int64_t *shape, int ndim, double eps, bool affine) {
    if (ndim < 1 || ndim > NB_MAX_DIMS || !shape) {
        nb__error_set(NB_ERR_ARG, "LayerNorm: normalized shape needs 1 to %d sizes, got %d", NB_MAX_DIMS, ndim);
        return NULL;
    }
    if (!sizes_positive("LayerNorm", ndim, shape)) return NULL;
    if (!(eps >= 0)) {
        nb__error_set(NB_ERR_ARG, "LayerNorm: eps = %g must be >= 0", eps);
        return NULL;
    }
    nb_module *m = nb__module_new("LayerNorm", layer_norm_forward);
    if (!m) return NULL;
    m->cfg.norm.nnorm = ndim;
    m->cfg.norm.eps = eps;
    if (affine) {
        nb__module_add_param(m, "weight", param_full(shape, ndim, 1));
        nb__module_add_param(m, "bias", param_full(shape, ndim, 0));
    }
    return checked(m);
}

/* ---- parameter-free steps ---- */

static nb_tensor *dropout_forward(nb_module *m, nb_tensor *x) { return nb_dropout(x, m->cfg.p, m->training); }

nb_module *nb_nn_dropout(double p) {
    if (!(p >= 0 && p < 1)) {
        nb__error_set(NB_ERR_ARG, "Dropout: p = %g outside [0, 1)", p);
        return NULL;
    }
    nb_module *m = nb__module_new("Dropout", dropout_forward);
    if (m) m->cfg.p = p;
    return m;
}

nb_tensor *nb__relu_forward(nb_module *m, nb_tensor *x) {
    (void)m;
    return nb_relu(x);
}

nb_module *nb_nn_relu(void) { return nb__module_new("ReLU", nb__relu_forward); }

static nb_tensor *flatten_forward(nb_module *m, nb_tensor *x) {
    return nb_flatten(x, m->cfg.flat.start, m->cfg.flat.end);
}

nb_module *nb_nn_flatten(int start, int end) {
    nb_module *m = nb__module_new("Flatten", flatten_forward);
    if (m) {
        m->cfg.flat.start = start;
        m->cfg.flat.end = end;
    }
    return m;
}

static nb_tensor *max_pool_forward(nb_module *m, nb_tensor *x) { return nb_max_pool2d(x, m->cfg.pool); }

nb_module *nb_nn_max_pool2d(nb_window2d w) {
    nb_module *m = nb__module_new("MaxPool2d", max_pool_forward);
    if (m) m->cfg.pool = w;
    return m;
}
