/*
 * test_einsum.c — nb_einsum against a brute-force oracle (a loop over every
 * assignment of the subscripts, written from the definition), explicit loops
 * for the "..." cases, finite-difference gradients, and the error cases.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Deterministic values in [-1, 1) (an LCG, independent of nabla's generator). */
static void fill(double *v, int64_t n, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 7;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = -1 + 2 * (double)(s >> 8) / (double)(1u << 24);
    }
}

typedef struct operand {
    int ndim;
    int64_t shape[4];
    double v[256];
} operand;

static nb_tensor *tensor_of(const operand *o, nb_dtype dt) {
    return NBT(nb_cast(NBT(nb_from_data(o->v, o->shape, o->ndim, NB_F64)), dt));
}

/*
 * out[output subscripts] = Σ over all other subscripts of Π_k op_k[its subscripts],
 * for an explicit letters-only equation; a size-1 axis broadcasts (index 0).
 */
static int64_t brute(const char *eq, const operand *ops, int n, double *out) {
    char terms[8][16] = {{0}}, outs[16] = {0}, letters[64] = {0};
    int64_t size[128] = {0};
    int k = 0, nl = 0;
    const char *p = eq;
    for (;; p++) {
        if (*p == ',' || *p == '-') {
            k++;
            if (*p == '-') break;
            continue;
        }
        strncat(terms[k], p, 1);
    }
    assert_int_equal(k, n);
    strcpy(outs, p + 2);
    for (int i = 0; i < n; i++)
        for (int a = 0; terms[i][a]; a++) {
            int c = terms[i][a];
            if (!size[c]) letters[nl++] = (char)c;
            if (ops[i].shape[a] > size[c]) size[c] = ops[i].shape[a];
        }
    int64_t nout = 1;
    for (int a = 0; outs[a]; a++) nout *= size[(int)outs[a]];
    for (int64_t i = 0; i < nout; i++) out[i] = 0;
    int64_t val[128] = {0};
    for (int l = 0; l < nl; l++)
        if (size[(int)letters[l]] == 0) return nout; /* an empty sum: zeros */
    for (;;) {
        double prod = 1;
        for (int i = 0; i < n; i++) {
            int64_t flat = 0;
            for (int a = 0; terms[i][a]; a++)
                flat = flat * ops[i].shape[a] + (ops[i].shape[a] == 1 ? 0 : val[(int)terms[i][a]]);
            prod *= ops[i].v[flat];
        }
        int64_t o = 0;
        for (int a = 0; outs[a]; a++) o = o * size[(int)outs[a]] + val[(int)outs[a]];
        out[o] += prod;
        int d = nl - 1; /* next assignment, odometer style */
        for (; d >= 0; d--) {
            if (++val[(int)letters[d]] < size[(int)letters[d]]) break;
            val[(int)letters[d]] = 0;
        }
        if (d < 0) break;
    }
    return nout;
}

static void check_values(nb_tensor *t, const double *want, int64_t n, double tol) {
    assert_int_equal(nb_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double got = nbt_at(t, i);
        if (!(fabs(got - want[i]) <= tol * (1 + fabs(want[i])))) {
            fprintf(stderr, "element %lld: got %.12g want %.12g\n", (long long)i, got, want[i]);
            fail();
        }
    }
}

typedef struct einsum_case {
    const char *eq;     /* given to nb_einsum */
    const char *oracle; /* its explicit form, given to brute() */
    int n;
    int ndim[3];
    int64_t shape[3][4];
    int out_ndim;
    int64_t out_shape[4];
} einsum_case;

