/*
 * vmath.h — single-precision elementary functions and activations for the
 * CPU backend's f32 loops (kern_template.c).  Every function is static
 * inline and branch-free: the special cases are selects of computed values,
 * there are no early returns and no libm calls, so gcc -O3 vectorizes a
 * loop over any of them for SSE2, AVX2 or AVX-512 alike.  Integer work goes
 * through the float's bits (memcpy), never through float-to-int
 * conversions, so no input is undefined behaviour.
 *
 * "Max error" is in ulp of the exact result rounded to float (subnormal
 * spacing 2^-149 at the bottom), the largest of the scalar (SSE2), AVX2 and
 * AVX-512 builds (FMA contraction makes them differ in the last bit),
 * measured against glibc's double-precision functions on every 97th float
 * bit pattern (44 million inputs, both signs) and the edge inputs by
 * tests/test_cpu_kernels.c, which asserts a bound a little above each
 * (NB_TEST_EXHAUSTIVE=1 runs all 2^32 inputs).  Signed zeros follow
 * ops.def's double formulas (and so PyTorch): f(-0) = -0 for the odd
 * functions, and every NaN input gives NaN.
 *
 * Coefficient sources: the exp polynomial and the tanh polynomial are
 * Cephes' (expf.c, tanhf.c, S. Moshier); the others are near-minimax fits of
 * our own (Lawson's reweighted least squares on a dense grid, relative
 * error, coefficients rounded to float), or Taylor coefficients where the
 * polynomial runs in double.
 */
#ifndef NB_VMATH_H
#define NB_VMATH_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline uint32_t nb_vm_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static inline float nb_vm_float(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

/* 2^n for n in [-126, 127], built from its exponent field. */
static inline float nb_pow2i(int32_t n) { return nb_vm_float((uint32_t)(n + 127) << 23); }

/* ---- exp and expm1 --------------------------------------------------------
 * Both reduce x = n ln2 + r, |r| <= ln2/2, Cody–Waite style: n is rounded
 * with the 1.5 * 2^23 trick (t = x log2(e) + 1.5 * 2^23 holds n in its low
 * mantissa bits, so no float-to-int conversion is needed), ln2 is split
 * into 0.693359375 (9 bits, so n * it is exact) and -2.12194440e-4.  The
 * argument may be an unevaluated sum hi + lo (|lo| small against 1): lo joins
 * r after the exact step, so e^(hi + lo) keeps the accuracy of the sum
 * (gelu and erf pass -x^2 that way).  e^r - 1 = r + r^2 P(r) with Cephes
 * expf's degree-5 P.  2^n is applied as two factors, so the results
 * overflow to +inf and underflow (gradually, through the subnormals) to 0
 * in the multiplications themselves. */

typedef struct nb_vm_ln2_split {
    float r;   /* the reduced argument */
    int32_t n; /* the power of two */
} nb_vm_ln2_split;

#define NB_VM_LOG2E 1.44269504088896341f
#define NB_VM_LN2_HI 0.693359375f     /* 9 bits: n NB_VM_LN2_HI is exact */
#define NB_VM_LN2_LO (-2.12194440e-4f) /* ln2 - NB_VM_LN2_HI */
#define NB_VM_ROUND_MAGIC 12582912.0f  /* 1.5 * 2^23, bits 0x4B400000 */

/* The integer n held by t = n + NB_VM_ROUND_MAGIC. */
static inline int32_t nb_vm_magic_int(float t) { return (int32_t)(nb_vm_bits(t) - 0x4B400000u); /* GCC: modular */ }

static inline nb_vm_ln2_split nb_vm_reduce_ln2(float hi, float lo) {
    float t = (hi + lo) * NB_VM_LOG2E + NB_VM_ROUND_MAGIC;
    float n = t - NB_VM_ROUND_MAGIC;
    float r = hi - n * NB_VM_LN2_HI;
    r = r + lo;
    r = r - n * NB_VM_LN2_LO;
    return (nb_vm_ln2_split){r, nb_vm_magic_int(t)};
}

/* e^r - 1 for |r| <= ln2/2 (Cephes expf's polynomial). */
static inline float nb_vm_expm1_poly(float r) {
    float p = 1.9875691500E-4f;
    p = p * r + 1.3981999507E-3f;
    p = p * r + 8.3334519073E-3f;
    p = p * r + 4.1665795894E-2f;
    p = p * r + 1.6666665459E-1f;
    p = p * r + 5.0000001201E-1f;
    return p * (r * r) + r;
}

/* m * 2^n for n in [-252, 254], as two exact scalings. */
static inline float nb_vm_ldexp(float m, int32_t n) {
    int32_t n1 = n >> 1; /* GCC: arithmetic shift */
    return m * nb_pow2i(n1) * nb_pow2i(n - n1);
}

