/*
 * lowp.c — the low-precision element formats (O10): their fields, one code's
 * encoding (round to nearest even, ml_dtypes' overflow and NaN rules, or
 * saturating) and decoding, the decoded tables, the MX (OCP MX v1.0, 6.3)
 * and NVFP4 block scales, one row's quantization, and the public scalar API.
 */
#include "lowp.h"

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

const nb_lowp_fmt nb__lowp_fmts[NB_SCALED_FORMAT_COUNT] = {
    [NB_FMT_F8E4M3FN] = {"float8_e4m3fn", 8, 4, 3, 7, .nan_ones = true, .max_code = 0x7e, .emax = 8},
    [NB_FMT_F8E5M2] = {"float8_e5m2", 8, 5, 2, 15, .ieee = true, .max_code = 0x7b, .emax = 15},
    [NB_FMT_F8E4M3FNUZ] = {"float8_e4m3fnuz", 8, 4, 3, 8, .fnuz = true, .max_code = 0x7f, .emax = 7},
    [NB_FMT_F8E5M2FNUZ] = {"float8_e5m2fnuz", 8, 5, 2, 16, .fnuz = true, .max_code = 0x7f, .emax = 15},
    [NB_FMT_F6E2M3] = {"float6_e2m3fn", 6, 2, 3, 1, .max_code = 0x1f, .emax = 2},
    [NB_FMT_F6E3M2] = {"float6_e3m2fn", 6, 3, 2, 3, .max_code = 0x1f, .emax = 4},
    [NB_FMT_F4E2M1] = {"float4_e2m1fn", 4, 2, 1, 1, .max_code = 0x7, .emax = 2},
};

static bool valid(int f) { return f >= 0 && f < NB_SCALED_FORMAT_COUNT; }

/* The code of a value too large (or infinite) for the format. */
static uint8_t overflow(const nb_lowp_fmt *f, uint8_t sign, bool saturate) {
    if (saturate) return sign | f->max_code;
    if (f->ieee) return (uint8_t)(sign | (((1u << f->ebits) - 1) << f->mbits)); /* inf */
    if (f->nan_ones) return sign | 0x7f;
    if (f->fnuz) return 0x80;
    return sign | f->max_code;
}

uint8_t nb__lowp_encode(int fmt, float x, bool saturate) {
    const nb_lowp_fmt *f = &nb__lowp_fmts[fmt];
    uint8_t sign = signbit(x) ? (uint8_t)(1u << (f->bits - 1)) : 0;
    if (isnan(x)) /* formats without a NaN: ml_dtypes gives -0 for +NaN and +0 for -NaN */
        return f->fnuz ? 0x80 : f->ieee ? sign | 0x7e : f->nan_ones ? sign | 0x7f : sign ^ (1u << (f->bits - 1));
    double a = fabs((double)x);
    if (isinf(a)) return overflow(f, sign, saturate);
    int emin = 1 - f->bias, m1 = 1 << f->mbits;
    uint32_t code;
    if (a < ldexp(1.0, emin)) { /* subnormal: multiples of 2^(emin - mbits); m1 is the least normal */
        code = (uint32_t)nearbyint(ldexp(a, f->mbits - emin));
    } else {
        int e;
        frexp(a, &e);
        e -= 1; /* a in [2^e, 2^(e+1)) */
        uint32_t q = (uint32_t)nearbyint(ldexp(a, f->mbits - e)); /* in [m1, 2 m1] */
        if (q == 2u * (uint32_t)m1) {
            e++;
            q = (uint32_t)m1;
        }
        int ef = e + f->bias;
        if (ef >= 1 << f->ebits) return overflow(f, sign, saturate);
        code = (uint32_t)ef << f->mbits | (q - (uint32_t)m1);
    }
    if (code > f->max_code) return overflow(f, sign, saturate);
    if (code == 0 && f->fnuz) return 0; /* no -0 */
    return (uint8_t)(sign | code);
}

float nb__lowp_decode(int fmt, uint8_t c) {
    const nb_lowp_fmt *f = &nb__lowp_fmts[fmt];
    int top = 1 << (f->bits - 1), m1 = 1 << f->mbits;
    bool neg = (c & top) != 0;
    int mag = c & (top - 1), ef = mag >> f->mbits, m = mag & (m1 - 1);
    if (f->fnuz && c == top) return -NAN; /* ml_dtypes' sign for the one NaN */
    if ((f->nan_ones && mag == 0x7f) || (f->ieee && ef == (1 << f->ebits) - 1 && m != 0)) return neg ? -NAN : NAN;
    double v = f->ieee && ef == (1 << f->ebits) - 1 ? INFINITY
               : ef == 0                            ? ldexp(m, 1 - f->bias - f->mbits)
                                                    : ldexp(m1 + m, ef - f->bias - f->mbits);
    return (float)(neg ? -v : v);
}

