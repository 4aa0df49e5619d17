/*
 * cpu_backend.c — the CPU backend's entry points: elementwise ops through the
 * strided iterator and the per-ISA kernel table, reductions with fixed
 * (thread-count independent) chunking, scans, batched matmul, gather and
 * scatter-add.  dtypes without a typed kernel go through a double-precision
 * path that loads and stores each element.
 */
#include "../backend.h"
#include "../../ops/op_eval.h"
#include "conv_kernels.h"
#include "gemm.h"
#include "iter.h"
#include "jit.h"
#include "attention.h"
#include "quant.h"
#include "kernels.h"
#include "linalg.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

static int slot(nb_dtype dt) { return dt == NB_F32 ? 0 : dt == NB_F64 ? 1 : -1; }

/* ---- elementwise ---- */

enum { EW_MAX_OPS = 4 }; /* operands of one eager elementwise op: out and up to three inputs */

typedef struct ew_ctx {
    nb_op op;
    double p0, p1;
    nb_dtype dt[EW_MAX_OPS];
    nb_k_unary ku;
    nb_k_binary kb;
    bool exact; /* integer operands: evaluate in int64 (op_eval.h) */
    int nops;
} ew_ctx;

#define COPY_AS(T)                                                                      \
    for (int64_t i = 0; i < n; i++) *(T *)(ptr[0] + i * s[0]) = *(const T *)(ptr[1] + i * s[1])
#define TO_FLOAT(DT, ST)                                                                \
    for (int64_t i = 0; i < n; i++)                                                     \
        *(DT *)(ptr[0] + i * s[0]) = (DT)(double)*(const ST *)(ptr[1] + i * s[1])

/* Conversions into a float type from the common dtypes, through double exactly
 * as nb__store does; false when the pair has no typed loop. */
#define TO_FLOAT_FROM(DT)                                                               \
    switch (c->dt[1]) {                                                                 \
    case NB_F32: TO_FLOAT(DT, float); return true;                                      \
    case NB_F64: TO_FLOAT(DT, double); return true;                                     \
    case NB_I32: TO_FLOAT(DT, int32_t); return true;                                    \
    case NB_I64: TO_FLOAT(DT, int64_t); return true;                                    \
    case NB_I8: TO_FLOAT(DT, int8_t); return true;                                      \
    case NB_U8: TO_FLOAT(DT, uint8_t); return true;                                     \
    case NB_BOOL: TO_FLOAT(DT, uint8_t); return true; /* stored as 0/1 bytes */         \
    default: return false;                                                              \
    }
static bool copy_to_float(const ew_ctx *c, int64_t n, char *const *ptr, const int64_t *s) {
    if (c->dt[0] == NB_F32) TO_FLOAT_FROM(float)
    if (c->dt[0] == NB_F64) TO_FLOAT_FROM(double)
    return false;
}

static void row_copy(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    size_t es = nb_dtype_size(c->dt[0]);
    if (c->dt[0] == c->dt[1]) { /* exact, whatever the dtype */
        if (s[0] == (int64_t)es && s[1] == s[0]) memcpy(ptr[0], ptr[1], (size_t)n * es);
        else if (es == 1) COPY_AS(uint8_t);
        else if (es == 2) COPY_AS(uint16_t);
        else if (es == 4) COPY_AS(uint32_t);
        else COPY_AS(uint64_t);
        return;
    }
    if (copy_to_float(c, n, ptr, s)) return;
    for (int64_t i = 0; i < n; i++) nb__convert(ptr[0] + i * s[0], c->dt[0], ptr[1] + i * s[1], c->dt[1]);
}

