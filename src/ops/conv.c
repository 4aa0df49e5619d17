/*
 * conv.c — convolution and pooling (O8): the sliding-window primitives that
 * run on the backend's `window` kernel (unfold, fold, max_pool2d,
 * max_unpool2d) and the composites built on them (conv2d as unfold + a
 * batched matmul per group, or as the image-by-image CONVOLUTION op where
 * the operands fit it (convolution.c), conv1d, avg_pool2d).  Every public
 * function takes batched [N, C, H, W] or unbatched [C, H, W] images.
 */
#include "../backend/backend.h"
#include "conv.h"

#define WIN_LIMIT ((int64_t)1 << 30)
#define WIN_FMT "kernel (%lld, %lld) stride (%lld, %lld) padding (%lld, %lld) dilation (%lld, %lld)"
#define WIN_ARGS(w)                                                                              \
    (long long)(w)->kernel[0], (long long)(w)->kernel[1], (long long)(w)->stride[0],             \
        (long long)(w)->stride[1], (long long)(w)->padding[0], (long long)(w)->padding[1],       \
        (long long)(w)->dilation[0], (long long)(w)->dilation[1]

/* ---- validation ---- */

static bool window_valid(const char *op, const nb_window2d *w) {
    for (int k = 0; k < 2; k++) {
        bool ok = w->kernel[k] >= 1 && w->stride[k] >= 1 && w->dilation[k] >= 1 && w->padding[k] >= 0 &&
                  w->kernel[k] <= WIN_LIMIT && w->stride[k] <= WIN_LIMIT && w->dilation[k] <= WIN_LIMIT &&
                  w->padding[k] <= WIN_LIMIT;
        if (!ok) {
            nb__error(NB_ERR_ARG, "%s: invalid window " WIN_FMT ": kernel, stride and dilation must be in [1, 2^30], padding in [0, 2^30]",
                      op, WIN_ARGS(w));
            return false;
        }
    }
    return true;
}

static bool float_input(const char *op, const nb_tensor *x) {
    if (nb_dtype_is_float(x->dtype)) return true;
    nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s", op, nb_dtype_name(x->dtype));
    return false;
}

static bool rank_is(const char *op, const nb_tensor *x, int ndim, const char *layout) {
    if (x->ndim == ndim) return true;
    nb__error(NB_ERR_SHAPE, "%s: expected a %d-D %s input, got %s", op, ndim, layout, NB_SHAPE_STR(x));
    return false;
}

/* Output size of window w over the trailing [H, W] of x into out[2]; NB_ERR_SHAPE when empty. */
static bool window_out(const char *op, const int64_t *hw, const nb_window2d *w, int64_t *out) {
    for (int k = 0; k < 2; k++) {
        if (nb__dim_sym(hw[k])) {
            nb__error(NB_ERR_SHAPE, "%s: the %s of the input plane is the symbolic dim %s; sliding windows need a "
                      "concrete height and width (only the batch and channel dims may be symbolic)", op,
                      k ? "width" : "height", nb__dim_str((char[64]){0}, hw[k]));
            return false;
        }
        out[k] = nb__window_out(hw[k], w->kernel[k], w->stride[k], w->padding[k], w->dilation[k]);
        if (out[k] < 1) {
            nb__error(NB_ERR_SHAPE, "%s: input plane %lldx%lld is smaller than the window " WIN_FMT, op,
                      (long long)hw[0], (long long)hw[1], WIN_ARGS(w));
            return false;
        }
    }
    return true;
}

/* Pooling padding limit (torch): padding <= span / 2 with span the (dilated) kernel extent. */
static bool pool_padding_ok(const char *op, const nb_window2d *w) {
    for (int k = 0; k < 2; k++)
        if (w->padding[k] > (w->dilation[k] * (w->kernel[k] - 1) + 1) / 2) {
            nb__error(NB_ERR_ARG, "%s: padding must be at most half the effective kernel, got " WIN_FMT, op,
                      WIN_ARGS(w));
            return false;
        }
    return true;
}

/* True when each of the `out` windows along one axis has a tap inside [0, in) (only dilation leaves gaps). */
static bool taps_cover(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil, int64_t out) {
    for (int64_t i = 0; dil > 1 && i < out; i++) {
        int64_t start = i * stride - pad, p = start < 0 ? (-start + dil - 1) / dil : 0;
        if (p >= k || start + p * dil >= in) return false;
    }
    return true;
}

