/*
 * ref_backend.c — the plain reference backend: naive loops over a
 * multi-index, every element loaded as double, double accumulation, one
 * thread.  It is the oracle the tests compare the CPU backend against.
 */
#include "ref_attention.h"
#include "ref_quant.h"
#include "ref_linalg.h"
#include "../../ops/op_eval.h"

#include <stdlib.h>
#include <string.h>

/* Advance a row-major multi-index over shape; false when it wraps around. */
static bool next_index(int64_t *idx, const int64_t *shape, int ndim) {
    for (int i = ndim - 1; i >= 0; i--) {
        if (++idx[i] < shape[i]) return true;
        idx[i] = 0;
    }
    return false;
}

static char *at(const nb_tensor *t, const int64_t *idx) {
    int64_t off = t->offset;
    for (int i = 0; i < t->ndim; i++) off += idx[i] * t->stride[i];
    return (char *)t->storage->data + off * (int64_t)nb_dtype_size(t->dtype);
}

static double get(const nb_tensor *t, const int64_t *idx) { return nb__load(at(t, idx), t->dtype); }
static void put(nb_tensor *t, const int64_t *idx, double v) { nb__store(at(t, idx), t->dtype, v); }

#define FOR_EACH(t, idx)                                                     \
    int64_t idx[NB_MAX_DIMS] = {0};                                          \
    if (nb__numel(t) > 0)                                                    \
        for (bool more_ = true; more_; more_ = next_index(idx, (t)->shape, (t)->ndim))

static nb_status ref_copy(nb_tensor *dst, const nb_tensor *src) {
    size_t es = nb_dtype_size(dst->dtype);
    if (dst->dtype == src->dtype) { /* bit-exact: no trip through double */
        FOR_EACH(dst, i) memcpy(at(dst, i), at(src, i), es);
    } else {
        FOR_EACH(dst, i) nb__convert(at(dst, i), dst->dtype, at(src, i), src->dtype);
    }
    return NB_OK;
}

static int64_t geti(const nb_tensor *t, const int64_t *idx) { return nb__load_i64(at(t, idx), t->dtype); }
static void puti(nb_tensor *t, const int64_t *idx, int64_t v) { nb__store_i64(at(t, idx), t->dtype, v); }

static nb_status ref_unary(nb_op op, nb_tensor *out, const nb_tensor *x, double p0, double p1) {
    if (nb__int_path(op, x->dtype)) {
        FOR_EACH(out, i) puti(out, i, nb__eval_unary_i64(op, geti(x, i)));
    } else {
        FOR_EACH(out, i) put(out, i, nb__eval_unary(op, get(x, i), p0, p1));
    }
    return NB_OK;
}

static nb_status ref_binary(nb_op op, nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    if (nb__int_path(op, a->dtype)) {
        FOR_EACH(out, i) puti(out, i, nb__eval_binary_i64(op, geti(a, i), geti(b, i)));
    } else {
        FOR_EACH(out, i) put(out, i, nb__eval_binary(op, get(a, i), get(b, i)));
    }
    return NB_OK;
}

static nb_status ref_where(nb_tensor *out, const nb_tensor *c, const nb_tensor *a, const nb_tensor *b) {
    size_t es = nb_dtype_size(out->dtype); /* a, b arrive in out's dtype: a bit-exact selection */
    FOR_EACH(out, i) memcpy(at(out, i), at(get(c, i) != 0 ? a : b, i), es);
    return NB_OK;
}

