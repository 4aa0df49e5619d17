/*
 * nabla.h — the one public header of nabla, a C11 tensor library with
 * reverse-mode autograd.
 *
 * Conventions that hold for every function below unless its comment says
 * otherwise:
 *
 *  Ownership.  A function returning `nb_tensor *` returns a NEW reference
 *  owned by the caller, who gives it back with nb_release().  When a scope is
 *  open on the calling thread (nb_scope_begin), the new reference is instead
 *  owned by that scope and released by nb_scope_end(); nb_scope_keep() moves
 *  one out.  Inputs are borrowed: an op never releases its arguments.
 *
 *  Errors.  Every failure sets the calling thread's last error (a typed
 *  nb_status plus a message naming the operation and the offending shapes,
 *  dtypes, axes or values) and returns NULL (pointer results) or the status
 *  (nb_status results).  An op handed a NULL tensor returns NULL and keeps the
 *  FIRST error, so a chain `nb_relu(nb_add(nb_matmul(x, w), b))` is checked
 *  once, at its end.  Nothing aborts on bad input; input tensors are never
 *  modified by a failing call.
 *
 *  Shapes.  `const int64_t *shape, int ndim`; ndim in [0, NB_MAX_DIMS]; a
 *  dimension may be 0; ndim 0 is a scalar.  Axes are `int`, negative values
 *  count from the end (Python style).  NB_SHAPE(2, 3) and NB_AXES(0, 1)
 *  expand to the (pointer, count) pair.
 *
 *  Semantics.  An op that shares its name with a PyTorch function behaves like
 *  that function in PyTorch 2.x (broadcasting, type promotion, defaults, NaN,
 *  ties, empty inputs, gradient) unless its comment says otherwise.
 */
#ifndef NABLA_H
#define NABLA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NB_VERSION_MAJOR 0
#define NB_VERSION_MINOR 1
#define NB_VERSION_PATCH 0
/** Library version as "MAJOR.MINOR.PATCH"; static string. */
const char *nb_version(void);

/** Largest supported rank. */
#define NB_MAX_DIMS 8

/* ------------------------------------------------------------------------ */
/* Status codes and the per-thread last error                               */
/* ------------------------------------------------------------------------ */

/** Result codes (append-only; NB_STATUS_COUNT is the sentinel). */
typedef enum nb_status {
    NB_OK = 0,
    NB_ERR_NULL,        /**< a required pointer argument was NULL */
    NB_ERR_ARG,         /**< an argument value is invalid (negative size, bad step, bad p) */
    NB_ERR_SHAPE,       /**< shapes do not match / broadcast / reshape */
    NB_ERR_DTYPE,       /**< dtype not supported by the operation */
    NB_ERR_AXIS,        /**< axis out of range or repeated */
    NB_ERR_INDEX,       /**< index out of range */
    NB_ERR_OVERFLOW,    /**< element count or byte size overflows int64 / size_t */
    NB_ERR_OOM,         /**< allocation failed */
    NB_ERR_DEVICE,      /**< device unknown, unavailable or mismatched */
    NB_ERR_UNSUPPORTED, /**< valid request that this build does not implement */
    NB_ERR_STATE,       /**< call not valid in the current state (e.g. backward twice) */
    NB_ERR_IO,          /**< file system error */
    NB_ERR_FORMAT,      /**< malformed file or data */
    NB_STATUS_COUNT
} nb_status;

/** Status of the last failed call on this thread (NB_OK if none since nb_clear_error). */
nb_status nb_last_status(void);
/** Message of the last failed call on this thread; "" if none.  Thread-local, valid until the next error. */
const char *nb_last_message(void);
/** Reset this thread's last error to NB_OK. */
void nb_clear_error(void);
/** Stable name of a status code, e.g. "NB_ERR_SHAPE"; "NB_UNKNOWN" for out-of-range values. */
const char *nb_status_name(nb_status s);

/* ------------------------------------------------------------------------ */
/* Dtypes (T1)                                                              */
/* ------------------------------------------------------------------------ */

/** Element types (append-only). */
typedef enum nb_dtype {
    NB_F32 = 0, NB_F64, NB_F16, NB_BF16, NB_I8, NB_I32, NB_I64, NB_U8, NB_BOOL,
    NB_DTYPE_COUNT
} nb_dtype;

