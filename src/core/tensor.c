/*
 * tensor.c — tensor records: creation, reference counting, autorelease
 * scopes, and the inspection functions of the public API.
 */
#include "internal.h"

#include <string.h>

void nb__contiguous_strides(const int64_t *shape, int ndim, int64_t *stride) {
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        stride[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

int64_t nb__numel_checked(const char *op, const int64_t *shape, int ndim) {
    if (ndim < 0 || ndim > NB_MAX_DIMS) {
        nb__error(NB_ERR_ARG, "%s: rank %d outside [0, %d]", op, ndim, NB_MAX_DIMS);
        return -1;
    }
    if (ndim > 0 && !shape) {
        nb__error(NB_ERR_NULL, "%s: shape is NULL for rank %d", op, ndim);
        return -1;
    }
    for (int i = 0; i < ndim; i++)
        if (nb__dim_sym(shape[i])) {
            nb__error(NB_ERR_SHAPE, "%s: symbolic dim %s at axis %d of shape %s: a new tensor needs concrete sizes",
                      op, nb__dim_str((char[64]){0}, shape[i]), i, NB_DIMS_STR(shape, ndim));
            return -1;
        } else if (shape[i] < 0) {
            nb__error(NB_ERR_ARG, "%s: negative size %lld at axis %d of shape %s", op,
                      (long long)shape[i], i, NB_DIMS_STR(shape, ndim));
            return -1;
        }
    /* The product with zeros counted as ones bounds the contiguous strides,
     * an empty tensor's too, so it must fit (torch: "Stride calculation
     * overflowed"); a zero dimension then makes the count 0. */
    int64_t span = 1;
    bool empty = false;
    for (int i = 0; i < ndim; i++) {
        empty |= shape[i] == 0;
        if (__builtin_mul_overflow(span, shape[i] ? shape[i] : 1, &span)) {
            nb__error(NB_ERR_OVERFLOW, "%s: element count of shape %s overflows int64", op,
                      NB_DIMS_STR(shape, ndim));
            return -1;
        }
    }
    return empty ? 0 : span;
}

bool nb__strided_extent(const int64_t *shape, const int64_t *stride, int ndim, int64_t *lo, int64_t *hi) {
    *lo = *hi = 0;
    for (int i = 0; i < ndim; i++) {
        int64_t ext;
        if (__builtin_mul_overflow(stride[i], shape[i] - 1, &ext) ||
            __builtin_add_overflow(ext < 0 ? *lo : *hi, ext, ext < 0 ? lo : hi))
            return false;
    }
    return true;
}

static nb_tensor *record_new(void) {
    nb_tensor *t = nb__calloc(1, sizeof *t);
    if (!t) nb__error(NB_ERR_OOM, "tensor: out of memory for a tensor record");
    else atomic_init(&t->refs, 1);
    return t;
}

nb_tensor *nb__tensor_view_of(nb_storage *s, const int64_t *shape, const int64_t *stride,
                              int ndim, int64_t offset, nb_dtype dt) {
    nb_tensor *t = record_new();
    if (!t) return NULL;
    t->ndim = ndim;
    t->dtype = dt;
    if (ndim) {
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
        memcpy(t->stride, stride, sizeof(int64_t) * (size_t)ndim);
    }
    t->offset = offset;
    t->storage = s;
    atomic_fetch_add(&s->refs, 1);
    return t;
}

nb_tensor *nb__tensor_new_op(const char *op, const int64_t *shape, int ndim, nb_dtype dt, nb_device dev) {
    if (dt < 0 || dt >= NB_DTYPE_COUNT) {
        nb__error(NB_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return NULL;
    }
    int64_t n = nb__numel_checked(op, shape, ndim);
    if (n < 0) return NULL;
    int64_t st[NB_MAX_DIMS];
    nb__contiguous_strides(shape, ndim, st);
    /* byte offsets, strides included, must fit: check the span of the strides */
    int64_t span = ndim ? st[0] * (shape[0] ? shape[0] : 1) : 1;
    size_t es = nb_dtype_size(dt);
    if ((uint64_t)span > SIZE_MAX / es || (uint64_t)span > (uint64_t)INT64_MAX / es) {
        nb__error(NB_ERR_OVERFLOW, "%s: shape %s of %s overflows the byte size", op, NB_DIMS_STR(shape, ndim),
                  nb_dtype_name(dt));
        return NULL;
    }
    nb_storage *s = nb__storage_new((size_t)n * es, dev);
    if (!s) return NULL;
    nb_tensor *t = nb__tensor_view_of(s, shape, st, ndim, 0, dt);
    nb__storage_release(s);
    return t;
}

nb_tensor *nb__tensor_new(const int64_t *shape, int ndim, nb_dtype dt, nb_device dev) {
    return nb__tensor_new_op("empty", shape, ndim, dt, dev);
}

nb_tensor *nb_retain(nb_tensor *t) {
    if (t) atomic_fetch_add(&t->refs, 1);
    return t;
}

void nb_release(nb_tensor *t) {
    if (!t || atomic_fetch_sub(&t->refs, 1) != 1) return;
    nb__storage_release(t->storage);
    if (t->node) nb__node_release(t->node);
    if (t->graph) nb_graph_release(t->graph);
    nb_release(atomic_load(&t->lazy_value));
    nb_release(t->grad);
    nb__free(t);
}

/* ---- autorelease scopes ----
 * Scope levels 0 … tl_depth-1 have an item array; when the stack cannot grow,
 * nb_scope_begin opens a "lost" level instead (tl_lost counts them, always
 * innermost): it owns nothing, so every result registered with it is
 * released and its op fails with NB_ERR_OOM until the matching nb_scope_end. */

typedef struct scope {
    nb_tensor **items;
    size_t n, cap;
} scope;

static _Thread_local scope *tl_scopes;
static _Thread_local int tl_depth, tl_cap, tl_lost;
static _Thread_local int tl_guard; /* levels 1 … tl_guard are closed by nb__scope_unguard only */

void nb_scope_begin(void) {
    if (!tl_lost && tl_depth == tl_cap) {
        int cap = tl_cap ? 2 * tl_cap : 8;
        scope *s = nb__realloc(tl_scopes, sizeof *s * (size_t)cap);
        if (s) {
            memset(s + tl_cap, 0, sizeof *s * (size_t)(cap - tl_cap));
            tl_scopes = s;
            tl_cap = cap;
        }
    }
    if (tl_lost || tl_depth == tl_cap) {
        if (!tl_lost) nb__error(NB_ERR_OOM, "scope_begin: out of memory opening scope level %d", tl_depth + 1);
        tl_lost++;
        return;
    }
    tl_scopes[tl_depth++].n = 0;
}

static void scope_close(void) {
    if (tl_lost) {
        tl_lost--;
        return;
    }
    if (tl_depth == 0) {
        nb__error(NB_ERR_STATE, "scope_end: no open scope (nb_scope_end without a matching nb_scope_begin)");
        return;
    }
    scope *s = &tl_scopes[--tl_depth];
    for (size_t i = s->n; i-- > 0;) nb_release(s->items[i]);
    s->n = 0;
    if (tl_depth == 0) { /* outermost closed: give the memory back */
        for (int i = 0; i < tl_cap; i++) nb__free(tl_scopes[i].items);
        nb__free(tl_scopes);
        tl_scopes = NULL;
        tl_cap = 0;
    }
}

void nb_scope_end(void) {
    if (tl_depth + tl_lost > 0 && tl_depth + tl_lost == tl_guard) {
        nb__error(NB_ERR_STATE, "scope_end: the innermost open scope is a graph trace's (nb_scope_end without a "
                  "matching nb_scope_begin inside nb_graph_begin ... nb_graph_end)");
        return;
    }
    scope_close();
}

int nb__scope_guard(void) {
    int prev = tl_guard;
    nb_scope_begin();
    tl_guard = tl_depth + tl_lost;
    return prev;
}

void nb__scope_unguard(int prev) {
    while (tl_depth + tl_lost >= tl_guard && tl_depth + tl_lost > 0) scope_close();
    tl_guard = prev;
}

/* Room for one more item in level k (< tl_depth + tl_lost); false if there is none. */
static bool scope_reserve(int k) {
    if (k >= tl_depth) return false; /* a lost level */
    scope *s = &tl_scopes[k];
    if (s->n < s->cap) return true;
    size_t cap = s->cap ? 2 * s->cap : 32;
    nb_tensor **it = nb__realloc(s->items, sizeof *it * cap);
    if (!it) return false;
    s->items = it;
    s->cap = cap;
    return true;
}

static nb_tensor *scope_full(nb_tensor *t, int k) {
    nb_release(t);
    nb__error(NB_ERR_OOM, "scope: out of memory registering a result with scope level %d", k + 1);
    return NULL;
}

nb_tensor *nb__own(nb_tensor *t) {
    int k = tl_depth + tl_lost - 1; /* the innermost level */
    if (!t || k < 0) return t;
    if (!scope_reserve(k)) return scope_full(t, k);
    scope *s = &tl_scopes[k];
    s->items[s->n++] = t;
    return t;
}

nb_tensor *nb__scope_take(nb_tensor *t) {
    if (!t) return NULL;
    if (tl_lost) return nb_retain(t); /* a lost level owns nothing */
    if (tl_depth == 0) return t; /* no scope: a public result already belongs to the caller */
    scope *s = &tl_scopes[tl_depth - 1];
    for (size_t i = s->n; i-- > 0;) {
        if (s->items[i] == t) {
            memmove(s->items + i, s->items + i + 1, sizeof *s->items * (s->n - i - 1));
            s->n--;
            return t;
        }
    }
    return nb_retain(t);
}

nb_tensor *nb_scope_keep(nb_tensor *t) {
    if (!t) return NULL;
    int outer = tl_depth + tl_lost - 2; /* the enclosing level; -1: the caller */
    if (outer < -1) return nb_retain(t); /* owned by no scope: a new reference */
    if (outer >= 0 && !scope_reserve(outer)) { /* make room first: on failure t stays where it was */
        nb__error(NB_ERR_OOM, "scope_keep: out of memory registering the tensor with scope level %d", outer + 1);
        return NULL;
    }
    nb__scope_take(t);
    if (outer >= 0) tl_scopes[outer].items[tl_scopes[outer].n++] = t;
    return t;
}

/* ---- inspection ---- */

int nb_ndim(const nb_tensor *t) { return t ? t->ndim : -1; }
const int64_t *nb_shape(const nb_tensor *t) { return t ? t->shape : NULL; }
const int64_t *nb_strides(const nb_tensor *t) { return t ? t->stride : NULL; }
int64_t nb_numel(const nb_tensor *t) {
    if (!t) return -1;
    for (int i = 0; i < t->ndim; i++)
        if (nb__dim_sym(t->shape[i])) {
            nb__error(NB_ERR_STATE, "numel: axis %d of the symbolic tensor has the symbolic dim %s", i,
                      nb__dim_str((char[64]){0}, t->shape[i]));
            return -1;
        }
    return nb__numel(t);
}
int64_t nb_offset(const nb_tensor *t) { return t ? t->offset : -1; }
nb_dtype nb_dtype_of(const nb_tensor *t) { return t ? t->dtype : NB_DTYPE_COUNT; }
nb_device nb_device_of(const nb_tensor *t) {
    return t ? t->storage->device : (nb_device){NB_DEVICE_TYPE_COUNT, -1};
}

int64_t nb_size(const nb_tensor *t, int axis) {
    if (!t) {
        nb__error(NB_ERR_NULL, "size: tensor is NULL");
        return -1;
    }
    int a = nb__axis("size", axis, t->ndim);
    return a < 0 ? -1 : t->shape[a];
}

bool nb_is_contiguous(const nb_tensor *t) {
    if (!t) return false;
    if (nb__numel(t) == 0) return true; /* no element to place */
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b) {
    return a && b && a->storage->data == b->storage->data;
}

void *nb_data_ptr(const nb_tensor *t) {
    if (!t) {
        nb__error(NB_ERR_NULL, "data_ptr: tensor is NULL");
        return NULL;
    }
    if (!(t = nb__readable("data_ptr", t))) return NULL;
    if (!nb__is_host(t->storage->device)) {
        nb__error(NB_ERR_DEVICE, "data_ptr: tensor lives on a non-host device");
        return NULL;
    }
    return nb__ptr(t);
}

int nb__axis(const char *op, int axis, int ndim) {
    int lim = ndim > 0 ? ndim : 1; /* rank-0 tensors accept axis 0 / -1 where meaningful */
    if (axis < -lim || axis >= lim || (ndim == 0)) {
        if (ndim == 0)
            nb__error(NB_ERR_AXIS, "%s: axis %d is invalid for a rank-0 tensor", op, axis);
        else
            nb__error(NB_ERR_AXIS, "%s: axis %d out of range for rank %d (expected [%d, %d])",
                      op, axis, ndim, -ndim, ndim - 1);
        return -1;
    }
    return axis < 0 ? axis + ndim : axis;
}

int nb__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b, int nb,
                         int64_t *out) {
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - na ? 1 : a[i - (n - na)];
        int64_t db = i < n - nb ? 1 : b[i - (n - nb)];
        if (da != db && da != 1 && db != 1) {
            /* a symbolic dim broadcasts with 1 and with itself only (it is assumed not to be 1) */
            nb__error(NB_ERR_SHAPE, "%s: shapes %s and %s do not broadcast (axis %d: %s vs %s)", op,
                      NB_DIMS_STR(a, na), NB_DIMS_STR(b, nb), i, nb__dim_str((char[64]){0}, da),
                      nb__dim_str((char[64]){0}, db));
            return -1;
        }
        out[i] = da == 1 ? db : da;
    }
    return n;
}
