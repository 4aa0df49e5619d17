/*
 * test_ops_vs_ref.c — the CPU backend against the reference backend (the
 * oracle: naive loops, double arithmetic, one thread) for every op that has
 * a kernel: kinds UNARY, BINARY, WHERE, REDUCE, ARGREDUCE, SCAN, MATMUL,
 * GATHER, SCATTER_ADD, CAT, PAD, COPY, WINDOW, LINALG, ATTENTION, QUANT and CONV in ops.def.  Each case
 * builds the same values on both devices in the same layout (contiguous,
 * transposed, step-sliced, flipped = negative strides, expanded = stride 0,
 * offset into its storage), on rank-0, zero-size, large (> 65536 elements:
 * the multi-threaded and fast reduction paths) and random shapes, runs the op
 * on both and compares.  f32 and f64 everywhere; f16, bf16, integers and
 * bool through the generic paths.  The walk over nb__ops[] fails for an op
 * of those kinds that has no case here.  NaN/inf behaviour is also checked
 * against IEEE/PyTorch semantics directly.
 *
 * Tolerances (|cpu - ref| <= atol + rtol |ref|):
 *   f64       rtol 1e-12: both evaluate the same ops.def formula in double;
 *             sums and matmuls differ only in summation order (see below);
 *             atol 1e-15 for results near 0 of O(1) inputs, where a formula
 *             that cancels (gelu_tanh's 1 + tanh(u) for x << 0, measured
 *             5.8e-13 relative) meets FMA contraction in the SIMD builds.
 *   f32       rtol 1e-6: the formula in double rounded once (exact), except
 *             the ops computed by vmath.h (within 6 ulp = 7e-7, see
 *             test_cpu_kernels); atol FLT_MIN because relative error is
 *             meaningless for subnormal results (x < -87.34 for exp), where
 *             the scaling step may round differently.  gelu and gelu_tanh
 *             add |x| 2^-52: the reference's 1 + erf(.) and 1 + tanh(.)
 *             cancel for x << 0 (an absolute error of 2^-53 each), which
 *             the f32 kernels avoid (erfc and sigmoid forms).
 *   f16/bf16  one ulp (1e-3 / 8e-3): both go through the double path.
 *   integers, bool, indices, copies: exact.
 *   sums/scans: plus an absolute 1e-15·N·max|x| for N summed terms (both
 *             accumulate in double, in different orders).
 *   matmul:   plus Higham's bound k·u·(|a|@|b|), u = 2^-24 for f32, f16 and
 *             bf16 (the GEMM accumulates in float), 2^-53 for f64.
 */
#include "support.h"
#include "ops/ops.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Inputs: the same values on both devices, in one of several layouts       */
/* ------------------------------------------------------------------------ */

enum layout { L_CONTIG, L_TRANS, L_STEP, L_FLIP, L_BCAST, L_OFFSET, L_COUNT };
static const char *const LAYOUT_NAME[L_COUNT] = {"contig", "transposed", "step2", "flipped", "expanded", "offset"};

/* value domains: keep each op inside its real domain */
enum dom { D_ANY, D_POS, D_NONZERO, D_SMALL, D_INTV, D_NEAR1, D_BOOL };

typedef struct pair { nb_tensor *cpu, *ref; } pair;

/* Random values of one domain as dtype dt on the CPU (scoped). */
static nb_tensor *values(const int64_t *shape, int nd, int dom, nb_dtype dt) {
    nb_tensor *u = NBT(nb_rand(shape, nd, NB_F64)), *z = NBT(nb_randn(shape, nd, NB_F64)), *v = NULL;
    switch (dom) {
    case D_ANY: v = nb_mul(z, 2.0); break;
    case D_POS: v = nb_add(nb_mul(u, 3.0), 0.1); break;
    case D_NONZERO: v = nb_add(z, nb_mul(nb_sign(z), 0.25)); break;
    case D_SMALL: v = nb_sub(nb_mul(u, 2.4), 1.2); break;
    case D_INTV: v = nb_round(nb_mul(z, 2.0)); break;
    case D_NEAR1: v = nb_add(nb_mul(z, 0.01), 1.0); break;
    case D_BOOL: v = nb_gt(u, 0.5); break;
    }
    if (!nb_dtype_is_float(dt) && dom != D_BOOL) {
        v = nb_round(v);
        if (dom == D_NONZERO) /* push zeros away: add ±1 with the sign of the value (+1 at 0) */
            v = nb_add(v, nb_sub(nb_mul(nb_cast(nb_ge(v, 0.0), NB_F64), 2.0), 1.0));
    }
    return NBT(nb_cast(v, dt));
}

/* The view of `base` that has `shape` in the given layout. */
static nb_tensor *apply_layout(nb_tensor *base, int layout, const int64_t *shape, int nd) {
    switch (layout) {
    case L_TRANS: return NBT(nb_transpose(base, -1, -2));
    case L_STEP: return NBT(nb_slice(base, -1, 0, NB_END, 2));
    case L_FLIP: return NBT(nb_flip(base, NULL, 0));
    case L_BCAST: return NBT(nb_expand(base, shape, nd));
    case L_OFFSET: return NBT(nb_narrow(base, 0, 1, shape[0])); /* contiguous, storage offset > 0 */
    default: return base;
    }
}

/* Layouts that need more rank than nd degrade to contiguous. */
static int usable_layout(int layout, int nd) {
    if ((layout == L_TRANS && nd < 2) || (layout != L_CONTIG && nd < 1)) return L_CONTIG;
    return layout;
}

/* A base tensor shaped so that `layout` turns it into `shape`. */
static void base_shape(int layout, const int64_t *shape, int nd, int64_t *bs) {
    memcpy(bs, shape, sizeof(int64_t) * (size_t)nd);
    if (layout == L_TRANS) {
        bs[nd - 1] = shape[nd - 2];
        bs[nd - 2] = shape[nd - 1];
    } else if (layout == L_STEP) {
        bs[nd - 1] = 2 * shape[nd - 1];
    } else if (layout == L_BCAST) {
        bs[nd > 1 ? 1 : 0] = 1;
    } else if (layout == L_OFFSET) {
        bs[0] = shape[0] + 2;
    }
}

static pair from_base(nb_tensor *base, int layout, const int64_t *shape, int nd) {
    pair p = {apply_layout(base, layout, shape, nd), apply_layout(NBT(nb_to_device(base, NB_REF)), layout, shape, nd)};
    assert_int_equal(nb_ndim(p.cpu), nd);
    for (int d = 0; d < nd; d++) assert_int_equal(nb_shape(p.cpu)[d], shape[d]);
    return p;
}

static pair make_pair(const int64_t *shape, int nd, nb_dtype dt, int layout, int dom) {
    int64_t bs[NB_MAX_DIMS];
    layout = usable_layout(layout, nd);
    base_shape(layout, shape, nd, bs);
    return from_base(values(bs, nd, dom, dt), layout, shape, nd);
}

/* Random i64 indices in [0, hi) (optionally handed over as a transposed view or as i32). */
static pair index_pair(const int64_t *shape, int nd, int64_t hi, int layout, nb_dtype dt) {
    int64_t bs[NB_MAX_DIMS];
    layout = usable_layout(layout, nd);
    base_shape(layout, shape, nd, bs);
    nb_tensor *ix = NBT(nb_cast(nb_floor(nb_mul(nb_rand(bs, nd, NB_F64), (double)hi)), dt));
    return from_base(ix, layout, shape, nd);
}

/* ------------------------------------------------------------------------ */
/* Comparison                                                               */
/* ------------------------------------------------------------------------ */

/* Elements of t in row-major order as doubles, read through the reference backend; caller frees. */
static double *host_values(nb_tensor *t) {
    nb_tensor *r = NBT(nb_cast(NBT(nb_to_device(t, NB_REF)), NB_F64));
    size_t n = (size_t)nb_numel(r);
    double *v = malloc(sizeof(double) * (n ? n : 1));
    assert_non_null(v);
    assert_int_equal(nb_copy_to_host(r, v, sizeof(double) * n), NB_OK);
    return v;
}

static double rtol_of(nb_dtype dt) {
    switch (dt) {
    case NB_F64: return 1e-12;
    case NB_F32: return 1e-6;
    case NB_F16: return 1e-3;
    case NB_BF16: return 8e-3;
    default: return 0; /* integers and bool: exact */
    }
}
/* Absolute floors: f32/bf16 FLT_MIN (subnormal results), f16 its smallest subnormal. */
static double atol_of(nb_dtype dt) {
    switch (dt) {
    case NB_F64: return 1e-15;
    case NB_F32: case NB_BF16: return FLT_MIN;
    case NB_F16: return 0x1p-24;
    default: return 0;
    }
}

static char what[256]; /* description of the running case, for failure messages */

/* got (CPU) must match want (REF) in shape and dtype, and elementwise within
 * atol + rtol |want| + bound[i] (bound may be NULL); NaN where NaN, equal infinities. */
static void expect_match(nb_tensor *got, nb_tensor *want, double rtol, double atol, nb_tensor *bound) {
    assert_non_null(got);
    assert_non_null(want);
    if (nb_device_of(got).type != NB_DEVICE_CPU || nb_device_of(want).type != NB_DEVICE_REF ||
        nb_dtype_of(got) != nb_dtype_of(want) || nb_ndim(got) != nb_ndim(want)) {
        fprintf(stderr, "%s: device/dtype/rank mismatch: %s rank %d vs %s rank %d\n", what,
                nb_dtype_name(nb_dtype_of(got)), nb_ndim(got), nb_dtype_name(nb_dtype_of(want)), nb_ndim(want));
        fail();
    }
    for (int d = 0; d < nb_ndim(got); d++) assert_int_equal(nb_shape(got)[d], nb_shape(want)[d]);
    int64_t n = nb_numel(got);
    double *g = host_values(got), *w = host_values(want), *b = bound ? host_values(bound) : NULL;
    int64_t bad = -1;
    double tol = 0;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        if (g[i] == w[i] || (isnan(g[i]) && isnan(w[i]))) continue;
        tol = atol + rtol * fabs(w[i]) + (b ? b[i] : 0);
        if (!(fabs(g[i] - w[i]) <= tol)) bad = i;
    }
    if (bad >= 0)
        fprintf(stderr, "%s: element %lld: cpu %.17g vs ref %.17g (tolerance %.3g)\n", what, (long long)bad, g[bad],
                w[bad], tol);
    free(g);
    free(w);
    free(b);
    if (bad >= 0) fail();
}

/* Both results failed with the same status, or both succeeded and match. */
static void expect_same(nb_tensor *got, nb_tensor *want, double rtol, double atol) {
    if (!got || !want) {
        if (got || want) {
            fprintf(stderr, "%s: only one backend failed: %s\n", what, nb_last_message());
            fail();
        }
        nb_clear_error();
        return;
    }
    expect_match(got, want, rtol, atol, NULL);
}

static void describe(const char *op, nb_dtype dt, int layout, const int64_t *shape, int nd, const char *extra) {
    int k = snprintf(what, sizeof what, "%s %s %s [", op, nb_dtype_name(dt), LAYOUT_NAME[usable_layout(layout, nd)]);
    for (int d = 0; d < nd && k < (int)sizeof what - 24; d++) k += snprintf(what + k, sizeof what - (size_t)k, "%s%lld", d ? "," : "", (long long)shape[d]);
    snprintf(what + k, sizeof what - (size_t)k, "] %s", extra ? extra : "");
}

/* 1e-15·N·max|x|: the absolute slack of a double-accumulated sum of N terms. */
static double sum_slack(nb_tensor *x, int64_t nterms) {
    if (nb_numel(x) == 0) return 0;
    double m = 0;
    nb_item(NBT(nb_max(nb_abs(nb_cast(x, NB_F64)), NULL, 0, false)), &m);
    return 1e-15 * (double)nterms * m;
}

/* ------------------------------------------------------------------------ */
/* Shapes the elementwise cases run on                                      */
/* ------------------------------------------------------------------------ */

typedef struct shape_case { int nd; int64_t s[3]; unsigned layouts; } shape_case;
#define ALL_LAYOUTS ((1u << L_COUNT) - 1)
#define LAY(l) (1u << (l))
static const shape_case EW_SHAPES[] = {
    {3, {3, 4, 5}, ALL_LAYOUTS},
    {0, {0}, LAY(L_CONTIG)},
    {2, {0, 3}, LAY(L_CONTIG) | LAY(L_STEP)},
    {2, {257, 300}, LAY(L_OFFSET) | LAY(L_TRANS)}, /* 77100 elements: several threads */
};
#define NEW_SHAPES (sizeof EW_SHAPES / sizeof EW_SHAPES[0])

/* ------------------------------------------------------------------------ */
/* UNARY                                                                    */
/* ------------------------------------------------------------------------ */