static void row_unary(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    if (c->ku) {
        c->ku(n, ptr[0], s[0], ptr[1], s[1], c->p0, c->p1);
        return;
    }
    if (c->exact) {
        for (int64_t i = 0; i < n; i++)
            nb__store_i64(ptr[0] + i * s[0], c->dt[0], nb__eval_unary_i64(c->op, nb__load_i64(ptr[1] + i * s[1], c->dt[1])));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        nb__store(ptr[0] + i * s[0], c->dt[0],
                  nb__eval_unary(c->op, nb__load(ptr[1] + i * s[1], c->dt[1]), c->p0, c->p1));
}

static void row_binary(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    if (c->kb) {
        c->kb(n, ptr[0], s[0], ptr[1], s[1], ptr[2], s[2]);
        return;
    }
    if (c->exact) {
        for (int64_t i = 0; i < n; i++)
            nb__store_i64(ptr[0] + i * s[0], c->dt[0],
                          nb__eval_binary_i64(c->op, nb__load_i64(ptr[1] + i * s[1], c->dt[1]),
                                              nb__load_i64(ptr[2] + i * s[2], c->dt[2])));
        return;
    }
    for (int64_t i = 0; i < n; i++)
        nb__store(ptr[0] + i * s[0], c->dt[0],
                  nb__eval_binary(c->op, nb__load(ptr[1] + i * s[1], c->dt[1]),
                                  nb__load(ptr[2] + i * s[2], c->dt[2])));
}

/* ---- staged rows: where, comparisons and logical ops ----
 * Their kernels (kernels.h) take contiguous operands only.  A row is run in
 * blocks of STAGE elements: a contiguous operand is used in place, a
 * stride-0 one through a buffer filled once with its value, any other stride
 * (negative included) is gathered per block; a strided out is written to a
 * buffer and scattered.  Each element is computed exactly as in the
 * contiguous case, so results do not depend on layout or thread count. */
enum { STAGE = 512 };

#define STAGE_MOVE(T)                                                                     \
    if (gather)                                                                           \
        for (int64_t i = 0; i < n; i++) ((T *)buf)[i] = *(const T *)(p + i * s);          \
    else                                                                                  \
        for (int64_t i = 0; i < n; i++) *(T *)(p + i * s) = ((const T *)buf)[i]
void nb__cpu_stage_move(bool gather, char *buf, char *p, int64_t s, int64_t n, size_t es) {
    switch (es) {
    case 1: STAGE_MOVE(uint8_t); break;
    case 2: STAGE_MOVE(uint16_t); break;
    case 4: STAGE_MOVE(uint32_t); break;
    default: STAGE_MOVE(uint64_t); break;
    }
}

void nb__cpu_mask(nb_op op, int64_t n, void *o, nb_dtype odt, nb_dtype idt, const char *const *in, int nin) {
    const nb_cpu_kernels *k = nb__cpu_kernels();
    if (op == NB_OP_WHERE)
        k->where[nb__size_log2(nb_dtype_size(odt))][nb__size_log2(nb_dtype_size(idt))](n, o, in[0], nb__truth_mask(idt),
                                                                                      in[1], in[2]);
    else if (nb__op_is_compare(op))
        k->compare[op - NB_OP_EQ][idt](n, (uint8_t *)o, in[0], in[1]);
    else
        k->logic[op == NB_OP_LOGICAL_NOT ? NB_LOGIC_NOT : (int)(op - NB_OP_LOGICAL_AND)][nb__size_log2(nb_dtype_size(idt))](
            n, (uint8_t *)o, in[0], nin > 1 ? in[1] : in[0], nb__truth_mask(idt));
}

static void row_mask(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    _Alignas(64) char buf[EW_MAX_OPS][STAGE * 8];
    const char *in[EW_MAX_OPS];
    int64_t es[EW_MAX_OPS];
    for (int k = 0; k < c->nops; k++) {
        es[k] = (int64_t)nb_dtype_size(c->dt[k]);
        if (k > 0 && s[k] == 0) /* broadcast: a block of copies of the value */
            for (int64_t i = 0, m = n < STAGE ? n : STAGE; i < m; i++) memcpy(buf[k] + i * es[k], ptr[k], (size_t)es[k]);
    }
    for (int64_t i0 = 0; i0 < n; i0 += STAGE) {
        int64_t len = n - i0 < STAGE ? n - i0 : STAGE;
        for (int k = 1; k < c->nops; k++) {
            in[k] = s[k] == es[k] ? ptr[k] + i0 * es[k] : buf[k];
            if (s[k] != es[k] && s[k] != 0) nb__cpu_stage_move(true, buf[k], ptr[k] + i0 * s[k], s[k], len, (size_t)es[k]);
        }
        bool direct = s[0] == es[0];
        nb__cpu_mask(c->op, len, direct ? ptr[0] + i0 * es[0] : buf[0], c->dt[0], c->dt[1], in + 1, c->nops - 1);
        if (!direct) nb__cpu_stage_move(false, buf[0], ptr[0] + i0 * s[0], s[0], len, (size_t)es[0]);
    }
}

/* Does op on operands of dtype dt have a mask kernel (row_mask)? */
static bool has_mask_kernel(nb_op op, nb_dtype dt) {
    if (nb__op_is_compare(op)) return nb__cpu_kernels()->compare[op - NB_OP_EQ][dt] != NULL;
    return nb__op_is_logic(op);
}
_Static_assert(NB_OP_GE - NB_OP_EQ == 5 && NB_OP_LOGICAL_XOR - NB_OP_LOGICAL_AND == NB_LOGIC_XOR,
               "comparison and logical ops are consecutive in ops.def");

static nb_status run_ew(int nops, const nb_tensor *const *ts, nb_row_fn fn, ew_ctx *c) {
    nb_iter it;
    for (int k = 0; k < nops; k++) c->dt[k] = ts[k]->dtype;
    c->nops = nops;
    nb__iter_init(&it, nops, ts);
    nb__iter_run(&it, fn, c);
    return NB_OK;
}

void nb__cpu_convert_row(int64_t n, nb_dtype dst, char *o, int64_t os, nb_dtype src, const char *x, int64_t xs) {
    ew_ctx c = {.dt = {dst, src}, .nops = 2};
    row_copy(&c, n, (char *const[]){o, (char *)x}, (const int64_t[]){os, xs});
}

static nb_status cpu_copy(nb_tensor *dst, const nb_tensor *src) {
    ew_ctx c = {0};
    return run_ew(2, (const nb_tensor *[]){dst, src}, row_copy, &c);
}

static nb_status cpu_unary(nb_op op, nb_tensor *out, const nb_tensor *x, double p0, double p1) {
    ew_ctx c = {.op = op, .p0 = p0, .p1 = p1, .exact = nb__int_path(op, x->dtype)};
    if (has_mask_kernel(op, x->dtype) && out->dtype == NB_BOOL) return run_ew(2, (const nb_tensor *[]){out, x}, row_mask, &c);
    int s = slot(x->dtype);
    if (s >= 0 && (out->dtype == x->dtype || out->dtype == NB_BOOL))
        c.ku = nb__cpu_kernels()->unary[op][s];
    return run_ew(2, (const nb_tensor *[]){out, x}, row_unary, &c);
}

static nb_status cpu_binary(nb_op op, nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    ew_ctx c = {.op = op, .exact = nb__int_path(op, a->dtype)};
    if (has_mask_kernel(op, a->dtype) && a->dtype == b->dtype && out->dtype == NB_BOOL)
        return run_ew(3, (const nb_tensor *[]){out, a, b}, row_mask, &c);
    int s = slot(a->dtype);
    if (s >= 0 && a->dtype == b->dtype && (out->dtype == a->dtype || out->dtype == NB_BOOL))
        c.kb = nb__cpu_kernels()->binary[op][s];
    return run_ew(3, (const nb_tensor *[]){out, a, b}, row_binary, &c);
}

static nb_status cpu_where(nb_tensor *out, const nb_tensor *cnd, const nb_tensor *a, const nb_tensor *b) {
    ew_ctx c = {.op = NB_OP_WHERE};
    return run_ew(4, (const nb_tensor *[]){out, cnd, a, b}, row_mask, &c);
}

/* ---- reductions ----
 * The reduced axes are split from the kept ones; every output element is
 * combined in one fixed order, independent of the thread count:
 *  - float sum / max / min whose innermost reduced axis is contiguous: the
 *    typed kernel (pairwise sum, vector extreme) per contiguous run, runs
 *    combined in order;
 *  - sum of everything (one output): fixed 64 chunks, partials added in order;
 *  - sum over leading axes with a contiguous kept tail: column accumulation;
 *  - everything else: a strided walk per output with double accumulation. */

typedef struct red_ctx {
    nb_op op;
    const nb_tensor *x;
    nb_tensor *out;
    int nk, nr;                       /* kept / reduced axis counts */
    int64_t kshape[NB_MAX_DIMS], kstride[NB_MAX_DIMS];
    int64_t rshape[NB_MAX_DIMS], rstride[NB_MAX_DIMS];
    int64_t ostride[NB_MAX_DIMS];     /* out strides along kept axes */
    int64_t rnumel;
    double *partial; /* per-chunk sums (sum of all) or column scratch */
} red_ctx;

static void unravel(int64_t i, int n, const int64_t *shape, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

/* Does v replace the running extreme acc?  A NaN wins and then stays. */
static inline bool beats(bool max, double acc, double v) {
    return acc == acc && ((max ? v > acc : v < acc) || v != v);
}

/* Element offset (from base) of the multi-index idx over the first n reduced
 * axes; then idx advances to the next position in row-major order. */
static int64_t sub_walk(const red_ctx *c, int n, int64_t base, int64_t *idx) {
    int64_t off = base;
    for (int d = 0; d < n; d++) off += idx[d] * c->rstride[d];
    for (int d = n - 1; d >= 0 && ++idx[d] == c->rshape[d]; d--) idx[d] = 0;
    return off;
}

/* SUM, MAX or MIN of one contiguous run of n >= 1 float elements (dtype slot s) by the typed
 * kernel: pairwise sum or vector extreme. */
static double run_value(nb_op op, int s, int64_t n, const char *p) {
    const nb_cpu_kernels *k = nb__cpu_kernels();
    return op != NB_OP_SUM ? k->extreme[op == NB_OP_MAX][s](n, p)
           : s == 0        ? k->sum_f32(n, (const float *)p)
                           : k->sum_f64(n, (const double *)p);
}

/* Float SUM / MAX / MIN whose innermost reduced axis is contiguous: the
 * typed kernel on each contiguous run, the runs combined in order. */
static double reduce_runs(const red_ctx *c, int64_t base) {
    int s = slot(c->x->dtype), nr = c->nr - 1;
    int64_t es = (int64_t)nb_dtype_size(c->x->dtype), run = c->rshape[nr], idx[NB_MAX_DIMS] = {0};
    double acc = nb__ident_f64(c->op);
    for (int64_t q = 0; q < c->rnumel / run; q++)
        acc = nb__eval_step(c->op, acc, run_value(c->op, s, run, (const char *)c->x->storage->data + sub_walk(c, nr, base, idx) * es));
    return acc;
}

/* Does reduce_one take the typed-kernel path for op on dtype dt with an innermost run of n? */
static bool runs_path(nb_op op, nb_dtype dt, int64_t n) {
    return (op == NB_OP_SUM || op == NB_OP_MAX || op == NB_OP_MIN) && slot(dt) >= 0 && n >= NB_REDUCE_RUN_MIN;
}

double nb__cpu_reduce_contig(nb_op op, nb_dtype dt, int64_t n, const void *p) {
    double acc = nb__ident_f64(op);
    if (runs_path(op, dt, n)) return nb__eval_step(op, acc, run_value(op, slot(dt), n, p));
    size_t es = nb_dtype_size(dt);
    for (int64_t i = 0; i < n; i++) acc = nb__eval_step(op, acc, nb__load((const char *)p + (size_t)i * es, dt));
    return acc;
}

void nb__cpu_reduce_rows(nb_op op, nb_dtype dt, int64_t n, int64_t g, const char *x, int64_t xs, char *out, int64_t os,
                         nb_dtype odt) {
    if (!runs_path(op, dt, n)) {
        for (int64_t r = 0; r < g; r++) nb__store(out + r * os, odt, nb__cpu_reduce_contig(op, dt, n, x + r * xs));
        return;
    }
    /* nb__cpu_reduce_contig's typed path, its checks made once for the g rows, f32 stored directly */
    int s = slot(dt);
    double id = nb__ident_f64(op);
    for (int64_t r = 0; r < g; r++) {
        double v = nb__eval_step(op, id, run_value(op, s, n, x + r * xs));
        if (odt != NB_F32) {
            nb__store(out + r * os, odt, v);
        } else {
            float f = (float)v;
            memcpy(out + r * os, &f, sizeof f);
        }
    }
}

/* Reduce the sub-space at element offset `base` of x; returns value (or index for arg ops). */
static double reduce_one(const red_ctx *c, int64_t base) {
    const nb_tensor *x = c->x;
    size_t es = nb_dtype_size(x->dtype);
    const char *data = (const char *)x->storage->data;
    nb_op op = c->op;
    if (c->nr >= 1 && c->rstride[c->nr - 1] == 1 && runs_path(op, x->dtype, c->rshape[c->nr - 1]))
        return reduce_runs(c, base);
    bool arg = nb__ops[op].kind == NB_KIND_ARGREDUCE;
    double acc = arg ? 0 : nb__ident_f64(op);
    int64_t best = 0;
    int64_t idx[NB_MAX_DIMS] = {0};
    for (int64_t r = 0; r < c->rnumel; r++) {
        double v = nb__load(data + sub_walk(c, c->nr, base, idx) * (int64_t)es, x->dtype);
        if (!arg) {
            acc = nb__eval_step(op, acc, v);
        } else if (r == 0 || beats(op == NB_OP_ARGMAX, acc, v)) {
            acc = v;
            best = r;
        }
    }
    return arg ? (double)best : acc;
}

/* Integer SUM/PROD/MAX/MIN of the sub-space at `base`, exact in int64 (wrapping). */
static int64_t reduce_one_i64(const red_ctx *c, int64_t base) {
    const nb_tensor *x = c->x;
    int64_t es = (int64_t)nb_dtype_size(x->dtype), acc = nb__ident_i64(c->op);
    const char *data = (const char *)x->storage->data;
    int64_t idx[NB_MAX_DIMS] = {0};
    for (int64_t r = 0; r < c->rnumel; r++) {
        acc = nb__eval_step_i64(c->op, acc, nb__load_i64(data + sub_walk(c, c->nr, base, idx) * es, x->dtype));
    }
    return acc;
}

static void red_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const red_ctx *c = p;
    size_t oes = nb_dtype_size(c->out->dtype);
    int64_t idx[NB_MAX_DIMS];
    for (int64_t i = lo; i < hi; i++) {
        unravel(i, c->nk, c->kshape, idx);
        int64_t xoff = c->x->offset, ooff = c->out->offset;
        for (int d = 0; d < c->nk; d++) {
            xoff += idx[d] * c->kstride[d];
            ooff += idx[d] * c->ostride[d];
        }
        char *o = (char *)c->out->storage->data + ooff * (int64_t)oes;
        if (nb__int_path(c->op, c->x->dtype)) nb__store_i64(o, c->out->dtype, reduce_one_i64(c, xoff));
        else nb__store(o, c->out->dtype, reduce_one(c, xoff));
    }
}

/* Sum of a contiguous run in SUMALL_CHUNKS fixed chunks, whose partials are
 * then added in order.  A thread takes a range of consecutive chunks, so it
 * streams through contiguous memory. */
enum { SUMALL_CHUNKS = 64 };

static void sumall_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    red_ctx *c = p;
    const char *base = (const char *)nb__ptr(c->x);
    for (int64_t k = lo; k < hi; k++) {
        int64_t a = c->rnumel * k / SUMALL_CHUNKS, b = c->rnumel * (k + 1) / SUMALL_CHUNKS;
        c->partial[k] = c->x->dtype == NB_F32 ? nb__cpu_kernels()->sum_f32(b - a, (const float *)base + a)
                                              : nb__cpu_kernels()->sum_f64(b - a, (const double *)base + a);
    }
}

