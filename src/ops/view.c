/*
 * view.c — zero-copy views (T5): every result shares its input's storage.
 * Each view is recorded on the tape as one of RESHAPE, PERMUTE, EXPAND,
 * SLICE, SELECT, DIAGONAL; the derivative of SLICE/SELECT/DIAGONAL is the
 * VIEW_GRAD op (zeros of the base shape with the gradient written into the
 * same view), whose own derivative is the view again.
 */
#include "../backend/backend.h"

#include <string.h>

static nb_tensor *make_view(nb_tensor *t, const int64_t *shape, const int64_t *stride, int ndim,
                            int64_t offset, nb_op op, const nb_attrs *a) {
    nb_tensor *v = nb__tensor_view_of(t->storage, shape, stride, ndim, offset, t->dtype);
    if (v && nb__should_record(&t, 1)) v = nb__record(v, op, &t, 1, a);
    return v;
}

/* PyTorch's computeStride: strides for `shape` viewing t's elements in
 * row-major order, or false when no view exists. */
static bool view_strides(const nb_tensor *t, const int64_t *shape, int ndim, int64_t *st) {
    int64_t numel = nb__numel(t);
    if (numel == 0 || t->ndim == 0) {
        nb__contiguous_strides(shape, ndim, st);
        return true;
    }
    int vd = ndim - 1;
    int64_t base = t->stride[t->ndim - 1], tn = 1, vn = 1;
    for (int td = t->ndim - 1; td >= 0; td--) {
        tn *= t->shape[td];
        if (td == 0 || (t->shape[td - 1] != 1 && t->stride[td - 1] != tn * base)) {
            while (vd >= 0 && (vn < tn || shape[vd] == 1)) {
                st[vd] = vn * base;
                vn *= shape[vd];
                vd--;
            }
            if (vn != tn) return false;
            if (td > 0) {
                base = t->stride[td - 1];
                tn = vn = 1;
            }
        }
    }
    return vd == -1;
}

/* Resolve -1 and check the element count; returns false with an error set. */
static bool infer_shape(const char *op, const nb_tensor *t, const int64_t *shape, int ndim, int64_t *out) {
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_ARG, "%s: rank %d outside [0, %d]", op, ndim, NB_MAX_DIMS);
        return false;
    }
    if (ndim && !shape) {
        nb__error(NB_ERR_NULL, "%s: shape is NULL for rank %d", op, ndim);
        return false;
    }
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1 && infer < 0) infer = i;
        else if (shape[i] < 0) {
            nb__error(NB_ERR_ARG, "%s: invalid size %lld in shape %s", op, (long long)shape[i],
                      NB_DIMS_STR(shape, ndim));
            return false;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            nb__error(NB_ERR_OVERFLOW, "%s: shape %s overflows", op, NB_DIMS_STR(shape, ndim));
            return false;
        }
    }
    int64_t n = nb__numel(t);
    if (infer >= 0) {
        if (known == 0 || n % known != 0) {
            nb__error(NB_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op,
                      NB_SHAPE_STR(t), (long long)n, NB_DIMS_STR(shape, ndim));
            return false;
        }
        out[infer] = n / known;
    } else if (known != n) {
        nb__error(NB_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op,
                  NB_SHAPE_STR(t), (long long)n, NB_DIMS_STR(shape, ndim));
        return false;
    }
    return nb__numel_checked(op, out, ndim) >= 0; /* an empty shape's strides must fit too */
}

static nb_tensor *reshape_impl(const char *op, nb_tensor *t, const int64_t *shape, int ndim, bool allow_copy) {
    NB_CHECK_ARG(op, t);
    int64_t s[NB_MAX_DIMS], st[NB_MAX_DIMS];
    if (!infer_shape(op, t, shape, ndim, s)) return NULL;
    if (view_strides(t, s, ndim, st)) return make_view(t, s, st, ndim, t->offset, NB_OP_RESHAPE, NULL);
    if (!allow_copy) {
        nb__error(NB_ERR_SHAPE, "%s: no view of %s with strides %s has shape %s; use reshape", op,
                  NB_SHAPE_STR(t), NB_DIMS_STR(t->stride, t->ndim), NB_DIMS_STR(s, ndim));
        return NULL;
    }
    nb_tensor *c = nb_contiguous(t); /* recorded copy */
    nb_tensor *cc = nb__scope_take(c);
    nb__contiguous_strides(s, ndim, st);
    nb_tensor *r = cc ? make_view(cc, s, st, ndim, cc->offset, NB_OP_RESHAPE, NULL) : NULL;
    nb_release(cc);
    return r;
}

