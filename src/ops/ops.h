/*
 * ops.h — the op enumeration and the op-table record, both expanded from
 * ops.def, plus the internal entry points the public op functions share.
 */
#ifndef NB_OPS_H
#define NB_OPS_H

#include "../core/internal.h"
#include "op_scalar.h"

typedef struct nb_backend nb_backend;

typedef enum nb_op {
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_OP_##E,
#include "ops.def"
#undef NB_OP
    NB_OP_COUNT
} nb_op;

typedef enum nb_op_kind {
    NB_KIND_UNARY, NB_KIND_BINARY, NB_KIND_WHERE, NB_KIND_REDUCE, NB_KIND_ARGREDUCE,
    NB_KIND_SCAN, NB_KIND_MATMUL, NB_KIND_GATHER, NB_KIND_SCATTER_ADD, NB_KIND_COPY,
    NB_KIND_VIEW, NB_KIND_VIEW_GRAD, NB_KIND_PAD, NB_KIND_CAT, NB_KIND_COMPOSITE, NB_KIND_WINDOW,
    NB_KIND_SIZE, NB_KIND_RANDOM, NB_KIND_LINALG, NB_KIND_ATTENTION, NB_KIND_QUANT,
    NB_KIND_CONV,
    NB_KIND_COUNT
} nb_op_kind;

typedef enum nb_grad_kind { NB_GRAD_RULE, NB_GRAD_NONE, NB_GRAD_COMPOSITE, NB_GRAD_KIND_COUNT } nb_grad_kind;

typedef enum nb_dtype_rule {
    NB_DT_SAME, NB_DT_FLOAT, NB_DT_BOOL, NB_DT_PROMOTE, NB_DT_FPROMOTE, NB_DT_I64, NB_DT_NA,
    NB_DT_RULE_COUNT
} nb_dtype_rule;

/** Where a reduction or scan starts (ops.def's ident column); NA for other kinds. */
typedef enum nb_ident { NB_IDENT_NA, NB_IDENT_ZERO, NB_IDENT_ONE, NB_IDENT_LOWEST, NB_IDENT_HIGHEST, NB_IDENT_COUNT } nb_ident;

/**
 * Vector-Jacobian product of one recorded node: given the gradient g of the
 * node's output, write a new reference (or NULL for "no gradient") for each
 * input i into gin[i].  Shapes/dtypes of gin may be broadcast-compatible
 * with the input: the engine sums broadcast axes away and casts.  A rule
 * must give gin[i] for every input with nb_requires_grad(in[i]) (others it
 * may skip), and use only public ops and metadata: nb_graph_grad runs it on
 * symbolic inputs (no data) under the graph's trace.
 */
typedef nb_status (*nb_vjp_fn)(const nb_node *node, nb_tensor *g, nb_tensor **gin);

typedef struct nb_op_info {
    const char *name;
    nb_op_kind kind;
    nb_grad_kind grad;
    nb_dtype_rule dtype_rule;
    nb_vjp_fn vjp;  /* non-NULL exactly when grad == NB_GRAD_RULE */
    bool int_exact; /* iexpr is INT(…): exact int64 evaluation on integer and bool operands */
    nb_ident ident; /* REDUCE / SCAN: the starting value */
} nb_op_info;

extern const nb_op_info nb__ops[NB_OP_COUNT];

/* ---- the one dispatch point (src/ops/dispatch.c) ------------------------
 * Every primitive op (every kind but COMPOSITE) is an `infer` rule plus an
 * `execute` step, found through its kind in nb__kinds.  A public op calls
 * nb__apply, which infers the outputs from metadata alone and hands the op
 * to the interpreter on top of this thread's stack: none means eager
 * (execute, then record the tape node), a trace interpreter appends a graph
 * node instead.  Composite ops are written with public ops and so reach the
 * same point for each primitive they use. */

#define NB_MAX_OUTS 3

/** Metadata of one op result, from an infer rule (no data access). */
typedef struct nb_meta {
    nb_dtype dtype;
    int ndim;
    bool weak;                  /* still a wrapped C number (weak scalar op weak scalar) */
    nb_dtype compute;           /* the dtype the kernel computes in, where the kind needs one */
    int64_t shape[NB_MAX_DIMS]; /* may hold symbolic dims while tracing */
} nb_meta;

