/*
 * test_nn_ops.c — softmax, log_softmax, layer_norm, rms_norm, dropout and the
 * losses, checked against the definitions evaluated in double with plain C
 * loops, against the reference backend, and (gradients) against closed forms
 * and central finite differences.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---- */

/* Deterministic values in [lo, hi) (an LCG, independent of nabla's generator). */
static void fill(double *v, int64_t n, double lo, double hi, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        v[i] = lo + (hi - lo) * (double)(s >> 8) / (double)(1u << 24);
    }
}

/* Tensor of dtype dt from doubles (through f64, so f32 inputs are the rounded values). */
static nb_tensor *tensor_of(const double *v, const int64_t *shape, int ndim, nb_dtype dt) {
    return NBT(nb_cast(NBT(nb_from_data(v, shape, ndim, NB_F64)), dt));
}

/* Elements of t (any dtype) as doubles, row-major. */
static void values(nb_tensor *t, double *out) {
    nb_tensor *c = NBT(nb_contiguous(NBT(nb_cast(t, NB_F64))));
    assert_int_equal(nb_copy_to_host(c, out, sizeof(double) * (size_t)nb_numel(c)), NB_OK);
}

static void assert_values(nb_tensor *t, const double *want, int64_t n, double rtol, double atol) {
    assert_int_equal(nb_numel(t), n);
    double got[512];
    assert_true(n <= 512);
    values(t, got);
    for (int64_t i = 0; i < n; i++) {
        if (isnan(want[i])) {
            assert_true(isnan(got[i]));
            continue;
        }
        if (isinf(want[i])) {
            assert_true(got[i] == want[i]);
            continue;
        }
        if (!(fabs(got[i] - want[i]) <= atol + rtol * fabs(want[i]))) {
            fprintf(stderr, "element %lld: got %.12g want %.12g\n", (long long)i, got[i], want[i]);
            fail();
        }
    }
}

static double scalar_of(nb_tensor *t) {
    double v;
    assert_int_equal(nb_item(t, &v), NB_OK);
    return v;
}

static void expect_error(nb_tensor *r, nb_status s, const char *needle) {
    assert_null(r);
    assert_int_equal(nb_last_status(), s);
    if (needle && !strstr(nb_last_message(), needle)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", nb_last_message(), needle);
        fail();
    }
    nb_clear_error();
}

/* softmax of rows of length n with stride `step` in double: the definition exp(x)/Σexp(x). */
static void softmax_ref(const double *x, double *y, int64_t n, int64_t step, bool log_form) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, x[i * step]);
    for (int64_t i = 0; i < n; i++) s += exp(x[i * step] - m);
    for (int64_t i = 0; i < n; i++) y[i * step] = log_form ? x[i * step] - m - log(s) : exp(x[i * step] - m) / s;
}

/* A scalar function of one f64 input, for gradient checks. */
typedef nb_tensor *(*scalar_fn)(nb_tensor *x, const void *ctx);

/* Compare the backward gradient of f at x0 with central differences (h = 1e-6). */
static void check_grad(scalar_fn f, const void *ctx, const double *x0, const int64_t *shape, int ndim, double tol) {
    nb_scope_begin();
    nb_tensor *x = tensor_of(x0, shape, ndim, NB_F64);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_int_equal(nb_backward(NBT(f(x, ctx)), NULL, false), NB_OK);
    double g[256], xv[256];
    int64_t n = nb_numel(x);
    assert_true(n <= 256);
    values(NBT(nb_grad(x)), g);
    memcpy(xv, x0, sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        const double h = 1e-6;
        xv[i] = x0[i] + h;
        double fp = scalar_of(NBT(f(tensor_of(xv, shape, ndim, NB_F64), ctx)));
        xv[i] = x0[i] - h;
        double fm = scalar_of(NBT(f(tensor_of(xv, shape, ndim, NB_F64), ctx)));
        xv[i] = x0[i];
        double fd = (fp - fm) / (2 * h);
        if (!(fabs(g[i] - fd) <= tol * (1 + fabs(fd)))) {
            fprintf(stderr, "grad[%lld]: backward %.10g, finite difference %.10g\n", (long long)i, g[i], fd);
            fail();
        }
    }
    nb_scope_end();
}

/* ---- softmax / log_softmax ---- */

/* Zero-size axes as torch 1.13 gives them: softmax(zeros(0,4), 0) has shape [0,4],
 * logsumexp over the empty axis is -inf (log of an empty sum), chunk(…, 3) of an
 * empty axis gives 3 empty pieces. */