typedef nb_tensor *(*unary_fn)(nb_tensor *);
static nb_tensor *u_leaky_relu(nb_tensor *x) { return nb_leaky_relu(x, 0.125); }
static nb_tensor *u_elu(nb_tensor *x) { return nb_elu(x, 1.5); }
static nb_tensor *u_softplus(nb_tensor *x) { return nb_softplus(x, 2.0, 3.0); } /* threshold reached */
static nb_tensor *u_clamp(nb_tensor *x) { return nb_clamp(x, -0.75, 1.25); }

typedef struct ucase { nb_op op; unary_fn f; int dom; } ucase;
static const ucase UNARY[] = {
    {NB_OP_NEG, nb_neg, D_ANY},           {NB_OP_ABS, nb_abs, D_ANY},
    {NB_OP_SIGN, nb_sign, D_INTV},        {NB_OP_EXP, nb_exp, D_ANY},
    {NB_OP_EXPM1, nb_expm1, D_ANY},       {NB_OP_LOG, nb_log, D_POS},
    {NB_OP_LOG1P, nb_log1p, D_POS},       {NB_OP_SQRT, nb_sqrt, D_POS},
    {NB_OP_RSQRT, nb_rsqrt, D_POS},       {NB_OP_SQUARE, nb_square, D_ANY},
    {NB_OP_RECIPROCAL, nb_reciprocal, D_NONZERO}, {NB_OP_SIN, nb_sin, D_ANY},
    {NB_OP_COS, nb_cos, D_ANY},           {NB_OP_TAN, nb_tan, D_SMALL},
    {NB_OP_TANH, nb_tanh, D_ANY},         {NB_OP_SIGMOID, nb_sigmoid, D_ANY},
    {NB_OP_RELU, nb_relu, D_ANY},         {NB_OP_LEAKY_RELU, u_leaky_relu, D_ANY},
    {NB_OP_ELU, u_elu, D_ANY},            {NB_OP_GELU, nb_gelu, D_ANY},
    {NB_OP_GELU_TANH, nb_gelu_tanh, D_ANY}, {NB_OP_SILU, nb_silu, D_ANY},
    {NB_OP_SOFTPLUS, u_softplus, D_ANY},  {NB_OP_ERF, nb_erf, D_ANY},
    {NB_OP_FLOOR, nb_floor, D_ANY},       {NB_OP_CEIL, nb_ceil, D_ANY},
    {NB_OP_ROUND, nb_round, D_ANY},       {NB_OP_CLAMP, u_clamp, D_ANY},
    {NB_OP_LOGICAL_NOT, nb_logical_not, D_INTV},
};
#define NUNARY (sizeof UNARY / sizeof UNARY[0])

/* gelu and gelu_tanh in f32: |x| 2^-52, the error of the reference's
 * formula where it cancels (see the header); NULL otherwise. */
static nb_tensor *ref_slack(nb_op op, nb_tensor *x, nb_dtype odt) {
    if (odt != NB_F32 || (op != NB_OP_GELU && op != NB_OP_GELU_TANH)) return NULL;
    return NBT(nb_mul(nb_abs(nb_cast(x, NB_F64)), 0x1p-52));
}

static void run_unary_case(const ucase *c, nb_dtype dt, const int64_t *shape, int nd, int layout) {
    nb_scope_begin();
    describe(nb__ops[c->op].name, dt, layout, shape, nd, NULL);
    pair x = make_pair(shape, nd, dt, layout, c->dom);
    nb_tensor *yc = NBT(c->f(x.cpu)), *yr = NBT(c->f(x.ref));
    nb_dtype odt = nb_dtype_of(yr);
    expect_match(yc, yr, rtol_of(odt), atol_of(odt), ref_slack(c->op, x.cpu, odt));
    nb_scope_end();
}

/* Special values, tiled so the SIMD loops see them in every lane position. */
static const double SPECIALS[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, 2.5, -2.5,
                                  100.0, -100.0, 1e-30, -1e-30, 88.0, 89.0, -88.0, -104.0, 0.06, -0.07, 3e38, 1e300};
#define NSPECIAL (sizeof SPECIALS / sizeof SPECIALS[0])

static nb_tensor *specials(int64_t n, nb_dtype dt) {
    double v[256];
    NB_ASSERT(n <= 256);
    for (int64_t i = 0; i < n; i++) v[i] = SPECIALS[i % (int64_t)NSPECIAL];
    return NBT(nb_cast(nb_from_data(v, &n, 1, NB_F64), dt));
}

static void test_unary(void **state) {
    const ucase *c = *state;
    static const nb_dtype FL[] = {NB_F32, NB_F64}, GENERIC[] = {NB_F16, NB_BF16, NB_I32};
    for (size_t k = 0; k < 2; k++)
        for (size_t s = 0; s < NEW_SHAPES; s++)
            for (int l = 0; l < L_COUNT; l++)
                if (EW_SHAPES[s].layouts & LAY(l)) run_unary_case(c, FL[k], EW_SHAPES[s].s, EW_SHAPES[s].nd, l);
    for (size_t k = 0; k < 3; k++) {
        run_unary_case(c, GENERIC[k], EW_SHAPES[0].s, 3, L_CONTIG);
        run_unary_case(c, GENERIC[k], EW_SHAPES[0].s, 3, L_FLIP);
    }
    run_unary_case(c, NB_BOOL, EW_SHAPES[0].s, 3, L_STEP);
    /* NaN, infinities, signed zeros, overflow and underflow edges */
    for (size_t k = 0; k < 2; k++) {
        nb_scope_begin();
        describe(nb__ops[c->op].name, FL[k], L_CONTIG, (int64_t[]){200}, 1, "special values");
        nb_tensor *x = specials(200, FL[k]);
        nb_tensor *yc = NBT(c->f(x)), *yr = NBT(c->f(NBT(nb_to_device(x, NB_REF))));
        expect_match(yc, yr, rtol_of(FL[k]), atol_of(FL[k]), ref_slack(c->op, x, FL[k]));
        nb_scope_end();
    }
}

/* ------------------------------------------------------------------------ */
/* BINARY                                                                   */
/* ------------------------------------------------------------------------ */

typedef nb_tensor *(*binary_fn)(nb_tensor *, nb_tensor *);
typedef struct bcase {
    nb_op op;
    binary_fn f;
    nb_tensor *(*sf)(nb_tensor *, double);  /* the C-scalar forms */
    nb_tensor *(*si)(nb_tensor *, int64_t);
    int da, db;
    bool ints; /* meaningful on integer tensors */
} bcase;
#define B(E, name, da, db, ints) {NB_OP_##E, nb_##name##_t, nb_##name##_sf, nb_##name##_si, da, db, ints}
static const bcase BINARY[] = {
    B(ADD, add, D_ANY, D_ANY, true),
    B(SUB, sub, D_ANY, D_ANY, true),
    B(MUL, mul, D_ANY, D_ANY, true),
    B(DIV, div, D_ANY, D_NONZERO, true),
    B(POW, pow, D_POS, D_SMALL, false),
    B(MAXIMUM, maximum, D_INTV, D_INTV, true),
    B(MINIMUM, minimum, D_INTV, D_INTV, true),
    B(ATAN2, atan2, D_ANY, D_ANY, true),
    B(REMAINDER, remainder, D_ANY, D_NONZERO, true),
    B(FMOD, fmod, D_ANY, D_NONZERO, true),
    B(EQ, eq, D_INTV, D_INTV, true),
    B(NE, ne, D_INTV, D_INTV, true),
    B(LT, lt, D_INTV, D_INTV, true),
    B(LE, le, D_INTV, D_INTV, true),
    B(GT, gt, D_INTV, D_INTV, true),
    B(GE, ge, D_INTV, D_INTV, true),
    B(LOGICAL_AND, logical_and, D_INTV, D_INTV, true),
    B(LOGICAL_OR, logical_or, D_INTV, D_INTV, true),
    B(LOGICAL_XOR, logical_xor, D_INTV, D_INTV, true),
};
#undef B
#define NBINARY (sizeof BINARY / sizeof BINARY[0])

typedef struct bshape { int na; int64_t a[4]; int nb; int64_t b[4]; int la, lb; } bshape;
static const bshape BIN_SHAPES[] = {
    {3, {3, 4, 5}, 3, {3, 4, 5}, L_CONTIG, L_CONTIG},
    {3, {3, 4, 5}, 3, {3, 4, 5}, L_TRANS, L_STEP},
    {3, {3, 4, 5}, 3, {3, 4, 5}, L_FLIP, L_BCAST},
    {3, {3, 4, 5}, 3, {3, 4, 5}, L_BCAST, L_TRANS},
    {3, {3, 4, 5}, 3, {3, 4, 5}, L_STEP, L_FLIP},
    {3, {4, 1, 6}, 2, {5, 1}, L_CONTIG, L_CONTIG}, /* broadcast both ways */
    {3, {4, 1, 6}, 2, {5, 1}, L_FLIP, L_TRANS},
    {2, {5, 6}, 1, {6}, L_STEP, L_FLIP},
    {0, {0}, 2, {2, 3}, L_CONTIG, L_CONTIG},
    {2, {2, 3}, 0, {0}, L_TRANS, L_CONTIG},
    {0, {0}, 0, {0}, L_CONTIG, L_CONTIG},
    {2, {0, 3}, 1, {3}, L_CONTIG, L_CONTIG},
    {2, {257, 300}, 1, {300}, L_CONTIG, L_CONTIG},
    {2, {257, 300}, 2, {257, 300}, L_TRANS, L_CONTIG},
    {2, {257, 300}, 2, {257, 300}, L_TRANS, L_TRANS}, /* the CPU walk goes along the inputs' rows */
    /* rows longer than the CPU backend's staging block (512): strided, reversed, broadcast */
    {2, {3, 1100}, 2, {3, 1100}, L_STEP, L_BCAST},
    {2, {3, 1100}, 2, {3, 1100}, L_FLIP, L_CONTIG},
};
#define NBIN_SHAPES (sizeof BIN_SHAPES / sizeof BIN_SHAPES[0])

static void run_binary_case(const bcase *c, nb_dtype da, nb_dtype db, const bshape *s) {
    nb_scope_begin();
    char extra[96];
    snprintf(extra, sizeof extra, "with %s %s rank %d", nb_dtype_name(db), LAYOUT_NAME[usable_layout(s->lb, s->nb)], s->nb);
    describe(nb__ops[c->op].name, da, s->la, s->a, s->na, extra);
    pair a = make_pair(s->a, s->na, da, s->la, c->da), b = make_pair(s->b, s->nb, db, s->lb, c->db);
    nb_tensor *yc = NBT(c->f(a.cpu, b.cpu)), *yr = NBT(c->f(a.ref, b.ref));
    nb_dtype odt = nb_dtype_of(yr);
    expect_match(yc, yr, rtol_of(odt), atol_of(odt), NULL);
    nb_scope_end();
}

/* Scalar forms: a C number only lifts the category (int tensor + 2.5 → f32). */
static nb_tensor *binary_scalar(const bcase *c, nb_tensor *a, bool as_int) {
    return as_int ? c->si(a, 3) : c->sf(a, 2.5);
}

