/*
 * test_cpu_kernels.c — direct checks of the CPU backend's performance paths
 * that the op-level comparison against the reference backend cannot reach:
 *  - every ISA kernel table (scalar, AVX2, AVX-512 where the CPU has them):
 *    every f32 function of vmath.h within its ulp bound of libm's double
 *    result over the whole float range (every 97th bit pattern and the
 *    edges: subnormals, overflow thresholds, ±0 with sign, ±inf, NaN,
 *    range-reduction boundaries, huge trig arguments),
 *    the contiguous, broadcast and strided loop variants of one op
 *    bitwise equal to each other and to the correctly rounded result;
 *    max/min of contiguous runs (vector body, tail, NaN anywhere);
 *  - bitwise identical results for 1, 2 and 3 threads: reductions (all
 *    fast paths), scatter-add with many colliding indices, gather;
 *  - scatter-add / gather on large, multi-threaded shapes equal to the
 *    reference backend exactly;
 *  - storage: 64-byte aligned data at every size (inline small buffers,
 *    malloc'd, large huge-page buffers) and reused large buffers that hold
 *    exactly the new values.
 */
#include "support.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/f32_forms.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ------------------------------------------------------------ */

/* The kernel tables this CPU can run. */
static int usable_tables(const nb_cpu_kernels **out) {
    int n = 0;
    out[n++] = &nb__kernels_scalar;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) out[n++] = &nb__kernels_avx2;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        out[n++] = &nb__kernels_avx512;
    return n;
}

/* Distance of got from the exact value want in units of the last place of
 * want rounded to float (subnormal spacing 2^-149 at the bottom). */
static double ulp_error(float got, double want) {
    if (isnan(want)) return isnan(got) ? 0 : INFINITY;
    float wf = (float)want;
    if (isinf(wf)) return got == wf ? 0 : INFINITY;
    double a = fabs((double)wf), spacing = (double)nextafterf((float)a, INFINITY) - a;
    if (spacing < 0x1p-149) spacing = 0x1p-149;
    return fabs((double)got - want) / spacing;
}


/* ---- transcendental accuracy per ISA ------------------------------------ */

typedef struct unary_case {
    nb_op op;
    double p0, p1;                        /* the op's parameters */
    double (*exact)(double x, double p0, double p1);
    double max_ulp; /* asserted bound: the measured maximum, rounded up */
} unary_case;