/**
 * Validate the inputs and attrs of op (attrs normalized in place: axes made
 * non-negative, -1 sizes resolved, …, so that inferring again from the
 * normalized attrs gives the same result) and fill meta[0..nout) from
 * shapes and dtypes only, never data.  Returns nout (>= 1), or -1 with a
 * typed error naming the op.  Inputs may be symbolic; NULL inputs are
 * rejected by the front-end before.  attrs is NULL for ops without
 * attributes, else the caller's own (zero-initialized, then filled) record.
 */
typedef int (*nb_infer_fn)(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *meta);
/**
 * Compute op on concrete inputs (as validated by infer) into fresh,
 * unscoped, untracked results out[0..nout) of the inferred metadata.
 * Checks that need data (index ranges) are made here, with typed errors.
 * On failure nothing is left in out.
 */
typedef nb_status (*nb_execute_fn)(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                                   const nb_meta *meta, int nout, nb_tensor **out);

typedef struct nb_kind_impl {
    nb_infer_fn infer;
    nb_execute_fn execute;
} nb_kind_impl;

/** The infer / execute pair of each op kind (COMPOSITE: none). Defined in the
 *  file of that kind (nb__kind_<kind>). */
extern const nb_kind_impl *const nb__kinds[NB_KIND_COUNT];

/** An interpreter of ops (eager is the absence of one). */
typedef struct nb_interp nb_interp;
struct nb_interp {
    const char *name;
    /** Apply op (already inferred: meta[0..nout)) to in[0..n); write nout new unscoped
     *  references to out.  Returns NB_OK or an error (nothing left in out). */
    nb_status (*apply)(nb_interp *self, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                       const nb_meta *meta, int nout, nb_tensor **out);
    nb_interp *below; /* the next interpreter down this thread's stack (set by push) */
};
/** Push / pop an interpreter on this thread's stack (pop must be of the top one). */
void nb__interp_push(nb_interp *it);
void nb__interp_pop(nb_interp *it);
/** The interpreter on top of this thread's stack, NULL for eager. */
nb_interp *nb__interp_top(void);
/** The interpreter a symbolic tensor outside any trace uses (eval mode; NULL: not lazy). */
extern nb_interp *(*nb__lazy_interp)(nb_tensor *t);

/**
 * THE dispatch point: infer op on in[0..n) with attrs (NULL: none; else the
 * caller's zero-initialized record, which infer may normalize), then apply
 * it through the current interpreter.  Writes up to NB_MAX_OUTS
 * unscoped results to out and returns their count, or -1 (error set, out
 * untouched).
 */
int nb__apply_n(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_tensor **out);
/** nb__apply_n for single-output ops: the unscoped result or NULL (error set). */
nb_tensor *nb__apply(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs);
/** Eager application with inferred meta: execute, then record on the tape when recording
 *  and an input is tracked (multi-output ops record out[0], whose node has out[1..nout)
 *  appended to its inputs for the derivative rule). The executor uses it too. */
nb_status nb__eager_apply(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *meta,
                          int nout, nb_tensor **out);
/** A fresh concrete tensor for meta on dev (contiguous, uninitialized). Unscoped. */
nb_tensor *nb__meta_new(const nb_meta *m, nb_device dev);
/** An execute step's operands for a backend kernel: t[i] the dense form (nb__dense) of in[i] (NULL
 *  where in[i] is), r[j] a fresh output for m[j] on in[0]'s device.  NB_OK or the first error (the
 *  rest NULL); nb__exec_end releases them either way. */
nb_status nb__exec_begin(nb_tensor *const *in, int n, const nb_meta *m, int nout, nb_tensor **t, nb_tensor **r);
/** The end of that step with the kernel's status st: t[0..n) released; out[j] = r[j] when st is
 *  NB_OK, else NULL with r[j] released.  Returns st. */
nb_status nb__exec_end(nb_status st, nb_tensor **t, int n, nb_tensor **r, int nout, nb_tensor **out);
/** Make the next nb__meta_new on this thread for a result of meta m (dtype and shape equal) a
 *  contiguous view of s at byte_offset (a memory plan's arena, src/compile/plan.c) instead of a
 *  fresh buffer; s NULL cancels.  One result, then the redirect is gone. */