static const einsum_case cases[] = {
    {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 5}}, 2, {3, 5}},
    {"bij,bjk->bik", "bij,bjk->bik", 2, {3, 3}, {{2, 3, 4}, {2, 4, 2}}, 3, {2, 3, 2}},
    {"ii->", "ii->", 1, {2}, {{4, 4}}, 0, {0}},
    {"ii->i", "ii->i", 1, {2}, {{4, 4}}, 1, {4}},
    {"i,j->ij", "i,j->ij", 2, {1, 1}, {{3}, {5}}, 2, {3, 5}},
    {"ij->ji", "ij->ji", 1, {2}, {{3, 5}}, 2, {5, 3}},
    {"ij->", "ij->", 1, {2}, {{3, 5}}, 0, {0}},
    {"bn,anm,bm->ba", "bn,anm,bm->ba", 3, {2, 3, 2}, {{2, 3}, {4, 3, 5}, {2, 5}}, 2, {2, 4}},
    {"ij,jk", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 2}}, 2, {3, 2}},
    {"ji", "ji->ij", 1, {2}, {{3, 5}}, 2, {5, 3}},
    {"i,i", "i,i->", 2, {1, 1}, {{6}, {6}}, 0, {0}},
    {"ij,ij->ij", "ij,ij->ij", 2, {2, 2}, {{3, 4}, {3, 4}}, 2, {3, 4}},
    {"iij->j", "iij->j", 1, {3}, {{3, 3, 4}}, 1, {4}},
    {"ab,bc,cd->ad", "ab,bc,cd->ad", 3, {2, 2, 2}, {{2, 3}, {3, 4}, {4, 2}}, 2, {2, 2}},
    {"Ab, bA -> ", "Ab,bA->", 2, {2, 2}, {{3, 4}, {4, 3}}, 0, {0}},
    {"ij,ij->ij", "ij,ij->ij", 2, {2, 2}, {{3, 1}, {3, 4}}, 2, {3, 4}}, /* size 1 broadcasts (torch) */
    {"bij,jk->bik", "bij,jk->bik", 2, {3, 2}, {{2, 3, 4}, {4, 5}}, 3, {2, 3, 5}},
    {"ijk,ikl->jl", "ijk,ikl->jl", 2, {3, 3}, {{2, 3, 4}, {2, 4, 3}}, 2, {3, 3}},
    {"i,j->j", "i,j->j", 2, {1, 1}, {{3}, {4}}, 1, {4}},
    {",i->i", ",i->i", 2, {0, 1}, {{0}, {4}}, 1, {4}},
    {"bij,bjk->ik", "bij,bjk->ik", 2, {3, 3}, {{2, 3, 4}, {2, 4, 5}}, 2, {3, 5}},
    {"bij,bjk->bik", "bij,bjk->bik", 2, {3, 3}, {{1, 3, 4}, {2, 4, 5}}, 3, {2, 3, 5}},
    {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{3, 0}, {0, 2}}, 2, {3, 2}},
    {"ijkl,jl->ki", "ijkl,jl->ki", 2, {4, 2}, {{2, 3, 2, 2}, {3, 2}}, 2, {2, 2}},
};

static void equations(void **state) {
    (void)state;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const einsum_case *ec = &cases[c];
        nb_scope_begin();
        operand ops[3];
        nb_tensor *ts[3], *ts32[3];
        for (int i = 0; i < ec->n; i++) {
            ops[i].ndim = ec->ndim[i];
            memcpy(ops[i].shape, ec->shape[i], sizeof ops[i].shape);
            int64_t n = 1;
            for (int d = 0; d < ops[i].ndim; d++) n *= ops[i].shape[d];
            fill(ops[i].v, n, (uint32_t)(c * 3 + (size_t)i));
            ts[i] = tensor_of(&ops[i], NB_F64);
            ts32[i] = tensor_of(&ops[i], NB_F32);
        }
        double want[256];
        int64_t nout = brute(ec->oracle, ops, ec->n, want);
        nb_tensor *r = nb_einsum(ec->eq, ts, ec->n);
        if (!r) fprintf(stderr, "einsum '%s': %s\n", ec->eq, nb_last_message());
        assert_non_null(r);
        assert_int_equal(nb_ndim(r), ec->out_ndim);
        for (int d = 0; d < ec->out_ndim; d++) assert_int_equal(nb_shape(r)[d], ec->out_shape[d]);
        check_values(r, want, nout, 1e-13);
        /* f32 operands give f32 results, close to the f64 oracle (inputs in [-1, 1)) */
        nb_tensor *r32 = NBT(nb_einsum(ec->eq, ts32, ec->n));
        assert_int_equal(nb_dtype_of(r32), NB_F32);
        double want32[256];
        operand o32[3];
        for (int i = 0; i < ec->n; i++) { /* the oracle on the rounded inputs */
            o32[i] = ops[i];
            for (int64_t k = 0; k < nb_numel(ts32[i]); k++) o32[i].v[k] = nbt_at(ts32[i], k);
        }
        brute(ec->oracle, o32, ec->n, want32);
        check_values(r32, want32, nout, 1e-5);
        nb_scope_end();
    }
}