static double exact_exp(double x, double p0, double p1) { return exp(x); }
static double exact_expm1(double x, double p0, double p1) { return expm1(x); }
static double exact_log(double x, double p0, double p1) { return log(x); }
static double exact_log1p(double x, double p0, double p1) { return log1p(x); }
static double exact_tanh(double x, double p0, double p1) { return tanh(x); }
static double exact_sigmoid(double x, double p0, double p1) { return 1.0 / (1.0 + exp(-x)); }
static double exact_silu(double x, double p0, double p1) { return x / (1.0 + exp(-x)); }
static double exact_erf(double x, double p0, double p1) { return erf(x); }
/* x Phi(x) through erfc, accurate in the left tail too (ops.def's 1 + erf cancels there) */
static double exact_gelu(double x, double p0, double p1) { return 0.5 * x * erfc(-x * M_SQRT1_2); }
static double exact_gelu_tanh(double x, double p0, double p1) {
    return x / (1.0 + exp(-2.0 * 0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
static double exact_softplus(double x, double beta, double threshold) {
    double t = x * beta;
    return t > threshold ? x : ((t > 0 ? t : 0) + log1p(exp(-fabs(t)))) / beta;
}
static double exact_elu(double x, double alpha, double p1) { return x > 0 ? x : x != x ? x : alpha * expm1(x); }
static double exact_sin(double x, double p0, double p1) { return sin(x); }
static double exact_cos(double x, double p0, double p1) { return cos(x); }
static double exact_tan(double x, double p0, double p1) { return tan(x); }

/* The f32 kernels of vmath.h against libm in double.  Bounds: the maximum
 * measured by this sweep over the scalar, AVX2 and AVX-512 tables (in the
 * comment), rounded up. */
static const unary_case ULP_CASES[] = {
    {NB_OP_EXP, 0, 0, exact_exp, 1.5},         /* 1.003 */
    {NB_OP_EXPM1, 0, 0, exact_expm1, 2},       /* 1.533 */
    {NB_OP_LOG, 0, 0, exact_log, 1},           /* 0.800 */
    {NB_OP_LOG1P, 0, 0, exact_log1p, 1.5},     /* 1.388 */
    {NB_OP_TANH, 0, 0, exact_tanh, 1.5},       /* 1.309 */
    {NB_OP_SIGMOID, 0, 0, exact_sigmoid, 2.5}, /* 2.280 */
    {NB_OP_SILU, 0, 0, exact_silu, 3.5},       /* 3.048 */
    {NB_OP_ERF, 0, 0, exact_erf, 1.5},         /* 1.311 */
    {NB_OP_GELU, 0, 0, exact_gelu, 6},         /* 5.037 */
    {NB_OP_GELU_TANH, 0, 0, exact_gelu_tanh, 3.5}, /* 3.095 */
    {NB_OP_SOFTPLUS, 1, 20, exact_softplus, 2},    /* 1.630 (beta 1, threshold 20) */
    {NB_OP_SOFTPLUS, 2, 1, exact_softplus, 2},     /* 1.635 (beta 2, threshold 1) */
    {NB_OP_ELU, 1, 0, exact_elu, 1.5},             /* 0.914 (alpha 1) */
    {NB_OP_ELU, 0.3, 0, exact_elu, 1.5},           /* 1.411 (alpha 0.3) */
    {NB_OP_SIN, 0, 0, exact_sin, 0.6},             /* 0.529 */
    {NB_OP_COS, 0, 0, exact_cos, 0.6},             /* 0.529 */
    {NB_OP_TAN, 0, 0, exact_tan, 0.6},             /* 0.543 */
};
#define NULP (sizeof ULP_CASES / sizeof ULP_CASES[0])

/* Error of got against the exact want in ulp, with a zero result's sign
 * checked too (infinite when it differs). */
static double case_error(float got, double want) {
    if (want == 0 && got == 0) return !signbit(want) == !signbit(got) ? 0 : INFINITY;
    return ulp_error(got, want);
}

/* Inputs that a sparse sweep may step over: signed zeros, infinities, NaN,
 * subnormals, the overflow/underflow thresholds, the range-reduction and
 * clamp boundaries of vmath.h, and the floats nearest to multiples of pi/2;
 * each with its two neighbours. */
static int64_t edge_inputs(float *x) {
    static const float base[] = {
        0.0f, 0x1p-149f, 0x1p-140f, 0x1p-127f, 0x1p-126f, 0x1p-30f, 0x1p-25f, 0x1p-12f, 0.5f, 1.0f, 2.0f,
        FLT_MAX, INFINITY, NAN, 88.7228394f, 88.3762589f, 87.3365479f, 103.972076f, 103.278931f, 89.0f,
        17.3286800f, 18.0f, 0.346573591f, 0.693147182f, 0x1.6a09e6p-1f, 0x1.6a09e8p-1f, 0x1.6a09e6p+0f,
        0.625f, 0.9f, 3.92f, 4.0f, 5.7f, 5.75f, 10.3f, 14.1f, 14.85f, 20.0f, 30.0f, 110.0f, 170.0f, 200.0f,
        0x1p24f, 0x1p25f, 1e22f, 3e38f, 86.0f, 88.0f, 44.0f};
    int64_t k = 0;
    for (size_t i = 0; i < sizeof base / sizeof base[0]; i++)
        for (int s = -1; s <= 1; s += 2) {
            float v = (float)s * base[i];
            x[k++] = nextafterf(v, -INFINITY);
            x[k++] = v;
            x[k++] = nextafterf(v, INFINITY);
        }
    x[k++] = -1.0f + 0x1p-24f; /* log1p's smallest argument above -1 */
    for (int j = 1; j <= 64; j++) x[k++] = (float)(j * M_PI_2), x[k++] = -(float)(j * M_PI_2);
    for (int e = 7; e <= 24; e++) x[k++] = (float)(ldexp(1.0, e) * M_PI_2), x[k++] = nextafterf((float)(ldexp(1.0, e) * M_PI_2), 0);
    return k;
}

typedef struct worst {
    double ulp;
    float x, got;
} worst;

typedef struct sweep {
    const nb_cpu_kernels **tab;
    int nt;
    uint64_t first, step, stop; /* bit patterns first, first + step, ... below stop */
    bool edges;
    worst w[3][NULP];
} sweep;

/* Every case on every table for one run of inputs; the worst error per (table, case) into w. */
static void check_inputs(sweep *sw, const float *x, int64_t n, double *want, float *y) {
    for (size_t c = 0; c < NULP; c++) {
        const unary_case *uc = &ULP_CASES[c];
        for (int64_t i = 0; i < n; i++) want[i] = uc->exact((double)x[i], uc->p0, uc->p1);
        for (int t = 0; t < sw->nt; t++) {
            sw->tab[t]->unary[uc->op][0](n, (char *)y, 4, (const char *)x, 4, uc->p0, uc->p1);
            worst *w = &sw->w[t][c];
            for (int64_t i = 0; i < n; i++) {
                double e = case_error(y[i], want[i]);
                if (e > w->ulp) *w = (worst){e, x[i], y[i]};
            }
        }
    }
}

static void *sweep_run(void *arg) {
    sweep *sw = arg;
    enum { CHUNK = 1 << 16 };
    float *x = malloc(sizeof(float) * CHUNK), *y = malloc(sizeof(float) * CHUNK);
    double *want = malloc(sizeof(double) * CHUNK);
    if (!x || !y || !want) abort();
    if (sw->edges) check_inputs(sw, x, edge_inputs(x), want, y);
    for (uint64_t b = sw->first; b < sw->stop;) {
        int64_t n = 0;
        for (; n < CHUNK && b < sw->stop; b += sw->step) {
            uint32_t u = (uint32_t)b;
            memcpy(&x[n++], &u, 4);
        }
        check_inputs(sw, x, n, want, y);
    }
    free(x);
    free(y);
    free(want);
    return NULL;
}

/* Each function of vmath.h through every usable kernel table against libm in
 * double: every 97th float bit pattern (44 million inputs, both signs; every
 * 99991st under NB_TEST_QUICK, every one under NB_TEST_EXHAUSTIVE=1, split
 * over two threads) plus the edge inputs.  Prints the measured maximum per
 * table. */
static void transcendental_ulp(void **state) {
    (void)state;
    const nb_cpu_kernels *tab[3];
    int nt = usable_tables(tab);
    const char *ex = getenv("NB_TEST_EXHAUSTIVE");
    bool exhaustive = ex && !strcmp(ex, "1");
    uint64_t step = exhaustive ? 1 : getenv("NB_TEST_QUICK") ? 99991 : 97;
    enum { NTH = 2 };
    static sweep sw[NTH];
    pthread_t th[NTH];
    uint64_t half = ((uint64_t)1 << 32) / step / 2 * step; /* a multiple of step: the two halves tile the sweep */
    for (int k = 0; k < NTH; k++) {
        sw[k] = (sweep){.tab = tab, .nt = nt, .first = k * half, .step = step, .stop = k ? (uint64_t)1 << 32 : half, .edges = k == 0};
        assert_int_equal(pthread_create(&th[k], NULL, sweep_run, &sw[k]), 0);
    }
    for (int k = 0; k < NTH; k++) pthread_join(th[k], NULL);
    bool bad = false;
    printf("%-12s %-6s %-6s %s\n", "op", "bound", "table", "max ulp (at x)");
    for (size_t c = 0; c < NULP; c++)
        for (int t = 0; t < nt; t++) {
            worst w = sw[0].w[t][c].ulp >= sw[1].w[t][c].ulp ? sw[0].w[t][c] : sw[1].w[t][c];
            const unary_case *uc = &ULP_CASES[c];
            printf("%-12s %-6g %-6s %.3f (x = %a, got %a, want %a)\n", nb_op_name(uc->op), uc->max_ulp, tab[t]->isa,
                   w.ulp, w.x, w.got, uc->exact(w.x, uc->p0, uc->p1));
            bad |= !(w.ulp <= uc->max_ulp);
        }
    if (bad) fail();
}

/* The forms of exp, expm1, elu, tanh, sigmoid, silu and gelu_tanh for
 * normal results (one exponent-field addition, no clamp) are their general
 * functions bit for bit on the range the kernels give them (f32_forms.h's
 * range test, used here as the kernels use it), which is what lets the
 * kernels split inputs between them: every 97th float of each range (every
 * one under NB_TEST_EXHAUSTIVE=1) and its ends, which must be the named
 * bounds.  (Compiled here with the test's flags; the kernel tables' builds
 * are checked against libm by transcendental_ulp.) */
#define NORMAL_FORM_P0D 1.5 /* elu's alpha */
#define NORMAL_FORM_CASE(E)                                                                         \
    static bool in_range_##E(float x) { return F32_TEST(E); }                                       \
    static float form_##E(float x) { const double p0d = NORMAL_FORM_P0D; (void)p0d; return F32_FORM(E, 0); } \
    static float slow_##E(float x) { const double p0d = NORMAL_FORM_P0D; (void)p0d; return F32_SLOW(E, 0); }
NORMAL_FORM_CASE(EXP)
NORMAL_FORM_CASE(EXPM1)
NORMAL_FORM_CASE(ELU)
NORMAL_FORM_CASE(TANH)
NORMAL_FORM_CASE(SIGMOID)
NORMAL_FORM_CASE(SILU)
NORMAL_FORM_CASE(GELU_TANH)

static void normal_forms_equal_the_functions(void **state) {
    (void)state;
    const char *ex = getenv("NB_TEST_EXHAUSTIVE");
    uint32_t step = ex && !strcmp(ex, "1") ? 1 : 97;
    const struct {
        const char *name;
        bool (*in_range)(float);
        float (*form)(float), (*all)(float);
        float lo, hi;
        int64_t floats; /* about how many floats the range holds */
    } cases[] = {{"exp", in_range_EXP, form_EXP, slow_EXP, NB_VM_EXP_MIN, NB_VM_EXP_MAX, 2200000000},
                 {"expm1", in_range_EXPM1, form_EXPM1, slow_EXPM1, NB_VM_EXPM1_MIN, NB_VM_EXP_MAX, 2200000000},
                 {"elu", in_range_ELU, form_ELU, slow_ELU, NB_VM_EXPM1_MIN, NB_VM_EXP_MAX, 2200000000},
                 {"tanh", in_range_TANH, form_TANH, slow_TANH, -NB_VM_TANH_MAX, NB_VM_TANH_MAX, 2200000000},
                 {"sigmoid", in_range_SIGMOID, form_SIGMOID, slow_SIGMOID, -NB_VM_SIGMOID_MAX, NB_VM_SIGMOID_MAX,
                  2200000000},
                 {"silu", in_range_SILU, form_SILU, slow_SILU, -NB_VM_SIGMOID_MAX, NB_VM_SIGMOID_MAX, 2200000000},
                 {"gelu_tanh", in_range_GELU_TANH, form_GELU_TANH, slow_GELU_TANH, -NB_VM_GELU_TANH_MAX,
                  NB_VM_GELU_TANH_MAX, 2180000000}};
    assert_true(isnormal(nb_expf_normal(NB_VM_EXP_MIN)) && isnormal(nb_expf_normal(NB_VM_EXP_MAX)));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t checked = 0, differ = 0;
        for (uint64_t b = 0; b < ((uint64_t)1 << 32); b += step) {
            uint32_t u = (uint32_t)b;
            float x;
            memcpy(&x, &u, 4);
            if (!cases[c].in_range(x)) continue;
            checked++;
            float f = cases[c].form(x), e = cases[c].all(x);
            if (memcmp(&f, &e, 4) != 0 && differ++ < 5) fprintf(stderr, "%s(%a): form %a, all %a\n", cases[c].name, x, f, e);
        }
        assert_true(cases[c].in_range(cases[c].lo) && cases[c].in_range(cases[c].hi));
        assert_false(cases[c].in_range(nextafterf(cases[c].lo, -INFINITY)) ||
                     cases[c].in_range(nextafterf(cases[c].hi, INFINITY)) || cases[c].in_range(NAN));
        const float ends[] = {cases[c].lo, nextafterf(cases[c].lo, 0), cases[c].hi, nextafterf(cases[c].hi, 0), -0.0f, 0.0f};
        for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
            float f = cases[c].form(ends[i]), e = cases[c].all(ends[i]);
            differ += memcmp(&f, &e, 4) != 0;
        }
        assert_true(checked > cases[c].floats / step * 9 / 10);
        assert_int_equal(differ, 0);
    }
}

/* ---- loop variants agree ------------------------------------------------ */

/* One binary op through the contiguous, scalar-b, scalar-a and strided loops:
 * each equals the correctly rounded a op b (float of the double result). */
static void binary_variants(void **state) {
    (void)state;
    const nb_cpu_kernels *tab[3];
    int nt = usable_tables(tab);
    enum { N = 1037 }; /* not a multiple of any vector width */
    float a[2 * N], b[2 * N], o[2 * N];
    for (int i = 0; i < 2 * N; i++) {
        a[i] = (float)sin(i * 0.37) * 1e3f;
        b[i] = (float)cos(i * 0.11) * 7.0f;
    }
    const nb_op ops[] = {NB_OP_ADD, NB_OP_SUB, NB_OP_MUL, NB_OP_DIV};
    for (int t = 0; t < nt; t++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            nb_k_binary f = tab[t]->binary[ops[k]][0];
            struct { int64_t os, as, bs; } v[] = {{4, 4, 4}, {4, 4, 0}, {4, 0, 4}, {8, 8, 4}};
            for (size_t s = 0; s < sizeof v / sizeof v[0]; s++) {
                f(N, (char *)o, v[s].os, (const char *)a, v[s].as, (const char *)b, v[s].bs);
                for (int i = 0; i < N; i++) {
                    double av = a[i * v[s].as / 4], bv = b[i * v[s].bs / 4];
                    double want = ops[k] == NB_OP_ADD   ? av + bv
                                  : ops[k] == NB_OP_SUB ? av - bv
                                  : ops[k] == NB_OP_MUL ? av * bv
                                                        : av / bv;
                    if (o[i * v[s].os / 4] != (float)want) {
                        fprintf(stderr, "%s %s strides (%lld,%lld,%lld) element %d: %.9g vs %.9g\n", tab[t]->isa,
                                nb_op_name(ops[k]), (long long)v[s].os, (long long)v[s].as, (long long)v[s].bs,
                                i, o[i * v[s].os / 4], (float)want);
                        fail();
                    }
                }
            }
        }
}

/* Each vmath.h op through the contiguous and the strided loop: the same bits
 * (inputs outside the range of the trig and gelu forms included, which the
 * loops recompute with the ops' slow forms). */
static void unary_variants(void **state) {
    (void)state;
    const nb_cpu_kernels *tab[3];
    int nt = usable_tables(tab);
    enum { N = 2999 };
    static float x[2 * N], c[N], s[2 * N], xs[N];
    for (int i = 0; i < 2 * N; i++) x[i] = i % 41 == 0 ? (i % 2 ? -3e7f : 1e30f) : (float)(i % 300) * 0.7f - 100.0f;
    const nb_op ops[] = {NB_OP_EXP, NB_OP_EXPM1, NB_OP_LOG, NB_OP_LOG1P, NB_OP_TANH, NB_OP_SIGMOID,
                         NB_OP_SILU, NB_OP_ERF, NB_OP_GELU, NB_OP_GELU_TANH, NB_OP_SOFTPLUS, NB_OP_ELU,
                         NB_OP_SIN, NB_OP_COS, NB_OP_TAN};
    for (int i = 0; i < N; i++) xs[i] = x[2 * i];
    for (int t = 0; t < nt; t++)
        for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
            tab[t]->unary[ops[k]][0](N, (char *)c, 4, (const char *)xs, 4, 1.5, 3.0);
            tab[t]->unary[ops[k]][0](N, (char *)s, 8, (const char *)x, 8, 1.5, 3.0);
            for (int i = 0; i < N; i++) assert_true(memcmp(&c[i], &s[2 * i], 4) == 0);
        }
}

