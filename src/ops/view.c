/*
 * view.c — zero-copy views (T5): every result shares its input's storage.
 * The VIEW kind covers RESHAPE, PERMUTE, EXPAND, SLICE, SELECT, DIAGONAL and
 * AS_STRIDED: infer computes the result's shape from metadata (symbolic dims
 * included) and normalizes the attrs; execute builds the strides and offset
 * on the concrete tensor (reshape copies only when no view exists).  The
 * derivative of SLICE/SELECT/DIAGONAL is the VIEW_GRAD kind (zeros of the
 * base shape with the gradient written into the same view), whose own
 * derivative is the view again.
 *
 * Normalized attrs (dims there may be symbolic while tracing):
 *   RESHAPE, EXPAND  shape[0..shape_ndim): the target, -1 resolved
 *   PERMUTE          axes[0..naxes): non-negative permutation
 *   SLICE            i = {axis, start, step, len} (Python bounds resolved)
 *   SELECT           i = {axis, index} (index non-negative)
 *   DIAGONAL         i = {offset, axis1, axis2} (axes non-negative)
 *   AS_STRIDED       shape[0..shape_ndim), i = {strides..., storage offset}
 *   VIEW_GRAD        sub = the view op, i = its attrs, shape = the base shape
 */
#include "../backend/backend.h"

#include <string.h>

static bool sym_error(const char *op, const char *what, int64_t d) {
    char s[64];
    nb__error(NB_ERR_SHAPE, "%s: %s (symbolic dim %s)", op, what, nb__dim_str(s, d));
    return false;
}

/* ---- infer: the view's metadata from its input's (x), attrs normalized ---- */

/* An axis from attrs: normalized ones (in [0, ndim)) pass without a call, others go through
 * nb__axis (negative counted from the end, errors naming op). */
static inline int attr_axis(const char *op, int64_t axis, int ndim) {
    return axis >= 0 && axis < ndim ? (int)axis : nb__axis(op, (int)axis, ndim);
}

/* Product of the sizes of a view's input: concrete sizes inline (the eager case), else
 * nb__dims_prod (symbolic dims, overflow errors). */
static inline int64_t in_numel(const char *op, const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return nb__dims_prod(op, shape, ndim);
    return n;
}

/* The input of a view as infer sees it (a tensor's fields, or a VIEW_GRAD's base; no copy).
 * shape is a whole NB_MAX_DIMS array (a record's or an attrs'), so it is copied at a fixed
 * size (inline moves, no memcpy call; the entries past ndim are never read as sizes). */
typedef struct view_in {
    const int64_t *shape;
    int ndim;
    nb_dtype dtype;
} view_in;

/* Resolve -1 and check the element count (symbolic dims through dim.c). */
static bool reshape_meta(const char *op, const view_in *x, nb_attrs *a, nb_meta *m) {
    const int64_t *shape = a->shape;
    int ndim = a->shape_ndim, infer = -1;
    int64_t known = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == -1 && infer < 0) infer = i;
        else if (shape[i] < 0 && !nb__dim_sym(shape[i])) {
            nb__error(NB_ERR_ARG, "%s: invalid size %lld in shape %s", op, (long long)shape[i],
                      NB_DIMS_STR(shape, ndim));
            return false;
        } else if (nb__dim_sym(shape[i]) || nb__dim_sym(known)) {
            if ((known = nb__dim_mul(op, known, shape[i])) == -1) return false;
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            nb__error(NB_ERR_OVERFLOW, "%s: shape %s overflows", op, NB_DIMS_STR(shape, ndim));
            return false;
        }
    }
    int64_t n = in_numel(op, x->shape, x->ndim);
    if (n == -1) return false;
    memcpy(m->shape, shape, sizeof m->shape);
    m->ndim = ndim;
    bool sym = nb__dim_sym(n) || nb__dim_sym(known);
    if (infer >= 0) {
        if (known == 0 || (!sym && n % known != 0)) goto mismatch;
        m->shape[infer] = sym ? nb__dim_div(op, n, known) : n / known;
        if (m->shape[infer] == -1) return false;
    } else if (known != n)
        goto mismatch;
    /* an empty shape's strides must fit too (a nonempty one has n elements, which fit) */
    if (n == 0 && !nb__dims_any_sym(m->shape, ndim) && nb__numel_checked(op, m->shape, ndim) < 0) return false;
    if (infer >= 0) a->shape[infer] = m->shape[infer];
    return true;