nb_tensor *nb_reshape(nb_tensor *t, const int64_t *shape, int ndim) {
    return nb__own(reshape_impl("reshape", t, shape, ndim, true));
}
nb_tensor *nb_view(nb_tensor *t, const int64_t *shape, int ndim) {
    return nb__own(reshape_impl("view", t, shape, ndim, false));
}

nb_tensor *nb_flatten(nb_tensor *t, int start, int end) {
    NB_CHECK_ARG("flatten", t);
    if (t->ndim == 0) return nb_reshape(t, (int64_t[]){1}, 1);
    int s = nb__axis("flatten", start, t->ndim), e = nb__axis("flatten", end, t->ndim);
    if (s < 0 || e < 0) return NULL;
    if (s > e) {
        nb__error(NB_ERR_AXIS, "flatten: start axis %d comes after end axis %d", start, end);
        return NULL;
    }
    int64_t shape[NB_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < s; i++) shape[n++] = t->shape[i];
    int64_t m = 1;
    for (int i = s; i <= e; i++) m *= t->shape[i];
    shape[n++] = m;
    for (int i = e + 1; i < t->ndim; i++) shape[n++] = t->shape[i];
    return nb_reshape(t, shape, n);
}

nb_tensor *nb_squeeze(nb_tensor *t, int axis) {
    NB_CHECK_ARG("squeeze", t);
    int a = nb__axis("squeeze", axis, t->ndim);
    if (a < 0) return NULL;
    if (t->shape[a] != 1) {
        nb__error(NB_ERR_SHAPE, "squeeze: axis %d of %s has size %lld, not 1", axis, NB_SHAPE_STR(t),
                  (long long)t->shape[a]);
        return NULL;
    }
    int64_t shape[NB_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != a) shape[n++] = t->shape[i];
    return nb_reshape(t, shape, n);
}

nb_tensor *nb_squeeze_all(nb_tensor *t) {
    NB_CHECK_ARG("squeeze_all", t);
    int64_t shape[NB_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) shape[n++] = t->shape[i];
    return nb_reshape(t, shape, n);
}

nb_tensor *nb_unsqueeze(nb_tensor *t, int axis) {
    NB_CHECK_ARG("unsqueeze", t);
    if (t->ndim >= NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "unsqueeze: rank %d is already the maximum", t->ndim);
        return NULL;
    }
    int a = axis < 0 ? axis + t->ndim + 1 : axis;
    if (a < 0 || a > t->ndim) {
        nb__error(NB_ERR_AXIS, "unsqueeze: axis %d out of range for rank %d (expected [%d, %d])", axis,
                  t->ndim, -t->ndim - 1, t->ndim);
        return NULL;
    }
    int64_t shape[NB_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) shape[i] = i == a ? 1 : t->shape[j++];
    return nb_reshape(t, shape, t->ndim + 1);
}

static nb_tensor *permute_impl(nb_tensor *t, const int *perm, int ndim) {
    NB_CHECK_ARG("permute", t);
    if (ndim != t->ndim) {
        nb__error(NB_ERR_AXIS, "permute: %d axes given for a tensor of rank %d", ndim, t->ndim);
        return NULL;
    }
    if (ndim && !perm) {
        nb__error(NB_ERR_NULL, "permute: perm is NULL");
        return NULL;
    }
    nb_attrs a = {.naxes = ndim};
    bool seen[NB_MAX_DIMS] = {0};
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS];
    for (int i = 0; i < ndim; i++) {
        int p = nb__axis("permute", perm[i], ndim);
        if (p < 0) return NULL;
        if (seen[p]) {
            nb__error(NB_ERR_AXIS, "permute: axis %d repeated", p);
            return NULL;
        }
        seen[p] = true;
        a.axes[i] = p;
        shape[i] = t->shape[p];
        st[i] = t->stride[p];
    }
    return make_view(t, shape, st, ndim, t->offset, NB_OP_PERMUTE, &a);
}

