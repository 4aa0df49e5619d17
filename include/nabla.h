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
 *  one out.  Never nb_release() a reference a scope owns (as with an
 *  Objective-C autorelease pool, that double-releases at nb_scope_end): a
 *  helper that may run inside a caller's scope should open its own scope
 *  instead of releasing.  Inputs are borrowed: an op never releases its
 *  arguments.
 *
 *  Autograd and in-place writes.  The tape keeps references to the inputs
 *  of recorded ops; writing into such an input in place (nb_copy_, nb_fill_,
 *  …) before nb_backward changes the gradients it computes — nabla has no
 *  version counters to detect this (PyTorch raises an error).
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
    NB_ERR_STATE,       /**< call not valid in the current state (e.g. in-place write to a tracked tensor while recording) */
    NB_ERR_IO,          /**< file system error */
    NB_ERR_FORMAT,      /**< malformed file or data */
    NB_STATUS_COUNT
} nb_status;

/**
 * The error pending on this thread, NB_OK if none since nb_clear_error().
 * The error is sticky: tensor-returning ops keep the FIRST pending error (so
 * a chain reports its root cause) and success never clears it; functions
 * returning nb_status report their own failure (status and message, replacing
 * the pending error) and on success leave the pending error as it was; a
 * backward pass returns the failure of any op inside it whatever was
 * pending before (it never drops a gradient silently).  Call nb_clear_error()
 * before a call whose failure you want to inspect in isolation.
 */
nb_status nb_last_status(void);
/** Message of the pending error (see nb_last_status); "" if none.  Thread-local, valid until the next error. */
const char *nb_last_message(void);
/** Reset this thread's last error to NB_OK. */
void nb_clear_error(void);
/** Stable name of a status code, e.g. "NB_ERR_SHAPE"; "NB_UNKNOWN" for out-of-range values. */
const char *nb_status_name(nb_status s);

/* ------------------------------------------------------------------------ */
/* Memory: the allocator hook                                               */
/* ------------------------------------------------------------------------ */

/**
 * An allocation function, as lua_Alloc (Lua 5.4 manual, 4.6).  Called as
 * fn(ud, ptr, osize, nsize) with the `ud` given to nb_set_allocator:
 *  - ptr NULL (osize 0): allocate nsize bytes;
 *  - nsize 0: free ptr, a block of osize bytes from fn; return NULL;
 *  - otherwise: resize ptr (osize bytes) to nsize bytes, as realloc.
 * It returns NULL if and only if it cannot fulfil a request with nsize > 0,
 * leaving ptr's block untouched; nabla then fails the call with NB_ERR_OOM
 * (the message names what was being allocated) and frees everything the
 * call had allocated.  Blocks must be aligned for any C object
 * (alignof(max_align_t), as malloc's); nabla needs no more: it adds a
 * 16-byte header to each block, and up to 126 bytes more to tensor data
 * to place it on whole 64-byte lines.
 * nabla calls fn from every thread that calls nabla functions (never from
 * its CPU worker threads): make fn thread-safe if several threads use nabla.
 */
typedef void *(*nb_alloc_fn)(void *ud, void *ptr, size_t osize, size_t nsize);

/**
 * Make fn (with ud) the source of every heap block nabla allocates: tensor
 * records and data, tape nodes, the scratch of nb_backward, scopes, modules,
 * optimizers, safetensors handles, the buffers of safetensors saves and
 * zlib's state while reading gzip'd IDX files.
 * fn NULL restores the default (malloc, realloc, free).  Call it while no
 * memory from the current function is live — no tensor, module, optimizer
 * or safetensors handle exists and no scope is open, on any thread — and
 * while no other thread is inside nabla; else NB_ERR_STATE (nothing changes).
 * While a function other than the default is installed:
 *  - every tensor buffer comes from it too: the caching allocator
 *    (nb_alloc_cache_release) is bypassed;
 *  - jansson (which parses safetensors headers) allocates through it:
 *    json_set_alloc_funcs is process-wide, so a program that uses jansson
 *    itself must hold no jansson value across the calls that install and
 *    remove the function (jansson's own functions are restored with the
 *    default).
 * Not from fn: the string nb_to_string returns (malloc'd: the caller frees it
 * with free()), thread stacks, the memory maps of safetensors files (mmap),
 * and the process-wide table of symbolic dims (nb_dim; malloc'd, kept for
 * the process's life).
 */
nb_status nb_set_allocator(nb_alloc_fn fn, void *ud);
/** The current allocation function (the default one if none was set) and, when ud is not NULL, its ud in *ud. */
nb_alloc_fn nb_get_allocator(void **ud);

/* ------------------------------------------------------------------------ */
/* Dtypes (T1)                                                              */
/* ------------------------------------------------------------------------ */

/**
 * Element types (append-only).  Integer arithmetic (neg, abs, sign, square,
 * relu, add, sub, mul, pow, maximum, minimum, remainder, fmod, comparisons, sum,
 * prod, max, min, cumsum, cumprod, where) is exact in int64 and wraps around
 * on overflow like PyTorch (u8 0 - 1 = 255, i64 max + 1 = i64 min).  Where
 * PyTorch raises instead, nabla returns a value: integer remainder and fmod by 0 are 0,
 * a negative integer power is 0 (1 for base 1, +-1 for base -1), and
 * bool - bool is computed exactly and stored as bool (so it equals logical_xor).
 * Conversions between integer (and bool) types, in nb_cast and in promotion,
 * are exact and wrap into a narrower type (i64 300 -> u8 44), as PyTorch;
 * C integer scalars (the _si forms) keep all 64 bits, never passing through
 * double: u8 250 + 300 = 38, i32 x + 2^32 = x, i64 2^53 + (2^53 + 1) exact.
 * Conversions from float to integer (nb_cast, nb_full, nb_arange, …)
 * truncate toward zero and SATURATE at the type's range, NaN -> 0 — C leaves
 * those cases undefined and PyTorch's result is platform-specific.
 */
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
 * f16 with bf16 gives f32.  NB_DTYPE_COUNT when a or b is not a dtype.
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
 * CPUs.  NB_NUM_THREADS must be a decimal integer in [1, 256]; any other
 * value (empty, "abc", "0", "-5", "4x") is ignored with one warning line on
 * stderr, and the CPU count is used.  Results are bitwise identical for
 * every thread count (B5).
 */
void nb_set_num_threads(int n);
/**
 * SIMD level the CPU backend dispatched to at run time: "avx512", "avx2" or
 * "scalar".  The environment variable NB_SIMD=scalar|avx2|avx512 caps the
 * level (a cap above what the CPU supports gives the CPU's level); any other
 * value is ignored with one warning line on stderr.  Other environment
 * variables read by the library: NB_NUM_THREADS (see nb_set_num_threads)
 * and NB_ALLOC_CACHE_MB (see nb_alloc_cache_set_limit).
 */
const char *nb_cpu_simd_level(void);

/**
 * Drop the calling thread's compiled plans (nb_compile_cache_clear), stop the
 * CPU backend's worker threads and wait for them to exit (join), then return
 * every cached buffer to the system (nb_alloc_cache_release).  Call it once
 * no other thread runs nabla ops, e.g. at the end of main(), so that leak
 * checkers (valgrind --leak-check=full) see no thread stacks or cached plans
 * as "possibly lost" (other threads' plans go when those threads exit).
 * Tensors and plans still referenced stay valid; the next parallel op starts
 * the workers again.  An exit handler (atexit) joins the workers too, unless
 * another thread is submitting work at that moment.
 */
void nb_shutdown(void);

/**
 * The caching allocator (PyTorch's caching allocator, for host memory).
 * Tensor buffers of more than 256 bytes and the backends' scratch buffers
 * are rounded up to a size class (four per power of two; 2 MiB huge pages
 * from 4 MiB on) and, when freed, kept for the next request of the same
 * class, most recently freed first, so a training loop that allocates the
 * same shapes every step touches no fresh pages after its first steps.  The
 * cache holds at most a limit of bytes (NB_ALLOC_CACHE_MB MiB from the
 * environment, a decimal integer >= 0, default 256; 0 turns caching off;
 * another value is ignored with a warning on stderr) and 2048 blocks; beyond
 * either the least recently freed blocks go back to the system.  Thread
 * safe.  Under AddressSanitizer builds nothing is cached (use-after-free
 * stays visible) and the functions below do nothing and report zeros.
 */
/** Return every cached free block to the system (as torch.cuda.empty_cache); buffers in use are untouched. */
void nb_alloc_cache_release(void);
/** Set the cache's byte limit (0 turns caching off), releasing least recently freed blocks above it. */
void nb_alloc_cache_set_limit(size_t bytes);
/** Bytes and blocks the cache holds now (free blocks waiting for reuse); either pointer may be NULL. */
void nb_alloc_cache_stats(size_t *bytes, size_t *blocks);

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
 * Scopes nest.  Out of memory for the scope: NB_ERR_OOM is set and every
 * tensor-returning call fails with NB_ERR_OOM until the matching
 * nb_scope_end(), which must still be called.
 */
void nb_scope_begin(void);
/**
 * Close the innermost scope, releasing every reference it owns.  Without an
 * open scope on this thread (an unmatched call) it changes nothing and
 * records NB_ERR_STATE, read with nb_last_status() / nb_last_message().
 */
void nb_scope_end(void);
/**
 * Move t's scope-owned reference to the enclosing scope, or to the caller
 * when this is the outermost scope.  Returns t.  Use it to return a result
 * out of a scope.  If t is not owned by the innermost scope, takes a new
 * reference for the caller instead.  NULL with NB_ERR_OOM when the enclosing
 * scope cannot grow (t then stays in the innermost scope).
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
/** Tensors shaped and typed like t (on t's device).  For a symbolic t (a traced graph's,
 *  maybe with symbolic dims) the result is symbolic too: a rank-0 constant broadcast to t's shape. */
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
 * rand, randn and bernoulli (and so dropout) traced into a graph draw when
 * the graph runs, fresh at every run, from the running thread's generator
 * (advancing it as the same calls made eagerly would: after the same seed,
 * a run gives the eager values).
 */
void nb_manual_seed(uint64_t seed);
/** Uniform [0, 1) values (float dtypes; NB_ERR_DTYPE otherwise). */
nb_tensor *nb_rand(const int64_t *shape, int ndim, nb_dtype dt);
/** Standard normal values via Box–Muller (float dtypes; NB_ERR_DTYPE otherwise). */
nb_tensor *nb_randn(const int64_t *shape, int ndim, nb_dtype dt);
/** 1 with probability p (elementwise from p's values in [0,1]), else 0; dtype of p. Not differentiable.
 *  Errors: NB_ERR_DTYPE for non-float p, NB_ERR_DEVICE off host memory, NB_ERR_ARG for a value
 *  outside [0, 1] (of a symbolic p: when its graph runs). */
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
/** Contiguous tensor with t's values; a new reference to t when already contiguous (a symbolic
 *  t, whose layout exists only when its graph runs, always gets a copy node). */
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
 * Symbolic dims: sizes may be dims from nb_shape; -1 is the exact quotient of
 * the element counts ([B, 784] into (-1, 28, 28) gives [B, 28, 28]),
 * NB_ERR_SHAPE when it is not provably exact.
 */
nb_tensor *nb_reshape(nb_tensor *t, const int64_t *shape, int ndim);
/** Like nb_reshape but never copies: NB_ERR_SHAPE when no view exists (torch.Tensor.view).
 *  On a symbolic tensor (no layout yet) it is nb_reshape. */
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
 * On a symbolic axis of size n (tracing) the bounds are not clamped: a
 * negative bound b is n + b, a non-negative one itself, NB_END the end; the
 * slice must then lie inside the axis, which the graph checks when it runs
 * (NB_ERR_INDEX).  A length that depends on n itself — a bound counted from
 * the end before one counted from the start, or a symbolic distance not a
 * multiple of |step| — is NB_ERR_SHAPE naming n.  nb_narrow and nb_select
 * (negative index: n + index) follow the same rule.
 */
#define NB_END INT64_MAX
nb_tensor *nb_slice(nb_tensor *t, int axis, int64_t start, int64_t stop, int64_t step);
/** Index `index` (negative counts from the end) of `axis`, dropping that axis. */
nb_tensor *nb_select(nb_tensor *t, int axis, int64_t index);
/**
 * Slicing specs (NumPy basic indexing, G4).  nb_index(t, specs, n) applies
 * specs[k] to the k-th axis of t (counting only axes that remain: SELECT
 * drops its axis); axes after the n-th are taken whole.  Each spec lowers to
 * one view op (slice / select), zero-copy eagerly and a view node when
 * traced; on a symbolic axis negative bounds count from the end as dims
 * (see nb_slice for the rule there).  Kinds:
 *   NB_ALL            the whole axis (no op)
 *   NB_IX(i)          index i (negative from the end), the axis kept with size 1
 *                     (t[i:i+1]; NB_ERR_INDEX out of range, unlike a slice)
 *   NB_RG(a, b)       the range a:b; NB_RGS(a, b, s) a:b:s (Python: negative
 *                     bounds from the end, clamped; NB_END an open bound; s != 0)
 *   NB_TAIL(a)        a: through the end (negative a from the end)
 *   NB_SEL(i)         index i, the axis dropped (nb_select)
 * Write a spec list with NB_S: nb_index(x, NB_S(NB_ALL, NB_RG(0, 64))) is
 * x[:, 0:64].  Errors: NB_ERR_NULL, NB_ERR_ARG (n < 0, unknown kind, step 0),
 * NB_ERR_INDEX (more specs than axes, an index out of range), and those of
 * the view ops, which name them.
 */
typedef enum nb_slice_kind {
    NB_SLICE_ALL, NB_SLICE_INDEX, NB_SLICE_RANGE, NB_SLICE_TAIL, NB_SLICE_SELECT, NB_SLICE_KIND_COUNT
} nb_slice_kind;
/** One axis of a slicing spec: INDEX / SELECT use start; RANGE start, stop, step; TAIL start. */
typedef struct nb_slice_spec {
    nb_slice_kind kind;
    int64_t start, stop, step;
} nb_slice_spec;
#define NB_ALL ((nb_slice_spec){NB_SLICE_ALL, 0, NB_END, 1})
#define NB_IX(i) ((nb_slice_spec){NB_SLICE_INDEX, (i), 0, 1})
#define NB_RG(a, b) ((nb_slice_spec){NB_SLICE_RANGE, (a), (b), 1})
#define NB_RGS(a, b, s) ((nb_slice_spec){NB_SLICE_RANGE, (a), (b), (s)})
#define NB_TAIL(a) ((nb_slice_spec){NB_SLICE_TAIL, (a), NB_END, 1})
#define NB_SEL(i) ((nb_slice_spec){NB_SLICE_SELECT, (i), 0, 1})
#define NB_S(...) ((const nb_slice_spec[]){__VA_ARGS__}), \
    ((int)(sizeof((const nb_slice_spec[]){__VA_ARGS__}) / sizeof(nb_slice_spec)))
/** t indexed by specs[0..n) (see above): a view of t (t itself, a new reference, for
 *  all-NB_ALL specs).  Differentiable through the view ops it lowers to. */
nb_tensor *nb_index(nb_tensor *t, const nb_slice_spec *specs, int n);
/** Remove `axis`, which must have size 1 (PyTorch returns t unchanged for size != 1; nabla reports NB_ERR_SHAPE).
 *  A symbolic size is not known to be 1: NB_ERR_SHAPE (nb_squeeze_all keeps it). */
