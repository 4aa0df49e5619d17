/*
 * test_conv.c — convolution and pooling (O8): conv2d / conv1d / unfold /
 * fold / max_pool2d / max_unpool2d / avg_pool2d against direct-loop
 * definitions computed here in double, CPU against the reference backend,
 * gradients (and a second derivative) against central finite differences
 * in f64, thread-count determinism, traced graphs that run the kernels,
 * and bad input.
 */
#include "support.h"
#include "backend/backend.h"
#include "compile/passes.h"
#include "graph/graph.h"

#include <math.h>
#include <string.h>

/* ---- helpers ---- */

static nb_tensor *randn64(const int64_t *shape, int nd) { return NBT(nb_randn(shape, nd, NB_F64)); }

/* Flat f64 copy of t (caller frees). */
static double *host64(nb_tensor *t) {
    nb_tensor *c = NBT(nb_cast(t, NB_F64));
    double *v = test_malloc(sizeof(double) * (size_t)(nb_numel(c) ? nb_numel(c) : 1));
    assert_int_equal(nb_copy_to_host(c, v, sizeof(double) * (size_t)nb_numel(c)), NB_OK);
    return v;
}

typedef struct geom {
    int64_t n, c, h, w, o, kh, kw, groups;
    int64_t stride[2], pad[2], dil[2];
    bool bias;
} geom;

static int64_t out_len(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* The definition of conv2d (cross-correlation), in double. */
static nb_tensor *conv2d_direct(nb_tensor *x, nb_tensor *w, nb_tensor *b, const geom *g) {
    int64_t oh = out_len(g->h, g->kh, g->stride[0], g->pad[0], g->dil[0]);
    int64_t ow = out_len(g->w, g->kw, g->stride[1], g->pad[1], g->dil[1]);
    int64_t cg = g->c / g->groups, og = g->o / g->groups;
    double *xv = host64(x), *wv = host64(w), *bv = b ? host64(b) : NULL;
    nb_tensor *y = NBT(nb_zeros(NB_SHAPE(g->n, g->o, oh, ow), NB_F64));
    double *yv = nb_data_ptr(y);
    for (int64_t n = 0; n < g->n; n++)
        for (int64_t o = 0; o < g->o; o++)
            for (int64_t i = 0; i < oh; i++)
                for (int64_t j = 0; j < ow; j++) {
                    double acc = bv ? bv[o] : 0;
                    for (int64_t c = 0; c < cg; c++)
                        for (int64_t p = 0; p < g->kh; p++)
                            for (int64_t q = 0; q < g->kw; q++) {
                                int64_t h = i * g->stride[0] - g->pad[0] + p * g->dil[0];
                                int64_t v = j * g->stride[1] - g->pad[1] + q * g->dil[1];
                                if (h < 0 || h >= g->h || v < 0 || v >= g->w) continue;
                                int64_t ci = (o / og) * cg + c;
                                acc += xv[((n * g->c + ci) * g->h + h) * g->w + v] *
                                       wv[((o * cg + c) * g->kh + p) * g->kw + q];
                            }
                    yv[((n * g->o + o) * oh + i) * ow + j] = acc;
                }
    test_free(xv);
    test_free(wv);
    if (bv) test_free(bv);
    return y;
}

static nb_conv2d_opts opts_of(const geom *g) {
    return (nb_conv2d_opts){{g->stride[0], g->stride[1]}, {g->pad[0], g->pad[1]}, {g->dil[0], g->dil[1]}, g->groups};
}

static const geom GEOMS[] = {
    {2, 3, 7, 6, 4, 3, 3, 1, {1, 1}, {0, 0}, {1, 1}, true},
    {2, 3, 7, 6, 4, 3, 2, 1, {2, 1}, {1, 0}, {1, 1}, false},
    {1, 4, 9, 8, 6, 3, 3, 2, {1, 2}, {2, 1}, {2, 1}, true},  /* groups, dilation */
    {3, 6, 5, 5, 6, 1, 1, 3, {1, 1}, {0, 0}, {1, 1}, true},  /* pointwise, depthwise-like */
    {1, 2, 6, 7, 2, 2, 3, 2, {3, 2}, {1, 1}, {1, 2}, false}, /* groups = channels */
    {2, 3, 6, 5, 4, 3, 3, 1, {1, 1}, {1, 1}, {1, 1}, true},  /* "same" size: the CPU's shifted-copy unfold */
    {1, 2, 7, 6, 3, 3, 3, 1, {1, 1}, {2, 2}, {2, 2}, false}, /* "same" size with dilation */
};

/* ---- forward values ---- */

static void conv2d_matches_definition_and_ref(void **state) {
    (void)state;
    nb_manual_seed(1);
    for (size_t k = 0; k < sizeof GEOMS / sizeof *GEOMS; k++) {
        const geom *g = &GEOMS[k];
        nb_scope_begin();
        nb_tensor *x = randn64(NB_SHAPE(g->n, g->c, g->h, g->w));
        nb_tensor *w = randn64(NB_SHAPE(g->o, g->c / g->groups, g->kh, g->kw));
        nb_tensor *b = g->bias ? randn64(NB_SHAPE(g->o)) : NULL;
        nb_tensor *want = conv2d_direct(x, w, b, g);
        /* f64 on CPU and REF: exact up to summation order */
        assert_close(NBT(nb_conv2d(x, w, b, opts_of(g))), want, 1e-12, 1e-12);
        nb_tensor *xr = NBT(nb_to_device(x, NB_REF)), *wr = NBT(nb_to_device(w, NB_REF));
        nb_tensor *br = b ? NBT(nb_to_device(b, NB_REF)) : NULL;
        assert_close(NBT(nb_conv2d(xr, wr, br, opts_of(g))), want, 1e-12, 1e-12);
        /* f32 on CPU (SIMD GEMM) against REF (double accumulation) */
        nb_tensor *x32 = NBT(nb_cast(x, NB_F32)), *w32 = NBT(nb_cast(w, NB_F32));
        nb_tensor *b32 = b ? NBT(nb_cast(b, NB_F32)) : NULL;
        nb_tensor *cpu = NBT(nb_conv2d(x32, w32, b32, opts_of(g)));
        nb_tensor *ref = NBT(nb_conv2d(NBT(nb_to_device(x32, NB_REF)), NBT(nb_to_device(w32, NB_REF)),
                                       b32 ? NBT(nb_to_device(b32, NB_REF)) : NULL, opts_of(g)));
        assert_close(cpu, ref, 1e-5, 1e-5);
        /* unbatched input gives the unbatched result */
        nb_tensor *x0 = NBT(nb_select(x, 0, 0));
        nb_tensor *y0 = NBT(nb_conv2d(x0, w, b, opts_of(g)));
        assert_int_equal(nb_ndim(y0), 3);
        assert_close(y0, NBT(nb_select(want, 0, 0)), 1e-12, 1e-12);
        nb_scope_end();
    }
}

static void conv1d_is_conv2d_of_height_one(void **state) {
    (void)state;
    nb_manual_seed(2);
    nb_scope_begin();
    nb_tensor *x = randn64(NB_SHAPE(2, 4, 11)), *w = randn64(NB_SHAPE(6, 2, 3)), *b = randn64(NB_SHAPE(6));
    geom g = {2, 4, 1, 11, 6, 1, 3, 2, {1, 2}, {0, 2}, {1, 3}, true};
    nb_tensor *want = conv2d_direct(NBT(nb_unsqueeze(x, 2)), NBT(nb_unsqueeze(w, 2)), b, &g);
    nb_tensor *y = NBT(nb_conv1d(x, w, b, 2, 2, 3, 2));
    assert_close(y, NBT(nb_squeeze(want, 2)), 1e-12, 1e-12);
    nb_scope_end();
}

/* unfold's definition, and fold as its adjoint: <unfold(x), c> = <x, fold(c)>. */
static void unfold_fold_definition_and_adjoint(void **state) {
    (void)state;
    nb_manual_seed(3);
    nb_scope_begin();
    nb_window2d win = {{2, 3}, {2, 1}, {1, 2}, {2, 1}};
    int64_t N = 2, C = 3, H = 6, W = 5;
    int64_t oh = out_len(H, 2, 2, 1, 2), ow = out_len(W, 3, 1, 2, 1);
    nb_tensor *x = randn64(NB_SHAPE(N, C, H, W));
    nb_tensor *u = NBT(nb_unfold(x, win));
    assert_int_equal(nb_ndim(u), 3);
    assert_int_equal(nb_shape(u)[1], C * 6);
    assert_int_equal(nb_shape(u)[2], oh * ow);
    double *xv = host64(x), *uv = host64(u);
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t p = 0; p < 2; p++)
                for (int64_t q = 0; q < 3; q++)
                    for (int64_t i = 0; i < oh; i++)
                        for (int64_t j = 0; j < ow; j++) {
                            int64_t h = i * 2 - 1 + p * 2, v = j - 2 + q;
                            double want = h >= 0 && h < H && v >= 0 && v < W ? xv[((n * C + c) * H + h) * W + v] : 0;
                            assert_true(uv[((n * C * 6) + c * 6 + p * 3 + q) * oh * ow + i * ow + j] == want);
                        }
    test_free(xv);
    test_free(uv);
    nb_tensor *cols = randn64(nb_shape(u), 3);
    nb_tensor *f = NBT(nb_fold(cols, H, W, win));
    double lhs, rhs;
    assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_mul(u, cols)), NULL, 0, false)), &lhs), NB_OK);
    assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_mul(x, f)), NULL, 0, false)), &rhs), NB_OK);
    assert_true(fabs(lhs - rhs) <= 1e-10 * (1 + fabs(lhs)));
    /* CPU f32 kernels against REF */
    nb_tensor *x32 = NBT(nb_cast(x, NB_F32)), *c32 = NBT(nb_cast(cols, NB_F32));
    assert_close(NBT(nb_unfold(x32, win)), NBT(nb_unfold(NBT(nb_to_device(x32, NB_REF)), win)), 0, 0);
    assert_close(NBT(nb_fold(c32, H, W, win)), NBT(nb_fold(NBT(nb_to_device(c32, NB_REF)), H, W, win)), 1e-6, 1e-6);
    nb_scope_end();
}

