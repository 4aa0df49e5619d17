/*
 * kern_pool_template.c — the 2x2 / stride-2 max pooling with its argmax over
 * one output row, in AVX-512 registers: included by kern_template.c, so it
 * exists in the avx512 table only (NB_POOL2X2_IDX is NULL in the others,
 * whose plane loop in conv_kernels.c takes its place).
 *
 * Sixteen outputs at a time: 32 floats of each input row by masked loads
 * (nothing read past the row pair, so no tail loop and no read out of the
 * plane), the left and right taps split out by one two-source permute each,
 * and the result and the int64 positions written by masked stores.  The rule
 * is conv_kernels.c's taps_max, lane by lane: the maximum by `>` in tap order
 * a, b, c, d (top left, top right, bottom left, bottom right); the index of
 * the first tap equal to it; or, when a tap is NaN, the last NaN tap, its
 * value with its bits.
 * The training CNN's rows of 14 and 7 outputs are one step each, where the
 * plane loop's int64 stores and emulated gathers cost about 2x (bench_window).
 */
#if defined(__AVX512F__)
/* out[j], idx[j] for j < n of the output row whose taps start at x + first (in the plane at x,
 * row length W): a = x[first + 2j], b = a's right neighbour, c and d one row (W) below. */
static void pool2x2_row_idx(const float *x, int64_t first, int64_t W, int64_t n, float *out, int64_t *idx) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    const __m512i step = _mm512_slli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 1);
    const __m512i w0 = _mm512_set1_epi32((int32_t)W), w1 = _mm512_set1_epi32((int32_t)W + 1);
    const __m512i zero = _mm512_setzero_si512(), one = _mm512_set1_epi32(1);
    for (int64_t j = 0; j < n; j += 16) {
        int64_t m = n - j < 16 ? n - j : 16; /* outputs this step: 2m floats of each row */
        __mmask16 lo = (__mmask16)(m >= 8 ? 0xFFFF : (1u << (2 * m)) - 1);
        __mmask16 hi = (__mmask16)(m > 8 ? (1u << (2 * m - 16)) - 1 : 0), keep = (__mmask16)((1u << m) - 1);
        const float *r0 = x + first + 2 * j, *r1 = r0 + W;
        __m512 t0 = _mm512_maskz_loadu_ps(lo, r0), t1 = _mm512_maskz_loadu_ps(hi, r0 + 16);
        __m512 u0 = _mm512_maskz_loadu_ps(lo, r1), u1 = _mm512_maskz_loadu_ps(hi, r1 + 16);
        __m512 a = _mm512_permutex2var_ps(t0, even, t1), b = _mm512_permutex2var_ps(t0, odd, t1);
        __m512 c = _mm512_permutex2var_ps(u0, even, u1), d = _mm512_permutex2var_ps(u0, odd, u1);
        __m512 mx = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, a, _CMP_GT_OQ), a, b);
        mx = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, mx, _CMP_GT_OQ), mx, c);
        mx = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(d, mx, _CMP_GT_OQ), mx, d);
        __mmask16 na = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q), nb = _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
        __mmask16 nc = _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q), nd = _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
        __mmask16 anynan = (__mmask16)(na | nb | nc | nd);
        /* the first tap equal to the maximum, taps tested last to first so the first wins */
        __m512i at = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(c, mx, _CMP_EQ_OQ), w1, w0);
        at = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(b, mx, _CMP_EQ_OQ), at, one);
        at = _mm512_mask_blend_epi32(_mm512_cmp_ps_mask(a, mx, _CMP_EQ_OQ), at, zero);
        /* the last NaN tap, tested first to last so the last wins */
        __m512i at_nan = _mm512_mask_blend_epi32(nb, zero, one);
        at_nan = _mm512_mask_blend_epi32(nc, at_nan, w0);
        at_nan = _mm512_mask_blend_epi32(nd, at_nan, w1);
        at = _mm512_mask_blend_epi32(anynan, at, at_nan);
        __m512 v_nan = _mm512_mask_blend_ps(nd, _mm512_mask_blend_ps(nc, _mm512_mask_blend_ps(nb, a, b), c), d);
        at = _mm512_add_epi32(at, _mm512_add_epi32(step, _mm512_set1_epi32((int32_t)(first + 2 * j))));
        _mm512_mask_storeu_ps(out + j, keep, _mm512_mask_blend_ps(anynan, mx, v_nan));
        _mm512_mask_storeu_epi64(idx + j, (__mmask8)keep, _mm512_cvtepi32_epi64(_mm512_castsi512_si256(at)));
        _mm512_mask_storeu_epi64(idx + j + 8, (__mmask8)(keep >> 8),
                                 _mm512_cvtepi32_epi64(_mm512_extracti64x4_epi64(at, 1)));
    }
}
#define NB_POOL2X2_IDX pool2x2_row_idx
#else
#define NB_POOL2X2_IDX NULL
#endif