void nb__meta_redirect(nb_storage *s, size_t byte_offset, const nb_meta *m);
/** meta from a tensor's dtype and shape (weak flag included). */
void nb__meta_of(nb_meta *m, const nb_tensor *t);

/** A comparison (eq .. ge, consecutive in ops.def: a bool result from two operands of one dtype)? */
static inline bool nb__op_is_compare(nb_op op) { return op >= NB_OP_EQ && op <= NB_OP_GE; }
/** A logical op (and, or, xor, not: a bool result from the operands' truth values)? */
static inline bool nb__op_is_logic(nb_op op) {
    return op == NB_OP_LOGICAL_AND || op == NB_OP_LOGICAL_OR || op == NB_OP_LOGICAL_XOR || op == NB_OP_LOGICAL_NOT;
}

/** Does op's result share its first input's storage (a view), or may it (a copy that returns
 *  its input when nothing needs converting)? */
static inline bool nb__op_aliases_input(nb_op op) {
    return nb__ops[op].kind == NB_KIND_VIEW || nb__ops[op].kind == NB_KIND_COPY;
}

/* ---- shared internal entry points (src/ops/) ---- */

/** Result dtype of a unary op on dt. */
nb_dtype nb__unary_dtype(nb_op op, nb_dtype dt);
/** Unary elementwise op with parameters p0, p1 (unscoped result). */
nb_tensor *nb__unary(nb_op op, nb_tensor *x, double p0, double p1);
/** Binary elementwise op with broadcasting and promotion (unscoped result). */
nb_tensor *nb__binary(nb_op op, nb_tensor *a, nb_tensor *b);
/** A weak rank-0 f64 scalar (a wrapped C floating-point number) on dev. */
nb_tensor *nb__weak_scalar(double v, nb_device dev);
/** A weak rank-0 i64 scalar holding v exactly (a C integer: converts into an operand's
 *  integer dtype wrapping around, as torch). */
nb_tensor *nb__weak_int(int64_t v, nb_device dev);
/** Sum g over broadcast axes so that it has `shape` (the adjoint of broadcasting). Unscoped. */
nb_tensor *nb__sum_to(nb_tensor *g, const int64_t *shape, int ndim);
/** Rebuild a recorded view (op, attrs) on base; used by the view adjoints. Unscoped. */
nb_tensor *nb__apply_view(nb_op op, nb_tensor *base, const nb_attrs *attrs);
/** Reduction front-end shared by sum/prod/max/min (unscoped). */
nb_tensor *nb__reduce(nb_op op, nb_tensor *x, const int *axes, int naxes, bool keepdim);
/** Normalize an axis list into a mask; returns the count or -1 (error set). axes NULL = all. */
int nb__axes_mask(const char *op, const int *axes, int naxes, int ndim, bool *mask);
/** nb__reduced_count's result when a counted size is symbolic (and none is 0). */
#define NB_COUNT_SYMBOLIC (-2)
/** Number of elements of x a reduction over (axes, naxes) (NULL: all) combines; NB_COUNT_SYMBOLIC
 *  when it depends on a symbolic dim (count it with nb__numel_of), -1 on bad axes (error naming op). */
int64_t nb__reduced_count(const char *op, nb_tensor *x, const int *axes, int naxes);
/** The NUMEL op: a scoped rank-0 weak f64 tensor holding the number of elements of x over axes
 *  (NULL: all), taken from x's shape when it is computed (so symbolic dims count at run time). */
nb_tensor *nb__numel_of(nb_tensor *x, const int *axes, int naxes);


/* ---- composite ops: build the result from public ops inside a private
 * scope, then hand the one result to the caller's scope (or caller). ---- */
#define NB_COMPOSITE_BEGIN() nb_scope_begin()
#define NB_COMPOSITE_RETURN(r)                                                  \
    do {                                                                        \
        nb_tensor *r_ = nb__scope_take(r);                                      \
        nb_scope_end();                                                         \
        return nb__own(r_);                                                     \
    } while (0)

