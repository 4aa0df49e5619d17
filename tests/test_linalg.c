/*
 * test_linalg.c — what the goldens (tests/golden/o11_linalg.nbg, PyTorch), the
 * gradcheck, the CPU-vs-reference walk and the transforms' walks do not pin
 * for the small batched linear algebra (O11): the typed errors, each naming the
 * op, the matrix's index in the batch and the input's shape; singular inputs
 * where torch returns values (slogdet, det, logdet); results equal across
 * thread counts; a singular matrix met while a compiled graph runs; symbolic
 * sizes through tril / triu / inv.
 */
#include "support.h"

#include <math.h>
#include <string.h>

static nb_tensor *mat(const double *v, const int64_t *shape, int nd) { return NBT(nb_from_data(v, shape, nd, NB_F64)); }

static void errors_name_the_matrix(void **state) {
    (void)state;
    nb_scope_begin();
    /* batch [2, 3] of 2 x 2 matrices: identity everywhere but [1, 2], which is indefinite */
    double v[2 * 3 * 4];
    for (int m = 0; m < 6; m++) {
        v[4 * m] = v[4 * m + 3] = 1;
        v[4 * m + 1] = v[4 * m + 2] = 0;
    }
    v[4 * 5 + 1] = v[4 * 5 + 2] = 2;
    nb_tensor *a = mat(v, NB_SHAPE(2, 3, 2, 2));
    assert_null(nb_cholesky(a, false));
    nbt_expect_error(NB_ERR_ARG, "cholesky: matrix [1, 2] of the batch [2, 3] (input [2, 3, 2, 2]) is not positive "
                                 "definite: its leading minor of order 2 is not positive");
    nb_tensor *z = NBT(nb_zeros(NB_SHAPE(4, 3, 3), NB_F64)), *b = NBT(nb_ones(NB_SHAPE(4, 3, 1), NB_F64));
    nb_tensor *eye = NBT(nb_eye(3, 3, NB_F64));
    z = NBT(nb_add(z, eye));
    assert_int_equal(nb_set(z, (int64_t[]){2, 1, 1}, 0.0), NB_OK);
    assert_null(nb_solve_triangular(z, b, false, false, false));
    nbt_expect_error(NB_ERR_ARG, "solve_triangular: matrix [2] of the batch [4] (A [4, 3, 3]) is singular: the "
                                 "diagonal element 1 is zero");
    assert_int_equal(nb_set(z, (int64_t[]){2, 1, 0}, 5.0), NB_OK); /* rows 0 and 1 still independent */
    assert_int_equal(nb_set(z, (int64_t[]){2, 0, 0}, 0.0), NB_OK);
    assert_int_equal(nb_set(z, (int64_t[]){2, 1, 0}, 0.0), NB_OK); /* column 0 of matrix 2 all zero */
    assert_null(nb_solve(z, b));
    nbt_expect_error(NB_ERR_ARG, "solve: matrix [2] of the batch [4] (A [4, 3, 3]) is singular: the pivot of column 0");
    assert_null(nb_inv(z));
    nbt_expect_error(NB_ERR_ARG, "is singular");
    /* one matrix: no batch in the message */
    assert_null(nb_solve(NBT(nb_zeros(NB_SHAPE(2, 2), NB_F64)), NBT(nb_ones(NB_SHAPE(2), NB_F64))));
    nbt_expect_error(NB_ERR_ARG, "solve: matrix (A [2, 2]) is singular");
    /* shapes and dtypes */
    assert_null(nb_cholesky(NBT(nb_zeros(NB_SHAPE(2, 3), NB_F64)), false));
    nbt_expect_error(NB_ERR_SHAPE, "cholesky: expected square matrices [..., n, n], got [2, 3]");
    assert_null(nb_solve(eye, NBT(nb_ones(NB_SHAPE(4, 2), NB_F64))));
    nbt_expect_error(NB_ERR_SHAPE, "solve: B [4, 2] must be [..., n, k] for A [3, 3]");
    assert_null(nb_solve(NBT(nb_zeros(NB_SHAPE(2, 3, 3), NB_F64)), NBT(nb_ones(NB_SHAPE(3, 3, 1), NB_F64))));
    nbt_expect_error(NB_ERR_SHAPE, "solve: shapes [2] and [3] do not broadcast");
    assert_null(nb_inv(NBT(nb_zeros(NB_SHAPE(3, 3), NB_I64))));
    nbt_expect_error(NB_ERR_DTYPE, "inv: expected a float32 or float64 matrix, got int64");
    assert_null(nb_solve(eye, NBT(nb_ones(NB_SHAPE(3, 1), NB_F32))));
    nbt_expect_error(NB_ERR_DTYPE, "solve: A and B must share a dtype, got float64 and float32");
    assert_null(nb_diag(NBT(nb_zeros(NB_SHAPE(2, 2, 2), NB_F64)), 0));
    nbt_expect_error(NB_ERR_SHAPE, "diag: expected a vector or a matrix, got [2, 2, 2]");
    assert_null(nb_diag_embed(NBT(nb_zeros(NB_SHAPE(3), NB_F64)), 0, 1, -1));
    nbt_expect_error(NB_ERR_AXIS, "diag_embed: dim1 and dim2 are both 1");
    assert_null(nb_diag(NBT(nb_ones(NB_SHAPE(2), NB_F64)), INT64_MIN));
    nbt_expect_error(NB_ERR_OVERFLOW, "diag_embed: offset");
    nb_tensor *s = NULL, *l = NULL;
    assert_int_equal(nb_slogdet(NULL, &s, &l), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "slogdet");
    nb_scope_end();
}