/* nb_vm_exp_split: e^(hi + lo) = p 2^n with p = e^r in [0.7, 1.42], hi
 * clamped to [-110, 170] (the result is 0 or +inf beyond).  Callers that
 * multiply the result by something do so on p, before the scaling, so that a
 * product which is normal while e^(hi + lo) is subnormal is rounded once, in
 * full precision.  nb_vm_exp_split_unclamped: the same without the clamp,
 * for the _normal forms, whose arguments give normal e^(hi + lo). */
typedef struct nb_vm_exp_parts {
    float p;
    int32_t n;
} nb_vm_exp_parts;

static inline nb_vm_exp_parts nb_vm_exp_split_unclamped(float hi, float lo) {
    nb_vm_ln2_split s = nb_vm_reduce_ln2(hi, lo);
    return (nb_vm_exp_parts){nb_vm_expm1_poly(s.r) + 1.0f, s.n};
}

static inline nb_vm_exp_parts nb_vm_exp_split(float hi, float lo) {
    float xc = hi > 170.0f ? 170.0f : hi;
    xc = xc < -110.0f ? -110.0f : xc;
    return nb_vm_exp_split_unclamped(xc, lo);
}

/* m 2^n by one addition to m's exponent field: exact where m and the result are normal, or n = 0. */
static inline float nb_vm_scale_normal(float m, int32_t n) {
    return nb_vm_float(nb_vm_bits(m) + ((uint32_t)n << 23)); /* GCC: modular */
}

/* e^(hi + lo); max error 1 ulp (normal results). */
static inline float nb_exp_sumf(float hi, float lo) {
    nb_vm_exp_parts e = nb_vm_exp_split(hi, lo);
    return nb_vm_ldexp(e.p, e.n);
}

/* e^x: max error 1.0 ulp for normal results, subnormal results within one
 * subnormal step; +inf from x > 88.72, 0 below -103.97, NaN passes.  The
 * missing low part is -0, the additive identity (r + -0 = r for every r,
 * -0 included), so the compiler drops its two additions; +0 would keep them
 * (-0 + +0 = +0) for the same bits. */
static inline float nb_expf(float x) { return nb_exp_sumf(x, -0.0f); }

/* e^x on [NB_VM_EXP_MIN, NB_VM_EXP_MAX], where it is normal: n is in
 * [-124, 127] and p in [0.7, 1.42], so p 2^n is one addition to p's
 * exponent field (no clamp, no two-factor scaling).  Bit for bit nb_expf
 * there, whose two scalings are exact for normal results (every input of
 * the range checked, tests/test_cpu_kernels.c); about 1.7x its speed.  The
 * kernels give other inputs, NaN included, to nb_expf (f32_forms.h). */
#define NB_VM_EXP_MIN (-86.0f)
#define NB_VM_EXP_MAX 88.0f

static inline float nb_expf_normal(float x) {
    nb_vm_exp_parts e = nb_vm_exp_split_unclamped(x, -0.0f);
    return nb_vm_scale_normal(e.p, e.n);
}

static inline nb_vm_exp_parts nb_vm_expm1_split(float x) { /* e^x - 1 = p 2^n */
    nb_vm_ln2_split s = nb_vm_reduce_ln2(x, -0.0f); /* -0: see nb_expf */
    int32_t m = s.n < 25 ? s.n : 25;                /* 1 - 2^-n rounds to 1 from n = 25 on */
    return (nb_vm_exp_parts){nb_vm_expm1_poly(s.r) + (1.0f - nb_pow2i(-m)), s.n};
}

/* e^x - 1 = 2^n (p + 1 - 2^-n) with p = e^r - 1: the sum is exact or
 * carries one rounding, and 2^n scales it exactly, so small |x| (n = 0)
 * keep their relative accuracy.  x is clamped to [-18, 89] (beyond, the
 * result rounds to -1 or overflows to +inf); the result takes x's sign
 * (expm1(-0) = -0).  Max error 1.5 ulp (where n = 1 and p < 0). */
static inline float nb_expm1f(float x) {
    float xc = x > 89.0f ? 89.0f : x;
    xc = xc < -18.0f ? -18.0f : xc;
    nb_vm_exp_parts e = nb_vm_expm1_split(xc);
    return __builtin_copysignf(nb_vm_ldexp(e.p, e.n), x);
}