/** Name such as "float32"; "invalid" for out-of-range values. */
const char *nb_dtype_name(nb_dtype dt);
/** Size of one element in bytes; 0 for out-of-range values. */
size_t nb_dtype_size(nb_dtype dt);
/** True for f32, f64, f16, bf16. */
bool nb_dtype_is_float(nb_dtype dt);
/**
 * Result dtype of a binary op on tensors of dtypes a and b — PyTorch's
 * torch.promote_types: bool < integers < floats; within a category the wider
 * type wins; u8 with i8 gives i32 (nabla has no i16, PyTorch gives int16);
 * f16 with bf16 gives f32.
 */
nb_dtype nb_promote_types(nb_dtype a, nb_dtype b);

/* ------------------------------------------------------------------------ */
/* Devices and backends (B1)                                                */
/* ------------------------------------------------------------------------ */

/** Device kinds (append-only). */
typedef enum nb_device_type {
    NB_DEVICE_CPU = 0, /**< optimized multi-threaded SIMD backend (default) */
    NB_DEVICE_REF,     /**< plain reference backend: double accumulation, one thread */
    NB_DEVICE_CUDA,
    NB_DEVICE_TYPE_COUNT
} nb_device_type;

/** A device handle: kind plus ordinal. */
typedef struct nb_device { nb_device_type type; int index; } nb_device;

#define NB_CPU ((nb_device){NB_DEVICE_CPU, 0})
#define NB_REF ((nb_device){NB_DEVICE_REF, 0})

/** Opaque backend (a table of kernels for one device kind; see src/backend/backend.h). */
typedef struct nb_backend nb_backend;

/**
 * Register `be` for device kind `type`, replacing any earlier one.  The
 * backend table must outlive the process (static storage).  CPU and REF are
 * built in and need no registration.  Errors: NB_ERR_NULL, NB_ERR_DEVICE.
 */
nb_status nb_backend_register(nb_device_type type, const nb_backend *be);
/** Backend serving `dev`, or NULL with NB_ERR_DEVICE when none is registered. */
const nb_backend *nb_backend_for(nb_device dev);
/** Name of a backend ("cpu", "ref", …). */
const char *nb_backend_name(const nb_backend *be);

/** Number of worker threads the CPU backend uses (>= 1). */
int nb_get_num_threads(void);
/**
 * Set the CPU backend's thread count (clamped to [1, 256]).  The initial
 * value is NB_NUM_THREADS from the environment, else the number of online
 * CPUs.  Results are bitwise identical for every thread count (B5).
 */
void nb_set_num_threads(int n);
/** SIMD level the CPU backend dispatched to at run time: "avx512", "avx2" or "scalar". */
const char *nb_cpu_simd_level(void);

/* ------------------------------------------------------------------------ */
/* Tensor handles, reference counting, scopes                               */
/* ------------------------------------------------------------------------ */

/** Opaque tensor handle: shared storage seen through (shape, strides, offset). */
typedef struct nb_tensor nb_tensor;

/** Add a reference; returns t (NULL passes through). */
nb_tensor *nb_retain(nb_tensor *t);
/** Drop a reference; frees the handle (and storage, when last) at zero.  NULL is a no-op. */
void nb_release(nb_tensor *t);

/**
 * Open an autorelease scope on this thread.  Until the matching
 * nb_scope_end(), every tensor a function returns is owned by the scope.
 * Scopes nest.
 */
void nb_scope_begin(void);
/** Close the innermost scope, releasing every reference it owns. */
void nb_scope_end(void);
/**
 * Move t's scope-owned reference to the enclosing scope, or to the caller
 * when this is the outermost scope.  Returns t.  Use it to return a result
 * out of a scope.  If t is not owned by the innermost scope, takes a new
 * reference for the caller instead.
 */
nb_tensor *nb_scope_keep(nb_tensor *t);

/* ------------------------------------------------------------------------ */
/* Inspection                                                               */
/* ------------------------------------------------------------------------ */

int nb_ndim(const nb_tensor *t);                 /**< rank; -1 for NULL */
const int64_t *nb_shape(const nb_tensor *t);     /**< shape array (ndim entries), borrowed */
const int64_t *nb_strides(const nb_tensor *t);   /**< element strides (may be negative or 0), borrowed */
int64_t nb_size(const nb_tensor *t, int axis);   /**< size of one axis (negative counts from end); -1 on error */
int64_t nb_numel(const nb_tensor *t);            /**< number of elements; -1 for NULL */
int64_t nb_offset(const nb_tensor *t);           /**< storage offset in elements */
nb_dtype nb_dtype_of(const nb_tensor *t);        /**< element type */
nb_device nb_device_of(const nb_tensor *t);      /**< device of the storage */
bool nb_is_contiguous(const nb_tensor *t);       /**< row-major dense with no gaps */
/** True when a and b view the same storage buffer. */
bool nb_shares_storage(const nb_tensor *a, const nb_tensor *b);
/**
 * Host pointer to element [0,…,0] of a host tensor (CPU/REF devices), or NULL
 * with NB_ERR_DEVICE for other devices.  Borrowed; valid while t lives.
 */