static void empty_axes(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *x = NBT(nb_zeros(NB_SHAPE(0, 4), NB_F32));
    nb_tensor *sm = NBT(nb_softmax(x, 0)), *lsm = NBT(nb_log_softmax(x, 0));
    assert_int_equal(nb_ndim(sm), 2);
    assert_int_equal(nb_shape(sm)[0], 0);
    assert_int_equal(nb_shape(lsm)[1], 4);
    nb_tensor *lse = NBT(nb_logsumexp(x, NB_AXES(0), false));
    assert_int_equal(nb_numel(lse), 4);
    for (int64_t i = 0; i < 4; i++) assert_true(isinf(nbt_at(lse, i)) && nbt_at(lse, i) < 0);
    nb_tensor *pieces[4] = {0};
    assert_int_equal(nb_chunk(x, 3, 0, pieces, 4), 3);
    for (int i = 0; i < 3; i++) assert_int_equal(nb_numel(pieces[i]), 0);
    nb_scope_end();
}

static void softmax_values(void **state) {
    (void)state;
    nb_scope_begin();
    enum { R = 5, C = 7 };
    double x[R * C], want[R * C];
    fill(x, R * C, -4, 4, 1);
    for (int j = 0; j < C; j++) x[j] = 1000 + j; /* stability: exp(1000) overflows */
    x[C] = -INFINITY;                         /* a -inf logit gets probability 0 */
    for (int dt = 0; dt < 2; dt++) {
        nb_dtype type = dt ? NB_F64 : NB_F32;
        double xr[R * C], tol = dt ? 1e-13 : 2e-6;
        nb_tensor *t = tensor_of(x, NB_SHAPE(R, C), type);
        values(t, xr); /* the oracle sees the rounded inputs */
        for (int lg = 0; lg < 2; lg++) {
            for (int r = 0; r < R; r++) softmax_ref(xr + r * C, want + r * C, C, 1, lg);
            nb_tensor *y = NBT(lg ? nb_log_softmax(t, -1) : nb_softmax(t, 1));
            assert_int_equal(nb_dtype_of(y), type);
            assert_values(y, want, R * C, tol, lg ? 4 * tol : 1e-300);
            for (int c = 0; c < C; c++) softmax_ref(xr + c, want + c, R, C, lg);
            assert_values(NBT(lg ? nb_log_softmax(t, 0) : nb_softmax(t, 0)), want, R * C, tol, lg ? 4 * tol : 1e-300);
        }
    }
    /* CPU against the reference backend on a wider input */
    double big[16 * 33];
    fill(big, 16 * 33, -20, 20, 2);
    nb_tensor *b = tensor_of(big, NB_SHAPE(16, 33), NB_F32);
    nb_tensor *bref = NBT(nb_to_device(b, NB_REF));
    assert_close(NBT(nb_softmax(b, 1)), NBT(nb_softmax(bref, 1)), 1e-6, 1e-9);
    assert_close(NBT(nb_log_softmax(b, 0)), NBT(nb_log_softmax(bref, 0)), 1e-6, 1e-6);
    /* rank 0: softmax of one value is 1, log_softmax 0 */
    assert_true(scalar_of(NBT(nb_softmax(NBT(nb_scalar(3.5, NB_F32)), 0))) == 1.0);
    assert_true(scalar_of(NBT(nb_log_softmax(NBT(nb_scalar(3.5, NB_F32)), -1))) == 0.0);
    expect_error(nb_softmax(NBT(nb_arange(0, 4, 1, NB_I64)), 0), NB_ERR_DTYPE, "int64");
    expect_error(nb_softmax(b, 2), NB_ERR_AXIS, NULL);
    expect_error(nb_log_softmax(NULL, 0), NB_ERR_NULL, NULL);
    nb_scope_end();
}

static double g_weights[64];
static nb_tensor *weighted(nb_tensor *y) {
    return nb_sum(nb_mul(y, tensor_of(g_weights, nb_shape(y), nb_ndim(y), NB_F64)), NULL, 0, false);
}
static nb_tensor *softmax_loss(nb_tensor *x, const void *ctx) {
    return weighted(*(const int *)ctx ? nb_log_softmax(x, 1) : nb_softmax(x, 1));
}

static void softmax_grad(void **state) {
    (void)state;
    double x[3 * 5];
    fill(x, 15, -3, 3, 3);
    fill(g_weights, 15, -1, 1, 4);
    for (int lg = 0; lg < 2; lg++) check_grad(softmax_loss, &lg, x, NB_SHAPE(3, 5), 1e-7);
}