/* e^x - 1 on [NB_VM_EXPM1_MIN, NB_VM_EXP_MAX], unclamped and scaled by one
 * addition to the exponent field: there n is in [-26, 127] and p 2^n is
 * normal (p in [-1.3, -0.59] for n < 0, [0.2, 1.42] for n > 0) or n = 0,
 * so the scaling is exact and the result nb_expm1f's bit for bit (every
 * float of the range checked, tests/test_cpu_kernels.c); the kernels give
 * other inputs, NaN included, to nb_expm1f. */
#define NB_VM_EXPM1_MIN (-18.0f)

static inline float nb_expm1f_normal(float x) {
    nb_vm_exp_parts e = nb_vm_expm1_split(x);
    return __builtin_copysignf(nb_vm_scale_normal(e.p, e.n), x);
}

/* ---- tanh, sigmoid, silu ----------------------------------------------- */

/* tanh after Cephes tanhf: an odd polynomial for |x| < 0.625, else
 * 1 - 2 / (e^{2|x|} + 1) with x's sign (no cancellation there since
 * tanh(0.625) > 1/2).  Max error 1.3 ulp; ±1 at ±inf, NaN passes; the
 * polynomial branch takes x's sign so that tanh(-0) = -0.  nb_vm_tanh is
 * the formula given e^{2|x|}; nb_tanhf takes that from nb_expf. */
static inline float nb_vm_tanh(float x, float e2) { /* e2 = e^{2|x|} */
    float ax = __builtin_fabsf(x), z = x * x;
    float p = -5.70498872745E-3f;
    p = p * z + 2.06390887954E-2f;
    p = p * z - 5.37397155531E-2f;
    p = p * z + 1.33314422036E-1f;
    p = p * z - 3.33332819422E-1f;
    float small = p * z * x + x;
    float big = __builtin_copysignf(1.0f - 2.0f / (e2 + 1.0f), x);
    return ax < 0.625f ? __builtin_copysignf(small, x) : big;
}

static inline float nb_tanhf(float x) { return nb_vm_tanh(x, nb_expf(2.0f * __builtin_fabsf(x))); }

/* tanh for |x| <= NB_VM_TANH_MAX, where e^{2|x|} is nb_expf_normal's: bit for
 * bit nb_tanhf there, faster; the kernels give other inputs to nb_tanhf. */
#define NB_VM_TANH_MAX (NB_VM_EXP_MAX / 2.0f)

static inline float nb_tanhf_normal(float x) { return nb_vm_tanh(x, nb_expf_normal(2.0f * __builtin_fabsf(x))); }

/* m sigmoid(v), v = vhi + vlo, from e = e^{-|v|} = p 2^n in (0, 1]:
 * m / (1 + e) for v >= 0, m e / (1 + e) below, with m p 2^(n/2) / (1 + e)
 * scaled by the rest of 2^n last, so results far below 1 keep their
 * relative accuracy down to the subnormals and m p cannot overflow.  One
 * division.  Below v = -110 (where exp's argument is clamped) the result is
 * 0 m: |m| e^v underflows there for every m our callers pass (1, or |m| <=
 * |v|), and an infinite m gives the formula's NaN (inf * 0); NaN passes. */
static inline float nb_vm_mul_sigmoid(float m, float vhi, float vlo) {
    bool neg = vhi < 0.0f;
    nb_vm_exp_parts e = nb_vm_exp_split(neg ? vhi : -vhi, neg ? vlo : -vlo);
    int32_t n1 = e.n >> 1; /* GCC: arithmetic shift */
    float y = (neg ? m * nb_pow2i(n1) * e.p : m) / (1.0f + nb_vm_ldexp(e.p, e.n));
    return neg ? (vhi < -110.0f ? 0.0f * m : y * nb_pow2i(e.n - n1)) : y;
}

/* m sigmoid(v) for |v| <= NB_VM_SIGMOID_MAX and |m| <= |v| or m = 1, where
 * e = e^{-|v|} is nb_expf_normal's and the result is normal or m's order:
 * m p / (1 + e) for v < 0 (else m / (1 + e)) is then scaled by 2^n with one
 * addition to its exponent field.  Bit for bit nb_vm_mul_sigmoid(m, v, 0)
 * there: v's low part changes only the sign of a zero reduced argument,
 * which e^r = 1 ignores, and each of that function's scalings by a power of
 * two is exact because every value it scales is normal (|m| 2^(n/2) p >=
 * 0.35 2^-62 0.7 wherever n != 0) or, where n = 0, not scaled.
 * nb_vm_mul_sigmoid_scaled is the formula given e = p 2^n and v's sign; with
 * e = e^{-|vhi + vlo|} it is nb_vm_mul_sigmoid(m, vhi, vlo) bit for bit on the
 * same range, by the same argument. */
#define NB_VM_SIGMOID_MAX (-NB_VM_EXP_MIN)