/* The CPU's shifted fold (stride 1, output as wide as the image: one pass per kernel tap over the whole
 * plane) against REF's tap-by-tap loop, bitwise (both add each tap's value in (p, q) order).  The taps
 * that land in the padding hold NaN: they must be dropped, not added (nor wrapped into the next row).
 * Then the shifted unfold (one select per tap over the plane) against REF's, byte for byte. */
static void shifted_fold_unfold_match_ref(void **state) {
    (void)state;
    nb_manual_seed(11);
    /* {kh, kw, pad h, pad w, dil h, dil w}: "same" size, a taller output (pad h 0), dilation, a 1-row kernel */
    static const int64_t G[][6] = {{3, 3, 1, 1, 1, 1}, {3, 3, 0, 1, 1, 1}, {3, 3, 2, 2, 2, 2}, {5, 3, 2, 1, 1, 1},
                                   {1, 3, 0, 1, 1, 1}, {3, 5, 1, 2, 1, 1}};
    for (size_t k = 0; k < sizeof G / sizeof *G; k++) {
        nb_scope_begin();
        const int64_t *g = G[k];
        int64_t N = 2, C = 3, H = 7, W = 6, OH = H + 2 * g[2] - g[4] * (g[0] - 1), L = OH * W, R = C * g[0] * g[1];
        nb_window2d win = {{g[0], g[1]}, {1, 1}, {g[2], g[3]}, {g[4], g[5]}};
        nb_tensor *r = NBT(nb_randn(NB_SHAPE(N, R, L), NB_F32));
        float *v = test_malloc(sizeof(float) * (size_t)(N * R * L));
        assert_int_equal(nb_copy_to_host(r, v, sizeof(float) * (size_t)(N * R * L)), NB_OK);
        for (int64_t row = 0; row < N * R; row++) {
            int64_t p = row % (g[0] * g[1]) / g[1], q = row % g[1];
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < W; j++) {
                    int64_t h = i - g[2] + p * g[4], c = j - g[3] + q * g[5];
                    if (h < 0 || h >= H || c < 0 || c >= W) v[row * L + i * W + j] = NAN;
                }
        }
        nb_tensor *cols = NBT(nb_from_data(v, NB_SHAPE(N, R, L), NB_F32));
        test_free(v);
        nb_tensor *cpu = NBT(nb_fold(cols, H, W, win));
        nb_tensor *ref = NBT(nb_fold(NBT(nb_to_device(cols, NB_REF)), H, W, win));
        assert_close(cpu, ref, 0, 0);
        /* the adjoint, unfold, bit for bit: -0, NaN and inf in the image copied, +0 at padding taps */
        float *xv = test_malloc(sizeof(float) * (size_t)(N * C * H * W));
        nb_tensor *x = NBT(nb_randn(NB_SHAPE(N, C, H, W), NB_F32));
        assert_int_equal(nb_copy_to_host(x, xv, sizeof(float) * (size_t)(N * C * H * W)), NB_OK);
        xv[0] = -0.0f;
        xv[W - 1] = NAN;
        xv[H * W + W] = -INFINITY;
        x = NBT(nb_from_data(xv, NB_SHAPE(N, C, H, W), NB_F32));
        nb_tensor *ucpu = NBT(nb_unfold(x, win));
        assert_int_equal(nb_numel(ucpu), N * R * L);
        nbt_assert_same_bits(ucpu, NBT(nb_unfold(NBT(nb_to_device(x, NB_REF)), win)), "shifted unfold");
        test_free(xv);
        nb_scope_end();
    }
}