/* ---- layer_norm / rms_norm ---- */

/* y[r][k] over rows of length n: (x - mean)/sqrt(var + eps) (layer) or x/sqrt(mean x² + eps) (rms), then w, b. */
static void norm_ref(const double *x, double *y, int64_t rows, int64_t n, const double *w, const double *b,
                     double eps, bool rms) {
    for (int64_t r = 0; r < rows; r++) {
        const double *xr = x + r * n;
        double mean = 0, ss = 0;
        for (int64_t k = 0; k < n; k++) mean += xr[k] / (double)n;
        if (rms) mean = 0;
        for (int64_t k = 0; k < n; k++) ss += (xr[k] - mean) * (xr[k] - mean) / (double)n;
        for (int64_t k = 0; k < n; k++)
            y[r * n + k] = (xr[k] - mean) / sqrt(ss + eps) * (w ? w[k] : 1) + (b ? b[k] : 0);
    }
}

static void norm_values(void **state) {
    (void)state;
    nb_scope_begin();
    double x[2 * 3 * 4], w[12], b[12], want[24], xr[24];
    fill(x, 24, -2, 3, 5);
    fill(w, 12, 0.5, 1.5, 6);
    fill(b, 12, -1, 1, 7);
    nb_tensor *wt = tensor_of(w, NB_SHAPE(3, 4), NB_F64), *bt = tensor_of(b, NB_SHAPE(3, 4), NB_F64);
    for (int dt = 0; dt < 2; dt++) {
        nb_dtype type = dt ? NB_F64 : NB_F32;
        double tol = dt ? 1e-12 : 3e-6;
        nb_tensor *t = tensor_of(x, NB_SHAPE(2, 3, 4), type);
        values(t, xr);
        nb_tensor *wc = NBT(nb_cast(wt, type)), *bc = NBT(nb_cast(bt, type));
        double wr[12], br[12];
        values(wc, wr);
        values(bc, br);
        norm_ref(xr, want, 2, 12, wr, br, 1e-5, false);
        assert_values(NBT(nb_layer_norm(t, 2, wc, bc, 1e-5)), want, 24, tol, tol);
        norm_ref(xr, want, 6, 4, NULL, NULL, 1e-3, false);
        assert_values(NBT(nb_layer_norm(t, 1, NULL, NULL, 1e-3)), want, 24, tol, tol);
        norm_ref(xr, want, 2, 12, wr, NULL, 1e-6, true);
        assert_values(NBT(nb_rms_norm(t, 2, wc, 1e-6)), want, 24, tol, tol);
        norm_ref(xr, want, 1, 24, NULL, NULL, 0.1, true);
        assert_values(NBT(nb_rms_norm(t, 3, NULL, 0.1)), want, 24, tol, tol);
    }
    nb_tensor *t = tensor_of(x, NB_SHAPE(2, 3, 4), NB_F32);
    expect_error(nb_layer_norm(t, 2, NBT(nb_ones(NB_SHAPE(4, 3), NB_F32)), NULL, 1e-5), NB_ERR_SHAPE, "[4, 3]");
    expect_error(nb_layer_norm(t, 1, NULL, NBT(nb_ones(NB_SHAPE(3), NB_F32)), 1e-5), NB_ERR_SHAPE, "[3]");
    expect_error(nb_rms_norm(t, 4, NULL, 1e-5), NB_ERR_ARG, "nnorm 4");
    expect_error(nb_rms_norm(t, 0, NULL, 1e-5), NB_ERR_ARG, NULL);
    expect_error(nb_layer_norm(NBT(nb_ones(NB_SHAPE(2, 3), NB_I32)), 1, NULL, NULL, 1e-5), NB_ERR_DTYPE, NULL);
    nb_scope_end();
}

static nb_tensor *layer_norm_loss(nb_tensor *x, const void *ctx) {
    (void)ctx;
    nb_tensor *w = tensor_of(g_weights + 20, NB_SHAPE(5), NB_F64), *b = tensor_of(g_weights + 30, NB_SHAPE(5), NB_F64);
    return weighted(nb_layer_norm(x, 1, w, b, 1e-5));
}
static nb_tensor *rms_norm_loss(nb_tensor *x, const void *ctx) {
    (void)ctx;
    return weighted(nb_rms_norm(x, 2, tensor_of(g_weights + 20, NB_SHAPE(3, 5), NB_F64), 1e-5));
}

