/*
 * kern_template.c — the CPU elementwise and reduction loops, written once in
 * plain C and compiled per ISA by kern_{scalar,avx2,avx512}.c (which define
 * NB_KTABLE and the -m flags), so gcc's auto-vectorizer emits SSE2, AVX2 or
 * AVX-512 code from the same source.
 *
 * Each elementwise op's formula comes from ops.def (double precision); the
 * f32 loops of the transcendental ops and activations use the
 * single-precision forms of vmath.h instead, which vectorize (accuracy
 * noted there).
 */
#include "kernels.h"
#include "f32_forms.h"
#include "../../ops/op_eval.h"

#include <math.h>
#include <string.h>
#if defined(__AVX__)
#include <immintrin.h>
#endif

/* ---- generic loops from ops.def ---------------------------------------- */

#define U_BODY(T, OT, EXPR)                                                               \
    if (os == (int64_t)sizeof(OT) && xs == (int64_t)sizeof(T)) {                          \
        OT *restrict op_ = (OT *)o_;                                                      \
        const T *restrict xp_ = (const T *)x_;                                            \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T x = xp_[i];                                                                 \
            op_[i] = (OT)(EXPR);                                                          \
        }                                                                                 \
    } else {                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T x = *(const T *)(x_ + i * xs);                                              \
            *(OT *)(o_ + i * os) = (OT)(EXPR);                                            \
        }                                                                                 \
    }

#define B_BODY(T, OT, EXPR)                                                               \
    if (os == (int64_t)sizeof(OT) && as == (int64_t)sizeof(T) && bs == (int64_t)sizeof(T)) { \
        OT *restrict op_ = (OT *)o_;                                                      \
        const T *restrict ap_ = (const T *)a_, *restrict bp_ = (const T *)b_;             \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T a = ap_[i], b = bp_[i];                                                     \
            op_[i] = (OT)(EXPR);                                                          \
        }                                                                                 \
    } else if (os == (int64_t)sizeof(OT) && as == (int64_t)sizeof(T) && bs == 0) {        \
        OT *restrict op_ = (OT *)o_;                                                      \
        const T *restrict ap_ = (const T *)a_;                                            \
        const T b = *(const T *)b_;                                                       \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T a = ap_[i];                                                                 \
            op_[i] = (OT)(EXPR);                                                          \
        }                                                                                 \
    } else if (os == (int64_t)sizeof(OT) && as == 0 && bs == (int64_t)sizeof(T)) {        \
        OT *restrict op_ = (OT *)o_;                                                      \
        const T *restrict bp_ = (const T *)b_;                                            \
        const T a = *(const T *)a_;                                                       \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T b = bp_[i];                                                                 \
            op_[i] = (OT)(EXPR);                                                          \
        }                                                                                 \
    } else {                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                 \
            T a = *(const T *)(a_ + i * as), b = *(const T *)(b_ + i * bs);               \
            *(OT *)(o_ + i * os) = (OT)(EXPR);                                            \
        }                                                                                 \
    }

/* The ranged f32 forms (f32_forms.h) run in blocks of 1024 elements, each
 * first scanned (vectorized) for inputs outside the range.  A block with
 * none gets the form; a block with only those, the slow form; otherwise the
 * outside inputs are gathered (before the form writes the block, which may
 * be the input itself), the form runs, and the gathered inputs are
 * recomputed by the slow form in one call and scattered back. */
typedef int (*f32_outside_fn)(const float *x, int64_t s, int64_t m, uint8_t *out, double p0d, double p1d);

/* F32_OUTSIDE(E, s): out[i] = 1 where x[i s] is outside op E's range (given the parameters
 * p0d, p1d); how many are.  (Byte
 * flags and an int count: gcc 12 vectorizes neither a bool reduction nor a loop with a
 * run-time stride, hence u_<E>_f32_outside's s == 1 case.) */
#define F32_OUTSIDE(E, s)                                       \
    {                                                           \
        int count = 0;                                          \
        for (int64_t i = 0; i < m; i++) {                       \
            const float x = xp[i * (s)];                        \
            uint8_t f = !F32_TEST(E);                           \
            out[i] = f;                                         \
            count += f;                                         \
        }                                                       \
        return count;                                           \
    }