nb_tensor *nb_squeeze(nb_tensor *t, int axis);
/** Remove every size-1 axis. */
nb_tensor *nb_squeeze_all(nb_tensor *t);
/** Insert a size-1 axis at position `axis` in [-ndim-1, ndim]. */
nb_tensor *nb_unsqueeze(nb_tensor *t, int axis);
/**
 * Broadcast view with stride 0 on expanded axes (torch.expand): leading new
 * axes may be added; -1 keeps a size.  Errors: NB_ERR_SHAPE naming both shapes.
 * Targets may hold symbolic dims (a size-1 axis expands to B); a symbolic
 * size only "expands" to itself.
 */
nb_tensor *nb_expand(nb_tensor *t, const int64_t *shape, int ndim);
/** NumPy broadcast_to (like nb_expand without -1). */
nb_tensor *nb_broadcast_to(nb_tensor *t, const int64_t *shape, int ndim);
/** Reverse the order of elements along each listed axis (axes NULL: every axis) — negative strides, a view (torch.flip copies). */
nb_tensor *nb_flip(nb_tensor *t, const int *axes, int naxes);
/** View of the diagonal of axes a and b, shifted by `offset`, appended as the last axis (torch.diagonal). */
nb_tensor *nb_diagonal(nb_tensor *t, int64_t offset, int a, int b);
/**
 * View with explicit shape, element strides and storage offset (>= 0, in
 * elements from the start of t's storage), checked so every reachable
 * element lies inside that storage (NB_ERR_INDEX otherwise; NB_ERR_OVERFLOW
 * when the extent overflows int64).  Not differentiable.  NB_ERR_UNSUPPORTED
 * on a symbolic tensor (its storage exists only when its graph runs).
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
/**
 * Write nb_to_string(t) and a newline to f.  Errors: NB_ERR_NULL, NB_ERR_IO
 * (write failed), and those of nb_to_string.
 */
nb_status nb_print(const nb_tensor *t, FILE *f);
/**
 * PyTorch 2.x's repr of t (torch/_tensor_str.py, default print options) in a
 * malloc'd string the caller frees; NULL on error (NB_ERR_NULL, NB_ERR_OOM,
 * NB_ERR_DEVICE for non-host tensors).  The format, exactly:
 *  - "tensor(" + body + suffixes + ")".  Body: rank 0 is the bare value;
 *    otherwise nested "[…]", elements joined by ", ", sub-tensors of rank r
 *    joined by "," + (r-1) newlines + indent, where the indent is 7 plus one
 *    per nesting level; a row wraps after (80 - indent) / (width + 2)
 *    elements.  Zero elements print "[]".
 *  - Float dtypes use one mode chosen from the nonzero finite values shown:
 *    all integers → "%.0f" plus "." ("3."); else fixed "%.4f"; scientific
 *    "%.4e" when max/min > 1000 or max > 1e8 (or, non-integers, min < 1e-4).
 *    nan, inf, -inf print as such.  Integers print in decimal, bool as
 *    True/False.  Every element is right-aligned to the widest nonzero finite
 *    value (+1 in integer mode; every value for integer dtypes).
 *  - More than 1000 elements: each axis longer than 6 shows its first and
 *    last 3 entries, with " ..." inside a row and "..." between slices.
 *  - Suffixes, each after ", " (or ",\n" + 7 spaces when the line would pass
 *    80 columns): device='ref:0' for non-CPU devices; size=(a, b, …) for an
 *    empty tensor that is not 1-D; dtype=NAME unless float32, int64 or bool
 *    (empty tensors: unless float32) — nabla writes "dtype=float64" where
 *    torch writes "dtype=torch.float64"; requires_grad=True for a tracked
 *    leaf, else grad_fn=<op> (nabla's op name, e.g. <mul>, where torch writes
 *    <MulBackward0>) for a recorded result.
 * Example: "tensor([[1., 2.],\n        [3., 4.]])".
 */
char *nb_to_string(const nb_tensor *t);

/* ------------------------------------------------------------------------ */
/* In-place updates (not recorded by autograd; NB_ERR_STATE when t requires
 * grad while recording is on, as in PyTorch for leaves).  These and nb_set /
 * nb_copy_from_host refuse (NB_ERR_ARG, naming shape and strides) a
 * destination whose elements may share an address: a stride-0 axis of more
 * than one element, or strides that let axes overlap (conservative: with the
 * axes sorted by |stride|, each stride must pass what the inner axes reach;
 * only nb_as_strided builds a distinct layout that fails this).              */
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
/* Deliberate difference: nb_sign(NaN) is NaN, as numpy.sign; torch.sign     */
/* returns 0 there (pytorch/pytorch#41245).  Pinned by tests/test_golden.c.  */
/* The sign of a zero result follows PyTorch in f32 and f64 (relu(-0) = -0,  */
/* tanh(-0) = -0, sign(-0) = +0), with one exception: gelu's zero results   */
/* (x = -0, x <= -30) are -0 in both, as torch's f64 kernel gives (its f32  */
/* kernel gives +0).                                                        */
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
/**
 * min(max(x, lo), hi); pass -INFINITY / INFINITY for an open side.  NaN stays
 * NaN; lo > hi gives hi everywhere and a zero x keeps its sign (as torch).
 * A NaN bound is NB_ERR_ARG, where torch.clamp returns NaN everywhere.
 * The result keeps x's dtype (bounds converted to it): unlike torch.clamp,
 * an integer x with fractional bounds is not promoted to float.
 * The gradient passes where lo < x < hi, bounds excluded (as torch 2.x with
 * scalar bounds).
 */
nb_tensor *nb_clamp(nb_tensor *x, double lo, double hi);

/* ------------------------------------------------------------------------ */
/* Binary elementwise ops with NumPy broadcasting (O2, O3, T7).              */
/* Each op NAME has nb_NAME_t(a, b) on tensors and scalar forms             */
/* nb_NAME_sf(a, double) / nb_NAME_si(a, int64_t); the macro nb_NAME(a, b)   */
/* picks one with _Generic.  A scalar takes part in promotion like a Python */
/* number in PyTorch: it only raises the category (int tensor + 2.5 → f32). */
/* A rank-0 tensor likewise only raises the category of operands with      */
/* dimensions (torch.result_type: f16 [n] * f64 rank-0 → f16).              */
/* ------------------------------------------------------------------------ */

#define NB_BINARY_DECL(name)                                  \
    nb_tensor *nb_##name##_t(nb_tensor *a, nb_tensor *b);     \
    nb_tensor *nb_##name##_sf(nb_tensor *a, double b);        \
    nb_tensor *nb_##name##_si(nb_tensor *a, int64_t b);
NB_BINARY_DECL(add) NB_BINARY_DECL(sub) NB_BINARY_DECL(mul) NB_BINARY_DECL(div)
NB_BINARY_DECL(pow) NB_BINARY_DECL(maximum) NB_BINARY_DECL(minimum) NB_BINARY_DECL(atan2)
NB_BINARY_DECL(remainder) NB_BINARY_DECL(eq) NB_BINARY_DECL(ne) NB_BINARY_DECL(lt)
NB_BINARY_DECL(le) NB_BINARY_DECL(gt) NB_BINARY_DECL(ge) NB_BINARY_DECL(logical_and)
NB_BINARY_DECL(logical_or) NB_BINARY_DECL(logical_xor) NB_BINARY_DECL(fmod)
#undef NB_BINARY_DECL

/* NULL (void *) goes to the tensor form, which reports NB_ERR_NULL; a pointer of any
 * other type falls to the integer form and draws a conversion diagnostic. */
#define NB_GENERIC_BINARY(name, a, b)                                        \
    _Generic((b), nb_tensor *: nb_##name##_t, void *: nb_##name##_t,          \
             float: nb_##name##_sf, double: nb_##name##_sf,                  \
             long double: nb_##name##_sf, default: nb_##name##_si)(a, b)
#define nb_add(a, b) NB_GENERIC_BINARY(add, a, b)
#define nb_sub(a, b) NB_GENERIC_BINARY(sub, a, b)
#define nb_mul(a, b) NB_GENERIC_BINARY(mul, a, b)
#define nb_div(a, b) NB_GENERIC_BINARY(div, a, b)          /**< true division (ints → f32) */
/** a^b; gradient as torch: d/da is 0 where b == 0, d/db is 0 where a == 0 and b >= 0. */
#define nb_pow(a, b) NB_GENERIC_BINARY(pow, a, b)
/** NaN propagates; the gradient goes to the larger input, split evenly on ties, to both at a NaN (torch).
 * Of -0 and +0 the result is a (std::max; torch's f32 kernel does so, its f64 kernel returns b). */
#define nb_maximum(a, b) NB_GENERIC_BINARY(maximum, a, b)
#define nb_minimum(a, b) NB_GENERIC_BINARY(minimum, a, b)  /**< like nb_maximum, for the smaller input */
#define nb_atan2(a, b) NB_GENERIC_BINARY(atan2, a, b)
#define nb_remainder(a, b) NB_GENERIC_BINARY(remainder, a, b) /**< Python-style: sign of divisor */
/**
 * C fmod, torch.fmod: a - trunc(a / b) b, with the sign of the dividend a (fmod(-7, 3) = -1,
 * remainder(-7, 3) = 2).  Exact on integers (C's %), where fmod by 0 is 0 (torch raises).
 * Gradient as torch: d/da = 1, d/db = -trunc(a / b).
 */
#define nb_fmod(a, b) NB_GENERIC_BINARY(fmod, a, b)
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
/**
 * Vector p-norm (sum |x|^p)^(1/p) over axes (torch.linalg.vector_norm);
 * p = INFINITY gives max |x|.  p > 0 (NB_ERR_ARG otherwise); float dtypes
 * (NB_ERR_DTYPE).  Its gradient is 0, not NaN, where the norm is 0 (torch).
 */
nb_tensor *nb_norm(nb_tensor *x, double p, const int *axes, int naxes, bool keepdim);
/**
 * Inclusive prefix sum / product along one axis (same shape; torch.cumsum /
 * torch.cumprod).  Bool and integer inputs give i64.  A rank-0 x accepts
 * axis 0 or -1 and is returned as is (torch).  The gradient of cumprod is
 * exact where x has zeros, at every order: under create_graph with a zero in
 * x it takes the O(L^2) form of torch's cumprod_backward (L the axis length).
 * Errors: NB_ERR_AXIS.
 */
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
/**
 * c + a @ b (torch.addmm with beta = alpha = 1; numpy-style batches as nb_matmul): a [..., m, k],
 * b [..., k, n] of rank >= 2, c broadcastable to the product's shape [..., m, n] (a bias [n],
 * a column [m, 1], a full [..., m, n]), all three of one float dtype.  Rounding: the product is
 * rounded to the dtype first and c added once, so the result equals nb_add(nb_matmul(a, b), c)
 * bit for bit (torch's BLAS path accumulates into c instead and may differ in the last bit);
 * the CPU backend adds c as each tile of the product is stored, saving the addition's pass over
 * memory.  Returns a new tensor of the product's shape.  Gradients: g bᵀ, aᵀ g, and g summed
 * to c's shape.
 * Errors: NB_ERR_NULL; NB_ERR_SHAPE (a or b of rank < 2, inner dims differ, batch dims or c do
 * not broadcast to the product's shape — the message shows all three shapes); NB_ERR_DTYPE
 * (dtypes differ, or not float).
 */
nb_tensor *nb_addmm(nb_tensor *c, nb_tensor *a, nb_tensor *b);
/**
 * y = x @ w^T + bias; x [..., in], w [out, in], bias [out] or NULL (torch.nn.functional.linear).
 * Errors: NB_ERR_NULL; NB_ERR_SHAPE (w not 2-D, or x's last axis not w's in — the message names
 * linear and shows x and w as given); those of nb_matmul and nb_addmm otherwise.  With a bias,
 * computed as nb_addmm(bias, x, wᵀ).
 */
nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *bias);
/**
 * Einstein summation (numpy.einsum / torch.einsum) over n >= 1 operands.
 * Subscripts are letters (case-sensitive), spaces are ignored.  Explicit
 * output "ij,jk->ik"; implicit output ("ij,jk") is "..." followed by the
 * letters that appear exactly once, in ASCII order (so "ii" is the trace and
 * "ji" the transpose).  A letter repeated within one operand takes its
 * diagonal ("ii->i"); letters missing from the output are summed.  "..."
 * stands for the remaining axes of an operand; these broadcast against each
 * other (right-aligned) and, when the explicit output has no "...", are
 * summed.  As in torch, an axis of size 1 broadcasts against the same letter
 * elsewhere.  Operands are contracted left to right in pairs with matmul
 * (no contraction-order optimization).  Operands must share one float dtype.
 * Result: a new tensor, or a view of the operand when the equation only
 * permutes or takes diagonals.  Errors (message quotes the equation):
 * NB_ERR_ARG for a malformed equation, a term count different from n, an
 * output letter absent from the inputs or repeated; NB_ERR_SHAPE when an
 * operand's rank does not match its term or a letter has two sizes (neither
 * 1); NB_ERR_DTYPE; NB_ERR_UNSUPPORTED when an intermediate would exceed
 * NB_MAX_DIMS axes.
 */
nb_tensor *nb_einsum(const char *equation, nb_tensor *const *operands, int n);

/* ---- attention (O9) ---- */
/** What an attention score is masked by (the seed's MaskKind). */
typedef enum nb_attn_mask {
    NB_ATTN_MASK_NONE,        /**< every query sees every key */
    NB_ATTN_MASK_CAUSAL,      /**< query i sees keys j <= i (top-left aligned, as torch's is_causal) */
    NB_ATTN_MASK_SLIDING,     /**< causal within a window: i - window < j <= i (Mistral, Gemma 2) */
    NB_ATTN_MASK_KEY_PADDING, /**< per batch row: mask_tensor is the lengths [B] (keys j < length[b]),
                                   integer, or a bool [B, Lk] (true: a real key) */
    NB_ATTN_MASK_BOOL,        /**< mask_tensor: bool, broadcastable to [B, Hq, Lq, Lk], true = attend */
    NB_ATTN_MASK_BIAS,        /**< mask_tensor: float, broadcastable to [B, Hq, Lq, Lk], added to the
                                   scaled (and capped) scores; -inf masks */
    NB_ATTN_MASK_COUNT
} nb_attn_mask;
/** Options of nb_scaled_dot_product_attention; zeros give an unmasked attention with torch's scale. */
typedef struct nb_attention_opts {
    nb_attn_mask mask;
    int64_t window;         /**< NB_ATTN_MASK_SLIDING: the keys a query sees, >= 1 */
    nb_tensor *mask_tensor; /**< KEY_PADDING, BOOL, BIAS: see nb_attn_mask (borrowed) */
    double scale;           /**< score scale; 0: 1/sqrt(D) (a symbolic D: worked out when the graph runs) */
    double softcap;         /**< > 0: scores become softcap·tanh(score/softcap) before masking (Gemma 2);
                                 one beyond the dtype's range (inf) caps nothing */
} nb_attention_opts;
/**
 * softmax(scale · q kᵀ [masked], over the keys) v — torch.nn.functional.scaled_dot_product_attention
 * (Vaswani et al. 2017) with q [B, Hq, Lq, D], k [B, Hkv, Lk, D], v [B, Hkv, Lk, Dv] -> [B, Hq, Lq, Dv]:
 * grouped-query heads when Hkv divides Hq (query head h reads key/value head h / (Hq/Hkv), torch's
 * enable_gqa; Hkv = 1 is multi-query), without copying k or v per head.  A query whose every key is
 * masked gets zeros (torch's math path gives NaN).  f16/bf16 compute in f32.  Unmasked, causal and
 * sliding-window attention in f32/f64 without a soft-cap run a fused kernel (the ATTENTION op, in
 * the manner of FlashAttention, Dao et al. 2022: tiles of queries and keys, an online softmax, no
 * [Lq, Lk] score tensor, the tiles past a causal diagonal skipped); the other masks, soft-capped
 * scores and half precision are computed from the op table's ops.  The kernel's gradient in an
 * eager backward pass (without create_graph) is tiled too (FlashAttention-2's backward: the
 * probabilities recomputed per tile from the forward's row logsumexps, no [Lq, Lk] tensor);
 * traced, in transforms and with create_graph it is written with public ops (so it can be
 * differentiated again), forming [Lq, Lk] for the batch.  Differentiable,
 * traceable and batchable either way.  Errors: NB_ERR_SHAPE (ranks, sizes, heads, a mask tensor's shape),
 * NB_ERR_DTYPE (q, k, v of several or non-float dtypes; a mask tensor of the wrong kind), NB_ERR_ARG
 * (window < 1, a negative or NaN soft-cap, a NaN or infinite scale, unknown mask kind), NB_ERR_NULL.
 * A bool or bias mask must broadcast to [B, Hq, Lq, Lk] (NB_ERR_SHAPE naming it otherwise).
 */
nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_attention_opts opts);
/**
 * Rotary position embedding (Su et al., "RoFormer", 2021) of x [..., L, D] (D even and concrete):
 * position p = offset + row, frequency i = base^(-2i/D), each pair rotated by p · frequency — the
 * pairs being (x[i], x[i + D/2]) (halves: GPT-NeoX, Llama) or (x[2i], x[2i+1]) when interleaved
 * (GPT-J, the paper).  base 10000 is the usual value.  Errors: NB_ERR_SHAPE, NB_ERR_ARG (base <= 1).
 */
nb_tensor *nb_rotary_embedding(nb_tensor *x, int64_t offset, double base, bool interleaved);

/* ---- small batched linear algebra (O11; torch.linalg's names and semantics) ----
 * Matrices are the last two dims of a tensor, batched over the leading ones (broadcast between
 * A and B where two are taken).  The factorizations and solves (cholesky, solve_triangular,
 * solve, slogdet and what is built on them) take float32 or float64, compute each matrix in
 * double (a float32 result rounded once) and run a batch's matrices in parallel.  A matrix
 * without a result is a typed error, never NaN: NB_ERR_ARG naming the op, the matrix's index in
 * the batch, the input's shape and what failed (a leading minor that is not positive, a zero
 * pivot or diagonal element).  Other errors: NB_ERR_SHAPE (not square, B not [..., n, k], batch
 * dims that do not broadcast), NB_ERR_DTYPE (not f32/f64, A and B of two dtypes), NB_ERR_NULL.
 * Every op is differentiable (Giles 2008; Murray 2016 for cholesky), in graphs and transforms too.
 */
/** The lower (tril) or upper (triu) triangle of the last two dims of x [..., n, m], from diagonal
 *  k up or down (k > 0 above the main one), zeros elsewhere (torch.tril / torch.triu). */
nb_tensor *nb_tril(nb_tensor *x, int64_t k);
nb_tensor *nb_triu(nb_tensor *x, int64_t k);
/** torch.diag: a vector x [n] -> the matrix [n + |k|, n + |k|] with x on diagonal k; a matrix ->
 *  its diagonal k (a view).  Other ranks: NB_ERR_SHAPE. */
nb_tensor *nb_diag(nb_tensor *x, int64_t k);
/** torch.diag_embed: x [..., n] -> matrices with x on diagonal `offset` of dims dim1, dim2 of
 *  the result (rank + 1; sizes n + |offset|), zeros elsewhere.  NB_ERR_AXIS for equal or
 *  out-of-range dims, NB_ERR_OVERFLOW for an offset whose size overflows.  Traced, a nonzero
 *  offset needs a concrete n (the diagonal view's length). */
nb_tensor *nb_diag_embed(nb_tensor *x, int64_t offset, int dim1, int dim2);
/** The sum of the main diagonal of each matrix of x [..., n, m] -> [...] (torch.trace, which
 *  takes only one matrix, batched here). */
nb_tensor *nb_trace(nb_tensor *x);
/** L with A = L L^T for symmetric positive-definite A [..., n, n] (lower; with upper, U = L^T
 *  and A = U^T U), torch.linalg.cholesky.  Only A's lower triangle is read.  Not positive
 *  definite: NB_ERR_ARG naming the matrix and the order of the failing leading minor. */
nb_tensor *nb_cholesky(nb_tensor *a, bool upper);
/** X [..., n, k] with op(A) X = B for triangular A [..., n, n] (its upper triangle when upper,
 *  else its lower; op(A) = A^T when transpose; ones assumed on the diagonal when unitriangular),
 *  B [..., n, k] (torch.linalg.solve_triangular with left=True; transpose as
 *  torch.triangular_solve's).  A zero on the diagonal: NB_ERR_ARG. */
nb_tensor *nb_solve_triangular(nb_tensor *a, nb_tensor *b, bool upper, bool transpose, bool unitriangular);
/** X with A X = B (torch.linalg.solve: LU with partial pivoting), A [..., n, n]; B [..., n, k],
 *  or a vector right-hand side — B [n], or B [..., n] with A's batch dims — giving X of B's
 *  shape.  A singular A (an exactly zero pivot): NB_ERR_ARG naming the matrix and the column;
 *  a nearly singular one gives large values, as LAPACK's. */
nb_tensor *nb_solve(nb_tensor *a, nb_tensor *b);
/** sign [...] and log|det A| [...] of A [..., n, n] (torch.linalg.slogdet), both scoped; a
 *  singular A gives sign 0 and -inf (no error).  The gradient flows through logabsdet
 *  (A^-T); at a singular A computing it is NB_ERR_ARG (solve's).  Errors: NB_ERR_NULL, and the
 *  shape and dtype errors above. */
nb_status nb_slogdet(nb_tensor *a, nb_tensor **sign, nb_tensor **logabsdet);
/** det A = sign · exp(log|det A|) [...] (0 for a singular A; its gradient there is NB_ERR_ARG,
 *  where torch uses the adjugate). */
nb_tensor *nb_det(nb_tensor *a);
/** log det A [...]: -inf for a singular A, NaN (with a zero gradient) for a negative determinant
 *  (torch.logdet). */
nb_tensor *nb_logdet(nb_tensor *a);
/** A^-1 [..., n, n] (torch.linalg.inv, by solve against the identity).  Singular: NB_ERR_ARG. */
nb_tensor *nb_inv(nb_tensor *a);

/* ---- scaled low-precision formats and matmul (O10) ----
 * A low-precision tensor is its codes plus scales: the value of element i is
 * decode(code[i]) * scale(block_of(i)) (the seed's ScaledFormat and ScaleLayout).  Codes are
 * stored as uint8 tensors, packed along the last axis: 8-bit formats one code a byte, 6-bit ones
 * four codes in three bytes (code j of a group in bits 6j..6j+5 of the little-endian 24-bit
 * word), 4-bit ones two a byte (the even element in the low nibble, as torch's
 * float4_e2m1fn_x2).  Element formats are those of ml_dtypes (names, fields, special values)
 * and of the OCP "8-bit Floating Point" (2023) and "Microscaling Formats (MX) v1.0" specs.
 */
/** Element formats (append-only).  S.E.M bits, exponent bias, the largest finite value, and
 *  what is special:
 *   F8E4M3FN    1.4.3 bias 7,  max 448,   NaN S.1111.111, no infinities (OCP E4M3)
 *   F8E5M2      1.5.2 bias 15, max 57344, IEEE infinities and NaNs (OCP E5M2)
 *   F8E4M3FNUZ  1.4.3 bias 8,  max 240,   one NaN 0x80, no -0, no infinities
 *   F8E5M2FNUZ  1.5.2 bias 16, max 57344, one NaN 0x80, no -0, no infinities
 *   F6E2M3      1.2.3 bias 1,  max 7.5,   every code finite (MXFP6)
 *   F6E3M2      1.3.2 bias 3,  max 28,    every code finite (MXFP6)
 *   F4E2M1      1.2.1 bias 1,  max 6,     every code finite (MXFP4, NVFP4) */
typedef enum nb_scaled_format {
    NB_FMT_F8E4M3FN, NB_FMT_F8E5M2, NB_FMT_F8E4M3FNUZ, NB_FMT_F8E5M2FNUZ,
    NB_FMT_F6E2M3, NB_FMT_F6E3M2, NB_FMT_F4E2M1,
    NB_SCALED_FORMAT_COUNT
} nb_scaled_format;
/** How the scales of a low-precision tensor are laid out (append-only). */
typedef enum nb_scale_layout {
    NB_SCALE_TENSOR, /**< one float32 scale for the whole tensor (FP8 "per-tensor" scaling) */
    NB_SCALE_MX,     /**< one E8M0 scale (a power of two, 2^(code - 127); code 255 is NaN) per 32
                          elements along the last axis (OCP MX v1.0); not the FNUZ formats */
    NB_SCALE_NVFP4,  /**< one F8E4M3FN scale per 16 elements along the last axis times one float32
                          global scale (NVIDIA's NVFP4); F4E2M1 only */
    NB_SCALE_LAYOUT_COUNT
} nb_scale_layout;
/** ml_dtypes' name of a format ("float8_e4m3fn", "float4_e2m1fn", …); "invalid" otherwise. */
const char *nb_scaled_format_name(nb_scaled_format f);
/** Bits of one code (8, 6 or 4); 0 for an invalid format. */
int nb_scaled_format_bits(nb_scaled_format f);
/** The largest finite value of a format (448, 57344, 240, 57344, 7.5, 28, 6); 0 if invalid. */
double nb_scaled_format_max(nb_scaled_format f);
/**
 * Encode n float32 values as codes of format f, one code a byte (unpacked, as ml_dtypes stores
 * them): round to nearest, ties to even, exactly as ml_dtypes' astype from float32 — a value
 * beyond the largest finite one becomes inf (F8E5M2), NaN (F8E4M3FN, the FNUZ formats) or the
 * signed largest value (the 6- and 4-bit formats, which saturate); ±inf likewise; NaN becomes
 * the format's NaN (0x7f / 0x7e with the sign; 0x80 for FNUZ) and, in the formats without one,
 * a zero of the opposite sign (ml_dtypes' rule: +NaN gives the code of -0); -0 is 0x00 in the
 * FNUZ formats.  Errors: NB_ERR_NULL
 * (x or codes with n > 0), NB_ERR_ARG (an unknown format, n < 0).
 */
nb_status nb_scaled_encode(nb_scaled_format f, const float *x, int64_t n, uint8_t *codes);
/** Decode n codes of format f (one a byte, unpacked) to float32, exactly.  Errors: NB_ERR_NULL,
 *  NB_ERR_ARG (an unknown format, n < 0, a code of more bits than the format has). */
nb_status nb_scaled_decode(nb_scaled_format f, const uint8_t *codes, int64_t n, float *x);
/** A low-precision tensor of logical shape [..., K] (see nb_quantize); its tensors are scoped
 *  like any result. */
typedef struct nb_quantized {
    nb_tensor *codes;        /**< uint8 [..., K·bits/8]: the packed codes */
    nb_tensor *scales;       /**< TENSOR: float32 [] (the scale); MX: uint8 [..., K/32] E8M0 codes;
                                  NVFP4: uint8 [..., K/16] F8E4M3FN codes */
    nb_tensor *global_scale; /**< NVFP4: float32 [], the global scale; NULL otherwise */
    nb_scaled_format format;
    nb_scale_layout layout;
} nb_quantized;
/**
 * Quantize x [..., K] (any float dtype, rounded to float32 first; K concrete) into *out.
 * Scales, with amax the largest |x| over what a scale covers:
 *   TENSOR: scale = max(amax / max(format), 2^-126) (float32);
 *   MX: 2^e per block of 32, e = floor(log2(amax)) - emax(format), clamped to [-127, 127]
 *       (OCP MX v1.0, section 6.3; emax the exponent of the format's largest normal: 8, 15, 2,
 *       4, 2); 2^-127 for a block of zeros; NaN (code 255) for a block holding NaN or ±inf;
 *   NVFP4: global g = max(amax / (448 · 6), 2^-126) (float32); per block of 16 the F8E4M3FN
 *       code of amax_block / (6 g), rounded to nearest even and saturated; its scale is
 *       decode(code) · g (a block whose scale rounds to 0 gets zero codes).
 * Each code is the element divided by its scale (in float32) and encoded as nb_scaled_encode
 * does, except that finite values beyond the format's range saturate to ±max (the MX rule).
 * A NaN in x makes the scale covering it NaN and an infinite one makes it NaN (MX, NVFP4 blocks)
 * or infinite (TENSOR); dequantizing then gives NaN wherever that scale applies.  An empty x gets
 * the least scale 2^-126 (TENSOR, NVFP4).
 * Not differentiable (the codes are integers).  Errors: NB_ERR_NULL, NB_ERR_DTYPE (x not
 * float), NB_ERR_SHAPE (rank 0; K symbolic, or not a multiple of the block (32 MX, 16 NVFP4) or
 * of the packing (4 for 6-bit, 2 for 4-bit formats)), NB_ERR_ARG (an unknown format or layout,
 * MX with a FNUZ format, NVFP4 with another format than F4E2M1).  On error *out is zeroed.
 */
nb_status nb_quantize(nb_tensor *x, nb_scaled_format f, nb_scale_layout layout, nb_quantized *out);
/** The values decode(code) · scale of q, [..., K], in float dtype dt (computed in float32, then
 *  rounded to dt).  Errors: NB_ERR_NULL, NB_ERR_DTYPE (dt not float; codes not uint8; scales
 *  of the wrong dtype), NB_ERR_SHAPE (codes, scales and global scale that do not fit each
 *  other, the format and the layout), NB_ERR_ARG (format or layout). */
nb_tensor *nb_dequantize(const nb_quantized *q, nb_dtype dt);
/**
 * a · bᵀ for low-precision a [..., M, K] and b [N, K] (both quantized along K — the "NT" form
 * of low-precision GEMMs, as torch._scaled_mm's column-major b) -> [..., M, N] of float dtype
 * out_dtype.  a and b share a layout; their formats may differ (E4M3 · E5M2).  The CPU kernel
 * decodes the codes while packing the GEMM's panels (no float copy of either operand) and
 * accumulates in float32, as a float32 GEMM of the dequantized operands would: within float32
 * rounding of Σ|a||b| of a float64 matmul of them (scales so extreme that float32 products
 * underflow or overflow give 0 or inf where float64 would not).  Not differentiable.  Errors: NB_ERR_NULL, NB_ERR_ARG (layouts differ, a
 * format, a global scale given to a layout other than NVFP4), NB_ERR_SHAPE (b not 2-D, a not at
 * least 2-D, K differs, codes and scales that do not fit), NB_ERR_DTYPE (out_dtype not float;
 * codes or scales of the wrong dtype).
 */