/* Column sums: x viewed as [R, K] contiguous; each range of columns is
 * accumulated over blocks of 64 rows into blk (scratch slice [2 lo, 2 hi)
 * holds acc and blk), and the blocks are added into acc in order. */
static void colsum_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const red_ctx *c = p;
    int64_t K = nb__numel(c->out), R = c->rnumel, w = hi - lo;
    double *acc = c->partial + 2 * lo, *blk = acc + w;
    memset(acc, 0, sizeof(double) * (size_t)w);
    const nb_cpu_kernels *k = nb__cpu_kernels();
    const char *base = (const char *)nb__ptr(c->x);
    for (int64_t r0 = 0; r0 < R; r0 += 64) {
        memset(blk, 0, sizeof(double) * (size_t)w);
        int64_t rows = R - r0 < 64 ? R - r0 : 64;
        if (c->x->dtype == NB_F32) k->acc_f32(w, rows, K, blk, (const float *)base + r0 * K + lo);
        else k->acc_f64(w, rows, K, blk, (const double *)base + r0 * K + lo);
        for (int64_t j = 0; j < w; j++) acc[j] += blk[j];
    }
    char *o = nb__ptr(c->out);
    for (int64_t j = 0; j < w; j++) nb__store(o + (lo + j) * (int64_t)nb_dtype_size(c->out->dtype), c->out->dtype, acc[j]);
}

