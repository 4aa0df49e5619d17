/*
 * kernels.h — the CPU backend's per-ISA kernel table.  kern_template.c is
 * compiled once per instruction set (kern_scalar.c, kern_avx2.c,
 * kern_avx512.c) and each copy fills one table; dispatch.c picks the best
 * table the running CPU supports.
 */
#ifndef NB_CPU_KERNELS_H
#define NB_CPU_KERNELS_H

#include "../../ops/ops.h"

/** Elementwise loops over n elements with BYTE strides; dtype slot 0 = f32, 1 = f64. */
typedef void (*nb_k_unary)(int64_t n, char *o, int64_t os, const char *x, int64_t xs, double p0,
                           double p1);
typedef void (*nb_k_binary)(int64_t n, char *o, int64_t os, const char *a, int64_t as,
                            const char *b, int64_t bs);

typedef struct nb_cpu_kernels {
    const char *isa;
    nb_k_unary unary[NB_OP_COUNT][2];
    nb_k_binary binary[NB_OP_COUNT][2];
    /** Sum of n contiguous values, pairwise over blocks, accumulated in double. */
    double (*sum_f32)(int64_t n, const float *x);
    double (*sum_f64)(int64_t n, const double *x);
    /** acc[j] += x[j] for j < n (column accumulation; acc in double). */
    void (*acc_f32)(int64_t n, double *acc, const float *x);
    void (*acc_f64)(int64_t n, double *acc, const double *x);
    /** C[m,n] (+)= A[m,k] B[k,n] on packed-free row-major panels (see gemm.c). */
    void (*gemm_f32)(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c, int64_t ldc, bool accumulate);
} nb_cpu_kernels;

extern const nb_cpu_kernels nb__kernels_scalar, nb__kernels_avx2, nb__kernels_avx512;

/** The table for this CPU (chosen once, at first use). */
const nb_cpu_kernels *nb__cpu_kernels(void);

#endif