static inline float nb_vm_mul_sigmoid_scaled(float m, bool neg, nb_vm_exp_parts e) { /* neg: v < 0 */
    float y = (neg ? m * e.p : m) / (1.0f + nb_vm_scale_normal(e.p, e.n));
    return neg ? nb_vm_scale_normal(y, e.n) : y;
}

static inline float nb_vm_mul_sigmoid_normal(float m, float v) {
    return nb_vm_mul_sigmoid_scaled(m, v < 0.0f, nb_vm_exp_split_unclamped(-__builtin_fabsf(v), -0.0f));
}

/* sigmoid(x) = 1 / (1 + e^{-x}).  Max error 2.3 ulp; 0.5 at ±0, 1 at +inf,
 * 0 at -inf, NaN passes.  nb_sigmoidf_normal: the same for |x| <=
 * NB_VM_SIGMOID_MAX (the kernels give other inputs to nb_sigmoidf). */
static inline float nb_sigmoidf(float x) { return nb_vm_mul_sigmoid(1.0f, x, 0.0f); }
static inline float nb_sigmoidf_normal(float x) { return nb_vm_mul_sigmoid_normal(1.0f, x); }

/* silu(x) = x sigmoid(x).  Max error 3.1 ulp; silu(-0) = -0, NaN passes.
 * nb_siluf_normal: the same for |x| <= NB_VM_SIGMOID_MAX. */
static inline float nb_siluf(float x) { return nb_vm_mul_sigmoid(x, x, 0.0f); }
static inline float nb_siluf_normal(float x) { return nb_vm_mul_sigmoid_normal(x, x); }

/* ---- log and log1p -----------------------------------------------------
 * Both write the argument as 2^e m with m in [sqrt(1/2), sqrt(2)) from its
 * bits (subtracting the bits of sqrt(1/2) makes the exponent field e), so
 * f = m - 1 is exact and lies in [-0.293, 0.415], and take
 * log = e ln2 + log1p(f), log1p(f) = f - f^2/2 + f^3 P(f) with P of degree
 * 7 (our fit, relative error 2^-27.4 on that interval); e ln2 is added in
 * two parts (0.693359375 and -2.12194440e-4, as in exp). */

static inline float nb_vm_log1p_reduced(float f, float e) {
    float p = -7.6371096e-2f;
    p = p * f + 1.2762524e-1f;
    p = p * f - 1.3159522e-1f;
    p = p * f + 1.4201537e-1f;
    p = p * f - 1.6623412e-1f;
    p = p * f + 2.0001243e-1f;
    p = p * f - 2.500082e-1f;
    p = p * f + 3.333333e-1f;
    float f2 = f * f;
    float y = f * f2 * p;
    y = y + e * NB_VM_LN2_LO;
    y = y - 0.5f * f2;
    y = f + y;
    return y + e * NB_VM_LN2_HI;
}

/* The exponent e of u = 2^e m, m in [sqrt(1/2), sqrt(2)), and m - 1;
 * u positive, finite and normal. */
typedef struct nb_vm_log_split {
    float f;
    int32_t e;
} nb_vm_log_split;

static inline nb_vm_log_split nb_vm_reduce_log(float u) {
    uint32_t d = nb_vm_bits(u) - 0x3f3504f3u; /* bits of sqrt(1/2) */
    int32_t e = (int32_t)d >> 23;             /* GCC: arithmetic shift */
    float m = nb_vm_float((d & 0x007fffffu) + 0x3f3504f3u);
    return (nb_vm_log_split){m - 1.0f, e};
}

/* log x: subnormal x are scaled by 2^23 first.  Max error 0.8 ulp;
 * log(±0) = -inf, log(x < 0) = NaN, log(+inf) = +inf, NaN passes. */
static inline float nb_logf(float x) {
    nb_vm_log_split s = nb_vm_reduce_log(x < 0x1p-126f ? x * 0x1p23f : x);
    float y = nb_vm_log1p_reduced(s.f, (float)(x < 0x1p-126f ? s.e - 23 : s.e));
    y = x == 0.0f ? -__builtin_inff() : y;
    y = x < 0.0f ? __builtin_nanf("") : y;
    return x < __builtin_inff() ? y : x; /* +inf and NaN */
}

/* log(1 + x): u = 1 + x is rounded, but its error c = x - (u - 1) is exact
 * (or negligible where u > 2^24) and joins f as c 2^-e, so log(u + c) keeps
 * the accuracy of small x.  nb_vm_log1p_finite: for x > -1 and finite
 * (log1p(-0) = +0 there).  nb_log1pf: the result takes x's sign (log1p(-0) =
 * -0); max error 1.4 ulp; -inf at x = -1, NaN below, +inf at +inf, NaN
 * passes. */