nb_tensor *nb_permute(nb_tensor *t, const int *perm, int ndim) { return nb__own(permute_impl(t, perm, ndim)); }

nb_tensor *nb_transpose(nb_tensor *t, int a, int b) {
    NB_CHECK_ARG("transpose", t);
    int x = nb__axis("transpose", a, t->ndim), y = nb__axis("transpose", b, t->ndim);
    if (x < 0 || y < 0) return NULL;
    int perm[NB_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    perm[x] = y;
    perm[y] = x;
    return nb_permute(t, perm, t->ndim);
}

nb_tensor *nb_t(nb_tensor *t) {
    NB_CHECK_ARG("t", t);
    if (t->ndim < 2) return nb__own(nb_retain(t));
    return nb_transpose(t, -1, -2);
}

static nb_tensor *expand_impl(const char *op, nb_tensor *t, const int64_t *shape, int ndim, bool allow_neg) {
    NB_CHECK_ARG(op, t);
    if (ndim && !shape) {
        nb__error(NB_ERR_NULL, "%s: shape is NULL for rank %d", op, ndim);
        return NULL;
    }
    if (ndim < t->ndim || ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "%s: cannot expand %s to rank %d", op, NB_SHAPE_STR(t), ndim);
        return NULL;
    }
    int64_t s[NB_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        s[i] = shape[i];
        if (shape[i] == -1 && allow_neg && j >= 0) s[i] = t->shape[j];
        if (s[i] < 0 || (j >= 0 && t->shape[j] != 1 && t->shape[j] != s[i])) {
            nb__error(NB_ERR_SHAPE, "%s: shape %s cannot be broadcast to %s (axis %d)", op,
                      NB_SHAPE_STR(t), NB_DIMS_STR(shape, ndim), i);
            return NULL;
        }
    }
    if (nb__numel_checked(op, s, ndim) < 0) return NULL;
    nb_tensor *v = nb__expand_raw(t, s, ndim);
    if (v && nb__should_record(&t, 1)) v = nb__record(v, NB_OP_EXPAND, &t, 1, NULL);
    return v;
}

nb_tensor *nb_expand(nb_tensor *t, const int64_t *shape, int ndim) {
    return nb__own(expand_impl("expand", t, shape, ndim, true));
}
nb_tensor *nb_broadcast_to(nb_tensor *t, const int64_t *shape, int ndim) {
    return nb__own(expand_impl("broadcast_to", t, shape, ndim, false));
}

/* A normalized slice: `len` elements from `start` with `step` (nonzero). */
static nb_tensor *slice_norm(nb_tensor *t, int a, int64_t start, int64_t step, int64_t len) {
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(st, t->stride, sizeof st);
    shape[a] = len;
    st[a] = t->stride[a] * step;
    nb_attrs at = {.ni = 4, .i = {a, start, step, len}};
    return make_view(t, shape, st, t->ndim, t->offset + (len ? start * t->stride[a] : 0), NB_OP_SLICE, &at);
}

nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t stop, int64_t step) {
    NB_CHECK_ARG("slice", t);
    int a = nb__axis("slice", axis, t->ndim);
    if (a < 0) return NULL;
    if (step == 0 || step == INT64_MIN) {
        nb__error(NB_ERR_ARG, "slice: step must be nonzero and greater than INT64_MIN, got %lld", (long long)step);
        return NULL;
    }
    int64_t n = t->shape[a];
    /* Python's slice.indices(n) */
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    if (start == NB_END) start = step < 0 ? hi : lo;
    else if (start < 0) start = start + n < lo ? lo : start + n;
    else if (start > hi) start = hi;
    if (stop == NB_END) stop = step < 0 ? lo : hi;
    else if (stop < 0) stop = stop + n < lo ? lo : stop + n;
    else if (stop > hi) stop = hi;
    /* ceil(distance / |step|) written so that a huge step cannot overflow */
    int64_t len = step > 0 ? (stop > start ? (stop - start - 1) / step + 1 : 0)
                           : (start > stop ? (start - stop - 1) / -step + 1 : 0);
    return nb__own(slice_norm(t, a, start, step, len));
}

nb_tensor *nb_narrow(nb_tensor *t, int axis, int64_t start, int64_t length) {
    NB_CHECK_ARG("narrow", t);
    int a = nb__axis("narrow", axis, t->ndim);
    if (a < 0) return NULL;
    if (start < 0 || length < 0 || start > t->shape[a] || length > t->shape[a] - start) {
        nb__error(NB_ERR_INDEX, "narrow: start %lld, length %lld outside axis %d of size %lld", (long long)start,
                  (long long)length, axis, (long long)t->shape[a]);
        return NULL;
    }
    return nb__own(slice_norm(t, a, start, 1, length));
}

nb_tensor *nb_flip(nb_tensor *t, const int *axes, int naxes) {
    NB_CHECK_ARG("flip", t);
    bool mask[NB_MAX_DIMS];
    if (nb__axes_mask("flip", axes, naxes, t->ndim, mask) < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    nb_tensor *r = t;
    for (int d = 0; d < t->ndim && r; d++)
        if (mask[d]) r = nb__own(slice_norm(r, d, r->shape[d] - 1, -1, r->shape[d]));
    NB_COMPOSITE_RETURN(r);
}

static nb_tensor *select_impl(nb_tensor *t, int axis, int64_t index) {
    NB_CHECK_ARG("select", t);
    int a = nb__axis("select", axis, t->ndim);
    if (a < 0) return NULL;
    int64_t n = t->shape[a];
    if (index < -n || index >= n) {
        nb__error(NB_ERR_INDEX, "select: index %lld out of range for axis %d of size %lld", (long long)index,
                  axis, (long long)n);
        return NULL;
    }
    if (index < 0) index += n;
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS];
    for (int i = 0, j = 0; i < t->ndim; i++)
        if (i != a) {
            shape[j] = t->shape[i];
            st[j++] = t->stride[i];
        }
    nb_attrs at = {.ni = 2, .i = {a, index}};
    return make_view(t, shape, st, t->ndim - 1, t->offset + index * t->stride[a], NB_OP_SELECT, &at);
}

nb_tensor *nb_select(nb_tensor *t, int axis, int64_t index) { return nb__own(select_impl(t, axis, index)); }

static nb_tensor *diagonal_impl(nb_tensor *t, int64_t offset, int a, int b) {
    NB_CHECK_ARG("diagonal", t);
    int x = nb__axis("diagonal", a, t->ndim), y = nb__axis("diagonal", b, t->ndim);
    if (x < 0 || y < 0) return NULL;
    if (x == y) {
        nb__error(NB_ERR_AXIS, "diagonal: axes %d and %d are the same", a, b);
        return NULL;
    }
    int64_t len, off = t->offset;
    if (offset >= 0) {
        len = t->shape[y] - offset < t->shape[x] ? t->shape[y] - offset : t->shape[x];
        if (len > 0) off += offset * t->stride[y];
    } else {
        len = t->shape[x] + offset < t->shape[y] ? t->shape[x] + offset : t->shape[y];
        if (len > 0) off -= offset * t->stride[x];
    }
    if (len < 0) len = 0;
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != x && i != y) {
            shape[n] = t->shape[i];
            st[n++] = t->stride[i];
        }
    shape[n] = len;
    st[n++] = t->stride[x] + t->stride[y];
    nb_attrs at = {.ni = 3, .i = {offset, x, y}};
    return make_view(t, shape, st, n, off, NB_OP_DIAGONAL, &at);
}

nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int a, int b) { return nb__own(diagonal_impl(t, offset, a, b)); }

nb_tensor *nb_as_strided(nb_tensor *t, const int64_t *shape, const int64_t *strides, int ndim, int64_t offset) {
    NB_CHECK_ARG("as_strided", t);
    if (ndim && !strides) {
        nb__error(NB_ERR_NULL, "as_strided: strides is NULL");
        return NULL;
    }
    int64_t n = nb__numel_checked("as_strided", shape, ndim);
    if (n < 0) return NULL;
    if (offset < 0) { /* torch: storage offset must be non-negative */
        nb__error(NB_ERR_INDEX, "as_strided: storage offset %lld is negative", (long long)offset);
        return NULL;
    }
    int64_t cap = (int64_t)(t->storage->nbytes / nb_dtype_size(t->dtype));
    int64_t lo = 0, hi = 0;
    if (n > 0 && (!nb__strided_extent(shape, strides, ndim, &lo, &hi) || __builtin_add_overflow(lo, offset, &lo) ||
                  __builtin_add_overflow(hi, offset, &hi))) {
        nb__error(NB_ERR_OVERFLOW, "as_strided: strides %s overflow", NB_DIMS_STR(strides, ndim));
        return NULL;
    }
    if (n > 0 && (lo < 0 || hi >= cap)) {
        nb__error(NB_ERR_INDEX, "as_strided: shape %s strides %s offset %lld reach elements [%lld, %lld] outside storage of %lld",
                  NB_DIMS_STR(shape, ndim), NB_DIMS_STR(strides, ndim), (long long)offset, (long long)lo,
                  (long long)hi, (long long)cap);
        return NULL;
    }
    nb_tensor *v = nb__tensor_view_of(t->storage, shape, strides, ndim, offset, t->dtype);
    return nb__own(v); /* not differentiable: never recorded */
}

/* ---- view adjoints ---- */

nb_tensor *nb__apply_view(nb_op op, nb_tensor *base, const nb_attrs *a) {
    switch (op) {
    case NB_OP_SLICE: return slice_norm(base, (int)a->i[0], a->i[1], a->i[2], a->i[3]);
    case NB_OP_SELECT: return select_impl(base, (int)a->i[0], a->i[1]);
    case NB_OP_DIAGONAL: return diagonal_impl(base, a->i[0], (int)a->i[1], (int)a->i[2]);
    default: NB_ASSERT(0 && "not an invertible view");
    }
}

/* VIEW_GRAD: zeros shaped like the view's base, with g written into the view. */
nb_tensor *nb__view_grad(nb_tensor *g, nb_op view_op, const nb_attrs *va, const int64_t *base_shape, int base_ndim) {
    NB_CHECK_ARG("view_grad", g);
    const nb_backend *be = nb__backend_common("view_grad", &g, 1);
    if (!be) return NULL;
    nb_tensor *out = nb__tensor_new(base_shape, base_ndim, g->dtype, g->storage->device);
    if (!out) return NULL;
    nb_tensor *zero = nb__weak_scalar(0, g->storage->device);
    nb_tensor *z = zero ? nb__expand_raw(zero, base_shape, base_ndim) : NULL;
    nb_status st = z ? be->copy(out, z) : NB_ERR_OOM;
    nb_no_grad_begin();
    nb_tensor *v = st == NB_OK ? nb__apply_view(view_op, out, va) : NULL;
    nb_no_grad_end();
    st = v ? be->copy(v, g) : NB_ERR_OOM;
    nb_release(v);
    nb_release(z);
    nb_release(zero);
    if (st != NB_OK) {
        nb_release(out);
        return NULL;
    }
    if (nb__should_record(&g, 1)) {
        nb_attrs a = *va;
        a.sub = view_op;
        a.shape_ndim = base_ndim;
        memcpy(a.shape, base_shape, sizeof(int64_t) * (size_t)base_ndim);
        out = nb__record(out, NB_OP_VIEW_GRAD, &g, 1, &a);
    }
    return out;
}