/*
 * Half-precision "opmath" (PyTorch's acc_type / opmath_type): composites that
 * reduce or normalize (mean, var, std, logsumexp, norm, softmax,
 * log_softmax, layer_norm, rms_norm) compute f16 and bf16 inputs in f32 and
 * round once at the end, so sums of squares and means of large halves do not
 * overflow to inf.  NB_OPMATH(x) rebinds x (inside NB_COMPOSITE_BEGIN) to its
 * f32 form, recorded like any cast; NB_OPMATH_RETURN(r, dt) returns r in dt.
 */
#define NB_OPMATH(x)                                                            \
    nb_dtype opmath_dt_ = (x)->dtype;                                           \
    if (opmath_dt_ == NB_F16 || opmath_dt_ == NB_BF16) (x) = nb_cast((x), NB_F32)
#define NB_OPMATH_RETURN(r) NB_COMPOSITE_RETURN(nb_cast((r), opmath_dt_))

/** Backend shared by all operands (same device); NULL with NB_ERR_DEVICE naming op. */
const nb_backend *nb__backend_common(const char *op, nb_tensor *const *ts, int n);
/** Unscoped conversion of t to dt (new reference; t itself retained when equal). Not recorded. */
nb_tensor *nb__to_dtype(nb_tensor *t, nb_dtype dt);
/** Unscoped expand view of t to shape (no checks beyond broadcast compatibility). Not recorded. */
nb_tensor *nb__expand_raw(nb_tensor *t, const int64_t *shape, int ndim);
/** t (rank >= 2) viewed with the batch dims bat[0..nbat) before its last two (stride 0 where
 *  broadcast), or t itself retained.  Unscoped, not recorded.  (matmul and the LINALG ops.) */
nb_tensor *nb__batch_expand(nb_tensor *t, const int64_t *bat, int nbat);
/** Check attention options (mask kind, window, scale, soft-cap); false with NB_ERR_ARG naming op. */
bool nb__attention_opts_ok(const char *op, const nb_attention_opts *o);
/** [n] of dtype dt on like's device: start, start + 1, … (n may be symbolic).  Scoped, recorded. */
nb_tensor *nb__positions(const nb_tensor *like, int64_t n, double start, nb_dtype dt);
/** [rows, cols] i64 on like's device: column index minus row index, j - i (the diagonal offsets that
 *  tril, triu and the causal and sliding-window masks compare; sizes may be symbolic).  Scoped. */
nb_tensor *nb__index_diff(const nb_tensor *like, int64_t rows, int64_t cols);
/** x times the attention scale of q [B, H, L, D]: scale, or 0 for 1/sqrt(D) (a symbolic D counted
 *  when the graph runs).  Scoped, recorded. */
nb_tensor *nb__attention_scaled(nb_tensor *x, nb_tensor *q, double scale);
/** The attention probabilities [B, Hq, Lq, Lk] of q [B, Hq, Lq, D] against k [B, Hkv, Lk, D]
 *  (q's dtype) under o: scaled, capped, masked, a query without keys all zeros.  Scoped, recorded;
 *  NULL with the error (a bad mask tensor).  The composite attention and the ATTENTION rule. */
nb_tensor *nb__attention_probs(nb_tensor *q, nb_tensor *k, const nb_attention_opts *o);
/** x itself (retained) when contiguous, else a contiguous copy of it (unscoped, not recorded);
 *  NULL with the error. */
nb_tensor *nb__dense(nb_tensor *x);
/** nb_attrs.sub of ADDMM and CONVOLUTION: relu applied to the result (a layer's activation, in
 *  the kernel's epilogue where the backend has one), bit for bit the RELU op after the op. */
#define NB_SUB_RELU 1
/** nb_attrs.sub of CONVOLUTION_BACKWARD: its 4th input y (the relu'd forward output) masks g —
 *  relu's derivative, g where y is nonzero (nb__relu_grad), taken as each image's g is read. */
#define NB_SUB_CONVB_RELU 8
/** The label of an op node with attrs a, into buf (n bytes; returns buf): the op's name, with
 *  "+relu" where sub fuses relu into an ADDMM or CONVOLUTION, and a CONVOLUTION_BACKWARD's outputs
 *  "(dx, dwi, db)" (those it has), then " of relu" when g is masked by the relu'd output.  For
 *  DOT text and reports. */
