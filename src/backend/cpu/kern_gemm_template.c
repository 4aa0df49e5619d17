/*
 * kern_gemm_template.c — the GEMM register-tile kernels and panel packing,
 * written once and compiled per ISA: kern_template.c includes this file, so
 * it is built three times (scalar, AVX2, AVX-512) with that copy's -m flags.
 * gemm.c (the cache blocking and threading) drives them through the
 * `gemm` slots of the kernel table.
 *
 * A tile kernel computes one MR x NR block of row-major C from a packed
 * A micro-panel (kc steps of MR values: one column of the tile's rows per
 * step, broadcast) and kc rows of NR contiguous B values ldb apart (vector
 * loads): a packed B micro-panel, or B itself when its rows are contiguous.
 * Each C element is a chain of FMAs in k order, so the result never depends
 * on where the tile sits, how B was reached, or which thread runs it.
 */
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

/* ---- packing -------------------------------------------------------------
 * Copy a len x kc block of X (element (r, p) at src[r*rs + p*ps]) into
 * ceil(len/R) panels of kc x R (dst[panel][p][r]), zero past len, so the
 * tile kernels never see ragged edges.  Fast paths: rs == 1 (each step a
 * contiguous copy) and ps == 1 (a transpose by TB x TB register blocks);
 * anything else (0, negative) takes the general loop. */
#if defined(__AVX2__)
/* dst[j*dld + i] = src[i*sld + j] for an 8 x 8 f32 block (the classic
 * unpack / shuffle / permute2f128 transpose). */