/* Max and argmax of each window by the definition (first maximum; padding never counts). */
static void max_pool_direct(nb_tensor *x, const nb_window2d *w, nb_tensor **vals, nb_tensor **idx) {
    const int64_t *s = nb_shape(x);
    int64_t N = s[0], C = s[1], H = s[2], W = s[3];
    int64_t oh = out_len(H, w->kernel[0], w->stride[0], w->padding[0], w->dilation[0]);
    int64_t ow = out_len(W, w->kernel[1], w->stride[1], w->padding[1], w->dilation[1]);
    double *xv = host64(x);
    *vals = NBT(nb_zeros(NB_SHAPE(N, C, oh, ow), NB_F64));
    *idx = NBT(nb_zeros(NB_SHAPE(N, C, oh, ow), NB_I64));
    double *vv = nb_data_ptr(*vals);
    int64_t *iv = nb_data_ptr(*idx);
    for (int64_t pl = 0; pl < N * C; pl++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                double best = -INFINITY;
                int64_t arg = -1;
                for (int64_t p = 0; p < w->kernel[0]; p++)
                    for (int64_t q = 0; q < w->kernel[1]; q++) {
                        int64_t h = i * w->stride[0] - w->padding[0] + p * w->dilation[0];
                        int64_t v = j * w->stride[1] - w->padding[1] + q * w->dilation[1];
                        if (h < 0 || h >= H || v < 0 || v >= W) continue;
                        double e = xv[pl * H * W + h * W + v];
                        if (arg < 0 || e > best) {
                            best = e;
                            arg = h * W + v;
                        }
                    }
                vv[pl * oh * ow + i * ow + j] = best;
                iv[pl * oh * ow + i * ow + j] = arg;
            }
    test_free(xv);
}

static void max_pool_matches_definition(void **state) {
    (void)state;
    nb_manual_seed(4);
    const nb_window2d wins[] = {NB_POOL2D(2, 2), {{3, 2}, {2, 1}, {1, 1}, {1, 1}}, {{2, 3}, {1, 2}, {1, 1}, {2, 1}}};
    for (size_t k = 0; k < sizeof wins / sizeof *wins; k++) {
        nb_scope_begin();
        nb_tensor *x = randn64(NB_SHAPE(2, 3, 7, 8)), *want, *want_idx, *idx;
        max_pool_direct(x, &wins[k], &want, &want_idx);
        nb_tensor *y = NBT(nb_max_pool2d_with_indices(x, wins[k], &idx));
        assert_close(y, want, 0, 0);
        assert_close(idx, want_idx, 0, 0);
        nb_tensor *x32 = NBT(nb_cast(x, NB_F32)), *idx_ref;
        nb_tensor *yc = NBT(nb_max_pool2d_with_indices(x32, wins[k], &idx));
        nb_tensor *yr = NBT(nb_max_pool2d_with_indices(NBT(nb_to_device(x32, NB_REF)), wins[k], &idx_ref));
        assert_close(yc, yr, 0, 0);
        assert_close(idx, idx_ref, 0, 0);
        /* without indices (nothing recorded) the CPU kernel takes its index-free path */
        assert_close(NBT(nb_max_pool2d(x32, wins[k])), yr, 0, 0);
        nb_scope_end();
    }
}