static nb_status ref_reduce(nb_op op, nb_tensor *out, const nb_tensor *x, const bool *mask) {
    int64_t sub[NB_MAX_DIMS]; /* extent of the reduced sub-space */
    for (int d = 0; d < x->ndim; d++) sub[d] = mask[d] ? x->shape[d] : 1;
    bool exact = nb__int_path(op, x->dtype), arg = nb__ops[op].kind == NB_KIND_ARGREDUCE;
    FOR_EACH(out, o) {
        double acc = arg ? 0 : nb__ident_f64(op);
        int64_t iacc = exact ? nb__ident_i64(op) : 0;
        int64_t best = 0, count = 0;
        int64_t r[NB_MAX_DIMS] = {0}, xi[NB_MAX_DIMS];
        bool any = true;
        for (int d = 0; d < x->ndim; d++) any = any && sub[d] > 0;
        for (bool more = any; more; more = next_index(r, sub, x->ndim), count++) {
            for (int d = 0; d < x->ndim; d++) xi[d] = mask[d] ? r[d] : o[d];
            if (exact) {
                iacc = nb__eval_step_i64(op, iacc, geti(x, xi));
                continue;
            }
            double v = get(x, xi);
            if (!arg) acc = nb__eval_step(op, acc, v);
            else if (count == 0 || (acc == acc && ((op == NB_OP_ARGMAX ? v > acc : v < acc) || v != v))) {
                acc = v;
                best = count;
            }
        }
        if (exact) puti(out, o, iacc);
        else put(out, o, arg ? (double)best : acc);
    }
    return NB_OK;
}

static nb_status ref_scan(nb_op op, nb_tensor *out, const nb_tensor *x, int axis) {
    FOR_EACH(out, i) {
        if (i[axis] != 0) continue;
        int64_t j[NB_MAX_DIMS];
        memcpy(j, i, sizeof j);
        bool exact = nb__int_path(op, x->dtype);
        double acc = nb__ident_f64(op);
        int64_t iacc = exact ? nb__ident_i64(op) : 0;
        for (j[axis] = 0; j[axis] < x->shape[axis]; j[axis]++) {
            if (exact) {
                iacc = nb__eval_step_i64(op, iacc, geti(x, j));
                puti(out, j, iacc);
                continue;
            }
            double v = get(x, j);
            acc = nb__eval_step(op, acc, v);
            put(out, j, acc);
        }
    }
    return NB_OK;
}

static nb_status ref_matmul(nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    int nd = out->ndim;
    int64_t k = a->shape[nd - 1];
    FOR_EACH(out, i) {
        int64_t ia[NB_MAX_DIMS], ib[NB_MAX_DIMS];
        memcpy(ia, i, sizeof ia);
        memcpy(ib, i, sizeof ib);
        double acc = 0;
        for (int64_t p = 0; p < k; p++) {
            ia[nd - 1] = p;
            ib[nd - 2] = p;
            acc += get(a, ia) * get(b, ib);
        }
        put(out, i, acc);
    }
    return NB_OK;
}

static nb_status ref_gather(nb_tensor *out, const nb_tensor *x, int axis, const nb_tensor *index) {
    FOR_EACH(out, i) {
        int64_t j[NB_MAX_DIMS];
        memcpy(j, i, sizeof j);
        j[axis] = (int64_t)get(index, i);
        put(out, i, get(x, j));
    }
    return NB_OK;
}

static nb_status ref_scatter_add(nb_tensor *out, int axis, const nb_tensor *index, const nb_tensor *src) {
    FOR_EACH(src, i) {
        int64_t j[NB_MAX_DIMS];
        memcpy(j, i, sizeof j);
        j[axis] = (int64_t)get(index, i);
        put(out, j, get(out, j) + get(src, i));
    }
    return NB_OK;
}

/* ---- sliding windows: x and out are contiguous (backend.h) ---- */

static double load_at(const nb_tensor *t, int64_t i) {
    return nb__load(nb__ptr(t) + i * (int64_t)nb_dtype_size(t->dtype), t->dtype);
}
static void store_at(nb_tensor *t, int64_t i, double v) {
    nb__store(nb__ptr(t) + i * (int64_t)nb_dtype_size(t->dtype), t->dtype, v);
}