/* a * b * c into *out; false with NB_ERR_OVERFLOW naming op.  a may be a symbolic dim
 * (channels while tracing; b, c are window sizes), multiplied by the dim helpers. */
static bool mul3(const char *op, int64_t a, int64_t b, int64_t c, int64_t *out) {
    if (nb__dim_sym(a)) return (*out = nb__dim_mul(op, a, b * c)) != -1;
    if (__builtin_mul_overflow(a, b, out) || __builtin_mul_overflow(*out, c, out)) {
        nb__error(NB_ERR_OVERFLOW, "%s: size %lld x %lld x %lld overflows int64", op, (long long)a, (long long)b,
                  (long long)c);
        return false;
    }
    return true;
}

/* ---- the window primitives: one kind (WINDOW), infer + execute ----
 * attrs: i[0..7] the geometry (nb__window_to_attrs; UNFOLD, FOLD, MAX_POOL2D),
 * i[8], i[9] the output plane (FOLD, MAX_UNPOOL2D); MAX_POOL2D: sub = 1 when only the
 * values are wanted (no indices output: eager, untracked, not asked for).
 * Inputs: x; MAX_UNPOOL2D also the indices. */

nb_tensor *nb__dense(nb_tensor *x) {
    if (nb_is_contiguous(x)) return nb_retain(x);
    nb_tensor *c = nb__tensor_new(x->shape, x->ndim, x->dtype, x->storage->device);
    if (c && nb__backend_of(x)->copy(c, x) != NB_OK) {
        nb_release(c);
        c = NULL;
    }
    return c;
}

/* The shared backend of in[0..n), which must have the window kernels. */
static bool window_backend(const char *op, nb_tensor *const *in, int n) {
    const nb_backend *be = nb__backend_common(op, in, n);
    if (!be) return false;
    if (be->window) return true;
    nb__error(NB_ERR_UNSUPPORTED, "%s: backend '%s' has no sliding-window kernels", op, be->name);
    return false;
}

static bool infer_unfold(nb_tensor *x, const nb_window2d *w, nb_meta *m) {
    const char *op = "unfold";
    int64_t o[2], rows, cols;
    if (!float_input(op, x) || !rank_is(op, x, 4, "[N, C, H, W]") || !window_valid(op, w) ||
        !window_out(op, x->shape + 2, w, o) || !mul3(op, x->shape[1], w->kernel[0], w->kernel[1], &rows) ||
        !mul3(op, o[0], o[1], 1, &cols) || !window_backend(op, &x, 1))
        return false;
    *m = (nb_meta){.dtype = x->dtype, .ndim = 3, .shape = {x->shape[0], rows, cols}};
    return true;
}

static bool infer_fold(nb_tensor *cols, int64_t out_h, int64_t out_w, const nb_window2d *w, nb_meta *m) {
    const char *op = "fold";
    int64_t o[2], kk, l;
    if (!float_input(op, cols) || !rank_is(op, cols, 3, "[N, C*KH*KW, L]") || !window_valid(op, w))
        return false;
    if (out_h < 1 || out_w < 1 || out_h > WIN_LIMIT || out_w > WIN_LIMIT) {
        nb__error(NB_ERR_ARG, "fold: output size %lldx%lld must be in [1, 2^30]", (long long)out_h, (long long)out_w);
        return false;
    }
    if (!window_out(op, (int64_t[]){out_h, out_w}, w, o) || !mul3(op, w->kernel[0], w->kernel[1], 1, &kk) ||
        !mul3(op, o[0], o[1], 1, &l))
        return false;
    int64_t c = cols->shape[1];
    bool sym = nb__dim_sym(c);
    if ((sym ? (c = nb__dim_div(op, c, kk)) == -1 : c % kk != 0) || cols->shape[2] != l) {
        nb__error(NB_ERR_SHAPE, "fold: input %s does not match [N, C*%lld, %lld] for output %lldx%lld and window " WIN_FMT,
                  NB_SHAPE_STR(cols), (long long)kk, (long long)l, (long long)out_h, (long long)out_w, WIN_ARGS(w));
        return false;
    }
    if (!window_backend(op, &cols, 1)) return false;
    *m = (nb_meta){.dtype = cols->dtype, .ndim = 4, .shape = {cols->shape[0], sym ? c : c / kk, out_h, out_w}};
    return true;
}