static inline __attribute__((always_inline)) void f32_run(nb_k_unary form, nb_k_unary slow, f32_outside_fn outside, bool ranged,
                                                           int64_t n, char *o_, int64_t os, const char *x_, int64_t xs,
                                                           double p0, double p1) {
    if (!ranged) { /* a plain form's slow form is the form itself */
        slow(n, o_, os, x_, xs, p0, p1);
        return;
    }
    enum { BLOCK = 1024 };
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t m = n - b < BLOCK ? n - b : BLOCK;
        char *o = o_ + b * os;
        const char *xb = x_ + b * xs;
        const float *xp = (const float *)xb;
        int64_t s = xs / (int64_t)sizeof(float);
        uint8_t out[BLOCK + 8];
        int64_t count = outside(xp, s, m, out, p0, p1);
        if (count == m) { /* the slow form holds everywhere */
            slow(m, o, os, xb, xs, p0, p1);
            continue;
        }
        float xo[BLOCK], yo[BLOCK];
        int16_t at[BLOCK];
        int64_t k = 0;
        memset(out + m, 0, 8);
        for (int64_t i = 0; i < m && count; i += 8) { /* words of 8 flags, zero ones skipped */
            uint64_t w;
            memcpy(&w, out + i, 8);
            if (w == 0) continue;
            for (int64_t j = i; j < i + 8 && j < m; j++) { /* branch-free within the word */
                at[k] = (int16_t)j;
                xo[k] = xp[j * s];
                k += out[j];
            }
        }
        form(m, o, os, xb, xs, p0, p1); /* after the gather: o may be x itself (an in-place op) */
        if (count == 0) continue;
        slow(k, (char *)yo, 4, (const char *)xo, 4, p0, p1);
        for (int64_t j = 0; j < k; j++) *(float *)(o + at[j] * os) = yo[j];
    }
}

#define GEN_UNARY(E, name, dt, expr)                                                         \
    static void u_##E##_f32_all(int64_t n, char *o_, int64_t os, const char *x_, int64_t xs, \
                                double p0d, double p1d) {                                    \
        const float p0 = (float)p0d, p1 = (float)p1d;                                        \
        (void)p0; (void)p1;                                                                  \
        U_BODY(float, float, F32_FORM(E, expr))                                              \
    }                                                                                        \
    static void u_##E##_f32_slow(int64_t n, char *o_, int64_t os, const char *x_, int64_t xs, \
                                 double p0d, double p1d) {                                   \
        const float p0 = (float)p0d, p1 = (float)p1d;                                        \
        (void)p0; (void)p1;                                                                  \
        U_BODY(float, float, F32_SLOW(E, expr))                                              \
    }                                                                                        \
    static int u_##E##_f32_outside(const float *xp, int64_t s, int64_t m, uint8_t *out,      \
                                   double p0d, double p1d) {                                 \
        (void)p0d; (void)p1d;                                                                \
        if (s == 1) F32_OUTSIDE(E, 1)                                                        \
        F32_OUTSIDE(E, s)                                                                    \
    }                                                                                        \
    static void u_##E##_f64(int64_t n, char *o_, int64_t os, const char *x_, int64_t xs,     \
                            double p0, double p1) {                                          \
        (void)p0; (void)p1;                                                                  \
        U_BODY(double, double, expr)                                                         \
    }                                                                                        \
    static void u_##E##_f32(int64_t n, char *o_, int64_t os, const char *x_, int64_t xs,     \
                            double p0, double p1) {                                          \
        const double p0d = p0, p1d = p1;                                                     \
        f32_run(u_##E##_f32_all, u_##E##_f32_slow, u_##E##_f32_outside, F32_RANGED(E), n, o_, os, x_, xs, p0d, p1d); \
    }
#define GEN_BINARY(E, name, dt, expr)                                                        \
    static void b_##E##_f32(int64_t n, char *o_, int64_t os, const char *a_, int64_t as,     \
                            const char *b_, int64_t bs) {                                    \
        B_BODY(float, float, expr)                                                  \
    }                                                                                        \
    static void b_##E##_f64(int64_t n, char *o_, int64_t os, const char *a_, int64_t as,     \
                            const char *b_, int64_t bs) {                                    \
        B_BODY(double, double, expr)                                                \
    }