static void norm_grad(void **state) {
    (void)state;
    double x[15];
    fill(x, 15, -2, 2, 8);
    fill(g_weights, 64, -1, 1, 9);
    check_grad(layer_norm_loss, NULL, x, NB_SHAPE(3, 5), 1e-6);
    check_grad(rms_norm_loss, NULL, x, NB_SHAPE(3, 5), 1e-6);
}

/* ---- dropout ---- */

static void dropout(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = 20000 };
    nb_tensor *x = NBT(nb_add(NBT(nb_rand(NB_SHAPE(N), NB_F32)), 1.0)); /* values in [1, 2): never 0 */
    /* identity when not training or p == 0: the same storage, no copy */
    assert_true(nb_shares_storage(NBT(nb_dropout(x, 0.5, false)), x));
    assert_true(nb_shares_storage(NBT(nb_dropout(x, 0.0, true)), x));
    /* p == 1: all zeros */
    assert_true(scalar_of(NBT(nb_sum(NBT(nb_abs(NBT(nb_dropout(x, 1.0, true)))), NULL, 0, false))) == 0.0);
    /* p = 0.3: each value is 0 or x/0.7, about 30% zeros (binomial sd ≈ 65 of 6000) */
    static double xv[N], yv[N];
    values(x, xv);
    nb_manual_seed(11);
    nb_tensor *y = NBT(nb_dropout(x, 0.3, true));
    values(y, yv);
    int64_t zeros = 0;
    for (int i = 0; i < N; i++) {
        if (yv[i] == 0) zeros++;
        else assert_true(fabs(yv[i] - xv[i] / 0.7) <= 3e-7 * yv[i]);
    }
    assert_true(llabs(zeros - (int64_t)(0.3 * N)) < 5 * 65);
    /* the mask comes from the thread generator: the same seed gives the same mask */
    nb_manual_seed(11);
    assert_close(NBT(nb_dropout(x, 0.3, true)), y, 0, 0);
    /* gradient: the same mask and scale */
    nb_tensor *leaf = NBT(nb_ones(NB_SHAPE(1000), NB_F64));
    assert_int_equal(nb_set_requires_grad(leaf, true), NB_OK);
    nb_tensor *d = NBT(nb_dropout(leaf, 0.5, true));
    assert_int_equal(nb_backward(NBT(nb_sum(d, NULL, 0, false)), NULL, false), NB_OK);
    assert_close(NBT(nb_grad(leaf)), d, 0, 0);
    expect_error(nb_dropout(x, 1.5, true), NB_ERR_ARG, "1.5");
    expect_error(nb_dropout(x, -0.1, false), NB_ERR_ARG, NULL);
    expect_error(nb_dropout(x, NAN, true), NB_ERR_ARG, NULL);
    nb_scope_end();
}

/* ---- cross entropy and nll ---- */

/*
 * The definition (torch docs): per target, (1-ls)·(-logp[t]) + ls/C·Σ_c(-logp[c]),
 * 0 for ignored targets; mean divides by the number of targets not ignored.
 */
static void ce_ref(const double *z, const int64_t *t, int64_t N, int64_t C, double ls, int64_t ignore,
                   double *per, double *sum, double *mean) {
    double lp[64];
    int64_t kept = 0;
    *sum = 0;
    for (int64_t i = 0; i < N; i++) {
        softmax_ref(z + i * C, lp, C, 1, true);
        per[i] = 0;
        if (t[i] == ignore) continue;
        double all = 0;
        for (int64_t c = 0; c < C; c++) all -= lp[c];
        per[i] = (1 - ls) * -lp[t[i]] + ls / (double)C * all;
        *sum += per[i];
        kept++;
    }
    *mean = *sum / (double)kept;
}