nb_tensor *nb_scaled_matmul(const nb_quantized *a, const nb_quantized *b, nb_dtype out_dtype);

/* ------------------------------------------------------------------------ */
/* Neural-network functions and losses (O6)                                 */
/* These are composites: autograd flows through the ops they are built      */
/* from.  Float inputs are required (NB_ERR_DTYPE otherwise), as in torch.  */
/* ------------------------------------------------------------------------ */

/**
 * softmax(x)_i = exp(x_i - m) / Σ_j exp(x_j - m) along `axis`, m = max (held
 * constant for differentiation).  Same shape and dtype as x.  A row of all
 * -inf gives NaN (as torch).  Errors: NB_ERR_DTYPE, NB_ERR_AXIS.
 */
nb_tensor *nb_softmax(nb_tensor *x, int axis);
/** log_softmax(x) = (x - m) - log Σ exp(x - m) along `axis` (stable; as nb_softmax otherwise). */
nb_tensor *nb_log_softmax(nb_tensor *x, int axis);
/**
 * Layer normalization over the last `nnorm` axes (Ba et al. 2016;
 * torch.nn.functional.layer_norm): (x - mean) / sqrt(var_biased + eps) * w + b.
 * x [..., D1..Dk] with k = nnorm in [1, ndim]; weight and bias are [D1..Dk]
 * or NULL.  Errors: NB_ERR_ARG (nnorm), NB_ERR_SHAPE (weight/bias shape),
 * NB_ERR_DTYPE.
 */
nb_tensor *nb_layer_norm(nb_tensor *x, int nnorm, nb_tensor *weight, nb_tensor *bias, double eps);
/**
 * RMS normalization over the last `nnorm` axes (Zhang & Sennrich 2019;
 * torch.nn.functional.rms_norm): x / sqrt(mean(x²) + eps) * w, weight
 * [D1..Dk] or NULL.  eps is explicit (torch's None means the dtype's
 * machine epsilon).  Errors as nb_layer_norm.
 */
nb_tensor *nb_rms_norm(nb_tensor *x, int nnorm, nb_tensor *weight, double eps);
/**
 * Inverted dropout (Srivastava et al. 2014; torch.nn.functional.dropout):
 * x * bernoulli(1-p) / (1-p) with the mask drawn from this thread's
 * generator.  Returns a new reference to x itself when !training, p == 0 or
 * x is empty; x * 0 when p == 1.  Errors: NB_ERR_ARG for p outside [0, 1]
 * (or NaN), NB_ERR_DTYPE for non-float x in training.
 */
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
 * Cross entropy of logits [N, C], [C] or [N, C, d1, …] (class axis 1, or 0
 * for [C]) as torch.nn.functional.cross_entropy, with logp = log_softmax
 * over the class axis and ls = label_smoothing:
 *  - class indices: target [N, d1, …] ([] for [C] logits), any integer
 *    dtype.  Per target (1-ls)·(-logp[t]) + (ls/C)·Σ_c(-logp[c]); 0 where
 *    t == ignore_index.  Mean divides by the number of non-ignored targets
 *    (NaN when all are ignored, as torch); none returns target's shape.
 *  - class probabilities: target shaped like logits, float dtype.  Per
 *    position -Σ_c logp[c]·(t[c](1-ls) + ls/C); mean divides by numel/C;
 *    ignore_index does not apply.
 * A target with the logits' shape is read as probabilities.  Result dtype:
 * the logits'.  Errors: NB_ERR_INDEX naming a class index outside [0, C)
 * that is not ignore_index; NB_ERR_SHAPE naming both shapes; NB_ERR_DTYPE
 * (non-float logits or probabilities, float class indices); NB_ERR_ARG
 * (label_smoothing outside [0, 1], bad reduction).  A traced (symbolic)
 * class-index target traces too: its range is checked when the graph runs,
 * by the gather that picks logp[t] (the NB_ERR_INDEX then names gather);
 * nb_nll_loss likewise.
 */
nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_opts opts);
/**
 * Negative log-likelihood (torch nll_loss): -logp[t] at class indices,
 * shapes and ignore_index/mean handling as the class-index form of
 * nb_cross_entropy (which is nll_loss(log_softmax(logits))).
 */
nb_tensor *nb_nll_loss(nb_tensor *logp, nb_tensor *target, nb_reduction reduction, int64_t ignore_index);
/**
 * Mean squared error (torch mse_loss): (input - target)², reduced.  Shapes
 * broadcast (torch warns; nabla is silent).  Needs a float operand.
 */
nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction);
/**
 * Binary cross entropy on logits (torch binary_cross_entropy_with_logits,
 * no weights): -[t log σ(x) + (1-t) log(1-σ(x))], computed stably as
 * x - t·x + softplus(-x) (softplus linear beyond 20, or 40 in f64), so the
 * gradient σ(x) - t is exact everywhere including x = 0.  target must have
 * the logits' shape (NB_ERR_SHAPE); logits must be float.
 */
nb_tensor *nb_bce_with_logits(nb_tensor *logits, nb_tensor *target, nb_reduction reduction);

/* ------------------------------------------------------------------------ */
/* Indexing and joining (O7).  Index tensors are integer dtypes.            */
/* ------------------------------------------------------------------------ */
/* Index errors (index_select, gather, scatter_add, take_along_axis,
 * embedding, one_hot): NB_ERR_DTYPE for a float or bool index; NB_ERR_INDEX
 * naming the op and the first index value outside [0, size) (negative values
 * are errors, not counted from the end).  For a traced op the dtype is
 * checked while tracing and the values when the compiled graph runs. */

/** Entries of x at `index` (1-D) along axis (torch.index_select). */
nb_tensor *nb_index_select(nb_tensor *x, int axis, nb_tensor *index);
/** out[i][j] = x[i][index[i][j]] along axis (torch.gather); index has x's rank. */
nb_tensor *nb_gather(nb_tensor *x, int axis, nb_tensor *index);
/** Copy of x with src added at index along axis (torch.scatter_add; duplicates accumulate). */
nb_tensor *nb_scatter_add(nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src);
/** numpy.take_along_axis: like gather, with index broadcast against x on the other axes. */
nb_tensor *nb_take_along_axis(nb_tensor *x, nb_tensor *index, int axis);
/**
 * One-hot encoding of integer `index` with `num_classes` classes, i64 result [..., C].
 * Errors: NB_ERR_ARG when num_classes <= 0 (there is no "infer C from the largest
 * index" form: -1 is NB_ERR_ARG, traced or not, since a traced shape cannot depend on
 * data), NB_ERR_DTYPE for a float or bool index, NB_ERR_INDEX naming the first value
 * outside [0, num_classes) (for a traced index: when the compiled graph runs).
 */
nb_tensor *nb_one_hot(nb_tensor *index, int64_t num_classes);
/** Rows of `weight` [V, D] at integer `index` [...] → [..., D] (torch embedding). */
nb_tensor *nb_embedding(nb_tensor *weight, nb_tensor *index);
/** Concatenate along an existing axis; shapes must match elsewhere; dtypes promote.  Symbolic
 *  sizes along the axis add up as dims ([B, 2] and [B, 3] along 1: [B, 5]; [B, 2] twice along 0: [2*B, 2]). */
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
 * Constant mode pads symbolic sizes too (B with (1, 2): B+3).
 */
nb_tensor *nb_pad(nb_tensor *x, const int64_t *pads, int npad, nb_pad_mode mode, double value);

/* ------------------------------------------------------------------------ */
/* Autograd (A1–A6)                                                         */
/* ------------------------------------------------------------------------ */

/** Mark a float leaf tensor as tracked (or not).  Errors: NB_ERR_DTYPE for non-float, NB_ERR_STATE for non-leaves
 *  and for symbolic or lazy tensors (the tape records concrete tensors only: use nb_graph_grad). */
nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad);
bool nb_requires_grad(const nb_tensor *t);
/** True when t has no tape node (created by the user, or detached). */
bool nb_is_leaf(const nb_tensor *t);
/** Accumulated gradient of a tracked leaf: a new reference, or NULL (no error set) when none yet. */
nb_tensor *nb_grad(nb_tensor *t);
/** Drop t's accumulated gradient. */
void nb_zero_grad(nb_tensor *t);
/** A view of t sharing storage but cut from the tape (requires_grad false): torch's detach /
 *  jax.lax.stop_gradient.  On a symbolic t a DETACH node, through which nb_graph_grad passes no gradient. */
nb_tensor *nb_detach(nb_tensor *t);

/**
 * Reverse-mode pass from `root`.  seed: d(out)/d(root), shaped like root;
 * NULL is allowed only for one-element roots (seed 1).  Gradients accumulate
 * (+=) into every tracked leaf's grad; a leaf's grad is a tensor of its own,
 * never shared with the seed or another leaf's grad.  With create_graph the
 * pass is itself recorded, so gradients can be differentiated again (A5);
 * the grads then reference the graph, which references the leaves:
 * nb_zero_grad breaks that cycle.  A seed of another dtype is cast to root's
 * (as torch does).  Errors: NB_ERR_STATE when root is not tracked;
 * NB_ERR_SHAPE for a bad seed; NB_ERR_DEVICE for a seed on another device.
 */
nb_status nb_backward(nb_tensor *root, nb_tensor *seed, bool create_graph);
/** A hook of nb_register_post_accumulate_grad_hook: ctx as registered, the leaf whose grad is final. */
typedef void (*nb_grad_hook_fn)(void *ctx, nb_tensor *leaf);
/**
 * Call fn(ctx, leaf) in every nb_backward that reaches the tracked leaf through the tape (not when
 * the leaf is the root itself), as soon as the pass has added its last contribution to the leaf's
 * grad (torch's register_post_accumulate_grad_hook; what data-parallel training starts
 * communicating on).  It runs on the thread of nb_backward, inside the pass; it may read the grad
 * (nb_grad) but must not change it; a pass started from a hook is NB_ERR_STATE.  A hook may record
 * an error (nb_backward then returns it).
 * The leaf is retained until the hook is removed.  Returns an id > 0 for
 * nb_remove_grad_hook, or 0 with NB_ERR_NULL (leaf or fn) or NB_ERR_STATE (leaf not a tracked
 * leaf).  Hooks of one leaf run in registration order.
 */
int64_t nb_register_post_accumulate_grad_hook(nb_tensor *leaf, nb_grad_hook_fn fn, void *ctx);
/** Remove hook id (releasing its leaf).  NB_ERR_ARG for an id not registered. */
nb_status nb_remove_grad_hook(int64_t id);
/**
 * Gradients of `root` with respect to `n` inputs (torch.autograd.grad), not
 * touching leaves' grad fields.  Writes n new references to grads_out (a
 * zeros tensor for an input root does not depend on); all NULL on failure.
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
/* Files and data (N3, N4): safetensors, .npy, IDX datasets                 */
/* ------------------------------------------------------------------------ */
/* ---- IDX files (the MNIST family) and mini-batches ---------------------- */

/**
 * Read an IDX file (LeCun, Cortes & Burges, "THE IDX FILE FORMAT" on the
 * MNIST page): two zero bytes, a type code, the rank r, r big-endian u32
 * sizes, then the elements in row-major order, big-endian.  The file may be
 * gzip-compressed (decompressed by zlib) or plain.  Type codes: 0x08 → u8,
 * 0x09 → i8, 0x0C → i32, 0x0D → f32, 0x0E → f64; 0x0B (i16) has no nabla
 * dtype.  Rank must be in [1, NB_MAX_DIMS].
 *
 * Returns a new contiguous CPU tensor of the stored shape and dtype (MNIST
 * images: u8 [N, 28, 28], labels: u8 [N]).  Errors, each message naming the
 * file: NB_ERR_NULL (path); NB_ERR_IO (cannot open or read); NB_ERR_FORMAT
 * (bad magic or type code, rank outside [1, NB_MAX_DIMS], truncated data —
 * the message gives the expected and the actual byte count —, trailing bytes
 * (after the data, or after the last gzip member), a corrupted or truncated
 * gzip stream, or declared sizes larger than a gzip file of that
 * size can decompress to); NB_ERR_OVERFLOW (the sizes' product overflows);
 * NB_ERR_UNSUPPORTED (type 0x0B); NB_ERR_OOM.
 */
nb_tensor *nb_idx_load(const char *path);

/** Where the Debian package dataset-fashion-mnist installs the data set. */
#define NB_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"
/**
 * Load the training (train = true: `train-images-idx3-ubyte[.gz]`,
 * `train-labels-idx1-ubyte[.gz]`) or test split (`t10k-…`) of
 * Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from `dir`; NULL means
 * NB_FASHION_MNIST_DIR.  The gzip'd name is tried first, then the plain one.
 * MNIST uses the same file names, so it loads from its own directory too.
 *
 * On success writes two new references (scoped like any result):
 * *images: f32 [N, H*W] (784 columns for 28×28), pixel / 255 in [0, 1] as
 * torchvision's ToTensor; flattened for an MLP — a CNN views it as
 * [N, 1, 28, 28] with nb_reshape (no copy).  *labels: i64 [N].  On failure
 * both are set to NULL.  Errors: NB_ERR_NULL (images or labels); NB_ERR_IO
 * when a file is missing (the message names the path and says to install
 * the Debian package dataset-fashion-mnist or pass the directory);
 * NB_ERR_ARG (a directory name longer than 4000 bytes); the errors of
 * nb_idx_load; NB_ERR_FORMAT when the images are not u8 [N, H, W]
 * or the labels not u8 [N] with the same N.
 */
nb_status nb_fashion_mnist_load(const char *dir, bool train, nb_tensor **images, nb_tensor **labels);

/**
 * Rows perm[start : start+count] of x, gathered into a new contiguous
 * tensor: x [N, ...] (any dtype, host device) and perm [M] (i64 or i32, e.g.
 * nb_randperm(N)) give [k, ...] with k = min(count, M - start), on x's
 * device, with x's dtype — PyTorch's x[perm[start:start+count]] for one
 * mini-batch; a loop `for (s = 0; s < N; s += B)` covers an epoch with a
 * short last batch.  Rows are copied with memcpy.  Not recorded by autograd
 * (data loading); nb_index_select is the differentiable gather.  Errors:
 * NB_ERR_NULL; NB_ERR_SHAPE (x rank 0, perm not 1-D); NB_ERR_DTYPE (perm not
 * i64/i32); NB_ERR_ARG (start outside [0, M] or count < 0); NB_ERR_INDEX (an
 * index outside [0, N) — negative indices are not wrapped); NB_ERR_DEVICE.
 */
nb_tensor *nb_take_rows(nb_tensor *x, nb_tensor *perm, int64_t start, int64_t count);

/* ---- safetensors ---------------------------------------------------------
 * Format (huggingface/safetensors): an 8-byte little-endian u64 N, N bytes of
 * JSON header {"name": {"dtype": "F32", "shape": [...], "data_offsets":
 * [begin, end]}, ..., optional "__metadata__": {string: string}}, then the
 * data buffer (offsets relative to its start, little-endian, row-major; the
 * tensors cover it exactly, without overlaps or holes).  Dtype names: F64
 * F32 F16 BF16 I64 I32 I8 U8 BOOL. */

