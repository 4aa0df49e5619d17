/*
 * quant.c — the CPU backend's low-precision kernels (O10): quantize rows in
 * parallel, and scaled_matmul as the f32 GEMM whose packing step decodes the
 * codes (a table of each format's values times the block's scale), so no
 * float copy of either operand is made; dequantize is that packing step with
 * panels one row wide.
 */
#include "quant.h"
#include "gemm.h"
#include "pool.h"

/* The decoded scales of a row's blocks, indexed by element >> shift (TENSOR: shift 62, one). */
typedef struct scale_map {
    const float *table; /* value of a scale code (MX, NVFP4: times the global) */
    const uint8_t *codes;
    float one;
    int shift;
} scale_map;

/* The 256 values of the scale codes of a layout times g (built per call: 1 KiB). */
static void scale_table(const nb_lowp_row *r, float *t) {
    for (int c = 0; c < 256; c++)
        t[c] = r->layout == NB_SCALE_MX ? nb__e8m0_decode((uint8_t)c)
                                        : nb__lowp_decode(NB_FMT_F8E4M3FN, (uint8_t)c) * r->global;
}

static inline float scale_at(const scale_map *s, int64_t p) {
    return s->codes ? s->table[s->codes[p >> s->shift]] : s->one;
}

static scale_map scale_map_of(const nb_lowp_row *r, const float *table, const uint8_t *scales, int64_t row) {
    int64_t blk = nb__lowp_block(r->layout);
    if (!blk) return (scale_map){NULL, NULL, r->global, 62};
    return (scale_map){table, scales + row * (r->k / blk), 0, blk == NB_MX_BLOCK ? 5 : 4};
}

/* Decoded values of columns p0 .. p1 of one packed row into d[p * w] (w: the panel width). */
static inline void decode_run(int bits, const float *lut, const uint8_t *row, const scale_map *s, int64_t p0,
                              int64_t p1, float *d, int w) {
    if (bits == 8)
        for (int64_t p = p0; p < p1; p++) d[(p - p0) * w] = lut[row[p]] * scale_at(s, p);
    else if (bits == 4)
        for (int64_t p = p0; p < p1; p++) d[(p - p0) * w] = lut[(row[p >> 1] >> ((p & 1) * 4)) & 15] * scale_at(s, p);
    else
        for (int64_t p = p0; p < p1; p++) d[(p - p0) * w] = lut[nb__lowp_get(row, 6, p)] * scale_at(s, p);
}

enum { PACK_STEP = 16 }; /* columns decoded per row before the next row: the panel's stripe stays in L1 */

/* decode_run for PACK_STEP columns from p (a multiple of 16) under one scale s: unrolled, the codes
 * of a byte (4-bit) or of three bytes (6-bit) unpacked together. */
static inline void decode16(int bits, const float *lut, const uint8_t *row, int64_t p, float s, float *d, int w) {
    if (bits == 8) {
        const uint8_t *c = row + p;
        for (int j = 0; j < 16; j++) d[j * w] = lut[c[j]] * s;
    } else if (bits == 4) {
        const uint8_t *c = row + p / 2;
        for (int j = 0; j < 8; j++) {
            d[2 * j * w] = lut[c[j] & 15] * s;
            d[(2 * j + 1) * w] = lut[c[j] >> 4] * s;
        }
    } else {
        const uint8_t *c = row + p / 4 * 3;
        for (int g = 0; g < 4; g++) {
            uint32_t x = (uint32_t)c[3 * g] | (uint32_t)c[3 * g + 1] << 8 | (uint32_t)c[3 * g + 2] << 16;
            for (int j = 0; j < 4; j++) d[(4 * g + j) * w] = lut[(x >> (6 * j)) & 63] * s;
        }
    }
}