mismatch:
    if (sym) nb__error(NB_ERR_SHAPE, "%s: cannot reshape %s into %s", op, NB_DIMS_STR(x->shape, x->ndim),
                       NB_DIMS_STR(shape, ndim));
    else nb__error(NB_ERR_SHAPE, "%s: cannot reshape %s (%lld elements) into %s", op, NB_DIMS_STR(x->shape, x->ndim),
                   (long long)n, NB_DIMS_STR(shape, ndim));
    return false;
}

static bool permute_meta(const view_in *x, nb_attrs *a, nb_meta *m) {
    if (a->naxes != x->ndim) {
        nb__error(NB_ERR_AXIS, "permute: %d axes given for a tensor of rank %d", a->naxes, x->ndim);
        return false;
    }
    bool seen[NB_MAX_DIMS] = {0};
    for (int i = 0; i < x->ndim; i++) {
        int p = attr_axis("permute", a->axes[i], x->ndim);
        if (p < 0) return false;
        if (seen[p]) {
            nb__error(NB_ERR_AXIS, "permute: axis %d repeated", p);
            return false;
        }
        seen[p] = true;
        a->axes[i] = p;
        m->shape[i] = x->shape[p];
    }
    m->ndim = x->ndim;
    return true;
}

/* sub = 1: broadcast_to (no -1; errors under that name).  Normalized to a plain expand. */
static bool expand_meta(const view_in *x, nb_attrs *a, nb_meta *m) {
    const char *op = a->sub ? "broadcast_to" : "expand";
    int ndim = a->shape_ndim, lead = ndim - x->ndim;
    if (lead < 0) {
        nb__error(NB_ERR_SHAPE, "%s: cannot expand %s to rank %d", op, NB_DIMS_STR(x->shape, x->ndim), ndim);
        return false;
    }
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        int64_t s = a->shape[i];
        if (s == -1 && !a->sub && j >= 0) s = x->shape[j];
        if ((s < 0 && !nb__dim_sym(s)) || (j >= 0 && x->shape[j] != 1 && x->shape[j] != s)) {
            nb__error(NB_ERR_SHAPE, "%s: shape %s cannot be broadcast to %s (axis %d)", op,
                      NB_DIMS_STR(x->shape, x->ndim), NB_DIMS_STR(a->shape, ndim), i);
            return false;
        }
        m->shape[i] = s;
    }
    if (!nb__dims_any_sym(m->shape, ndim) && nb__numel_checked(op, m->shape, ndim) < 0) return false;
    m->ndim = ndim;
    memcpy(a->shape, m->shape, sizeof(int64_t) * (size_t)ndim);
    a->sub = 0;
    return true;
}

/* A normalized slice {axis, start, step, len}: on a concrete axis every element it reaches
 * must lie inside (this is also the run-time check of a slice traced on a symbolic axis). */
static bool slice_meta(const view_in *x, nb_attrs *a, nb_meta *m) {
    int ax = attr_axis("slice", a->i[0], x->ndim);
    if (ax < 0) return false;
    int64_t n = x->shape[ax], start = a->i[1], step = a->i[2], len = a->i[3], last;
    if (step == 0 || step == INT64_MIN) {
        nb__error(NB_ERR_ARG, "slice: step must be nonzero and greater than INT64_MIN, got %lld", (long long)step);
        return false;
    }
    if (!nb__dim_sym(n)) {
        if (nb__dim_sym(start) || nb__dim_sym(len)) return sym_error("slice", "symbolic bound on a concrete axis",
                                                                     nb__dim_sym(start) ? start : len);
        if (len < 0 || (len > 0 && (start < 0 || start >= n || __builtin_mul_overflow(len - 1, step, &last) ||
                                    __builtin_add_overflow(start, last, &last) || last < 0 || last >= n))) {
            nb__error(NB_ERR_INDEX, "slice: %lld elements from %lld with step %lld do not fit axis %d of size %lld",
                      (long long)len, (long long)start, (long long)step, ax, (long long)n);
            return false;
        }
    } else if (len < 0 && !nb__dim_sym(len)) {
        nb__error(NB_ERR_INDEX, "slice: negative length %lld", (long long)len);
        return false;
    }
    a->i[0] = ax;
    m->ndim = x->ndim;
    memcpy(m->shape, x->shape, sizeof m->shape);
    m->shape[ax] = len;
    return true;
}