/**
 * Write n named tensors to `path` atomically: the file is written to a
 * temporary file in the same directory, flushed with fsync, and renamed over
 * `path`; after any failure an earlier file at `path` is intact and the
 * temporary file is removed.  A symlink at `path` is written through: the
 * file it resolves to (realpath) is replaced, next to itself, and the link
 * stays.  An existing file keeps its permission bits (a new one gets 0666
 * less the umask; the owner is the caller's, and hard links to the old file
 * keep the old contents, as with any rename-based save).  An existing
 * target that is not a regular file (device, FIFO, socket, directory) or a
 * dangling symlink is refused with NB_ERR_IO before anything is written.  Tensors may be views (saved row-major) on any
 * device; they are borrowed.  The header is padded with spaces to a multiple
 * of 8 bytes and the data are laid out by decreasing element size, so every
 * tensor is naturally aligned in the file (as the Python package does).
 * Errors: NB_ERR_NULL (path, names, tensors or an entry NULL); NB_ERR_ARG
 * (n < 0, a name empty, "__metadata__", not UTF-8, or repeated);
 * NB_ERR_OVERFLOW; NB_ERR_IO (create, write, fsync or rename failed — the
 * message names the file and the system error); NB_ERR_OOM.
 */
nb_status nb_safetensors_save(const char *path, const char *const *names, nb_tensor *const *tensors, int n);

/** Opaque handle on a memory-mapped safetensors file (reference counted). */
typedef struct nb_safetensors nb_safetensors;

/**
 * Open and memory-map `path` (private mapping: the file is never modified)
 * and validate every header field before returning: the header length
 * against the file size and the 100 MB limit of the reference
 * implementation; the JSON (parsed by jansson; duplicate keys rejected); the
 * top level is an object; every tensor name is non-empty; each entry is an
 * object with a dtype string, a shape (array of at most NB_MAX_DIMS
 * non-negative integers, product overflow-checked) and data_offsets (two
 * integers, begin <= end <= data size, end - begin = numel × element size);
 * the tensors cover the data buffer exactly with no overlap and no hole;
 * __metadata__, when present, maps strings to strings.  Fields other than
 * these three in an entry are ignored, as the reference implementation does.
 * Spec dtypes nabla lacks (I16 U16 U32 U64 F8_E4M3 F8_E5M2 F8_E8M0) pass
 * validation; nb_safetensors_get reports them.
 *
 * Returns a handle the caller closes with nb_safetensors_close (not tied to
 * scopes).  Errors, each message naming the file and the field at fault:
 * NB_ERR_NULL; NB_ERR_IO (cannot open/stat/map, not a regular file);
 * NB_ERR_FORMAT (any check above); NB_ERR_OVERFLOW (shape product);
 * NB_ERR_UNSUPPORTED (a dtype name outside the spec list, rank above
 * NB_MAX_DIMS); NB_ERR_OOM.  Limitation of every mmap reader: if another
 * process truncates the file while it is mapped, reading a tensor faults;
 * nb_safetensors_save over an open file is safe (it renames, never truncates).
 */
nb_safetensors *nb_safetensors_open(const char *path);
/** Number of tensors in the file (__metadata__ excluded); -1 with NB_ERR_NULL for NULL. */
int nb_safetensors_count(const nb_safetensors *h);
/**
 * Name of tensor i, in data-offset order (the file's layout), borrowed from
 * the handle and valid until it is closed.  NULL with NB_ERR_NULL or
 * NB_ERR_INDEX (i outside [0, count)).
 */
const char *nb_safetensors_name(const nb_safetensors *h, int i);
/**
 * The tensor called `name`, as a new CPU tensor reference (scoped like any
 * result) of the file's shape and dtype.  When its data are aligned to the
 * element size (always, for files written by nabla or the Python package) the
 * tensor BORROWS the mapped memory without copying: the mapping stays alive
 * while any such tensor does, even after nb_safetensors_close; writes to it
 * go to private copy-on-write pages, never to the file.  Otherwise the data
 * are copied.  Errors: NB_ERR_NULL; NB_ERR_ARG (no tensor of that name);
 * NB_ERR_UNSUPPORTED (a spec dtype nabla lacks, e.g. I16); NB_ERR_OOM.
 */
nb_tensor *nb_safetensors_get(nb_safetensors *h, const char *name);
/** Drop the caller's handle; the mapping is unmapped when no borrowed tensor remains.  NULL is a no-op. */
void nb_safetensors_close(nb_safetensors *h);

/* ------------------------------------------------------------------------ */
/* Convolution and pooling (O8).  Images are [N, C, H, W], or unbatched     */
/* [C, H, W] (the result is then unbatched too).  Pairs are {height, width}.*/
/* ------------------------------------------------------------------------ */
/* Traced (symbolic) inputs: N and C may be symbolic dims; a symbolic H or W
 * (L for conv1d) is NB_ERR_SHAPE naming the op and the dim.  The values of
 * max_unpool2d's indices are checked (NB_ERR_INDEX) when the graph runs. */

/**
 * Geometry of a 2-D sliding window.  The output size along each axis is
 * floor((in + 2 padding - dilation (kernel - 1) - 1) / stride) + 1
 * (torch, ceil_mode=False); it must be >= 1.
 */
typedef struct nb_window2d {
    int64_t kernel[2];   /**< window size, >= 1 */
    int64_t stride[2];   /**< step between windows, >= 1 */
    int64_t padding[2];  /**< implicit padding on both sides, >= 0 */
    int64_t dilation[2]; /**< spacing between window taps, >= 1 */
} nb_window2d;
/** A kh x kw pooling window with torch's pooling defaults: stride = kernel, padding 0, dilation 1. */
#define NB_POOL2D(kh, kw) ((nb_window2d){{(kh), (kw)}, {(kh), (kw)}, {0, 0}, {1, 1}})

/** Convolution geometry (the kernel size comes from the weight's shape) and group count. */
typedef struct nb_conv2d_opts {
    int64_t stride[2];   /**< >= 1 (1, 1) */
    int64_t padding[2];  /**< zero padding on both sides, >= 0 (0, 0) */
    int64_t dilation[2]; /**< >= 1 (1, 1) */
    int64_t groups;      /**< >= 1, divides both channel counts (1) */
} nb_conv2d_opts;
/** torch.nn.functional.conv2d's defaults. */
#define NB_CONV2D_DEFAULTS ((nb_conv2d_opts){{1, 1}, {0, 0}, {1, 1}, 1})

/**
 * 2-D convolution (cross-correlation), torch.nn.functional.conv2d:
 * x [N, C, H, W], weight [O, C/groups, KH, KW], bias [O] or NULL →
 * [N, O, OH, OW] with
 *   out[n,o,i,j] = bias[o] + Σ_{c,p,q} x[n, g C/groups + c, i sh - ph + p dh, j sw - pw + q dw] weight[o,c,p,q],
 * g = o / (O/groups), x read as 0 outside its bounds.  On the CPU in f32
 * and f64 (eager, or traced with every size concrete but N) image by image
 * without the unfolded [N, C*KH*KW, OH*OW] tensor, its gradients too;
 * elsewhere as unfold (im2col) then a batched matmul per group — the same
 * bits either way, differentiable to any order.  x, weight, bias share one float dtype.  Errors: NB_ERR_SHAPE
 * (ranks, channels not matching weight × groups, O not divisible by groups,
 * bias not [O], empty output), NB_ERR_ARG (stride, dilation or groups < 1,
 * padding < 0), NB_ERR_DTYPE.
 */
nb_tensor *nb_conv2d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, nb_conv2d_opts opts);
/**
 * 1-D convolution, torch.nn.functional.conv1d: x [N, C, L] (or [C, L]),
 * weight [O, C/groups, K], bias [O] or NULL → [N, O, OL]; nb_conv2d on a
 * height-1 image.  Errors as nb_conv2d.
 */
nb_tensor *nb_conv1d(nb_tensor *x, nb_tensor *weight, nb_tensor *bias, int64_t stride, int64_t padding,
                     int64_t dilation, int64_t groups);
/**
 * im2col, torch.nn.functional.unfold: x [N, C, H, W] → [N, C·KH·KW, OH·OW]
 * where row c·KH·KW + p·KW + q, column i·OW + j holds
 * x[n, c, i sh - ph + p dh, j sw - pw + q dw] (0 outside x).  Float dtypes.
 */
nb_tensor *nb_unfold(nb_tensor *x, nb_window2d w);
/**
 * col2im, torch.nn.functional.fold — the adjoint of nb_unfold: cols
 * [N, C·KH·KW, L] → [N, C, out_h, out_w], each column's taps added into the
 * window they came from (overlaps sum; taps in the padding are dropped).
 * L must be OH·OW for that output size (NB_ERR_SHAPE otherwise).
 */
nb_tensor *nb_fold(nb_tensor *cols, int64_t out_h, int64_t out_w, nb_window2d w);
/**
 * Max over each window, torch.nn.functional.max_pool2d (ceil_mode=False):
 * x [N, C, H, W] → [N, C, OH, OW].  Padding never wins (it acts as -inf);
 * NaN propagates; padding must be at most half the effective kernel
 * (dilation (kernel - 1) + 1), as torch requires, and a window lying
 * entirely in the padding (possible with dilation) is NB_ERR_ARG (torch
 * reads out of bounds there).  The gradient goes to the first maximum of
 * each window (torch's choice among ties).
 */
nb_tensor *nb_max_pool2d(nb_tensor *x, nb_window2d w);
/**
 * nb_max_pool2d that also writes *indices (a new reference; i64, shaped like
 * the result): the flat position h·W + w of each window's maximum within its
 * [H, W] plane (torch return_indices=True).  On error *indices is NULL.
 */
nb_tensor *nb_max_pool2d_with_indices(nb_tensor *x, nb_window2d w, nb_tensor **indices);
/**
 * Adjoint of max pooling, torch.nn.functional.max_unpool2d: zeros
 * [N, C, out_h, out_w] with x [N, C, h, w] added at `indices` (i64, x's
 * shape, flat positions in [0, out_h·out_w) as from
 * nb_max_pool2d_with_indices).  Where indices repeat (overlapping windows)
 * the values are summed; torch leaves that case unspecified.  Errors:
 * NB_ERR_INDEX for a position out of range.
 */
nb_tensor *nb_max_unpool2d(nb_tensor *x, nb_tensor *indices, int64_t out_h, int64_t out_w);
/**
 * Mean over each window, torch.nn.functional.avg_pool2d (ceil_mode=False):
 * the divisor is KH·KW when count_include_pad (torch's default), else the
 * number of taps inside x.  Unlike torch, dilation other than 1 is allowed.
 * Padding must be at most half the kernel, as torch requires.
 */
nb_tensor *nb_avg_pool2d(nb_tensor *x, nb_window2d w, bool count_include_pad);

/* ------------------------------------------------------------------------ */
/* Data-parallel training over MPI (D1)                                     */
/* ------------------------------------------------------------------------ */
/*
 * nabla runs its collectives on MPI (Open MPI from Debian) when it was built with it
 * (nb_dist_available; `nabla doctor` says).  Without it, or before nb_dist_init, a process is a
 * world of one: rank 0 of size 1, where collectives are the identity (no error), so the same
 * training code runs alone.  Collectives use MPI's world communicator from the thread that
 * called nb_dist_init (MPI_THREAD_FUNNELED) and must be called by every rank in the same order
 * (MPI's rule).  Their tensors are contiguous host tensors, written in place, not recorded by
 * autograd.  Every rank checks first (one small all-reduce) that all ranks passed the same dtype
 * and shape, so a mismatch is a typed error on every rank instead of a hang or corrupt data.
 */
/** True when this build has MPI. */
bool nb_dist_available(void);
/** The MPI library's own version line (MPI_Get_library_version, first line; a static buffer), or
 *  "none" without MPI. */
const char *nb_dist_library_version(void);
/**
 * Initialize MPI (MPI_Init_thread, FUNNELED) or, when the caller already initialized it, attach
 * to it.  argc, argv may be NULL.  Calling it again does nothing.  Errors: NB_ERR_UNSUPPORTED
 * (no MPI in this build), NB_ERR_DEVICE (MPI failed to start, with its message).
 */
nb_status nb_dist_init(int *argc, char ***argv);
/** Finalize MPI when nb_dist_init started it (an attached MPI is the caller's to finalize). */
nb_status nb_dist_finalize(void);
/** This process's rank in [0, world size): 0 without MPI or before nb_dist_init. */
int nb_dist_rank(void);
/** The number of processes: 1 without MPI or before nb_dist_init. */
int nb_dist_world_size(void);
/** How nb_dist_all_reduce combines the ranks' tensors (append-only). */
typedef enum nb_dist_op { NB_DIST_SUM, NB_DIST_MEAN, NB_DIST_OP_COUNT } nb_dist_op;
/**
 * t = the sum (or mean) over the ranks of t, in place (torch.distributed.all_reduce).  t: a
 * contiguous host tensor of f32 or f64 (MPI's own reduction) or f16 / bf16 (summed in f32 and
 * rounded once).  The result is the same bits on every rank, and the same from run to run for
 * the same world size.  Errors (on every rank): NB_ERR_NULL, NB_ERR_DTYPE (not float),
 * NB_ERR_ARG (op), NB_ERR_STATE (t not contiguous, symbolic, or requires grad), NB_ERR_SHAPE
 * (ranks passed other shapes or dtypes; the message gives this rank's), NB_ERR_DEVICE (MPI failed).
 */
nb_status nb_dist_all_reduce(nb_tensor *t, nb_dist_op op);
/** t = root's t on every rank, in place (torch.distributed.broadcast); any dtype.  Errors as
 *  nb_dist_all_reduce, and NB_ERR_ARG for a root outside [0, world size). */
nb_status nb_dist_broadcast(nb_tensor *t, int root);
/** out [world, ...t's shape] = every rank's t, stacked in rank order (all_gather_into_tensor);
 *  out contiguous, of t's dtype, written in place.  Errors as nb_dist_all_reduce, and
 *  NB_ERR_SHAPE when out is not [world, ...t's shape]. */
nb_status nb_dist_all_gather(const nb_tensor *t, nb_tensor *out);
/** The rows of a global batch of n that this rank takes: *offset and *count, the ranks' shares
 *  as even as can be (the first n % world ranks take one more) and in rank order.  Errors:
 *  NB_ERR_NULL, NB_ERR_ARG (n < 0). */
nb_status nb_dist_shard(int64_t n, int64_t *offset, int64_t *count);