static inline float nb_vm_log1p_finite(float x) {
    float u = 1.0f + x, c = x - (u - 1.0f);
    nb_vm_log_split s = nb_vm_reduce_log(u);
    float f = s.f + c * nb_pow2i(-(s.e < 126 ? s.e : 126)); /* e >= 127: c 2^-e is negligible */
    return nb_vm_log1p_reduced(f, (float)s.e);
}

static inline float nb_log1pf(float x) {
    float u = 1.0f + x;
    float y = __builtin_copysignf(nb_vm_log1p_finite(x), x);
    y = u == 0.0f ? -__builtin_inff() : y;
    y = x < -1.0f ? __builtin_nanf("") : y;
    return x < __builtin_inff() ? y : x; /* +inf and NaN */
}

/* ---- erf, gelu ------------------------------------------------------------
 * Both come from the Gaussian tail Q(a) = Phi(-a) = erfc(a/sqrt2)/2 (so
 * erfc(z) = 2 Q(z sqrt2)), written e^{-a^2/2} R(a) with R(a) = erfcx(a/sqrt2)/2
 * smooth: 1/2 at 0, 0.07 at 5.75, ~1/(a sqrt(2 pi)) beyond.  e^{-a^2/2} needs
 * a^2 without rounding: the caller passes a^2/2 as h + l
 * (nb_vm_square_split).  (erf passes z^2 from z itself with a = z sqrt2
 * rounded: that rounding moves R by under 2^-24 relative, which the absolute
 * accuracy its tail needs absorbs.)
 *
 * nb_vm_gauss_tail (a in [0, 5.75]): R = N(a)/D(a) in float, N of degree 3 and
 * D of degree 4 with positive coefficients (our fit, scripts/fit_gauss_tail.py:
 * Sanathanan-Koerner iterations with Lawson's reweighting toward minimax,
 * coefficients rounded to float one at a time and the rest refitted).
 * Relative error 2^-25.2 on [0, 4], where gelu's left side needs Q to relative
 * accuracy; beyond 4 only Q's absolute error counts (gelu's right side, erf's
 * tail), and the fit bounds the relative error by 2^-25.2 / (16 Q).  The
 * common scale of N and D (N(0) = 1/2, D(0) = 1) moves their values
 * within their binades; it is the one of ten tried (1 to 31/16) whose float
 * evaluation, in the order below, gave nb_geluf the smallest measured error
 * with and without FMA.  e^{-a^2/2} = 2^n e^r by nb_vm_reduce_ln2's steps in
 * another order, for a shorter chain of dependent operations: n is chosen
 * from h alone, and l joins n's second ln2 part in a chain of its own; R's
 * division runs meanwhile.  Then e^r R =
 * R + R (e^r - 1) is one rounding, and Q > 2^-28 is normal, so 2^n is one
 * addition to its exponent field.  (With the division last and the float
 * clamp of nb_vm_abs_min's comment, gelu took 1.35x as long.)
 *
 * nb_vm_erfc_tail: erfc(a) = e^{-a^2} t P(t - 0.58) with t = 1 / (1 + a/2) (the
 * change of variable of Numerical Recipes' erfcc; P of degree 10 is our fit
 * on a in [0, 10.5], relative error 2^-28): relative accuracy all the way down,
 * for gelu's far left tail.  t and t - 0.58 are formed in double (a float t
 * would carry its rounding into P at 2x). */

static inline float nb_vm_gauss_tail(float a, float h, float l) {
    float n = 1.18970443e-2f;
    n = n * a + 9.62803885e-2f;
    n = n * a + 3.18514675e-1f;
    n = n * a + 0.5f;
    float d = 2.98608076e-2f;
    d = d * a + 2.40455747e-1f;
    d = d * a + 8.37465227e-1f;
    d = d * a + 1.43491328f;
    d = d * a + 1.0f;
    float q = n / d;
    float t = h * -NB_VM_LOG2E + NB_VM_ROUND_MAGIC; /* nb_vm_reduce_ln2(-h, -l) in another order */
    float k = t - NB_VM_ROUND_MAGIC;
    float r = (-h - k * NB_VM_LN2_HI) - (k * NB_VM_LN2_LO + l);
    return nb_vm_scale_normal(q * nb_vm_expm1_poly(r) + q, nb_vm_magic_int(t));
}