static bool select_meta(const view_in *x, nb_attrs *a, nb_meta *m) {
    int ax = attr_axis("select", a->i[0], x->ndim);
    if (ax < 0) return false;
    int64_t n = x->shape[ax], index = a->i[1];
    if (!nb__dim_sym(n)) {
        if (nb__dim_sym(index)) return sym_error("select", "symbolic index on a concrete axis", index);
        if (index < 0 || index >= n) { /* i[2]: the index given, when counted from the end of a symbolic size */
            nb__error(NB_ERR_INDEX, "select: index %lld out of range for axis %d of size %lld",
                      (long long)(a->ni > 2 ? a->i[2] : index), ax, (long long)n);
            return false;
        }
    } else if (index < 0 && !nb__dim_sym(index)) {
        nb__error(NB_ERR_INDEX, "select: negative index %lld", (long long)index);
        return false;
    }
    a->i[0] = ax;
    m->ndim = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != ax) m->shape[m->ndim++] = x->shape[i];
    return true;
}

/* Length of the diagonal `offset` of axes x, y (>= 0) of shape; -1 (error set) when it
 * depends on a symbolic size (supported: concrete sizes, or one size on both axes at offset 0). */
static int64_t diag_len(const int64_t *shape, int64_t offset, int x, int y) {
    int64_t sx = shape[x], sy = shape[y];
    if (nb__dim_sym(sx) || nb__dim_sym(sy)) {
        if (offset == 0 && sx == sy) return sx;
        sym_error("diagonal", "the diagonal's length depends on a symbolic size", nb__dim_sym(sx) ? sx : sy);
        return -1;
    }
    int64_t len = offset >= 0 ? (sy - offset < sx ? sy - offset : sx) : (sx + offset < sy ? sx + offset : sy);
    return len < 0 ? 0 : len;
}

static bool diagonal_meta(const view_in *t, nb_attrs *a, nb_meta *m) {
    int x = attr_axis("diagonal", a->i[1], t->ndim), y = attr_axis("diagonal", a->i[2], t->ndim);
    if (x < 0 || y < 0) return false;
    if (x == y) {
        nb__error(NB_ERR_AXIS, "diagonal: axes %d and %d are the same", (int)a->i[1], (int)a->i[2]);
        return false;
    }
    int64_t len = diag_len(t->shape, a->i[0], x, y);
    if (len == -1) return false;
    m->ndim = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != x && i != y) m->shape[m->ndim++] = t->shape[i];
    m->shape[m->ndim++] = len;
    a->i[1] = x;
    a->i[2] = y;
    return true;
}

/* The metadata of view op (not AS_STRIDED) of a value with metadata x. */
static bool view_meta(nb_op op, const view_in *x, nb_attrs *a, nb_meta *m) {
    m->dtype = x->dtype;
    m->weak = false;
    switch (op) {
    case NB_OP_RESHAPE: { /* sub = 1: nb_view (errors under that name); normalized to 0 */
        bool ok = reshape_meta(a->sub ? "view" : "reshape", x, a, m);
        a->sub = 0;
        return ok;
    }
    case NB_OP_PERMUTE: return permute_meta(x, a, m);
    case NB_OP_EXPAND: return expand_meta(x, a, m);
    case NB_OP_SLICE: return slice_meta(x, a, m);
    case NB_OP_SELECT: return select_meta(x, a, m);
    case NB_OP_DIAGONAL: return diagonal_meta(x, a, m);
    case NB_OP_DETACH:
        m->ndim = x->ndim;
        memcpy(m->shape, x->shape, sizeof m->shape);
        return true;
    default: NB_ASSERT(0 && "not a view op");
    }
}

