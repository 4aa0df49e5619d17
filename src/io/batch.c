/* batch.c — mini-batches: the rows a permutation selects, gathered with memcpy. */
#include "../core/internal.h"

#include <string.h>

static const char *OP = "take_rows";

static bool check_args(nb_tensor *x, nb_tensor *perm, int64_t start, int64_t count) {
    if (x->ndim < 1) {
        nb__error(NB_ERR_SHAPE, "%s: x of shape %s has no rows", OP, NB_SHAPE_STR(x));
        return false;
    }
    if (perm->ndim != 1) {
        nb__error(NB_ERR_SHAPE, "%s: perm of shape %s is not 1-D", OP, NB_SHAPE_STR(perm));
        return false;
    }
    if (perm->dtype != NB_I64 && perm->dtype != NB_I32) {
        nb__error(NB_ERR_DTYPE, "%s: perm has dtype %s, expected int64 or int32", OP, nb_dtype_name(perm->dtype));
        return false;
    }
    if (!nb__is_host(x->storage->device) || !nb__is_host(perm->storage->device)) {
        nb__error(NB_ERR_DEVICE, "%s: x and perm must be on a host device (cpu or ref)", OP);
        return false;
    }
    if (start < 0 || start > perm->shape[0] || count < 0) {
        nb__error(NB_ERR_ARG, "%s: start %lld / count %lld invalid for perm of length %lld", OP, (long long)start,
                  (long long)count, (long long)perm->shape[0]);
        return false;
    }
    return true;
}

/* perm[i] for a 1-D i64/i32 tensor, any stride */
static int64_t perm_at(const nb_tensor *perm, int64_t i) {
    const char *p = nb__ptr(perm) + i * perm->stride[0] * (int64_t)nb_dtype_size(perm->dtype);
    if (perm->dtype == NB_I64) {
        int64_t v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* out[i] = src row perm[start + i]; src is contiguous */
static bool copy_rows(nb_tensor *out, const nb_tensor *src, const nb_tensor *perm, int64_t start) {
    int64_t rows = src->shape[0], k = out->shape[0];
    size_t row_bytes = k ? (size_t)(nb__numel(out) / k) * nb_dtype_size(src->dtype) : 0;
    const char *s = nb__ptr(src);
    char *d = nb__ptr(out);
    for (int64_t i = 0; i < k; i++) {
        int64_t r = perm_at(perm, start + i);
        if (r < 0 || r >= rows) {
            nb__error(NB_ERR_INDEX, "%s: perm[%lld] = %lld outside [0, %lld) for x of shape %s", OP,
                      (long long)(start + i), (long long)r, (long long)rows, NB_SHAPE_STR(src));
            return false;
        }
        memcpy(d + (size_t)i * row_bytes, s + (size_t)r * row_bytes, row_bytes);
    }
    return true;
}

nb_tensor *nb_take_rows(nb_tensor *x, nb_tensor *perm, int64_t start, int64_t count) {
    NB_CHECK_ARG(OP, x);
    NB_CHECK_ARG(OP, perm);
    if (!check_args(x, perm, start, count)) return NULL;
    int64_t avail = perm->shape[0] - start;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[0] = count < avail ? count : avail;
    nb_scope_begin(); /* owns the contiguous copy of x */
    nb_no_grad_begin(); /* data loading is not recorded */
    nb_tensor *src = nb_contiguous(x);
    nb_no_grad_end();
    nb_tensor *out = src ? nb__tensor_new(shape, x->ndim, x->dtype, x->storage->device) : NULL;
    if (out && !copy_rows(out, src, perm, start)) {
        nb_release(out);
        out = NULL;
    }
    nb_scope_end();
    return nb__own(out);
}