static void test_binary(void **state) {
    const bcase *c = *state;
    static const nb_dtype FL[] = {NB_F32, NB_F64};
    for (size_t k = 0; k < 2; k++)
        for (size_t s = 0; s < NBIN_SHAPES; s++) run_binary_case(c, FL[k], FL[k], &BIN_SHAPES[s]);
    /* promotion and the generic (double) path: mixed floats, half types, integers, bool */
    static const nb_dtype MIX[][2] = {{NB_F32, NB_F64}, {NB_F16, NB_BF16}, {NB_F16, NB_F16}, {NB_BF16, NB_F32},
                                      {NB_I32, NB_F32}, {NB_I32, NB_I32}, {NB_I64, NB_I8}, {NB_U8, NB_I8},
                                      {NB_BOOL, NB_BOOL}, {NB_I64, NB_I64}, {NB_I8, NB_I8}, {NB_U8, NB_U8}};
    for (size_t k = 0; k < sizeof MIX / sizeof MIX[0]; k++) {
        bool any_int = !nb_dtype_is_float(MIX[k][0]) || !nb_dtype_is_float(MIX[k][1]);
        if (any_int && !c->ints) continue;
        bool is_bool = MIX[k][0] == NB_BOOL;
        if (is_bool && (c->op == NB_OP_SUB || c->op == NB_OP_REMAINDER || c->op == NB_OP_FMOD || c->op == NB_OP_DIV)) continue;
        bcase cc = *c;
        if (is_bool) cc.da = cc.db = D_BOOL;
        if (MIX[k][0] == NB_U8) cc.da = D_POS; /* u8 holds no negatives */
        run_binary_case(&cc, MIX[k][0], MIX[k][1], &BIN_SHAPES[1]);
        run_binary_case(&cc, MIX[k][0], MIX[k][1], &BIN_SHAPES[6]);
        if (c->op >= NB_OP_EQ && c->op <= NB_OP_LOGICAL_XOR) /* the mask kernels' long staged rows */
            for (size_t s = NBIN_SHAPES - 2; s < NBIN_SHAPES; s++) run_binary_case(&cc, MIX[k][0], MIX[k][1], &BIN_SHAPES[s]);
    }
    /* weak scalar operands */
    static const nb_dtype SDT[] = {NB_F32, NB_F64, NB_I32, NB_F16};
    for (size_t k = 0; k < 4; k++)
        for (int as_int = 0; as_int < 2; as_int++) {
            if (!c->ints && !nb_dtype_is_float(SDT[k])) continue;
            nb_scope_begin();
            describe(nb__ops[c->op].name, SDT[k], L_FLIP, BIN_SHAPES[0].a, 3, as_int ? "with int scalar" : "with float scalar");
            pair a = make_pair(BIN_SHAPES[0].a, 3, SDT[k], L_FLIP, c->da == D_POS ? D_POS : D_ANY);
            nb_tensor *yc = NBT(binary_scalar(c, a.cpu, as_int)), *yr = NBT(binary_scalar(c, a.ref, as_int));
            expect_match(yc, yr, rtol_of(nb_dtype_of(yr)), atol_of(nb_dtype_of(yr)), NULL);
            nb_scope_end();
        }
    /* every pair of special values, a [n, 1] against b [n]; comparisons and logical ops on half types too */
    bool mask_op = c->op >= NB_OP_EQ && c->op <= NB_OP_LOGICAL_XOR;
    static const nb_dtype SPECIAL_DT[] = {NB_F32, NB_F64, NB_F16, NB_BF16};
    for (size_t k = 0; k < (mask_op ? 4u : 2u); k++) {
        nb_scope_begin();
        describe(nb__ops[c->op].name, SPECIAL_DT[k], L_CONTIG, (int64_t[]){NSPECIAL, NSPECIAL}, 2, "special values");
        nb_tensor *s = specials(NSPECIAL, SPECIAL_DT[k]);
        nb_tensor *a = NBT(nb_unsqueeze(s, 1));
        nb_tensor *yc = NBT(c->f(a, s));
        nb_tensor *yr = NBT(c->f(NBT(nb_to_device(a, NB_REF)), NBT(nb_to_device(s, NB_REF))));
        expect_match(yc, yr, rtol_of(nb_dtype_of(yr)), atol_of(nb_dtype_of(yr)), NULL);
        nb_scope_end();
    }
}

/* ------------------------------------------------------------------------ */
/* WHERE                                                                    */
/* ------------------------------------------------------------------------ */

static void where_case(int nd, const int64_t *cs, int nda, const int64_t *as, int ndb, const int64_t *bs,
                       nb_dtype ct, nb_dtype at, nb_dtype bt, int lc, int la, int lb) {
    nb_scope_begin();
    describe("where", at, la, as, nda, nb_dtype_name(ct));
    pair c = make_pair(cs, nd, ct, lc, ct == NB_BOOL ? D_BOOL : D_INTV);
    pair a = make_pair(as, nda, at, la, D_ANY), b = make_pair(bs, ndb, bt, lb, D_ANY);
    nb_tensor *yc = NBT(nb_where(c.cpu, a.cpu, b.cpu)), *yr = NBT(nb_where(c.ref, a.ref, b.ref));
    expect_match(yc, yr, rtol_of(nb_dtype_of(yr)), 0, NULL);
    nb_scope_end();
}

/* got (CPU) and want (REF) hold the same bits (contiguous copies compared byte for byte). */
static void expect_bits(nb_tensor *got, nb_tensor *want) {
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(nb_dtype_of(got), nb_dtype_of(want));
    assert_int_equal(nb_numel(got), nb_numel(want));
    size_t n = (size_t)nb_numel(got) * nb_dtype_size(nb_dtype_of(got));
    char *g = malloc(n + 1), *w = malloc(n + 1);
    assert_non_null(g);
    assert_non_null(w);
    assert_int_equal(nb_copy_to_host(NBT(nb_contiguous(got)), g, n), NB_OK);
    assert_int_equal(nb_copy_to_host(NBT(nb_contiguous(want)), w, n), NB_OK);
    size_t bad = 0;
    while (bad < n && g[bad] == w[bad]) bad++;
    if (bad < n) fprintf(stderr, "%s: byte %zu differs: cpu 0x%02x vs ref 0x%02x\n", what, bad, g[bad] & 0xff, w[bad] & 0xff);
    free(g);
    free(w);
    if (bad < n) fail();
}

/* A pair shaped `shape` in `layout` whose values cycle through SPECIALS (from position `phase`) and zeros. */
static pair special_pair(const int64_t *shape, int nd, nb_dtype dt, int layout, int phase) {
    int64_t bs[NB_MAX_DIMS], n = 1;
    layout = usable_layout(layout, nd);
    base_shape(layout, shape, nd, bs);
    for (int d = 0; d < nd; d++) n *= bs[d];
    double *v = malloc(sizeof(double) * (size_t)n);
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = (i + phase) % 3 == 0 ? 0.0 : SPECIALS[(i + phase) % (int64_t)NSPECIAL];
    nb_tensor *base = NBT(nb_cast(NBT(nb_from_data(v, bs, nd, NB_F64)), dt));
    free(v);
    return from_base(base, layout, shape, nd);
}

/* where over [3, 1100] (rows longer than the CPU staging block) with special values everywhere:
 * a condition is true when nonzero (NaN true, -0 false); the result must be ref's bits (-0, NaN kept). */
static void where_bits_case(nb_dtype ct, nb_dtype dt, int lc, int la, int lb) {
    const int64_t shape[] = {3, 1100};
    nb_scope_begin();
    char extra[96];
    snprintf(extra, sizeof extra, "cond %s %s, b %s", nb_dtype_name(ct), LAYOUT_NAME[lc], LAYOUT_NAME[lb]);
    describe("where", dt, la, shape, 2, extra);
    pair c = special_pair(shape, 2, ct, lc, 0), a = special_pair(shape, 2, dt, la, 5), b = special_pair(shape, 2, dt, lb, 11);
    expect_bits(NBT(nb_where(c.cpu, a.cpu, b.cpu)), NBT(nb_where(c.ref, a.ref, b.ref)));
    nb_scope_end();
}

static void check_where_bits(void) {
    static const nb_dtype DT[] = {NB_F32, NB_F64, NB_F16, NB_BF16, NB_I8, NB_I32, NB_I64, NB_U8, NB_BOOL};
    static const int LAYOUTS[] = {L_CONTIG, L_FLIP, L_STEP, L_BCAST, L_TRANS};
    const size_t nl = sizeof LAYOUTS / sizeof LAYOUTS[0];
    const size_t nd = sizeof DT / sizeof DT[0];
    for (size_t i = 0; i < nd; i++)
        for (size_t j = 0; j < nd; j++)
            where_bits_case(DT[i], DT[j], LAYOUTS[(i + j) % nl], LAYOUTS[(i + 2 * j + 1) % nl], LAYOUTS[(2 * i + j + 2) % nl]);
    /* a scalar branch (ReLU backward, masked_fill): contiguous condition and other branch */
    nb_scope_begin();
    describe("where", NB_F32, L_CONTIG, (int64_t[]){3, 1100}, 2, "scalar b");
    pair c = special_pair((int64_t[]){3, 1100}, 2, NB_BOOL, L_CONTIG, 0);
    pair a = special_pair((int64_t[]){3, 1100}, 2, NB_F32, L_CONTIG, 4);
    nb_tensor *zc = NBT(nb_scalar(-0.0, NB_F32)), *zr = NBT(nb_to_device(zc, NB_REF));
    expect_bits(NBT(nb_where(c.cpu, a.cpu, zc)), NBT(nb_where(c.ref, a.ref, zr)));
    expect_bits(NBT(nb_where(c.cpu, zc, a.cpu)), NBT(nb_where(c.ref, zr, a.ref)));
    nb_scope_end();
}

static void check_where(nb_op op) {
    (void)op;
    const int64_t c3[] = {4, 1, 6}, a2[] = {5, 6}, b3[] = {4, 5, 1}, full[] = {3, 4, 5}, big[] = {257, 300};
    for (int l = 0; l < L_COUNT; l++) {
        where_case(3, full, 3, full, 3, full, NB_BOOL, NB_F32, NB_F32, l, (l + 1) % L_COUNT, (l + 2) % L_COUNT);
        where_case(3, full, 3, full, 3, full, NB_F64, NB_F64, NB_F64, (l + 3) % L_COUNT, l, (l + 4) % L_COUNT);
    }
    where_case(3, c3, 2, a2, 3, b3, NB_BOOL, NB_F32, NB_F32, L_CONTIG, L_CONTIG, L_CONTIG);
    where_case(3, c3, 2, a2, 3, b3, NB_F32, NB_F64, NB_F32, L_FLIP, L_TRANS, L_STEP);
    where_case(3, c3, 2, a2, 3, b3, NB_I32, NB_I32, NB_F16, L_STEP, L_FLIP, L_CONTIG);
    where_case(0, c3, 2, a2, 0, b3, NB_BOOL, NB_F32, NB_F32, L_CONTIG, L_CONTIG, L_CONTIG);
    where_case(2, (int64_t[]){0, 3}, 1, (int64_t[]){3}, 0, b3, NB_BOOL, NB_F64, NB_F64, L_CONTIG, L_CONTIG, L_CONTIG);
    where_case(2, big, 2, big, 1, big + 1, NB_BOOL, NB_F32, NB_F32, L_TRANS, L_CONTIG, L_CONTIG);
    check_where_bits();
}

/* ------------------------------------------------------------------------ */
/* REDUCE and ARGREDUCE                                                     */
/* ------------------------------------------------------------------------ */

static nb_tensor *reduce_apply(nb_op op, nb_tensor *x, const int *axes, int naxes, bool keep) {
    switch (op) {
    case NB_OP_SUM: return nb_sum(x, axes, naxes, keep);
    case NB_OP_PROD: return nb_prod(x, axes, naxes, keep);
    case NB_OP_MAX: return nb_max(x, axes, naxes, keep);
    case NB_OP_MIN: return nb_min(x, axes, naxes, keep);
    case NB_OP_ARGMAX: return nb_argmax(x, axes ? axes[0] : 0, keep);
    case NB_OP_ARGMIN: return nb_argmin(x, axes ? axes[0] : 0, keep);
    case NB_OP_CUMSUM: return nb_cumsum(x, axes ? axes[0] : 0);
    case NB_OP_CUMPROD: return nb_cumprod(x, axes ? axes[0] : 0);
    default: fail_msg("%s is not a reduction or scan", nb__ops[op].name); return NULL;
    }
}

typedef struct axes_case { const int *axes; int n; } axes_case;
static const int64_t RANK0[1] = {1}; /* shape pointer for rank-0 cases (never read) */
static const int AX0[] = {0}, AXM1[] = {-1}, AX1[] = {1}, AX02[] = {0, 2}, AX012[] = {2, 0, 1};

/* One reduction or scan case over axes `ax` (argreduce and scan use the first). */
static void reduce_case(nb_op op, nb_dtype dt, const int64_t *shape, int nd, int layout, int dom, axes_case ax,
                        bool keep) {
    nb_scope_begin();
    char extra[64];
    int k = snprintf(extra, sizeof extra, "axes");
    for (int i = 0; ax.axes && i < ax.n; i++) k += snprintf(extra + k, sizeof extra - (size_t)k, " %d", ax.axes[i]);
    snprintf(extra + k, sizeof extra - (size_t)k, "%s keepdim %d", ax.axes ? "" : " all", keep);
    describe(nb__ops[op].name, dt, layout, shape, nd, extra);
    pair x = make_pair(shape, nd, dt, layout, dom);
    nb_tensor *yc = reduce_apply(op, x.cpu, ax.axes, ax.n, keep), *yr = reduce_apply(op, x.ref, ax.axes, ax.n, keep);
    double slack = 0; /* sums: N = the number of terms summed into one output */
    if (yr && op == NB_OP_SUM && nb_numel(yr)) slack = sum_slack(x.cpu, nb_numel(x.cpu) / nb_numel(yr));
    if (yr && op == NB_OP_CUMSUM && nd) slack = sum_slack(x.cpu, shape[ax.axes[0] < 0 ? ax.axes[0] + nd : ax.axes[0]]);
    expect_same(yc, yr, rtol_of(yr ? nb_dtype_of(yr) : dt), atol_of(dt) + slack);
    nb_scope_end();
}

