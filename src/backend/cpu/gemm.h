/* gemm.h — the CPU backend's GEMM: C = A B for f32/f64 with any operand strides (gemm.c). */
#ifndef NB_CPU_GEMM_H
#define NB_CPU_GEMM_H

#include "../../core/internal.h"

/**
 * One product C[m x n] = A[m x k] B[k x n] (alpha = 1, beta = 0: C is
 * overwritten).  A(i, p) = a[i*ars + p*acs], B(p, j) = b[p*brs + j*bcs]
 * (element strides: any value, including 0 and negative); C(i, j) =
 * c[i*ldc + j] (contiguous rows).  dt is NB_F32 or NB_F64 for all three.
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
} nb_gemm;

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
