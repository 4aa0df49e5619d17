/*
 * ref_quant.c — the reference backend's low-precision kernels (O10), the
 * plain way: a code is found by searching every code of the format for the
 * nearest value (ties to the even code, zeros signed as the input), values
 * decoded one at a time, and scaled_matmul summed in double from them — an
 * oracle independent of the CPU backend's bit arithmetic, tables and GEMM.
 */
#include "ref_quant.h"

#include <float.h>
#include <math.h>

/* The saturating code of x by exhaustive search. */
static uint8_t encode_search(int fmt, float x) {
    const nb_lowp_fmt *f = &nb__lowp_fmts[fmt];
    if (isnan(x)) return nb__lowp_encode(fmt, x, true); /* NaN's code is a convention, not a rounding */
    double v = isinf(x) ? copysign(DBL_MAX, x) : x;
    int best = -1;
    double bd = INFINITY;
    for (int c = 0; c < 1 << f->bits; c++) {
        double d = nb__lowp_decode(fmt, (uint8_t)c);
        if (!isfinite(d)) continue;
        double dist = fabs(d - v);
        bool same_sign = signbit(d) == signbit(v);
        bool better = dist < bd || (dist == bd && best >= 0 &&
                                    (d == 0 ? same_sign : (c & 1) == 0 && (best & 1) == 1));
        if (best < 0 || better) {
            best = c;
            bd = dist;
        }
    }
    return (uint8_t)best;
}

nb_status nb__ref_quantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *x, nb_tensor *codes, nb_tensor *scales) {
    int64_t rb = nb__lowp_row_bytes(nb__lowp_fmts[r->fmt].bits, r->k), blk = nb__lowp_block(r->layout);
    const float *xp = (const float *)nb__ptr(x);
    uint8_t *cp = (uint8_t *)nb__ptr(codes), *sp = scales ? (uint8_t *)nb__ptr(scales) : NULL;
    for (int64_t i = 0; i < rows; i++)
        nb__lowp_quantize_row(r, xp + i * r->k, cp + i * rb, sp ? sp + i * (r->k / blk) : NULL, encode_search);
    return NB_OK;
}

/* Element p of row i of an operand, decoded and scaled, in double. */
static double value_at(const nb_lowp_row *r, const uint8_t *codes, const uint8_t *scales, int64_t i, int64_t p) {
    int bits = nb__lowp_fmts[r->fmt].bits;
    int64_t blk = nb__lowp_block(r->layout);
    const uint8_t *row = codes + i * nb__lowp_row_bytes(bits, r->k);
    float s = nb__lowp_block_scale(r, blk ? scales + i * (r->k / blk) : NULL, blk ? p / blk : 0);
    return (double)(nb__lowp_decode(r->fmt, nb__lowp_get(row, bits, p)) * s);
}

nb_status nb__ref_dequantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *codes, const nb_tensor *scales,
                             nb_tensor *out) {
    const uint8_t *cp = (const uint8_t *)nb__ptr(codes), *sp = scales ? (const uint8_t *)nb__ptr(scales) : NULL;
    float *o = (float *)nb__ptr(out);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t p = 0; p < r->k; p++) o[i * r->k + p] = (float)value_at(r, cp, sp, i, p);
    return NB_OK;
}

nb_status nb__ref_scaled_matmul(const nb_lowp_row *ra, int64_t ma, const nb_tensor *a, const nb_tensor *as,
                                const nb_lowp_row *rb, int64_t nb, const nb_tensor *b, const nb_tensor *bs,
                                nb_tensor *out) {
    const uint8_t *ap = (const uint8_t *)nb__ptr(a), *bp = (const uint8_t *)nb__ptr(b);
    const uint8_t *asp = as ? (const uint8_t *)nb__ptr(as) : NULL, *bsp = bs ? (const uint8_t *)nb__ptr(bs) : NULL;
    float *o = (float *)nb__ptr(out);
    for (int64_t i = 0; i < ma; i++)
        for (int64_t j = 0; j < nb; j++) {
            double acc = 0;
            for (int64_t p = 0; p < ra->k; p++) acc += value_at(ra, ap, asp, i, p) * value_at(rb, bp, bsp, j, p);
            o[i * nb + j] = (float)acc;
        }
    return NB_OK;
}