/**
 * Gradient synchronization for data-parallel training, as the reducer of PyTorch's
 * DistributedDataParallel: nb_ddp_new broadcasts the parameters from rank 0 (every rank starts
 * equal) and hooks them (nb_register_post_accumulate_grad_hook).  In each nb_backward the
 * gradients are copied, as they become final, into buckets of at most bucket_bytes (0: 1 MiB)
 * that take the parameters in reverse order (the order backward finishes them; a parameter
 * may straddle two buckets), and each bucket is all-reduced (MPI_Iallreduce) as soon as its
 * gradients are all in — while backward goes on (each gradient divided by the world size on
 * the way in, so the sums are the means).  nb_ddp_finish then reduces the rest, waits, and
 * sets every parameter's grad to the mean over the ranks — a view of the synchronizer's buffer
 * (DDP's gradient_as_bucket_view: no copy back), whose values the next step's backward
 * overwrites: copy a grad you keep across steps.  A parameter that got no gradient
 * on this rank counts as zeros (its grad is set to the mean all the same).  For a loss that is
 * a mean over a rank's share of a global batch, scale it by share · world / batch first (see
 * nb_dist_shard): the mean of the gradients is then the global batch's gradient.  The
 * reduction order is fixed: the same world size, data and thread counts give the same bits.
 * One backward pass a step: a second pass reaching a parameter before nb_ddp_finish is
 * NB_ERR_STATE from that nb_backward (sum micro-batches' losses before one pass).  Every rank
 * must call nb_ddp_new with the same parameter shapes and bucket_bytes (checked: NB_ERR_SHAPE on
 * every rank); a rank whose own arguments are refused makes the call fail on every rank.
 * Parameters: contiguous host tensors of one float dtype (f32 or f64) that require grad.
 * Errors: NB_ERR_NULL, NB_ERR_ARG (n < 1, a parameter twice), NB_ERR_DTYPE, NB_ERR_STATE,
 * NB_ERR_SHAPE (ranks disagree on the parameters), NB_ERR_OOM.  Free with nb_ddp_free.
 */
typedef struct nb_ddp nb_ddp;
nb_ddp *nb_ddp_new(nb_tensor *const *params, int n, size_t bucket_bytes);
/** Wait for every bucket of this step's gradients and set the grads to their means (call after
 *  nb_backward on every rank, also a rank that had no data this step).  Errors: NB_ERR_NULL,
 *  NB_ERR_DEVICE (MPI failed), NB_ERR_OOM. */
nb_status nb_ddp_finish(nb_ddp *d);
/** Counters of a synchronizer, since it was made. */
typedef struct nb_ddp_stats {
    int buckets;             /**< buckets per step */
    int64_t steps;           /**< nb_ddp_finish calls */
    int64_t launched_early;  /**< buckets started during backward (not by nb_ddp_finish) */
    double wait_seconds;     /**< time spent in nb_ddp_finish waiting for all-reduces */
} nb_ddp_stats;
nb_ddp_stats nb_ddp_stats_get(const nb_ddp *d);
/** Remove the hooks and free d (NULL: nothing).  Must not run while a step's buckets are out. */
void nb_ddp_free(nb_ddp *d);

/* ------------------------------------------------------------------------ */
/* Layers, optimizers, schedules (N1, N2)                                   */
/* ------------------------------------------------------------------------ */

/**
 * A layer or a container of layers (torch.nn.Module).  Modules are plain
 * objects, not tensors: scopes never own them; nb_module_free() frees one
 * with its children and parameters.  Parameters are float32 leaves that
 * require grad, live outside every scope, and are named like torch's
 * state_dict keys: "weight", "bias", and "<child>.<name>" inside containers
 * ("0.weight", "fc1.bias").  Constructors return NULL with NB_ERR_ARG for a
 * non-positive size.  Initialization draws from this thread's generator
 * (nb_manual_seed), so a seed fixes the weights.
 */
typedef struct nb_module nb_module;

/**
 * y = x weightᵀ + bias (torch.nn.Linear): weight [out, in], bias [out].  Both
 * initialized U(-1/√in, 1/√in) — torch's kaiming_uniform_(a=√5) and bias rule.
 */
nb_module *nb_nn_linear(int64_t in_features, int64_t out_features, bool bias);
/**
 * torch.nn.Conv2d: weight [out, in/groups, kh, kw], bias [out]; both
 * U(-1/√fan_in, 1/√fan_in) with fan_in = in/groups·kh·kw (torch defaults).
 * NB_ERR_ARG when groups does not divide both channel counts.
 */
nb_module *nb_nn_conv2d(int64_t in_channels, int64_t out_channels, int64_t kh, int64_t kw, nb_conv2d_opts opts,
                        bool bias);
/** torch.nn.Embedding: weight [num, dim] ~ N(0, 1); forward takes integer indices [...] → [..., dim]. */
nb_module *nb_nn_embedding(int64_t num, int64_t dim);
/** torch.nn.LayerNorm over the trailing `shape` (ndim axes): weight 1 and bias 0 of that shape when affine. */
nb_module *nb_nn_layer_norm(const int64_t *shape, int ndim, double eps, bool affine);
/** torch.nn.Dropout(p): active in training mode (the default), identity in eval mode. NB_ERR_ARG unless 0 <= p < 1. */
nb_module *nb_nn_dropout(double p);
/** torch.nn.ReLU. */
nb_module *nb_nn_relu(void);
/** torch.nn.Flatten(start, end): merges axes start..end (torch defaults 1, -1). */
nb_module *nb_nn_flatten(int start, int end);
/** torch.nn.MaxPool2d with window w. */
nb_module *nb_nn_max_pool2d(nb_window2d w);
/**
 * Multi-head self-attention: x [B, L, E] -> out_proj(attention(q_proj(x), k_proj(x), v_proj(x)))
 * with `heads` query heads of E/heads dims and `kv_heads` key/value heads (grouped-query; equal:
 * classic multi-head), through nb_scaled_dot_product_attention with opts (mask none, causal or
 * sliding; scale, soft-cap).  Children q_proj [E -> E], k_proj and v_proj [E -> kv_heads·E/heads],
 * out_proj [E -> E] are Linear layers (torch.nn.MultiheadAttention packs q, k, v into one
 * in_proj_weight; the split names follow Llama's).  Errors: NB_ERR_ARG (heads not dividing E, or
 * not a multiple of kv_heads; a mask kind that needs a tensor; options nb_scaled_dot_product_attention
 * refuses).
 */
nb_module *nb_nn_multi_head_attention(int64_t embed_dim, int64_t heads, int64_t kv_heads, nb_attention_opts opts,
                                      bool bias);
/** torch.nn.Sequential: an empty container that applies its children in order.  A Linear or
 *  Conv2d followed by a ReLU runs as one op with relu in the product's epilogue: the same values
 *  and gradients bit for bit as the two layers one after the other, one pass fewer over memory. */
nb_module *nb_nn_sequential(void);
/**
 * Append `child` to container `seq`, which takes ownership of it (also on
 * failure: child is then freed, unless it already belongs to a container).
 * `name` is copied; NULL names it by its position ("0", "1", …) as torch
 * does.  Errors: NB_ERR_ARG when seq is not a Sequential, the name is empty,
 * contains '.', or is taken, or child already belongs to a container;
 * NB_ERR_NULL.
 */
nb_status nb_sequential_add(nb_module *seq, const char *name, nb_module *child);
/** Apply m to x (a new reference).  Errors are those of the ops inside, prefixed by nothing. */
nb_tensor *nb_module_forward(nb_module *m, nb_tensor *x);
/** Switch m and its children to training (true) or evaluation mode (torch .train()/.eval()). */
void nb_module_train(nb_module *m, bool training);
/** Number of parameters in m and its children (depth-first, registration order); -1 for NULL. */
int nb_module_param_count(nb_module *m);
/** Dotted name of parameter i; borrowed, valid until m's tree changes or is freed; NULL out of range. */
const char *nb_module_param_name(nb_module *m, int i);
/** Parameter i: a new reference to the live tensor (not a copy); NB_ERR_INDEX out of range. */
nb_tensor *nb_module_param(nb_module *m, int i);
/** Parameter by dotted name; NB_ERR_ARG naming it when there is none. */
nb_tensor *nb_module_param_named(nb_module *m, const char *name);
/** Write new references to up to `max` parameters into out; returns the count of all parameters, -1 on error. */
int nb_module_params(nb_module *m, nb_tensor **out, int max);
/** Free m, its children and its parameters' references.  NULL is a no-op; a module inside a container is left alone (NB_ERR_STATE). */
void nb_module_free(nb_module *m);

/**
 * A first-order optimizer over a fixed list of parameters (retained until
 * nb_optim_free).  nb_optim_step() updates each parameter that has a
 * gradient, in place and without recording (torch skips p.grad None too);
 * the update is one pass over each parameter, split across the CPU
 * threads, computed per element in double precision for SGD and in the
 * parameter's dtype for Adam / AdamW (as torch computes both: for float32,
 * float's square root and division are what bounds the pass).  Parameters must be contiguous float32 / float64 tensors
 * in host memory (NB_ERR_DTYPE / NB_ERR_DEVICE otherwise).
 */
typedef struct nb_optimizer nb_optimizer;

/** torch.optim.SGD options. */
typedef struct nb_sgd_opts {
    double lr;           /**< learning rate, >= 0 */
    double momentum;     /**< >= 0 (0) */
    double dampening;    /**< (0) */
    double weight_decay; /**< L2 penalty added to the gradient, >= 0 (0) */
    bool nesterov;       /**< needs momentum > 0 and dampening 0 (false) */
} nb_sgd_opts;
#define NB_SGD_DEFAULTS(lr_) ((nb_sgd_opts){(lr_), 0, 0, 0, false})
/** torch.optim.Adam / AdamW options. */
typedef struct nb_adam_opts {
    double lr, beta1, beta2, eps; /**< lr >= 0, betas in [0, 1), eps >= 0 */
    double weight_decay;          /**< Adam: L2 added to the gradient; AdamW: decoupled decay */
} nb_adam_opts;
#define NB_ADAM_DEFAULTS ((nb_adam_opts){1e-3, 0.9, 0.999, 1e-8, 0})
#define NB_ADAMW_DEFAULTS ((nb_adam_opts){1e-3, 0.9, 0.999, 1e-8, 1e-2})

/**
 * SGD with momentum, dampening, Nesterov and weight decay, as torch.optim.SGD:
 *   g = grad + wd p;  b = g (first step) or μ b + (1 - dampening) g;
 *   g = nesterov ? g + μ b : b (when μ ≠ 0);  p -= lr g.
 * Errors: NB_ERR_ARG for invalid options (message names the value), NB_ERR_NULL.
 */
nb_optimizer *nb_optim_sgd(nb_tensor *const *params, int n, nb_sgd_opts opts);
/**
 * Adam (Kingma & Ba 2015) as torch.optim.Adam, L2 weight decay folded into g:
 *   m = β1 m + (1-β1) g;  v = β2 v + (1-β2) g²;
 *   p -= lr/(1-β1ᵗ) · m / (√v/√(1-β2ᵗ) + eps).
 */
nb_optimizer *nb_optim_adam(nb_tensor *const *params, int n, nb_adam_opts opts);
/** AdamW (Loshchilov & Hutter 2019) as torch.optim.AdamW: p *= 1 - lr wd first, then the Adam step without L2. */
nb_optimizer *nb_optim_adamw(nb_tensor *const *params, int n, nb_adam_opts opts);
/** One update of every parameter that has a gradient.  Errors: NB_ERR_SHAPE/DTYPE for a gradient unlike its parameter. */
nb_status nb_optim_step(nb_optimizer *opt);
/** Drop every parameter's gradient (torch zero_grad(set_to_none=True)). */
void nb_optim_zero_grad(nb_optimizer *opt);
/** Current learning rate. */
double nb_optim_lr(const nb_optimizer *opt);
/** Set the learning rate used by the next steps (what a scheduler does).  Errors: NB_ERR_NULL, NB_ERR_ARG (negative, NaN or infinite lr). */
nb_status nb_optim_set_lr(nb_optimizer *opt, double lr);
/** Free the optimizer and its state; releases its parameter references.  NULL is a no-op. */
void nb_optim_free(nb_optimizer *opt);

/*
 * Learning-rate schedules as closed forms of the step (or epoch) counter t >= 0.
 * Invalid arguments give NAN with NB_ERR_ARG set.
 */
/** torch StepLR: base_lr · gamma^floor(t / step_size), step_size >= 1. */
double nb_lr_step(double base_lr, int64_t t, int64_t step_size, double gamma);
/**
 * Cosine annealing (Loshchilov & Hutter 2017, SGDR without restarts; the
 * closed form in torch CosineAnnealingLR's documentation):
 * eta_min + (base_lr - eta_min)(1 + cos(π t / t_max)) / 2, t_max >= 1; t
 * past t_max continues the cosine, as torch does.
 */
double nb_lr_cosine(double base_lr, int64_t t, int64_t t_max, double eta_min);
/**
 * Linear warm-up, torch LinearLR(start_factor, end_factor=1, total_iters=warmup):
 * base_lr · (start + (1 - start) · min(t, warmup) / warmup); start in (0, 1], warmup >= 1.
 */
double nb_lr_warmup(double base_lr, int64_t t, int64_t warmup, double start_factor);

/**
 * Scale gradients in place so that their global norm is at most max_norm,
 * torch.nn.utils.clip_grad_norm_: total = ‖(‖g_1‖, …, ‖g_n‖)‖ with the
 * p-norm `norm_type` (> 0, INFINITY for max |g|); each gradient is multiplied
 * by min(1, max_norm / (total + 1e-6)).  Parameters without a gradient are
 * skipped.  *total_norm (may be NULL) receives the norm before clipping.
 * Errors: NB_ERR_ARG (max_norm < 0, norm_type <= 0), NB_ERR_NULL.
 */
nb_status nb_clip_grad_norm_(nb_tensor *const *params, int n, double max_norm, double norm_type,
                             double *total_norm);

/* ------------------------------------------------------------------------ */
/* Traced graphs                                                            */
/* ------------------------------------------------------------------------ */
/*
 * The same nb_* ops that compute eagerly build graph nodes when their inputs
 * are symbolic tensors of a graph being built: every op goes through one
 * dispatch point that hands it to the interpreter of this thread (eager, or
 * the trace of the innermost nb_graph_begin).  A graph is compiled once and
 * run many times; a symbolic dim (nb_dim("B")) is bound from the inputs at
 * each run, so one compiled plan serves every batch size.
 *
 *     nb_tensor *weight = nb_randn(NB_SHAPE(128, 784), NB_F32);   // made before the trace
 *     nb_graph *g = nb_graph_begin("mlp");
 *     nb_tensor *x = nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 784));
 *     nb_tensor *w = nb_graph_param(g, "w", weight);
 *     nb_graph_output(g, "y", nb_relu(nb_linear(x, w, NULL)));
 *     nb_graph_end(g);
 *     nb_compiled *c = nb_graph_compile(g, NB_CPU);            // cached per thread
 *     nb_tensor *batch = nb_randn(NB_SHAPE(32, 784), NB_F32), *y; // any B
 *     nb_compiled_run(c, 1, (const char *[]){"x"}, &batch, 1, &y);   // y: [32, 128]
 *     nb_release(y); nb_release(batch); nb_compiled_release(c); nb_graph_release(g);
 *     nb_release(weight);
 *
 * Symbolic tensors of a trace hold no data: reading one (nb_item,
 * nb_data_ptr, nb_to_string, …) is NB_ERR_STATE naming the call (lazy
 * tensors, below, are read by running their expression).  nb_shape and
 * nb_ndim work (entries may be symbolic dims); nb_size returns the dim
 * (maybe symbolic); nb_strides are all 0 (no layout before the graph runs);
 * nb_numel is -1 with NB_ERR_STATE when a dim is symbolic.  Constructors
 * (nb_zeros, nb_full, nb_randn, …) need concrete sizes: a symbolic dim is
 * NB_ERR_SHAPE naming it (nb_zeros_like and friends of a symbolic tensor
 * are symbolic instead).  Autograd's tape does not record traced ops
 * (nb_set_requires_grad on a symbolic tensor is NB_ERR_STATE); differentiate
 * a graph with nb_graph_grad.
 */