static void check_reduce(nb_op op) {
    static const axes_case AXES[] = {{NULL, 0}, {AX0, 1}, {AXM1, 1}, {AX02, 2}, {AX1, 1}, {AX012, 3}};
    int dom = op == NB_OP_PROD ? D_NEAR1 : D_ANY;
    const int64_t s3[] = {3, 4, 5};
    for (int keep = 0; keep < 2; keep++)
        for (size_t a = 0; a < sizeof AXES / sizeof AXES[0]; a++)
            for (int l = 0; l < L_COUNT; l++) {
                reduce_case(op, NB_F32, s3, 3, l, dom, AXES[a], keep);
                reduce_case(op, NB_F64, s3, 3, (l + a) % L_COUNT, op == NB_OP_PROD ? D_ANY : dom, AXES[a], keep);
            }
    /* the generic path: integers (sum/prod → i64), bool, half types */
    static const nb_dtype GEN[] = {NB_I32, NB_I8, NB_F16, NB_BF16, NB_BOOL};
    for (size_t k = 0; k < 5; k++) {
        reduce_case(op, GEN[k], s3, 3, L_FLIP, GEN[k] == NB_BOOL ? D_BOOL : D_INTV, AXES[3], false);
        reduce_case(op, GEN[k], s3, 3, L_STEP, GEN[k] == NB_BOOL ? D_BOOL : D_INTV, AXES[0], true);
    }
    /* rank 0: over all axes, axis 0 and axis -1 */
    for (size_t a = 0; a < 3; a++) reduce_case(op, NB_F64, RANK0, 0, L_CONTIG, D_ANY, AXES[a], a == 1);
    /* zero-size: empty outputs, and sum/prod over an empty axis give 0/1 (max/min: error on both) */
    const int64_t z[] = {0, 3};
    for (size_t a = 0; a < 3; a++) {
        reduce_case(op, NB_F32, z, 2, L_CONTIG, D_ANY, AXES[a], false);
        reduce_case(op, NB_F64, z, 2, L_STEP, D_ANY, AXES[a], true);
    }
    /* large: one output (fixed-chunk parallel sum), leading axes (column sums),
     * trailing axis (pairwise rows), strided (generic walk), > 65536 elements */
    const int64_t big[] = {257, 300}, row[] = {2, 40000}, col[] = {40000, 2}, flat[] = {70001};
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_F64 : NB_F32;
        reduce_case(op, dt, big, 2, L_OFFSET, dom, AXES[0], false);
        reduce_case(op, dt, big, 2, L_OFFSET, dom, AXES[1], true);
        reduce_case(op, dt, big, 2, L_CONTIG, dom, AXES[2], false);
        reduce_case(op, dt, big, 2, L_TRANS, dom, AXES[1], false);
        reduce_case(op, dt, big, 2, L_FLIP, dom, AXES[0], false);
        reduce_case(op, dt, row, 2, L_CONTIG, dom, AXES[2], false);
        reduce_case(op, dt, row, 2, L_OFFSET, dom, AXES[0], false);
        reduce_case(op, dt, col, 2, L_CONTIG, dom, AXES[1], false);
        reduce_case(op, dt, flat, 1, L_OFFSET, dom, AXES[0], false);
        reduce_case(op, dt, flat, 1, L_STEP, dom, AXES[0], false);
    }
}

static void check_argreduce(nb_op op) {
    static const axes_case AXES[] = {{AX0, 1}, {AXM1, 1}, {AX1, 1}};
    const int64_t s3[] = {3, 4, 5};
    for (int keep = 0; keep < 2; keep++)
        for (size_t a = 0; a < 3; a++)
            for (int l = 0; l < L_COUNT; l++) {
                reduce_case(op, NB_F32, s3, 3, l, D_ANY, AXES[a], keep);
                reduce_case(op, NB_F64, s3, 3, (l + 2) % L_COUNT, D_ANY, AXES[a], keep);
                reduce_case(op, NB_I32, s3, 3, l, D_INTV, AXES[a], keep); /* ties: the first wins */
            }
    reduce_case(op, NB_F16, s3, 3, L_FLIP, D_INTV, AXES[1], false);
    reduce_case(op, NB_BOOL, s3, 3, L_STEP, D_BOOL, AXES[0], false);
    reduce_case(op, NB_F64, RANK0, 0, L_CONTIG, D_ANY, AXES[0], false);
    reduce_case(op, NB_F64, RANK0, 0, L_CONTIG, D_ANY, AXES[1], true);
    const int64_t z[] = {0, 3};
    reduce_case(op, NB_F32, z, 2, L_CONTIG, D_ANY, AXES[1], false); /* empty result */
    reduce_case(op, NB_F32, z, 2, L_CONTIG, D_ANY, AXES[0], false); /* empty axis: error on both */
    const int64_t big[] = {257, 300};
    reduce_case(op, NB_F32, big, 2, L_CONTIG, D_ANY, AXES[0], false);
    reduce_case(op, NB_F64, big, 2, L_TRANS, D_ANY, AXES[1], true);
}

/* ------------------------------------------------------------------------ */
/* SCAN                                                                     */
/* ------------------------------------------------------------------------ */

static void check_scan(nb_op op) {
    static const axes_case AXES[] = {{AX0, 1}, {AXM1, 1}, {AX1, 1}};
    int dom = op == NB_OP_CUMPROD ? D_NEAR1 : D_ANY;
    const int64_t s3[] = {3, 4, 5}, z[] = {0, 3}, big[] = {257, 300};
    for (size_t a = 0; a < 3; a++)
        for (int l = 0; l < L_COUNT; l++) {
            reduce_case(op, NB_F32, s3, 3, l, D_ANY, AXES[a], false);
            reduce_case(op, NB_F64, s3, 3, (l + 1) % L_COUNT, D_ANY, AXES[a], false);
        }
    reduce_case(op, NB_I32, s3, 3, L_FLIP, D_INTV, AXES[1], false); /* → i64 */
    reduce_case(op, NB_BOOL, s3, 3, L_STEP, D_BOOL, AXES[0], false);
    reduce_case(op, NB_F16, s3, 3, L_TRANS, D_INTV, AXES[2], false);
    reduce_case(op, NB_F64, RANK0, 0, L_CONTIG, D_ANY, AXES[0], false);
    reduce_case(op, NB_F64, RANK0, 0, L_CONTIG, D_ANY, AXES[1], false);
    reduce_case(op, NB_F32, z, 2, L_CONTIG, D_ANY, AXES[0], false);
    reduce_case(op, NB_F32, z, 2, L_CONTIG, D_ANY, AXES[1], false);
    for (int k = 0; k < 2; k++) {
        reduce_case(op, k ? NB_F64 : NB_F32, big, 2, L_CONTIG, dom, AXES[0], false);
        reduce_case(op, k ? NB_F64 : NB_F32, big, 2, L_TRANS, dom, AXES[1], false);
    }
}

/* ------------------------------------------------------------------------ */
/* MATMUL                                                                   */
/* ------------------------------------------------------------------------ */

/* a @ b on both devices; f32 within k·u·(|a|@|b|) (Higham, Accuracy and Stability, §3.1). */
static void matmul_case(nb_dtype dt, int na, const int64_t *as, int la, int nbb, const int64_t *bs, int lb) {
    nb_scope_begin();
    describe("matmul", dt, la, as, na, LAYOUT_NAME[usable_layout(lb, nbb)]);
    pair a = make_pair(as, na, dt, la, D_ANY), b = make_pair(bs, nbb, dt, lb, D_ANY);
    nb_tensor *yc = NBT(nb_matmul(a.cpu, b.cpu)), *yr = NBT(nb_matmul(a.ref, b.ref));
    int64_t k = as[na - 1];
    nb_tensor *mag = NBT(nb_matmul(nb_abs(nb_cast(a.ref, NB_F64)), nb_abs(nb_cast(b.ref, NB_F64))));
    double u = dt == NB_F64 ? 0x1p-53 : 0x1p-24; /* f16/bf16 accumulate in f32 */
    nb_tensor *bound = NBT(nb_mul(mag, (double)k * u));
    expect_match(yc, yr, rtol_of(dt), atol_of(dt), bound);
    nb_scope_end();
}

static void check_matmul(nb_op op) {
    (void)op;
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_F64 : NB_F32;
        for (int l = 0; l < L_COUNT; l++)
            matmul_case(dt, 2, (int64_t[]){5, 7}, l, 2, (int64_t[]){7, 3}, (l + 1) % L_COUNT);
        matmul_case(dt, 1, (int64_t[]){7}, L_STEP, 2, (int64_t[]){7, 3}, L_TRANS);     /* 1-D @ 2-D */
        matmul_case(dt, 2, (int64_t[]){5, 7}, L_FLIP, 1, (int64_t[]){7}, L_CONTIG);    /* 2-D @ 1-D */
        matmul_case(dt, 1, (int64_t[]){7}, L_CONTIG, 1, (int64_t[]){7}, L_FLIP);       /* dot: rank 0 */
        matmul_case(dt, 4, (int64_t[]){2, 1, 3, 4}, L_CONTIG, 3, (int64_t[]){5, 4, 6}, L_TRANS); /* batch broadcast */
        matmul_case(dt, 3, (int64_t[]){3, 4, 5}, L_BCAST, 3, (int64_t[]){3, 5, 2}, L_FLIP);
        matmul_case(dt, 1, (int64_t[]){4}, L_CONTIG, 3, (int64_t[]){2, 4, 3}, L_STEP);
        matmul_case(dt, 2, (int64_t[]){3, 0}, L_CONTIG, 2, (int64_t[]){0, 4}, L_CONTIG); /* k = 0: zeros */
        matmul_case(dt, 2, (int64_t[]){0, 5}, L_CONTIG, 2, (int64_t[]){5, 4}, L_CONTIG);
        matmul_case(dt, 2, (int64_t[]){64, 300}, L_CONTIG, 2, (int64_t[]){300, 96}, L_CONTIG); /* blocked GEMM */
        matmul_case(dt, 2, (int64_t[]){33, 300}, L_TRANS, 2, (int64_t[]){300, 530}, L_STEP);
        matmul_case(dt, 3, (int64_t[]){8, 17, 40}, L_CONTIG, 3, (int64_t[]){8, 40, 9}, L_FLIP);
        matmul_case(dt, 3, (int64_t[]){12, 5, 6}, L_OFFSET, 3, (int64_t[]){12, 6, 7}, L_TRANS); /* threads over the batch */
        matmul_case(dt, 2, (int64_t[]){150, 40}, L_TRANS, 2, (int64_t[]){40, 530}, L_CONTIG);  /* m > MC, n > NC */
    }
    /* f16/bf16: converted to f32, multiplied, rounded once */
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_BF16 : NB_F16;
        matmul_case(dt, 2, (int64_t[]){5, 7}, L_TRANS, 2, (int64_t[]){7, 3}, L_FLIP);
        matmul_case(dt, 4, (int64_t[]){2, 1, 3, 4}, L_CONTIG, 3, (int64_t[]){5, 4, 6}, L_STEP);
        matmul_case(dt, 1, (int64_t[]){40}, L_CONTIG, 2, (int64_t[]){40, 33}, L_TRANS);
    }
}

/* c + a @ b: on the CPU bit for bit add(matmul(a, b), c), the contract (the addend goes in at the
 * GEMM's tile stores); against REF (which has no matmul_add: its matmul, then its add) within
 * matmul's bound plus one rounding of the sum. */
static void addmm_case(nb_dtype dt, int na, const int64_t *as, int la, int nbb, const int64_t *bs, int lb, int nc,
                       const int64_t *cs, int lc) {
    nb_scope_begin();
    describe("addmm", dt, la, as, na, LAYOUT_NAME[usable_layout(lc, nc)]);
    pair a = make_pair(as, na, dt, la, D_ANY), b = make_pair(bs, nbb, dt, lb, D_ANY), c = make_pair(cs, nc, dt, lc, D_ANY);
    nb_tensor *yc = NBT(nb_addmm(c.cpu, a.cpu, b.cpu)), *yr = NBT(nb_addmm(c.ref, a.ref, b.ref));
    nbt_assert_same_bits(yc, NBT(nb_add(NBT(nb_matmul(a.cpu, b.cpu)), c.cpu)), what);
    int64_t k = as[na - 1];
    nb_tensor *mag = NBT(nb_matmul(nb_abs(nb_cast(a.ref, NB_F64)), nb_abs(nb_cast(b.ref, NB_F64))));
    double u = dt == NB_F64 ? 0x1p-53 : 0x1p-24;
    nb_tensor *bound = NBT(nb_add(NBT(nb_mul(mag, (double)(k + 2) * u)), NBT(nb_mul(nb_abs(nb_cast(c.ref, NB_F64)), 2 * u))));
    expect_match(yc, yr, rtol_of(dt), atol_of(dt), bound);
    nb_scope_end();
}

/* The addend as a bias row, a column, a full operand in every layout; the blocked GEMM (k over
 * one block: the addend after the last), a thin product (computed transposed), k = 0, batches
 * split over threads, and f16 / bf16 (added after the rounding product). */