static bool infer_max_pool(nb_tensor *x, const nb_window2d *w, nb_meta *m) {
    const char *op = "max_pool2d";
    int64_t o[2];
    if (!float_input(op, x) || !rank_is(op, x, 4, "[N, C, H, W]") || !window_valid(op, w) ||
        !pool_padding_ok(op, w) || !window_out(op, x->shape + 2, w, o))
        return false;
    for (int k = 0; k < 2; k++)
        if (!taps_cover(x->shape[2 + k], w->kernel[k], w->stride[k], w->padding[k], w->dilation[k], o[k])) {
            nb__error(NB_ERR_ARG, "max_pool2d: a window of " WIN_FMT " over %s lies entirely in the padding",
                      WIN_ARGS(w), NB_SHAPE_STR(x));
            return false;
        }
    if (!window_backend(op, &x, 1)) return false;
    m[0] = (nb_meta){.dtype = x->dtype, .ndim = 4, .shape = {x->shape[0], x->shape[1], o[0], o[1]}};
    m[1] = m[0];
    m[1].dtype = NB_I64;
    return true;
}

/* indices: integer dtype, host memory (their values are checked at run time, in execute) */
static bool infer_max_unpool(nb_tensor *const *in, int64_t out_h, int64_t out_w, nb_meta *m) {
    const char *op = "max_unpool2d";
    nb_tensor *x = in[0], *idx = in[1];
    if (!float_input(op, x) || !rank_is(op, x, 4, "[N, C, h, w]")) return false;
    if (!nb__same_shape(x, idx)) {
        nb__error(NB_ERR_SHAPE, "max_unpool2d: indices %s must have the input's shape %s", NB_SHAPE_STR(idx),
                  NB_SHAPE_STR(x));
        return false;
    }
    if (out_h < 0 || out_w < 0 || out_h > WIN_LIMIT || out_w > WIN_LIMIT) {
        nb__error(NB_ERR_ARG, "max_unpool2d: output size %lldx%lld must be in [0, 2^30]", (long long)out_h,
                  (long long)out_w);
        return false;
    }
    if (nb_dtype_is_float(idx->dtype) || idx->dtype == NB_BOOL) {
        nb__error(NB_ERR_DTYPE, "%s: indices must have an integer dtype, got %s", op, nb_dtype_name(idx->dtype));
        return false;
    }
    if (!nb__is_host(idx->storage->device)) {
        nb__error(NB_ERR_DEVICE, "%s: indices must be in host memory", op);
        return false;
    }
    if (!window_backend(op, in, 2)) return false;
    *m = (nb_meta){.dtype = x->dtype, .ndim = 4, .shape = {x->shape[0], x->shape[1], out_h, out_w}};
    return true;
}

static int infer_window(nb_op op, nb_tensor *const *in, int n, nb_attrs *at, nb_meta *m) {
    (void)n;
    nb_window2d w = nb__window_from_attrs(at);
    switch (op) {
    case NB_OP_UNFOLD: return infer_unfold(in[0], &w, m) ? 1 : -1;
    case NB_OP_FOLD: return infer_fold(in[0], at->i[8], at->i[9], &w, m) ? 1 : -1;
    case NB_OP_MAX_POOL2D: return infer_max_pool(in[0], &w, m) ? (at->sub == 1 ? 1 : 2) : -1;
    default: return infer_max_unpool(in, at->i[8], at->i[9], m) ? 1 : -1;
    }
}

/* Run the backend's window kernel: x (made contiguous) into out[0] (and the indices
 * out[1] of MAX_POOL2D when nout is 2; MAX_UNPOOL2D reads them, checked, from in[1]). */
