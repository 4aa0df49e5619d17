/* pool.h — the CPU backend's persistent worker pool. */
#ifndef NB_POOL_H
#define NB_POOL_H

#include <stdint.h>

/** Body of a parallel loop: process items [lo, hi).  `tid` is the range's index
 *  (below 4 * nb_get_num_threads() for nb__parallel_for; the chunk for nb__parallel_chunks). */
typedef void (*nb_range_fn)(void *ctx, int64_t lo, int64_t hi, int tid);

/**
 * Run fn over [0, n) split into at most 4 * nb_get_num_threads() contiguous
 * ranges of at least `grain` items (several a thread, so the threads finish
 * together when one starts late); the caller takes part, and ranges go to
 * whichever thread claims them first, so fn must not depend on the split.
 * Runs inline when n < 2 * grain, when one thread is configured, or when
 * called from inside a pool worker (no nested oversubscription).
 */
void nb__parallel_for(int64_t n, int64_t grain, nb_range_fn fn, void *ctx);

/**
 * Like nb__parallel_for but with exactly `nchunks` fixed ranges chosen by the
 * caller ([i*n/nchunks, (i+1)*n/nchunks)); chunk boundaries never depend on
 * the thread count, which keeps reductions bitwise reproducible (B5).
 * `tid` passed to fn is the chunk index.
 */
void nb__parallel_chunks(int64_t n, int64_t nchunks, nb_range_fn fn, void *ctx);

/**
 * The initial thread count: NB_NUM_THREADS when it is an integer in
 * [1, 256], else the online CPU count (with a warning line on stderr when
 * the variable is set but invalid).  Read once by the pool; exposed for tests.
 */
int nb__env_num_threads(void);

#endif