/* as_strided reads t's storage extent: concrete tensors only. */
static int infer_as_strided(nb_tensor *t, nb_attrs *a, nb_meta *m) {
    const char *op = "as_strided";
    if (nb__is_symbolic(t)) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: not supported on a symbolic tensor (its storage exists only when the "
                  "graph runs); use reshape, permute, slice or expand", op);
        return -1;
    }
    int ndim = a->shape_ndim;
    const int64_t *shape = a->shape, *strides = a->i;
    int64_t offset = a->i[ndim];
    int64_t n = nb__numel_checked(op, shape, ndim);
    if (n < 0) return -1;
    if (offset < 0) { /* torch: storage offset must be non-negative */
        nb__error(NB_ERR_INDEX, "%s: storage offset %lld is negative", op, (long long)offset);
        return -1;
    }
    int64_t cap = (int64_t)(t->storage->nbytes / nb_dtype_size(t->dtype));
    int64_t lo = 0, hi = 0;
    if (n > 0 && (!nb__strided_extent(shape, strides, ndim, &lo, &hi) || __builtin_add_overflow(lo, offset, &lo) ||
                  __builtin_add_overflow(hi, offset, &hi))) {
        nb__error(NB_ERR_OVERFLOW, "%s: strides %s overflow", op, NB_DIMS_STR(strides, ndim));
        return -1;
    }
    if (n > 0 && (lo < 0 || hi >= cap)) {
        nb__error(NB_ERR_INDEX, "%s: shape %s strides %s offset %lld reach elements [%lld, %lld] outside storage of %lld",
                  op, NB_DIMS_STR(shape, ndim), NB_DIMS_STR(strides, ndim), (long long)offset, (long long)lo,
                  (long long)hi, (long long)cap);
        return -1;
    }
    m->dtype = t->dtype;
    m->weak = false;
    m->ndim = ndim;
    memcpy(m->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return 1;
}

static int infer_view(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    if (op == NB_OP_AS_STRIDED) return infer_as_strided(in[0], a, m);
    view_in x = {in[0]->shape, in[0]->ndim, in[0]->dtype};
    return view_meta(op, &x, a, m) ? 1 : -1;
}

/* ---- execute: the strides and offset on the concrete tensor ---- */

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

/* reshape where no view exists: a contiguous copy of t, then given `shape`. */
static nb_tensor *reshape_copy(nb_tensor *t, const int64_t *shape, int ndim) {
    nb_tensor *c = nb__tensor_new(t->shape, t->ndim, t->dtype, t->storage->device);
    if (c && nb__backend_of(t)->copy(c, t) != NB_OK) {
        nb_release(c);
        return NULL;
    }
    if (!c) return NULL;
    c->ndim = ndim; /* a fresh record: reshaped in place */
    memcpy(c->shape, shape, sizeof(int64_t) * (size_t)ndim);
    nb__contiguous_strides(shape, ndim, c->stride);
    return c;
}