/* torch: ties go to the first maximum, NaN wins, padding never does. */
static void max_pool_ties_nan_and_padding(void **state) {
    (void)state;
    nb_scope_begin();
    float v[] = {1, 1, 1, 1, /* */ 0, NAN, 2, 7};
    nb_tensor *x = NBT(nb_from_data(v, NB_SHAPE(2, 1, 2, 2), NB_F32));
    nb_tensor *idx;
    nb_tensor *y = NBT(nb_max_pool2d_with_indices(x, NB_POOL2D(2, 2), &idx));
    assert_true(nbt_at(y, 0) == 1 && nbt_at(idx, 0) == 0);
    assert_true(isnan(nbt_at(y, 1)) && nbt_at(idx, 1) == 1);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *s = NBT(nb_sum(NBT(nb_max_pool2d(x, NB_POOL2D(2, 2))), NULL, 0, false));
    assert_int_equal(nb_backward(s, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    const double want[] = {1, 0, 0, 0, 0, 1, 0, 0};
    for (int i = 0; i < 8; i++) assert_true(nbt_at(g, i) == want[i]);
    /* several NaNs per window (the last NaN wins) and ties, on every CPU path, against the reference */
    nb_tensor *m = NBT(nb_round(NBT(nb_randn(NB_SHAPE(2, 3, 6, 7), NB_F32))));
    nb_tensor *nans = NBT(nb_lt(NBT(nb_rand(NB_SHAPE(2, 3, 6, 7), NB_F32)), 0.3));
    m = NBT(nb_where(nans, NBT(nb_full_like(m, NAN)), m));
    const nb_window2d ws[] = {NB_POOL2D(2, 2), {{3, 3}, {1, 1}, {1, 1}, {1, 1}}, {{2, 2}, {1, 2}, {1, 0}, {1, 1}}};
    for (int k = 0; k < 3; k++) {
        nb_tensor *ic, *ir;
        nb_tensor *yc = NBT(nb_max_pool2d_with_indices(m, ws[k], &ic));
        nb_tensor *yr = NBT(nb_max_pool2d_with_indices(NBT(nb_to_device(m, NB_REF)), ws[k], &ir));
        assert_close(yc, yr, 0, 0);
        assert_close(ic, ir, 0, 0);
    }
    /* NaNs of distinct payloads and signs: the result is the last NaN tap itself, bit for bit (torch
     * keeps the element it selects), on each CPU path: the 2x2 window with indices (rows of 14 outputs
     * and, sliced, of 3) and without, a 3x3 window, and one of more than 256 taps */
    const int64_t H = 17, W = 28, numel = 2 * 2 * H * W;
    float *pv = test_malloc((size_t)numel * sizeof *pv);
    for (int64_t i = 0; i < numel; i++) {
        uint32_t bits = 0x7fc00000u | (uint32_t)(i * 40503 & 0x3fffff) | (i & 1 ? 0x80000000u : 0);
        pv[i] = (float)((i * 37) % 11) - 5;
        if ((i * 2654435761u) % 7 == 0) memcpy(&pv[i], &bits, sizeof bits);
    }
    nb_tensor *px = NBT(nb_from_data(pv, NB_SHAPE(2, 2, H, W), NB_F32));
    test_free(pv);
    nb_tensor *narrow = NBT(nb_slice(px, 3, 0, 6, 1));
    const nb_window2d pw[] = {NB_POOL2D(2, 2), {{3, 3}, {1, 1}, {1, 1}, {1, 1}}, {{17, 17}, {1, 1}, {0, 0}, {1, 1}}};
    for (int k = 0; k < 4; k++) {
        nb_tensor *in = k == 3 ? narrow : px, *ic, *ir;
        nb_window2d w = pw[k == 3 ? 0 : k];
        nb_tensor *yr = NBT(nb_max_pool2d_with_indices(NBT(nb_to_device(in, NB_REF)), w, &ir));
        nbt_assert_same_bits(NBT(nb_max_pool2d_with_indices(in, w, &ic)), yr, "max_pool2d NaN payloads");
        assert_close(ic, ir, 0, 0);
        nbt_assert_same_bits(NBT(nb_max_pool2d(in, w)), yr, "max_pool2d NaN payloads, values only");
    }
    /* all-negative input with padding: the padding (-inf) never wins */
    nb_tensor *neg = NBT(nb_full(NB_SHAPE(1, 1, 3, 3), -5.0, NB_F32));
    nb_window2d w = {{3, 3}, {1, 1}, {1, 1}, {1, 1}};
    nb_tensor *yn = NBT(nb_max_pool2d(neg, w));
    for (int i = 0; i < 9; i++) assert_true(nbt_at(yn, i) == -5.0);
    nb_scope_end();
}

static void avg_pool_matches_definition(void **state) {
    (void)state;
    nb_manual_seed(5);
    nb_scope_begin();
    nb_window2d w = {{3, 2}, {2, 1}, {1, 1}, {1, 1}};
    int64_t N = 2, C = 2, H = 6, W = 5, oh = out_len(H, 3, 2, 1, 1), ow = out_len(W, 2, 1, 1, 1);
    nb_tensor *x = randn64(NB_SHAPE(N, C, H, W));
    nb_tensor *incl = NBT(nb_avg_pool2d(x, w, true)), *excl = NBT(nb_avg_pool2d(x, w, false));
    double *xv = host64(x), *iv = host64(incl), *ev = host64(excl);
    for (int64_t pl = 0; pl < N * C; pl++)
        for (int64_t i = 0; i < oh; i++)
            for (int64_t j = 0; j < ow; j++) {
                double s = 0;
                int cnt = 0;
                for (int64_t p = 0; p < 3; p++)
                    for (int64_t q = 0; q < 2; q++) {
                        int64_t h = i * 2 - 1 + p, v = j - 1 + q;
                        if (h < 0 || h >= H || v < 0 || v >= W) continue;
                        s += xv[pl * H * W + h * W + v];
                        cnt++;
                    }
                int64_t o = pl * oh * ow + i * ow + j;
                assert_true(fabs(iv[o] - s / 6) <= 1e-12);
                assert_true(fabs(ev[o] - s / cnt) <= 1e-12);
            }
    test_free(xv);
    test_free(iv);
    test_free(ev);
    nb_scope_end();
}

/* ---- gradients by central differences in f64 ---- */

typedef nb_tensor *(*fn_t)(nb_tensor *const *in, const void *ctx);

/* d sum(f(in) * r) / d in[i] by autograd against central differences, for every element. */
static void gradcheck(fn_t f, nb_tensor **in, int n, const void *ctx) {
    nb_scope_begin();
    for (int i = 0; i < n; i++) assert_int_equal(nb_set_requires_grad(in[i], true), NB_OK);
    nb_tensor *y = NBT(f(in, ctx));
    nb_tensor *r = randn64(nb_shape(y), nb_ndim(y));
    nb_tensor *grads[4];
    assert_int_equal(nb_autograd_grad(NBT(nb_sum(NBT(nb_mul(y, r)), NULL, 0, false)), NULL, in, n, false, grads),
                     NB_OK);
    const double eps = 1e-6; /* recording stays on: f may itself differentiate */
    for (int i = 0; i < n; i++) {
        double *p = nb_data_ptr(in[i]), *ga = host64(grads[i]);
        for (int64_t k = 0; k < nb_numel(in[i]); k++) {
            double orig = p[k], fp, fm;
            p[k] = orig + eps;
            assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_mul(NBT(f(in, ctx)), r)), NULL, 0, false)), &fp), NB_OK);
            p[k] = orig - eps;
            assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_mul(NBT(f(in, ctx)), r)), NULL, 0, false)), &fm), NB_OK);
            p[k] = orig;
            double num = (fp - fm) / (2 * eps);
            if (fabs(num - ga[k]) > 1e-6 + 1e-5 * fabs(num))
                fail_msg("input %d element %lld: autograd %.10g, finite difference %.10g", i, (long long)k, ga[k], num);
        }
        test_free(ga);
    }
    nb_scope_end();
}

static nb_tensor *f_conv2d(nb_tensor *const *in, const void *ctx) {
    const geom *g = ctx;
    return nb_conv2d(in[0], in[1], g->bias ? in[2] : NULL, opts_of(g));
}

static void conv2d_gradients(void **state) {
    (void)state;
    nb_manual_seed(6);
    const geom gs[] = {
        {2, 2, 5, 4, 3, 2, 3, 1, {2, 1}, {1, 1}, {1, 1}, true},
        {1, 4, 6, 5, 2, 3, 2, 2, {1, 2}, {1, 0}, {2, 1}, true},
        {2, 2, 5, 4, 3, 3, 3, 1, {1, 1}, {1, 1}, {1, 1}, true},
    };
    for (size_t k = 0; k < 3; k++) {
        const geom *g = &gs[k];
        nb_scope_begin();
        nb_tensor *in[3] = {randn64(NB_SHAPE(g->n, g->c, g->h, g->w)),
                            randn64(NB_SHAPE(g->o, g->c / g->groups, g->kh, g->kw)), randn64(NB_SHAPE(g->o))};
        gradcheck(f_conv2d, in, 3, g);
        nb_scope_end();
    }
}

static nb_tensor *f_conv1d(nb_tensor *const *in, const void *ctx) {
    (void)ctx;
    return nb_conv1d(in[0], in[1], NULL, 2, 1, 2, 1);
}

static void conv1d_gradients(void **state) {
    (void)state;
    nb_manual_seed(7);
    nb_scope_begin();
    nb_tensor *in[2] = {randn64(NB_SHAPE(2, 3, 9)), randn64(NB_SHAPE(2, 3, 3))};
    gradcheck(f_conv1d, in, 2, NULL);
    nb_scope_end();
}

static const nb_window2d POOL_WIN = {{3, 2}, {2, 1}, {1, 1}, {1, 1}};

static nb_tensor *f_max_pool(nb_tensor *const *in, const void *ctx) {
    (void)ctx;
    return nb_max_pool2d(in[0], POOL_WIN);
}
static nb_tensor *f_avg_pool(nb_tensor *const *in, const void *ctx) {
    (void)ctx;
    return nb_avg_pool2d(in[0], POOL_WIN, false);
}
static nb_tensor *f_fold(nb_tensor *const *in, const void *ctx) {
    (void)ctx;
    return nb_fold(in[0], 5, 4, POOL_WIN);
}

static void pool_and_fold_gradients(void **state) {
    (void)state;
    nb_manual_seed(8);
    nb_scope_begin();
    nb_tensor *x = randn64(NB_SHAPE(2, 2, 5, 4));
    gradcheck(f_max_pool, &x, 1, NULL);
    gradcheck(f_avg_pool, &x, 1, NULL);
    int64_t l = out_len(5, 3, 2, 1, 1) * out_len(4, 2, 1, 1, 1);
    nb_tensor *cols = randn64(NB_SHAPE(2, 12, l));
    gradcheck(f_fold, &cols, 1, NULL);
    nb_scope_end();
}