static float tables[NB_SCALED_FORMAT_COUNT][256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (int f = 0; f < NB_SCALED_FORMAT_COUNT; f++)
        for (int c = 0; c < 1 << nb__lowp_fmts[f].bits; c++) tables[f][c] = nb__lowp_decode(f, (uint8_t)c);
}

const float *nb__lowp_table(int fmt) {
    pthread_once(&tables_once, build_tables);
    return tables[fmt];
}

float nb__e8m0_decode(uint8_t c) { return c == 255 ? NAN : ldexpf(1.0f, (int)c - 127); }

uint8_t nb__mx_scale_code(int fmt, float amax) {
    if (!(amax <= FLT_MAX)) return 255;
    if (amax == 0) return 0;
    int e;
    frexpf(amax, &e);
    e = e - 1 - nb__lowp_fmts[fmt].emax; /* floor(log2 amax) - emax_elem */
    if (e < -127) e = -127;
    if (e > 127) e = 127;
    return (uint8_t)(e + 127);
}

uint8_t nb__nvfp4_scale_code(float amax, float g) {
    if (!(amax <= FLT_MAX)) return 0x7f; /* NaN */
    return nb__lowp_encode(NB_FMT_F8E4M3FN, amax / (6.0f * g), true);
}

float nb__lowp_block_scale(const nb_lowp_row *r, const uint8_t *scales, int64_t b) {
    if (r->layout == NB_SCALE_MX) return nb__e8m0_decode(scales[b]);
    if (r->layout == NB_SCALE_NVFP4) return nb__lowp_decode(NB_FMT_F8E4M3FN, scales[b]) * r->global;
    return r->global;
}

void nb__lowp_quantize_row(const nb_lowp_row *r, const float *x, uint8_t *codes, uint8_t *scales,
                           uint8_t (*encode)(int fmt, float x)) {
    int bits = nb__lowp_fmts[r->fmt].bits;
    int64_t blk = nb__lowp_block(r->layout);
    if (blk == 0) blk = r->k;
    memset(codes, 0, (size_t)nb__lowp_row_bytes(bits, r->k));
    for (int64_t b0 = 0; b0 < r->k; b0 += blk) {
        if (r->layout != NB_SCALE_TENSOR) {
            float amax = 0;
            for (int64_t i = b0; i < b0 + blk; i++) {
                float a = fabsf(x[i]);
                amax = !(a <= FLT_MAX) || a > amax ? a : amax; /* NaN and inf stay */
                if (!(a <= FLT_MAX)) break;
            }
            scales[b0 / blk] = r->layout == NB_SCALE_MX ? nb__mx_scale_code(r->fmt, amax)
                                                        : nb__nvfp4_scale_code(amax, r->global);
        }
        float s = nb__lowp_block_scale(r, scales, b0 / blk);
        for (int64_t i = b0; i < b0 + blk; i++) nb__lowp_put(codes, bits, i, s == 0 ? 0 : encode(r->fmt, x[i] / s));
    }
}

/* ---- the public scalar API ---- */

const char *nb_scaled_format_name(nb_scaled_format f) { return valid(f) ? nb__lowp_fmts[f].name : "invalid"; }
int nb_scaled_format_bits(nb_scaled_format f) { return valid(f) ? nb__lowp_fmts[f].bits : 0; }
double nb_scaled_format_max(nb_scaled_format f) {
    return valid(f) ? nb__lowp_decode(f, nb__lowp_fmts[f].max_code) : 0;
}

static nb_status check_args(const char *op, nb_scaled_format f, const void *a, const void *b, int64_t n) {
    if (!valid(f)) return nb__error(NB_ERR_ARG, "%s: unknown format %d", op, (int)f);
    if (n < 0) return nb__error(NB_ERR_ARG, "%s: negative count %lld", op, (long long)n);
    if (n > 0 && (!a || !b)) return nb__error(NB_ERR_NULL, "%s: argument is NULL", op);
    return NB_OK;
}

nb_status nb_scaled_encode(nb_scaled_format f, const float *x, int64_t n, uint8_t *codes) {
    nb_status st = check_args("scaled_encode", f, x, codes, n);
    for (int64_t i = 0; st == NB_OK && i < n; i++) codes[i] = nb__lowp_encode(f, x[i], false);
    return st;
}

nb_status nb_scaled_decode(nb_scaled_format f, const uint8_t *codes, int64_t n, float *x) {
    nb_status st = check_args("scaled_decode", f, codes, x, n);
    for (int64_t i = 0; st == NB_OK && i < n; i++)
        if (codes[i] >> nb__lowp_fmts[f].bits)
            return nb__error(NB_ERR_ARG, "scaled_decode: code %d at index %lld has more than the %d bits of %s",
                             codes[i], (long long)i, nb__lowp_fmts[f].bits, nb__lowp_fmts[f].name);
    for (int64_t i = 0; st == NB_OK && i < n; i++) x[i] = nb__lowp_decode(f, codes[i]);
    return st;
}
