/*
 * index_prim.c — the indexing and joining primitives with kernels and
 * derivative rules: gather, scatter_add, cat, constant pad.
 * (Composites built on them live in index.c.)
 */
#include "../backend/backend.h"

#include <string.h>

nb_tensor *nb__checked_index(const char *op, nb_tensor *index, int64_t size) {
    if (nb_dtype_is_float(index->dtype) || index->dtype == NB_BOOL) {
        nb__error(NB_ERR_DTYPE, "%s: index must have an integer dtype, got %s", op, nb_dtype_name(index->dtype));
        return NULL;
    }
    nb_tensor *ix = nb__to_dtype(index, NB_I64);
    nb_tensor *c = ix && !nb_is_contiguous(ix) ? nb_contiguous(ix) : NULL;
    if (c) {
        nb__scope_take(c);
        nb_release(ix);
        ix = c;
    }
    if (!ix) return NULL;
    const int64_t *p = (const int64_t *)nb__ptr(ix);
    int64_t n = nb__numel(ix);
    for (int64_t i = 0; i < n; i++)
        if (p[i] < 0 || p[i] >= size) {
            nb__error(NB_ERR_INDEX, "%s: index %lld out of range [0, %lld)", op, (long long)p[i], (long long)size);
            nb_release(ix);
            return NULL;
        }
    return ix;
}

nb_tensor *nb__gather(const char *op, nb_tensor *x, int axis, nb_tensor *index) {
    NB_CHECK_ARG(op, x);
    NB_CHECK_ARG(op, index);
    int a = nb__axis(op, axis, x->ndim);
    if (a < 0) return NULL;
    if (index->ndim != x->ndim) {
        nb__error(NB_ERR_SHAPE, "%s: index %s must have the rank of input %s", op, NB_SHAPE_STR(index), NB_SHAPE_STR(x));
        return NULL;
    }
    for (int d = 0; d < x->ndim; d++)
        if (d != a && index->shape[d] > x->shape[d]) {
            nb__error(NB_ERR_SHAPE, "%s: index %s exceeds input %s at axis %d", op, NB_SHAPE_STR(index), NB_SHAPE_STR(x), d);
            return NULL;
        }
    const nb_backend *be = nb__backend_common(op, (nb_tensor *[]){x, index}, 2);
    if (!be) return NULL;
    nb_tensor *ix = nb__checked_index(op, index, x->shape[a]);
    if (!ix) return NULL;
    nb_tensor *out = nb__tensor_new(index->shape, index->ndim, x->dtype, x->storage->device);
    if (out && be->gather(out, x, a, ix) != NB_OK) {
        nb_release(out);
        out = NULL;
    }
    if (out && nb__should_record(&x, 1)) {
        nb_attrs at = {.naxes = 1, .axes = {a}};
        out = nb__record(out, NB_OP_GATHER, (nb_tensor *[]){x, ix}, 2, &at);
    }
    nb_release(ix);
    return out;
}

nb_tensor *nb_gather(nb_tensor *x, int axis, nb_tensor *index) { return nb__own(nb__gather("gather", x, axis, index)); }

nb_tensor *nb_scatter_add(nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src) {
    NB_CHECK_ARG("scatter_add", x);
    NB_CHECK_ARG("scatter_add", index);
    NB_CHECK_ARG("scatter_add", src);
    int a = nb__axis("scatter_add", axis, x->ndim);
    if (a < 0) return NULL;
    if (index->ndim != x->ndim || src->ndim != x->ndim) {
        nb__error(NB_ERR_SHAPE, "scatter_add: input %s, index %s and src %s must share a rank", NB_SHAPE_STR(x),
                  NB_SHAPE_STR(index), NB_SHAPE_STR(src));
        return NULL;
    }
    for (int d = 0; d < x->ndim; d++)
        if (index->shape[d] > src->shape[d] || (d != a && index->shape[d] > x->shape[d])) {
            nb__error(NB_ERR_SHAPE, "scatter_add: index %s exceeds src %s or input %s at axis %d", NB_SHAPE_STR(index),
                      NB_SHAPE_STR(src), NB_SHAPE_STR(x), d);
            return NULL;
        }
    if (src->dtype != x->dtype) {
        nb__error(NB_ERR_DTYPE, "scatter_add: src dtype %s differs from input dtype %s", nb_dtype_name(src->dtype),
                  nb_dtype_name(x->dtype));
        return NULL;
    }
    const nb_backend *be = nb__backend_common("scatter_add", (nb_tensor *[]){x, index, src}, 3);
    if (!be) return NULL;
    nb_tensor *ix = nb__checked_index("scatter_add", index, x->shape[a]);
    if (!ix) return NULL;
    /* src restricted to index's extent */
    nb_tensor *srcv = nb__tensor_view_of(src->storage, index->shape, src->stride, src->ndim, src->offset, src->dtype);
    nb_tensor *out = srcv ? nb__tensor_new(x->shape, x->ndim, x->dtype, x->storage->device) : NULL;
    if (out && (be->copy(out, x) != NB_OK || be->scatter_add(out, a, ix, srcv) != NB_OK)) {
        nb_release(out);
        out = NULL;
    }
    nb_release(srcv);
    if (out && nb__should_record((nb_tensor *[]){x, src}, 2)) {
        nb_attrs at = {.naxes = 1, .axes = {a}};
        out = nb__record(out, NB_OP_SCATTER_ADD, (nb_tensor *[]){x, ix, src}, 3, &at);
    }
    nb_release(ix);
    return nb__own(out);
}

