/*
 * lowp.h — the low-precision element formats (O10) inside the library: each
 * format's fields, encoding and decoding of one code, the packing of codes
 * along a row, and the choice of MX and NVFP4 block scales.  Shared by the
 * QUANT ops (src/ops/quant.c) and both backends' kernels.
 */
#ifndef NB_LOWP_H
#define NB_LOWP_H

#include "internal.h"

/** Elements one block scale covers along the last axis. */
enum { NB_MX_BLOCK = 32, NB_NVFP4_BLOCK = 16 };

/** A format's fields. */
typedef struct nb_lowp_fmt {
    const char *name;
    int bits, ebits, mbits, bias;
    bool ieee;       /* the top exponent holds inf and NaN (F8E5M2) */
    bool nan_ones;   /* S.1111.111 is NaN, no inf (F8E4M3FN) */
    bool fnuz;       /* 0x80 is the one NaN, no -0 */
    uint8_t max_code; /* the positive code of the largest finite value */
    int emax;        /* exponent of the largest normal (OCP MX's emax_elem) */
} nb_lowp_fmt;

extern const nb_lowp_fmt nb__lowp_fmts[NB_SCALED_FORMAT_COUNT];

/** The code of x (round to nearest even).  saturate: finite values beyond the range become
 *  ±max (the quantize ops); else as ml_dtypes (inf, NaN or ±max by format). */
uint8_t nb__lowp_encode(int fmt, float x, bool saturate);
/** The value of code c (its low `bits` bits). */
float nb__lowp_decode(int fmt, uint8_t c);
/** The 2^bits values of a format's codes, decoded (built once). */
const float *nb__lowp_table(int fmt);

/** Bytes of a packed row of k codes of `bits` bits (k a multiple of the packing). */
static inline int64_t nb__lowp_row_bytes(int bits, int64_t k) { return k * bits / 8; }

/** Code i of a packed row. */
static inline uint8_t nb__lowp_get(const uint8_t *row, int bits, int64_t i) {
    if (bits == 8) return row[i];
    if (bits == 4) return (uint8_t)((row[i >> 1] >> ((i & 1) * 4)) & 15);
    const uint8_t *g = row + (i >> 2) * 3;
    uint32_t w = (uint32_t)g[0] | (uint32_t)g[1] << 8 | (uint32_t)g[2] << 16;
    return (uint8_t)((w >> ((i & 3) * 6)) & 63);
}

/** Set code i of a packed row (its other codes kept). */
static inline void nb__lowp_put(uint8_t *row, int bits, int64_t i, uint8_t c) {
    if (bits == 8) {
        row[i] = c;
    } else if (bits == 4) {
        int sh = (int)(i & 1) * 4;
        row[i >> 1] = (uint8_t)((row[i >> 1] & ~(15 << sh)) | (c & 15) << sh);
    } else {
        uint8_t *g = row + (i >> 2) * 3;
        uint32_t w = (uint32_t)g[0] | (uint32_t)g[1] << 8 | (uint32_t)g[2] << 16;
        int sh = (int)(i & 3) * 6;
        w = (w & ~(63u << sh)) | (uint32_t)(c & 63) << sh;
        g[0] = (uint8_t)w;
        g[1] = (uint8_t)(w >> 8);
        g[2] = (uint8_t)(w >> 16);
    }
}

/** 2^(c - 127); NaN for c = 255 (E8M0). */
float nb__e8m0_decode(uint8_t c);
/** The MX scale code of a block whose largest |x| is amax (NaN when the block held NaN or inf). */
uint8_t nb__mx_scale_code(int fmt, float amax);
/** The NVFP4 block scale code (F8E4M3FN) of a block with largest |x| amax, global scale g. */
uint8_t nb__nvfp4_scale_code(float amax, float g);

/** What one row of a quantized operand needs to be read or written. */
typedef struct nb_lowp_row {
    int fmt, layout;
    int64_t k;      /* logical length */
    float global;   /* TENSOR: the scale; NVFP4: the global scale */
} nb_lowp_row;

/** Elements per block scale of a layout (0: one scale for the tensor). */
static inline int64_t nb__lowp_block(int layout) {
    return layout == NB_SCALE_MX ? NB_MX_BLOCK : layout == NB_SCALE_NVFP4 ? NB_NVFP4_BLOCK : 0;
}
/** The scale of block b of a row (scales: the row's block codes; unused for TENSOR). */
float nb__lowp_block_scale(const nb_lowp_row *r, const uint8_t *scales, int64_t b);

/** Quantize one row x[0..k) into codes (packed) and scales (its block codes), encoding with
 *  `encode` (saturating; the backends pass their own). */
void nb__lowp_quantize_row(const nb_lowp_row *r, const float *x, uint8_t *codes, uint8_t *scales,
                           uint8_t (*encode)(int fmt, float x));

#endif