static nb_status cpu_reduce(nb_op op, nb_tensor *out, const nb_tensor *x, const bool *mask) {
    red_ctx c = {.op = op, .x = x, .out = out, .rnumel = 1};
    for (int d = 0; d < x->ndim; d++) {
        /* axes of one element (a stride of any value) index nothing: a view with one, such as
         * [B, C, 1] transposed from [B, 1, C], takes the path of its contiguous copy */
        if (x->shape[d] == 1) continue;
        if (mask[d]) {
            c.rshape[c.nr] = x->shape[d];
            c.rstride[c.nr++] = x->stride[d];
            c.rnumel *= x->shape[d];
        } else {
            c.kshape[c.nk] = x->shape[d];
            c.kstride[c.nk] = x->stride[d];
            c.ostride[c.nk++] = out->stride[d];
        }
    }
    /* merge reduced axes that are contiguous with each other (keeps order) */
    int nr = 0;
    for (int d = 0; d < c.nr; d++) {
        if (nr > 0 && c.rstride[nr - 1] == c.rstride[d] * c.rshape[d] && op != NB_OP_ARGMAX &&
            op != NB_OP_ARGMIN) {
            c.rshape[nr - 1] *= c.rshape[d];
            c.rstride[nr - 1] = c.rstride[d];
        } else {
            c.rshape[nr] = c.rshape[d];
            c.rstride[nr++] = c.rstride[d];
        }
    }
    c.nr = nr;
    int64_t K = nb__numel(out);
    bool fl = x->dtype == NB_F32 || x->dtype == NB_F64;
    if (op == NB_OP_SUM && fl && K == 1 && nb_is_contiguous(x) && c.rnumel > 65536) {
        double part[SUMALL_CHUNKS];
        c.partial = part;
        nb__parallel_for(SUMALL_CHUNKS, 1, sumall_range, &c);
        double s = 0;
        for (int i = 0; i < SUMALL_CHUNKS; i++) s += part[i];
        nb__store(nb__ptr(out), out->dtype, s);
        return NB_OK;
    }
    if (op == NB_OP_SUM && fl && nb_is_contiguous(x) && nb_is_contiguous(out) && K > 1 &&
        c.rnumel > 1 && c.nk >= 1 && c.kstride[c.nk - 1] == 1) {
        /* reduced axes all precede the kept ones? then x is [R, K] */
        bool leading = true;
        for (int d = 0, seen_kept = 0; d < x->ndim; d++) {
            if (!mask[d]) seen_kept = 1;
            else if (seen_kept && x->shape[d] != 1) leading = false;
        }
        if (leading) {
            c.partial = nb__buf_alloc(sizeof(double) * 2 * (size_t)K);
            if (!c.partial) return NB_ERR_OOM;
            nb__parallel_for(K, 256, colsum_range, &c);
            nb__buf_free(c.partial, sizeof(double) * 2 * (size_t)K);
            return NB_OK;
        }
    }
    int64_t grain = c.rnumel >= 4096 ? 1 : 4096 / (c.rnumel ? c.rnumel : 1);
    nb__parallel_for(K, grain, red_range, &c);
    return NB_OK;
}

