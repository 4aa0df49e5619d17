/* create.c — constructors: empty, zeros, ones, full, scalar, arange, linspace, eye, from_data, from_blob;
 * and the index ramps the masks of tril, triu and attention are built from. */
#include "../backend/backend.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

nb_tensor *nb_empty(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(nb__tensor_new_op("empty", shape, ndim, dt, NB_CPU));
}

/* A new tensor with every element v; errors name `op`. */
static nb_tensor *filled(const char *op, const int64_t *shape, int ndim, nb_dtype dt, double v, nb_device dev) {
    nb_tensor *t = nb__tensor_new_op(op, shape, ndim, dt, dev);
    if (!t) return NULL;
    int64_t n = nb__numel(t);
    char *p = nb__ptr(t);
    size_t es = nb_dtype_size(dt);
    if (v == 0 && !signbit(v)) memset(p, 0, (size_t)n * es);
    else if (n > 0) {
        nb__store(p, dt, v);
        for (int64_t i = 1; i < n; i++) memcpy(p + (size_t)i * es, p, es);
    }
    return t;
}

nb_tensor *nb__full_on(const int64_t *shape, int ndim, double v, nb_dtype dt, nb_device dev) {
    return filled("full", shape, ndim, dt, v, dev);
}

nb_tensor *nb_zeros(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(filled("zeros", shape, ndim, dt, 0, NB_CPU));
}
nb_tensor *nb_ones(const int64_t *shape, int ndim, nb_dtype dt) {
    return nb__own(filled("ones", shape, ndim, dt, 1, NB_CPU));
}
nb_tensor *nb_full(const int64_t *shape, int ndim, double value, nb_dtype dt) {
    return nb__own(filled("full", shape, ndim, dt, value, NB_CPU));
}

/* Like t; for a symbolic t (whose shape may hold symbolic dims) a rank-0 constant
 * broadcast to its shape, which a trace records as an expand of that constant. */
static nb_tensor *filled_like(const char *op, const nb_tensor *t, double value) {
    NB_CHECK_ARG(op, t);
    if (!nb__is_symbolic(t)) return nb__own(filled(op, t->shape, t->ndim, t->dtype, value, t->storage->device));
    nb_tensor *s = filled(op, NULL, 0, t->dtype, value, t->storage->device);
    nb_tensor *r = s ? nb_broadcast_to(s, t->shape, t->ndim) : NULL;
    nb_release(s);
    return r;
}
nb_tensor *nb_full_like(const nb_tensor *t, double value) { return filled_like("full_like", t, value); }
nb_tensor *nb_zeros_like(const nb_tensor *t) { return filled_like("zeros_like", t, 0); }
nb_tensor *nb_ones_like(const nb_tensor *t) { return filled_like("ones_like", t, 1); }
nb_tensor *nb_scalar(double value, nb_dtype dt) { return nb__own(filled("scalar", NULL, 0, dt, value, NB_CPU)); }

nb_tensor *nb__weak_int(int64_t v, nb_device dev) {
    nb_tensor *t = filled("scalar", NULL, 0, NB_I64, 0, dev);
    if (t) {
        nb__store_i64(nb__ptr(t), NB_I64, v);
        t->weak = true;
    }
    return t;
}

nb_tensor *nb__weak_scalar(double v, nb_device dev) {
    nb_tensor *t = filled("scalar", NULL, 0, NB_F64, v, dev);
    if (t) t->weak = true;
    return t;
}

nb_tensor *nb_arange(double start, double end, double step, nb_dtype dt) {
    if (step == 0 || !isfinite(start) || !isfinite(end) || !isfinite(step)) {
        nb__error(NB_ERR_ARG, "arange: invalid range start=%g end=%g step=%g", start, end, step);
        return NULL;
    }
    double len = ceil((end - start) / step);
    if (len < 0) {
        nb__error(NB_ERR_ARG, "arange: step %g does not lead from %g to %g", step, start, end);
        return NULL;
    }
    if (len > 9e18) {
        nb__error(NB_ERR_OVERFLOW, "arange: length %g overflows int64", len);
        return NULL;
    }
    int64_t n = (int64_t)len;
    nb_tensor *t = nb__tensor_new_op("arange", &n, 1, dt, NB_CPU);
    if (!t) return NULL;
    size_t es = nb_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) nb__store(nb__ptr(t) + (size_t)i * es, dt, start + (double)i * step);
    return nb__own(t);
}