static inline nb_vm_exp_parts nb_vm_erfc_tail(float a, float h, float l) {
    double td = 1.0 / (1.0 + 0.5 * (double)a);
    float t = (float)td, u = (float)(td - (double)0.58f);
    float p = 3.3902753e-2f;
    p = p * u + 1.8677894e-2f;
    p = p * u - 7.300954e-2f;
    p = p * u + 3.2425958e-3f;
    p = p * u + 1.137224e-1f;
    p = p * u - 5.150725e-2f;
    p = p * u - 2.0332049e-1f;
    p = p * u + 8.514154e-2f;
    p = p * u + 5.868529e-1f;
    p = p * u + 7.790189e-1f;
    p = p * u + 5.694087e-1f;
    nb_vm_exp_parts e = nb_vm_exp_split(-h, -l);
    return (nb_vm_exp_parts){e.p * (t * p), e.n};
}

/* a with its low 12 mantissa bits cleared: its square is exact. */
static inline float nb_vm_high_half(float a) { return nb_vm_float(nb_vm_bits(a) & 0xfffff000u); }

/* s a^2 as an unevaluated sum h + l, exactly (s = 1/2 or 1, a >= 0 and s a
 * normal or 0): h = (s a) a rounded and l its error by one FMA where the
 * target has it, else from a's high half (square exact) and the rest. */
typedef struct nb_vm_sum {
    float h, l;
} nb_vm_sum;

static inline nb_vm_sum nb_vm_square_split(float a, float s) {
#ifdef __FMA__
    float sa = s * a, h = sa * a;
    return (nb_vm_sum){h, __builtin_fmaf(sa, a, -h)};
#else
    float ah = nb_vm_high_half(a);
    return (nb_vm_sum){s * (ah * ah), s * ((a - ah) * (a + ah))};
#endif
}

/* min(|x|, c) for c positive and finite (NaN gives c), as an integer
 * minimum of the bits.  The float form (a > c ? c : a) lets GCC thread the
 * clamped case through the caller and blend every intermediate with its
 * constant (seven blends in gelu, 20 % of its time). */
static inline float nb_vm_abs_min(float x, float c) {
    uint32_t a = nb_vm_bits(x) & 0x7fffffffu, b = nb_vm_bits(c);
    return nb_vm_float(a < b ? a : b);
}

/* erf: x + x P(x^2) for |x| < 0.9 (P of degree 6, our fit, relative error
 * 2^-30; the 1 of 2/sqrt(pi) = 1.128... kept apart, as a float 2/sqrt(pi)
 * alone is off by 2^-24.2), else ±(1 - 2 Q(|x| sqrt2)) with |x| clamped to 4
 * (erf rounds to ±1 from 3.92 on).  Max error over every input 1.3 ulp with
 * FMA, 1.5 without (near 0.93: 2Q's rounding errors); erf(-0) = -0, ±1 at
 * ±inf, NaN passes. */
static inline float nb_erff(float x) {
    float z = x * x;
    float p = 7.9430996e-5f;
    p = p * z - 8.039753e-4f;
    p = p * z + 5.191753e-3f;
    p = p * z - 2.685556e-2f;
    p = p * z + 1.1283624e-1f;
    p = p * z - 3.761263e-1f;
    p = p * z + 1.2837917e-1f;
    float a = nb_vm_abs_min(x, 4.0f);
    nb_vm_sum a2 = nb_vm_square_split(a, 1.0f);
    float tail = 1.0f - 2.0f * nb_vm_gauss_tail(a * 1.41421356237309505f, a2.h, a2.l);
    return !(__builtin_fabsf(x) >= 0.9f) ? x + x * p : __builtin_copysignf(tail, x); /* NaN: x + x p */
}

/* gelu (exact erf form, PyTorch's default) = x Phi(x) = max(x, 0) - |x| Q(|x|):
 * x Q(-x) below 0, so the left side keeps its relative accuracy (ops.def's
 * 0.5 x (1 + erf(x/sqrt2)) cancels there; in float, PyTorch's gives 0 from
 * x = -5.7 on), and x - x Q(x) above, one fused step where the target has FMA.
 * For x >= NB_VM_GELU_MIN only (and +inf): |x| is clamped to 5.75, beyond
 * which x Q(x) < ulp(x)/16 and the result rounds to x.  Max error over every
 * input of the range 4.9 ulp with FMA, 5.8 without, in the left side (the
 * rounding errors of N, D and e^r add up); gelu(-0) = -0.  The kernels give
 * smaller inputs, -inf and NaN to nb_gelu_erfcf (see kern_template.c). */
#define NB_VM_GELU_MIN (-4.0f)

static inline float nb_geluf(float x) {
    float a = nb_vm_abs_min(x, 5.75f);
    nb_vm_sum a2 = nb_vm_square_split(a, 0.5f);
    return (x < 0.0f ? 0.0f : x) - a * nb_vm_gauss_tail(a, a2.h, a2.l);
}