void *nb_data_ptr(const nb_tensor *t);

/* ------------------------------------------------------------------------ */
/* Constructors (T4).  All results are contiguous and owned by the caller.  */
/* ------------------------------------------------------------------------ */

/** Uninitialized tensor.  Errors: NB_ERR_ARG (negative dim), NB_ERR_OVERFLOW, NB_ERR_OOM. */
nb_tensor *nb_empty(const int64_t *shape, int ndim, nb_dtype dt);
nb_tensor *nb_zeros(const int64_t *shape, int ndim, nb_dtype dt);
nb_tensor *nb_ones(const int64_t *shape, int ndim, nb_dtype dt);
/** Every element set to `value` converted to dt (round-to-nearest-even; ints truncate toward zero). */
nb_tensor *nb_full(const int64_t *shape, int ndim, double value, nb_dtype dt);
/** Tensors shaped and typed like t (on t's device). */
nb_tensor *nb_zeros_like(const nb_tensor *t);
nb_tensor *nb_ones_like(const nb_tensor *t);
nb_tensor *nb_full_like(const nb_tensor *t, double value);
/** Rank-0 tensor holding `value`. */
nb_tensor *nb_scalar(double value, nb_dtype dt);
/**
 * 1-D values start, start+step, … < end (torch.arange).  Length
 * ceil((end-start)/step).  Errors: NB_ERR_ARG when step is 0 or its sign
 * does not lead from start to end (an empty range is valid).
 */
nb_tensor *nb_arange(double start, double end, double step, nb_dtype dt);
/** `steps` evenly spaced values from start to end inclusive (torch.linspace). steps >= 0. */
nb_tensor *nb_linspace(double start, double end, int64_t steps, nb_dtype dt);
/** [n, m] matrix with ones on the main diagonal. */
nb_tensor *nb_eye(int64_t n, int64_t m, nb_dtype dt);
/**
 * Copy `data` (row-major, numel(shape) elements of dt) into a new tensor.
 * Errors: NB_ERR_NULL when data is NULL and numel > 0.
 */
nb_tensor *nb_from_data(const void *data, const int64_t *shape, int ndim, nb_dtype dt);
/**
 * Borrow external host memory without copying.  `strides` (elements, may be
 * NULL for row-major) describe the layout from `data`.  When the last
 * reference to the storage goes away, `release(ctx, data)` is called (may be
 * NULL).  On error `release` is NOT called and the caller keeps the memory.
 */
nb_tensor *nb_from_blob(void *data, const int64_t *shape, const int64_t *strides, int ndim,
                        nb_dtype dt, void (*release)(void *ctx, void *data), void *ctx);

/**
 * Seed this thread's random generator (Philox4x32-10, Salmon et al. 2011,
 * counter based).  Each random call consumes a block of counters, so the
 * values depend only on the seed and the call sequence, never on threads.
 */
void nb_manual_seed(uint64_t seed);
/** Uniform [0, 1) values (float dtypes). */
nb_tensor *nb_rand(const int64_t *shape, int ndim, nb_dtype dt);
/** Standard normal values via Box–Muller (float dtypes). */
nb_tensor *nb_randn(const int64_t *shape, int ndim, nb_dtype dt);
/** 1 with probability p (elementwise from p's values in [0,1]), else 0; dtype of p. Not differentiable. */
nb_tensor *nb_bernoulli(nb_tensor *p);
/** Random permutation of 0..n-1 (i64), Fisher–Yates on this thread's generator. */
nb_tensor *nb_randperm(int64_t n);

/* ------------------------------------------------------------------------ */
/* Device moves and copies                                                  */
/* ------------------------------------------------------------------------ */

/** Copy of t on `dev` (a new reference to t itself when already there). Differentiable (A6). */
nb_tensor *nb_to_device(nb_tensor *t, nb_device dev);
/** Elementwise conversion to dt (a new reference to t when dt matches).  Differentiable for float→float. */
nb_tensor *nb_cast(nb_tensor *t, nb_dtype dt);
/** Contiguous tensor with t's values; a new reference to t when already contiguous. */
nb_tensor *nb_contiguous(nb_tensor *t);
/** Contiguous copy that never shares storage with t (torch.clone). */
nb_tensor *nb_clone(nb_tensor *t);

/* ------------------------------------------------------------------------ */
/* Zero-copy views (T5).  Results share t's storage; writes show through.   */
/* ------------------------------------------------------------------------ */