/* max/min of every length 1..140 (the four-vector body, the one-vector loop
 * and the tail of every ISA), with and without a NaN at each position class,
 * against a sequential loop. */
static void extremes(void **state) {
    (void)state;
    const nb_cpu_kernels *tab[3];
    int nt = usable_tables(tab);
    float xf[140];
    double xd[140];
    for (int t = 0; t < nt; t++)
        for (int n = 1; n <= 140; n++)
            for (int nanat = -1; nanat < n; nanat += 1 + n / 5) {
                for (int i = 0; i < n; i++) xd[i] = xf[i] = (float)sin(1.3 * i + n) * 100.0f;
                if (nanat >= 0) xd[nanat] = xf[nanat] = NAN;
                double mx = -INFINITY, mn = INFINITY;
                for (int i = 0; i < n; i++) {
                    mx = xf[i] > mx ? xf[i] : mx;
                    mn = xf[i] < mn ? xf[i] : mn;
                }
                double got[4] = {tab[t]->extreme[1][0](n, xf), tab[t]->extreme[0][0](n, xf),
                                 tab[t]->extreme[1][1](n, xd), tab[t]->extreme[0][1](n, xd)};
                for (int k = 0; k < 4; k++) {
                    if (nanat >= 0) assert_true(isnan(got[k]));
                    else assert_true(got[k] == (k % 2 ? mn : mx));
                }
            }
}