static void cross_entropy_indices(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = 6, C = 5 };
    double z[N * C], per[N], sum, mean;
    fill(z, N * C, -3, 3, 10);
    int64_t t[N] = {2, 0, -100, 4, 1, 4};
    int32_t t32[N] = {2, 0, 3, 4, 1, 3};
    nb_tensor *logits = tensor_of(z, NB_SHAPE(N, C), NB_F64);
    nb_tensor *target = NBT(nb_from_data(t, NB_SHAPE(N), NB_I64));
    const double lss[] = {0, 0.1, 1};
    for (int k = 0; k < 3; k++) {
        ce_ref(z, t, N, C, lss[k], -100, per, &sum, &mean);
        nb_cross_entropy_opts o = NB_CROSS_ENTROPY_DEFAULTS;
        o.label_smoothing = lss[k];
        assert_values(NBT(nb_cross_entropy(logits, target, o)), &mean, 1, 1e-13, 0);
        o.reduction = NB_REDUCE_SUM;
        assert_values(NBT(nb_cross_entropy(logits, target, o)), &sum, 1, 1e-13, 0);
        o.reduction = NB_REDUCE_NONE;
        assert_values(NBT(nb_cross_entropy(logits, target, o)), per, N, 1e-13, 1e-15);
    }
    /* int32 targets with ignore_index 3 (a valid class) */
    int64_t t64[N];
    for (int i = 0; i < N; i++) t64[i] = t32[i];
    ce_ref(z, t64, N, C, 0.2, 3, per, &sum, &mean);
    nb_cross_entropy_opts o = {NB_REDUCE_MEAN, 3, 0.2};
    assert_values(NBT(nb_cross_entropy(logits, NBT(nb_from_data(t32, NB_SHAPE(N), NB_I32)), o)), &mean, 1, 1e-13, 0);
    /* f32 logits against the same oracle on the rounded values */
    double zr[N * C];
    nb_tensor *l32 = tensor_of(z, NB_SHAPE(N, C), NB_F32);
    values(l32, zr);
    ce_ref(zr, t, N, C, 0, -100, per, &sum, &mean);
    nb_tensor *r32 = NBT(nb_cross_entropy(l32, target, NB_CROSS_ENTROPY_DEFAULTS));
    assert_int_equal(nb_dtype_of(r32), NB_F32);
    assert_values(r32, &mean, 1, 2e-6, 0);
    /* [C] logits with a rank-0 target */
    ce_ref(z, &t[0], 1, C, 0, -100, per, &sum, &mean);
    nb_tensor *one = NBT(nb_cross_entropy(NBT(nb_select(logits, 0, 0)), NBT(nb_scalar(2, NB_I64)),
                                          NB_CROSS_ENTROPY_DEFAULTS));
    assert_int_equal(nb_ndim(one), 0);
    assert_values(one, &mean, 1, 1e-13, 0);
    /* [N, C, d] logits: the class axis is 1 (rows of z viewed as [2, 5, 3] after a transpose) */
    nb_tensor *l3 = NBT(nb_transpose(NBT(nb_reshape(logits, NB_SHAPE(2, 3, C))), 1, 2));
    int64_t t3[6] = {2, 0, 4, 4, 1, 4};
    o = (nb_cross_entropy_opts){NB_REDUCE_NONE, 4, 0.3};
    ce_ref(z, t3, N, C, 0.3, 4, per, &sum, &mean);
    nb_tensor *r3 = NBT(nb_cross_entropy(l3, NBT(nb_from_data(t3, NB_SHAPE(2, 3), NB_I64)), o));
    assert_int_equal(nb_shape(r3)[0], 2);
    assert_int_equal(nb_shape(r3)[1], 3);
    assert_values(r3, per, N, 1e-13, 1e-15);
    /* every target ignored: the mean is NaN (0/0), the sum 0, as torch */
    int64_t ign[N] = {-100, -100, -100, -100, -100, -100};
    nb_tensor *all_ign = NBT(nb_from_data(ign, NB_SHAPE(N), NB_I64));
    assert_true(isnan(scalar_of(NBT(nb_cross_entropy(logits, all_ign, NB_CROSS_ENTROPY_DEFAULTS)))));
    o = (nb_cross_entropy_opts){NB_REDUCE_SUM, -100, 0.1};
    assert_true(scalar_of(NBT(nb_cross_entropy(logits, all_ign, o))) == 0.0);
    /* nll_loss on log_softmax is the same loss without smoothing */
    ce_ref(z, t, N, C, 0, -100, per, &sum, &mean);
    nb_tensor *lp = NBT(nb_log_softmax(logits, 1));
    assert_values(NBT(nb_nll_loss(lp, target, NB_REDUCE_MEAN, -100)), &mean, 1, 1e-13, 0);
    assert_values(NBT(nb_nll_loss(lp, target, NB_REDUCE_NONE, -100)), per, N, 1e-13, 1e-15);
    nb_scope_end();
}

