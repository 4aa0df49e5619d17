/*
 * backend.h — the backend seam: the table of kernels every device fills in.
 *
 * Front-ends (src/ops) do all validation, shape and dtype inference, and
 * broadcasting before calling a kernel: operands arrive as views already
 * expanded to the output's shape (stride 0 on broadcast axes), in the dtype
 * the kernel computes in, and the output is freshly allocated on the same
 * device.  Kernels therefore never fail on user input; they return NB_OK or
 * an allocation / device error.
 */
#ifndef NB_BACKEND_H
#define NB_BACKEND_H

#include "../core/lowp.h"
#include "../ops/ops.h"

struct nb_fkernel; /* a fused kernel's program (fused.h) */

struct nb_backend {
    const char *name;
    nb_device_type type;
    /** dst = src elementwise (same shape, any strides incl. 0/negative), converting dtypes. */
    nb_status (*copy)(nb_tensor *dst, const nb_tensor *src);
    /** out = op(x; p0, p1); x has out's shape and (for FLOAT/SAME ops) out's dtype or a
     *  dtype converted on load. */
    nb_status (*unary)(nb_op op, nb_tensor *out, const nb_tensor *x, double p0, double p1);
    /** out = op(a, b); a, b have out's shape and share one compute dtype (out's dtype,
     *  except for BOOL-valued ops). */
    nb_status (*binary)(nb_op op, nb_tensor *out, const nb_tensor *a, const nb_tensor *b);
    /** out = c ? a : b; all shaped like out; a, b in out's dtype; c any dtype. */
    nb_status (*where)(nb_tensor *out, const nb_tensor *c, const nb_tensor *a, const nb_tensor *b);
    /** out (x's shape with reduced axes of size 1) = reduction of x over axes with mask[i].
     *  op: SUM, PROD, MAX, MIN (out dtype may differ from x's for SUM/PROD of ints),
     *  ARGMAX, ARGMIN (out i64; exactly one axis in mask). */
    nb_status (*reduce)(nb_op op, nb_tensor *out, const nb_tensor *x, const bool *mask);
    /** Inclusive scan (CUMSUM, CUMPROD) along axis; out shaped like x. */
    nb_status (*scan)(nb_op op, nb_tensor *out, const nb_tensor *x, int axis);
    /** out[..., m, n] = a[..., m, k] @ b[..., k, n]; equal batch shapes (stride 0 allowed);
     *  all of one float dtype; out contiguous. */
    nb_status (*matmul)(nb_tensor *out, const nb_tensor *a, const nb_tensor *b);
    /** out = a @ b + c, operands as matmul's and c shaped like out (any strides, 0 included):
     *  the product rounded to out's dtype, then c added once, then (relu) unary RELU — bit for
     *  bit matmul, binary ADD and unary RELU, which the front end runs instead where this is NULL. */
    nb_status (*matmul_add)(nb_tensor *out, const nb_tensor *a, const nb_tensor *b, const nb_tensor *c, bool relu);
    /** out[i..] = x[i.. with axis replaced by index[i..]]; index (i64) shaped like out;
     *  indices already validated in range. */
    nb_status (*gather)(nb_tensor *out, const nb_tensor *x, int axis, const nb_tensor *index);
    /** out[i.. with axis replaced by index[i..]] += src[i..]; index (i64) shaped like src. */
    nb_status (*scatter_add)(nb_tensor *out, int axis, const nb_tensor *index, const nb_tensor *src);
    /** Sliding 2-D windows (src/ops/conv.c); x and out contiguous, one float dtype; geometry w
     *  valid, output sizes OH/OW from nb__window_out:
     *   UNFOLD:       out [N, C*KH*KW, OH*OW] = im2col of x [N, C, H, W] (zero padding);
     *   FOLD:         out [N, C, H, W] = col2im of x [N, C*KH*KW, OH*OW] (overwrites out);
     *   MAX_POOL2D:   out [N, C, OH, OW] = window maxima of x [N, C, H, W]; idx (i64, out's
     *                 shape, written; NULL when not wanted) = flat h*W + w of the first maximum
     *                 (a NaN wins);
     *   MAX_UNPOOL2D: out [N, C, H, W] = zeros plus x [N, C, h, w] added at idx (i64, x's
     *                 shape, read); an index outside [0, H*W) is NB_ERR_INDEX with
     *                 nb__index_error's message naming the first one in idx's order (out's
     *                 contents then unspecified); w unused. */
    nb_status (*window)(nb_op op, nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w);
    /** Small dense linear algebra (src/ops/linalg.c) over a batch of matrices, every tensor f64
     *  and contiguous, a [batch, n, n] (batch: the product of the leading dims, 1 for none):
     *   CHOLESKY:         out [batch, n, n] = L, A = L L^T, L lower (zeros above);
     *   SOLVE_TRIANGULAR: out [batch, n, k] = op(A)^-1 b, b [batch, n, k]; A read as its
     *                     upper (NB_LA_UPPER in flags) or lower triangle, op(A) = A^T with
     *                     NB_LA_TRANS, a unit diagonal assumed with NB_LA_UNIT;
     *   SOLVE:            out [batch, n, k] = A^-1 b (LU with partial pivoting);
     *   SLOGDET:          out [batch] = log |det A|, out2 [batch] = sign(det A) (a singular A:
     *                     -inf, and a zero signed as the row swaps and pivots before the first
     *                     zero pivot make it, as LAPACK-based torch reports).
     *  info [batch] (i64) is written: 0, or j + 1 when matrix i has no result — a leading
     *  minor of order j + 1 that is not positive (CHOLESKY), a zero pivot in column j (SOLVE,
     *  SOLVE_TRIANGULAR); out's values for that matrix are then unspecified. */
    nb_status (*linalg)(nb_op op, int flags, const nb_tensor *a, const nb_tensor *b, nb_tensor *out,
                        nb_tensor *out2, nb_tensor *info);
    /** out [B, Hq, Lq, Dv] = softmax(scale · q kᵀ, masked) v for contiguous q [B, Hq, Lq, D],
     *  k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] and out, all f32 or all f64; query head h reads key
     *  head h / (Hq / Hkv).  mask: NB_ATTN_MASK_NONE, CAUSAL (key j <= query i) or SLIDING
     *  (i - window < j <= i); a query without keys gets zeros.  lse [B, Hq, Lq] (out's dtype)
     *  gets each query's log Σ_j exp(scale · q·k_j) over the keys it sees (-inf for none).  NULL:
     *  the backend has none (the op is then computed from its parts). */
    nb_status (*attention)(nb_tensor *out, nb_tensor *lse, const nb_tensor *q, const nb_tensor *k,
                           const nb_tensor *v, int mask, int64_t window, double scale);
    /** The gradients dq, dk, dv (shaped like q, k, v; every element written) of attention's out
     *  with gradient dout, from in = {q, k, v, out, dout, lse} (contiguous, one float dtype), the
     *  same mask, window and scale as the forward: P = exp(scale q kᵀ − lse), dV = Pᵀ dout,
     *  dS = P ⊙ (dout vᵀ − rowsum(dout ⊙ out)), dQ = scale dS k, dK = scale dSᵀ q (the query
     *  heads of a key head summed).  Required with attention. */
    nb_status (*attention_backward)(nb_tensor *dq, nb_tensor *dk, nb_tensor *dv, const nb_tensor *const *in,
                                    int mask, int64_t window, double scale);
    /** conv2d image by image (src/ops/convolution.c), every tensor contiguous, all f32 or all
     *  f64, geometry valid for x [N, C, H, W] and w [O, C/groups, KH, KW] with OH/OW from
     *  nb__window_out and L = OH*OW, K = C/groups*KH*KW: y [N, O, OH, OW] = the
     *  cross-correlation of x with w plus b [O] (NULL: none) — for each image n and group q,
     *  y[n, q] = w[q] as [O/groups, K] times unfold(x)[n, q] as [K, L], b added as matmul_add
     *  adds it, then (relu) RELU applied as matmul_add does, bit for bit as matmul_add and window
     *  (UNFOLD) compute it.  NULL: the backend has none (conv2d then runs that composite). */
    nb_status (*conv2d)(nb_tensor *y, const nb_tensor *x, const nb_tensor *w, const nb_tensor *b,
                        const nb_window2d *win, int64_t groups, bool relu);
    /** conv2d's gradients from g [N, O, OH, OW] (contiguous, x's dtype; with y, the same shape and
     *  dtype, not NULL: g where y is nonzero, else 0 — relu's derivative), each NULL when not wanted:
     *  dx [N, C, H, W] = fold of w[q]ᵀ g[n, q] per image and group, and dwi [N, groups, O/groups, K]
     *  = g[n, q] unfold(x)[n, q]ᵀ per image and group (the caller sums over N) — bit for bit as
     *  matmul and window (UNFOLD, FOLD) compute them; db [O] (asked for only where
     *  nb__conv_db_in_kernel(O, L)) = g summed over images and positions, bit for bit as `reduce`
     *  sums it over axes (0, 2, 3).  Required with conv2d. */
    nb_status (*conv2d_backward)(nb_tensor *dx, nb_tensor *dwi, nb_tensor *db, const nb_tensor *x, const nb_tensor *w,
                                 const nb_tensor *g, const nb_tensor *y, const nb_window2d *win, int64_t groups);
    /** Low-precision codes (O10; src/ops/quant.c): contiguous tensors of `rows` rows, each row
     *  described by r (format, layout, logical K, the TENSOR or NVFP4 global scale; see lowp.h).
     *  quantize:   x f32 [rows, K] -> codes u8 [rows, K·bits/8] (packed), scales u8
     *              [rows, K/block] (MX, NVFP4; NULL for TENSOR), by nb__lowp_quantize_row's rule;
     *  dequantize: codes, scales (NULL for TENSOR) -> out f32 [rows, K] = decode · scale;
     *  scaled_matmul: out f32 [ma, nb] = A Bᵀ with A [ma, K] from (a, as, ra) and B [nb, K] from
     *              (b, bs, rb), accumulated in float32 (the reference: in double).
     *  NULL: the backend has none (the ops are then unsupported on it). */
    nb_status (*quantize)(const nb_lowp_row *r, int64_t rows, const nb_tensor *x, nb_tensor *codes, nb_tensor *scales);
    nb_status (*dequantize)(const nb_lowp_row *r, int64_t rows, const nb_tensor *codes, const nb_tensor *scales,
                            nb_tensor *out);
    nb_status (*scaled_matmul)(const nb_lowp_row *ra, int64_t ma, const nb_tensor *a, const nb_tensor *as,
                               const nb_lowp_row *rb, int64_t nb, const nb_tensor *b, const nb_tensor *bs,
                               nb_tensor *out);
    /** Run the fused kernel k (fused.h) over the domain shape[ndim]: in[0..k->nin) are its loads
     *  and out[0..k->nout) its outputs (fresh; each output's own elements written), every one
     *  viewed with the domain's shape (stride 0 along broadcast axes, so a ROW output is constant
     *  along the inner axes and a UNIFORM one everywhere).  NB_OK, NB_ERR_OOM, or
     *  NB_ERR_UNSUPPORTED (no error recorded) when this call cannot run it — the executor then
     *  runs the kernel's ops one by one.  On NB_OK *ran says how (fused.h's nb_fk_ran).  NULL: the
     *  backend does not fuse (plans run op by op). */
    nb_status (*fused)(const struct nb_fkernel *k, const int64_t *shape, int ndim, nb_tensor *const *in,
                       nb_tensor *const *out, int *ran);
    /** How fused runs kernels, one line of static text starting "on: " (nb_fusion_mode); NULL where
     *  fused is. */
    const char *(*fused_mode)(void);
};