/* max_unpool2d at fixed pooling indices, and its own gradient (the gather). */
static nb_tensor *g_idx;
static nb_tensor *f_unpool(nb_tensor *const *in, const void *ctx) {
    (void)ctx;
    return nb_max_unpool2d(in[0], g_idx, 6, 6);
}

static void max_unpool_values_and_gradient(void **state) {
    (void)state;
    nb_manual_seed(9);
    nb_scope_begin();
    nb_tensor *x = randn64(NB_SHAPE(1, 2, 6, 6));
    nb_tensor *p = NBT(nb_max_pool2d_with_indices(x, NB_POOL2D(2, 2), &g_idx));
    /* unpooling the maxima puts each back where it came from, zeros elsewhere */
    nb_tensor *u = NBT(nb_max_unpool2d(p, g_idx, 6, 6));
    nb_tensor *mask = NBT(nb_eq(NBT(nb_max_unpool2d(NBT(nb_ones_like(p)), g_idx, 6, 6)), 1.0));
    assert_close(u, NBT(nb_where(mask, x, NBT(nb_zeros_like(x)))), 0, 0);
    nb_tensor *in = randn64(NB_SHAPE(1, 2, 3, 3));
    gradcheck(f_unpool, &in, 1, NULL);
    nb_scope_end();
}

/* Second derivative: d/dw of (d sum(conv(x, w) r) / dx), through fold's rule (unfold). */
static nb_tensor *f_conv_grad_x(nb_tensor *const *in, const void *ctx) {
    const geom *g = ctx;
    nb_tensor *y = nb_conv2d(in[0], in[1], NULL, opts_of(g));
    nb_tensor *r = nb_cos(nb_reshape(nb_arange(0, (double)nb_numel(y), 1, NB_F64), nb_shape(y), nb_ndim(y)));
    nb_tensor *gr[2] = {0};
    if (nb_autograd_grad(nb_sum(nb_mul(y, r), NULL, 0, false), NULL, in, 2, true, gr) != NB_OK) return NULL;
    return nb_mul(gr[0], gr[0]); /* nonlinear in w, so the second derivative is not constant */
}

static void conv2d_second_derivative(void **state) {
    (void)state;
    nb_manual_seed(10);
    geom g = {1, 2, 4, 4, 2, 2, 2, 1, {1, 1}, {1, 1}, {1, 1}, false};
    nb_scope_begin();
    nb_tensor *in[2] = {randn64(NB_SHAPE(1, 2, 4, 4)), randn64(NB_SHAPE(2, 2, 2, 2))};
    gradcheck(f_conv_grad_x, in, 2, &g);
    nb_scope_end();
}

/* ---- determinism and bad input ---- */

static void bitwise_equal_across_thread_counts(void **state) {
    (void)state;
    int saved = nb_get_num_threads();
    nb_manual_seed(11);
    nb_scope_begin();
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(8, 3, 12, 12), NB_F32)), *w = NBT(nb_randn(NB_SHAPE(5, 3, 3, 3), NB_F32));
    assert_int_equal(nb_set_requires_grad(w, true), NB_OK);
    nb_tensor *out[2], *grad[2];
    for (int t = 0; t < 2; t++) {
        nb_set_num_threads(t == 0 ? 1 : 3);
        nb_tensor *y = NBT(nb_max_pool2d(NBT(nb_conv2d(x, w, NULL, (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1})),
                                         NB_POOL2D(2, 2)));
        assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_square(y)), NULL, 0, false)), NULL, false), NB_OK);
        out[t] = y;
        grad[t] = NBT(nb_grad(w));
        nb_zero_grad(w);
    }
    nb_set_num_threads(saved);
    assert_close(out[0], out[1], 0, 0);
    assert_close(grad[0], grad[1], 0, 0);
    nb_scope_end();
}

/* conv2d as conv.c's composite (unfold, then one matmul or addmm per image and group): what the
 * eager kernel must reproduce bit for bit. */
static nb_tensor *conv2d_composite(nb_tensor *x, nb_tensor *w, nb_tensor *b, const geom *g) {
    int64_t oh = out_len(g->h, g->kh, g->stride[0], g->pad[0], g->dil[0]);
    int64_t ow = out_len(g->w, g->kw, g->stride[1], g->pad[1], g->dil[1]);
    int64_t k = g->c / g->groups * g->kh * g->kw, og = g->o / g->groups;
    bool pointwise = g->kh == 1 && g->kw == 1 && g->stride[0] == 1 && g->stride[1] == 1 && g->pad[0] == 0 && g->pad[1] == 0;
    nb_window2d win = {{g->kh, g->kw}, {g->stride[0], g->stride[1]}, {g->pad[0], g->pad[1]}, {g->dil[0], g->dil[1]}};
    nb_tensor *cols = NBT(nb_reshape(pointwise ? x : NBT(nb_unfold(x, win)), NB_SHAPE(g->n, g->groups, k, oh * ow)));
    nb_tensor *wg = NBT(nb_reshape(w, NB_SHAPE(g->groups, og, k)));
    nb_tensor *y = b ? NBT(nb_addmm(NBT(nb_reshape(b, NB_SHAPE(g->groups, og, 1))), wg, cols)) : NBT(nb_matmul(wg, cols));
    return NBT(nb_reshape(y, NB_SHAPE(g->n, g->o, oh, ow)));
}

/* The eager kernel (CONVOLUTION, and CONVOLUTION_BACKWARD in the backward pass) against the
 * composite on the same CPU, bitwise: outputs, and the gradients of x, w and the bias, without
 * and with create_graph (the rule's composite adjoints), at 1 and 3 threads (images split over
 * threads or run in turn), f32 and f64. */