static void cross_entropy_probs(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = 4, C = 3 };
    double z[N * C], p[N * C], lp[C], per[N];
    fill(z, N * C, -2, 2, 12);
    fill(p, N * C, 0, 1, 13);
    nb_tensor *logits = tensor_of(z, NB_SHAPE(N, C), NB_F64), *target = tensor_of(p, NB_SHAPE(N, C), NB_F64);
    const double ls = 0.25;
    double sum = 0; /* -Σ_c logp[c]·(p[c](1-ls) + ls/C), torch's probability form */
    for (int i = 0; i < N; i++) {
        softmax_ref(z + i * C, lp, C, 1, true);
        per[i] = 0;
        for (int c = 0; c < C; c++) per[i] -= lp[c] * (p[i * C + c] * (1 - ls) + ls / C);
        sum += per[i];
    }
    double mean = sum / N;
    nb_cross_entropy_opts o = {NB_REDUCE_MEAN, -100, ls};
    assert_values(NBT(nb_cross_entropy(logits, target, o)), &mean, 1, 1e-13, 0);
    o.reduction = NB_REDUCE_SUM;
    assert_values(NBT(nb_cross_entropy(logits, target, o)), &sum, 1, 1e-13, 0);
    o.reduction = NB_REDUCE_NONE;
    assert_values(NBT(nb_cross_entropy(logits, target, o)), per, N, 1e-13, 0);
    expect_error(nb_cross_entropy(logits, NBT(nb_ones(NB_SHAPE(N, C), NB_I64)), o), NB_ERR_DTYPE, "int64");
    nb_scope_end();
}

static void cross_entropy_errors(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *logits = NBT(nb_zeros(NB_SHAPE(3, 4), NB_F32));
    int64_t bad[3] = {1, 7, 0}, neg[3] = {1, -1, 0};
    nb_cross_entropy_opts o = NB_CROSS_ENTROPY_DEFAULTS;
    expect_error(nb_cross_entropy(logits, NBT(nb_from_data(bad, NB_SHAPE(3), NB_I64)), o), NB_ERR_INDEX, "7");
    expect_error(nb_cross_entropy(logits, NBT(nb_from_data(neg, NB_SHAPE(3), NB_I64)), o), NB_ERR_INDEX, "-1");
    expect_error(nb_nll_loss(logits, NBT(nb_from_data(bad, NB_SHAPE(3), NB_I64)), NB_REDUCE_SUM, -100),
                 NB_ERR_INDEX, "7");
    expect_error(nb_cross_entropy(logits, NBT(nb_zeros(NB_SHAPE(4), NB_I64)), o), NB_ERR_SHAPE, "[3, 4]");
    expect_error(nb_cross_entropy(logits, NBT(nb_zeros(NB_SHAPE(3), NB_F32)), o), NB_ERR_DTYPE, "float32");
    expect_error(nb_cross_entropy(NBT(nb_zeros(NB_SHAPE(3, 4), NB_I64)), NBT(nb_zeros(NB_SHAPE(3), NB_I64)), o),
                 NB_ERR_DTYPE, NULL);
    expect_error(nb_cross_entropy(logits, NULL, o), NB_ERR_NULL, NULL);
    o.label_smoothing = 1.5;
    expect_error(nb_cross_entropy(logits, NBT(nb_zeros(NB_SHAPE(3), NB_I64)), o), NB_ERR_ARG, "1.5");
    o = (nb_cross_entropy_opts){(nb_reduction)7, -100, 0};
    expect_error(nb_cross_entropy(logits, NBT(nb_zeros(NB_SHAPE(3), NB_I64)), o), NB_ERR_ARG, NULL);
    nb_scope_end();
}

/* d mean CE / dz = (softmax(z) - (1-ls)·onehot(t) - ls/C) / kept on kept rows, 0 on ignored rows. */
static void cross_entropy_grad(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = 4, C = 6 };
    double z[N * C], want[N * C], p[C];
    fill(z, N * C, -3, 3, 14);
    int64_t t[N] = {5, -100, 0, 3};
    const double ls = 0.15;
    for (int i = 0; i < N; i++) {
        softmax_ref(z + i * C, p, C, 1, false);
        for (int c = 0; c < C; c++)
            want[i * C + c] = t[i] == -100 ? 0 : (p[c] - (1 - ls) * (c == t[i]) - ls / C) / 3.0;
    }
    for (int dt = 0; dt < 2; dt++) {
        nb_tensor *x = tensor_of(z, NB_SHAPE(N, C), dt ? NB_F64 : NB_F32);
        assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
        nb_cross_entropy_opts o = {NB_REDUCE_MEAN, -100, ls};
        nb_tensor *loss = NBT(nb_cross_entropy(x, NBT(nb_from_data(t, NB_SHAPE(N), NB_I64)), o));
        assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
        assert_values(NBT(nb_grad(x)), want, N * C, dt ? 1e-12 : 1e-5, dt ? 1e-15 : 1e-7);
    }
    nb_scope_end();
}