/** SOLVE_TRIANGULAR's flags (the LINALG backend entry and its attrs.sub). */
enum { NB_LA_UPPER = 1, NB_LA_TRANS = 2, NB_LA_UNIT = 4 };

/** Output length of a window along one axis: floor((in + 2 pad - dil (k - 1) - 1) / stride) + 1. */
static inline int64_t nb__window_out(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    int64_t span = in + 2 * pad - dil * (k - 1) - 1;
    return span < 0 ? 0 : span / stride + 1;
}

/** The CPU `reduce` sums (max, min) a contiguous run of at least this many float elements by the
 *  typed pairwise (vector) kernel, shorter ones element by element (cpu_backend.c runs_path). */
enum { NB_REDUCE_RUN_MIN = 8 };

/** Whether conv2d_backward computes the bias gradient of a g with O channels over L positions:
 *  where `reduce` over axes (0, 2, 3) of a contiguous g sums one run of L per image and channel
 *  and adds the runs in image order (O > 1: a single output sums everything in chunks). */
static inline bool nb__conv_db_in_kernel(int64_t O, int64_t L) { return O > 1 && L >= NB_REDUCE_RUN_MIN; }

extern const nb_backend nb__cpu_backend;
extern const nb_backend nb__ref_backend;

/** Backend of a tensor's device (never NULL for host devices); NULL with NB_ERR_DEVICE. */
const nb_backend *nb__backend_of(const nb_tensor *t);

#endif
