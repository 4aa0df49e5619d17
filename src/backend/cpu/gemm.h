/* gemm.h — the CPU backend's GEMM: C = A B for f32/f64 with any operand strides (gemm.c). */
#ifndef NB_CPU_GEMM_H
#define NB_CPU_GEMM_H

#include "../../core/lowp.h"

/** An operand read from low-precision codes (O10): row r, column p of it is
 *  decode(code[r, p]) · scale(r, p) as row->fmt and row->layout say; codes
 *  [rows, K·bits/8] and scales [rows, K/block] (NULL for TENSOR) contiguous. */
typedef struct nb_gemm_codes {
    const nb_lowp_row *row;
    const uint8_t *codes, *scales;
} nb_gemm_codes;

/**
 * One product C[m x n] = A[m x k] B[k x n] (alpha = 1, beta = 0: C is
 * overwritten).  A(i, p) = a[i*ars + p*acs], B(p, j) = b[p*brs + j*bcs]
 * (element strides: any value, including 0 and negative); C(i, j) =
 * c[i*ldc + j] (contiguous rows).  dt is NB_F32 or NB_F64 for all three.
 * With ca (cb) set, A(i, p) (B(p, j)) is instead row i (j), column p of
 * those codes, decoded into the packed panels (dt NB_F32; a (b) unused).
 * With add set, C(i, j) = round(AB(i, j)) + add[i*adrs + j*adcs]: each
 * tile gets the addend once its last k block is stored (the epilogue), so
 * C equals the product followed by an elementwise add bit for bit.
 * With relu set, each C(i, j) then becomes (C(i, j) < 0 ? 0 : C(i, j)) in
 * the same epilogue: the RELU op's rule (NaN and -0 pass), bit for bit.
 */
typedef struct nb_gemm {
    nb_dtype dt;
    int64_t m, n, k;
    const void *a;
    int64_t ars, acs;
    const void *b;
    int64_t brs, bcs;
    void *c;
    int64_t ldc;
    const nb_gemm_codes *ca, *cb;
    const void *add;
    int64_t adrs, adcs;
    bool relu;
} nb_gemm;

/** Pack rows r0 .. r0+len of a codes operand, columns p0 .. p0+kc, decoded, as the GEMM's
 *  panels of w rows: dst[(i / w) * w * kc + p * w + i % w], zeros past len (quant.c). */
void nb__gemm_pack_codes(const nb_gemm_codes *c, float *dst, int64_t r0, int64_t len, int64_t p0, int64_t kc, int w);

/** Whether a batch of `items` products (matmul's batch items, conv2d's images) runs one item per
 *  thread with single-threaded GEMMs — enough items, split evenly or many — rather than the items
 *  in turn with the threads inside each GEMM.  Either way the results are the same. */
static inline bool nb__gemm_over_items(int64_t items, int threads) {
    return threads > 1 && items >= threads && (items % threads == 0 || items >= 4 * (int64_t)threads);
}

/** Bytes of workspace one thread of nb__gemm needs for g's sizes and dtype. */
size_t nb__gemm_ws_size(const nb_gemm *g);

/**
 * Compute g on up to `threads` threads of the pool (1: the calling thread
 * only).  ws holds threads * nb__gemm_ws_size(g) bytes, 64-byte aligned.
 * K is never split across threads and the blocking does not depend on the
 * thread count, so C is bitwise identical for every `threads`.
 */
void nb__gemm(const nb_gemm *g, void *ws, int threads);

#endif
