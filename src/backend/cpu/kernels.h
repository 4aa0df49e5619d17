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

/**
 * One dtype's GEMM register tile and the packing that feeds it.  Element
 * strides; T is float or double.
 *  - pack(dst, src, rs, ps, len, kc): copy the len x kc block
 *    X(r, p) = src[r*rs + p*ps] into ceil(len/R) panels dst[panel][p][r] of
 *    R = mr (pack_a) or nr (pack_b) rows, zero-padded past len.
 *  - tile(kc, a, b, ldb, c, ldc, accumulate): C[mr x nr] (rows ldc apart) =
 *    (accumulate ? C : 0) + sum over p < kc of a[p][i] * b[p*ldb + j] from
 *    one packed A panel and nr contiguous B values per step, ldb apart (a
 *    packed B panel: ldb = nr), kc >= 1.
 *  - tile_half: the same for the mr x nr/2 tile of the first nr/2 columns
 *    (a ragged last panel of at most nr/2 columns: half the FMAs).
 */
typedef struct nb_gemm_kern {
    int mr, nr;
    void (*pack_a)(void *dst, const void *src, int64_t rs, int64_t ps, int64_t len, int64_t kc);
    void (*pack_b)(void *dst, const void *src, int64_t rs, int64_t ps, int64_t len, int64_t kc);
    void (*tile)(int64_t kc, const void *a, const void *b, int64_t ldb, void *c, int64_t ldc,
                 bool accumulate);
    void (*tile_half)(int64_t kc, const void *a, const void *b, int64_t ldb, void *c, int64_t ldc,
                      bool accumulate);
} nb_gemm_kern;

/**
 * Mask kernels over n CONTIGUOUS elements (kern_mask_template.c); the CPU
 * backend stages strided and broadcast operands.  An element is true when
 * (its bits & mask) != 0; nb__truth_mask gives the mask of a dtype.
 *  - where: o = c ? a : b, bit copies of the element size;
 *  - compare: o = a OP b as 0/1 bytes, a and b of one dtype;
 *  - logic: o = a OP b on truth values as 0/1 bytes (NOT ignores b).
 */
typedef void (*nb_k_where)(int64_t n, void *o, const void *c, uint64_t cmask, const void *a, const void *b);
typedef void (*nb_k_compare)(int64_t n, uint8_t *o, const void *a, const void *b);
typedef void (*nb_k_logic)(int64_t n, uint8_t *o, const void *a, const void *b, uint64_t mask);

/** Rows of the logic table. */
enum { NB_LOGIC_AND, NB_LOGIC_OR, NB_LOGIC_XOR, NB_LOGIC_NOT, NB_LOGIC_COUNT };

/** The bits of a dtype-dt element that make it nonzero: all but a float's sign bit. */
static inline uint64_t nb__truth_mask(nb_dtype dt) {
    switch (dt) {
    case NB_F32: return 0x7fffffffu;
    case NB_F64: return 0x7fffffffffffffffu;
    case NB_F16: case NB_BF16: return 0x7fffu;
    default: return ~(uint64_t)0;
    }
}

/** log2 of an element size of 1, 2, 4 or 8 bytes. */
static inline int nb__size_log2(size_t es) { return es == 1 ? 0 : es == 2 ? 1 : es == 4 ? 2 : 3; }

typedef struct nb_cpu_kernels {
    const char *isa;
    nb_k_unary unary[NB_OP_COUNT][2];
    nb_k_binary binary[NB_OP_COUNT][2];
    /** Sum of n contiguous values, pairwise over blocks, accumulated in double. */
    double (*sum_f32)(int64_t n, const float *x);
    double (*sum_f64)(int64_t n, const double *x);
    /** acc[j] += sum over r < rows of x[r*ld + j], j < n (column sums in double; rows
     *  are added four at a time, ((x0 + x1) + (x2 + x3)), then one by one). */
    void (*acc_f32)(int64_t n, int64_t rows, int64_t ld, double *acc, const float *x);
    void (*acc_f64)(int64_t n, int64_t rows, int64_t ld, double *acc, const double *x);
    /** [0] min, [1] max of n >= 1 contiguous values (NaN if any is NaN); dtype slot second. */
    double (*extreme[2][2])(int64_t n, const void *x);
    /** GEMM building blocks (kern_gemm_template.c), driven by gemm.c; slot 0 = f32, 1 = f64. */
    nb_gemm_kern gemm[2];
    /** Mask kernels: where by [log2 element size][log2 condition size], compare by
     *  [op - NB_OP_EQ][dtype] (NULL for f16 / bf16), logic by [NB_LOGIC_*][log2 size]. */
    nb_k_where where[4][4];
    nb_k_compare compare[6][NB_DTYPE_COUNT];
    nb_k_logic logic[NB_LOGIC_COUNT][4];
    /** 2x2 / stride-2 max pooling of one f32 output row of n with its int64 argmax positions in
     *  the plane at x (row length W; the row's taps start at x + first), by conv_kernels.c's
     *  rule (kern_pool_template.c); NULL where the ISA has none (the plane loop runs instead). */
    void (*pool2x2_idx)(const float *x, int64_t first, int64_t W, int64_t n, float *out, int64_t *idx);
} nb_cpu_kernels;