static void check_addmm(nb_op op) {
    (void)op;
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_F64 : NB_F32;
        for (int l = 0; l < L_COUNT; l++)
            addmm_case(dt, 2, (int64_t[]){5, 7}, l, 2, (int64_t[]){7, 3}, (l + 1) % L_COUNT, 2, (int64_t[]){5, 3}, l);
        addmm_case(dt, 2, (int64_t[]){5, 7}, L_CONTIG, 2, (int64_t[]){7, 3}, L_CONTIG, 1, (int64_t[]){3}, L_FLIP);
        addmm_case(dt, 2, (int64_t[]){5, 7}, L_TRANS, 2, (int64_t[]){7, 3}, L_CONTIG, 2, (int64_t[]){5, 1}, L_CONTIG);
        addmm_case(dt, 4, (int64_t[]){2, 1, 3, 4}, L_CONTIG, 3, (int64_t[]){5, 4, 6}, L_TRANS, 3, (int64_t[]){5, 3, 1}, L_STEP);
        addmm_case(dt, 2, (int64_t[]){3, 0}, L_CONTIG, 2, (int64_t[]){0, 4}, L_CONTIG, 1, (int64_t[]){4}, L_CONTIG);
        addmm_case(dt, 2, (int64_t[]){64, 1100}, L_CONTIG, 2, (int64_t[]){1100, 96}, L_STEP, 1, (int64_t[]){96}, L_CONTIG);
        addmm_case(dt, 2, (int64_t[]){33, 300}, L_TRANS, 2, (int64_t[]){300, 530}, L_STEP, 2, (int64_t[]){33, 1}, L_CONTIG);
        addmm_case(dt, 2, (int64_t[]){200, 600}, L_CONTIG, 2, (int64_t[]){600, 9}, L_TRANS, 1, (int64_t[]){9}, L_CONTIG);
        addmm_case(dt, 2, (int64_t[]){200, 40}, L_CONTIG, 2, (int64_t[]){40, 5}, L_CONTIG, 2, (int64_t[]){200, 5}, L_TRANS);
        addmm_case(dt, 3, (int64_t[]){12, 5, 6}, L_OFFSET, 3, (int64_t[]){12, 6, 7}, L_TRANS, 3, (int64_t[]){12, 5, 7}, L_FLIP);
        addmm_case(dt, 3, (int64_t[]){8, 32, 9}, L_CONTIG, 3, (int64_t[]){8, 9, 784}, L_CONTIG, 2, (int64_t[]){32, 1}, L_CONTIG);
    }
    for (int k = 0; k < 2; k++) {
        nb_dtype dt = k ? NB_BF16 : NB_F16;
        addmm_case(dt, 2, (int64_t[]){5, 7}, L_TRANS, 2, (int64_t[]){7, 3}, L_FLIP, 1, (int64_t[]){3}, L_CONTIG);
        addmm_case(dt, 4, (int64_t[]){2, 1, 3, 4}, L_CONTIG, 3, (int64_t[]){5, 4, 6}, L_STEP, 2, (int64_t[]){3, 1}, L_CONTIG);
    }
}

/* ------------------------------------------------------------------------ */
/* GATHER, SCATTER_ADD, CAT, PAD                                            */
/* ------------------------------------------------------------------------ */

static void gather_case(nb_dtype dt, int nd, const int64_t *xs, int lx, int axis, const int64_t *is, int li,
                        nb_dtype idt) {
    nb_scope_begin();
    describe("gather", dt, lx, xs, nd, nb_dtype_name(idt));
    int a = axis < 0 ? axis + nd : axis;
    pair x = make_pair(xs, nd, dt, lx, D_ANY), ix = index_pair(is, nd, xs[a], li, idt);
    expect_same(nb_gather(x.cpu, axis, ix.cpu), nb_gather(x.ref, axis, ix.ref), 0, 0);
    nb_scope_end();
}

static void check_gather(nb_op op) {
    (void)op;
    const int64_t xs[] = {4, 5, 6};
    for (int l = 0; l < L_COUNT; l++) {
        gather_case(NB_F32, 3, xs, l, 1, (int64_t[]){4, 3, 6}, (l + 1) % L_COUNT, NB_I64);
        gather_case(NB_F64, 3, xs, l, -1, (int64_t[]){4, 5, 9}, (l + 2) % L_COUNT, NB_I32);
        gather_case(NB_I32, 3, xs, l, 0, (int64_t[]){2, 3, 4}, l, NB_I64); /* index smaller than x */
    }
    gather_case(NB_F16, 3, xs, L_FLIP, 2, (int64_t[]){4, 5, 2}, L_TRANS, NB_I8);
    gather_case(NB_F32, 3, xs, L_CONTIG, 1, (int64_t[]){4, 0, 6}, L_CONTIG, NB_I64);
    gather_case(NB_F64, 1, (int64_t[]){9}, L_STEP, 0, (int64_t[]){20}, L_FLIP, NB_I64);
    gather_case(NB_F32, 2, (int64_t[]){300, 257}, L_TRANS, 0, (int64_t[]){300, 257}, L_CONTIG, NB_I64);
}

static void scatter_case(nb_dtype dt, const int64_t *xs, int lx, int axis, const int64_t *is, int li,
                         const int64_t *ss, int ls) {
    nb_scope_begin();
    describe("scatter_add", dt, lx, xs, 3, LAYOUT_NAME[usable_layout(ls, 3)]);
    int a = axis < 0 ? axis + 3 : axis;
    pair x = make_pair(xs, 3, dt, lx, D_INTV), src = make_pair(ss, 3, dt, ls, D_ANY);
    pair ix = index_pair(is, 3, xs[a], li, NB_I64);
    expect_same(nb_scatter_add(x.cpu, axis, ix.cpu, src.cpu), nb_scatter_add(x.ref, axis, ix.ref, src.ref),
                rtol_of(dt), 0);
    nb_scope_end();
}

static void check_scatter_add(nb_op op) {
    (void)op;
    const int64_t xs[] = {4, 5, 6}, is[] = {4, 7, 6};
    for (int l = 0; l < L_COUNT; l++) {
        scatter_case(NB_F32, xs, l, 1, is, (l + 1) % L_COUNT, is, (l + 2) % L_COUNT); /* duplicates accumulate */
        scatter_case(NB_F64, xs, (l + 3) % L_COUNT, -1, (int64_t[]){3, 4, 9}, l, (int64_t[]){5, 6, 10}, l);
        scatter_case(NB_I32, xs, l, 0, (int64_t[]){6, 2, 3}, L_CONTIG, (int64_t[]){7, 3, 3}, l);
    }
    scatter_case(NB_F32, xs, L_CONTIG, 1, (int64_t[]){4, 0, 6}, L_CONTIG, (int64_t[]){4, 0, 6}, L_CONTIG);
    scatter_case(NB_F64, (int64_t[]){40, 50, 40}, L_TRANS, 1, (int64_t[]){40, 60, 40}, L_CONTIG,
                 (int64_t[]){40, 60, 40}, L_FLIP);
}

static void cat_case(nb_dtype const *dts, const int64_t (*shapes)[3], const int *lays, int n, int nd, int axis) {
    nb_scope_begin();
    describe("cat", dts[0], lays[0], shapes[0], nd, "with others");
    nb_tensor *tc[4], *tr[4];
    for (int i = 0; i < n; i++) {
        pair p = make_pair(shapes[i], nd, dts[i], lays[i], D_ANY);
        tc[i] = p.cpu;
        tr[i] = p.ref;
    }
    nb_tensor *yc = nb_cat(tc, n, axis), *yr = nb_cat(tr, n, axis);
    expect_same(yc, yr, 0, 0);
    nb_scope_end();
}

static void check_cat(nb_op op) {
    (void)op;
    const int64_t s[][3] = {{3, 2, 5}, {3, 4, 5}, {3, 0, 5}, {3, 1, 5}};
    for (int l = 0; l < L_COUNT; l++) {
        const int lays[] = {l, (l + 1) % L_COUNT, (l + 2) % L_COUNT, (l + 3) % L_COUNT};
        cat_case((nb_dtype[]){NB_F32, NB_F32, NB_F32, NB_F32}, s, lays, 4, 3, 1);
        cat_case((nb_dtype[]){NB_F32, NB_F64, NB_I32, NB_F16}, s, lays, 4, 3, -2); /* promotion */
    }
    const int64_t t[][3] = {{2, 3, 4}, {2, 3, 1}, {2, 3, 7}};
    cat_case((nb_dtype[]){NB_F64, NB_F64, NB_F64}, t, (int[]){L_TRANS, L_FLIP, L_STEP}, 3, 3, -1);
    cat_case((nb_dtype[]){NB_I64, NB_BOOL}, (const int64_t[][3]){{5}, {3}}, (int[]){L_FLIP, L_STEP}, 2, 1, 0);
    cat_case((nb_dtype[]){NB_F32}, t, (int[]){L_TRANS}, 1, 3, 0);
    cat_case((nb_dtype[]){NB_F32, NB_F32}, (const int64_t[][3]){{0}, {0}}, (int[]){0, 0}, 2, 0, 0); /* error on both */
    cat_case((nb_dtype[]){NB_F32, NB_F32}, (const int64_t[][3]){{300, 200}, {300, 100}}, (int[]){L_TRANS, L_CONTIG}, 2, 2, 1);
}

static void pad_case(nb_dtype dt, const int64_t *xs, int nd, int lx, const int64_t *pads, int npad, nb_pad_mode mode) {
    nb_scope_begin();
    describe("pad", dt, lx, xs, nd, mode == NB_PAD_REFLECT ? "reflect" : "constant");
    pair x = make_pair(xs, nd, dt, lx, D_ANY);
    expect_same(nb_pad(x.cpu, pads, npad, mode, 1.5), nb_pad(x.ref, pads, npad, mode, 1.5), 0, 0);
    nb_scope_end();
}

static void check_pad(nb_op op) {
    (void)op;
    const int64_t xs[] = {3, 4, 5};
    const int64_t grow[] = {1, 2, 0, 3}, crop[] = {-1, 2, 1, -2}, refl[] = {2, 1, 1, 3}, all3[] = {1, 1, 2, 0, 0, 1};
    for (int l = 0; l < L_COUNT; l++) {
        pad_case(NB_F32, xs, 3, l, grow, 4, NB_PAD_CONSTANT);
        pad_case(NB_F64, xs, 3, l, crop, 4, NB_PAD_CONSTANT);
        pad_case(NB_F64, xs, 3, l, refl, 4, NB_PAD_REFLECT);
        pad_case(NB_F32, xs, 3, l, all3, 6, NB_PAD_CONSTANT);
    }
    pad_case(NB_I32, xs, 3, L_FLIP, grow, 4, NB_PAD_CONSTANT);
    pad_case(NB_F16, xs, 3, L_STEP, refl, 2, NB_PAD_REFLECT);
    pad_case(NB_F32, (int64_t[]){0, 3}, 2, L_CONTIG, grow, 4, NB_PAD_CONSTANT);
    pad_case(NB_F32, xs, 3, L_CONTIG, (int64_t[]){-3, -3}, 2, NB_PAD_CONSTANT); /* crops to nothing: error on both */
    pad_case(NB_F32, xs, 3, L_CONTIG, (int64_t[]){5, 0}, 2, NB_PAD_REFLECT);    /* too wide: error on both */
    pad_case(NB_F64, xs, 3, L_CONTIG, NULL, 0, NB_PAD_CONSTANT);
    pad_case(NB_F32, (int64_t[]){257, 300}, 2, L_TRANS, grow, 4, NB_PAD_CONSTANT);
}

/* ------------------------------------------------------------------------ */
/* COPY: cast, contiguous, to_device                                        */
/* ------------------------------------------------------------------------ */

static void check_cast(nb_op op) {
    (void)op;
    const int64_t s[] = {3, 4, 5};
    for (int from = 0; from < NB_DTYPE_COUNT; from++)
        for (int to = 0; to < NB_DTYPE_COUNT; to++)
            for (int l = L_CONTIG; l <= L_FLIP; l += L_FLIP) {
                nb_scope_begin();
                describe("cast", (nb_dtype)from, l, s, 3, nb_dtype_name((nb_dtype)to));
                /* non-integers of both signs within every type's range (u8: truncation of negatives saturates at 0) */
                pair x = make_pair(s, 3, (nb_dtype)from, l, from == NB_BOOL ? D_BOOL : from == NB_U8 ? D_POS : D_ANY);
                expect_same(nb_cast(x.cpu, (nb_dtype)to), nb_cast(x.ref, (nb_dtype)to), 0, 0);
                nb_scope_end();
            }
    nb_scope_begin();
    describe("cast", NB_F64, L_CONTIG, (int64_t[]){200}, 1, "special values to f32/f16/bf16/i32/u8/bool");
    nb_tensor *sp = specials(200, NB_F64), *spr = NBT(nb_to_device(sp, NB_REF));
    static const nb_dtype TO[] = {NB_F32, NB_F16, NB_BF16, NB_I32, NB_U8, NB_BOOL, NB_I64};
    for (int k = 0; k < 7; k++) expect_match(NBT(nb_cast(sp, TO[k])), NBT(nb_cast(spr, TO[k])), 0, 0, NULL);
    nb_scope_end();
}