/* ---- scans ---- */

typedef struct scan_ctx {
    nb_op op;
    const nb_tensor *x;
    nb_tensor *out;
    int axis;
    int nk;
    int64_t kshape[NB_MAX_DIMS], kx[NB_MAX_DIMS], ko[NB_MAX_DIMS];
} scan_ctx;

static void scan_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const scan_ctx *c = p;
    size_t xes = nb_dtype_size(c->x->dtype), oes = nb_dtype_size(c->out->dtype);
    int64_t n = c->x->shape[c->axis], xs = c->x->stride[c->axis], os = c->out->stride[c->axis];
    int64_t idx[NB_MAX_DIMS];
    for (int64_t i = lo; i < hi; i++) {
        unravel(i, c->nk, c->kshape, idx);
        int64_t xo = c->x->offset, oo = c->out->offset;
        for (int d = 0; d < c->nk; d++) {
            xo += idx[d] * c->kx[d];
            oo += idx[d] * c->ko[d];
        }
        const char *xp = (const char *)c->x->storage->data + xo * (int64_t)xes;
        char *op = (char *)c->out->storage->data + oo * (int64_t)oes;
        if (nb__int_path(c->op, c->x->dtype)) {
            int64_t acc = nb__ident_i64(c->op);
            for (int64_t j = 0; j < n; j++) {
                acc = nb__eval_step_i64(c->op, acc, nb__load_i64(xp + j * xs * (int64_t)xes, c->x->dtype));
                nb__store_i64(op + j * os * (int64_t)oes, c->out->dtype, acc);
            }
            continue;
        }
        double acc = nb__ident_f64(c->op);
        for (int64_t j = 0; j < n; j++) {
            double v = nb__load(xp + j * xs * (int64_t)xes, c->x->dtype);
            acc = nb__eval_step(c->op, acc, v);
            nb__store(op + j * os * (int64_t)oes, c->out->dtype, acc);
        }
    }
}