/* The unrecorded view `op` (normalized attrs a) of the concrete t. */
static nb_tensor *view_build(nb_op op, nb_tensor *t, const nb_attrs *a) {
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS], off = t->offset;
    int n = 0;
    switch (op) {
    case NB_OP_RESHAPE:
        if (!view_strides(t, a->shape, a->shape_ndim, st)) return reshape_copy(t, a->shape, a->shape_ndim);
        return nb__tensor_view_of(t->storage, a->shape, st, a->shape_ndim, off, t->dtype);
    case NB_OP_EXPAND: return nb__expand_raw(t, a->shape, a->shape_ndim);
    case NB_OP_DETACH: return nb__tensor_view_of(t->storage, t->shape, t->stride, t->ndim, off, t->dtype);
    case NB_OP_AS_STRIDED:
        return nb__tensor_view_of(t->storage, a->shape, a->i, a->shape_ndim, a->i[a->shape_ndim], t->dtype);
    case NB_OP_PERMUTE:
        for (; n < a->naxes; n++) {
            shape[n] = t->shape[a->axes[n]];
            st[n] = t->stride[a->axes[n]];
        }
        break;
    case NB_OP_SLICE: {
        int ax = (int)a->i[0];
        int64_t start = a->i[1], step = a->i[2], len = a->i[3];
        n = t->ndim;
        memcpy(shape, t->shape, sizeof shape); /* whole arrays: fixed-size copies, no call */
        memcpy(st, t->stride, sizeof st);
        shape[ax] = len;
        st[ax] = t->stride[ax] * step;
        if (len) off += start * t->stride[ax];
        break;
    }
    case NB_OP_SELECT:
        for (int i = 0; i < t->ndim; i++)
            if (i != a->i[0]) {
                shape[n] = t->shape[i];
                st[n++] = t->stride[i];
            }
        off += a->i[1] * t->stride[a->i[0]];
        break;
    case NB_OP_DIAGONAL: {
        int x = (int)a->i[1], y = (int)a->i[2];
        int64_t offset = a->i[0], len = diag_len(t->shape, offset, x, y);
        if (len > 0) off += offset >= 0 ? offset * t->stride[y] : -offset * t->stride[x];
        for (int i = 0; i < t->ndim; i++)
            if (i != x && i != y) {
                shape[n] = t->shape[i];
                st[n++] = t->stride[i];
            }
        shape[n] = len;
        st[n++] = t->stride[x] + t->stride[y];
        break;
    }
    default: NB_ASSERT(0 && "not a view op");
    }
    return nb__tensor_view_of(t->storage, shape, st, n, off, t->dtype);
}

static nb_status exec_view(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                           nb_tensor **out) {
    (void)n;
    (void)m;
    (void)nout;
    out[0] = view_build(op, in[0], a);
    return out[0] ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_view = {infer_view, exec_view};

/* ---- public views ---- */

static nb_tensor *view_apply(nb_op op, nb_tensor *t, nb_attrs *a) { return nb__own(nb__apply(op, &t, 1, a)); }

/* The attrs of a shape-taking view (rank and NULL checked); false with an error set. */
static bool shape_attrs(const char *op, const int64_t *shape, int ndim, nb_status rank_err, nb_attrs *a) {
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        nb__error(rank_err, "%s: rank %d outside [0, %d]", op, ndim, NB_MAX_DIMS);
        return false;
    }
    if (ndim && !shape) {
        nb__error(NB_ERR_NULL, "%s: shape is NULL for rank %d", op, ndim);
        return false;
    }
    a->shape_ndim = ndim;
    if (ndim) memcpy(a->shape, shape, sizeof(int64_t) * (size_t)ndim);
    return true;
}

nb_tensor *nb_reshape(nb_tensor *t, const int64_t *shape, int ndim) {
    NB_CHECK_ARG("reshape", t);
    nb_attrs a = {0};
    if (!shape_attrs("reshape", shape, ndim, NB_ERR_ARG, &a)) return NULL;
    return view_apply(NB_OP_RESHAPE, t, &a);
}

nb_tensor *nb_view(nb_tensor *t, const int64_t *shape, int ndim) {
    NB_CHECK_ARG("view", t);
    nb_attrs a = {.sub = 1};
    if (!shape_attrs("view", shape, ndim, NB_ERR_ARG, &a)) return NULL;
    if (!nb__is_symbolic(t)) { /* never a copy: the layout decides, known only for concrete tensors */
        nb_attrs b = a;
        nb_meta m;
        int64_t st[NB_MAX_DIMS];
        if (infer_view(NB_OP_RESHAPE, &t, 1, &b, &m) < 0) return NULL;
        if (!view_strides(t, m.shape, m.ndim, st)) {
            nb__error(NB_ERR_SHAPE, "view: no view of %s with strides %s has shape %s; use reshape",
                      NB_SHAPE_STR(t), NB_DIMS_STR(t->stride, t->ndim), NB_DIMS_STR(m.shape, m.ndim));
            return NULL;
        }
    }
    return view_apply(NB_OP_RESHAPE, t, &a);
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
    if ((shape[n++] = nb__dims_prod("flatten", t->shape + s, e - s + 1)) == -1) return NULL;
    for (int i = e + 1; i < t->ndim; i++) shape[n++] = t->shape[i];
    return nb_reshape(t, shape, n);
}