/* unfold (cols = taps of img) or, when fold, img += taps from cols (img zeroed first). */
static void ref_im2col(bool fold, nb_tensor *cols, nb_tensor *img, const nb_window2d *w) {
    int64_t N = img->shape[0], C = img->shape[1], H = img->shape[2], W = img->shape[3];
    int64_t KH = w->kernel[0], KW = w->kernel[1];
    int64_t OH = nb__window_out(H, KH, w->stride[0], w->padding[0], w->dilation[0]);
    int64_t OW = nb__window_out(W, KW, w->stride[1], w->padding[1], w->dilation[1]);
    if (fold)
        for (int64_t i = 0; i < nb__numel(img); i++) store_at(img, i, 0);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < KH; p++)
                for (int64_t q = 0; q < KW; q++)
                    for (int64_t i = 0; i < OH; i++)
                        for (int64_t j = 0; j < OW; j++) {
                            int64_t h = i * w->stride[0] - w->padding[0] + p * w->dilation[0];
                            int64_t x = j * w->stride[1] - w->padding[1] + q * w->dilation[1];
                            int64_t ci = ((n * C + c) * KH * KW + p * KW + q) * OH * OW + i * OW + j;
                            int64_t ii = ((n * C + c) * H + h) * W + x;
                            bool inside = h >= 0 && h < H && x >= 0 && x < W;
                            if (fold && inside) store_at(img, ii, load_at(img, ii) + load_at(cols, ci));
                            else if (!fold) store_at(cols, ci, inside ? load_at(img, ii) : 0);
                        }
}

/* Window maxima; torch's rule: start at the first tap inside x, a later tap wins when larger or NaN. */
static void ref_max_pool(nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w) {
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3];
    int64_t OH = out->shape[2], OW = out->shape[3];
    int64_t *ix = idx ? (int64_t *)nb__ptr(idx) : NULL;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double best = -INFINITY;
                    int64_t arg = -1;
                    for (int64_t p = 0; p < w->kernel[0]; p++)
                        for (int64_t q = 0; q < w->kernel[1]; q++) {
                            int64_t h = i * w->stride[0] - w->padding[0] + p * w->dilation[0];
                            int64_t y = j * w->stride[1] - w->padding[1] + q * w->dilation[1];
                            if (h < 0 || h >= H || y < 0 || y >= W) continue;
                            double v = load_at(x, ((n * C + c) * H + h) * W + y);
                            if (arg < 0) arg = h * W + y;
                            if (v > best || v != v) {
                                best = v;
                                arg = h * W + y;
                            }
                        }
                    int64_t o = ((n * C + c) * OH + i) * OW + j;
                    store_at(out, o, best);
                    if (ix) ix[o] = arg;
                }
}

static nb_status ref_max_unpool(nb_tensor *out, const nb_tensor *idx, const nb_tensor *x) {
    int64_t planes = x->shape[0] * x->shape[1], in = x->shape[2] * x->shape[3];
    int64_t outp = out->shape[2] * out->shape[3];
    const int64_t *ix = (const int64_t *)nb__ptr(idx);
    for (int64_t i = 0; i < planes * in; i++)
        if (ix[i] < 0 || ix[i] >= outp) return nb__index_error("max_unpool2d", ix[i], outp);
    for (int64_t i = 0; i < nb__numel(out); i++) store_at(out, i, 0);
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t k = 0; k < in; k++) {
            int64_t o = pl * outp + ix[pl * in + k];
            store_at(out, o, load_at(out, o) + load_at(x, pl * in + k));
        }
    return NB_OK;
}

static nb_status ref_window(nb_op op, nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w) {
    switch (op) {
    case NB_OP_UNFOLD: ref_im2col(false, out, (nb_tensor *)x, w); break;
    case NB_OP_FOLD: ref_im2col(true, (nb_tensor *)x, out, w); break;
    case NB_OP_MAX_POOL2D: ref_max_pool(out, idx, x, w); break;
    case NB_OP_MAX_UNPOOL2D: return ref_max_unpool(out, idx, x);
    default: NB_ASSERT(0 && "not a window op");
    }
    return NB_OK;
}

const nb_backend nb__ref_backend = {
    .name = "ref",
    .type = NB_DEVICE_REF,
    .copy = ref_copy,
    .unary = ref_unary,
    .binary = ref_binary,
    .where = ref_where,
    .reduce = ref_reduce,
    .scan = ref_scan,
    .matmul = ref_matmul,
    .gather = ref_gather,
    .scatter_add = ref_scatter_add,
    .window = ref_window,
    .linalg = nb__ref_linalg,
    .attention = nb__ref_attention,
    .attention_backward = nb__ref_attention_backward,
    .quantize = nb__ref_quantize,
    .dequantize = nb__ref_dequantize,
    .scaled_matmul = nb__ref_scaled_matmul,
};