static nb_status cpu_scan(nb_op op, nb_tensor *out, const nb_tensor *x, int axis) {
    scan_ctx c = {.op = op, .x = x, .out = out, .axis = axis};
    for (int d = 0; d < x->ndim; d++) {
        if (d == axis) continue;
        c.kshape[c.nk] = x->shape[d];
        c.kx[c.nk] = x->stride[d];
        c.ko[c.nk++] = out->stride[d];
    }
    int64_t lines = nb__numel(x) / (x->shape[axis] ? x->shape[axis] : 1);
    if (x->shape[axis] == 0) return NB_OK;
    nb__parallel_for(lines, 64, scan_range, &c);
    return NB_OK;
}

/* ---- matmul ----
 * Each batch item is one nb__gemm (gemm.c) on strided views of a and b
 * (stride-0 batch axes included, nothing is materialized).  A batch of at
 * least `threads` items (and a multiple of it, or many) is split across
 * threads with one single-threaded GEMM per item; otherwise items run in
 * turn with the threads inside each GEMM.  Either way each element is the
 * same FMA chain.  f16/bf16 items are converted to f32, multiplied in f32
 * and rounded once on the way back. */

typedef struct mm_ctx {
    const nb_tensor *t[4]; /* out, a, b, and the addend (NULL for none) */
    bool relu;             /* relu in the epilogue (f32 / f64) */
    int nb;
    int64_t bshape[NB_MAX_DIMS];
    char *ws;
    size_t ws_size;
    int threads; /* inside each GEMM */
} mm_ctx;

/* Element offsets of batch item bi in out, a, b (and the addend). */
static void mm_offsets(const mm_ctx *c, int64_t bi, int64_t off[4]) {
    int64_t idx[NB_MAX_DIMS];
    unravel(bi, c->nb, c->bshape, idx);
    for (int t = 0; t < 4 && c->t[t]; t++) {
        off[t] = c->t[t]->offset;
        for (int d = 0; d < c->nb; d++) off[t] += idx[d] * c->t[t]->stride[d];
    }
}

/* The product of the last two axes of a and b into out's, at element offsets off, plus those of
 * the addend ad (NULL: none, off[3] unused). */
static nb_gemm mm_gemm(const nb_tensor *out, const nb_tensor *a, const nb_tensor *b, const nb_tensor *ad,
                       const int64_t off[4], bool relu) {
    int no = out->ndim, na = a->ndim, nbd = b->ndim;
    int64_t es = (int64_t)nb_dtype_size(out->dtype);
    nb_gemm g = {.dt = out->dtype, .m = out->shape[no - 2], .n = out->shape[no - 1],
                 .k = a->shape[na - 1],
                 .a = (const char *)a->storage->data + off[1] * es,
                 .ars = a->stride[na - 2], .acs = a->stride[na - 1],
                 .b = (const char *)b->storage->data + off[2] * es,
                 .brs = b->stride[nbd - 2], .bcs = b->stride[nbd - 1],
                 .c = (char *)out->storage->data + off[0] * es, .ldc = out->stride[no - 2], .relu = relu};
    if (ad) {
        g.add = (const char *)ad->storage->data + off[3] * es;
        g.adrs = ad->stride[no - 2];
        g.adcs = ad->stride[no - 1];
    }
    return g;
}

static void mm_range(void *p, int64_t lo, int64_t hi, int tid) {
    const mm_ctx *c = p;
    for (int64_t bi = lo; bi < hi; bi++) {
        int64_t off[4];
        mm_offsets(c, bi, off);
        nb_gemm g = mm_gemm(c->t[0], c->t[1], c->t[2], c->t[3], off, c->relu);
        nb__gemm(&g, c->ws + (size_t)tid * c->ws_size, c->threads);
    }
}

/* 2-D view of the last two axes of t at element offset off. */
static nb_tensor *mm_view(const nb_tensor *t, int64_t off) {
    int nd = t->ndim;
    return nb__tensor_view_of(t->storage, t->shape + nd - 2, t->stride + nd - 2, 2, off, t->dtype);
}

/* f16/bf16: per item, copy a and b to f32 (tmp[1], tmp[2]), multiply into
 * tmp[0], copy back rounding once. */