const char *nb__op_label(nb_op op, const nb_attrs *a, char *buf, size_t n);
/** nb_addmm(c, a, b), and with relu its relu as the one ADDMM with NB_SUB_RELU (operands as
 *  nb_addmm's; scoped result, NULL with the error).  The product of linear and of the conv
 *  composite, relu'd for nb__linear_relu and nb__conv2d_relu. */
nb_tensor *nb__addmm_act(nb_tensor *c, nb_tensor *a, nb_tensor *b, bool relu);
/** relu(nb_linear(x, w, bias)), bit for bit, with relu in the product's epilogue where linear adds
 *  its bias there (errors as nb_linear's).  What a Sequential runs for Linear then ReLU. */
nb_tensor *nb__linear_relu(nb_tensor *x, nb_tensor *w, nb_tensor *bias);
/** relu(nb_conv2d(x, w, bias, opts)), bit for bit, relu in the GEMMs' epilogue (errors as
 *  nb_conv2d's).  What a Sequential runs for Conv2d then ReLU. */
nb_tensor *nb__conv2d_relu(nb_tensor *x, nb_tensor *w, nb_tensor *bias, nb_conv2d_opts opts);
/** Whether nb_conv2d runs x [N, C, H, W] * w (+ b) as the CONVOLUTION op (convolution.c), eager or
 *  traced: f32 or f64, one backend that has the kernels, every size concrete but x's batch N. */
bool nb__convolution_fits(const nb_tensor *x, const nb_tensor *w, const nb_tensor *b);
/** The CONVOLUTION op on operands nb_conv2d has checked, relu after where asked (scoped result;
 *  NULL with the error). */
nb_tensor *nb__convolution(nb_tensor *x, nb_tensor *w, nb_tensor *b, const nb_window2d *win, int64_t groups,
                           bool relu);
/** The identity matrices of a's batch ([..., n, n] for a [..., n, n]; symbolic sizes too), scoped,
 *  recorded (diag_embed of ones shaped like a's diagonal). */
nb_tensor *nb__eye_like(nb_tensor *a);
/** VIEW_GRAD forward: zeros(base_shape) with g copied into view (view_op, va). Unscoped, recorded. */
nb_tensor *nb__view_grad(nb_tensor *g, nb_op view_op, const nb_attrs *va, const int64_t *base_shape, int base_ndim);
/** A filled tensor on a device (unscoped). */
nb_tensor *nb__full_on(const int64_t *shape, int ndim, double v, nb_dtype dt, nb_device dev);
/** Unscoped where (used by derivative rules through nb_where). */
nb_tensor *nb__where(nb_tensor *c, nb_tensor *a, nb_tensor *b);
nb_tensor *nb__pad_constant(nb_tensor *x, const int64_t *pads, int npad, double value);
/**
 * The shift of a numerically stable exp-sum of x over axes (scoped, detached,
 * keepdim shape): max(x), replaced by 0 where the max is infinite or the
 * reduced extent is empty.  Shared by logsumexp, softmax and log_softmax.
 */
nb_tensor *nb__exp_shift(nb_tensor *x, const int *axes, int naxes);
/**
 * The run-time half of an index check (for execute steps; infer has checked the
 * integer dtype): index as a contiguous i64 tensor whose values are all in
 * [0, size); NB_ERR_INDEX naming `op` and the first value out of range
 * (negative indices are errors, not counted from the end); NB_ERR_STATE for a
 * symbolic index.  Unscoped, unrecorded.
 */
nb_tensor *nb__checked_index(const char *op, nb_tensor *index, int64_t size);
/** nb__checked_index without the range check, for a kernel that checks while it reads
 *  (max_unpool2d's, backend.h `window`).  Unscoped, unrecorded. */
nb_tensor *nb__index_i64(const char *op, nb_tensor *index);
/** NB_ERR_INDEX: "op: index i out of range [0, size)" (the message of every range check). */
nb_status nb__index_error(const char *op, int64_t index, int64_t size);
/** gather / scatter_add with errors (infer and run time) reported under the name of
 *  name_op (the primitive itself, or a composite built on it). Unscoped. */
nb_tensor *nb__gather(nb_op name_op, nb_tensor *x, int axis, nb_tensor *index);
nb_tensor *nb__scatter_add(nb_op name_op, nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src);

#endif /* NB_OPS_H */