#define GEN_NONE(E, name, dt, expr)
#define GEN_K_UNARY(E, name, dt, expr) NB_TYPED_##dt(GEN_UNARY(E, name, dt, expr))
#define GEN_K_BINARY(E, name, dt, expr) NB_TYPED_##dt(GEN_BINARY(E, name, dt, expr))
#define GEN_K_WHERE GEN_NONE
#define GEN_K_REDUCE GEN_NONE
#define GEN_K_ARGREDUCE GEN_NONE
#define GEN_K_SCAN GEN_NONE
#define GEN_K_MATMUL GEN_NONE
#define GEN_K_GATHER GEN_NONE
#define GEN_K_SCATTER_ADD GEN_NONE
#define GEN_K_COPY GEN_NONE
#define GEN_K_VIEW GEN_NONE
#define GEN_K_VIEW_GRAD GEN_NONE
#define GEN_K_PAD GEN_NONE
#define GEN_K_CAT GEN_NONE
#define GEN_K_COMPOSITE GEN_NONE
#define GEN_K_WINDOW GEN_NONE
#define GEN_K_SIZE GEN_NONE
#define GEN_K_RANDOM GEN_NONE
#define GEN_K_LINALG GEN_NONE
#define GEN_K_QUANT GEN_NONE
#define GEN_K_CONV GEN_NONE
#define GEN_K_ATTENTION GEN_NONE
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) GEN_K_##kind(E, name, dt, expr)
#include "../../ops/ops.def"
#undef NB_OP

/* ---- reductions --------------------------------------------------------- */

/* Pairwise summation (Higham 1993, as in NumPy): blocks of 128 summed with
 * eight double accumulators, blocks combined recursively.  Error O(log n).
 * Two sibling blocks (a node of 129..256 values) are summed in one loop, so
 * twice as many independent additions are in flight; each accumulator sees
 * the same values in the same order as in a block of its own, so the result
 * is that of the plain recursion, bit for bit. */
typedef double nb_v4d __attribute__((vector_size(32)));
typedef float nb_v4f __attribute__((vector_size(16)));
#if defined(__AVX__) /* gcc 12 splits the generic conversion into two 2-lane ones */
#define NB_V4F_TO_V4D(a) ((nb_v4d)_mm256_cvtps_pd((__m128)(a)))
#else
#define NB_V4F_TO_V4D(a) __builtin_convertvector(a, nb_v4d)
#endif
#define NB_V4D_TO_V4D(a) (a)
static inline double fold8(nb_v4d lo, nb_v4d hi) {
    return ((lo[0] + lo[1]) + (lo[2] + lo[3])) + ((hi[0] + hi[1]) + (hi[2] + hi[3]));
}
/* The eight accumulators as two vectors (gcc does not keep the paired blocks' arrays in
 * registers by itself): acc[j] += x[j] for j < 8. */
#define PAIRWISE(T, VT4, CVT)                                                                   \
    static inline void add8_##T(nb_v4d *lo, nb_v4d *hi, const T *x) {                      \
        VT4 a, b;                                                                          \
        memcpy(&a, x, sizeof a);                                                           \
        memcpy(&b, x + 4, sizeof b);                                                       \
        *lo += CVT(a);                                                                     \
        *hi += CVT(b);                                                                     \
    }                                                                                      \
    static double leaf_##T(int64_t n, const T *x) {                                        \
        nb_v4d lo = {0}, hi = {0};                                                         \
        int64_t i = 0;                                                                     \
        for (; i + 8 <= n; i += 8) add8_##T(&lo, &hi, x + i);                              \
        double s = fold8(lo, hi);                                                          \
        for (; i < n; i++) s += (double)x[i];                                              \
        return s;                                                                          \
    }                                                                                      \
    static double sum_##T(int64_t n, const T *x) {                                         \
        if (n <= 128) return leaf_##T(n, x);                                               \
        int64_t h = (n / 2 + 7) & ~(int64_t)7;                                             \
        if (n > 256) return sum_##T(h, x) + sum_##T(n - h, x + h);                         \
        /* two leaves, x[0, h) and y = x[h, n): h is a multiple of 8 and n - h <= h + 1 */ \
        const T *y = x + h;                                                                \
        int64_t ny = n - h, i = 0;                                                         \
        nb_v4d alo = {0}, ahi = {0}, blo = {0}, bhi = {0};                                 \
        for (; i + 8 <= ny; i += 8) {                                                      \
            add8_##T(&alo, &ahi, x + i);                                                   \
            add8_##T(&blo, &bhi, y + i);                                                   \
        }                                                                                  \
        double sb = fold8(blo, bhi);                                                       \
        for (int64_t t = i; t < ny; t++) sb += (double)y[t];                               \
        for (; i < h; i += 8) add8_##T(&alo, &ahi, x + i);                                 \
        return fold8(alo, ahi) + sb;                                                       \
    }                                                                                      \
    static void acc_##T(int64_t n, int64_t rows, int64_t ld, double *restrict acc,         \
                        const T *restrict x) {                                             \
        int64_t r = 0;                                                                     \
        for (; r + 4 <= rows; r += 4) {                                                    \
            const T *x0 = x + r * ld, *x1 = x0 + ld, *x2 = x1 + ld, *x3 = x2 + ld;         \
            for (int64_t j = 0; j < n; j++)                                                \
                acc[j] += ((double)x0[j] + (double)x1[j]) + ((double)x2[j] + (double)x3[j]); \
        }                                                                                  \
        for (; r < rows; r++)                                                              \
            for (int64_t j = 0; j < n; j++) acc[j] += (double)x[r * ld + j];               \
    }