static void eager_kernel_is_the_composite_bitwise(void **state) {
    (void)state;
    int saved = nb_get_num_threads();
    nb_manual_seed(5);
    static const geom EXTRA[] = {
        {7, 32, 14, 14, 64, 3, 3, 1, {1, 1}, {1, 1}, {1, 1}, true}, /* the training CNN's second layer, 7 images */
        {6, 1, 28, 28, 8, 3, 3, 1, {1, 1}, {1, 1}, {1, 1}, true},   /* its first: one input channel */
    };
    for (size_t k = 0; k < sizeof GEOMS / sizeof *GEOMS + 2; k++) {
        const geom *g = k < sizeof GEOMS / sizeof *GEOMS ? &GEOMS[k] : &EXTRA[k - sizeof GEOMS / sizeof *GEOMS];
        for (int dt = 0; dt < 2; dt++)
            for (int t = 0; t < 2; t++)
                for (int create = 0; create < 2; create++) {
                    nb_set_num_threads(t ? 3 : 1);
                    nb_scope_begin();
                    nb_dtype d = dt ? NB_F64 : NB_F32;
                    nb_tensor *in[3] = {NBT(nb_cast(randn64(NB_SHAPE(g->n, g->c, g->h, g->w)), d)),
                                        NBT(nb_cast(randn64(NB_SHAPE(g->o, g->c / g->groups, g->kh, g->kw)), d)),
                                        g->bias ? NBT(nb_cast(randn64(NB_SHAPE(g->o)), d)) : NULL};
                    nb_tensor *y[2], *grads[2][3] = {{NULL}}, *seed = NULL;
                    for (int way = 0; way < 2; way++) { /* 0: the kernel, 1: the composite */
                        nb_tensor *p[3] = {NULL};
                        for (int i = 0; i < 3; i++)
                            if (in[i]) {
                                p[i] = NBT(nb_clone(in[i]));
                                assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
                            }
                        y[way] = way ? conv2d_composite(p[0], p[1], p[2], g) : NBT(nb_conv2d(p[0], p[1], p[2], opts_of(g)));
                        if (!seed) seed = NBT(nb_cast(randn64(nb_shape(y[way]), 4), d));
                        assert_int_equal(nb_backward(y[way], seed, create), NB_OK);
                        for (int i = 0; i < 3 && p[i]; i++) {
                            grads[way][i] = NBT(nb_grad(p[i]));
                            nb_zero_grad(p[i]); /* a create_graph gradient's tape reaches p[i]: no cycle */
                        }
                    }
                    nbt_assert_same_bits(y[0], y[1], "conv2d");
                    for (int i = 0; i < 3; i++)
                        if (in[i]) nbt_assert_same_bits(grads[0][i], grads[1][i], i == 0 ? "dx" : i == 1 ? "dw" : "db");
                    nb_scope_end();
                }
    }
    nb_set_num_threads(saved);
}

/* ---- traced ---- */

static int count_op(const nb_graph *g, nb_op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].kind == NB_GNODE_OP && g->nodes[i].op == op;
    return n;
}

/* relu(conv2d(x, w, b)): the two ops, or (fused) relu in the convolution's epilogue, as a
 * Sequential runs Conv2d then ReLU. */
static nb_tensor *conv_relu(nb_tensor *x, nb_tensor *w, nb_tensor *b, const geom *g, bool fused) {
    return fused ? nb__conv2d_relu(x, w, b, opts_of(g)) : nb_relu(nb_conv2d(x, w, b, opts_of(g)));
}

/* The gradient Func of L = sum(r · relu(conv2d(x, w, b))) for x [B, C, H, W] with a symbolic
 * batch B: outputs y and dL/dx, dL/dw, dL/db (db only with a bias). */
static nb_graph *traced_step(const geom *g, nb_dtype d, nb_tensor *w, nb_tensor *b, bool fused) {
    int64_t B = nb_dim("B");
    int64_t oh = out_len(g->h, g->kh, g->stride[0], g->pad[0], g->dil[0]);
    int64_t ow = out_len(g->w, g->kw, g->stride[1], g->pad[1], g->dil[1]);
    nb_graph *f = nb_graph_begin("conv_step");
    nb_tensor *x = NBT(nb_graph_input(f, "x", d, NB_SHAPE(B, g->c, g->h, g->w)));
    nb_tensor *r = NBT(nb_graph_input(f, "r", d, NB_SHAPE(B, g->o, oh, ow)));
    nb_tensor *wt = NBT(nb_graph_input(f, "w", d, nb_shape(w), 4)), *bt = b ? NBT(nb_graph_input(f, "b", d, NB_SHAPE(g->o))) : NULL;
    nb_tensor *y = NBT(conv_relu(x, wt, bt, g, fused));
    nb_tensor *loss = NBT(nb_sum(nb_mul(y, r), NULL, 0, false)), *grads[3];
    assert_int_equal(nb_graph_grad(loss, b ? 3 : 2, (nb_tensor *[]){x, wt, bt}, grads), NB_OK);
    assert_int_equal(nb_graph_output(f, "y", y), NB_OK);
    for (int i = 0; i < (b ? 3 : 2); i++) assert_int_equal(nb_graph_output(f, (const char *[]){"dx", "dw", "db"}[i], grads[i]), NB_OK);
    assert_int_equal(nb_graph_end(f), NB_OK);
    return f;
}

/* A traced conv2d with a symbolic batch holds the image-by-image kernels (CONVOLUTION forward, one
 * CONVOLUTION_BACKWARD each for dx and dw, and with relu fused into the convolution each masking g
 * by the result, one more for db where the kernel sums it) and no columns; compiling merges the
 * backward nodes into one.  Its compiled values and gradients are the eager ones bit for bit, at
 * two batch sizes; vmapped over examples (x and r batched, w and b shared) each example's
 * gradients are the Func's on that example, bit for bit; with the weight batched too the kernels
 * run once per example. */