/** A traced computation graph (reference counted; symbolic tensors hold references). */
typedef struct nb_graph nb_graph;
/** A graph compiled for one device, ready to run. */
typedef struct nb_compiled nb_compiled;

/**
 * The symbolic dim named `name` (same name ⇒ same size, process-wide), for
 * use in shapes given to nb_graph_input and, from nb_shape of symbolic
 * tensors, to any op taking sizes (reshape, expand, …).  The name is an
 * identifier ([A-Za-z_][A-Za-z0-9_]*); NULL, "" or "?" give a fresh
 * anonymous dim.  Symbolic dims are encoded int64 values no real size
 * takes: C arithmetic on them is meaningless (N + 1 is silently another,
 * unrelated dim; N * M overflows).  Derived sizes come from ops (the shapes
 * of their results) or from nb_dim_add / nb_dim_mul: sums, differences,
 * products and exact quotients of dims are dims too (a*M + b over a product
 * M of symbols) — other combinations are NB_ERR_SHAPE naming the op.
 * Errors (-1): NB_ERR_ARG for a name that is not an identifier (such as
 * "B+1" or "7"), NB_ERR_OOM.
 */
int64_t nb_dim(const char *name);
/** True when d is a symbolic dim (from nb_dim or arithmetic on one). */
bool nb_dim_is_symbolic(int64_t d);
/** The dim a + b / a * b (symbolic or concrete; concrete ones give the plain sum / product).
 *  -1 with NB_ERR_SHAPE when the result is not a dim (e.g. a product of two symbolic sums) or
 *  NB_ERR_OVERFLOW. */
int64_t nb_dim_add(int64_t a, int64_t b);
int64_t nb_dim_mul(int64_t a, int64_t b);
/** d written as text ("784", "B", "2*B+1") into buf (truncated to size, and to 63 characters);
 *  returns buf, or NULL for a NULL buf or a size of 0. */
const char *nb_dim_name(int64_t d, char *buf, size_t size);

/**
 * Start tracing a new graph on this thread: pushes its trace interpreter and
 * opens a tensor scope owning every tensor made until the matching
 * nb_graph_end — symbolic ones, and concrete ones too (a weight created
 * inside the trace is released at nb_graph_end unless retained or kept with
 * nb_scope_keep; nb_graph_param retains its own reference).  A user
 * nb_scope_end cannot close that scope (NB_ERR_STATE).  Traces nest (the
 * innermost receives the ops).  The trace holds its own reference to the
 * graph until nb_graph_end; a thread that exits with traces open ends them.
 * Returns a graph reference the caller releases with nb_graph_release; NULL
 * with NB_ERR_OOM.
 */
nb_graph *nb_graph_begin(const char *name);
/**
 * Stop tracing g (which must be the innermost trace: NB_ERR_STATE
 * otherwise), closing its scope (and any scope opened inside the trace and
 * left open).  The graph then has the outputs given with nb_graph_output and
 * can be compiled.  NB_ERR_STATE when it has no output; the trace is ended
 * and its scope closed all the same.
 */
nb_status nb_graph_end(nb_graph *g);
/**
 * A named run-time input of dtype dt and shape [ndim] (entries >= 0 or
 * symbolic dims).  Returns a scoped symbolic tensor.  Errors: NB_ERR_ARG
 * (empty or repeated name, bad rank or size), NB_ERR_OVERFLOW (the concrete
 * sizes' product overflows int64), NB_ERR_DTYPE, NB_ERR_STATE (g not being
 * built), NB_ERR_NULL.
 */
nb_tensor *nb_graph_input(nb_graph *g, const char *name, nb_dtype dt, const int64_t *shape, int ndim);
/**
 * A named parameter bound to the concrete tensor `value` (retained): each
 * run reads its current contents, so in-place updates between runs are
 * seen; nb_compiled_run may pass another tensor of the same shape and dtype
 * under the same name.  `value` itself used directly in a later op of the
 * trace also stands for the param (so an override changes it too).  The
 * result is on value's device: ops mixing it with tensors on another device
 * are NB_ERR_DEVICE.  Returns a scoped symbolic tensor.  Errors as
 * nb_graph_input, NB_ERR_STATE for a symbolic value.
 */
nb_tensor *nb_graph_param(nb_graph *g, const char *name, nb_tensor *value);
/** A constant captured by value (value retained; do not modify it afterwards). Scoped symbolic result
 *  on value's device.  Errors: NB_ERR_NULL, NB_ERR_STATE (g not being built, value symbolic or lazy),
 *  NB_ERR_OOM. */
nb_tensor *nb_graph_constant(nb_graph *g, nb_tensor *value);
/** A rank-0 constant of dtype dt holding value (as nb_scalar). Scoped symbolic result.  Errors:
 *  NB_ERR_NULL, NB_ERR_STATE (g not being built), NB_ERR_DTYPE, NB_ERR_OOM. */
nb_tensor *nb_graph_scalar(nb_graph *g, double value, nb_dtype dt);
/**
 * Add t (a symbolic tensor of g, or one of another graph, merged in; or a
 * concrete tensor, captured) as the graph result named `name`.  Outputs are
 * returned by nb_compiled_run in the order they were added.  Merging (here
 * and in any op on tensors of two graphs) joins an input of the other graph
 * with g's input of the same name only when dtype and shape agree, a param
 * only when bound to the same tensor; any other clash of names is
 * NB_ERR_ARG naming both.  Errors: NB_ERR_ARG (empty or repeated name, a
 * clash), NB_ERR_STATE, NB_ERR_NULL.
 */
nb_status nb_graph_output(nb_graph *g, const char *name, nb_tensor *t);
/** A tracing callback: builds on g and returns the single output (a symbolic tensor of g). */
typedef nb_tensor *(*nb_graph_fn)(nb_graph *g, void *ctx);
/** Trace fn into a new graph whose one output is named "out" (the seed's graph(name, fn)).
 *  NULL with fn's error (or NB_ERR_STATE when fn returned NULL without one); traces fn
 *  began and left open are ended (NB_ERR_STATE naming the first, unless fn failed). */
nb_graph *nb_graph_build(const char *name, nb_graph_fn fn, void *ctx);
/** A tracing callback that adds its outputs itself (nb_graph_output) and fills `meta`. */
typedef nb_status (*nb_graph_fn_with)(nb_graph *g, void *ctx, void *meta);
/** Trace fn into a new graph; fn's extra metadata goes to *meta (the seed's graph_with).  NULL with
 *  fn's error when fn does not return NB_OK; otherwise as nb_graph_build. */
nb_graph *nb_graph_build_with(const char *name, nb_graph_fn_with fn, void *ctx, void *meta);
/** Retain / release a graph reference (NULL is a no-op). */
nb_graph *nb_graph_retain(nb_graph *g);
void nb_graph_release(nb_graph *g);
/** Node count (ids run 0..count-1 and are never reused); -1 for NULL. */
int nb_graph_node_count(const nb_graph *g);
/** Output count; -1 for NULL. */
int nb_graph_output_count(const nb_graph *g);
/** The name of output i (borrowed, valid while g lives); NULL for NULL g or i out of range. */
const char *nb_graph_output_name(const nb_graph *g, int i);
/** Check the IR's invariants (ids, topological wiring, metadata agreeing with each op's
 *  infer rule, outputs).  NB_OK, or NB_ERR_FORMAT naming the node at fault. */
nb_status nb_graph_verify(const nb_graph *g);
/**
 * Graphviz DOT text of g: one node per graph node (op, shape with symbolic
 * dims, dtype), edges for inputs, outputs marked.  malloc'd through the
 * allocator hook: free it with nb_free_string.  NULL with NB_ERR_OOM/NULL.
 */
char *nb_graph_to_dot(const nb_graph *g);
/** Free a string returned by nb_graph_to_dot / nb_compiled_to_dot (NULL is a no-op). */
void nb_free_string(char *s);

/**
 * Compile g for device dev through this thread's compile cache (keyed by
 * the graph's structure, its constants by value and dev): a hit returns the
 * plan compiled before (for another but equal graph: a plan of g sharing its
 * schedule, so g's own params are read).  The plan holds its own reference to
 * the graph.  The graph is verified first (nb_graph_verify), then optimized
 * and, on the CPU, fused and memory-planned (see nb_compiled_stats below;
 * nb_compiled_report and nb_compiled_to_dot show the result; NB_FUSE=0 in
 * the environment turns fusion off for comparisons).
 * Returns a reference released with nb_compiled_release; NULL with
 * NB_ERR_STATE (g still being built, or malformed: the verifier's message),
 * NB_ERR_DEVICE (no such device, or a param or constant on another one),
 * NB_ERR_OOM, NB_ERR_NULL.
 */
nb_compiled *nb_graph_compile(nb_graph *g, nb_device dev);
/**
 * Run c with n named arguments (inputs, or params to override) names[i] =
 * values[i] (concrete tensors on c's device).  Binds every symbolic dim from
 * the inputs' shapes, then writes the first nout graph outputs (nout <=
 * output count) as new tensors the caller owns (scoped when a scope is open,
 * as other results).  Errors, each naming the argument: NB_ERR_ARG (unknown
 * or repeated name, a missing input), NB_ERR_DTYPE, NB_ERR_SHAPE (rank, a
 * size different from a declared one, a dim bound to two sizes), the ops'
 * own run-time errors (index out of range, …); on error no output is
 * written.  The ops run without tape recording (outputs do not require
 * grad; differentiate inside the graph with nb_graph_grad).  Every input
 * must be given, even one the outputs do not depend on.  An output that is
 * an input or param of the graph is that argument's tensor itself (a new
 * reference), and an output that is a view of one (reshape, slice, …)
 * shares its storage: copy it (nb_clone) before writing into either; an
 * output that is a constant of the graph (or a view of one) is a copy, so
 * writing into it changes no later run.  Softmax, log_softmax and
 * logsumexp over an axis whose size is a symbolic dim need that size to be
 * at least 1 when the graph runs (NB_ERR_SHAPE otherwise; eagerly, and with
 * a concrete size, an empty axis works).  A plan may be run from several
 * threads at once.  It keeps what its last
 * successful run worked out (each op's concrete sizes and result metadata)
 * for the next: a run whose symbolic dims bind to the same sizes skips
 * working them out again (one run at a time uses this; concurrent runs
 * still work them out).
 */
nb_status nb_compiled_run(nb_compiled *c, int n, const char *const *names, nb_tensor *const *values, int nout,
                          nb_tensor **outputs);
/**
 * nb_compiled_run writing outputs into tensors the caller already has
 * (NumPy's `out=`; JAX's buffer donation): outputs[i] non-NULL on entry is a
 * tensor of output i's dtype and shape (as the run binds them) on c's
 * device, and output i's values are written into it (it keeps its own
 * reference; nothing new is returned in that entry); outputs[i] NULL on entry
 * receives a new tensor as nb_compiled_run gives.  A destination may be an
 * argument of the same run — the updated weights of a training step written
 * over the weights: the run computes the value straight into it when nothing
 * after that reads the old contents (an elementwise update in place), else
 * computes it apart and copies it in after the last step.  An output
 * returned (outputs[i] NULL) that is an argument, or a view of one, in the
 * memory a destination of the same run overwrites is returned as a copy of
 * its value before the run.  At most 96 outputs.  Errors as nb_compiled_run, plus, naming the output:
 * NB_ERR_DTYPE, NB_ERR_SHAPE, NB_ERR_DEVICE (a destination that does not
 * match), NB_ERR_STATE (a destination that requires grad while recording:
 * run under nb_no_grad_begin), NB_ERR_ARG (two destinations sharing memory,
 * a destination with two elements at one address — a broadcast view —, a
 * destination in the memory of one of the graph's constants).  Memory is
 * compared by address ranges, so tensors borrowing the same buffer
 * (nb_from_blob) count as sharing it.  Destinations are checked before
 * anything runs; an error while the steps run (out of memory, an index out
 * of range found in the data) may leave a destination written in place
 * partly updated.
 */
nb_status nb_compiled_run_into(nb_compiled *c, int n, const char *const *names, nb_tensor *const *values, int nout,
                               nb_tensor **outputs);
/** The graph c was compiled from (borrowed). */
nb_graph *nb_compiled_graph(const nb_compiled *c);
/** DOT text of the compiled plan (the schedule of kernels after compilation); free with nb_free_string.
 *  NULL with NB_ERR_NULL (c NULL) or NB_ERR_OOM. */
char *nb_compiled_to_dot(const nb_compiled *c);
/**
 * What nb_graph_compile made of a graph.  The compiler first rewrites the
 * graph with exact optimizations (dead-code elimination, common-subexpression
 * elimination, constant folding, algebraic identities such as x*1 -> x; none
 * changes a result bit), then fuses chains of elementwise ops and their
 * reductions over trailing axes (softmax, layer_norm and log-sum-exp rows,
 * the terms of a loss) or sums over leading axes (a bias gradient's sum over
 * the batch) into kernels that read and write memory once, and
 * plans where the intermediates of a run live in one arena (buffers reused
 * once their values are dead, elementwise results written over dead inputs
 * in place).  A fused plan's results equal the ops run one by one bit for
 * bit (a NaN's sign and payload aside: IEEE 754 leaves open which operand's
 * NaN an op returns).
 */
typedef struct nb_compiled_stats {
    int graph_ops;        /**< op nodes of the graph compiled */
    int merged, folded, simplified, dead; /**< what the optimization passes did (nodes) */
    int ops;              /**< op nodes the plan computes */
    int steps;            /**< steps a run executes: fused kernels and the ops that run alone */
    int kernels;          /**< fused kernels among them */
    int fused_ops;        /**< ops inside the fused kernels */
    int missed;           /**< ops of a fusible kind that run alone (nb_compiled_report says why) */
    /* the memory plan of the last run (0 before one), in bytes: */
    int64_t intermediate_bytes;  /**< every intermediate op result (not an output, not a view) added up:
                                      what running the ops one by one allocates */
    int64_t materialized_bytes;  /**< the intermediates this plan writes to memory (fused ones never are) */
    int64_t live_bytes;   /**< the most of those alive at one step: the arena's lower bound */
    int64_t arena_bytes;  /**< the arena they were placed in */
    int kernels_compiled; /**< fused kernels the last run ran as code compiled at run time (the rest
                               of `kernels` ran on the interpreter, or op by op; nb_fusion_mode) */
} nb_compiled_stats;
/** c's numbers into *st (the memory ones from its last run; read them when no run of c is in
 *  progress).  Errors: NB_ERR_NULL. */
nb_status nb_compiled_stats_get(const nb_compiled *c, nb_compiled_stats *st);
/**
 * The compile report of c as text: the passes' counts, each fused kernel with
 * its domain (dims symbolic where the graph's are) and ops, each missed fusion
 * with its reason (a dtype fused kernels do not compute, a max over
 * leading axes, ...), and the memory plan of the last run (sum of the
 * intermediates, the liveness lower bound, the arena).  Free it with
 * nb_free_string.  NULL with NB_ERR_NULL or NB_ERR_OOM.
 */