static nb_status mm_lowp(const mm_ctx *c, int64_t batch) {
    nb_tensor *tmp[3] = {0}, *view[3] = {0};
    nb_status st = NB_OK;
    for (int t = 0; t < 3 && st == NB_OK; t++) {
        tmp[t] = nb__tensor_new(c->t[t]->shape + c->t[t]->ndim - 2, 2, NB_F32, c->t[t]->storage->device);
        if (!tmp[t]) st = NB_ERR_OOM;
    }
    for (int64_t bi = 0; bi < batch && st == NB_OK; bi++) {
        int64_t off[4];
        mm_offsets(c, bi, off);
        for (int t = 0; t < 3 && st == NB_OK; t++)
            if (!(view[t] = mm_view(c->t[t], off[t]))) st = NB_ERR_OOM;
        if (st == NB_OK) {
            cpu_copy(tmp[1], view[1]);
            cpu_copy(tmp[2], view[2]);
            nb_gemm g = mm_gemm(tmp[0], tmp[1], tmp[2], NULL, (const int64_t[4]){0, 0, 0, 0}, false);
            nb__gemm(&g, c->ws, c->threads);
            cpu_copy(view[0], tmp[0]);
        }
        for (int t = 0; t < 3; t++) {
            nb_release(view[t]);
            view[t] = NULL;
        }
    }
    for (int t = 0; t < 3; t++) nb_release(tmp[t]);
    return st;
}

/* out = a @ b (+ ad, an addend shaped like out, or NULL; then relu where asked: f32 / f64 only). */
static nb_status mm_run(nb_tensor *out, const nb_tensor *a, const nb_tensor *b, const nb_tensor *ad, bool relu) {
    int nd = out->ndim, threads = nb_get_num_threads();
    mm_ctx c = {.t = {out, a, b, ad}, .relu = relu, .nb = nd - 2};
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) {
        c.bshape[d] = out->shape[d];
        batch *= out->shape[d];
    }
    bool lowp = slot(out->dtype) < 0;
    bool over_batch = !lowp && nb__gemm_over_items(batch, threads);
    c.threads = over_batch ? 1 : threads;
    /* one workspace slot per thread; every item has the same m, n, k */
    nb_gemm sizes = {.dt = lowp ? NB_F32 : out->dtype, .m = out->shape[nd - 2], .n = out->shape[nd - 1],
                     .k = a->shape[nd - 1]};
    c.ws_size = nb__gemm_ws_size(&sizes);
    c.ws = nb__buf_alloc(c.ws_size * (size_t)threads + 1); /* recycled: no fresh pages per call */
    if (!c.ws) return NB_ERR_OOM;
    nb_status st = NB_OK;
    if (lowp)
        st = mm_lowp(&c, batch);
    else if (over_batch)
        nb__parallel_chunks(batch, threads, mm_range, &c);
    else
        mm_range(&c, 0, batch, 0);
    nb__buf_free(c.ws, c.ws_size * (size_t)threads + 1);
    return st;
}

static nb_status cpu_matmul(nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    return mm_run(out, a, b, NULL, false);
}

/* f32 / f64: the addend and relu in the GEMM's epilogue; f16 / bf16 (multiplied in f32 and rounded
 * on the way back) get them from the elementwise add and relu afterwards. */
static nb_status cpu_matmul_add(nb_tensor *out, const nb_tensor *a, const nb_tensor *b, const nb_tensor *ad,
                                bool relu) {
    if (slot(out->dtype) >= 0) return mm_run(out, a, b, ad, relu);
    nb_status st = mm_run(out, a, b, NULL, false);
    if (st == NB_OK) st = cpu_binary(NB_OP_ADD, out, out, ad);
    return st == NB_OK && relu ? cpu_unary(NB_OP_RELU, out, out, 0, 0) : st;
}

/* ---- gather / scatter_add ---- */

/* Gather walks out, index and a stride-0-along-axis view of x together with
 * the strided iterator (parallel over output elements; each is written
 * once) and offsets the x pointer by index * x's axis stride.
 *
 * Scatter-add is parallel over *lines*: the index/src elements that share
 * every coordinate but the axis one.  A line only writes into out's line
 * with the same coordinates, so lines never conflict, and within a line the
 * additions go in axis order: the result is the reference backend's
 * row-major order for every thread count.  Lines are processed in blocks;
 * when the axis is not the innermost stride of src the block walks axis
 * positions outermost, so consecutive lines touch consecutive memory. */

static inline void copy_elem(size_t es, char *d, const char *s) {
    switch (es) {
    case 1: *d = *s; break;
    case 2: memcpy(d, s, 2); break;
    case 4: memcpy(d, s, 4); break;
    default: memcpy(d, s, 8); break;
    }
}

typedef struct gather_ctx {
    size_t es;
    int64_t xa; /* x's byte stride along the axis */
} gather_ctx;

static void row_gather(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const gather_ctx *c = p;
    for (int64_t i = 0; i < n; i++) {
        int64_t j = *(const int64_t *)(ptr[2] + i * s[2]);
        copy_elem(c->es, ptr[0] + i * s[0], ptr[1] + i * s[1] + j * c->xa);
    }
}