nb_tensor *nb_cat(nb_tensor *const *ts, int n, int axis) {
    if (!ts) {
        nb__error(NB_ERR_NULL, "cat: the tensor list is NULL");
        return NULL;
    }
    if (n <= 0) {
        nb__error(NB_ERR_ARG, "cat: expected at least one tensor, got %d", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            nb__error(NB_ERR_NULL, "cat: tensor %d is NULL", i);
            return NULL;
        }
    const nb_tensor *t0 = ts[0];
    int a = nb__axis("cat", axis, t0->ndim);
    if (a < 0) return NULL;
    const nb_backend *be = nb__backend_common("cat", ts, n);
    if (!be) return NULL;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    shape[a] = 0;
    nb_dtype dt = t0->dtype;
    for (int i = 0; i < n; i++) {
        const nb_tensor *t = ts[i];
        bool ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t0->ndim; d++) ok = d == a || t->shape[d] == t0->shape[d];
        if (!ok) {
            nb__error(NB_ERR_SHAPE, "cat: tensor %d has shape %s, incompatible with %s along axis %d", i,
                      NB_SHAPE_STR(t), NB_SHAPE_STR(t0), a);
            return NULL;
        }
        shape[a] += t->shape[a];
        dt = nb_promote_types(dt, t->dtype);
    }
    nb_tensor *out = nb__tensor_new(shape, t0->ndim, dt, t0->storage->device);
    if (!out) return NULL;
    int64_t off = 0;
    for (int i = 0; i < n && out; i++) {
        int64_t vs[NB_MAX_DIMS];
        memcpy(vs, shape, sizeof vs);
        vs[a] = ts[i]->shape[a];
        nb_tensor *v = nb__tensor_view_of(out->storage, vs, out->stride, out->ndim, off * out->stride[a], dt);
        if (!v || be->copy(v, ts[i]) != NB_OK) {
            nb_release(out);
            out = NULL;
        }
        nb_release(v);
        off += ts[i]->shape[a];
    }
    if (out && nb__should_record(ts, n)) {
        nb_attrs at = {.naxes = 1, .axes = {a}};
        out = nb__record(out, NB_OP_CAT, ts, n, &at);
    }
    return nb__own(out);
}

/* Constant pad (negative pads crop); pads in torch order, last axis first. */
nb_tensor *nb__pad_constant(nb_tensor *x, const int64_t *pads, int npad, double value) {
    const nb_backend *be = nb__backend_common("pad", &x, 1);
    if (!be) return NULL;
    int64_t shape[NB_MAX_DIMS], src_lo[NB_MAX_DIMS] = {0}, dst_lo[NB_MAX_DIMS] = {0}, len[NB_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    memcpy(len, x->shape, sizeof len);
    for (int k = 0; k < npad / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t l = pads[2 * k], r = pads[2 * k + 1];
        if (__builtin_add_overflow(x->shape[d], l, &shape[d]) || __builtin_add_overflow(shape[d], r, &shape[d])) {
            nb__error(NB_ERR_OVERFLOW, "pad: padding (%lld, %lld) overflows axis %d of %s", (long long)l, (long long)r,
                      d, NB_SHAPE_STR(x));
            return NULL;
        }
        if (shape[d] < 0) {
            nb__error(NB_ERR_ARG, "pad: padding (%lld, %lld) leaves axis %d of %s with negative size", (long long)l,
                      (long long)r, d, NB_SHAPE_STR(x));
            return NULL;
        }
        src_lo[d] = l < 0 ? -l : 0;
        dst_lo[d] = l > 0 ? l : 0;
        len[d] = x->shape[d] - src_lo[d] - (r < 0 ? -r : 0);
        if (len[d] < 0) len[d] = 0;
    }
    nb_tensor *out = nb__full_on(shape, x->ndim, value, x->dtype, x->storage->device);
    if (!out) return NULL;
    int64_t so = x->offset, dof = 0;
    bool any = true;
    for (int d = 0; d < x->ndim; d++) {
        so += src_lo[d] * x->stride[d];
        dof += dst_lo[d] * out->stride[d];
        any = any && len[d] > 0;
    }
    if (any) {
        nb_tensor *sv = nb__tensor_view_of(x->storage, len, x->stride, x->ndim, so, x->dtype);
        nb_tensor *dv = sv ? nb__tensor_view_of(out->storage, len, out->stride, out->ndim, dof, out->dtype) : NULL;
        nb_status st = dv ? be->copy(dv, sv) : NB_ERR_OOM;
        nb_release(sv);
        nb_release(dv);
        if (st != NB_OK) {
            nb_release(out);
            return NULL;
        }
    }
    if (nb__should_record(&x, 1)) {
        nb_attrs at = {.ni = npad};
        memcpy(at.i, pads, sizeof(int64_t) * (size_t)npad);
        out = nb__record(out, NB_OP_PAD, &x, 1, &at);
    }
    return out;
}