extern const nb_cpu_kernels nb__kernels_scalar, nb__kernels_avx2, nb__kernels_avx512;

/** The reduction cpu_reduce makes of each output whose reduced elements form one contiguous
 *  run of n of dtype dt (f32 or f64) at p: SUM / MAX / MIN by the typed kernel from
 *  n >= NB_REDUCE_RUN_MIN, else (and PROD) element by element in double from op's start.  Shared
 *  with fused kernels, so a fused reduction gives the eager bits. */
double nb__cpu_reduce_contig(nb_op op, nb_dtype dt, int64_t n, const void *p);
/** nb__cpu_reduce_contig of g runs of n, the run r at x + r xs bytes, its result stored (as dtype
 *  odt) at out + r os bytes: the same bits, the kernel chosen once for the g rows. */
void nb__cpu_reduce_rows(nb_op op, nb_dtype dt, int64_t n, int64_t g, const char *x, int64_t xs, char *out, int64_t os,
                         nb_dtype odt);
/** Move n elements of es bytes between the contiguous buffer buf and p (byte stride s, 0 and
 *  negative included): into buf when gather, out of it otherwise (typed copies). */
void nb__cpu_stage_move(bool gather, char *buf, char *p, int64_t s, int64_t n, size_t es);
/** Should a call whose outputs total out_bytes write them with nb__cpu_stream_store?  True past
 *  the L2 caches of the threads running it (stream.c says why), or past the bytes the tests set
 *  with nb__cpu_stream_set_min (-1: back to that default). */
bool nb__cpu_stream_worth(int64_t out_bytes);
void nb__cpu_stream_set_min(int64_t bytes);
/** Copy n bytes from src (a block in L1) to dst with non-temporal stores (ordinary ones at the
 *  unaligned ends).  The stores are weakly ordered: the thread calls nb__cpu_stream_fence before
 *  anything else may read dst (before it reports its part of a parallel loop done). */
void nb__cpu_stream_store(char *dst, const char *src, size_t n);
void nb__cpu_stream_fence(void);
/** The mask kernel of op (where, a comparison or a logical op) on n CONTIGUOUS elements: o (dtype
 *  odt) from in[0..nin) — where: condition (dtype idt), a, b; comparison: a, b of dtype idt;
 *  logical: a (and b) of dtype idt.  What the backend's where / binary / unary entries run. */
void nb__cpu_mask(nb_op op, int64_t n, void *o, nb_dtype odt, nb_dtype idt, const char *const *in, int nin);
/** n elements of dtype src at x (byte stride xs) converted to dtype dst at o (stride os), as
 *  the backend's copy does (nb_cast). */
void nb__cpu_convert_row(int64_t n, nb_dtype dst, char *o, int64_t os, nb_dtype src, const char *x, int64_t xs);

/** Fused kernels (fused.c: compiled at run time by jit.c where it can, else interpreted): the
 *  backend's `fused` entry (backend.h). */
struct nb_fkernel;
nb_status nb__cpu_fused(const struct nb_fkernel *k, const int64_t *shape, int ndim, nb_tensor *const *in,
                        nb_tensor *const *out, int *ran);

/** The table for this CPU (chosen once, at first use). */
const nb_cpu_kernels *nb__cpu_kernels(void);
/** The table NB_SIMD and the running CPU select (warns on stderr about an invalid NB_SIMD); exposed for tests. */
const nb_cpu_kernels *nb__cpu_kernels_choose(void);

#endif
