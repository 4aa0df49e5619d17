/* support.c — helpers shared by the tests. */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

nb_tensor *nbt_ok(nb_tensor *t, const char *expr, const char *file, int line) {
    if (!t) {
        fprintf(stderr, "%s:%d: %s failed: %s: %s\n", file, line, expr, nb_status_name(nb_last_status()),
                nb_last_message());
        fail();
    }
    return t;
}

void nbt_expect_error(nb_status code, const char *needle) {
    if (nb_last_status() != code || !strstr(nb_last_message(), needle))
        fail_msg("expected %s with '%s', got %s: %s", nb_status_name(code), needle, nb_status_name(nb_last_status()),
                 nb_last_message());
    nb_clear_error();
}

void nbt_assert_same_bits(nb_tensor *got, nb_tensor *want, const char *what) {
    nb_scope_begin();
    nb_tensor *a = NBT(nb_contiguous(NBT(nb_to_device(got, NB_CPU))));
    nb_tensor *b = NBT(nb_contiguous(NBT(nb_to_device(want, NB_CPU))));
    assert_int_equal(nb_dtype_of(a), nb_dtype_of(b));
    assert_int_equal(nb_ndim(a), nb_ndim(b));
    assert_memory_equal(nb_shape(a), nb_shape(b), sizeof(int64_t) * (size_t)nb_ndim(a));
    size_t es = nb_dtype_size(nb_dtype_of(a));
    const char *pa = nb_data_ptr(a), *pb = nb_data_ptr(b);
    for (int64_t i = 0; i < nb_numel(a); i++)
        if (memcmp(pa + (size_t)i * es, pb + (size_t)i * es, es))
            fail_msg("%s: element %lld differs in its bits: %.17g vs %.17g", what, (long long)i, nbt_at(a, i),
                     nbt_at(b, i));
    nb_scope_end();
}

double nbt_at(nb_tensor *t, int64_t flat) {
    int nd = nb_ndim(t);
    int64_t idx[NB_MAX_DIMS];
    for (int d = nd - 1; d >= 0; d--) {
        int64_t s = nb_shape(t)[d];
        idx[d] = flat % s;
        flat /= s;
    }
    double v = NAN;
    assert_int_equal(nb_get(t, idx, &v), NB_OK);
    return v;
}

double nbt_close_ratio(nb_tensor *a, nb_tensor *b, double rtol, double atol) {
    assert_non_null(a);
    assert_non_null(b);
    assert_int_equal(nb_ndim(a), nb_ndim(b));
    for (int d = 0; d < nb_ndim(a); d++) assert_int_equal(nb_shape(a)[d], nb_shape(b)[d]);
    double worst = 0;
    int64_t n = nb_numel(a);
    for (int64_t i = 0; i < n; i++) {
        double x = nbt_at(a, i), y = nbt_at(b, i);
        if (isnan(x) || isnan(y)) {
            if (isnan(x) != isnan(y)) {
                fprintf(stderr, "element %lld: %g vs %g (NaN mismatch)\n", (long long)i, x, y);
                return INFINITY;
            }
            continue;
        }
        if (isinf(x) || isinf(y)) {
            if (x != y) {
                fprintf(stderr, "element %lld: %g vs %g (inf mismatch)\n", (long long)i, x, y);
                return INFINITY;
            }
            continue;
        }
        double r = fabs(x - y) / (atol + rtol * fabs(y));
        if (r > worst) worst = r;
        if (r > 1.0) {
            fprintf(stderr, "element %lld: %.9g vs %.9g (ratio %g)\n", (long long)i, x, y, r);
            return r;
        }
    }
    return worst;
}

int nbt_setup(void **state) {
    (void)state;
    nb_clear_error();
    nb_scope_begin();
    return 0;
}

int nbt_teardown(void **state) {
    (void)state;
    nb_scope_end();
    assert_true(nb_grad_enabled());
    assert_int_equal(nb_last_status(), NB_OK);
    return 0;
}

long nbt_live_blocks, nbt_peak_blocks;

void *nbt_counting_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        if (ptr) nbt_live_blocks--;
        free(ptr);
        return NULL;
    }
    void *q = realloc(ptr, nsize);
    if (q && !ptr && ++nbt_live_blocks > nbt_peak_blocks) nbt_peak_blocks = nbt_live_blocks;
    return q;
}