/* ---- mse, bce ---- */

static void mse_and_bce(void **state) {
    (void)state;
    nb_scope_begin();
    enum { N = 8 };
    double x[N], y[N], mse[N], bce[N], smse = 0, sbce = 0;
    fill(x, N, -30, 30, 15);
    x[0] = 0;
    x[1] = 800; /* exp(800) overflows: the stable form must not */
    x[2] = -800;
    fill(y, N, 0, 1, 16);
    for (int i = 0; i < N; i++) {
        mse[i] = (x[i] - y[i]) * (x[i] - y[i]);
        /* -[y log σ(x) + (1-y) log(1-σ(x))] with log σ(x) = -log1p(exp(-x)) written for each sign */
        double ls = x[i] >= 0 ? -log1p(exp(-x[i])) : x[i] - log1p(exp(x[i]));
        double ls1 = ls - x[i]; /* log(1 - σ(x)) = log σ(x) - x */
        bce[i] = -(y[i] * ls + (1 - y[i]) * ls1);
        smse += mse[i];
        sbce += bce[i];
    }
    nb_tensor *xt = tensor_of(x, NB_SHAPE(N), NB_F64), *yt = tensor_of(y, NB_SHAPE(N), NB_F64);
    double mmse = smse / N, mbce = sbce / N;
    assert_values(NBT(nb_mse_loss(xt, yt, NB_REDUCE_MEAN)), &mmse, 1, 1e-14, 0);
    assert_values(NBT(nb_mse_loss(xt, yt, NB_REDUCE_SUM)), &smse, 1, 1e-14, 0);
    assert_values(NBT(nb_mse_loss(xt, yt, NB_REDUCE_NONE)), mse, N, 1e-14, 0);
    assert_values(NBT(nb_bce_with_logits(xt, yt, NB_REDUCE_MEAN)), &mbce, 1, 1e-14, 0);
    assert_values(NBT(nb_bce_with_logits(xt, yt, NB_REDUCE_SUM)), &sbce, 1, 1e-14, 0);
    assert_values(NBT(nb_bce_with_logits(xt, yt, NB_REDUCE_NONE)), bce, N, 1e-13, 1e-15);
    /* f32 on the reference backend agrees with the CPU */
    nb_tensor *x32 = NBT(nb_cast(xt, NB_F32)), *y32 = NBT(nb_cast(yt, NB_F32));
    assert_close(NBT(nb_bce_with_logits(x32, y32, NB_REDUCE_NONE)),
                 NBT(nb_bce_with_logits(NBT(nb_to_device(x32, NB_REF)), NBT(nb_to_device(y32, NB_REF)), NB_REDUCE_NONE)),
                 1e-6, 1e-7);
    /* gradient (σ(x) - y)/N, including at x = 0 exactly, where the max/abs form has a kink */
    double g[N];
    for (int i = 0; i < N; i++) g[i] = (1 / (1 + exp(-x[i])) - y[i]) / N;
    assert_int_equal(nb_set_requires_grad(xt, true), NB_OK);
    assert_int_equal(nb_backward(NBT(nb_bce_with_logits(xt, yt, NB_REDUCE_MEAN)), NULL, false), NB_OK);
    assert_values(NBT(nb_grad(xt)), g, N, 1e-12, 1e-16);
    nb_zero_grad(xt);
    for (int i = 0; i < N; i++) g[i] = 2 * (x[i] - y[i]);
    assert_int_equal(nb_backward(NBT(nb_mse_loss(xt, yt, NB_REDUCE_SUM)), NULL, false), NB_OK);
    assert_values(NBT(nb_grad(xt)), g, N, 1e-14, 0);
    /* mse broadcasts like torch; bce requires equal shapes */
    nb_tensor *col = NBT(nb_reshape(yt, NB_SHAPE(N, 1)));
    assert_int_equal(nb_ndim(NBT(nb_mse_loss(xt, col, NB_REDUCE_NONE))), 2);
    expect_error(nb_mse_loss(xt, NBT(nb_zeros(NB_SHAPE(3), NB_F64)), NB_REDUCE_MEAN), NB_ERR_SHAPE, "[3]");
    expect_error(nb_bce_with_logits(xt, col, NB_REDUCE_MEAN), NB_ERR_SHAPE, "[8, 1]");
    expect_error(nb_bce_with_logits(NBT(nb_zeros(NB_SHAPE(8), NB_I32)), yt, NB_REDUCE_MEAN), NB_ERR_DTYPE, NULL);
    expect_error(nb_mse_loss(xt, yt, NB_REDUCTION_COUNT), NB_ERR_ARG, NULL);
    nb_scope_end();
}