void nb__gemm_pack_codes(const nb_gemm_codes *c, float *dst, int64_t r0, int64_t len, int64_t p0, int64_t kc, int w) {
    const nb_lowp_row *r = c->row;
    int bits = nb__lowp_fmts[r->fmt].bits;
    const float *lut = nb__lowp_table(r->fmt);
    float st[256];
    if (c->scales) scale_table(r, st);
    int64_t rb = nb__lowp_row_bytes(bits, r->k);
    for (int64_t i0 = 0; i0 < len; i0 += w) {
        float *panel = dst + i0 * kc;
        scale_map sm[64];
        for (int i = 0; i < w && i0 + i < len; i++) sm[i] = scale_map_of(r, st, c->scales, r0 + i0 + i);
        for (int64_t q = 0; q < kc; q += PACK_STEP) {
            int64_t q1 = q + PACK_STEP < kc ? q + PACK_STEP : kc;
            for (int i = 0; i < w; i++) {
                float *d = panel + q * w + i;
                if (i0 + i >= len) {
                    for (int64_t p = q; p < q1; p++) d[(p - q) * w] = 0;
                    continue;
                }
                const uint8_t *row = c->codes + (r0 + i0 + i) * rb;
                if (q1 - q == PACK_STEP && (p0 + q) % PACK_STEP == 0) /* one block's scale (blocks: 16, 32) */
                    decode16(bits, lut, row, p0 + q, scale_at(&sm[i], p0 + q), d, w);
                else
                    decode_run(bits, lut, row, &sm[i], p0 + q, p0 + q1, d, w);
            }
        }
    }
}

/* ---- quantize / dequantize: rows in parallel ---- */

typedef struct rows_ctx {
    const nb_lowp_row *r;
    const float *x;
    uint8_t *codes, *scales;
} rows_ctx;

static uint8_t encode_sat(int fmt, float x) { return nb__lowp_encode(fmt, x, true); }

static void quantize_rows(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const rows_ctx *c = p;
    const nb_lowp_row *r = c->r;
    int64_t rb = nb__lowp_row_bytes(nb__lowp_fmts[r->fmt].bits, r->k), blk = nb__lowp_block(r->layout);
    for (int64_t i = lo; i < hi; i++)
        nb__lowp_quantize_row(r, c->x + i * r->k, c->codes + i * rb, blk ? c->scales + i * (r->k / blk) : NULL,
                              encode_sat);
}

nb_status nb__cpu_quantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *x, nb_tensor *codes, nb_tensor *scales) {
    rows_ctx c = {.r = r, .x = (const float *)nb__ptr(x), .codes = (uint8_t *)nb__ptr(codes),
                  .scales = scales ? (uint8_t *)nb__ptr(scales) : NULL};
    nb__parallel_for(rows, 1 + 16384 / (r->k + 1), quantize_rows, &c);
    return NB_OK;
}

typedef struct deq_ctx {
    nb_gemm_codes src;
    float *out;
} deq_ctx;

/* Rows [lo, hi) decoded: the GEMM's packing with panels one row wide writes them row-major. */
static void dequantize_rows(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const deq_ctx *c = p;
    int64_t k = c->src.row->k;
    nb__gemm_pack_codes(&c->src, c->out + lo * k, lo, hi - lo, 0, k, 1);
}

nb_status nb__cpu_dequantize(const nb_lowp_row *r, int64_t rows, const nb_tensor *codes, const nb_tensor *scales,
                             nb_tensor *out) {
    deq_ctx c = {{r, (const uint8_t *)nb__ptr(codes), scales ? (const uint8_t *)nb__ptr(scales) : NULL},
                 (float *)nb__ptr(out)};
    nb__parallel_for(rows, 1 + 65536 / (r->k + 1), dequantize_rows, &c);
    return NB_OK;
}

/* ---- scaled_matmul: the GEMM with decoding packs ---- */

nb_status nb__cpu_scaled_matmul(const nb_lowp_row *ra, int64_t ma, const nb_tensor *a, const nb_tensor *as,
                                const nb_lowp_row *rb, int64_t nb, const nb_tensor *b, const nb_tensor *bs,
                                nb_tensor *out) {
    nb_gemm_codes ca = {ra, (const uint8_t *)nb__ptr(a), as ? (const uint8_t *)nb__ptr(as) : NULL};
    nb_gemm_codes cb = {rb, (const uint8_t *)nb__ptr(b), bs ? (const uint8_t *)nb__ptr(bs) : NULL};
    nb_gemm g = {.dt = NB_F32, .m = ma, .n = nb, .k = ra->k, .c = nb__ptr(out), .ldc = nb, .ca = &ca, .cb = &cb};
    int threads = nb_get_num_threads();
    size_t ws_size = nb__gemm_ws_size(&g) * (size_t)threads + 1;
    void *ws = nb__buf_alloc(ws_size);
    if (!ws) return NB_ERR_OOM;
    nb__gemm(&g, ws, threads);
    nb__buf_free(ws, ws_size);
    return NB_OK;
}