/**
 * Tensor of the new shape with t's elements in row-major order.  One entry of
 * shape may be -1 (inferred).  A view when the strides allow it, else a copy
 * (torch.reshape).  Errors: NB_ERR_SHAPE when the element counts differ.
 */
nb_tensor *nb_reshape(nb_tensor *t, const int64_t *shape, int ndim);
/** Like nb_reshape but never copies: NB_ERR_SHAPE when no view exists (torch.Tensor.view). */
nb_tensor *nb_view(nb_tensor *t, const int64_t *shape, int ndim);
/** Merge axes start..end (inclusive, negatives allowed) into one (torch.flatten). */
nb_tensor *nb_flatten(nb_tensor *t, int start, int end);
/** Reorder axes: result axis i is t's axis perm[i].  perm must be a permutation of 0..ndim-1. */
nb_tensor *nb_permute(nb_tensor *t, const int *perm, int ndim);
/** Swap two axes. */
nb_tensor *nb_transpose(nb_tensor *t, int a, int b);
/** Matrix transpose of the last two axes (rank >= 2); rank <= 1 returns t (torch.Tensor.mT-like, but allowing 1-D). */
nb_tensor *nb_t(nb_tensor *t);
/** Elements start .. start+length-1 of one axis.  0 <= start, start+length <= size. */
nb_tensor *nb_narrow(nb_tensor *t, int axis, int64_t start, int64_t length);
/**
 * Python slice t[start:stop:step] along `axis` (NumPy semantics): negative
 * bounds count from the end, bounds are clamped, a negative step walks
 * backwards (negative stride); use NB_END for an open bound.  step != 0.
 */
#define NB_END INT64_MAX
nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t stop, int64_t step);
/** Index `index` (negative counts from the end) of `axis`, dropping that axis. */
nb_tensor *nb_select(nb_tensor *t, int axis, int64_t index);
/** Remove `axis`, which must have size 1 (PyTorch returns t unchanged for size != 1; nabla reports NB_ERR_SHAPE). */
nb_tensor *nb_squeeze(nb_tensor *t, int axis);
/** Remove every size-1 axis. */
nb_tensor *nb_squeeze_all(nb_tensor *t);
/** Insert a size-1 axis at position `axis` in [-ndim-1, ndim]. */
nb_tensor *nb_unsqueeze(nb_tensor *t, int axis);
/**
 * Broadcast view with stride 0 on expanded axes (torch.expand): leading new
 * axes may be added; -1 keeps a size.  Errors: NB_ERR_SHAPE naming both shapes.
 */
nb_tensor *nb_expand(nb_tensor *t, const int64_t *shape, int ndim);
/** NumPy broadcast_to (like nb_expand without -1). */
nb_tensor *nb_broadcast_to(nb_tensor *t, const int64_t *shape, int ndim);
/** Reverse the order of elements along each listed axis (negative strides; a view, unlike torch.flip). */
nb_tensor *nb_flip(nb_tensor *t, const int *axes, int naxes);
/** View of the diagonal of axes a and b, shifted by `offset`, appended as the last axis (torch.diagonal). */
nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int a, int b);
/**
 * View with explicit shape, element strides and storage offset, checked so
 * every reachable element lies inside t's storage (NB_ERR_INDEX otherwise).
 * Not differentiable.
 */
nb_tensor *nb_as_strided(nb_tensor *t, const int64_t *shape, const int64_t *strides, int ndim,
                         int64_t offset);

/* ------------------------------------------------------------------------ */
/* Element access and printing (T6)                                         */
/* ------------------------------------------------------------------------ */

/** Read element `index` (ndim entries, negatives count from end) as double into *out. */
nb_status nb_get(const nb_tensor *t, const int64_t *index, double *out);
/** Write `value` (converted to t's dtype) at `index`.  Writes through views. */
nb_status nb_set(nb_tensor *t, const int64_t *index, double value);
/** The single element of a one-element tensor as double.  NB_ERR_SHAPE otherwise. */
nb_status nb_item(const nb_tensor *t, double *out);
/** Copy t's elements in row-major order into dst, which holds `nbytes` (must equal numel*dtype size). */
nb_status nb_copy_to_host(const nb_tensor *t, void *dst, size_t nbytes);
/** Overwrite t's elements (row-major order) from src; works through views. */
nb_status nb_copy_from_host(nb_tensor *t, const void *src, size_t nbytes);
/** Print in NumPy style ("tensor([[1., 2.],\n        [3., 4.]])"-like, NumPy's summarization beyond 1000 elements). */
nb_status nb_print(const nb_tensor *t, FILE *f);
/** The same text in a malloc'd string the caller frees; NULL on error. */
char *nb_to_string(const nb_tensor *t);