/* Half-precision inputs are computed in f32 and rounded once (torch's opmath): each composite on
 * f16/bf16 equals the f64 computation on the same (exactly representable) values rounded to the
 * half type, within one half-type ulp (and inf exactly where that result overflows the type); the
 * values are large enough that a sum of squares or a sum overflows f16 (65504) when computed in it.  The layer_norm values are torch 2.15's
 * (torch.nn.functional.layer_norm on float16 [0, 300, 600, 900]). */
static void half_precision_opmath(void **state) {
    (void)state;
    nb_scope_begin();
    const double v[8] = {0, 300, 600, 900, 30000, 30000, 20000, 10000};
    nb_dtype halves[2] = {NB_F16, NB_BF16};
    for (int h = 0; h < 2; h++) {
        nb_tensor *x = tensor_of(v, NB_SHAPE(2, 4), halves[h]);
        nb_tensor *x64 = NBT(nb_cast(x, NB_F64)); /* the half values, exactly */
        int ax = 1;
        nb_tensor *got[] = {
            nb_mean(x, &ax, 1, false), nb_var(x, &ax, 1, 1, false), nb_std(x, &ax, 1, 1, false),
            nb_norm(x, 2, &ax, 1, false), nb_logsumexp(nb_div(x, 1000.0), &ax, 1, false),
            nb_softmax(nb_div(x, 1000.0), 1), nb_log_softmax(nb_div(x, 1000.0), 1),
            nb_layer_norm(x, 1, NULL, NULL, 1e-5), nb_rms_norm(x, 1, NULL, 1e-5)};
        nb_tensor *x64s = NBT(nb_div(x64, 1000.0));
        nb_tensor *want[] = {
            nb_mean(x64, &ax, 1, false), nb_var(x64, &ax, 1, 1, false), nb_std(x64, &ax, 1, 1, false),
            nb_norm(x64, 2, &ax, 1, false), nb_logsumexp(x64s, &ax, 1, false),
            nb_softmax(x64s, 1), nb_log_softmax(x64s, 1),
            nb_layer_norm(x64, 1, NULL, NULL, 1e-5), nb_rms_norm(x64, 1, NULL, 1e-5)};
        double ulp = halves[h] == NB_F16 ? 0x1p-10 : 0x1p-7; /* relative spacing of the type */
        for (size_t k = 0; k < sizeof got / sizeof got[0]; k++) {
            assert_non_null(got[k]);
            assert_int_equal(nb_dtype_of(got[k]), halves[h]);
            nb_tensor *w = NBT(nb_cast(NBT(nb_cast(want[k], halves[h])), NB_F64)); /* rounded once */
            nb_tensor *g = NBT(nb_cast(got[k], NB_F64));
            for (int64_t i = 0; i < nb_numel(g); i++) {
                double a = nbt_at(g, i), b = nbt_at(w, i);
                if (isinf(b) ? a != b : !(fabs(a - b) <= ulp * fabs(b) + 1e-6)) {
                    fprintf(stderr, "%s op %zu element %lld: %g, want %g\n", nb_dtype_name(halves[h]), k,
                            (long long)i, a, b);
                    fail();
                }
            }
        }
    }
    nb_tensor *ln = NBT(nb_layer_norm(tensor_of(v, NB_SHAPE(4), NB_F16), 1, NULL, NULL, 1e-5));
    const double torch_ln[4] = {-1.341796875, -0.447265625, 0.447265625, 1.341796875};
    for (int i = 0; i < 4; i++) assert_true(nbt_at(ln, i) == torch_ln[i]);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(empty_axes),
        cmocka_unit_test(softmax_values),        cmocka_unit_test(softmax_grad),
        cmocka_unit_test(norm_values),           cmocka_unit_test(norm_grad),
        cmocka_unit_test(dropout),               cmocka_unit_test(cross_entropy_indices),
        cmocka_unit_test(cross_entropy_probs),   cmocka_unit_test(cross_entropy_errors),
        cmocka_unit_test(cross_entropy_grad),    cmocka_unit_test(mse_and_bce),
        cmocka_unit_test(half_precision_opmath),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