/* The documented summation, written plainly: blocks of at most 128 values
 * summed with eight double accumulators (acc[i mod 8]), combined as
 * ((a0+a1)+(a2+a3))+((a4+a5)+(a6+a7)), the tail added after; longer runs
 * split at h = round-up-to-8(n/2) and the halves' sums added. */
static double pairwise_reference(int64_t n, const float *xf, const double *xd) {
    if (n > 128) {
        int64_t h = (n / 2 + 7) & ~(int64_t)7;
        return pairwise_reference(h, xf, xd) + pairwise_reference(n - h, xf ? xf + h : NULL, xd ? xd + h : NULL);
    }
    double acc[8] = {0}, s;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += xf ? (double)xf[i + j] : xd[i + j];
    s = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for (; i < n; i++) s += xf ? (double)xf[i] : xd[i];
    return s;
}

/* sum_f32 / sum_f64 of every length 0..700 and a few long ones equal the
 * plain recursion bit for bit (the kernels sum sibling blocks together);
 * values of mixed signs and magnitudes, so any other order of additions
 * shows in the last bits. */
static void pairwise_sums(void **state) {
    (void)state;
    const nb_cpu_kernels *tab[3];
    int nt = usable_tables(tab);
    enum { N = 100003 };
    float *xf = malloc(sizeof *xf * N);
    double *xd = malloc(sizeof *xd * N);
    assert_non_null(xf);
    assert_non_null(xd);
    uint64_t r = 0x9E3779B97F4A7C15u;
    for (int i = 0; i < N; i++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        double u = (double)(r >> 11) * 0x1p-53 - 0.5;
        xd[i] = u * ldexp(1.0, (int)(r >> 3 & 31) - 10);
        xf[i] = (float)xd[i];
    }
    const int64_t longs[] = {1000, 4096, 5000, 65537, N};
    for (int t = 0; t < nt; t++)
        for (int64_t c = 0; c <= 700 + 5; c++) {
            int64_t n = c <= 700 ? c : longs[c - 701];
            double want_f = pairwise_reference(n, xf, NULL), want_d = pairwise_reference(n, NULL, xd);
            double got_f = tab[t]->sum_f32(n, xf), got_d = tab[t]->sum_f64(n, xd);
            if (memcmp(&got_f, &want_f, 8) || memcmp(&got_d, &want_d, 8))
                fail_msg("%s sum of %lld: f32 %a want %a, f64 %a want %a", tab[t]->isa, (long long)n, got_f, want_f,
                         got_d, want_d);
        }
    free(xf);
    free(xd);
}