/* ------------------------------------------------------------------------ */
/* In-place updates (not recorded by autograd; NB_ERR_STATE when t requires
 * grad while recording is on, as in PyTorch for leaves).                    */
/* ------------------------------------------------------------------------ */

/** dst[...] = src broadcast to dst's shape, converted to dst's dtype. */
nb_status nb_copy_(nb_tensor *dst, nb_tensor *src);
/** Every element of t = value. */
nb_status nb_fill_(nb_tensor *t, double value);
/** t += alpha * src (src broadcast to t's shape). */
nb_status nb_add_(nb_tensor *t, nb_tensor *src, double alpha);
/** t *= s. */
nb_status nb_mul_scalar_(nb_tensor *t, double s);

/* ------------------------------------------------------------------------ */
/* Unary elementwise ops (O1).  Integer/bool inputs of float-valued ops are
 * computed in float32 (PyTorch's int→float promotion).                      */
/* ------------------------------------------------------------------------ */

#define NB_UNARY_DECL(name) nb_tensor *nb_##name(nb_tensor *x);
NB_UNARY_DECL(neg) NB_UNARY_DECL(abs) NB_UNARY_DECL(sign) NB_UNARY_DECL(exp)
NB_UNARY_DECL(expm1) NB_UNARY_DECL(log) NB_UNARY_DECL(log1p) NB_UNARY_DECL(sqrt)
NB_UNARY_DECL(rsqrt) NB_UNARY_DECL(square) NB_UNARY_DECL(reciprocal) NB_UNARY_DECL(sin)
NB_UNARY_DECL(cos) NB_UNARY_DECL(tan) NB_UNARY_DECL(tanh) NB_UNARY_DECL(sigmoid)
NB_UNARY_DECL(relu) NB_UNARY_DECL(silu) NB_UNARY_DECL(erf) NB_UNARY_DECL(floor)
NB_UNARY_DECL(ceil) NB_UNARY_DECL(round) NB_UNARY_DECL(logical_not)
#undef NB_UNARY_DECL
/** gelu, exact erf form: x * Φ(x) (Hendrycks & Gimpel 2016; torch default). */
nb_tensor *nb_gelu(nb_tensor *x);
/** gelu, tanh approximation: 0.5x(1+tanh(√(2/π)(x+0.044715x³))) (torch approximate='tanh'). */
nb_tensor *nb_gelu_tanh(nb_tensor *x);
/** x if x > 0 else slope * x. */
nb_tensor *nb_leaky_relu(nb_tensor *x, double slope);
/** x if x > 0 else alpha * (exp(x) - 1)  (Clevert et al. 2015). */
nb_tensor *nb_elu(nb_tensor *x, double alpha);
/** log(1 + exp(beta x)) / beta, linear (x) where beta x > threshold (torch defaults 1, 20). */
nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold);
/** min(max(x, lo), hi); pass -INFINITY / INFINITY for an open side.  NaN stays NaN. */
nb_tensor *nb_clamp(nb_tensor *x, double lo, double hi);

/* ------------------------------------------------------------------------ */
/* Binary elementwise ops with NumPy broadcasting (O2, O3, T7).              */
/* Each op NAME has nb_NAME_t(a, b) on tensors and scalar forms             */
/* nb_NAME_sf(a, double) / nb_NAME_si(a, int64_t); the macro nb_NAME(a, b)   */
/* picks one with _Generic.  A scalar takes part in promotion like a Python */
/* number in PyTorch: it only raises the category (int tensor + 2.5 → f32). */
/* ------------------------------------------------------------------------ */

#define NB_BINARY_DECL(name)                                  \
    nb_tensor *nb_##name##_t(nb_tensor *a, nb_tensor *b);     \
    nb_tensor *nb_##name##_sf(nb_tensor *a, double b);        \
    nb_tensor *nb_##name##_si(nb_tensor *a, int64_t b);
NB_BINARY_DECL(add) NB_BINARY_DECL(sub) NB_BINARY_DECL(mul) NB_BINARY_DECL(div)
NB_BINARY_DECL(pow) NB_BINARY_DECL(maximum) NB_BINARY_DECL(minimum) NB_BINARY_DECL(atan2)
NB_BINARY_DECL(remainder) NB_BINARY_DECL(eq) NB_BINARY_DECL(ne) NB_BINARY_DECL(lt)
NB_BINARY_DECL(le) NB_BINARY_DECL(gt) NB_BINARY_DECL(ge) NB_BINARY_DECL(logical_and)
NB_BINARY_DECL(logical_or) NB_BINARY_DECL(logical_xor)
#undef NB_BINARY_DECL