/* "...ij,...jk->...ik" and friends against explicit loops: a [2,1,3,4], b [3,4,2] → [2,3,3,2]. */
static void ellipsis(void **state) {
    (void)state;
    nb_scope_begin();
    double a[24], b[24], want[36];
    fill(a, 24, 40);
    fill(b, 24, 41);
    nb_tensor *ta = NBT(nb_from_data(a, NB_SHAPE(2, 1, 3, 4), NB_F64));
    nb_tensor *tb = NBT(nb_from_data(b, NB_SHAPE(3, 4, 2), NB_F64));
    for (int p = 0; p < 2; p++)
        for (int q = 0; q < 3; q++)
            for (int i = 0; i < 3; i++)
                for (int k = 0; k < 2; k++) {
                    double s = 0; /* a[p][0][i][j] · b[q][j][k]: the batch axes broadcast to [2, 3] */
                    for (int j = 0; j < 4; j++) s += a[(p * 3 + i) * 4 + j] * b[(q * 4 + j) * 2 + k];
                    want[((p * 3 + q) * 3 + i) * 2 + k] = s;
                }
    const char *forms[] = {"...ij,...jk->...ik", "...ij,...jk"}; /* implicit: "..." first, then ik */
    for (int f = 0; f < 2; f++) {
        nb_tensor *r = NBT(nb_einsum(forms[f], (nb_tensor *[]){ta, tb}, 2));
        assert_int_equal(nb_ndim(r), 4);
        assert_int_equal(nb_shape(r)[0], 2);
        assert_int_equal(nb_shape(r)[1], 3);
        check_values(r, want, 36, 1e-13);
    }
    /* "i...->...": sum over the first axis; "...ii->...i": batched diagonal */
    double sum0[6] = {0};
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 6; k++) sum0[k] += b[i * 6 + k];
    nb_tensor *b4 = NBT(nb_reshape(tb, NB_SHAPE(4, 3, 2)));
    check_values(NBT(nb_einsum("i...->...", &b4, 1)), sum0, 6, 1e-14);
    nb_tensor *sq = NBT(nb_from_data(a, NB_SHAPE(2, 3, 2, 2), NB_F64));
    double want_diag[12];
    for (int p = 0; p < 6; p++)
        for (int i = 0; i < 2; i++) want_diag[p * 2 + i] = a[p * 4 + i * 2 + i];
    check_values(NBT(nb_einsum("...ii->...i", &sq, 1)), want_diag, 12, 0);
    nb_scope_end();
}

/* Central differences of Σ w ⊙ einsum(x, others) with respect to the first operand. */
static void grad_case(const char *eq, int n, const int64_t shapes[3][4], const int *ndims) {
    nb_scope_begin();
    double v[3][64];
    nb_tensor *ts[3];
    for (int i = 0; i < n; i++) {
        int64_t c = 1;
        for (int d = 0; d < ndims[i]; d++) c *= shapes[i][d];
        fill(v[i], c, (uint32_t)(60 + i));
        ts[i] = NBT(nb_from_data(v[i], shapes[i], ndims[i], NB_F64));
    }
    assert_int_equal(nb_set_requires_grad(ts[0], true), NB_OK);
    nb_tensor *y = NBT(nb_einsum(eq, ts, n));
    double w[64];
    fill(w, nb_numel(y), 70);
    nb_tensor *wt = NBT(nb_from_data(w, nb_shape(y), nb_ndim(y), NB_F64));
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_mul(y, wt)), NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(ts[0]));
    nb_tensor *x = NBT(nb_detach(ts[0]));
    for (int64_t k = 0; k < nb_numel(x); k++) {
        double f[2];
        for (int s = 0; s < 2; s++) {
            double *xv = (double *)nb_data_ptr(x);
            double keep = xv[k];
            xv[k] = keep + (s ? -1e-6 : 1e-6);
            ts[0] = x;
            f[s] = nbt_at(NBT(nb_sum(NBT(nb_mul(NBT(nb_einsum(eq, ts, n)), wt)), NULL, 0, false)), 0);
            xv[k] = keep;
        }
        double fd = (f[0] - f[1]) / 2e-6;
        if (!(fabs(nbt_at(g, k) - fd) <= 1e-7 * (1 + fabs(fd)))) {
            fprintf(stderr, "%s: grad[%lld] %.10g vs finite difference %.10g\n", eq, (long long)k, nbt_at(g, k), fd);
            fail();
        }
    }
    nb_scope_end();
}