PAIRWISE(float, nb_v4f, NB_V4F_TO_V4D)
PAIRWISE(double, nb_v4d, NB_V4D_TO_V4D)

/* Max / min of n >= 1 contiguous values with NaN propagation, in the
 * ISA's native vectors (GCC vector extensions: gcc does not vectorize the
 * NaN-aware form by itself): a running extreme per lane, a NaN mask, and a
 * final combination.  Which of two equal-valued zeros wins is unspecified. */
#if defined(__AVX512F__)
#define NB_VBYTES 64
#elif defined(__AVX__)
#define NB_VBYTES 32
#else
#define NB_VBYTES 16
#endif
typedef float nb_vf32 __attribute__((vector_size(NB_VBYTES)));
typedef int32_t nb_vm32 __attribute__((vector_size(NB_VBYTES)));
typedef double nb_vf64 __attribute__((vector_size(NB_VBYTES)));
typedef int64_t nb_vm64 __attribute__((vector_size(NB_VBYTES)));

/* m = the extreme of v and m lane by lane, bad marks v's NaN lanes */
#define EXTREME_STEP(VT, MT, OP, m, bad, v)                                        \
    do {                                                                           \
        MT take_ = (v) OP (m);                                                     \
        (bad) |= (v) != (v);                                                       \
        (m) = (VT)((take_ & (MT)(v)) | (~take_ & (MT)(m)));                        \
    } while (0)
#define EXTREME(T, VT, MT, NAME, OP)                                               \
    static double NAME##_##T(int64_t n, const void *xv) {                          \
        enum { L = NB_VBYTES / sizeof(T) };                                        \
        const T *x = xv;                                                           \
        VT m0, m1, m2, m3, v;                                                      \
        MT bad0 = {0}, bad1 = {0}, bad2 = {0}, bad3 = {0};                         \
        for (int j = 0; j < L; j++) m0[j] = x[0];                                  \
        m1 = m2 = m3 = m0;                                                         \
        int64_t i = 0;                                                             \
        for (; i + 4 * L <= n; i += 4 * L) { /* four chains in flight */           \
            memcpy(&v, x + i, sizeof v);                                           \
            EXTREME_STEP(VT, MT, OP, m0, bad0, v);                                 \
            memcpy(&v, x + i + L, sizeof v);                                       \
            EXTREME_STEP(VT, MT, OP, m1, bad1, v);                                 \
            memcpy(&v, x + i + 2 * L, sizeof v);                                   \
            EXTREME_STEP(VT, MT, OP, m2, bad2, v);                                 \
            memcpy(&v, x + i + 3 * L, sizeof v);                                   \
            EXTREME_STEP(VT, MT, OP, m3, bad3, v);                                 \
        }                                                                          \
        EXTREME_STEP(VT, MT, OP, m0, bad0, m1);                                    \
        EXTREME_STEP(VT, MT, OP, m2, bad2, m3);                                    \
        EXTREME_STEP(VT, MT, OP, m0, bad0, m2);                                    \
        bad0 |= bad1 | bad2 | bad3;                                                \
        for (; i + L <= n; i += L) {                                               \
            memcpy(&v, x + i, sizeof v);                                           \
            EXTREME_STEP(VT, MT, OP, m0, bad0, v);                                 \
        }                                                                          \
        /* the lanes by halves: a tree, not a chain */                             \
        T r[L];                                                                    \
        memcpy(r, &m0, sizeof r);                                                  \
        for (int w = L / 2; w >= 1; w /= 2)                                        \
            for (int j = 0; j < w; j++) r[j] = r[j + w] OP r[j] ? r[j + w] : r[j]; \
        int64_t nan = 0;                                                           \
        for (int j = 0; j < L; j++) nan |= bad0[j];                                \
        T e = r[0];                                                                \
        for (; i < n; i++) {                                                       \
            nan |= x[i] != x[i];                                                   \
            e = x[i] OP e ? x[i] : e;                                              \
        }                                                                          \
        return nan ? (double)NAN : (double)e;                                      \
    }