/* gelu for every x through nb_vm_erfc_tail (the kernels' slow form):
 * x erfc(|x|/sqrt2)/2 for x < 0, x (1 - erfc(|x|/sqrt2)/2) above, the argument
 * split from x itself, |x| clamped to 14.85 (the left side is -0 beyond, the
 * right x); relative accuracy down to the subnormals.  Max error 5.0 ulp, in
 * the left tail (the float evaluation of P; over every x < -4: 5.3 with FMA,
 * 5.6 without); gelu(-0) = -0, gelu(x <= -14.1) = -0, gelu(-inf) = NaN
 * (-inf * 0, as ops.def and PyTorch), NaN passes. */
static inline float nb_gelu_erfcf(float x) {
    float ax = nb_vm_abs_min(x, 14.85f);
    nb_vm_sum x2 = nb_vm_square_split(ax, 0.5f);
    nb_vm_exp_parts e = nb_vm_erfc_tail(ax * 0.70710678118654752f, x2.h, x2.l);
    float left = nb_vm_ldexp(-0.5f * ax * e.p, e.n) + 0.0f * x; /* NaN at -inf, as -inf * 0 */
    return x < 0.0f ? left : x * (1.0f - 0.5f * nb_vm_ldexp(e.p, e.n));
}

/* ---- gelu_tanh, softplus, elu (double parameters and products) ---------- */

/* v = 2 sqrt(2/pi) (x + 0.044715 x^3) in double, clamped to ±200 and split
 * into hi + lo floats for nb_exp_sumf. */
typedef struct nb_vm_split2 {
    float hi, lo;
} nb_vm_split2;

static inline nb_vm_split2 nb_vm_split_pair(double v) {
    float hi = (float)v;
    return (nb_vm_split2){hi, (float)(v - (double)hi)};
}

static inline nb_vm_split2 nb_vm_split_double(double v) {
    v = v > 200.0 ? 200.0 : v;
    v = v < -200.0 ? -200.0 : v;
    return nb_vm_split_pair(v);
}

/* gelu, tanh approximation: 0.5 x (1 + tanh(u)) = x / (1 + e^{-2u}),
 * u = sqrt(2/pi) (x + 0.044715 x^3) formed in double (a float u would be
 * off by |u| 2^-23 relative, tens of ulp in the left tail), so there is no
 * cancellation for x << 0 either.  Max error 3.24 ulp (at x = -1.834; every
 * 3rd float of |x| <= 86.5); gelu_tanh(-0) = -0, -0 from x = -10.771 down,
 * gelu_tanh(-inf) = NaN (as ops.def and PyTorch), NaN passes. */
static inline double nb_vm_gelu_tanh_arg(float x) { /* 2u */
    double xd = (double)x;
    return xd * (1.5957691216057308 + 0.07135481627260025 * xd * xd);
}

static inline float nb_gelu_tanhf(float x) {
    nb_vm_split2 v = nb_vm_split_double(nb_vm_gelu_tanh_arg(x));
    return nb_vm_mul_sigmoid(x, v.hi, v.lo);
}

/* gelu_tanh for |x| <= NB_VM_GELU_TANH_MAX, where |2u| <= 66.4: inside
 * sigmoid's normal range, with |x| <= |2u|, so nb_vm_mul_sigmoid_scaled is
 * nb_gelu_tanhf bit for bit there (every float of the range checked,
 * tests/test_cpu_kernels.c), without the clamps and the two-factor scalings;
 * the kernels give other inputs to nb_gelu_tanhf. */
#define NB_VM_GELU_TANH_MAX 9.0f

static inline float nb_gelu_tanhf_normal(float x) {
    nb_vm_split2 v = nb_vm_split_pair(nb_vm_gelu_tanh_arg(x));
    bool neg = v.hi < 0.0f;
    return nb_vm_mul_sigmoid_scaled(x, neg, nb_vm_exp_split_unclamped(neg ? v.hi : -v.hi, neg ? v.lo : -v.lo));
}

/* softplus with ops.def's semantics: x where beta x > threshold, else
 * log(1 + e^{beta x}) / beta, evaluated as (max(t, 0) + log1p(e^{-|t|})) /
 * beta with t = beta x in double (the threshold test is ops.def's
 * comparison exactly), so neither side overflows or cancels.  Max error
 * 1.6 ulp for beta = 1 and 2; for beta < 1 results below FLT_MIN / beta keep
 * an absolute error of 2^-149 / beta.  softplus(-inf) = +0, +inf passes,
 * NaN passes. */