static nb_status cpu_gather(nb_tensor *out, const nb_tensor *x, int axis, const nb_tensor *index) {
    int64_t st[NB_MAX_DIMS]; /* x seen through out's index space, axis stride 0 */
    memcpy(st, x->stride, sizeof st);
    st[axis] = 0;
    nb_tensor *xv = nb__tensor_view_of(x->storage, out->shape, st, out->ndim, x->offset, x->dtype);
    if (!xv) return NB_ERR_OOM;
    gather_ctx c = {nb_dtype_size(x->dtype), x->stride[axis] * (int64_t)nb_dtype_size(x->dtype)};
    nb_iter it;
    nb__iter_init(&it, 3, (const nb_tensor *[]){out, xv, index});
    nb__iter_run(&it, row_gather, &c);
    nb_release(xv);
    return NB_OK;
}

static inline void add_elem(nb_dtype dt, char *o, const char *s) {
    switch (dt) {
    case NB_F32: *(float *)o += *(const float *)s; break;
    case NB_F64: *(double *)o += *(const double *)s; break;
    case NB_I64: *(uint64_t *)o += *(const uint64_t *)s; break; /* wraps like torch */
    case NB_I32: *(uint32_t *)o += *(const uint32_t *)s; break;
    default: nb__store(o, dt, nb__load(o, dt) + nb__load(s, dt)); break;
    }
}

enum { SCATTER_BLOCK = 64 };

typedef struct scatter_ctx {
    nb_dtype dt;
    char *base[3];                      /* out, index, src at element 0 */
    int nl;                             /* line axes: all but the scatter axis */
    int64_t lshape[NB_MAX_DIMS];
    int64_t lstride[3][NB_MAX_DIMS];    /* byte strides of out, index, src along line axes */
    int64_t len, astride[3];            /* axis extent (index's) and byte strides along it */
    bool axis_outer;
} scatter_ctx;

static void scatter_lines(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const scatter_ctx *c = p;
    int64_t idx[NB_MAX_DIMS];
    unravel(lo, c->nl, c->lshape, idx);
    for (int64_t b0 = lo; b0 < hi; b0 += SCATTER_BLOCK) {
        int64_t nb = hi - b0 < SCATTER_BLOCK ? hi - b0 : SCATTER_BLOCK;
        char *line[3][SCATTER_BLOCK];
        for (int64_t l = 0; l < nb; l++) {
            for (int k = 0; k < 3; k++) {
                line[k][l] = c->base[k];
                for (int d = 0; d < c->nl; d++) line[k][l] += idx[d] * c->lstride[k][d];
            }
            for (int d = c->nl - 1; d >= 0 && ++idx[d] == c->lshape[d]; d--) idx[d] = 0;
        }
        int64_t nouter = c->axis_outer ? c->len : nb, ninner = c->axis_outer ? nb : c->len;
        for (int64_t u = 0; u < nouter; u++)
            for (int64_t v = 0; v < ninner; v++) {
                int64_t l = c->axis_outer ? v : u, q = c->axis_outer ? u : v;
                int64_t j = *(const int64_t *)(line[1][l] + q * c->astride[1]);
                add_elem(c->dt, line[0][l] + j * c->astride[0], line[2][l] + q * c->astride[2]);
            }
    }
}

static nb_status cpu_scatter_add(nb_tensor *out, int axis, const nb_tensor *index, const nb_tensor *src) {
    const nb_tensor *ts[3] = {out, index, src};
    scatter_ctx c = {.dt = out->dtype, .len = index->shape[axis]};
    int64_t lines = 1;
    for (int k = 0; k < 3; k++) {
        int64_t es = (int64_t)nb_dtype_size(ts[k]->dtype);
        c.base[k] = nb__ptr(ts[k]);
        c.astride[k] = ts[k]->stride[axis] * es;
        for (int d = 0, l = 0; d < index->ndim; d++)
            if (d != axis) c.lstride[k][l++] = ts[k]->stride[d] * es;
    }
    for (int d = 0; d < index->ndim; d++)
        if (d != axis) {
            c.lshape[c.nl++] = index->shape[d];
            lines *= index->shape[d];
        }
    if (lines == 0 || c.len == 0) return NB_OK;
    c.axis_outer = src->stride[axis] != 1;
    int64_t grain = c.len >= 4096 ? 1 : 4096 / c.len;
    nb__parallel_for(lines, grain, scatter_lines, &c);
    return NB_OK;
}

const nb_backend nb__cpu_backend = {
    .name = "cpu",
    .type = NB_DEVICE_CPU,
    .copy = cpu_copy,
    .unary = cpu_unary,
    .binary = cpu_binary,
    .where = cpu_where,
    .reduce = cpu_reduce,
    .scan = cpu_scan,
    .matmul = cpu_matmul,
    .matmul_add = cpu_matmul_add,
    .gather = cpu_gather,
    .scatter_add = cpu_scatter_add,
    .window = nb__cpu_window,
    .linalg = nb__cpu_linalg,
    .attention = nb__cpu_attention,
    .attention_backward = nb__cpu_attention_backward,
    .conv2d = nb__cpu_conv2d,
    .conv2d_backward = nb__cpu_conv2d_backward,
    .quantize = nb__cpu_quantize,
    .dequantize = nb__cpu_dequantize,
    .scaled_matmul = nb__cpu_scaled_matmul,
    .fused = nb__cpu_fused,
    .fused_mode = nb__jit_status,
};
