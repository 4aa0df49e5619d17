/*
 * iter.c — walks several same-shaped strided operands together: drops size-1
 * axes, merges axes that are contiguous for every operand, then hands rows
 * of the innermost axis to a row function, with element ranges split across
 * the worker pool.  Broadcast (stride 0) and negative strides are plain
 * strides here, never materialized.  The innermost axis is the one along
 * which most operand bytes are contiguous, so a set of transposed inputs is
 * read along its rows.
 */
#include "iter.h"
#include "pool.h"

enum { MIN_ROW = 64 }; /* shortest axis worth making the inner one instead of the last */

void nb__iter_init(nb_iter *it, int nops, const nb_tensor *const *ts) {
    const nb_tensor *o = ts[0];
    int64_t es[NB_ITER_MAX_OPS];
    it->nops = nops;
    it->ndim = 0;
    it->numel = nb__numel(o);
    for (int k = 0; k < nops; k++) {
        it->base[k] = nb__ptr(ts[k]);
        es[k] = (int64_t)nb_dtype_size(ts[k]->dtype);
    }
    for (int d = 0; d < o->ndim; d++) {
        if (o->shape[d] == 1) continue;
        int n = it->ndim;
        bool merge = n > 0;
        for (int k = 0; k < nops && merge; k++)
            merge = it->bstride[k][n - 1] == ts[k]->stride[d] * es[k] * o->shape[d];
        if (merge) it->shape[n - 1] *= o->shape[d];
        else it->shape[it->ndim++] = o->shape[d];
        for (int k = 0; k < nops; k++) it->bstride[k][it->ndim - 1] = ts[k]->stride[d] * es[k];
    }
    /* the innermost axis is the one of at least MIN_ROW positions along which
     * the most operand bytes are contiguous (the last when tied): transposed
     * inputs walk their own rows, with only the output strided */
    int best = it->ndim - 1;
    int64_t best_bytes = -1;
    for (int d = it->ndim - 1; d >= 0; d--) {
        if (d < it->ndim - 1 && it->shape[d] < MIN_ROW) continue;
        int64_t bytes = 0;
        for (int k = 0; k < nops; k++) bytes += it->bstride[k][d] == es[k] ? es[k] : 0;
        if (bytes > best_bytes) {
            best_bytes = bytes;
            best = d;
        }
    }
    if (best != it->ndim - 1) { /* rotate axis best to the end */
        int last = it->ndim - 1;
        int64_t sh = it->shape[best], bs[NB_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) bs[k] = it->bstride[k][best];
        for (int d = best; d < last; d++) {
            it->shape[d] = it->shape[d + 1];
            for (int k = 0; k < nops; k++) it->bstride[k][d] = it->bstride[k][d + 1];
        }
        it->shape[last] = sh;
        for (int k = 0; k < nops; k++) it->bstride[k][last] = bs[k];
    }
    if (it->ndim == 0) { /* scalar or all-ones shape: one row of one element */
        it->ndim = 1;
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->bstride[k][0] = 0;
    }
}

typedef struct run_ctx {
    const nb_iter *it;
    nb_row_fn fn;
    void *ctx;
} run_ctx;

static void run_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const run_ctx *rc = p;
    const nb_iter *it = rc->it;
    int nd = it->ndim, last = nd - 1;
    int64_t idx[NB_MAX_DIMS] = {0};
    for (int64_t d = nd - 1, rem = lo; d >= 0 && rem > 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    char *ptr[NB_ITER_MAX_OPS];
    int64_t inner[NB_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) {
        ptr[k] = it->base[k];
        for (int d = 0; d < nd; d++) ptr[k] += idx[d] * it->bstride[k][d];
        inner[k] = it->bstride[k][last];
    }
    int64_t pos = lo;
    while (pos < hi) {
        int64_t len = it->shape[last] - idx[last];
        if (len > hi - pos) len = hi - pos;
        rc->fn(rc->ctx, len, ptr, inner);
        pos += len;
        /* advance the multi-index by len along the last axis, carrying */
        idx[last] += len;
        for (int k = 0; k < it->nops; k++) ptr[k] += len * inner[k];
        for (int d = last; d > 0 && idx[d] == it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
            for (int k = 0; k < it->nops; k++)
                ptr[k] += it->bstride[k][d - 1] - it->shape[d] * it->bstride[k][d];
        }
    }
}

void nb__iter_run(const nb_iter *it, nb_row_fn fn, void *ctx) {
    run_ctx rc = {it, fn, ctx};
    nb__parallel_for(it->numel, 32768, run_range, &rc);
}
