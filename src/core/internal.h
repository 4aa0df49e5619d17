/*
 * internal.h — the private data structures every layer shares: storage, the
 * tensor record, op attributes, tape nodes, and the error helpers.
 */
#ifndef NB_INTERNAL_H
#define NB_INTERNAL_H

#include "nabla.h"

#include <stdatomic.h>
#include <stdarg.h>

/* ---- errors (src/core/error.c) ---------------------------------------- */

/** Record an error on this thread unless one is already pending; returns s. */
nb_status nb__error(nb_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** Record an error, replacing any pending one (for fresh top-level calls). */
nb_status nb__error_set(nb_status s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/** The error pending when a public nb_status function was entered (nb__own_begin). */
typedef struct nb__error_frame {
    nb_status status;
    char msg[512];
} nb__error_frame;
/** Save and clear the pending error, so the work of a public nb_status
 *  function records its own failure first (nb__error keeps the first). */
void nb__own_begin(nb__error_frame *f);
/** Finish that function with result st: on success restore the saved error
 *  (success never clears one); on failure keep the function's own error,
 *  recording a generic one naming `op` when the work set none.  Returns st. */
nb_status nb__own_end(const nb__error_frame *f, const char *op, nb_status st);
/** `return call;` from a public nb_status function `op`, with the status and
 *  message that call itself produced (never a stale pending one). */
#define NB_OWN_STATUS(op, call)                                                 \
    do {                                                                        \
        nb__error_frame own_frame_;                                             \
        nb__own_begin(&own_frame_);                                             \
        return nb__own_end(&own_frame_, op, (call));                            \
    } while (0)
/** Format a shape as "[2, 3]" into buf (size >= 160); returns buf. */
const char *nb__shape_str(char *buf, const int64_t *shape, int ndim);
#define NB_SHAPE_STR(t) nb__shape_str((char[192]){0}, (t)->shape, (t)->ndim)
#define NB_DIMS_STR(s, n) nb__shape_str((char[192]){0}, (s), (n))

/** Return NULL from the enclosing op when a tensor argument is NULL. */
#define NB_CHECK_ARG(op, t)                                                     \
    do {                                                                        \
        if (!(t)) {                                                             \
            nb__error(NB_ERR_NULL, "%s: argument '%s' is NULL", op, #t);        \
            return NULL;                                                        \
        }                                                                       \
    } while (0)

/** Internal invariant check: aborts with a message (never for bad input). */
#define NB_ASSERT(c)                                                            \
    do {                                                                        \
        if (!(c)) nb__abort(__FILE__, __LINE__, #c);                            \
    } while (0)
_Noreturn void nb__abort(const char *file, int line, const char *what);

/** Compile a hot loop for AVX-512, AVX2 and the baseline; the loader picks one for the running CPU
 *  (GCC / Clang target_clones).  For loops outside the per-ISA kernel tables (conv, optimizers). */
#define NB_SIMD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

/** Run fn when this thread exits (thread_exit.c); registering the same fn again is a no-op. */
void nb__at_thread_exit(void (*fn)(void));

/* ---- storage (src/core/storage.c) -------------------------------------- */

typedef struct nb_storage {
    atomic_long refs;
    void *data;
    size_t nbytes;
    nb_device device;
    bool owned;                             /* data allocated for it, freed with the storage
                                               (false for borrowed and inline small data) */
    void (*release)(void *ctx, void *data); /* borrowed memory: called when the last ref goes */
    void *ctx;
    void *release_ptr;                      /* pointer handed to release (the caller's) */
} nb_storage;

nb_storage *nb__storage_new(size_t nbytes, nb_device dev);
void nb__storage_release(nb_storage *s);

/* ---- the heap (src/core/alloc.c): every allocation goes through these ---- */

/** As malloc / calloc / realloc / strdup, from the nb_set_allocator function; NULL on
 *  failure with NO error set (the caller names its operation in the NB_ERR_OOM message).
 *  nb__realloc leaves the block untouched when it fails and never resizes nb__alloc blocks. */
void *nb__malloc(size_t n);
void *nb__calloc(size_t count, size_t size);
void *nb__realloc(void *p, size_t n);
char *nb__strdup(const char *s);
/** 64-byte aligned host allocation; NULL (with NB_ERR_OOM / NB_ERR_OVERFLOW set) on failure. */
void *nb__alloc(size_t nbytes);
/** Free a block of any of the above (NULL is a no-op). */
void nb__free(void *p);
/** Allocation requests refused on this thread so far: tells a library's NULL from an out of memory. */
unsigned long nb__alloc_failures(void);
/** True while a user allocator (nb_set_allocator) is installed: every buffer must come from it. */
bool nb__allocator_custom(void);
/* NB_ASAN: building under AddressSanitizer (allocation shortcuts that would
 * hide overflows or use-after-free from it are switched off). */
#if defined(__SANITIZE_ADDRESS__)
#define NB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NB_ASAN 1
#endif
#endif
/** Buffers from the caching allocator (bufcache.c): 64-byte aligned, recycled by
 *  size class (huge-page backed from 4 MiB); NULL with NB_ERR_OOM/OVERFLOW set on
 *  failure.  nb__buf_free takes the size the buffer was allocated with. */
void *nb__buf_alloc(size_t nbytes);
void nb__buf_free(void *p, size_t nbytes);
/** The cache bound from NB_ALLOC_CACHE_MB (a decimal number of MiB >= 0; default and on an
 *  invalid value, with a warning on stderr: 256 MiB).  Read once by bufcache.c; exposed for tests. */
size_t nb__env_alloc_cache_bytes(void);

/* ---- tensors (src/core/tensor.c) --------------------------------------- */

struct nb_node;

struct nb_tensor {
    atomic_int refs;
    int ndim;
    nb_dtype dtype;
    bool requires_grad; /* leaf flagged by user, or output of a recorded op */
    bool weak;          /* wrapped C scalar: takes part in promotion by category only */
    int64_t shape[NB_MAX_DIMS];
    int64_t stride[NB_MAX_DIMS]; /* in elements */
    int64_t offset;              /* in elements */
    nb_storage *storage;
    struct nb_node *node; /* producing tape node, NULL for leaves */
    nb_tensor *grad;      /* accumulated gradient of a tracked leaf */
    struct nb_graph *graph; /* non-NULL: a symbolic tensor (no data; storage has none), output
                               `gout` of node `gnode` of this graph (retained) */
    int32_t gnode, gout;
    _Atomic(nb_tensor *) lazy_value; /* a lazy tensor (eval mode): its materialized value once
                                        read (owned; set once), else NULL */
};

/** True for a symbolic tensor of a traced graph (shape may hold symbolic dims, no data). */
static inline bool nb__is_symbolic(const nb_tensor *t) { return t && t->graph; }
/** NB_ERR_STATE naming op when t is symbolic (its data exists only when its graph runs);
 *  returns true when t may be read. */
bool nb__check_concrete(const char *op, const nb_tensor *t);
/** The concrete tensor whose data a read of t (by op) sees: t itself when concrete; for a lazy
 *  tensor its materialized value (computed on the first read, cached on t; borrowed, lives as
 *  long as t); NULL with NB_ERR_STATE for a symbolic tensor of a trace, or the error of
 *  materializing (src/graph/lazy.c). */
const nb_tensor *nb__readable(const char *op, const nb_tensor *t);

/* ---- symbolic dims (src/graph/dim.c) ------------------------------------
 * A dim is an int64: >= 0 a concrete size; a value in the symbolic range an
 * interned expression a*M + b over named symbols (M a product of symbol
 * powers; same name => same size).  Equal expressions are equal int64
 * values, so shapes still compare with ==.  Eager tensors never hold one. */
#define NB_DIM_SYM_BASE (INT64_MIN / 2)
/** Number of interned dim expressions so far (ids 0..count-1 are valid). */
int nb__dim_count(void);
/** True for the value of an interned symbolic dim; any other value in the symbolic range is an
 *  invalid (hugely negative) size, as -1 is. */
static inline bool nb__dim_sym(int64_t d) {
    return d <= NB_DIM_SYM_BASE && d > NB_DIM_SYM_BASE - ((int64_t)1 << 40) && NB_DIM_SYM_BASE - d < nb__dim_count();
}
/** d1 + d2, d1 * d2, d1 / d2 (exact: NB_ERR_SHAPE when not provably divisible), d1 - d2.
 *  On an unsupported combination: NB_ERR_SHAPE naming op and both dims, returns -1. */
int64_t nb__dim_add(const char *op, int64_t a, int64_t b);
int64_t nb__dim_sub(const char *op, int64_t a, int64_t b);
int64_t nb__dim_mul(const char *op, int64_t a, int64_t b);
int64_t nb__dim_div(const char *op, int64_t a, int64_t b);
/** Product of dims (symbolic allowed); -1 with an error naming op on overflow/unsupported. */
int64_t nb__dims_prod(const char *op, const int64_t *d, int n);
/** True when any of the n dims is symbolic. */
bool nb__dims_any_sym(const int64_t *d, int n);
/** Format a dim ("784", "B", "2*B+1") into buf (size >= 64); returns buf. */
const char *nb__dim_str(char *buf, int64_t d);
/** Values bound to symbols while a graph runs (symbol id -> size). */
typedef struct nb_dim_binding {
    int n;
    int32_t sym[16];
    int64_t val[16];
} nb_dim_binding;
/** Evaluate d under bind: its value (negative for an expression such as B - 5 with B = 2), or
 *  INT64_MIN with NB_ERR_SHAPE (a symbol unbound) or NB_ERR_OVERFLOW set. */
int64_t nb__dim_eval(const char *op, int64_t d, const nb_dim_binding *bind);
/** The symbolic dims among d[0..n) replaced in place by their values under bind (the others
 *  kept): NB_OK, or nb__dim_eval's error (d then partly evaluated). */
nb_status nb__dims_eval(const char *op, int64_t *d, int n, const nb_dim_binding *bind);
/** Match the declared dim `d` of an input with its size `v`, in two passes over all inputs:
 *  with !derived a lone symbol gets v (NB_ERR_SHAPE naming both sizes when already bound to
 *  another) and derived expressions (2*B, B-5) are skipped; with derived they are evaluated
 *  and checked against v, so the order of the inputs does not matter.  NB_OK or the error. */
nb_status nb__dim_bind(const char *what, int64_t d, int64_t v, bool derived, nb_dim_binding *bind);

/** New tensor record viewing `s` (retains it). Not registered with scopes. */
nb_tensor *nb__tensor_view_of(nb_storage *s, const int64_t *shape, const int64_t *stride,
                              int ndim, int64_t offset, nb_dtype dt);
/** New contiguous tensor with fresh storage on dev (uninitialized). Not scoped. */
nb_tensor *nb__tensor_new(const int64_t *shape, int ndim, nb_dtype dt, nb_device dev);
/** nb__tensor_new for a public constructor: errors (bad shape/dtype, overflow) name `op`. */
nb_tensor *nb__tensor_new_op(const char *op, const int64_t *shape, int ndim, nb_dtype dt, nb_device dev);
/**
 * Turn a public op's result into an unscoped reference the caller owns:
 * remove t from the innermost scope; with no scope open, t already is the
 * caller's and is returned as is.  A t the innermost scope does not own (a
 * composite returning one of its inputs) gets a new reference.
 */
nb_tensor *nb__scope_take(nb_tensor *t);
/** Open a scope that a user nb_scope_end cannot close (a trace's scope); returns the previous
 *  guard, to be given back to nb__scope_unguard. */
int nb__scope_guard(void);
/** Close every scope down to and including the one nb__scope_guard opened; restore the guard. */
void nb__scope_unguard(int prev);
/** Register a new reference with the innermost scope, if any; returns t. */
nb_tensor *nb__own(nb_tensor *t);
/** Row-major strides for shape. */
void nb__contiguous_strides(const int64_t *shape, int ndim, int64_t *stride);
/** The checks shared by every write into an existing tensor t by op (access.c): not NULL, concrete,
 *  not requiring grad while recording, no two elements at one address.  False with the error set
 *  (replacing any pending one). */
bool nb__writable(const char *op, nb_tensor *t);
/** Lowest / highest element offset, relative to element [0,…], that a non-empty
 *  strided layout reaches; false (no error set) when they overflow int64. */
bool nb__strided_extent(const int64_t *shape, const int64_t *stride, int ndim, int64_t *lo, int64_t *hi);
/** Overflow-checked element count; -1 with NB_ERR_OVERFLOW/NB_ERR_ARG set on failure. */
int64_t nb__numel_checked(const char *op, const int64_t *shape, int ndim);
static inline int64_t nb__numel(const nb_tensor *t) {
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}
/** Address of element [0,…] of a host tensor. */
static inline char *nb__ptr(const nb_tensor *t) {
    return (char *)t->storage->data + t->offset * (int64_t)nb_dtype_size(t->dtype);
}
/** Normalize a possibly negative axis against ndim; -1 on error (NB_ERR_AXIS set). */
int nb__axis(const char *op, int axis, int ndim);
/** Broadcast two shapes (NumPy rules) into out; returns ndim or -1 with NB_ERR_SHAPE. */
int nb__broadcast_shapes(const char *op, const int64_t *a, int na, const int64_t *b, int nb,
                         int64_t *out);
static inline bool nb__same_shape(const nb_tensor *a, const nb_tensor *b) {
    if (a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}
static inline bool nb__same_device(nb_device a, nb_device b) {
    return a.type == b.type && a.index == b.index;
}
static inline bool nb__is_host(nb_device d) {
    return d.type == NB_DEVICE_CPU || d.type == NB_DEVICE_REF;
}
/** True when t is tracked by autograd (a requires-grad leaf or a recorded result). */
static inline bool nb__tracked(const nb_tensor *t) { return t && t->requires_grad; }

/* ---- dtype conversion (src/core/dtype.c) ------------------------------- */

double nb__load(const void *p, nb_dtype dt);
/** Integer/bool element as int64 (exact); floats truncate like nb__store's int path. */
int64_t nb__load_i64(const void *p, nb_dtype dt);
/** Store an int64 into an integer or bool element, wrapping around (two's complement) as
 *  PyTorch's integer arithmetic does; bool stores v != 0.  Float dtypes convert. */
void nb__store_i64(void *p, nb_dtype dt, int64_t v);
void nb__store(void *p, nb_dtype dt, double v);
/** One element converted from sdt to ddt as a cast does (torch): between integer and bool
 *  dtypes exactly, wrapping into a narrower type (two's complement, 300 → 44 in u8);
 *  otherwise through double as nb__store (float → integer truncates and saturates). */
void nb__convert(void *dst, nb_dtype ddt, const void *src, nb_dtype sdt);
float nb__f16_to_f32(uint16_t h);
uint16_t nb__f32_to_f16(float f);
float nb__bf16_to_f32(uint16_t h);
uint16_t nb__f32_to_bf16(float f);
/** Float dtype used to compute a float-valued op on dt (ints/bool → f32). */
static inline nb_dtype nb__float_of(nb_dtype dt) { return nb_dtype_is_float(dt) ? dt : NB_F32; }

/* ---- autograd recording (src/autograd/tape.c) -------------------------- */

/** Attributes an op keeps for its kernel and its derivative rule. */
typedef struct nb_attrs {
    double f[4];               /* scalar parameters (slope, alpha, p, eps, …) */
    int64_t i[2 * NB_MAX_DIMS]; /* integer parameters (shape, pads, offsets, …) */
    int ni;
    int axes[NB_MAX_DIMS];     /* axis list (reductions, permutations, …) */
    int naxes;
    bool keepdim;
    int sub;                   /* op-specific (the view op of a VIEW_GRAD, a mode) */
    int shape_ndim;
    int64_t shape[NB_MAX_DIMS]; /* a shape (reshape target, base shape of a view adjoint) */
} nb_attrs;

typedef struct nb_node {
    atomic_int refs;
    int op;             /* nb_op */
    int n_in;
    nb_tensor *out;     /* detached alias of the output (no node) */
    nb_attrs attrs;
    uint64_t seq;       /* creation order, for the topological sort */
    uint64_t mark;      /* scratch for the backward pass: pass id */
    int64_t slot;       /* scratch for the backward pass: gradient slot */
    struct nb_node *dead_next; /* nb__node_release's list of dead nodes */
    nb_tensor *in[];    /* n_in retained inputs (NULL where absent) */
} nb_node;

/** True when an op on these inputs must be recorded (recording on, an input tracked). */
bool nb__should_record(nb_tensor *const *in, int n);
/**
 * Attach a tape node for `op` to `out` (which must be fresh).  Copies attrs.
 * Returns out, or NULL (releasing out) on allocation failure.
 */
nb_tensor *nb__record(nb_tensor *out, int op, nb_tensor *const *in, int n, const nb_attrs *attrs);
void nb__node_release(nb_node *n);

/* ---- text (src/core/text.c) ---- */

/** A growing text buffer; `oom` is set (and further text dropped) on allocation failure.  Its
 *  memory comes from the library's allocator (nb_set_allocator), or from libc's when `libc`: text
 *  that is not the user's data (the run-time kernel compiler's source) stays outside it. */
typedef struct nb__text {
    char *s;
    size_t n, cap;
    bool oom, libc;
} nb__text;
void nb__text_printf(nb__text *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/** The buffer's string (free with nb__free), or NULL with NB_ERR_OOM naming op (buffer freed);
 *  not for `libc` buffers. */
char *nb__text_done(nb__text *b, const char *op);

/* ---- run-time settings (src/core/env.c) ---- */

/** The on/off switch in environment variable `name`: unset or "1" on, "0" off; anything else
 *  warns on stderr ("ignoring NAME='value' (expected 0 or 1); <doing>") and is on. */
bool nb__env_switch(const char *name, const char *doing);

#endif /* NB_INTERNAL_H */