static nb_status exec_window(nb_op op, nb_tensor *const *in, int n, const nb_attrs *at, const nb_meta *m, int nout,
                             nb_tensor **out) {
    (void)n;
    nb_tensor *x = in[0];
    nb_device dev = x->storage->device;
    nb_window2d w = nb__window_from_attrs(at);
    nb_tensor *idx = NULL;
    if (op == NB_OP_MAX_UNPOOL2D) {
        if (!(idx = nb__index_i64("max_unpool2d", in[1]))) return nb_last_status(); /* the kernel checks the range */
    } else if (nout == 2 && !(idx = nb__meta_new(&m[1], dev))) {
        return nb_last_status();
    }
    nb_tensor *xc = nb__dense(x);
    nb_tensor *r = xc ? nb__meta_new(&m[0], dev) : NULL;
    if (r && nb__backend_of(x)->window(op, r, idx, xc, op == NB_OP_MAX_UNPOOL2D ? NULL : &w) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    nb_release(xc);
    if (!r || op == NB_OP_MAX_UNPOOL2D) nb_release(idx);
    out[0] = r;
    if (r && nout == 2) out[1] = idx;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_window = {infer_window, exec_window};

/* Apply a window primitive to in[0..n) (unscoped results, nout written; -1 on error). */
static int window_apply(nb_op op, nb_tensor *const *in, int n, const nb_window2d *w, int64_t out_h, int64_t out_w,
                        int sub, nb_tensor **out) {
    nb_attrs a = {.sub = sub};
    if (w) nb__window_to_attrs(&a, w);
    a.i[8] = out_h;
    a.i[9] = out_w;
    a.ni = 10;
    return nb__apply_n(op, in, n, &a, out);
}

static nb_tensor *window_apply1(nb_op op, nb_tensor *const *in, int n, const nb_window2d *w, int64_t out_h,
                                int64_t out_w) {
    nb_tensor *r;
    return window_apply(op, in, n, w, out_h, out_w, 0, &r) < 0 ? NULL : r;
}

/* ---- public front-ends: accept [C, H, W] by adding (then removing) a batch axis ---- */

/* x as a batched tensor: x itself for rank `batched`, x with a leading axis for rank batched-1. */
static nb_tensor *batch_view(const char *op, nb_tensor *x, int batched, const char *layout) {
    if (x->ndim == batched) return x;
    if (x->ndim == batched - 1) return nb_unsqueeze(x, 0);
    nb__error(NB_ERR_SHAPE, "%s: expected a %d-D %s or %d-D unbatched input, got %s", op, batched, layout,
              batched - 1, NB_SHAPE_STR(x));
    return NULL;
}

/* r without the batch axis batch_view added (x's rank tells). */
static nb_tensor *unbatch(nb_tensor *r, const nb_tensor *x, int batched) {
    return r && x->ndim == batched - 1 ? nb_squeeze(r, 0) : r;
}

nb_tensor *nb_unfold(nb_tensor *x, nb_window2d w) {
    NB_CHECK_ARG("unfold", x);
    NB_COMPOSITE_BEGIN();
    nb_tensor *xb = batch_view("unfold", x, 4, "[N, C, H, W]");
    nb_tensor *r = xb ? nb__own(window_apply1(NB_OP_UNFOLD, &xb, 1, &w, 0, 0)) : NULL;
    NB_COMPOSITE_RETURN(unbatch(r, x, 4));
}

nb_tensor *nb_fold(nb_tensor *cols, int64_t out_h, int64_t out_w, nb_window2d w) {
    NB_CHECK_ARG("fold", cols);
    NB_COMPOSITE_BEGIN();
    nb_tensor *cb = batch_view("fold", cols, 3, "[N, C*KH*KW, L]");
    nb_tensor *r = cb ? nb__own(window_apply1(NB_OP_FOLD, &cb, 1, &w, out_h, out_w)) : NULL;
    NB_COMPOSITE_RETURN(unbatch(r, cols, 3));
}

/* Max pooling of a batched or unbatched x; indices (may be NULL) receives the scoped indices. */
static nb_tensor *max_pool(nb_tensor *x, const nb_window2d *w, nb_tensor **indices) {
    NB_CHECK_ARG("max_pool2d", x);
    nb_scope_begin();
    nb_tensor *o[2] = {NULL, NULL}, *xb = batch_view("max_pool2d", x, 4, "[N, C, H, W]");
    /* the indices are an output when asked for, or needed by the derivative rule or a trace */
    bool values_only = !indices && !nb__should_record(&x, 1) && !nb__is_symbolic(x);
    if (xb && window_apply(NB_OP_MAX_POOL2D, &xb, 1, w, 0, 0, values_only, o) == 2 && !indices) nb_release(o[1]);
    nb_tensor *r = nb__own(o[0]), *idx = indices ? nb__own(o[1]) : NULL;
    r = nb__scope_take(unbatch(r, x, 4));
    idx = nb__scope_take(unbatch(idx, x, 4));
    nb_scope_end();
    if (!r || (indices && !idx)) {
        nb_release(r);
        nb_release(idx);
        return NULL;
    }
    if (indices && !(*indices = nb__own(idx))) {
        nb_release(r);
        return NULL;
    }
    r = nb__own(r);
    if (!r && indices) *indices = NULL; /* already the scope's: released with it */
    return r;
}

nb_tensor *nb_max_pool2d_with_indices(nb_tensor *x, nb_window2d w, nb_tensor **indices) {
    if (!indices) {
        nb__error(NB_ERR_NULL, "max_pool2d: argument 'indices' is NULL");
        return NULL;
    }
    *indices = NULL;
    return max_pool(x, &w, indices);
}

nb_tensor *nb_max_pool2d(nb_tensor *x, nb_window2d w) { return max_pool(x, &w, NULL); }

nb_tensor *nb_max_unpool2d(nb_tensor *x, nb_tensor *indices, int64_t out_h, int64_t out_w) {
    NB_CHECK_ARG("max_unpool2d", x);
    NB_CHECK_ARG("max_unpool2d", indices);
    NB_COMPOSITE_BEGIN();
    nb_tensor *xb = batch_view("max_unpool2d", x, 4, "[N, C, h, w]");
    nb_tensor *ib = xb ? batch_view("max_unpool2d", indices, 4, "[N, C, h, w]") : NULL;
    nb_tensor *r = ib ? nb__own(window_apply1(NB_OP_MAX_UNPOOL2D, (nb_tensor *[]){xb, ib}, 2, NULL, out_h, out_w)) : NULL;
    NB_COMPOSITE_RETURN(unbatch(r, x, 4));
}

nb_tensor *nb_avg_pool2d(nb_tensor *x, nb_window2d w, bool count_include_pad) {
    const char *op = "avg_pool2d";
    NB_CHECK_ARG(op, x);
    if (!window_valid(op, &w)) return NULL;
    for (int k = 0; k < 2; k++)
        if (w.padding[k] > w.kernel[k] / 2) {
            nb__error(NB_ERR_ARG, "avg_pool2d: padding must be at most half the kernel, got " WIN_FMT, WIN_ARGS(&w));
            return NULL;
        }
    NB_COMPOSITE_BEGIN();
    nb_tensor *xb = batch_view(op, x, 4, "[N, C, H, W]"), *r = NULL;
    int64_t o[2];
    if (xb && window_out(op, xb->shape + 2, &w, o)) {
        const int64_t *s = xb->shape;
        nb_tensor *cols = nb_reshape(nb_unfold(xb, w), NB_SHAPE(s[0], s[1], w.kernel[0] * w.kernel[1], o[0] * o[1]));
        nb_tensor *sum = nb_sum(cols, NB_AXES(2), false);
        if (count_include_pad) r = nb_div(sum, (double)(w.kernel[0] * w.kernel[1]));
        else { /* taps inside x per window: unfold a plane of ones */
            nb_tensor *ones = nb__own(nb__full_on(NB_SHAPE(1, 1, s[2], s[3]), 1, xb->dtype, xb->storage->device));
            r = nb_div(sum, nb_sum(nb_unfold(ones, w), NB_AXES(1), true));
        }
        r = nb_reshape(r, NB_SHAPE(s[0], s[1], o[0], o[1]));
    }
    NB_COMPOSITE_RETURN(unbatch(r, x, 4));
}

/* ---- convolution ---- */

/* The options with the weight's kernel size kh x kw (so messages show the real window). */
static bool conv_opts_valid(const char *op, const nb_conv2d_opts *o, int64_t kh, int64_t kw) {
    nb_window2d w = {{kh, kw}, {o->stride[0], o->stride[1]}, {o->padding[0], o->padding[1]},
                     {o->dilation[0], o->dilation[1]}};
    if (!window_valid(op, &w)) return false;
    if (o->groups < 1) {
        nb__error(NB_ERR_ARG, "%s: groups must be >= 1, got %lld", op, (long long)o->groups);
        return false;
    }
    return true;
}

/* x [N, C, H, W], weight [O, C/g, KH, KW], bias [O] or NULL: checks shared by conv2d and conv1d. */
static bool conv_args_valid(const char *op, const nb_tensor *x, const nb_tensor *w, const nb_tensor *b,
                            const nb_conv2d_opts *o) {
    if (!conv_opts_valid(op, o, w->shape[2], w->shape[3])) return false;
    if (!float_input(op, x)) return false;
    if (w->dtype != x->dtype || (b && b->dtype != x->dtype)) {
        nb__error(NB_ERR_DTYPE, "%s: input %s, weight %s and bias %s must share one dtype", op,
                  nb_dtype_name(x->dtype), nb_dtype_name(w->dtype), b ? nb_dtype_name(b->dtype) : "(none)");
        return false;
    }
    int64_t g = o->groups, oc = w->shape[0];
    int64_t cin;
    if (__builtin_mul_overflow(w->shape[1], g, &cin) || cin != x->shape[1] || oc % g != 0 || w->shape[2] < 1 || w->shape[3] < 1) {
        nb__error(NB_ERR_SHAPE, "%s: input %s and weight %s do not match with %lld groups (need weight [O, C/groups, KH, KW], O divisible by groups)",
                  op, NB_SHAPE_STR(x), NB_SHAPE_STR(w), (long long)g);
        return false;
    }
    if (b && (b->ndim != 1 || b->shape[0] != oc)) {
        nb__error(NB_ERR_SHAPE, "%s: bias %s must be [%lld]", op, NB_SHAPE_STR(b), (long long)oc);
        return false;
    }
    return true;
}

/* The convolution proper on a batched x, relu after where asked (public ops; runs inside the
 * caller's composite scope). */
static nb_tensor *conv2d_batched(nb_tensor *x, nb_tensor *w, nb_tensor *b, const nb_conv2d_opts *o, bool relu) {
    const int64_t *xs = x->shape, *ws = w->shape;
    int64_t g = o->groups, kdim = nb__dims_prod("conv2d", ws + 1, 3), og = nb__dim_div("conv2d", ws[0], g);
    if (kdim == -1 || og == -1) return NULL; /* (a symbolic C or O: products and quotients of dims) */
    nb_window2d win = {{ws[2], ws[3]}, {o->stride[0], o->stride[1]}, {o->padding[0], o->padding[1]},
                       {o->dilation[0], o->dilation[1]}};
    int64_t out[2];
    if (!window_out("conv2d", xs + 2, &win, out)) return NULL;
    if (nb__convolution_fits(x, w, b)) return nb__convolution(x, w, b, &win, g, relu); /* the same bits, image by image */
    nb_tensor *cols = nb__window_pointwise(&win) ? nb_reshape(x, NB_SHAPE(xs[0], xs[1], xs[2] * xs[3])) : nb_unfold(x, win);
    cols = nb_reshape(cols, NB_SHAPE(xs[0], g, kdim, out[0] * out[1]));
    nb_tensor *wg = nb_reshape(w, NB_SHAPE(g, og, kdim));
    /* [N, g, O/g, L]; the bias, one per output row, added (then relu) as the product's tiles are stored */
    nb_tensor *y = b ? nb__addmm_act(nb_reshape(b, NB_SHAPE(g, og, 1)), wg, cols, relu) : nb_matmul(wg, cols);
    if (relu && !b) y = nb_relu(y);
    return nb_reshape(y, NB_SHAPE(xs[0], ws[0], out[0], out[1]));
}

/* nb_conv2d, then relu where asked (nb__conv2d_relu). */
static nb_tensor *conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_opts opts, bool relu) {
    const char *op = "conv2d";
    NB_CHECK_ARG(op, x);
    NB_CHECK_ARG(op, weight);
    if (!rank_is(op, weight, 4, "[O, C/groups, KH, KW] weight")) return NULL;
    NB_COMPOSITE_BEGIN();
    nb_tensor *xb = batch_view(op, x, 4, "[N, C, H, W]"), *r = NULL;
    if (xb && conv_args_valid(op, xb, weight, bias, &opts)) r = conv2d_batched(xb, weight, bias, &opts, relu);
    NB_COMPOSITE_RETURN(unbatch(r, x, 4));
}

nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_opts opts) {
    return conv2d(x, weight, bias, opts, false);
}

nb_tensor *nb__conv2d_relu(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_opts opts) {
    return conv2d(x, weight, bias, opts, true);
}

nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, int64_t stride, int64_t padding,
                     int64_t dilation, int64_t groups) {
    const char *op = "conv1d";
    NB_CHECK_ARG(op, x);
    NB_CHECK_ARG(op, weight);
    if (!rank_is(op, weight, 3, "[O, C/groups, K] weight")) return NULL;
    nb_conv2d_opts o = {{1, stride}, {0, padding}, {1, dilation}, groups};
    NB_COMPOSITE_BEGIN();
    nb_tensor *xb = batch_view(op, x, 3, "[N, C, L]"), *r = NULL;
    nb_tensor *x4 = xb ? nb_unsqueeze(xb, 2) : NULL, *w4 = nb_unsqueeze(weight, 2);
    if (x4 && w4 && conv_args_valid(op, x4, w4, bias, &o)) r = nb_squeeze(conv2d_batched(x4, w4, bias, &o, false), 2);
    NB_COMPOSITE_RETURN(unbatch(r, x, 3));
}