static void traced_conv_runs_the_kernels(void **state) {
    (void)state;
    nb_manual_seed(9);
    for (size_t k = 0; k < 2 * sizeof GEOMS / sizeof *GEOMS; k++)
        for (int dt = 0; dt < 2; dt++) {
            const geom *g = &GEOMS[k / 2];
            bool fused = k % 2;
            nb_dtype d = dt ? NB_F64 : NB_F32;
            nb_scope_begin();
            nb_tensor *w = NBT(nb_cast(randn64(NB_SHAPE(g->o, g->c / g->groups, g->kh, g->kw)), d));
            nb_tensor *b = g->bias ? NBT(nb_cast(randn64(NB_SHAPE(g->o)), d)) : NULL;
            nb_graph *f = traced_step(g, d, w, b, fused);
            int64_t oh = out_len(g->h, g->kh, g->stride[0], g->pad[0], g->dil[0]);
            int64_t ow = out_len(g->w, g->kw, g->stride[1], g->pad[1], g->dil[1]);
            bool db_node = fused && b && nb__conv_db_in_kernel(g->o, oh * ow);
            assert_int_equal(count_op(f, NB_OP_CONVOLUTION), 1);
            assert_int_equal(count_op(f, NB_OP_CONVOLUTION_BACKWARD), 2 + db_node);
            assert_int_equal(count_op(f, NB_OP_UNFOLD) + count_op(f, NB_OP_FOLD) + count_op(f, NB_OP_RELU), fused ? 0 : 1);
            nb_graph *opt;
            assert_int_equal(nb__graph_optimize(f, &opt, NULL, NULL), NB_OK);
            assert_int_equal(count_op(opt, NB_OP_CONVOLUTION_BACKWARD), 1); /* the siblings merged */
            /* the DOT labels say what each node holds: relu in the convolution (traced there, or
             * folded in by the simplify pass), the merged outputs, the mask where traced fused */
            char *dot = nb_graph_to_dot(opt), want[2][96];
            assert_non_null(dot);
            snprintf(want[0], sizeof want[0], "label=\"convolution+relu\\n");
            snprintf(want[1], sizeof want[1], "label=\"convolution_backward(dx, dwi%s)%s\\n", db_node ? ", db" : "",
                     fused ? " of relu" : "");
            for (int i = 0; i < 2; i++) {
                if (!strstr(dot, want[i])) fprintf(stderr, "missing '%s' in\n%s", want[i], dot);
                assert_non_null(strstr(dot, want[i]));
            }
            nb_free_string(dot);
            nb_graph_release(opt);
            int nout = b ? 4 : 3;
            const char *names[4] = {"x", "r", "w", "b"};
            for (int n = g->n; n <= g->n + 2; n += 2) {
                nb_tensor *x = NBT(nb_cast(randn64(NB_SHAPE(n, g->c, g->h, g->w)), d)), *res[4], *p[3] = {NULL};
                nb_tensor *probe = NBT(nb_conv2d(x, w, b, opts_of(g)));
                nb_tensor *r = NBT(nb_cast(randn64(nb_shape(probe), 4), d));
                assert_int_equal(nb_func_call(f, b ? 4 : 3, names, (nb_tensor *[]){x, r, w, b}, nout, res), NB_OK);
                nb_tensor *leaf[3] = {x, w, b};
                for (int i = 0; i < 3; i++)
                    if (leaf[i]) {
                        p[i] = NBT(nb_clone(leaf[i]));
                        assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
                    }
                nb_tensor *y = NBT(conv_relu(p[0], p[1], p[2], g, fused));
                assert_int_equal(nb_backward(y, r, false), NB_OK);
                nbt_assert_same_bits(res[0], y, "traced y");
                for (int i = 0; i < nout - 1; i++) nbt_assert_same_bits(res[1 + i], NBT(nb_grad(p[i])), "traced gradient");
                if (n > g->n) break;
                /* per-example gradients: the examples of x and r batched at axis 0 */
                nb_tensor *xs = NBT(nb_reshape(x, NB_SHAPE(n, 1, g->c, g->h, g->w)));
                nb_tensor *rs = NBT(nb_reshape(r, NB_SHAPE(n, 1, g->o, nb_shape(r)[2], nb_shape(r)[3])));
                nb_graph *v = nb_func_vmap(f, 2, names, (int[]){0, 0}, n, NULL);
                assert_non_null(v);
                assert_int_equal(nb_func_call(v, b ? 4 : 3, names, (nb_tensor *[]){xs, rs, w, b}, nout, res), NB_OK);
                for (int e = 0; e < n; e++) {
                    nb_tensor *one[4];
                    nb_tensor *xe = NBT(nb_select(xs, 0, e)), *re = NBT(nb_select(rs, 0, e));
                    assert_int_equal(nb_func_call(f, b ? 4 : 3, names, (nb_tensor *[]){xe, re, w, b}, nout, one), NB_OK);
                    for (int i = 0; i < nout; i++) nbt_assert_same_bits(NBT(nb_select(res[i], 0, e)), one[i], "vmap");
                }
                nb_graph_release(v);
                /* the weight batched as well: once per example */
                nb_tensor *ws = NBT(nb_stack((nb_tensor *[]){w, NBT(nb_neg(w))}, 2, 0));
                v = nb_func_vmap(f, 3, names, (int[]){0, 0, 0}, 2, NULL);
                assert_non_null(v);
                if (n >= 2) {
                    nb_tensor *x2 = NBT(nb_slice(xs, 0, 0, 2, 1)), *r2 = NBT(nb_slice(rs, 0, 0, 2, 1));
                    assert_int_equal(nb_func_call(v, b ? 4 : 3, names, (nb_tensor *[]){x2, r2, ws, b}, nout, res), NB_OK);
                    for (int e = 0; e < 2; e++) {
                        nb_tensor *one[4];
                        nb_tensor *args[4] = {NBT(nb_select(x2, 0, e)), NBT(nb_select(r2, 0, e)), NBT(nb_select(ws, 0, e)), b};
                        assert_int_equal(nb_func_call(f, b ? 4 : 3, names, args, nout, one), NB_OK);
                        for (int i = 0; i < nout; i++) nbt_assert_same_bits(NBT(nb_select(res[i], 0, e)), one[i], "vmap of w");
                    }
                }
                nb_graph_release(v);
                /* a symbolic batch cannot run once per example */
                assert_null(nb_func_vmap(f, 3, names, (int[]){0, 0, 0}, nb_dim("E"), NULL));
                nbt_expect_error(NB_ERR_SHAPE, "once per example");
            }
            nb_graph_release(f);
            nb_scope_end();
        }
}

/* Symbolic channels (the composite: the kernels take concrete ones): x [B, C, 5, 4] by w [3, C, 2, 2]
 * traced once, its values and gradients the eager ones bit for bit at C = 2 and 3; and a vmap over
 * zero examples with the weight batched (the kernels' once-per-example path) gives empty results. */
static void traced_conv_symbolic_channels(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(10);
    int64_t B = nb_dim("B"), C = nb_dim("C");
    nb_conv2d_opts o = {{1, 2}, {1, 0}, {1, 1}, 1};
    nb_graph *f = nb_graph_begin("symbolic_c");
    nb_tensor *x = NBT(nb_graph_input(f, "x", NB_F64, NB_SHAPE(B, C, 5, 4)));
    nb_tensor *w = NBT(nb_graph_input(f, "w", NB_F64, NB_SHAPE(3, C, 2, 2)));
    nb_tensor *y = NBT(nb_conv2d(x, w, NULL, o)), *g[2];
    assert_int_equal(nb_graph_grad(NBT(nb_sum(nb_square(y), NULL, 0, false)), 2, (nb_tensor *[]){x, w}, g), NB_OK);
    assert_int_equal(nb_graph_output(f, "y", y), NB_OK);
    assert_int_equal(nb_graph_output(f, "dx", g[0]), NB_OK);
    assert_int_equal(nb_graph_output(f, "dw", g[1]), NB_OK);
    assert_int_equal(nb_graph_end(f), NB_OK);
    assert_int_equal(count_op(f, NB_OP_CONVOLUTION), 0);
    const char *names[2] = {"x", "w"};
    for (int64_t c = 2; c <= 3; c++) {
        nb_tensor *xv = randn64(NB_SHAPE(2, c, 5, 4)), *wv = randn64(NB_SHAPE(3, c, 2, 2)), *res[3];
        assert_int_equal(nb_func_call(f, 2, names, (nb_tensor *[]){xv, wv}, 3, res), NB_OK);
        nb_tensor *p[2] = {NBT(nb_clone(xv)), NBT(nb_clone(wv))};
        for (int i = 0; i < 2; i++) assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
        nb_tensor *ye = NBT(nb_conv2d(p[0], p[1], NULL, o));
        assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_square(ye)), NULL, 0, false)), NULL, false), NB_OK);
        nbt_assert_same_bits(res[0], ye, "symbolic C: y");
        nbt_assert_same_bits(res[1], NBT(nb_grad(p[0])), "symbolic C: dx");
        nbt_assert_same_bits(res[2], NBT(nb_grad(p[1])), "symbolic C: dw");
    }
    nb_graph_release(f);
    /* zero examples, the weight batched */
    nb_graph *k = nb_graph_begin("kernels");
    x = NBT(nb_graph_input(k, "x", NB_F64, NB_SHAPE(B, 2, 5, 4)));
    w = NBT(nb_graph_input(k, "w", NB_F64, NB_SHAPE(3, 2, 2, 2)));
    assert_int_equal(nb_graph_output(k, "y", nb_conv2d(x, w, NULL, o)), NB_OK);
    assert_int_equal(nb_graph_end(k), NB_OK);
    assert_int_equal(count_op(k, NB_OP_CONVOLUTION), 1);
    nb_graph *v = nb_func_vmap(k, 2, names, (int[]){0, 0}, 0, NULL);
    assert_non_null(v);
    nb_tensor *res;
    assert_int_equal(nb_func_call(v, 2, names, (nb_tensor *[]){randn64(NB_SHAPE(0, 4, 2, 5, 4)), randn64(NB_SHAPE(0, 3, 2, 2, 2))}, 1, &res), NB_OK);
    assert_int_equal(nb_ndim(res), 5);
    const int64_t want[5] = {0, 4, 3, 6, 2};
    for (int d = 0; d < 5; d++) assert_int_equal(nb_shape(res)[d], want[d]);
    nb_graph_release(v);
    nb_graph_release(k);
    nb_scope_end();
}

