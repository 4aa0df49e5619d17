/*
 * test_determinism.c — SPEC B5: the same inputs give bitwise-identical
 * outputs for every thread count.  Each case runs with 1, 2 and 5 threads on
 * tensors large enough (> 1e6 elements) that the parallel paths split the
 * work, and the result bytes are compared with memcmp.  Reductions are also
 * checked against the reference backend, so "identical" also means "right".
 */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 1024
#define COLS 1536 /* ROWS * COLS > 1.5e6 */

static nb_tensor *in_a, *in_b, *in_col, *in_row; /* f32 [ROWS, COLS], [ROWS, COLS], [ROWS, 1], [COLS] */

static int setup(void **state) {
    (void)state;
    nb_manual_seed(2024);
    in_a = nb_randn(NB_SHAPE(ROWS, COLS), NB_F32);
    in_b = nb_rand(NB_SHAPE(ROWS, COLS), NB_F32);
    in_col = nb_randn(NB_SHAPE(ROWS, 1), NB_F32);
    in_row = nb_rand(NB_SHAPE(COLS), NB_F32);
    return in_a && in_b && in_col && in_row ? 0 : -1;
}
static int teardown(void **state) {
    (void)state;
    nb_release(in_a);
    nb_release(in_b);
    nb_release(in_col);
    nb_release(in_row);
    return 0;
}

typedef nb_tensor *(*case_fn)(void);

/* Bytes of f() computed with `threads` threads (malloc'd; *n gets the size). */
static void *run_with(case_fn f, int threads, size_t *n) {
    nb_set_num_threads(threads);
    nb_scope_begin();
    nb_tensor *r = NBT(f());
    *n = (size_t)nb_numel(r) * nb_dtype_size(nb_dtype_of(r));
    void *buf = malloc(*n ? *n : 1);
    assert_int_equal(nb_copy_to_host(r, buf, *n), NB_OK);
    nb_scope_end();
    return buf;
}

static void assert_thread_independent(case_fn f, const char *name) {
    static const int counts[] = {2, 5};
    int saved = nb_get_num_threads();
    size_t n1, nk;
    void *one = run_with(f, 1, &n1);
    for (size_t k = 0; k < sizeof counts / sizeof *counts; k++) {
        void *other = run_with(f, counts[k], &nk);
        if (n1 != nk || memcmp(one, other, n1) != 0) {
            fprintf(stderr, "%s: result with %d threads differs from 1 thread\n", name, counts[k]);
            fail();
        }
        free(other);
    }
    free(one);
    nb_set_num_threads(saved);
}
#define CHECK(f) assert_thread_independent(f, #f)

/* f() on the CPU backend agrees with the reference backend (double accumulation). */
static void assert_matches_ref(nb_tensor *(*f)(nb_tensor *), nb_tensor *x, double rtol) {
    nb_scope_begin();
    nb_tensor *cpu = NBT(f(x));
    nb_tensor *ref = NBT(f(NBT(nb_to_device(x, NB_REF))));
    assert_close(cpu, NBT(nb_to_device(ref, NB_CPU)), rtol, 1e-4);
    nb_scope_end();
}

/* ---- elementwise with broadcasting ---- */

static nb_tensor *ew_broadcast(void) {
    /* (a * col + row) / (1 + b), then a transcendental chain */
    nb_tensor *t = nb_div(nb_add(nb_mul(in_a, in_col), in_row), nb_add(in_b, 1.0));
    return nb_sigmoid(nb_mul(nb_exp(nb_tanh(t)), t));
}
static nb_tensor *ew_strided(void) {
    /* non-contiguous operands: a transposed view and a reversed one */
    nb_tensor *at = nb_transpose(nb_reshape(in_a, NB_SHAPE(COLS, ROWS)), 0, 1);
    nb_tensor *br = nb_flip(in_b, NB_AXES(1));
    return nb_maximum(nb_sub(at, br), nb_mul(br, 0.5));
}
static nb_tensor *ew_cast(void) { return nb_cast(nb_mul(in_a, 1000.0), NB_I32); }
static nb_tensor *ew_mask(void) {
    /* where / comparison / logical kernels over contiguous, reversed, broadcast and transposed operands */
    nb_tensor *m = nb_logical_xor(nb_gt(in_a, in_col), nb_flip(nb_lt(in_b, 0.5), NB_AXES(1)));
    nb_tensor *at = nb_transpose(nb_reshape(in_a, NB_SHAPE(COLS, ROWS)), 0, 1);
    nb_tensor *bt = nb_transpose(nb_reshape(in_b, NB_SHAPE(COLS, ROWS)), 0, 1);
    nb_tensor *y = nb_where(nb_lt(at, bt), bt, at); /* all inputs transposed: walked along their rows */
    return nb_masked_fill(nb_where(nb_logical_not(at), in_row, y), m, 0.0);
}

static void elementwise(void **state) {
    (void)state;
    CHECK(ew_broadcast);
    CHECK(ew_strided);
    CHECK(ew_cast);
    CHECK(ew_mask);
}

/* ---- reductions ---- */