/* torch's values at singular and negative-determinant matrices (no error). */
static void singular_values(void **state) {
    (void)state;
    nb_scope_begin();
    const double v[] = {1, 2, 2, 4, -2, 0, 0, 3}; /* singular; det -6 */
    nb_tensor *a = mat(v, NB_SHAPE(2, 2, 2)), *s = NULL, *l = NULL;
    assert_int_equal(nb_slogdet(a, &s, &l), NB_OK);
    assert_true(nbt_at(s, 0) == 0 && signbit(nbt_at(s, 0))); /* -0: one row swap before the zero pivot */
    assert_true(isinf(nbt_at(l, 0)) && nbt_at(l, 0) < 0);
    assert_true(nbt_at(s, 1) == -1 && fabs(nbt_at(l, 1) - log(6.0)) < 1e-15);
    nb_tensor *d = NBT(nb_det(a)), *ld = NBT(nb_logdet(a));
    assert_true(nbt_at(d, 0) == 0 && fabs(nbt_at(d, 1) + 6) < 1e-14);
    assert_true(isinf(nbt_at(ld, 0)) && nbt_at(ld, 0) < 0 && isnan(nbt_at(ld, 1)));
    /* logdet of a negative determinant: NaN with a zero gradient (torch) */
    nb_tensor *neg = mat((double[]){-0.5}, NB_SHAPE(1, 1));
    assert_int_equal(nb_set_requires_grad(neg, true), NB_OK);
    nb_tensor *lg = NBT(nb_logdet(neg));
    assert_true(isnan(nbt_at(lg, 0)));
    assert_int_equal(nb_backward(lg, NULL, false), NB_OK);
    assert_true(nbt_at(NBT(nb_grad(neg)), 0) == 0);
    /* 0 x 0 matrices: det 1 (torch) */
    nb_tensor *e = NBT(nb_zeros(NB_SHAPE(3, 0, 0), NB_F64));
    nb_tensor *de = NBT(nb_det(e));
    for (int i = 0; i < 3; i++) assert_true(nbt_at(de, i) == 1);
    assert_int_equal(nb_numel(NBT(nb_cholesky(e, false))), 0);
    nb_scope_end();
}

/* A batch of 200 matrices split over the threads: the same bits with 1 and 2 threads. */
static void same_bits_across_thread_counts(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(11);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(200, 7, 7), NB_F64));
    nb_tensor *a = NBT(nb_add(NBT(nb_matmul(x, NBT(nb_transpose(x, -2, -1)))), NBT(nb_eye(7, 7, NB_F64))));
    nb_tensor *b = NBT(nb_randn(NB_SHAPE(200, 7, 3), NB_F64));
    int before = nb_get_num_threads();
    nb_tensor *r[2][3];
    for (int t = 0; t < 2; t++) {
        nb_set_num_threads(t + 1);
        nb_tensor *s = NULL, *l = NULL;
        r[t][0] = NBT(nb_cholesky(a, false));
        r[t][1] = NBT(nb_solve(a, b));
        assert_int_equal(nb_slogdet(a, &s, &l), NB_OK);
        r[t][2] = l;
    }
    nb_set_num_threads(before);
    for (int k = 0; k < 3; k++)
        for (int64_t i = 0; i < nb_numel(r[0][k]); i++) {
            double p = nbt_at(r[0][k], i), q = nbt_at(r[1][k], i);
            assert_memory_equal(&p, &q, sizeof p);
        }
    nb_scope_end();
}

/* A graph with a symbolic batch and size: tril and inv at two bindings; a singular matrix met
 * while it runs is the run's typed error. */
static void in_a_compiled_graph(void **state) {
    (void)state;
    nb_scope_begin();
    int64_t B = nb_dim("B"), N = nb_dim("N");
    nb_graph *g = nb_graph_begin("la");
    nb_tensor *a = nb_graph_input(g, "a", NB_F64, (int64_t[]){B, N, N}, 3);
    nb_graph_output(g, "inv", nb_inv(a));
    nb_graph_output(g, "low", nb_tril(a, -1));
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    for (int64_t n = 2; n <= 3; n++) {
        nb_tensor *x = NBT(nb_add(NBT(nb_randn((int64_t[]){2, n, n}, 3, NB_F64)),
                                  NBT(nb_mul(NBT(nb_eye(n, n, NB_F64)), 5.0))));
        nb_tensor *res[2];
        assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"a"}, &x, 2, res), NB_OK);
        nb_tensor *want = NBT(nb_inv(x)), *low = NBT(nb_tril(x, -1));
        for (int64_t i = 0; i < nb_numel(want); i++) {
            assert_true(nbt_at(res[0], i) == nbt_at(want, i));
            assert_true(nbt_at(res[1], i) == nbt_at(low, i));
        }
    }
    nb_tensor *sing = NBT(nb_zeros(NB_SHAPE(2, 2, 2), NB_F64)), *res[2];
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"a"}, &sing, 2, res), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "solve: matrix [0] of the batch [2]");
    nb_compiled_release(c);
    nb_graph_release(g);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(errors_name_the_matrix),
        cmocka_unit_test(singular_values),
        cmocka_unit_test(same_bits_across_thread_counts),
        cmocka_unit_test(in_a_compiled_graph),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