#define NB_GENERIC_BINARY(name, a, b)                                        \
    _Generic((b), nb_tensor *: nb_##name##_t, float: nb_##name##_sf,         \
             double: nb_##name##_sf, default: nb_##name##_si)(a, b)
#define nb_add(a, b) NB_GENERIC_BINARY(add, a, b)
#define nb_sub(a, b) NB_GENERIC_BINARY(sub, a, b)
#define nb_mul(a, b) NB_GENERIC_BINARY(mul, a, b)
#define nb_div(a, b) NB_GENERIC_BINARY(div, a, b)          /**< true division (ints → f32) */
#define nb_pow(a, b) NB_GENERIC_BINARY(pow, a, b)
#define nb_maximum(a, b) NB_GENERIC_BINARY(maximum, a, b)  /**< NaN propagates */
#define nb_minimum(a, b) NB_GENERIC_BINARY(minimum, a, b)  /**< NaN propagates */
#define nb_atan2(a, b) NB_GENERIC_BINARY(atan2, a, b)
#define nb_remainder(a, b) NB_GENERIC_BINARY(remainder, a, b) /**< Python-style: sign of divisor */
#define nb_eq(a, b) NB_GENERIC_BINARY(eq, a, b)            /**< bool result */
#define nb_ne(a, b) NB_GENERIC_BINARY(ne, a, b)
#define nb_lt(a, b) NB_GENERIC_BINARY(lt, a, b)
#define nb_le(a, b) NB_GENERIC_BINARY(le, a, b)
#define nb_gt(a, b) NB_GENERIC_BINARY(gt, a, b)
#define nb_ge(a, b) NB_GENERIC_BINARY(ge, a, b)
#define nb_logical_and(a, b) NB_GENERIC_BINARY(logical_and, a, b)
#define nb_logical_or(a, b) NB_GENERIC_BINARY(logical_or, a, b)
#define nb_logical_xor(a, b) NB_GENERIC_BINARY(logical_xor, a, b)

/** cond ? a : b elementwise, all three broadcast; cond is any dtype (nonzero = true). */
nb_tensor *nb_where(nb_tensor *cond, nb_tensor *a, nb_tensor *b);
/** Copy of x with `value` where mask is true (mask broadcasts to x). */
nb_tensor *nb_masked_fill(nb_tensor *x, nb_tensor *mask, double value);

/* ------------------------------------------------------------------------ */
/* Reductions (O4).  `axes` lists axes to reduce (negatives allowed, no      */
/* repeats); axes == NULL reduces all axes.  keepdim keeps them as size 1.   */
/* Sums are pairwise with wide accumulators and bitwise reproducible.       */
/* ------------------------------------------------------------------------ */

nb_tensor *nb_sum(nb_tensor *x, const int *axes, int naxes, bool keepdim);   /**< bool/int → i64 */
nb_tensor *nb_mean(nb_tensor *x, const int *axes, int naxes, bool keepdim);  /**< float dtypes only; empty → NaN */
nb_tensor *nb_prod(nb_tensor *x, const int *axes, int naxes, bool keepdim);
/** Maximum over axes (torch.amax: NaN propagates; the gradient is split evenly among ties). */
nb_tensor *nb_max(nb_tensor *x, const int *axes, int naxes, bool keepdim);
nb_tensor *nb_min(nb_tensor *x, const int *axes, int naxes, bool keepdim);
/** Index (i64) of the first maximum along `axis` (NaN counts as maximum, as torch). */
nb_tensor *nb_argmax(nb_tensor *x, int axis, bool keepdim);
nb_tensor *nb_argmin(nb_tensor *x, int axis, bool keepdim);
/** Variance with `correction` (Bessel: 1, torch default) — sum((x-mean)²)/(N-correction). */
nb_tensor *nb_var(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim);
nb_tensor *nb_std(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim);
/** log(sum(exp(x))) computed as m + log(sum(exp(x - m))), m = max (stable). */
nb_tensor *nb_logsumexp(nb_tensor *x, const int *axes, int naxes, bool keepdim);
/** Vector p-norm (sum |x|^p)^(1/p); p = INFINITY gives max |x|.  p > 0. */
nb_tensor *nb_norm(nb_tensor *x, double p, const int *axes, int naxes, bool keepdim);
/** Inclusive prefix sum / product along one axis (same shape). */
nb_tensor *nb_cumsum(nb_tensor *x, int axis);
nb_tensor *nb_cumprod(nb_tensor *x, int axis);

/* ------------------------------------------------------------------------ */
/* Linear algebra (O5)                                                      */
/* ------------------------------------------------------------------------ */

/**
 * NumPy matmul: 1-D operands are promoted (a: [k] → [1,k], b: [k] → [k,1])
 * and the added axis removed; batch axes broadcast.  a [..., m, k] @
 * b [..., k, n] → [..., m, n].  Float dtypes; a and b must match.
 */
nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b);
/** y = x @ w^T + bias; x [..., in], w [out, in], bias [out] or NULL (torch.nn.functional.linear). */
nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *bias);
/**
 * Einstein summation (numpy.einsum / torch.einsum): "ij,jk->ik", implicit
 * output ("ij,jk" sorts the remaining letters), "..." for broadcast batch
 * axes.  Operands must share a float dtype.
 */
nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n);

/* ------------------------------------------------------------------------ */
/* Neural-network functions and losses (O6)                                 */
/* ------------------------------------------------------------------------ */

/** exp(x - max) / sum(exp(x - max)) along `axis`. */
nb_tensor *nb_softmax(nb_tensor *x, int axis);
/** x - logsumexp(x) along `axis`. */
nb_tensor *nb_log_softmax(nb_tensor *x, int axis);
/**
 * Layer normalization over the last `nnorm` axes (Ba et al. 2016;
 * torch.nn.functional.layer_norm): (x - mean) / sqrt(var_biased + eps) * w + b.
 * weight and bias have the shape of those axes, or are NULL.
 */
nb_tensor *nb_layer_norm(nb_tensor *x, int nnorm, nb_tensor *weight, nb_tensor *bias, double eps);
/** RMS normalization over the last `nnorm` axes (Zhang & Sennrich 2019): x / sqrt(mean(x²) + eps) * w. */
nb_tensor *nb_rms_norm(nb_tensor *x, int nnorm, nb_tensor *weight, double eps);
/** Inverted dropout: zero with probability p, scale kept values by 1/(1-p); identity when !training. */
nb_tensor *nb_dropout(nb_tensor *x, double p, bool training);

/** How a loss reduces over the batch (torch's reduction=). */
typedef enum nb_reduction { NB_REDUCE_MEAN = 0, NB_REDUCE_SUM, NB_REDUCE_NONE, NB_REDUCTION_COUNT } nb_reduction;

/** Options of nb_cross_entropy; NB_CROSS_ENTROPY_DEFAULTS gives torch's defaults. */
typedef struct nb_cross_entropy_opts {
    nb_reduction reduction;  /**< mean over non-ignored targets by default */
    int64_t ignore_index;    /**< class index whose targets contribute nothing (-100) */
    double label_smoothing;  /**< in [0, 1] (0) */
} nb_cross_entropy_opts;
#define NB_CROSS_ENTROPY_DEFAULTS ((nb_cross_entropy_opts){NB_REDUCE_MEAN, -100, 0.0})
/**
 * Cross entropy of logits [N, C] (or [C]) against `target`: either class
 * indices [N] (integer dtype) or class probabilities [N, C] (float dtype), as
 * torch.nn.functional.cross_entropy.  Errors: NB_ERR_INDEX for a class index
 * outside [0, C) that is not ignore_index.
 */
nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_opts opts);
/** Negative log-likelihood of log-probabilities [N, C] at class indices [N] (torch nll_loss). */
nb_tensor *nb_nll_loss(nb_tensor *logp, nb_tensor *target, nb_reduction reduction, int64_t ignore_index);
/** Mean squared error (torch mse_loss). */
nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/** Binary cross entropy on logits, computed stably as max(x,0) - x t + log(1 + exp(-|x|)). */
nb_tensor *nb_bce_with_logits(nb_tensor *logits, nb_tensor *target, nb_reduction reduction);

/* ------------------------------------------------------------------------ */
/* Indexing and joining (O7).  Index tensors are integer dtypes.            */
/* ------------------------------------------------------------------------ */