/* ---- determinism across thread counts ----------------------------------- */

typedef nb_tensor *(*unary_fn)(nb_tensor *x, void *ctx);

/* f(x) for 1, 2 and 3 threads: all bitwise equal; returns the 1-thread result (scoped). */
static nb_tensor *same_for_threads(nb_tensor *x, unary_fn f, void *ctx) {
    int saved = nb_get_num_threads();
    nb_set_num_threads(1);
    nb_tensor *r1 = NBT(f(x, ctx));
    for (int t = 2; t <= 3; t++) {
        nb_set_num_threads(t);
        nbt_assert_same_bits(NBT(f(x, ctx)), r1, __func__);
    }
    nb_set_num_threads(saved);
    return r1;
}

typedef struct sum_spec {
    const int *axes;
    int naxes;
} sum_spec;

static nb_tensor *do_sum(nb_tensor *x, void *ctx) {
    const sum_spec *s = ctx;
    return nb_sum(x, s->axes, s->naxes, false);
}

static void reductions_deterministic(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(7);
    /* 333 x 1025 = 341k elements: the chunked sum-all, pairwise row and
     * column-accumulation paths all run multi-threaded */
    nb_tensor *x = NBT(nb_add(NBT(nb_randn(NB_SHAPE(333, 1025), NB_F32)), 0.5));
    nb_tensor *xr = NBT(nb_to_device(x, NB_REF));
    static const int a0[] = {0}, a1[] = {1}, a01[] = {0, 1};
    const sum_spec specs[] = {{NULL, 0}, {a1, 1}, {a0, 1}, {a01, 2}};
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        nb_tensor *r = same_for_threads(x, do_sum, (void *)&specs[i]);
        nb_tensor *rr = NBT(do_sum(xr, (void *)&specs[i]));
        /* both accumulate in double and round once: within one f32 ulp */
        assert_close(r, rr, 1.2e-7, 1e-30);
    }
    nb_tensor *xt = NBT(nb_transpose(x, 0, 1)); /* strided input: the generic walk */
    nb_tensor *r = same_for_threads(xt, do_sum, (void *)&specs[1]);
    assert_close(r, NBT(do_sum(NBT(nb_to_device(xt, NB_REF)), (void *)&specs[1])), 1.2e-7, 1e-30);
    /* reduced axes around a kept one: contiguous runs of 37, combined in order;
     * max with a NaN in one run */
    nb_tensor *x3 = NBT(nb_randn(NB_SHAPE(40, 9, 37), NB_F32));
    int64_t at[3] = {13, 4, 20};
    assert_int_equal(nb_set(x3, at, NAN), NB_OK);
    static const int a02[] = {0, 2};
    const sum_spec s02 = {a02, 2};
    nb_tensor *x3r = NBT(nb_to_device(x3, NB_REF));
    assert_close(same_for_threads(x3, do_sum, (void *)&s02), NBT(do_sum(x3r, (void *)&s02)), 1.2e-7, 1e-30);
    nb_tensor *m = NBT(nb_max(x3, a02, 2, false)), *mr = NBT(nb_max(x3r, a02, 2, false));
    nbt_assert_same_bits(m, mr, __func__);
    assert_true(isnan(nbt_at(m, 4)) && !isnan(nbt_at(m, 3)));
    /* a size-1 axis of any stride does not change the order: [B, C, 1] transposed from
     * [B, 1, C] (strides C, 1, C) sums over B as the same data reshaped does (column sums) */
    nb_tensor *xb = NBT(nb_mul(NBT(nb_randn(NB_SHAPE(1000, 1, 17), NB_F64)), NBT(nb_exp(NBT(nb_mul(
        NBT(nb_randn(NB_SHAPE(1000, 1, 17), NB_F64)), 20.0))))));
    nb_tensor *xv = NBT(nb_transpose(xb, 1, 2));
    nb_tensor *xc = NBT(nb_reshape(xb, NB_SHAPE(1000, 17, 1))); /* the same elements, strides 17, 1, 1 */
    nbt_assert_same_bits(NBT(nb_sum(xv, a0, 1, false)), NBT(nb_sum(xc, a0, 1, false)), __func__);
    nb_scope_end();
}