static void expect_error(nb_tensor *r, nb_status want, const char *needle) {
    assert_null(r);
    assert_int_equal(nb_last_status(), want);
    if (!strstr(nb_last_message(), needle)) fail_msg("message '%s' lacks '%s'", nb_last_message(), needle);
    nb_clear_error();
}

static void bad_input(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *x = NBT(nb_zeros(NB_SHAPE(2, 4, 5, 5), NB_F32)), *w = NBT(nb_zeros(NB_SHAPE(6, 2, 3, 3), NB_F32));
    nb_conv2d_opts o = NB_CONV2D_DEFAULTS;
    expect_error(nb_conv2d(x, w, NULL, o), NB_ERR_SHAPE, "[6, 2, 3, 3]"); /* 4 channels, weight wants 2 */
    o.groups = 4;
    expect_error(nb_conv2d(x, w, NULL, o), NB_ERR_SHAPE, "4 groups");
    o.groups = 0;
    expect_error(nb_conv2d(x, w, NULL, o), NB_ERR_ARG, "groups");
    o = NB_CONV2D_DEFAULTS;
    o.padding[0] = -1;
    expect_error(nb_conv2d(x, w, NULL, o), NB_ERR_ARG, "padding (-1, 0)");
    o = NB_CONV2D_DEFAULTS;
    o.groups = 2;
    expect_error(nb_conv2d(x, w, NBT(nb_zeros(NB_SHAPE(5), NB_F32)), o), NB_ERR_SHAPE, "bias [5]");
    expect_error(nb_conv2d(x, NBT(nb_zeros(NB_SHAPE(6, 2, 3, 3), NB_F64)), NULL, o), NB_ERR_DTYPE, "float64");
    expect_error(nb_conv2d(NBT(nb_zeros(NB_SHAPE(5, 5), NB_F32)), w, NULL, o), NB_ERR_SHAPE, "[5, 5]");
    expect_error(nb_conv2d(NBT(nb_zeros(NB_SHAPE(1, 4, 2, 2), NB_F32)), w, NULL, o), NB_ERR_SHAPE, "2x2");
    expect_error(nb_conv2d(NULL, w, NULL, o), NB_ERR_NULL, "conv2d");
    expect_error(nb_max_pool2d(x, (nb_window2d){{2, 2}, {2, 2}, {2, 2}, {1, 1}}), NB_ERR_ARG, "half");
    expect_error(nb_max_pool2d(NBT(nb_zeros(NB_SHAPE(1, 1, 5, 5), NB_I32)), NB_POOL2D(2, 2)), NB_ERR_DTYPE, "int32");
    expect_error(nb_max_pool2d(x, (nb_window2d){{2, 2}, {0, 1}, {0, 0}, {1, 1}}), NB_ERR_ARG, "stride (0, 1)");
    nb_tensor *idx;
    expect_error(nb_max_pool2d_with_indices(x, NB_POOL2D(9, 9), &idx), NB_ERR_SHAPE, "5x5");
    assert_null(idx);
    expect_error(nb_fold(NBT(nb_zeros(NB_SHAPE(1, 7, 16), NB_F32)), 5, 5, NB_POOL2D(2, 2)), NB_ERR_SHAPE, "[1, 7, 16]");
    nb_tensor *bad_idx = NBT(nb_full(NB_SHAPE(1, 1, 2, 2), 99, NB_I64));
    expect_error(nb_max_unpool2d(NBT(nb_zeros(NB_SHAPE(1, 1, 2, 2), NB_F32)), bad_idx, 4, 4), NB_ERR_INDEX, "99");
    /* the kernels check while they scatter (planes over threads): the error names the first bad index
     * in the indices' order, on both backends, f32 and f64 */
    int64_t *vals = test_malloc(sizeof(int64_t) * 64 * 4);
    for (int i = 0; i < 64 * 4; i++) vals[i] = i % 16;
    vals[40 * 4 + 2] = 1000;
    vals[50 * 4 + 0] = -5;
    nb_tensor *many = NBT(nb_from_data(vals, NB_SHAPE(2, 32, 2, 2), NB_I64));
    test_free(vals);
    int saved = nb_get_num_threads();
    nb_set_num_threads(3);
    for (int dev = 0; dev < 2; dev++)
        for (int dt = 0; dt < 2; dt++) {
            nb_tensor *g = NBT(nb_ones(NB_SHAPE(2, 32, 2, 2), dt ? NB_F64 : NB_F32));
            nb_tensor *ix = many;
            if (dev) {
                g = NBT(nb_to_device(g, NB_REF));
                ix = NBT(nb_to_device(many, NB_REF));
            }
            expect_error(nb_max_unpool2d(g, ix, 4, 4), NB_ERR_INDEX, "index 1000 out of range [0, 16)");
        }
    nb_set_num_threads(saved);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(conv2d_matches_definition_and_ref),
        cmocka_unit_test(conv1d_is_conv2d_of_height_one),
        cmocka_unit_test(unfold_fold_definition_and_adjoint),
        cmocka_unit_test(shifted_fold_unfold_match_ref),
        cmocka_unit_test(max_pool_matches_definition),
        cmocka_unit_test(max_pool_ties_nan_and_padding),
        cmocka_unit_test(avg_pool_matches_definition),
        cmocka_unit_test(conv2d_gradients),
        cmocka_unit_test(conv1d_gradients),
        cmocka_unit_test(pool_and_fold_gradients),
        cmocka_unit_test(max_unpool_values_and_gradient),
        cmocka_unit_test(conv2d_second_derivative),
        cmocka_unit_test(bitwise_equal_across_thread_counts),
        cmocka_unit_test(eager_kernel_is_the_composite_bitwise),
        cmocka_unit_test(traced_conv_runs_the_kernels),
        cmocka_unit_test(traced_conv_symbolic_channels),
        cmocka_unit_test(bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