nb_tensor *nb_squeeze(nb_tensor *t, int axis) {
    NB_CHECK_ARG("squeeze", t);
    int a = nb__axis("squeeze", axis, t->ndim);
    if (a < 0) return NULL;
    if (t->shape[a] != 1) {
        char s[64];
        nb__error(NB_ERR_SHAPE, "squeeze: axis %d of %s has size %s, not 1", axis, NB_SHAPE_STR(t),
                  nb__dim_str(s, t->shape[a]));
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

nb_tensor *nb_permute(nb_tensor *t, const int *perm, int ndim) {
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
    if (ndim) memcpy(a.axes, perm, sizeof(int) * (size_t)ndim);
    return view_apply(NB_OP_PERMUTE, t, &a);
}

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

static nb_tensor *expand_front(const char *op, nb_tensor *t, const int64_t *shape, int ndim, bool broadcast_to) {
    NB_CHECK_ARG(op, t);
    if (ndim && !shape) {
        nb__error(NB_ERR_NULL, "%s: shape is NULL for rank %d", op, ndim);
        return NULL;
    }
    if (ndim < t->ndim || ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "%s: cannot expand %s to rank %d", op, NB_SHAPE_STR(t), ndim);
        return NULL;
    }
    nb_attrs a = {.sub = broadcast_to};
    shape_attrs(op, shape, ndim, NB_ERR_SHAPE, &a);
    return view_apply(NB_OP_EXPAND, t, &a);
}

nb_tensor *nb_expand(nb_tensor *t, const int64_t *shape, int ndim) { return expand_front("expand", t, shape, ndim, false); }
nb_tensor *nb_broadcast_to(nb_tensor *t, const int64_t *shape, int ndim) {
    return expand_front("broadcast_to", t, shape, ndim, true);
}

/* The normalized slice {axis, start, step, len} (unscoped). */
static nb_tensor *slice_norm(nb_tensor *t, int a, int64_t start, int64_t step, int64_t len) {
    nb_attrs at = {.ni = 4, .i = {a, start, step, len}};
    return nb__apply(NB_OP_SLICE, &t, 1, &at);
}

/* One slice bound on a symbolic axis of size n: the value `off` from the start, or n + off. */
typedef struct sym_bound {
    bool from_end;
    int64_t off;
} sym_bound;

/* Python's slice(start, stop, step) on a symbolic axis of size n, without clamping (the
 * run-time infer checks the slice fits): writes the start and the length (dims).  A
 * length that would depend on a comparison with n is NB_ERR_SHAPE naming n. */
static bool sym_slice(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *ostart, int64_t *olen) {
    const char *op = "slice";
    sym_bound s, e;
    if (step > 0) {
        s = start == NB_END ? (sym_bound){false, 0} : (sym_bound){start < 0, start};
        e = stop == NB_END ? (sym_bound){true, 0} : (sym_bound){stop < 0, stop};
    } else {
        s = start == NB_END ? (sym_bound){true, -1} : (sym_bound){start < 0, start};
        e = stop == NB_END ? (sym_bound){false, -1} : (sym_bound){stop < 0, stop};
    }
    sym_bound lo = step > 0 ? s : e, hi = step > 0 ? e : s; /* the walk covers [lo, hi) */
    int64_t astep = step > 0 ? step : -step;
    if (lo.from_end && !hi.from_end)
        return sym_error(op, "a bound counted from the end before one counted from the start gives a length "
                         "that depends on the axis size", n);
    if (lo.from_end == hi.from_end) { /* concrete distance */
        int64_t d = hi.off - lo.off;
        *olen = d > 0 ? (d - 1) / astep + 1 : 0;
    } else { /* n + hi.off - lo.off, a multiple of the step */
        int64_t d = nb__dim_add(op, n, hi.off);
        if (d != -1) d = nb__dim_sub(op, d, lo.off);
        if (d != -1 && astep > 1) d = nb__dim_div(op, d, astep);
        if (d == -1) return false;
        *olen = d;
    }
    *ostart = s.from_end ? nb__dim_add(op, n, s.off) : s.off;
    return *ostart != -1 || !s.from_end;
}

nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t stop, int64_t step) {
    NB_CHECK_ARG("slice", t);
    int a = nb__axis("slice", axis, t->ndim);
    if (a < 0) return NULL;
    if (step == 0 || step == INT64_MIN) {
        nb__error(NB_ERR_ARG, "slice: step must be nonzero and greater than INT64_MIN, got %lld", (long long)step);
        return NULL;
    }
    int64_t n = t->shape[a], len;
    if (nb__dim_sym(n)) {
        if (!sym_slice(n, start, stop, step, &start, &len)) return NULL;
        return nb__own(slice_norm(t, a, start, step, len));
    }
    /* Python's slice.indices(n) */
    int64_t lo = step < 0 ? -1 : 0, hi = step < 0 ? n - 1 : n;
    if (start == NB_END) start = step < 0 ? hi : lo;
    else if (start < 0) start = start + n < lo ? lo : start + n;
    else if (start > hi) start = hi;
    if (stop == NB_END) stop = step < 0 ? lo : hi;
    else if (stop < 0) stop = stop + n < lo ? lo : stop + n;
    else if (stop > hi) stop = hi;
    /* ceil(distance / |step|) written so that a huge step cannot overflow */
    len = step > 0 ? (stop > start ? (stop - start - 1) / step + 1 : 0)
                   : (start > stop ? (start - stop - 1) / -step + 1 : 0);
    if (len <= 1) step = 1; /* one element or none: the step is moot, and stride * a huge step would overflow */
    return nb__own(slice_norm(t, a, start, step, len));
}