typedef struct scatter_spec {
    int axis;
    nb_tensor *index, *src;
} scatter_spec;

static nb_tensor *do_scatter(nb_tensor *x, void *ctx) {
    const scatter_spec *s = ctx;
    return nb_scatter_add(x, s->axis, s->index, s->src);
}

static nb_tensor *do_gather(nb_tensor *x, void *ctx) {
    const scatter_spec *s = ctx;
    return nb_gather(x, s->axis, s->index);
}

/* Random indices in [0, hi) shaped like shape (i64, CPU, scoped). */
static nb_tensor *random_index(const int64_t *shape, int nd, int64_t hi) {
    return NBT(nb_cast(NBT(nb_floor(NBT(nb_mul(NBT(nb_rand(shape, nd, NB_F64)), (double)hi)))), NB_I64));
}

/* Large scatter-add along each axis with many collisions, plus gather with
 * the same index: thread-count independent and equal to the reference. */
static void scatter_gather_large(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(11);
    struct {
        int64_t x[2], idx[2];
        int axis;
    } cases[] = {
        {{64, 3000}, {200, 3000}, 0},  /* axis not innermost: blocked, axis-outer walk */
        {{3000, 50}, {3000, 400}, 1},  /* axis innermost: line by line */
        {{300, 257}, {100, 129}, 0},   /* index smaller than x off the axis */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int ax = cases[c].axis;
        nb_tensor *x = NBT(nb_randn(cases[c].x, 2, NB_F32));
        scatter_spec s = {ax, random_index(cases[c].idx, 2, cases[c].x[ax]),
                          NBT(nb_randn(cases[c].idx, 2, NB_F32))};
        nb_tensor *r = same_for_threads(x, do_scatter, &s);
        scatter_spec sr = {ax, NBT(nb_to_device(s.index, NB_REF)), NBT(nb_to_device(s.src, NB_REF))};
        nb_tensor *xr = NBT(nb_to_device(x, NB_REF));
        nbt_assert_same_bits(r, NBT(do_scatter(xr, &sr)), __func__);
        nbt_assert_same_bits(same_for_threads(x, do_gather, &s), NBT(do_gather(xr, &sr)), __func__);
        /* the transposed src and x: strided lines */
        scatter_spec st = {1 - ax, NBT(nb_transpose(s.index, 0, 1)), NBT(nb_transpose(s.src, 0, 1))};
        scatter_spec str = {1 - ax, NBT(nb_transpose(sr.index, 0, 1)), NBT(nb_transpose(sr.src, 0, 1))};
        nb_tensor *xt = NBT(nb_transpose(x, 0, 1)), *xtr = NBT(nb_transpose(xr, 0, 1));
        nbt_assert_same_bits(same_for_threads(xt, do_scatter, &st), NBT(do_scatter(xtr, &str)), __func__);
        nbt_assert_same_bits(same_for_threads(xt, do_gather, &st), NBT(do_gather(xtr, &str)), __func__);
    }
    /* f64 and i64 accumulate too (exact integer sums) */
    nb_tensor *xi = NBT(nb_zeros(NB_SHAPE(7, 1000), NB_I64));
    scatter_spec si = {0, random_index(NB_SHAPE(500, 1000), 7), NBT(nb_ones(NB_SHAPE(500, 1000), NB_I64))};
    nb_tensor *ri = same_for_threads(xi, do_scatter, &si);
    nb_tensor *colsum = NBT(nb_sum(ri, (const int[]){0}, 1, false));
    for (int64_t j = 0; j < 1000; j += 97) assert_true(nbt_at(colsum, j) == 500.0);
    nb_scope_end();
}