/** Entries of x at `index` (1-D) along axis (torch.index_select). */
nb_tensor *nb_index_select(nb_tensor *x, int axis, nb_tensor *index);
/** out[i][j] = x[i][index[i][j]] along axis (torch.gather); index has x's rank. */
nb_tensor *nb_gather(nb_tensor *x, int axis, nb_tensor *index);
/** Copy of x with src added at index along axis (torch.scatter_add; duplicates accumulate). */
nb_tensor *nb_scatter_add(nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src);
/** numpy.take_along_axis: like gather, with index broadcast against x on the other axes. */
nb_tensor *nb_take_along_axis(nb_tensor *x, nb_tensor *index, int axis);
/** One-hot encoding of integer `index` with `num_classes` classes, i64 result [..., C]. */
nb_tensor *nb_one_hot(nb_tensor *index, int64_t num_classes);
/** Rows of `weight` [V, D] at integer `index` [...] → [..., D] (torch embedding). */
nb_tensor *nb_embedding(nb_tensor *weight, nb_tensor *index);
/** Concatenate along an existing axis; shapes must match elsewhere; dtypes promote. */
nb_tensor *nb_cat(nb_tensor *const *ts, int n, int axis);
/** Stack along a new axis. */
nb_tensor *nb_stack(nb_tensor *const *ts, int n, int axis);
/**
 * Split into views of `split_size` along axis (the last may be smaller).
 * Writes up to `max_out` handles to out and returns the number of pieces
 * (ceil(size/split_size)), or -1 on error.  Each piece is a new reference.
 */
int nb_split(nb_tensor *x, int64_t split_size, int axis, nb_tensor **out, int max_out);
/** Split into `chunks` pieces as torch.chunk; returns the count written, -1 on error. */
int nb_chunk(nb_tensor *x, int chunks, int axis, nb_tensor **out, int max_out);

/** Pad modes (append-only). */
typedef enum nb_pad_mode { NB_PAD_CONSTANT = 0, NB_PAD_REFLECT, NB_PAD_MODE_COUNT } nb_pad_mode;
/**
 * Pad the last npad/2 axes (torch.nn.functional.pad order: pads[0], pads[1]
 * are left/right of the LAST axis, then the one before…).  Negative pads
 * crop in constant mode.  Reflect requires pad < size on each side.
 */
nb_tensor *nb_pad(nb_tensor *x, const int64_t *pads, int npad, nb_pad_mode mode, double value);

/* ------------------------------------------------------------------------ */
/* Autograd (A1–A6)                                                         */
/* ------------------------------------------------------------------------ */

/** Mark a float leaf tensor as tracked (or not).  Errors: NB_ERR_DTYPE for non-float, NB_ERR_STATE for non-leaves. */
nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad);
bool nb_requires_grad(const nb_tensor *t);
/** True when t has no tape node (created by the user, or detached). */
bool nb_is_leaf(const nb_tensor *t);
/** Accumulated gradient of a tracked leaf: a new reference, or NULL (no error set) when none yet. */
nb_tensor *nb_grad(nb_tensor *t);
/** Drop t's accumulated gradient. */
void nb_zero_grad(nb_tensor *t);
/** A view of t sharing storage but cut from the tape (requires_grad false). */
nb_tensor *nb_detach(nb_tensor *t);

/**
 * Reverse-mode pass from `root`.  seed: d(out)/d(root), shaped like root;
 * NULL is allowed only for one-element roots (seed 1).  Gradients accumulate
 * (+=) into every tracked leaf's grad.  With create_graph the pass is itself
 * recorded, so gradients can be differentiated again (A5).  Errors:
 * NB_ERR_STATE when root is not tracked; NB_ERR_SHAPE for a bad seed.
 */
nb_status nb_backward(nb_tensor *root, nb_tensor *seed, bool create_graph);
/**
 * Gradients of `root` with respect to `n` inputs (torch.autograd.grad), not
 * touching leaves' grad fields.  Writes n new references to grads_out (a
 * zeros tensor for an input root does not depend on).
 */
nb_status nb_autograd_grad(nb_tensor *root, nb_tensor *seed, nb_tensor *const *inputs, int n,
                           bool create_graph, nb_tensor **grads_out);

/** Enter a no-grad region on this thread (nestable). */
void nb_no_grad_begin(void);
/** Leave the innermost no-grad region. */
void nb_no_grad_end(void);
/** True when ops on this thread record tape nodes. */
bool nb_grad_enabled(void);

/* ------------------------------------------------------------------------ */
/* Op table introspection (used by tests and tools)                         */
/* ------------------------------------------------------------------------ */

/** Number of ops in the op table. */
int nb_op_count(void);
/** Name of op i, e.g. "exp"; NULL out of range. */
const char *nb_op_name(int i);

/* Shape/axes literal helpers. */
#define NB_SHAPE(...) ((const int64_t[]){__VA_ARGS__}), \
    ((int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)))
#define NB_AXES(...) ((const int[]){__VA_ARGS__}), \
    ((int)(sizeof((const int[]){__VA_ARGS__}) / sizeof(int)))

#ifdef __cplusplus
}
#endif
#endif /* NABLA_H */