nb_tensor *nb_narrow(nb_tensor *t, int axis, int64_t start, int64_t length) {
    NB_CHECK_ARG("narrow", t);
    int a = nb__axis("narrow", axis, t->ndim);
    if (a < 0) return NULL;
    int64_t n = t->shape[a];
    bool sym = nb__dim_sym(n) || nb__dim_sym(start) || nb__dim_sym(length);
    if ((!nb__dim_sym(start) && start < 0) || (!nb__dim_sym(length) && length < 0) ||
        (!sym && (start > n || length > n - start))) {
        char s1[64], s2[64], s3[64];
        nb__error(NB_ERR_INDEX, "narrow: start %s, length %s outside axis %d of size %s", nb__dim_str(s1, start),
                  nb__dim_str(s2, length), axis, nb__dim_str(s3, n));
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
        if (mask[d]) r = nb_slice(r, d, NB_END, NB_END, -1);
    NB_COMPOSITE_RETURN(r);
}

nb_tensor *nb_select(nb_tensor *t, int axis, int64_t index) {
    NB_CHECK_ARG("select", t);
    int a = nb__axis("select", axis, t->ndim);
    if (a < 0) return NULL;
    int64_t n = t->shape[a], given = index;
    if (nb__dim_sym(n)) { /* from the end: n + index, checked against the size when the graph runs */
        if (index < 0 && (index = nb__dim_add("select", n, index)) == -1) return NULL;
    } else if (index < -n || index >= n) {
        nb__error(NB_ERR_INDEX, "select: index %lld out of range for axis %d of size %lld", (long long)index,
                  axis, (long long)n);
        return NULL;
    } else if (index < 0)
        index += n;
    bool from_end = given != index && nb__dim_sym(n); /* kept for the run-time message */
    nb_attrs at = {.ni = from_end ? 3 : 2, .i = {a, index, from_end ? given : 0}};
    return view_apply(NB_OP_SELECT, t, &at);
}

nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int a, int b) {
    NB_CHECK_ARG("diagonal", t);
    nb_attrs at = {.ni = 3, .i = {offset, a, b}};
    return view_apply(NB_OP_DIAGONAL, t, &at);
}

nb_tensor *nb_as_strided(nb_tensor *t, const int64_t *shape, const int64_t *strides, int ndim, int64_t offset) {
    NB_CHECK_ARG("as_strided", t);
    if (ndim && !strides) {
        nb__error(NB_ERR_NULL, "as_strided: strides is NULL");
        return NULL;
    }
    if (nb__numel_checked("as_strided", shape, ndim) < 0) return NULL; /* rank, NULL shape, sizes */
    nb_attrs at = {.ni = ndim + 1};
    shape_attrs("as_strided", shape, ndim, NB_ERR_ARG, &at);
    if (ndim) memcpy(at.i, strides, sizeof(int64_t) * (size_t)ndim);
    at.i[ndim] = offset;
    return view_apply(NB_OP_AS_STRIDED, t, &at); /* not differentiable: never recorded */
}