/* ---- storage ------------------------------------------------------------ */

static void storage_alignment_and_reuse(void **state) {
    (void)state;
    nb_scope_begin();
    const int64_t sizes[] = {0, 1, 3, 16, 64, 65, 1000, 100000, 2 << 20, (2 << 20) + 7};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        nb_tensor *t = NBT(nb_empty(&sizes[i], 1, NB_F32));
        assert_true(((uintptr_t)nb_data_ptr(t) & 63) == 0);
    }
    /* 8 MB buffers released and reallocated: each round sees only its own values */
    int64_t n = 2 << 20;
    for (int round = 1; round <= 4; round++) {
        nb_scope_begin();
        nb_tensor *a = NBT(nb_full(&n, 1, (double)round, NB_F32));
        nb_tensor *b = NBT(nb_mul(a, 2.0)); /* fresh output from the large-buffer path */
        assert_true(nbt_at(b, 0) == 2.0 * round && nbt_at(b, n - 1) == 2.0 * round);
        double s;
        assert_int_equal(nb_item(NBT(nb_sum(b, NULL, 0, false)), &s), NB_OK);
        assert_true(s == 2.0 * round * (double)n);
        nb_tensor *z = NBT(nb_zeros(&n, 1, NB_F32)); /* zeros stay zeros on a reused block */
        assert_int_equal(nb_item(NBT(nb_sum(nb_abs(z), NULL, 0, false)), &s), NB_OK);
        assert_true(s == 0.0);
        nb_scope_end();
    }
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(transcendental_ulp),
        cmocka_unit_test(normal_forms_equal_the_functions),
        cmocka_unit_test(binary_variants),
        cmocka_unit_test(unary_variants),
        cmocka_unit_test(extremes),
        cmocka_unit_test(pairwise_sums),
        cmocka_unit_test(reductions_deterministic),
        cmocka_unit_test(scatter_gather_large),
        cmocka_unit_test(storage_alignment_and_reuse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