static void check_contiguous(nb_op op) {
    (void)op;
    const int64_t s[] = {3, 4, 5}, big[] = {257, 300};
    static const nb_dtype DT[] = {NB_F32, NB_F64, NB_F16, NB_I64, NB_BOOL};
    for (int k = 0; k < 5; k++)
        for (int l = 0; l < L_COUNT; l++) {
            nb_scope_begin();
            describe("contiguous", DT[k], l, s, 3, NULL);
            pair x = make_pair(s, 3, DT[k], l, DT[k] == NB_BOOL ? D_BOOL : D_ANY);
            nb_tensor *yc = NBT(nb_contiguous(x.cpu)), *yr = NBT(nb_contiguous(x.ref));
            assert_true(nb_is_contiguous(yc) && nb_is_contiguous(yr));
            expect_match(yc, yr, 0, 0, NULL);
            expect_match(x.cpu, yr, 0, 0, NULL); /* same values as the strided input */
            nb_scope_end();
        }
    for (int l = 0; l < L_COUNT; l++) {
        nb_scope_begin();
        describe("contiguous", NB_F32, l, big, 2, NULL);
        pair x = make_pair(big, 2, NB_F32, l, D_ANY);
        expect_match(NBT(nb_contiguous(x.cpu)), NBT(nb_contiguous(x.ref)), 0, 0, NULL);
        nb_scope_end();
    }
}

static void check_to_device(nb_op op) {
    (void)op;
    const int64_t s[] = {3, 4, 5};
    for (int l = 0; l < L_COUNT; l++) {
        nb_scope_begin();
        describe("to_device", NB_F32, l, s, 3, NULL);
        pair x = make_pair(s, 3, NB_F32, l, D_ANY);
        nb_tensor *to_ref = NBT(nb_to_device(x.cpu, NB_REF)), *to_cpu = NBT(nb_to_device(x.ref, NB_CPU));
        assert_int_equal(nb_device_of(to_ref).type, NB_DEVICE_REF);
        assert_int_equal(nb_device_of(to_cpu).type, NB_DEVICE_CPU);
        expect_match(x.cpu, to_ref, 0, 0, NULL);
        expect_match(to_cpu, x.ref, 0, 0, NULL);
        nb_scope_end();
    }
}

/* ------------------------------------------------------------------------ */
/* WINDOW: unfold, fold, max_pool2d, max_unpool2d                           */
/* ------------------------------------------------------------------------ */

static const nb_window2d WINDOWS[] = {
    {{2, 3}, {1, 2}, {1, 0}, {1, 1}}, /* stride and padding */
    {{3, 2}, {2, 1}, {1, 1}, {2, 1}}, /* dilation */
    {{2, 2}, {2, 2}, {0, 0}, {1, 1}}, /* pooling default */
    {{1, 1}, {1, 1}, {0, 0}, {1, 1}},
};
#define NWINDOWS (sizeof WINDOWS / sizeof WINDOWS[0])

/* The window op on x: unfold, fold of x's unfold-shaped columns, max_pool2d (values and
 * argmax), max_unpool2d of x at the argmax of a pooled image. */
static void window_case(nb_op op, nb_dtype dt, const int64_t *xs, int nd, int layout, const nb_window2d *w) {
    nb_scope_begin();
    describe(nb__ops[op].name, dt, layout, xs, nd, "window");
    const int64_t *hw = xs + nd - 2;
    int dom = op == NB_OP_MAX_POOL2D ? D_INTV : D_ANY; /* ties: the first maximum wins */
    if (op == NB_OP_UNFOLD) {
        pair x = make_pair(xs, nd, dt, layout, dom);
        expect_same(nb_unfold(x.cpu, *w), nb_unfold(x.ref, *w), 0, 0);
    } else if (op == NB_OP_FOLD) {
        nb_tensor *shape = nb_unfold(NBT(nb_zeros(xs, nd, dt)), *w);
        if (shape) { /* overlapping taps sum: both accumulate in the same order here, allow the sum slack */
            pair c = make_pair(nb_shape(shape), nb_ndim(shape), dt, layout, dom);
            expect_same(nb_fold(c.cpu, hw[0], hw[1], *w), nb_fold(c.ref, hw[0], hw[1], *w), rtol_of(dt),
                        sum_slack(c.cpu, w->kernel[0] * w->kernel[1]));
        } else {
            nb_clear_error();
        }
    } else if (op == NB_OP_MAX_POOL2D) {
        pair x = make_pair(xs, nd, dt, layout, dom);
        nb_tensor *ic = NULL, *ir = NULL;
        nb_tensor *yc = nb_max_pool2d_with_indices(x.cpu, *w, &ic), *yr = nb_max_pool2d_with_indices(x.ref, *w, &ir);
        expect_same(yc, yr, 0, 0);
        if (yc && yr) expect_match(ic, ir, 0, 0, NULL);
    } else {
        pair img = make_pair(xs, nd, dt, L_CONTIG, D_ANY);
        nb_tensor *ic = NULL, *ir = NULL;
        nb_tensor *p = nb_max_pool2d_with_indices(img.cpu, *w, &ic);
        if (p && nb_max_pool2d_with_indices(img.ref, *w, &ir)) {
            pair x = make_pair(nb_shape(p), nb_ndim(p), dt, layout, D_ANY);
            expect_same(nb_max_unpool2d(x.cpu, ic, hw[0], hw[1]), nb_max_unpool2d(x.ref, ir, hw[0], hw[1]),
                        rtol_of(dt), 0);
        } else {
            nb_clear_error();
        }
    }
    nb_scope_end();
}