char *nb_compiled_report(const nb_compiled *c);
/** How compiled plans run fused kernels on the CPU, one line of text (static): "on: " and then
 *  either that elementwise kernels and the elementwise stages of row and column kernels are
 *  compiled at run time (their reductions stay the built-in kernels), or that
 *  every kernel runs on a tiled interpreter of the built-in kernels and why no compiler runs
 *  (NB_JIT=0, none found, a different compiler): slower, the same results.  "off" when NB_FUSE=0
 *  (each op its own step; for comparisons).
 *  The compiler is NB_CC, else `cc` on PATH: a program name or path without arguments, which must be
 *  the compiler that built the library (another is refused); kernels get the flags of the library's
 *  own loops, so results are bit for bit those of the ops run one by one.  Shared objects are cached
 *  in NB_JIT_CACHE (an absolute path), else $XDG_CACHE_HOME/nabla/jit, else ~/.cache/nabla/jit (a
 *  folder only this user can write; an unloadable object there is built again).  The first call may
 *  run the compiler once (`cc --version`). */
const char *nb_fusion_mode(void);
/** Retain / release a compiled plan (NULL is a no-op). */
nb_compiled *nb_compiled_retain(nb_compiled *c);
void nb_compiled_release(nb_compiled *c);

/** Counters of this thread's compile cache. */
typedef struct nb_compile_cache_stats {
    uint64_t hits, misses, evictions;
    size_t entries, capacity;
} nb_compile_cache_stats;
/** This thread's compile-cache counters. */
nb_compile_cache_stats nb_compile_cache_stats_get(void);
/** Drop every cached plan of this thread (plans still referenced stay alive) and zero the counters. */
void nb_compile_cache_clear(void);
/** Bound this thread's cache to `capacity` plans (>= 1; default 64), evicting the least
 *  recently used beyond it.  NB_ERR_ARG for 0. */
nb_status nb_compile_cache_set_capacity(size_t capacity);

/**
 * Reverse-mode gradients inside a graph being built: grads[i] (scoped
 * symbolic tensors of loss's graph) = d loss / d wrt[i], built by the same
 * derivative rules the eager tape uses.  loss must be a rank-0 (or
 * one-element) float symbolic tensor; wrt[i] symbolic tensors of the same
 * graph (inputs, params or intermediates).  A wrt[i] the loss does not
 * depend on gets zeros of its shape.  grads is an array of n slots other
 * than wrt (it must not alias wrt).  Errors: NB_ERR_ARG (n < 0),
 * NB_ERR_SHAPE naming a non-scalar loss's shape, NB_ERR_STATE (not
 * symbolic, another graph, not being built), NB_ERR_DTYPE (non-float),
 * NB_ERR_NULL.
 */
nb_status nb_graph_grad(nb_tensor *loss, int n, nb_tensor *const *wrt, nb_tensor **grads);

/* ------------------------------------------------------------------------ */
/* Function transforms (JAX-shaped; SPEC X1-X5)                             */
/* ------------------------------------------------------------------------ */
/*
 * A Func is a finished graph (nb_graph_build, or nb_graph_begin ...
 * nb_graph_end): a function of its named inputs and params returning its
 * named outputs.  Every transform below takes a Func and returns a NEW Func
 * (a graph reference the caller releases with nb_graph_release; f is not
 * changed and may be released at once), so transforms compose in any order
 * and depth — vmap of grad, grad of grad, jvp of grad, vmap of vmap — and
 * nb_func_jit compiles any of them once (through the compile cache: the same
 * Func run again with the same shapes does not recompile).  Each transform
 * re-issues f's ops through the one dispatch point while it traces the new
 * graph: grad, vjp and jvp with the derivative rules of the op table (the
 * eager tape's), vmap with each op's batching rule.  Symbolic dims pass
 * through every transform.
 *
 * The seed's `f.grad(["x"]).vmap(["x"], 4).jit()`, where f(x) = sum(x * x)
 * over x [3]:
 *
 *     nb_graph *f = nb_graph_begin("f");
 *     nb_tensor *x = nb_graph_input(f, "x", NB_F32, NB_SHAPE(3));
 *     nb_graph_output(f, "out", nb_sum(nb_mul(x, x), NULL, 0, false));
 *     nb_graph_end(f);
 *     nb_graph *g = nb_func_grad(f, 1, (const char *[]){"x"});      // x [3] -> grad_x [3]
 *     nb_graph *bg = nb_func_vmap(g, 1, (const char *[]){"x"}, (int[]){0}, 4, NULL);
 *     nb_compiled *c = nb_func_jit(bg);                             // x [4, 3] -> grad_x [4, 3]
 *     nb_tensor *xs = ..., *grads;                                  // [4, 3]
 *     nb_compiled_run(c, 1, (const char *[]){"x"}, &xs, 1, &grads); // grads = 2 * xs
 *
 * Naming: a gradient with respect to w is the output "grad_<w>"; a tangent
 * input is "tangent_<w>", a tangent output "tangent_<out>"; a cotangent input
 * "ct_<out>"; a Jacobian "jac_<w>"; a Hessian-vector product "hvp_<w>".  When
 * the new Func has that name already (value_and_grad of value_and_grad, jvp
 * of jvp), the prefix is repeated until the name is free: "grad_grad_x",
 * "tangent_tangent_x".  Names over 255 characters are NB_ERR_ARG.
 *
 * Where nabla differs from JAX: functions take and return named tensors,
 * not pytrees and positions; grad differentiates output 0 and ignores the
 * others (JAX's has_aux), value_and_grad returns all of f's outputs first;
 * jvp and vjp return the primal outputs as outputs of the same Func; only
 * float outputs get tangents and cotangents (JAX's float0 ones are left
 * out); vmap names its batched inputs (the rest are unbatched, JAX's None)
 * and batches no params.
 *
 * Errors of every transform: NB_ERR_NULL (f, a list or a name NULL),
 * NB_ERR_STATE (f still being built, a lazy graph, a graph without outputs),
 * NB_ERR_ARG (an unknown or repeated name, naming f's inputs; no name, or
 * more names than f has inputs and params), NB_ERR_DTYPE (differentiating
 * with respect to a non-float input, or a non-float output), NB_ERR_OOM,
 * and any error an op reports while the new graph is traced (naming the op).
 */

/** The compiled plan of Func f on f's device (nb_graph_compile through this thread's cache).
 *  Run it with nb_compiled_run and named arguments.  Errors as nb_graph_compile. */
nb_compiled *nb_func_jit(nb_graph *f);
/**
 * Call Func f on named arguments (each of f's inputs once; names[i] = values[i]) and write its
 * first nout outputs to outputs (new references, scoped).  Inside a trace (nb_graph_begin) f's
 * ops are added to the graph being built — the arguments may be symbolic tensors of it — so a
 * Func can be used as a function while tracing another: each argument must have its input's
 * dtype and shape, a symbolic dim matching only itself (use the same nb_dim names in both
 * graphs), and every output is a symbolic tensor of the graph being built (f's constants and
 * params are captured, never handed out).  f's params become params of that graph (NB_ERR_ARG
 * when it has another tensor or an input under the same name).  Outside a trace f is compiled
 * (cached) and run as nb_compiled_run does, binding its symbolic dims.  Errors: NB_ERR_NULL,
 * NB_ERR_ARG (a missing, unknown or repeated name; nout beyond f's outputs), NB_ERR_DTYPE,
 * NB_ERR_SHAPE (naming the input), those of nb_compiled_run, and of the ops.
 */
nb_status nb_func_call(nb_graph *f, int n, const char *const *names, nb_tensor *const *values, int nout,
                       nb_tensor **outputs);
/**
 * grad (jax.grad): a Func of f's inputs whose outputs are grad_<w> = d out0 / d w for each of
 * the n names wrt (inputs or params of f; float), out0 being f's first output, which must hold
 * one element (NB_ERR_SHAPE naming its shape otherwise: use nb_func_vjp).  Built by the
 * derivative rules of the eager tape (nb_graph_grad), so its values equal the tape's.
 */
nb_graph *nb_func_grad(nb_graph *f, int n, const char *const *wrt);
/** value_and_grad (jax.value_and_grad): as nb_func_grad, with every output of f first (same
 *  names), then the gradients. */
nb_graph *nb_func_value_and_grad(nb_graph *f, int n, const char *const *wrt);
/**
 * vjp (jax.vjp): a Func of f's inputs plus one cotangent input ct_<out> per float output of f
 * (its dtype and shape), whose outputs are f's outputs, then grad_<w> = sum over the outputs of
 * J_out(w)^T ct_out for each name w — reverse mode for outputs of any shape.
 */
nb_graph *nb_func_vjp(nb_graph *f, int n, const char *const *wrt);
/**
 * jvp (jax.jvp): a Func of f's inputs plus a tangent input tangent_<w> per name w (the input's
 * dtype and shape), whose outputs are f's outputs, then tangent_<out> = sum over w of
 * J_out(w) tangent_w for each float output — forward mode.  Every op with a derivative rule
 * has its tangent: the JVP is derived from the VJP rules by transposition (J t = d/du <J^T u,
 * t>, the linear-transposition trick of Griewank & Walther, "Evaluating Derivatives", 2008),
 * which the compiler's dead-code and folding passes reduce to the forward-mode graph.  Non-
 * differentiable ops (comparisons, argmax, floor's derivative) have zero tangents.
 */
nb_graph *nb_func_jvp(nb_graph *f, int n, const char *const *wrt);
/**
 * hvp (forward over reverse: jvp of grad): a Func of f's inputs plus tangent_<w> per name,
 * whose outputs are hvp_<w> = the Hessian of f's scalar output 0 applied to the tangents
 * (sum over v of d^2 out0 / dw dv · tangent_v).  Errors as nb_func_grad.
 */
nb_graph *nb_func_hvp(nb_graph *f, int n, const char *const *wrt);
/**
 * jacfwd / jacrev (jax.jacfwd, jax.jacrev): a Func of f's inputs whose outputs are jac_<w>, the
 * Jacobian of f's first output (float, shape O) with respect to each name w (shape W), of
 * shape O ++ W.  jacfwd pushes the identity basis of W through vmap(jvp), jacrev pulls the
 * basis of O back through vmap(vjp); they agree to rounding.  O and W must be concrete
 * (NB_ERR_SHAPE naming the symbolic one).
 */
nb_graph *nb_func_jacfwd(nb_graph *f, int n, const char *const *wrt);
nb_graph *nb_func_jacrev(nb_graph *f, int n, const char *const *wrt);
/** An in_axes entry of nb_func_vmap: the input is named but not batched (JAX's None). */
#define NB_UNBATCHED INT32_MIN
/**
 * vmap (jax.vmap): a Func like f in which each of the n named inputs gains a batch axis of
 * size `batch` at in_axes[i] (in [-r-1, r] for an input of rank r; NB_UNBATCHED: none), and
 * every output of f gets it at out_axes[j] (NULL: 0 for every output; in [-r-1, r] for an
 * output of rank r).  Inputs not named, and params, are unbatched and shared by every example
 * — never copied per example.  batch is a size >= 0 or a symbolic dim (nb_dim).  The batch
 * axis is carried through each op by its batching rule (elementwise ops broadcast against it,
 * reductions, scans, views, matmul, gather, scatter, cat and pad shift their axes, the window
 * ops and convolution kernels fold it into N): every op of the table runs once for the whole
 * batch, except the low-precision ops (quantize, dequantize, scaled_matmul: their scales span
 * whole tensors) and the convolution kernels with a batched weight, which run once per example
 * with the results stacked, as torch.vmap's fallback for ops without a rule (a symbolic batch
 * reaching them is NB_ERR_SHAPE when the Func is built).  Random ops draw
 * independently for each example, as running f once per example would (torch.func.vmap's
 * randomness="different"; JAX would share an unbatched key's draw).  An output that does not
 * depend on a batched input is broadcast to the batch (as JAX does).  Running it with batched
 * inputs whose batch sizes disagree is the run's NB_ERR_SHAPE.  Errors: also NB_ERR_AXIS (an
 * axis out of range, naming the input or output and its rank), NB_ERR_ARG (a param named; a
 * negative batch that is not a dim; a symbolic batch that no input carries, so that no run
 * could bind it), NB_ERR_NULL (in_axes NULL).
 */
nb_graph *nb_func_vmap(nb_graph *f, int n, const char *const *names, const int *in_axes, int64_t batch,
                       const int *out_axes);

/* ------------------------------------------------------------------------ */
/* Eval mode: lazy tensors                                                  */
/* ------------------------------------------------------------------------ */
/*
 * A lazy tensor stands for concrete data; ops on lazy tensors build a graph
 * instead of computing (outside any trace, with no nb_graph_begin): their
 * results are lazy too, and the graphs of lazy operands merge.  Reading a
 * lazy tensor (nb_eval, nb_item, nb_get, nb_copy_to_host, nb_data_ptr,
 * nb_to_string, nb_print) compiles the pending expression (that tensor's
 * ancestors only) through this thread's compile cache, runs it on the
 * expression's device and caches the value on the tensor, so a second read
 * does not run again.  The cache key is the expression's structure: the
 * tensors it captured (nb_lazy's, concrete operands) are run-time inputs,
 * C scalars constants, so the same expression over new data of the same
 * shapes and dtypes reuses the compiled plan.  An op on a lazy tensor read
 * before uses its value (the expression behind it does not run again).
 *
 *     nb_scope_begin();                         // owns the temporaries below
 *     nb_tensor *a = nb_lazy(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32));
 *     nb_tensor *b = nb_lazy(nb_ones(NB_SHAPE(3), NB_F32));
 *     nb_tensor *c = nb_relu(nb_add(a, b));     // nothing runs yet; nb_is_lazy(c)
 *     float out[3];
 *     nb_copy_to_host(c, out, sizeof out);      // compiles + runs (a + b).relu()
 *     nb_scope_end();
 *
 * Lazy tensors are not differentiated by the tape and cannot be written
 * into (the in-place functions are NB_ERR_STATE on them).  Ops reach lazy
 * mode only through the one dispatch point (see "Traced graphs"); a graph
 * shared by lazy tensors is extended in place, so lazy tensors of one graph
 * must not be used by two threads at once.  Inside a trace (nb_graph_begin)
 * a lazy operand is imported into the traced graph like any symbolic
 * tensor of another graph.
 */

/**
 * A lazy tensor standing for t (a new scoped reference; t itself retained,
 * not copied: do not modify t until the lazy tensors built on it have been
 * read).  Its device, and that of every expression built on it, is t's.
 * t lazy already: t, retained.  Lazy ops are not recorded on the autograd
 * tape, so a t that requires grad is refused (pass nb_detach(t)).  Errors:
 * NB_ERR_NULL, NB_ERR_STATE (t a symbolic tensor of a trace, or t requires
 * grad), NB_ERR_OOM.
 */
nb_tensor *nb_lazy(nb_tensor *t);
/** nb_lazy of t copied to device dev (pins the expressions built on it to dev; t itself when
 *  already there).  Errors as nb_lazy and nb_to_device; NB_ERR_STATE for a symbolic t. */
nb_tensor *nb_lazy_on(nb_tensor *t, nb_device dev);
/** True when t is a lazy tensor (false for NULL, concrete and traced tensors). */
bool nb_is_lazy(const nb_tensor *t);
/**
 * The concrete value of t as a new scoped reference: for a lazy t its
 * pending expression compiled (cached per thread) and run, the value cached
 * on t (a second nb_eval or read returns it without running); a concrete t
 * is returned itself, retained.  Errors: NB_ERR_NULL, NB_ERR_STATE (t a
 * symbolic tensor of a trace), those of nb_graph_compile / nb_compiled_run.
 */
nb_tensor *nb_eval(nb_tensor *t);

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