static inline float nb_softplusf(float x, double beta, double threshold) {
    double t = (double)x * beta;
    nb_vm_split2 s = nb_vm_split_double(t > 0.0 ? -t : t);
    double y = ((t > 0.0 ? t : 0.0) + (double)nb_log1pf(nb_exp_sumf(s.hi, s.lo))) * (1.0 / beta);
    return t > threshold ? x : (float)y;
}

/* softplus for beta = 1, |x| <= NB_VM_SIGMOID_MAX and x not above the
 * threshold (the kernels' range test; other inputs and other betas take
 * nb_softplusf): max(x, 0) + log1p(e^{-|x|}) in float, e^{-|x|} normal and
 * in (0, 1], so log1p needs none of its special cases.  Its sum rounds once
 * more than nb_softplusf's double one; the maximum error is the same, 1.68
 * ulp (every 3rd float; at x = -0.755, where both are log1p's and exp's
 * errors), and the bits may differ from nb_softplusf's. */
static inline float nb_softplusf_unit(float x) {
    return (x > 0.0f ? x : 0.0f) + nb_vm_log1p_finite(nb_expf_normal(-__builtin_fabsf(x)));
}

/* elu: x for x > 0, alpha (e^x - 1) below, the product in double and rounded
 * once.  Max error 1.4 ulp; elu(-0) = -0 (alpha > 0), NaN passes. */
static inline float nb_eluf(float x, double alpha) {
    return x > 0.0f ? x : (float)(alpha * (double)nb_expm1f(x));
}

/* elu where nb_expm1f_normal holds: nb_eluf bit for bit there. */
static inline float nb_eluf_normal(float x, double alpha) {
    return x > 0.0f ? x : (float)(alpha * (double)nb_expm1f_normal(x));
}

/* ---- sin, cos, tan ------------------------------------------------------
 * In double: x = j pi/2 + r, |r| <= pi/4, with j rounded by the 1.5 * 2^52
 * trick and pi/2 in two parts (a 28-bit head, so j * head is exact for
 * |j| < 2^25, and a 53-bit tail: r is off by under 2^-55 |j|, far below
 * float resolution even for the floats closest to a multiple of pi/2).
 * sin r and cos r are Taylor polynomials through r^9 and r^10 (truncation
 * 2^-28 relative at |r| = pi/4), picked and signed by j mod 4, and rounded
 * to float once: max error 0.5 ulp + 2^-28 relative (measured 0.53, tan
 * 0.54).  Valid for |x| <=
 * NB_VM_TRIG_MAX; the kernels give larger and non-finite inputs ops.def's
 * double formula (sin(±inf) = NaN).  sin(-0) = tan(-0) = -0. */
#define NB_VM_TRIG_MAX 0x1p24f

typedef struct nb_vm_sincos {
    double s, c;  /* sin r, cos r */
    uint32_t j;   /* the quadrant, mod 2^32 */
} nb_vm_sincos;

static inline nb_vm_sincos nb_vm_sincos_reduced(float x) {
    const double magic = 0x1.8p52;
    double xd = (double)x;
    double t = xd * 0x1.45f306dc9c883p-1 + magic; /* 2/pi */
    double j = t - magic;
    double r = xd - j * 0x1.921fb54p+0; /* pi/2, first 28 bits */
    r = r - j * 0x1.10b4611a62633p-30;  /* pi/2, the next 53 bits */
    double z = r * r;
    double s = 1.0 / 362880.0;
    s = s * z - 1.0 / 5040.0;
    s = s * z + 1.0 / 120.0;
    s = s * z - 1.0 / 6.0;
    s = s * z + 1.0;
    double c = -1.0 / 3628800.0;
    c = c * z + 1.0 / 40320.0;
    c = c * z - 1.0 / 720.0;
    c = c * z + 1.0 / 24.0;
    c = c * z - 0.5;
    c = c * z + 1.0;
    uint64_t tb;
    memcpy(&tb, &t, 8);
    return (nb_vm_sincos){r * s, c, (uint32_t)tb};
}

static inline float nb_sinf(float x) {
    nb_vm_sincos q = nb_vm_sincos_reduced(x);
    double y = q.j & 1 ? q.c : q.s;
    return (float)(q.j & 2 ? -y : y);
}

static inline float nb_cosf(float x) {
    nb_vm_sincos q = nb_vm_sincos_reduced(x);
    double y = q.j & 1 ? q.s : q.c;
    return (float)((q.j + 1) & 2 ? -y : y);
}

/* tan = sin r / cos r, or -cos r / sin r in odd quadrants (one double
 * division). */
static inline float nb_tanf(float x) {
    nb_vm_sincos q = nb_vm_sincos_reduced(x);
    return (float)(q.j & 1 ? -q.c / q.s : q.s / q.c);
}

#endif
