/*
 * cpu_backend.c — the CPU backend's entry points: elementwise ops through the
 * strided iterator and the per-ISA kernel table, reductions with fixed
 * (thread-count independent) chunking, scans, batched matmul, gather and
 * scatter-add.  dtypes without a typed kernel go through a double-precision
 * path that loads and stores each element.
 */
#include "../backend.h"
#include "../../ops/op_eval.h"
#include "iter.h"
#include "kernels.h"
#include "pool.h"

#include <stdlib.h>
#include <string.h>

static int slot(nb_dtype dt) { return dt == NB_F32 ? 0 : dt == NB_F64 ? 1 : -1; }

/* ---- elementwise ---- */

typedef struct ew_ctx {
    nb_op op;
    double p0, p1;
    nb_dtype dt[NB_ITER_MAX_OPS];
    nb_k_unary ku;
    nb_k_binary kb;
} ew_ctx;

static void row_copy(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    if (c->dt[0] == c->dt[1] && s[0] == (int64_t)nb_dtype_size(c->dt[0]) && s[1] == s[0]) {
        memcpy(ptr[0], ptr[1], (size_t)(n * s[0]));
        return;
    }
    if (c->dt[0] == NB_F32 && c->dt[1] == NB_F32) {
        for (int64_t i = 0; i < n; i++) *(float *)(ptr[0] + i * s[0]) = *(const float *)(ptr[1] + i * s[1]);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        nb__store(ptr[0] + i * s[0], c->dt[0], nb__load(ptr[1] + i * s[1], c->dt[1]));
}

static void row_unary(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    if (c->ku) {
        c->ku(n, ptr[0], s[0], ptr[1], s[1], c->p0, c->p1);
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
    for (int64_t i = 0; i < n; i++)
        nb__store(ptr[0] + i * s[0], c->dt[0],
                  nb__eval_binary(c->op, nb__load(ptr[1] + i * s[1], c->dt[1]),
                                  nb__load(ptr[2] + i * s[2], c->dt[2])));
}

static void row_where(void *p, int64_t n, char *const *ptr, const int64_t *s) {
    const ew_ctx *c = p;
    if (c->dt[0] == NB_F32 && c->dt[1] == NB_BOOL) {
        for (int64_t i = 0; i < n; i++)
            *(float *)(ptr[0] + i * s[0]) = *(const uint8_t *)(ptr[1] + i * s[1])
                                                ? *(const float *)(ptr[2] + i * s[2])
                                                : *(const float *)(ptr[3] + i * s[3]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        bool cond = nb__load(ptr[1] + i * s[1], c->dt[1]) != 0;
        int k = cond ? 2 : 3;
        nb__store(ptr[0] + i * s[0], c->dt[0], nb__load(ptr[k] + i * s[k], c->dt[k]));
    }
}

static nb_status run_ew(int nops, const nb_tensor *const *ts, nb_row_fn fn, ew_ctx *c) {
    nb_iter it;
    for (int k = 0; k < nops; k++) c->dt[k] = ts[k]->dtype;
    nb__iter_init(&it, nops, ts);
    nb__iter_run(&it, fn, c);
    return NB_OK;
}

static nb_status cpu_copy(nb_tensor *dst, const nb_tensor *src) {
    ew_ctx c = {0};
    return run_ew(2, (const nb_tensor *[]){dst, src}, row_copy, &c);
}

static nb_status cpu_unary(nb_op op, nb_tensor *out, const nb_tensor *x, double p0, double p1) {
    ew_ctx c = {.op = op, .p0 = p0, .p1 = p1};
    int s = slot(x->dtype);
    if (s >= 0 && (out->dtype == x->dtype || out->dtype == NB_BOOL))
        c.ku = nb__cpu_kernels()->unary[op][s];
    return run_ew(2, (const nb_tensor *[]){out, x}, row_unary, &c);
}

static nb_status cpu_binary(nb_op op, nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    ew_ctx c = {.op = op};
    int s = slot(a->dtype);
    if (s >= 0 && a->dtype == b->dtype && (out->dtype == a->dtype || out->dtype == NB_BOOL))
        c.kb = nb__cpu_kernels()->binary[op][s];
    return run_ew(3, (const nb_tensor *[]){out, a, b}, row_binary, &c);
}

static nb_status cpu_where(nb_tensor *out, const nb_tensor *cnd, const nb_tensor *a, const nb_tensor *b) {
    ew_ctx c = {0};
    return run_ew(4, (const nb_tensor *[]){out, cnd, a, b}, row_where, &c);
}

/* ---- reductions ----
 * The reduced axes are split from the kept ones; every output element is
 * combined in one fixed order, independent of the thread count:
 *  - sum over a contiguous trailing block: pairwise sum per output;
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
    double *partial;
} red_ctx;

static void unravel(int64_t i, int n, const int64_t *shape, int64_t *idx) {
    for (int d = n - 1; d >= 0; d--) {
        idx[d] = shape[d] ? i % shape[d] : 0;
        i = shape[d] ? i / shape[d] : 0;
    }
}

/* Reduce the sub-space at element offset `base` of x; returns value (or index for arg ops). */
static double reduce_one(const red_ctx *c, int64_t base) {
    const nb_tensor *x = c->x;
    size_t es = nb_dtype_size(x->dtype);
    const char *data = (const char *)x->storage->data;
    nb_op op = c->op;
    if (op == NB_OP_SUM && c->nr == 1 && c->rstride[0] == 1) {
        if (x->dtype == NB_F32) return nb__cpu_kernels()->sum_f32(c->rnumel, (const float *)data + base);
        if (x->dtype == NB_F64) return nb__cpu_kernels()->sum_f64(c->rnumel, (const double *)data + base);
    }
    double acc = op == NB_OP_PROD ? 1 : op == NB_OP_MAX ? -INFINITY : op == NB_OP_MIN ? INFINITY : 0;
    int64_t best = 0;
    int64_t idx[NB_MAX_DIMS] = {0};
    for (int64_t r = 0; r < c->rnumel; r++) {
        int64_t off = base;
        for (int d = 0; d < c->nr; d++) off += idx[d] * c->rstride[d];
        double v = nb__load(data + off * (int64_t)es, x->dtype);
        switch (op) {
        case NB_OP_SUM: acc += v; break;
        case NB_OP_PROD: acc *= v; break;
        case NB_OP_MAX: if (acc == acc && (v > acc || v != v)) acc = v; break;
        case NB_OP_MIN: if (acc == acc && (v < acc || v != v)) acc = v; break;
        case NB_OP_ARGMAX:
            if (r == 0 || (acc == acc && (v > acc || v != v))) { acc = v; best = r; }
            break;
        case NB_OP_ARGMIN:
            if (r == 0 || (acc == acc && (v < acc || v != v))) { acc = v; best = r; }
            break;
        default: NB_ASSERT(0 && "not a reduction");
        }
        for (int d = c->nr - 1; d >= 0; d--) {
            if (++idx[d] < c->rshape[d]) break;
            idx[d] = 0;
        }
    }
    return (op == NB_OP_ARGMAX || op == NB_OP_ARGMIN) ? (double)best : acc;
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
        nb__store((char *)c->out->storage->data + ooff * (int64_t)oes, c->out->dtype, reduce_one(c, xoff));
    }
}

/* Sum of a contiguous run split in fixed chunks. */
static void sumall_chunk(void *p, int64_t lo, int64_t hi, int chunk) {
    red_ctx *c = p;
    const char *base = (const char *)nb__ptr(c->x);
    c->partial[chunk] = c->x->dtype == NB_F32
                            ? nb__cpu_kernels()->sum_f32(hi - lo, (const float *)base + lo)
                            : nb__cpu_kernels()->sum_f64(hi - lo, (const double *)base + lo);
}

/* Column sums: x viewed as [R, K] contiguous; each range of columns is
 * accumulated over all rows in blocks of 64 rows (then blocks in order). */
static void colsum_range(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const red_ctx *c = p;
    int64_t K = nb__numel(c->out), R = c->rnumel, w = hi - lo;
    double *acc = calloc((size_t)(2 * w), sizeof(double));
    if (!acc) NB_ASSERT(!"colsum scratch allocation failed");
    double *blk = acc + w;
    const nb_cpu_kernels *k = nb__cpu_kernels();
    const char *base = (const char *)nb__ptr(c->x);
    for (int64_t r0 = 0; r0 < R; r0 += 64) {
        memset(blk, 0, sizeof(double) * (size_t)w);
        int64_t r1 = r0 + 64 < R ? r0 + 64 : R;
        for (int64_t r = r0; r < r1; r++) {
            if (c->x->dtype == NB_F32) k->acc_f32(w, blk, (const float *)base + r * K + lo);
            else k->acc_f64(w, blk, (const double *)base + r * K + lo);
        }
        for (int64_t j = 0; j < w; j++) acc[j] += blk[j];
    }
    char *o = nb__ptr(c->out);
    for (int64_t j = 0; j < w; j++) nb__store(o + (lo + j) * (int64_t)nb_dtype_size(c->out->dtype), c->out->dtype, acc[j]);
    free(acc);
}

static nb_status cpu_reduce(nb_op op, nb_tensor *out, const nb_tensor *x, const bool *mask) {
    red_ctx c = {.op = op, .x = x, .out = out, .rnumel = 1};
    for (int d = 0; d < x->ndim; d++) {
        if (mask[d]) {
            if (x->shape[d] == 1) continue;
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
        double part[64];
        c.partial = part;
        nb__parallel_chunks(c.rnumel, 64, sumall_chunk, &c);
        int64_t nch = c.rnumel < 64 ? c.rnumel : 64;
        double s = 0;
        for (int64_t i = 0; i < nch; i++) s += part[i];
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
            nb__parallel_for(K, 256, colsum_range, &c);
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
        double acc = c->op == NB_OP_CUMPROD ? 1 : 0;
        for (int64_t j = 0; j < n; j++) {
            double v = nb__load(xp + j * xs * (int64_t)xes, c->x->dtype);
            acc = c->op == NB_OP_CUMPROD ? acc * v : acc + v;
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

/* ---- matmul ---- */

typedef struct mm_ctx {
    nb_tensor *out;
    const nb_tensor *a, *b;
    int nb;
    int64_t bshape[NB_MAX_DIMS];
    int64_t m, n, k;
} mm_ctx;

static void mm_batch(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const mm_ctx *c = p;
    int nd = c->out->ndim;
    int64_t idx[NB_MAX_DIMS];
    for (int64_t bi = lo; bi < hi; bi++) {
        unravel(bi, c->nb, c->bshape, idx);
        int64_t ao = c->a->offset, bo = c->b->offset, oo = c->out->offset;
        for (int d = 0; d < c->nb; d++) {
            ao += idx[d] * c->a->stride[d];
            bo += idx[d] * c->b->stride[d];
            oo += idx[d] * c->out->stride[d];
        }
        if (c->out->dtype == NB_F32 && c->a->stride[nd - 1] == 1 && c->b->stride[nd - 1] == 1) {
            nb__cpu_kernels()->gemm_f32(c->m, c->n, c->k, (const float *)c->a->storage->data + ao,
                                        c->a->stride[nd - 2], (const float *)c->b->storage->data + bo,
                                        c->b->stride[nd - 2], (float *)c->out->storage->data + oo,
                                        c->out->stride[nd - 2], false);
            continue;
        }
        size_t es = nb_dtype_size(c->out->dtype);
        const char *ad = c->a->storage->data, *bd = c->b->storage->data;
        char *od = c->out->storage->data;
        for (int64_t i = 0; i < c->m; i++)
            for (int64_t j = 0; j < c->n; j++) {
                double acc = 0;
                for (int64_t q = 0; q < c->k; q++)
                    acc += nb__load(ad + (ao + i * c->a->stride[nd - 2] + q * c->a->stride[nd - 1]) * (int64_t)es, c->a->dtype) *
                           nb__load(bd + (bo + q * c->b->stride[nd - 2] + j * c->b->stride[nd - 1]) * (int64_t)es, c->b->dtype);
                nb__store(od + (oo + i * c->out->stride[nd - 2] + j * c->out->stride[nd - 1]) * (int64_t)es, c->out->dtype, acc);
            }
    }
}

static nb_status cpu_matmul(nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    int nd = out->ndim;
    mm_ctx c = {.out = out, .a = a, .b = b, .nb = nd - 2, .m = out->shape[nd - 2],
                .n = out->shape[nd - 1], .k = a->shape[nd - 1]};
    int64_t batch = 1;
    for (int d = 0; d < nd - 2; d++) {
        c.bshape[d] = out->shape[d];
        batch *= out->shape[d];
    }
    nb__parallel_for(batch, 1, mm_batch, &c);
    return NB_OK;
}

/* ---- gather / scatter_add ---- */

static nb_status cpu_gather(nb_tensor *out, const nb_tensor *x, int axis, const nb_tensor *index) {
    return nb__ref_backend.gather(out, x, axis, index);
}

static nb_status cpu_scatter_add(nb_tensor *out, int axis, const nb_tensor *index, const nb_tensor *src) {
    return nb__ref_backend.scatter_add(out, axis, index, src);
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
    .gather = cpu_gather,
    .scatter_add = cpu_scatter_add,
};