EXTREME(float, nb_vf32, nb_vm32, max, >)
EXTREME(double, nb_vf64, nb_vm64, max, >)
EXTREME(float, nb_vf32, nb_vm32, min, <)
EXTREME(double, nb_vf64, nb_vm64, min, <)

/* ---- GEMM tiles and packing ---- */
#include "kern_gemm_template.c"

/* ---- where, comparisons, logical ops ---- */
#include "kern_mask_template.c"

/* ---- 2x2 max pooling with its argmax (avx512 only) ---- */
#include "kern_pool_template.c"

#define NB_COMMA ,
#define NB_TAB_U_UNARY(E, dt) NB_TYPED_##dt([NB_OP_##E] = {u_##E##_f32 NB_COMMA u_##E##_f64} NB_COMMA)
#define NB_TAB_B_BINARY(E, dt) NB_TYPED_##dt([NB_OP_##E] = {b_##E##_f32 NB_COMMA b_##E##_f64} NB_COMMA)

const nb_cpu_kernels NB_KTABLE = {
    .isa = NB_KISA,
    .unary = {
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_TAB_U_##kind(E, dt)
#define NB_TAB_U_BINARY(E, dt)
#define NB_TAB_U_WHERE(E, dt)
#define NB_TAB_U_REDUCE(E, dt)
#define NB_TAB_U_ARGREDUCE(E, dt)
#define NB_TAB_U_SCAN(E, dt)
#define NB_TAB_U_MATMUL(E, dt)
#define NB_TAB_U_GATHER(E, dt)
#define NB_TAB_U_SCATTER_ADD(E, dt)
#define NB_TAB_U_COPY(E, dt)
#define NB_TAB_U_VIEW(E, dt)
#define NB_TAB_U_VIEW_GRAD(E, dt)
#define NB_TAB_U_PAD(E, dt)
#define NB_TAB_U_CAT(E, dt)
#define NB_TAB_U_COMPOSITE(E, dt)
#define NB_TAB_U_WINDOW(E, dt)
#define NB_TAB_U_SIZE(E, dt)
#define NB_TAB_U_RANDOM(E, dt)
#define NB_TAB_U_LINALG(E, dt)
#define NB_TAB_U_QUANT(E, dt)
#define NB_TAB_U_CONV(E, dt)
#define NB_TAB_U_ATTENTION(E, dt)
#include "../../ops/ops.def"
#undef NB_OP
    },
    .binary = {
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_TAB_B_##kind(E, dt)
#define NB_TAB_B_UNARY(E, dt)
#define NB_TAB_B_WHERE(E, dt)
#define NB_TAB_B_REDUCE(E, dt)
#define NB_TAB_B_ARGREDUCE(E, dt)
#define NB_TAB_B_SCAN(E, dt)
#define NB_TAB_B_MATMUL(E, dt)
#define NB_TAB_B_GATHER(E, dt)
#define NB_TAB_B_SCATTER_ADD(E, dt)
#define NB_TAB_B_COPY(E, dt)
#define NB_TAB_B_VIEW(E, dt)
#define NB_TAB_B_VIEW_GRAD(E, dt)
#define NB_TAB_B_PAD(E, dt)
#define NB_TAB_B_CAT(E, dt)
#define NB_TAB_B_COMPOSITE(E, dt)
#define NB_TAB_B_WINDOW(E, dt)
#define NB_TAB_B_SIZE(E, dt)
#define NB_TAB_B_RANDOM(E, dt)
#define NB_TAB_B_LINALG(E, dt)
#define NB_TAB_B_QUANT(E, dt)
#define NB_TAB_B_CONV(E, dt)
#define NB_TAB_B_ATTENTION(E, dt)
#include "../../ops/ops.def"
#undef NB_OP
    },
    .sum_f32 = sum_float,
    .sum_f64 = sum_double,
    .acc_f32 = acc_float,
    .acc_f64 = acc_double,
    .extreme = {{min_float, min_double}, {max_float, max_double}},
    .gemm = {NB_GEMM_KERN(f32), NB_GEMM_KERN(f64)},
    .where = NB_WHERE_TABLE,
    .compare = NB_CMP_TABLE,
    .logic = NB_LOGIC_TABLE,
    .pool2x2_idx = NB_POOL2X2_IDX,
};