static void check_window(nb_op op) {
    const int64_t x4[] = {2, 3, 6, 7}, x3[] = {3, 5, 4}, big[] = {4, 8, 48, 50};
    for (size_t k = 0; k < NWINDOWS; k++)
        for (int l = 0; l < L_COUNT; l++) {
            window_case(op, NB_F32, x4, 4, l, &WINDOWS[k]);
            window_case(op, NB_F64, x4, 4, (l + 1) % L_COUNT, &WINDOWS[k]);
        }
    window_case(op, NB_F32, x3, 3, L_TRANS, &WINDOWS[0]); /* unbatched */
    window_case(op, NB_F64, x3, 3, L_FLIP, &WINDOWS[2]);
    window_case(op, NB_F32, big, 4, L_CONTIG, &WINDOWS[1]); /* 76800 elements: several threads */
    /* NaN wins a pooling window (torch) */
    nb_scope_begin();
    describe(nb__ops[op].name, NB_F32, L_CONTIG, x4, 4, "with NaN");
    nb_tensor *x = NBT(nb_cast(nb_randn(x4, 4, NB_F64), NB_F32));
    assert_int_equal(nb_set(x, (int64_t[]){1, 2, 3, 3}, NAN), NB_OK);
    if (op == NB_OP_MAX_POOL2D || op == NB_OP_UNFOLD) {
        nb_tensor *xr = NBT(nb_to_device(x, NB_REF));
        nb_tensor *yc = op == NB_OP_UNFOLD ? nb_unfold(x, WINDOWS[2]) : nb_max_pool2d(x, WINDOWS[2]);
        nb_tensor *yr = op == NB_OP_UNFOLD ? nb_unfold(xr, WINDOWS[2]) : nb_max_pool2d(xr, WINDOWS[2]);
        expect_match(yc, yr, 0, 0, NULL);
        if (op == NB_OP_MAX_POOL2D) assert_true(isnan(nbt_at(yc, ((1 * 3 + 2) * 3 + 1) * 3 + 1)));
    }
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* LINALG: cholesky, solve_triangular, solve, slogdet                       */
/* ------------------------------------------------------------------------ */

/* Well-conditioned operands on the CPU: A = X X^T / n + I (symmetric positive definite; also
 * solved as a general and as a triangular matrix), B random [batch, n, k]. */
static nb_tensor *spd(const int64_t *shape, int nd, nb_dtype dt) {
    nb_tensor *x = NBT(nb_randn(shape, nd, NB_F64));
    nb_tensor *s = NBT(nb_div(NBT(nb_matmul(x, NBT(nb_transpose(x, -2, -1)))), (double)shape[nd - 1]));
    return NBT(nb_cast(NBT(nb_add(s, NBT(nb_eye(shape[nd - 1], shape[nd - 1], NB_F64)))), dt));
}

static void linalg_case(nb_op op, nb_dtype dt, const int64_t *as, int nd, int64_t k, bool transposed) {
    nb_scope_begin();
    describe(nb__ops[op].name, dt, transposed ? L_TRANS : L_CONTIG, as, nd, "linalg");
    nb_tensor *a = spd(as, nd, dt);
    if (transposed) a = NBT(nb_transpose(NBT(nb_add(a, NBT(nb_triu(a, 1)))), -2, -1)); /* strided, not symmetric */
    int64_t bs[NB_MAX_DIMS];
    memcpy(bs, as, sizeof(int64_t) * (size_t)nd);
    bs[nd - 1] = k;
    nb_tensor *b = NBT(nb_cast(NBT(nb_randn(bs, nd, NB_F64)), dt));
    nb_tensor *ar = NBT(nb_to_device(a, NB_REF)), *br = NBT(nb_to_device(b, NB_REF));
    double rtol = dt == NB_F64 ? 1e-11 : 1e-6;
    if (op == NB_OP_CHOLESKY) expect_same(nb_cholesky(a, false), nb_cholesky(ar, false), rtol, 1e-14);
    else if (op == NB_OP_SOLVE) expect_same(nb_solve(a, b), nb_solve(ar, br), rtol, 1e-14);
    else if (op == NB_OP_SOLVE_TRIANGULAR)
        for (int f = 0; f < 8; f++)
            expect_same(nb_solve_triangular(a, b, f & 1, f & 2, f & 4), nb_solve_triangular(ar, br, f & 1, f & 2, f & 4),
                        rtol, 1e-14);
    else {
        nb_tensor *sc, *lc, *sr, *lr;
        assert_int_equal(nb_slogdet(a, &sc, &lc), NB_OK);
        assert_int_equal(nb_slogdet(ar, &sr, &lr), NB_OK);
        expect_match(sc, sr, 0, 0, NULL);
        expect_match(lc, lr, rtol, 1e-14, NULL);
    }
    nb_scope_end();
}

static void check_linalg(nb_op op) {
    const int64_t one[] = {5, 5}, batch[] = {2, 3, 4, 4}, many[] = {64, 6, 6}, empty[] = {3, 0, 0}, big[] = {40, 40};
    for (int t = 0; t < 2; t++) {
        linalg_case(op, NB_F64, one, 2, 3, t);
        linalg_case(op, NB_F32, batch, 4, 2, t);
        linalg_case(op, NB_F64, many, 3, 1, t); /* several matrices per thread */
        linalg_case(op, NB_F64, big, 2, 7, t);
    }
    linalg_case(op, NB_F64, empty, 3, 2, false);
    /* a singular matrix: slogdet gives sign 0 and -inf on both, solve fails on both */
    nb_scope_begin();
    nb_tensor *z = NBT(nb_zeros(NB_SHAPE(2, 3, 3), NB_F64)), *zr = NBT(nb_to_device(z, NB_REF));
    if (op == NB_OP_SLOGDET) {
        nb_tensor *sc, *lc, *sr, *lr;
        assert_int_equal(nb_slogdet(z, &sc, &lc), NB_OK);
        assert_int_equal(nb_slogdet(zr, &sr, &lr), NB_OK);
        expect_match(sc, sr, 0, 0, NULL);
        expect_match(lc, lr, 0, 0, NULL);
        assert_true(nbt_at(sc, 0) == 0 && isinf(nbt_at(lc, 1)) && nbt_at(lc, 1) < 0);
    } else {
        describe(nb__ops[op].name, NB_F64, L_CONTIG, NB_SHAPE(2, 3, 3), "singular");
        nb_tensor *b = NBT(nb_ones(NB_SHAPE(2, 3, 1), NB_F64)), *br = NBT(nb_to_device(b, NB_REF));
        nb_tensor *c = op == NB_OP_CHOLESKY ? nb_cholesky(z, false)
                       : op == NB_OP_SOLVE  ? nb_solve(z, b) : nb_solve_triangular(z, b, false, false, false);
        assert_null(c);
        nb_clear_error();
        c = op == NB_OP_CHOLESKY ? nb_cholesky(zr, false)
            : op == NB_OP_SOLVE  ? nb_solve(zr, br) : nb_solve_triangular(zr, br, false, false, false);
        assert_null(c);
        nb_clear_error();
    }
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* ATTENTION: the tiled kernel (query tiles of 64, key tiles of 256)        */
/* ------------------------------------------------------------------------ */

static void attention_case(nb_dtype dt, const int64_t *qs, const int64_t *ks, int64_t dv, nb_attn_mask mask,
                           int64_t window, bool transposed) {
    nb_scope_begin();
    describe("attention", dt, transposed ? L_TRANS : L_CONTIG, qs, 4, mask == NB_ATTN_MASK_NONE ? "none" : "masked");
    int64_t vs[4] = {ks[0], ks[1], ks[2], dv};
    nb_tensor *q = NBT(nb_cast(NBT(nb_randn(qs, 4, NB_F64)), dt)), *k = NBT(nb_cast(NBT(nb_randn(ks, 4, NB_F64)), dt));
    nb_tensor *v = NBT(nb_cast(NBT(nb_randn(vs, 4, NB_F64)), dt));
    if (transposed) /* a strided q: the same values through a transposed copy's transpose */
        q = NBT(nb_transpose(NBT(nb_contiguous(NBT(nb_transpose(q, 2, 3)))), 2, 3));
    nb_attention_opts o = {.mask = mask, .window = window};
    nb_tensor *c = nb_scaled_dot_product_attention(q, k, v, o);
    nb_tensor *r = nb_scaled_dot_product_attention(NBT(nb_to_device(q, NB_REF)), NBT(nb_to_device(k, NB_REF)),
                                                   NBT(nb_to_device(v, NB_REF)), o);
    /* f32: the kernel accumulates scores, sums and P V in float over up to Lk terms */
    expect_same(c, r, dt == NB_F64 ? 1e-11 : 2e-5, dt == NB_F64 ? 1e-13 : 2e-6);
    nb_scope_end();
}

static void check_attention(nb_op op) {
    (void)op;
    const int64_t q1[] = {2, 4, 70, 16}, k1[] = {2, 2, 300, 16}, q2[] = {1, 3, 129, 8}, k2[] = {1, 3, 129, 8};
    const int64_t q0[] = {2, 4, 0, 16}, k0[] = {2, 2, 0, 16}; /* with k1 and q1 */
    for (int m = 0; m < 3; m++) {
        nb_attn_mask mask = (nb_attn_mask)m; /* NONE, CAUSAL, SLIDING */
        attention_case(NB_F32, q1, k1, 8, mask, 37, false);
        attention_case(NB_F64, q1, k1, 5, mask, 300, true);
        attention_case(NB_F64, q2, k2, 8, mask, 1, false);
        attention_case(NB_F32, q0, k1, 8, mask, 3, false);
        attention_case(NB_F64, q1, k0, 8, mask, 3, false); /* no keys: zeros */
    }
}

/* ATTENTION_BACKWARD: the tiled gradient against the reference's plain one (which recomputes
 * the probabilities itself), from the CPU forward's output and logsumexps */
static void attention_backward_case(nb_dtype dt, const int64_t *qs, const int64_t *ks, int64_t dv, nb_attn_mask mask,
                                    int64_t window) {
    nb_scope_begin();
    describe("attention_backward", dt, L_CONTIG, qs, 4, mask == NB_ATTN_MASK_NONE ? "none" : "masked");
    int64_t vs[4] = {ks[0], ks[1], ks[2], dv}, os[4] = {qs[0], qs[1], qs[2], dv};
    nb_tensor *in[6] = {NBT(nb_cast(NBT(nb_randn(qs, 4, NB_F64)), dt)), NBT(nb_cast(NBT(nb_randn(ks, 4, NB_F64)), dt)),
                        NBT(nb_cast(NBT(nb_randn(vs, 4, NB_F64)), dt))};
    nb_attrs a = {.sub = (int)mask, .i = {window}, .ni = 1, .f = {0.3}};
    nb_tensor *fw[NB_MAX_OUTS] = {NULL};
    if (nb__apply_n(NB_OP_ATTENTION, in, 3, &a, fw) != 2) fail_msg("%s", nb_last_message());
    in[3] = nb__own(fw[0]);
    in[4] = NBT(nb_cast(NBT(nb_randn(os, 4, NB_F64)), dt));
    in[5] = nb__own(fw[1]);
    nb_tensor *rin[6], *c[NB_MAX_OUTS] = {NULL}, *r[NB_MAX_OUTS] = {NULL};
    for (int i = 0; i < 6; i++) rin[i] = NBT(nb_to_device(in[i], NB_REF));
    assert_int_equal(nb__apply_n(NB_OP_ATTENTION_BACKWARD, in, 6, &a, c), 3);
    assert_int_equal(nb__apply_n(NB_OP_ATTENTION_BACKWARD, rin, 6, &a, r), 3);
    for (int i = 0; i < 3; i++) /* sums over up to Lk (dq) or Lq · heads (dk, dv) products */
        expect_same(nb__own(c[i]), nb__own(r[i]), dt == NB_F64 ? 1e-10 : 1e-4, dt == NB_F64 ? 1e-11 : 1e-4);
    nb_scope_end();
}

static void check_attention_backward(nb_op op) {
    (void)op;
    const int64_t q1[] = {2, 4, 70, 16}, k1[] = {2, 2, 300, 16}, q2[] = {1, 3, 129, 8}, k2[] = {1, 3, 129, 8};
    const int64_t q0[] = {2, 4, 0, 16}, k0[] = {2, 2, 0, 16}; /* with k1 and q1 */
    for (int m = 0; m < 3; m++) {
        nb_attn_mask mask = (nb_attn_mask)m;
        attention_backward_case(NB_F32, q1, k1, 8, mask, 37);
        attention_backward_case(NB_F64, q1, k1, 5, mask, 300);
        attention_backward_case(NB_F64, q2, k2, 8, mask, 1);
        attention_backward_case(NB_F32, q0, k1, 8, mask, 3);  /* no queries: zero dk, dv */
        attention_backward_case(NB_F64, q1, k0, 8, mask, 3);  /* no keys: zero dq */
    }
}

/* ------------------------------------------------------------------------ */
/* CONVOLUTION, CONVOLUTION_BACKWARD: conv2d and its gradients by the CPU's image-by-image kernels
 * against the reference backend, which has none and runs conv.c's composite (unfold, matmul,
 * fold) */
typedef struct conv_geom {
    int64_t x[4], w[4];
    nb_conv2d_opts o;
    bool bias;
} conv_geom;

static void conv_case(nb_dtype dt, const conv_geom *g) {
    nb_scope_begin();
    describe("convolution", dt, L_CONTIG, g->x, 4, g->bias ? "bias" : "no bias");
    int64_t bs[1] = {g->w[0]};
    nb_tensor *in[3] = {NBT(nb_cast(NBT(nb_randn(g->x, 4, NB_F64)), dt)), NBT(nb_cast(NBT(nb_randn(g->w, 4, NB_F64)), dt)),
                        g->bias ? NBT(nb_cast(NBT(nb_randn(bs, 1, NB_F64)), dt)) : NULL};
    nb_tensor *grads[2][3] = {{NULL}}, *ys[2], *seed = NULL;
    for (int dev = 0; dev < 2; dev++) { /* 0: CPU, 1: the reference */
        nb_tensor *t[3] = {NULL};
        for (int i = 0; i < 3; i++)
            if (in[i]) {
                t[i] = dev ? NBT(nb_to_device(in[i], NB_REF)) : NBT(nb_clone(in[i]));
                assert_int_equal(nb_set_requires_grad(t[i], true), NB_OK);
            }
        nb_tensor *y = NBT(nb_conv2d(t[0], t[1], t[2], g->o));
        if (!seed) seed = NBT(nb_cast(NBT(nb_randn(nb_shape(y), nb_ndim(y), NB_F64)), dt)); /* one for both */
        assert_int_equal(nb_backward(y, dev ? NBT(nb_to_device(seed, NB_REF)) : seed, false), NB_OK);
        ys[dev] = NBT(nb_detach(y));
        for (int i = 0; i < 3; i++) grads[dev][i] = t[i] ? nb_grad(t[i]) : NULL;
    }
    double rtol = dt == NB_F64 ? 1e-10 : 1e-4, atol = dt == NB_F64 ? 1e-11 : 1e-4;
    expect_same(ys[0], ys[1], rtol, atol);
    for (int i = 0; i < 3; i++)
        if (in[i]) expect_same(grads[0][i], grads[1][i], rtol, atol);
    nb_scope_end();
}

static void check_conv(nb_op op) {
    (void)op;
    const conv_geom geoms[] = {
        {{4, 3, 9, 7}, {5, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},       /* "same": the shifted unfold */
        {{3, 4, 8, 8}, {6, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 2}, true},       /* stride, dilation, groups */
        {{5, 6, 4, 5}, {4, 6, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, false},      /* pointwise: no unfold */
        {{1, 2, 5, 5}, {3, 2, 3, 3}, {{1, 1}, {2, 2}, {2, 2}, 1}, true},       /* one image: threads inside */
        {{7, 2, 3, 4}, {4, 1, 2, 2}, {{1, 2}, {1, 1}, {1, 1}, 2}, false},      /* 7 images over 3 threads */
        {{2, 3, 6, 6}, {0, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, false},      /* no output channels: dx zeros */
        {{0, 3, 5, 5}, {2, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, true},       /* no images */
    };
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++) {
        conv_case(NB_F32, &geoms[k]);
        conv_case(NB_F64, &geoms[k]);
    }
}

/* QUANT: codes by bit arithmetic (CPU) vs an exhaustive search (reference) */
/* ------------------------------------------------------------------------ */

static nb_quantized quant_on(const nb_quantized *q, nb_device dev) {
    return (nb_quantized){NBT(nb_to_device(q->codes, dev)), NBT(nb_to_device(q->scales, dev)),
                          q->global_scale ? NBT(nb_to_device(q->global_scale, dev)) : NULL, q->format, q->layout};
}

/* x [rows, k]: normal values scaled by 2^-20 .. 2^20 per row, with ties of the format's grid */
static nb_tensor *quant_input(int64_t rows, int64_t k) {
    nb_tensor *e = NBT(nb_floor(NBT(nb_mul(NBT(nb_rand((int64_t[]){rows, 1}, 2, NB_F32)), 40.0))));
    nb_tensor *x = NBT(nb_mul(NBT(nb_randn((int64_t[]){rows, k}, 2, NB_F32)), NBT(nb_exp(NBT(nb_mul(NBT(nb_sub(e, 20.0)), 0.6931471805599453))))));
    /* every 8th element a multiple of 1/16 (ties of coarse grids after scaling) */
    nb_tensor *tie = NBT(nb_div(NBT(nb_round(NBT(nb_mul(x, 16.0)))), 16.0));
    nb_tensor *pick = NBT(nb_eq(NBT(nb_remainder(NBT(nb_arange(0, (double)(rows * k), 1, NB_I64)), 8)), 0));
    return NBT(nb_where(NBT(nb_reshape(pick, (int64_t[]){rows, k}, 2)), tie, x));
}

static void check_quant(nb_op op) {
    const nb_scaled_format fmts[] = {NB_FMT_F8E4M3FN, NB_FMT_F8E5M2, NB_FMT_F8E4M3FNUZ, NB_FMT_F8E5M2FNUZ,
                                     NB_FMT_F6E2M3, NB_FMT_F6E3M2, NB_FMT_F4E2M1};
    for (int f = 0; f < 7; f++)
        for (int lay = 0; lay < NB_SCALE_LAYOUT_COUNT; lay++) {
            bool fnuz = fmts[f] == NB_FMT_F8E4M3FNUZ || fmts[f] == NB_FMT_F8E5M2FNUZ;
            if ((lay == NB_SCALE_MX && fnuz) || (lay == NB_SCALE_NVFP4 && fmts[f] != NB_FMT_F4E2M1)) continue;
            nb_scope_begin();
            int64_t shape[2] = {9, 96};
            describe(nb__ops[op].name, NB_F32, L_CONTIG, shape, 2, nb_scaled_format_name(fmts[f]));
            nb_tensor *x = quant_input(9, 96), *w = quant_input(13, 96);
            nb_quantized qc, qr, wc;
            assert_int_equal(nb_quantize(x, fmts[f], (nb_scale_layout)lay, &qc), NB_OK);
            assert_int_equal(nb_quantize(NBT(nb_to_device(x, NB_REF)), fmts[f], (nb_scale_layout)lay, &qr), NB_OK);
            assert_int_equal(nb_quantize(w, fmts[f], (nb_scale_layout)lay, &wc), NB_OK);
            nb_quantized qcr = quant_on(&qc, NB_REF), wcr = quant_on(&wc, NB_REF);
            if (op == NB_OP_QUANTIZE) {
                expect_same(qc.codes, qr.codes, 0, 0);
                expect_same(qc.scales, qr.scales, 0, 0);
            } else if (op == NB_OP_DEQUANTIZE) {
                expect_same(nb_dequantize(&qc, NB_F32), nb_dequantize(&qcr, NB_F32), 0, 0);
            } else { /* float32 sums of 96 terms: within 96 u of the sum of |terms| (Higham, 3.1) */
                nb_tensor *c = NBT(nb_cast(NBT(nb_scaled_matmul(&qc, &wc, NB_F32)), NB_F64));
                nb_tensor *r = NBT(nb_to_device(NBT(nb_scaled_matmul(&qcr, &wcr, NB_F64)), NB_CPU));
                nb_tensor *mag = NBT(nb_matmul(NBT(nb_abs(NBT(nb_dequantize(&qc, NB_F64)))),
                                               NBT(nb_transpose(NBT(nb_abs(NBT(nb_dequantize(&wc, NB_F64)))), 0, 1))));
                nb_tensor *over = NBT(nb_gt(NBT(nb_abs(NBT(nb_sub(c, r)))), NBT(nb_mul(mag, 96 * 0x1p-24))));
                if (nbt_at(NBT(nb_sum(NBT(nb_cast(over, NB_I64)), NULL, 0, false)), 0) != 0) {
                    fprintf(stderr, "%s: the CPU result differs from the reference beyond float32 summation\n", what);
                    fail();
                }
            }
            nb_scope_end();
        }
}

/* ------------------------------------------------------------------------ */
/* The cases for the non-elementwise kinds, and the table walk              */
/* ------------------------------------------------------------------------ */

typedef struct ocase { nb_op op; void (*check)(nb_op); } ocase;
static const ocase OTHER[] = {
    {NB_OP_WHERE, check_where},        {NB_OP_SUM, check_reduce},         {NB_OP_PROD, check_reduce},
    {NB_OP_MAX, check_reduce},         {NB_OP_MIN, check_reduce},         {NB_OP_ARGMAX, check_argreduce},
    {NB_OP_ARGMIN, check_argreduce},   {NB_OP_CUMSUM, check_scan},        {NB_OP_CUMPROD, check_scan},
    {NB_OP_MATMUL, check_matmul},      {NB_OP_ADDMM, check_addmm},        {NB_OP_GATHER, check_gather},      {NB_OP_SCATTER_ADD, check_scatter_add},
    {NB_OP_CAT, check_cat},            {NB_OP_PAD, check_pad},            {NB_OP_CAST, check_cast},
    {NB_OP_CONTIGUOUS, check_contiguous}, {NB_OP_TO_DEVICE, check_to_device}, {NB_OP_UNFOLD, check_window},
    {NB_OP_FOLD, check_window},        {NB_OP_MAX_POOL2D, check_window},  {NB_OP_MAX_UNPOOL2D, check_window},
    {NB_OP_CHOLESKY, check_linalg},    {NB_OP_SOLVE_TRIANGULAR, check_linalg}, {NB_OP_SOLVE, check_linalg},
    {NB_OP_SLOGDET, check_linalg},     {NB_OP_ATTENTION, check_attention},
    {NB_OP_ATTENTION_BACKWARD, check_attention_backward},
    {NB_OP_CONVOLUTION, check_conv},      {NB_OP_CONVOLUTION_BACKWARD, check_conv},
    {NB_OP_QUANTIZE, check_quant},     {NB_OP_DEQUANTIZE, check_quant},   {NB_OP_SCALED_MATMUL, check_quant},
};
#define NOTHER (sizeof OTHER / sizeof OTHER[0])

static void test_other(void **state) {
    const ocase *c = *state;
    c->check(c->op);
}

static bool kernel_kind(nb_op_kind k) {
    return k == NB_KIND_UNARY || k == NB_KIND_BINARY || k == NB_KIND_WHERE || k == NB_KIND_REDUCE ||
           k == NB_KIND_ARGREDUCE || k == NB_KIND_SCAN || k == NB_KIND_MATMUL || k == NB_KIND_GATHER ||
           k == NB_KIND_SCATTER_ADD || k == NB_KIND_CAT || k == NB_KIND_PAD || k == NB_KIND_COPY ||
           k == NB_KIND_WINDOW || k == NB_KIND_LINALG || k == NB_KIND_ATTENTION || k == NB_KIND_QUANT ||
           k == NB_KIND_CONV;
}

static bool has_case(int op) {
    for (size_t k = 0; k < NUNARY; k++)
        if ((int)UNARY[k].op == op) return true;
    for (size_t k = 0; k < NBINARY; k++)
        if ((int)BINARY[k].op == op) return true;
    for (size_t k = 0; k < NOTHER; k++)
        if ((int)OTHER[k].op == op) return true;
    return false;
}

/* Every op with a kernel of its own has a case above. */
static void test_every_kernel_op_has_a_case(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++)
        if (kernel_kind(nb__ops[op].kind) && !has_case(op)) {
            fprintf(stderr, "op '%s' (kind %d) has no CPU-vs-reference case in test_ops_vs_ref.c\n", nb__ops[op].name,
                    (int)nb__ops[op].kind);
            missing++;
        }
    assert_int_equal(missing, 0);
}

/* ------------------------------------------------------------------------ */
/* Random shapes: ranks 0-4, sizes 0-5, random broadcasting, layouts, axes  */
/* ------------------------------------------------------------------------ */

static uint64_t shape_rng = 0x2545F4914F6CDD1Du;
static int pick(int n) { /* xorshift64*: uniform-enough small integers in [0, n) */
    shape_rng ^= shape_rng >> 12;
    shape_rng ^= shape_rng << 25;
    shape_rng ^= shape_rng >> 27;
    return (int)(((shape_rng * 0x2545F4914F6CDD1Du) >> 33) % (uint64_t)n);
}

static void test_random_shapes(void **state) {
    (void)state;
    static const nb_dtype DT[] = {NB_F32, NB_F64};
    for (int t = 0; t < 60; t++) {
        bshape s = {.na = pick(5), .la = pick(L_COUNT), .lb = pick(L_COUNT)};
        for (int d = 0; d < s.na; d++) s.a[d] = pick(10) == 0 ? 0 : 1 + pick(5);
        s.nb = pick(s.na + 1); /* b: a suffix of a's shape with some sizes 1, or a with some 1s */
        for (int d = 0; d < s.nb; d++) s.b[d] = pick(3) == 0 ? 1 : s.a[s.na - s.nb + d];
        if (pick(2)) { /* swap roles so that both operands broadcast */
            bshape r = {s.nb, {0}, s.na, {0}, s.lb, s.la};
            memcpy(r.a, s.b, sizeof r.a);
            memcpy(r.b, s.a, sizeof r.b);
            s = r;
        }
        nb_dtype dt = DT[pick(2)];
        run_unary_case(&UNARY[pick((int)NUNARY)], dt, s.a, s.na, s.la);
        run_binary_case(&BINARY[pick((int)NBINARY)], dt, dt, &s);
        int axes[4], n = 0;
        for (int d = 0; d < s.na; d++)
            if (pick(2)) axes[n++] = pick(2) ? d : d - s.na;
        static const nb_op RED[] = {NB_OP_SUM, NB_OP_PROD, NB_OP_MAX, NB_OP_MIN, NB_OP_CUMSUM, NB_OP_ARGMAX};
        nb_op op = RED[pick(6)];
        bool one_axis = op == NB_OP_CUMSUM || op == NB_OP_ARGMAX;
        if (one_axis && s.na == 0) continue;
        if (one_axis) axes[0] = pick(s.na);
        axes_case ax = {one_axis || n ? axes : NULL, one_axis ? 1 : n};
        reduce_case(op, dt, s.a, s.na, s.la, op == NB_OP_PROD ? D_NEAR1 : D_ANY, ax, pick(2));
    }
}

/* ------------------------------------------------------------------------ */
/* NaN and infinity semantics, against IEEE / PyTorch directly              */
/* ------------------------------------------------------------------------ */

static double item_of(nb_tensor *t) {
    double v = 0;
    assert_int_equal(nb_item(NBT(t), &v), NB_OK);
    return v;
}

static void nan_semantics_on(nb_device dev, nb_dtype dt) {
    nb_scope_begin();
    snprintf(what, sizeof what, "NaN semantics %s on device %d", nb_dtype_name(dt), (int)dev.type);
    nb_tensor *x = NBT(nb_to_device(NBT(nb_cast(nb_from_data((double[]){1, NAN, 3, -2}, NB_SHAPE(4), NB_F64), dt)), dev));
    nb_tensor *one = NBT(nb_to_device(NBT(nb_full(NB_SHAPE(4), 1, dt)), dev));
    assert_true(isnan(item_of(nb_max(x, NULL, 0, false))));
    assert_true(isnan(item_of(nb_min(x, NULL, 0, false))));
    assert_true(isnan(item_of(nb_sum(x, NULL, 0, false))));
    assert_true(isnan(item_of(nb_prod(x, NULL, 0, false))));
    assert_true(item_of(nb_argmax(x, 0, false)) == 1); /* NaN counts as the extreme (torch) */
    assert_true(item_of(nb_argmin(x, 0, false)) == 1);
    for (int i = 0; i < 4; i++) {
        bool n = i == 1;
        assert_true(isnan(nbt_at(NBT(nb_maximum(x, one)), i)) == n);
        assert_true(isnan(nbt_at(NBT(nb_minimum(one, x)), i)) == n);
        assert_true(isnan(nbt_at(NBT(nb_relu(x)), i)) == n);
        assert_true(isnan(nbt_at(NBT(nb_clamp(x, -1, 1)), i)) == n);
        assert_true(isnan(nbt_at(NBT(nb_abs(x)), i)) == n);
    }
    assert_true(nbt_at(NBT(nb_maximum(x, one)), 3) == 1 && nbt_at(NBT(nb_minimum(x, one)), 3) == -2);
    assert_true(nbt_at(NBT(nb_clamp(x, -1, 1)), 2) == 1 && nbt_at(NBT(nb_clamp(x, -1, 1)), 3) == -1);
    nb_tensor *e = NBT(nb_to_device(NBT(nb_cast(nb_from_data((double[]){1000, -1000, INFINITY, -INFINITY, 0, -1},
                                                             NB_SHAPE(6), NB_F64), dt)), dev));
    nb_tensor *ex = NBT(nb_exp(e)), *lg = NBT(nb_log(e)), *sq = NBT(nb_sqrt(e)), *sg = NBT(nb_sigmoid(e)), *th = NBT(nb_tanh(e));
    assert_true(nbt_at(ex, 0) == INFINITY && nbt_at(ex, 1) == 0 && nbt_at(ex, 2) == INFINITY && nbt_at(ex, 3) == 0);
    assert_true(nbt_at(lg, 4) == -INFINITY && isnan(nbt_at(lg, 5)) && nbt_at(lg, 2) == INFINITY && isnan(nbt_at(lg, 3)));
    assert_true(isnan(nbt_at(sq, 5)) && nbt_at(sq, 4) == 0);
    assert_true(nbt_at(sg, 0) == 1 && nbt_at(sg, 1) == 0 && nbt_at(th, 0) == 1 && nbt_at(th, 1) == -1);
    assert_true(nbt_at(th, 2) == 1 && nbt_at(th, 3) == -1);
    /* NaN inside a large reduction (the chunked / pairwise paths) */
    nb_tensor *big = NBT(nb_to_device(NBT(nb_zeros(NB_SHAPE(70001), dt)), dev));
    assert_int_equal(nb_set(big, (int64_t[]){40000}, NAN), NB_OK);
    assert_true(isnan(item_of(nb_sum(big, NULL, 0, false))));
    assert_true(isnan(item_of(nb_max(big, NULL, 0, false))));
    assert_true(item_of(nb_argmax(big, 0, false)) == 40000);
    assert_true(item_of(nb_argmin(big, 0, false)) == 40000);
    nb_scope_end();
}

static void test_nan_inf_semantics(void **state) {
    (void)state;
    for (int k = 0; k < 2; k++) {
        nan_semantics_on(NB_CPU, k ? NB_F64 : NB_F32);
        nan_semantics_on(NB_REF, k ? NB_F64 : NB_F32);
    }
}

/* Each test starts without a pending error from an earlier one. */
static int clear_error(void **state) {
    (void)state;
    nb_clear_error();
    return 0;
}

int main(void) {
    nb_manual_seed(20240611);
    if (nb_get_num_threads() < 3) nb_set_num_threads(3); /* the multi-threaded paths even on a small machine */
    enum { MAXT = 128 };
    struct CMUnitTest tests[MAXT];
    static char names[MAXT][64];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"every kernel op has a case", test_every_kernel_op_has_a_case, clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"random shapes", test_random_shapes, clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"NaN and infinity semantics", test_nan_inf_semantics, clear_error, NULL, NULL};
    for (size_t k = 0; k < NUNARY && n < MAXT; k++, n++) {
        snprintf(names[n], sizeof names[n], "unary %s", nb__ops[UNARY[k].op].name);
        tests[n] = (struct CMUnitTest){names[n], test_unary, clear_error, NULL, (void *)&UNARY[k]};
    }
    for (size_t k = 0; k < NBINARY && n < MAXT; k++, n++) {
        snprintf(names[n], sizeof names[n], "binary %s", nb__ops[BINARY[k].op].name);
        tests[n] = (struct CMUnitTest){names[n], test_binary, clear_error, NULL, (void *)&BINARY[k]};
    }
    for (size_t k = 0; k < NOTHER && n < MAXT; k++, n++) {
        snprintf(names[n], sizeof names[n], "%s", nb__ops[OTHER[k].op].name);
        tests[n] = (struct CMUnitTest){names[n], test_other, clear_error, NULL, (void *)&OTHER[k]};
    }
    return _cmocka_run_group_tests("ops_vs_ref", tests, n, NULL, NULL);
}
