/* support.h — helpers shared by the tests: cmocka includes, tensor comparison, random inputs. */
#ifndef NB_TEST_SUPPORT_H
#define NB_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "nabla.h"

/** Fail the test with the last nabla error when t is NULL; returns t. */
nb_tensor *nbt_ok(nb_tensor *t, const char *expr, const char *file, int line);
#define NBT(t) nbt_ok((t), #t, __FILE__, __LINE__)
/** Max |a-b| / (atol + rtol |b|) over elements (<= 1 means close); NaNs must match position. */
double nbt_close_ratio(nb_tensor *a, nb_tensor *b, double rtol, double atol);
#define assert_close(a, b, rtol, atol) \
    assert_true(nbt_close_ratio((a), (b), (rtol), (atol)) <= 1.0)
/** Fail unless got and want have one dtype, one shape and the same bytes (on any device, any
 *  layout); the message names `what` and the first element that differs. */
void nbt_assert_same_bits(nb_tensor *got, nb_tensor *want, const char *what);
/** cmocka fixtures: setup clears the error and opens a scope; teardown closes it and
 *  asserts that recording is on and no error is pending. */
int nbt_setup(void **state);
int nbt_teardown(void **state);
/** Fail unless the pending error is `code` with a message containing `needle`; then clear it. */
void nbt_expect_error(nb_status code, const char *needle);
/** Value at a flat row-major position, as double. */
double nbt_at(nb_tensor *t, int64_t flat);
/** An allocation function for nb_set_allocator (malloc/realloc/free) that counts nabla's
 *  outstanding heap blocks in nbt_live_blocks and their high-water mark in nbt_peak_blocks, to
 *  check that work and its failures give every block back. */
void *nbt_counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
extern long nbt_live_blocks, nbt_peak_blocks;

#endif