static inline __attribute__((always_inline)) void gemm_tr_f32(float *dst, int64_t dld, const float *src,
                                                              int64_t sld) {
    __m256 r[8], t[8], u[8];
    for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * sld);
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int j = 0; j < 4; j++) {
        _mm256_storeu_ps(dst + j * dld, _mm256_permute2f128_ps(u[j], u[j + 4], 0x20));
        _mm256_storeu_ps(dst + (j + 4) * dld, _mm256_permute2f128_ps(u[j], u[j + 4], 0x31));
    }
}
/* The same for a 4 x 4 f64 block. */
static inline __attribute__((always_inline)) void gemm_tr_f64(double *dst, int64_t dld, const double *src,
                                                              int64_t sld) {
    __m256d r[4], t[4];
    for (int i = 0; i < 4; i++) r[i] = _mm256_loadu_pd(src + i * sld);
    for (int i = 0; i < 4; i += 2) {
        t[i] = _mm256_unpacklo_pd(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_pd(r[i], r[i + 1]);
    }
    for (int j = 0; j < 2; j++) {
        _mm256_storeu_pd(dst + j * dld, _mm256_permute2f128_pd(t[j], t[j + 2], 0x20));
        _mm256_storeu_pd(dst + (j + 2) * dld, _mm256_permute2f128_pd(t[j], t[j + 2], 0x31));
    }
}
#define NB_GEMM_TB_f32 8
#define NB_GEMM_TB_f64 4
#else
#define gemm_tr_f32(d, dl, s, sl) (*(d) = *(s)) /* 1 x 1 blocks */
#define gemm_tr_f64(d, dl, s, sl) (*(d) = *(s))
#define NB_GEMM_TB_f32 1
#define NB_GEMM_TB_f64 1
#endif
#define NB_GEMM_PCH 64 /* k steps per pass of the transposing pack */

#define NB_GEMM_PACK(NAME, T, R, TB, TR)                                                  \
    static void NAME(void *dst_, const void *src_, int64_t rs, int64_t ps, int64_t len,   \
                     int64_t kc) {                                                        \
        T *restrict dst = dst_;                                                           \
        const T *src = src_;                                                              \
        int64_t full = len - len % (R); /* rows in whole panels */                        \
        if (rs == 1) { /* R-element copies, 8 steps of every panel at a time (measured   \
                        * best: writes stay near, reads walk the rows) */               \
            for (int64_t q = 0; q < kc; q += 8)                                           \
                for (int64_t r0 = 0; r0 < full; r0 += (R))                                \
                    for (int64_t p = q; p < q + 8 && p < kc; p++)                         \
                        memcpy(dst + r0 * kc + p * (R), src + p * ps + r0, sizeof(T) * (R)); \
        } else if (ps == 1 && (R) % (TB) == 0) {                                          \
            /* TB x TB transposes; TB source rows at a time over NB_GEMM_PCH steps,      \
             * so power-of-two row strides do not collide in one L1 set */               \
            int64_t pt = kc - kc % (TB);                                                  \
            for (int64_t r0 = 0; r0 < full; r0 += (R))                                    \
                for (int64_t q = 0; q < pt; q += NB_GEMM_PCH)                             \
                    for (int r = 0; r < (R); r += (TB))                                   \
                        for (int64_t p = q; p < pt && p < q + NB_GEMM_PCH; p += (TB))     \
                            TR(dst + r0 * kc + p * (R) + r, R, src + (r0 + r) * rs + p, rs); \
            for (int64_t r0 = 0; r0 < full; r0 += (R))                                    \
                for (int64_t p = pt; p < kc; p++)                                         \
                    for (int r = 0; r < (R); r++) dst[r0 * kc + p * (R) + r] = src[(r0 + r) * rs + p]; \
        } else {                                                                          \
            full = 0; /* all through the general loop below */                            \
        }                                                                                 \
        for (int64_t r0 = full; r0 < len; r0 += (R))                                      \
            for (int64_t p = 0; p < kc; p++)                                              \
                for (int64_t r = 0; r < (R); r++)                                         \
                    dst[r0 * kc + p * (R) + r] = r0 + r < len ? src[(r0 + r) * rs + p * ps] : 0; \
    }

/* ---- tile kernels ----------------------------------------------------------
 * C[MR x NR] = (accumulate ? C : 0) + A_panel . B_panel, NR = NV vectors of
 * W lanes.  The accumulators are an array indexed by constants after full
 * unrolling, so gcc keeps them in registers (checked: no spills).  The
 * tile's C rows are prefetched before the k loop, B NB_GEMM_PF steps ahead.
 * Each ISA also has a half-width tile (NV / 2 vectors) for ragged last
 * panels. */
#define NB_GEMM_PREFETCH(p) __builtin_prefetch((const void *)(p))
#define NB_GEMM_PF 8
#define NB_GEMM_TILE(NAME, T, V, W, MR, NV, VZERO, VLOAD, VSTORE, VSET1, VFMA, VADD)     \
    static void NAME(int64_t kc, const void *a_, const void *b_, int64_t ldb, void *c_,   \
                     int64_t ldc, bool accumulate) {                                      \
        const T *restrict a = a_, *restrict b = b_;                                       \
        T *restrict c = c_;                                                               \
        V acc[MR][NV];                                                                    \
        _Pragma("GCC unroll 32") for (int i = 0; i < (MR); i++) {                         \
            NB_GEMM_PREFETCH(c + i * ldc);                                                \
            NB_GEMM_PREFETCH(c + i * ldc + (NV) * (W) - 1);                               \
            _Pragma("GCC unroll 8") for (int j = 0; j < (NV); j++) acc[i][j] = VZERO;     \
        }                                                                                 \
        _Pragma("GCC unroll 4") for (int64_t p = 0; p < kc; p++, a += (MR), b += ldb) {  \
            V bv[NV];                                                                     \
            NB_GEMM_PREFETCH(b + NB_GEMM_PF * ldb);                                       \
            _Pragma("GCC unroll 8") for (int j = 0; j < (NV); j++) bv[j] = VLOAD(b + j * (W)); \
            _Pragma("GCC unroll 32") for (int i = 0; i < (MR); i++) {                     \
                V av = VSET1(a[i]);                                                       \
                _Pragma("GCC unroll 8") for (int j = 0; j < (NV); j++)                    \
                    acc[i][j] = VFMA(av, bv[j], acc[i][j]);                               \
            }                                                                             \
        }                                                                                 \
        _Pragma("GCC unroll 32") for (int i = 0; i < (MR); i++)                           \
            _Pragma("GCC unroll 8") for (int j = 0; j < (NV); j++) {                      \
                T *cp = c + i * ldc + j * (W);                                            \
                VSTORE(cp, accumulate ? VADD(VLOAD(cp), acc[i][j]) : acc[i][j]);          \
            }                                                                             \
    }

#if defined(__AVX512F__)
#define NB_GEMM_MR_f32 8
#define NB_GEMM_NV_f32 2
#define NB_GEMM_MR_f64 8
#define NB_GEMM_NV_f64 2
#define NB_GEMM_TILES_512(NAME, NV32, NV64)                                                        \
    NB_GEMM_TILE(NAME##_f32, float, __m512, 16, NB_GEMM_MR_f32, NV32, _mm512_setzero_ps(), _mm512_loadu_ps, \
                 _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps)          \
    NB_GEMM_TILE(NAME##_f64, double, __m512d, 8, NB_GEMM_MR_f64, NV64, _mm512_setzero_pd(), _mm512_loadu_pd, \
                 _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd, _mm512_add_pd)
NB_GEMM_TILES_512(gemm_tile, NB_GEMM_NV_f32, NB_GEMM_NV_f64)
NB_GEMM_TILES_512(gemm_tile_half, NB_GEMM_NV_f32 / 2, NB_GEMM_NV_f64 / 2)
#define NB_GEMM_W_f32 16
#define NB_GEMM_W_f64 8
#elif defined(__AVX2__)
#define NB_GEMM_MR_f32 6
#define NB_GEMM_NV_f32 2
#define NB_GEMM_MR_f64 6
#define NB_GEMM_NV_f64 2
#define NB_GEMM_TILES_256(NAME, NV32, NV64)                                                        \
    NB_GEMM_TILE(NAME##_f32, float, __m256, 8, NB_GEMM_MR_f32, NV32, _mm256_setzero_ps(), _mm256_loadu_ps, \
                 _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps)          \
    NB_GEMM_TILE(NAME##_f64, double, __m256d, 4, NB_GEMM_MR_f64, NV64, _mm256_setzero_pd(), _mm256_loadu_pd, \
                 _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd, _mm256_add_pd)
NB_GEMM_TILES_256(gemm_tile, NB_GEMM_NV_f32, NB_GEMM_NV_f64)
NB_GEMM_TILES_256(gemm_tile_half, NB_GEMM_NV_f32 / 2, NB_GEMM_NV_f64 / 2)
#define NB_GEMM_W_f32 8
#define NB_GEMM_W_f64 4
#else
/* Plain C: "vectors" of one lane, a 4 x 4 tile (16 accumulators fit the 16 SSE2 registers). */
#define NB_S_LOAD(p) (*(p))
#define NB_S_STORE(p, v) (*(p) = (v))
#define NB_S_SET1(x) (x)
#define NB_S_FMA(x, y, z) ((x) * (y) + (z))
#define NB_S_ADD(x, y) ((x) + (y))
#define NB_GEMM_MR_f32 4
#define NB_GEMM_NV_f32 4
#define NB_GEMM_MR_f64 4
#define NB_GEMM_NV_f64 4
#define NB_GEMM_TILES_1(NAME, NV32, NV64)                                                          \
    NB_GEMM_TILE(NAME##_f32, float, float, 1, NB_GEMM_MR_f32, NV32, 0.0f, NB_S_LOAD, NB_S_STORE, NB_S_SET1, \
                 NB_S_FMA, NB_S_ADD)                                                      \
    NB_GEMM_TILE(NAME##_f64, double, double, 1, NB_GEMM_MR_f64, NV64, 0.0, NB_S_LOAD, NB_S_STORE, NB_S_SET1, \
                 NB_S_FMA, NB_S_ADD)
NB_GEMM_TILES_1(gemm_tile, NB_GEMM_NV_f32, NB_GEMM_NV_f64)
NB_GEMM_TILES_1(gemm_tile_half, NB_GEMM_NV_f32 / 2, NB_GEMM_NV_f64 / 2)
#define NB_GEMM_W_f32 1
#define NB_GEMM_W_f64 1
#endif

NB_GEMM_PACK(gemm_pack_a_f32, float, NB_GEMM_MR_f32, NB_GEMM_TB_f32, gemm_tr_f32)
NB_GEMM_PACK(gemm_pack_b_f32, float, NB_GEMM_NV_f32 * NB_GEMM_W_f32, NB_GEMM_TB_f32, gemm_tr_f32)
NB_GEMM_PACK(gemm_pack_a_f64, double, NB_GEMM_MR_f64, NB_GEMM_TB_f64, gemm_tr_f64)
NB_GEMM_PACK(gemm_pack_b_f64, double, NB_GEMM_NV_f64 * NB_GEMM_W_f64, NB_GEMM_TB_f64, gemm_tr_f64)

#define NB_GEMM_KERN(SFX)                                                                 \
    {.mr = NB_GEMM_MR_##SFX, .nr = NB_GEMM_NV_##SFX * NB_GEMM_W_##SFX,                    \
     .pack_a = gemm_pack_a_##SFX, .pack_b = gemm_pack_b_##SFX, .tile = gemm_tile_##SFX,             \
     .tile_half = gemm_tile_half_##SFX}