static nb_tensor *sum_all(void) { return nb_sum(in_a, NULL, 0, false); }
static nb_tensor *sum_first(void) { return nb_sum(in_a, NB_AXES(0), false); }
static nb_tensor *sum_last(void) { return nb_sum(in_a, NB_AXES(-1), true); }
static nb_tensor *mean_all(void) { return nb_mean(in_b, NULL, 0, false); }
static nb_tensor *mean_first(void) { return nb_mean(in_b, NB_AXES(0), true); }
static nb_tensor *mean_last(void) { return nb_mean(in_b, NB_AXES(1), false); }
static nb_tensor *sum_middle(void) { return nb_sum(nb_reshape(in_a, NB_SHAPE(32, 32, COLS)), NB_AXES(1), false); }
static nb_tensor *sum_strided(void) { return nb_sum(nb_transpose(in_a, 0, 1), NB_AXES(1), false); }
static nb_tensor *sum_f64(void) { return nb_sum(nb_cast(in_a, NB_F64), NULL, 0, false); }
static nb_tensor *max_last(void) { return nb_max(in_a, NB_AXES(-1), false); }
static nb_tensor *argmax_first(void) { return nb_argmax(in_a, 0, false); }
static nb_tensor *var_all(void) { return nb_var(in_a, NULL, 0, 1, false); }
static nb_tensor *cumsum_first(void) { return nb_cumsum(in_a, 0); }
static nb_tensor *cumsum_last(void) { return nb_cumsum(in_b, -1); }

static nb_tensor *ref_sum_all(nb_tensor *x) { return nb_sum(x, NULL, 0, false); }
static nb_tensor *ref_sum_first(nb_tensor *x) { return nb_sum(x, NB_AXES(0), false); }
static nb_tensor *ref_sum_last(nb_tensor *x) { return nb_sum(x, NB_AXES(1), false); }

static void reductions(void **state) {
    (void)state;
    CHECK(sum_all);
    CHECK(sum_first);
    CHECK(sum_last);
    CHECK(mean_all);
    CHECK(mean_first);
    CHECK(mean_last);
    CHECK(sum_middle);
    CHECK(sum_strided);
    CHECK(sum_f64);
    CHECK(max_last);
    CHECK(argmax_first);
    CHECK(var_all);
    CHECK(cumsum_first);
    CHECK(cumsum_last);
    assert_matches_ref(ref_sum_all, in_a, 1e-5);
    assert_matches_ref(ref_sum_first, in_a, 1e-5);
    assert_matches_ref(ref_sum_last, in_a, 1e-5);
}

/* ---- chains: softmax and log-softmax written out, logsumexp ---- */

static nb_tensor *softmax_chain(void) {
    nb_tensor *m = nb_max(in_a, NB_AXES(-1), true);
    nb_tensor *e = nb_exp(nb_sub(in_a, m));
    return nb_div(e, nb_sum(e, NB_AXES(-1), true));
}
static nb_tensor *log_softmax_chain(void) {
    return nb_sub(in_a, nb_logsumexp(in_a, NB_AXES(0), true));
}

static void chains(void **state) {
    (void)state;
    CHECK(softmax_chain);
    CHECK(log_softmax_chain);
}

/* ---- matmul and a backward pass ---- */

static nb_tensor *mm_square(void) {
    return nb_matmul(nb_narrow(in_a, 0, 0, 512), nb_reshape(nb_narrow(in_b, 0, 0, 384), NB_SHAPE(COLS, 384)));
}
static nb_tensor *mm_batched(void) {
    nb_tensor *x = nb_reshape(nb_narrow(in_a, 0, 0, 256), NB_SHAPE(8, 128, 384));
    nb_tensor *w = nb_reshape(nb_narrow(in_b, 0, 0, 64), NB_SHAPE(384, 256));
    return nb_matmul(x, w);
}
static nb_tensor *mm_f64_transposed(void) {
    nb_tensor *x = nb_cast(nb_narrow(nb_narrow(in_a, 0, 0, 64), 1, 0, 256), NB_F64);
    return nb_matmul(nb_transpose(x, 0, 1), x); /* [256, 256] Gram matrix */
}
static nb_tensor *grad_of_mlp(void) {
    nb_tensor *x = nb_narrow(in_a, 0, 0, 256);
    nb_tensor *w = nb_clone(nb_reshape(nb_narrow(in_b, 0, 0, 64), NB_SHAPE(COLS, 64)));
    if (nb_set_requires_grad(w, true) != NB_OK) return NULL;
    nb_tensor *h = nb_tanh(nb_add(nb_matmul(x, w), nb_narrow(in_row, 0, 0, 64)));
    if (nb_backward(nb_mean(nb_square(h), NULL, 0, false), NULL, false) != NB_OK) return NULL;
    return nb_grad(w);
}

static void linear_algebra(void **state) {
    (void)state;
    CHECK(mm_square);
    CHECK(mm_batched);
    CHECK(mm_f64_transposed);
    CHECK(grad_of_mlp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(elementwise),
        cmocka_unit_test(reductions),
        cmocka_unit_test(chains),
        cmocka_unit_test(linear_algebra),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