/* ---- view adjoints ---- */

nb_tensor *nb__apply_view(nb_op op, nb_tensor *base, const nb_attrs *a) {
    NB_ASSERT(op == NB_OP_SLICE || op == NB_OP_SELECT || op == NB_OP_DIAGONAL);
    nb_attrs c = {.ni = a->ni};
    memcpy(c.i, a->i, sizeof(int64_t) * (size_t)a->ni);
    return nb__apply(op, &base, 1, &c);
}

/* VIEW_GRAD: zeros shaped like the view's base, with g written into the view; the
 * view of that base must have g's shape. */
static int infer_view_grad(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)op;
    (void)n;
    nb_tensor *g = in[0];
    if (!nb__backend_common("view_grad", &g, 1)) return -1;
    if (a->sub != NB_OP_SLICE && a->sub != NB_OP_SELECT && a->sub != NB_OP_DIAGONAL) {
        nb__error(NB_ERR_ARG, "view_grad: op %d is not an invertible view", a->sub);
        return -1;
    }
    if (a->shape_ndim < 0 || a->shape_ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_ARG, "view_grad: base rank %d outside [0, %d]", a->shape_ndim, NB_MAX_DIMS);
        return -1;
    }
    view_in base = {a->shape, a->shape_ndim, g->dtype};
    nb_meta v;
    nb_attrs va = {.ni = a->ni};
    memcpy(va.i, a->i, sizeof va.i);
    if (!view_meta((nb_op)a->sub, &base, &va, &v)) return -1;
    if (v.ndim != g->ndim || memcmp(v.shape, g->shape, sizeof(int64_t) * (size_t)g->ndim)) {
        nb__error(NB_ERR_SHAPE, "view_grad: gradient %s does not have the shape %s of the %s view of %s",
                  NB_SHAPE_STR(g), NB_DIMS_STR(v.shape, v.ndim), nb__ops[a->sub].name,
                  NB_DIMS_STR(base.shape, base.ndim));
        return -1;
    }
    memcpy(a->i, va.i, sizeof va.i);
    m->dtype = g->dtype;
    m->weak = false;
    m->ndim = base.ndim;
    memcpy(m->shape, base.shape, sizeof(int64_t) * (size_t)base.ndim);
    return 1;
}

static nb_status exec_view_grad(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                                nb_tensor **out) {
    (void)op;
    (void)n;
    (void)nout;
    nb_tensor *g = in[0];
    const nb_backend *be = nb__backend_of(g);
    nb_tensor *r = nb__meta_new(m, g->storage->device);
    if (!r) return nb_last_status();
    nb_tensor *zero = nb__weak_scalar(0, g->storage->device);
    nb_tensor *z = zero ? nb__expand_raw(zero, m->shape, m->ndim) : NULL;
    nb_status st = z ? be->copy(r, z) : NB_ERR_OOM;
    nb_tensor *v = st == NB_OK ? view_build((nb_op)a->sub, r, a) : NULL;
    st = v ? be->copy(v, g) : NB_ERR_OOM;
    nb_release(v);
    nb_release(z);
    nb_release(zero);
    if (st != NB_OK) {
        nb_release(r);
        return st;
    }
    out[0] = r;
    return NB_OK;
}

const nb_kind_impl nb__kind_view_grad = {infer_view_grad, exec_view_grad};

nb_tensor *nb__view_grad(nb_tensor *g, nb_op view_op, const nb_attrs *va, const int64_t *base_shape, int base_ndim) {
    NB_CHECK_ARG("view_grad", g);
    nb_attrs a = {.ni = va->ni, .sub = view_op, .shape_ndim = base_ndim};
    memcpy(a.i, va->i, sizeof(int64_t) * (size_t)va->ni);
    memcpy(a.shape, base_shape, sizeof(int64_t) * (size_t)base_ndim);
    return nb__apply(NB_OP_VIEW_GRAD, &g, 1, &a);
}