nb_tensor *nb_linspace(double start, double end, int64_t steps, nb_dtype dt) {
    if (steps < 0) {
        nb__error(NB_ERR_ARG, "linspace: steps %lld is negative", (long long)steps);
        return NULL;
    }
    nb_tensor *t = nb__tensor_new_op("linspace", &steps, 1, dt, NB_CPU);
    if (!t) return NULL;
    size_t es = nb_dtype_size(dt);
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    /* symmetric evaluation as torch: first half from start, second half from
     * end (one step is just start) */
    for (int64_t i = 0; i < steps; i++) {
        double v = i < steps / 2 || steps == 1 ? start + step * (double)i : end - step * (double)(steps - 1 - i);
        nb__store(nb__ptr(t) + (size_t)i * es, dt, v);
    }
    return nb__own(t);
}

nb_tensor *nb_eye(int64_t n, int64_t m, nb_dtype dt) {
    nb_tensor *t = filled("eye", (int64_t[]){n, m}, 2, dt, 0, NB_CPU);
    if (!t) return NULL;
    size_t es = nb_dtype_size(dt);
    for (int64_t i = 0; i < n && i < m; i++) nb__store(nb__ptr(t) + (size_t)(i * m + i) * es, dt, 1);
    return nb__own(t);
}

nb_tensor *nb_from_data(const void *data, const int64_t *shape, int ndim, nb_dtype dt) {
    nb_tensor *t = nb__tensor_new_op("from_data", shape, ndim, dt, NB_CPU);
    if (!t) return NULL;
    size_t nbytes = (size_t)nb__numel(t) * nb_dtype_size(dt);
    if (!data && nbytes) {
        nb_release(t);
        nb__error(NB_ERR_NULL, "from_data: data is NULL for shape %s", NB_DIMS_STR(shape, ndim));
        return NULL;
    }
    if (nbytes) memcpy(nb__ptr(t), data, nbytes);
    return nb__own(t);
}

nb_tensor *nb_from_blob(void *data, const int64_t *shape, const int64_t *strides, int ndim,
                        nb_dtype dt, void (*release)(void *ctx, void *data), void *ctx) {
    const char *op = "from_blob";
    if (dt < 0 || dt >= NB_DTYPE_COUNT) {
        nb__error(NB_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dt);
        return NULL;
    }
    int64_t n = nb__numel_checked(op, shape, ndim);
    if (n < 0) return NULL;
    if (!data && n > 0) {
        nb__error(NB_ERR_NULL, "%s: data is NULL", op);
        return NULL;
    }
    int64_t st[NB_MAX_DIMS];
    if (strides) memcpy(st, strides, sizeof(int64_t) * (size_t)ndim);
    else nb__contiguous_strides(shape, ndim, st);
    /* the storage spans [lo, hi] elements around data; offset puts element 0 at data */
    int64_t lo = 0, hi = 0, span = 0, es = (int64_t)nb_dtype_size(dt);
    if (n > 0 && (!nb__strided_extent(shape, st, ndim, &lo, &hi) || __builtin_sub_overflow(hi, lo, &span) ||
                  span >= INT64_MAX / es)) {
        nb__error(NB_ERR_OVERFLOW, "%s: strides %s overflow for shape %s", op, NB_DIMS_STR(st, ndim),
                  NB_DIMS_STR(shape, ndim));
        return NULL;
    }
    nb_storage *s = nb__calloc(1, sizeof *s);
    if (!s) {
        nb__error(NB_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->data = (char *)data + lo * es;
    s->nbytes = n > 0 ? (size_t)((span + 1) * es) : 0;
    s->device = NB_CPU;
    s->owned = false;
    s->release = NULL; /* set once the tensor is the caller's: on failure the caller keeps the memory */
    nb_tensor *t = nb__own(nb__tensor_view_of(s, shape, st, ndim, -lo, dt));
    if (t) {
        s->release = release;
        s->ctx = ctx;
        s->release_ptr = data;
    }
    nb__storage_release(s);
    return t;
}

nb_tensor *nb__positions(const nb_tensor *like, int64_t n, double start, nb_dtype dt) {
    nb_tensor *one = nb__own(nb__full_on(NULL, 0, 1, dt, like->storage->device));
    return nb_add(nb_cumsum(nb_expand(one, &n, 1), 0), start - 1); /* a cumsum: n may be symbolic */
}

nb_tensor *nb__index_diff(const nb_tensor *like, int64_t rows, int64_t cols) {
    nb_tensor *i = nb__positions(like, rows, 0, NB_I64), *j = nb__positions(like, cols, 0, NB_I64);
    return nb_sub(nb_unsqueeze(j, 0), nb_unsqueeze(i, 1));
}
