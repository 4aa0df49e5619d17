/* iter.h — strided multi-operand iteration for the CPU backend (coalesced, parallel). */
#ifndef NB_CPU_ITER_H
#define NB_CPU_ITER_H

#include "../../core/internal.h"

#define NB_ITER_MAX_OPS 24 /* a fused kernel's loads and outputs (NB_FK_MAX_IO) */

typedef struct nb_iter {
    int nops, ndim;
    int64_t numel;
    int64_t shape[NB_MAX_DIMS];
    int64_t bstride[NB_ITER_MAX_OPS][NB_MAX_DIMS]; /* byte strides */
    char *base[NB_ITER_MAX_OPS];
} nb_iter;

/** Inner loop over one row of n elements; ptrs/bstrides have one entry per operand. */
typedef void (*nb_row_fn)(void *ctx, int64_t n, char *const *ptrs, const int64_t *bstrides);

/** Set up iteration over ts[0]'s shape (every operand has that shape); merges dims. */
void nb__iter_init(nb_iter *it, int nops, const nb_tensor *const *ts);
/** Run fn over all rows, split across the pool by element ranges. */
void nb__iter_run(const nb_iter *it, nb_row_fn fn, void *ctx);

#endif