static void gradients(void **state) {
    (void)state;
    grad_case("bn,anm,bm->ba", 3, (const int64_t[3][4]){{2, 3}, {4, 3, 5}, {2, 5}}, (int[]){2, 3, 2});
    grad_case("anm,bn,bm->ba", 3, (const int64_t[3][4]){{4, 3, 5}, {2, 3}, {2, 5}}, (int[]){3, 2, 2});
    grad_case("ii->i", 1, (const int64_t[3][4]){{4, 4}}, (int[]){2});
    grad_case("...ij,...jk->...ik", 2, (const int64_t[3][4]){{2, 1, 3, 4}, {3, 4, 2}}, (int[]){4, 3});
    grad_case("iij->j", 1, (const int64_t[3][4]){{3, 3, 2}}, (int[]){3});
}

static void expect_error(nb_tensor *r, nb_status s, const char *needle) {
    assert_null(r);
    assert_int_equal(nb_last_status(), s);
    if (!strstr(nb_last_message(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", nb_last_message(), needle);
        fail();
    }
    nb_clear_error();
}

static void errors(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *a = NBT(nb_ones(NB_SHAPE(2, 3), NB_F32)), *b = NBT(nb_ones(NB_SHAPE(4, 5), NB_F32));
    nb_tensor *ab[] = {a, b}, *aa[] = {a, a};
    expect_error(nb_einsum("ij,jk->ik", ab, 2), NB_ERR_SHAPE, "ij,jk->ik");
    expect_error(nb_einsum("ij,jk->ik", ab, 1), NB_ERR_ARG, "2 input terms but 1 operands");
    expect_error(nb_einsum("ij->ik", aa, 1), NB_ERR_ARG, "'k'");
    expect_error(nb_einsum("ij->ii", aa, 1), NB_ERR_ARG, "twice");
    expect_error(nb_einsum("ijk->i", aa, 1), NB_ERR_SHAPE, "ijk->i");
    expect_error(nb_einsum("i->i", aa, 1), NB_ERR_SHAPE, "[2, 3]");
    expect_error(nb_einsum("i1->i", aa, 1), NB_ERR_ARG, "'1'");
    expect_error(nb_einsum("i..j->ij", aa, 1), NB_ERR_ARG, "...");
    expect_error(nb_einsum("...i...->i", aa, 1), NB_ERR_ARG, "...");
    expect_error(nb_einsum("ij->i->j", aa, 1), NB_ERR_ARG, "ij->i->j");
    expect_error(nb_einsum("ii->i", aa, 1), NB_ERR_SHAPE, "'i'");
    expect_error(nb_einsum("ij", aa, 0), NB_ERR_ARG, "ij");
    nb_tensor *ints[] = {NBT(nb_ones(NB_SHAPE(2), NB_I64))};
    expect_error(nb_einsum("i->", ints, 1), NB_ERR_DTYPE, "int64");
    nb_tensor *mixed[] = {a, NBT(nb_ones(NB_SHAPE(3), NB_F64))};
    expect_error(nb_einsum("ij,j->i", mixed, 2), NB_ERR_DTYPE, "float64");
    nb_tensor *withnull[] = {a, NULL};
    expect_error(nb_einsum("ij,j->i", withnull, 2), NB_ERR_NULL, "einsum");
    expect_error(nb_einsum(NULL, aa, 1), NB_ERR_NULL, "einsum");
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(equations),
        cmocka_unit_test(ellipsis),
        cmocka_unit_test(gradients),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
