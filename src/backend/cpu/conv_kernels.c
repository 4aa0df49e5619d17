/*
 * conv_kernels.c — the CPU backend's sliding-window kernels (backend.h
 * `window`): im2col / col2im and max pooling / unpooling on f32 planes,
 * one [H, W] plane per work item across the thread pool.  Each output
 * element is produced by one thread in a fixed order, so results do not
 * depend on the thread count.  Other dtypes use the reference kernels.
 */
#include "../backend.h"
#include "conv_kernels.h"
#include "kernels.h"
#include "pool.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

typedef nb_cpu_win win_ctx;

enum { TAPS_MAX = 1 << 22 }; /* largest pooled plane given a tap table (16 MiB); larger ones take the general loop */

static int64_t ceil_div(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Output columns [*j0, *j1) whose tap at column offset off = q*dil - pad lands inside [0, W). */
static void inside_range(const win_ctx *c, int64_t off, int64_t *j0, int64_t *j1) {
    int64_t s = c->w.stride[1];
    *j0 = clamp64(ceil_div(-off, s), 0, c->OW);
    *j1 = clamp64(ceil_div(c->W - off, s), *j0, c->OW);
}

/* Output rows [*i0, *i1) whose tap row p*dil - pad lands inside [0, H) (stride 1). */
static void rows_inside(const win_ctx *c, int64_t p, int64_t *i0, int64_t *i1) {
    int64_t off = p * c->w.dilation[0] - c->w.padding[0];
    *i0 = clamp64(-off, 0, c->OH);
    *i1 = clamp64(c->H - off, *i0, c->OH);
}

/* Kernel tap (p, column offset off) when stride is 1 and OW == W: output position k of the tap's row reads
 * image position k + delta, and [lo, hi) are the positions whose image row lies inside the plane. */
static void shifted_span(const win_ctx *c, int64_t p, int64_t off, int64_t *delta, int64_t *lo, int64_t *hi) {
    int64_t W = c->W, i0, i1;
    *delta = (p * c->w.dilation[0] - c->w.padding[0]) * W + off;
    rows_inside(c, p, &i0, &i1);
    *lo = clamp64(-*delta, i0 * W, i1 * W);
    *hi = clamp64(c->H * W - *delta, *lo, i1 * W);
}

/* Row (p, q) of one plane's unfold when stride is 1 and OW == W: the image shifted by delta positions, in
 * one pass over the valid rows that selects +0 for the columns that wrapped around a row edge (flag 0 in
 * `inside`), and zeros before and after them. */
NB_SIMD_CLONES static void unfold_shifted(const win_ctx *c, int64_t p, int64_t off, const uint8_t *restrict inside,
                                          float *restrict r, const float *restrict img) {
    int64_t delta, lo, hi;
    shifted_span(c, p, off, &delta, &lo, &hi);
    for (int64_t k = 0; k < lo; k++) r[k] = 0;
    for (int64_t k = lo; k < hi; k++) {
        float v = img[k + delta]; /* inside the plane for every k in [lo, hi) */
        r[k] = inside[k] ? v : 0.0f;
    }
    for (int64_t k = hi; k < c->OH * c->W; k++) r[k] = 0;
}

/* One plane of unfold: cols rows (p, q), each OH*OW taps of img [H, W], zero outside.  Rows of the
 * general path are short (OW floats), so plain loops beat memcpy / memset calls. */
NB_SIMD_CLONES static void unfold_plane(const win_ctx *c, float *restrict cols, const float *restrict img) {
    const nb_window2d *w = &c->w;
    int64_t L = c->OH * c->OW, OW = c->OW, s = w->stride[1];
    for (int64_t p = 0; p < w->kernel[0]; p++)
        for (int64_t q = 0; q < w->kernel[1]; q++) {
            float *restrict row = cols + (p * w->kernel[1] + q) * L;
            int64_t off = q * w->dilation[1] - w->padding[1], j0, j1;
            if (c->inside) {
                unfold_shifted(c, p, off, c->inside + q * L, row, img);
                continue;
            }
            inside_range(c, off, &j0, &j1);
            for (int64_t i = 0; i < c->OH; i++) {
                int64_t h = i * w->stride[0] - w->padding[0] + p * w->dilation[0], base = h * c->W + off;
                float *restrict r = row + i * OW;
                bool in_h = h >= 0 && h < c->H;
                for (int64_t j = 0; j < (in_h ? j0 : OW); j++) r[j] = 0;
                if (!in_h) continue;
                if (s == 1)
                    for (int64_t j = j0; j < j1; j++) r[j] = img[base + j];
                else
                    for (int64_t j = j0; j < j1; j++) r[j] = img[base + j * s];
                for (int64_t j = j1; j < OW; j++) r[j] = 0;
            }
        }
}

/* Row (p, q) of one plane's fold when stride is 1 and OW == W (unfold_shifted's adjoint): the row is added
 * to the image shifted by delta positions in one pass over the valid rows; the columns that wrapped around
 * a row edge (flag 0 in `inside`) add +0, which leaves any sum unchanged (a fold's sum, starting at +0,
 * is never -0), so every image element gets the same additions in the same order as in fold_plane's
 * general loop. */
NB_SIMD_CLONES static void fold_shifted(const win_ctx *c, int64_t p, int64_t off, const uint8_t *restrict inside,
                                        const float *restrict r, float *restrict img) {
    int64_t delta, lo, hi;
    shifted_span(c, p, off, &delta, &lo, &hi);
    for (int64_t k = lo; k < hi; k++) img[k + delta] += inside[k] ? r[k] : 0.0f;
}

/* One plane of fold: img [H, W] = the sum of each cols row (p, q)'s taps at the positions they came from. */
NB_SIMD_CLONES static void fold_plane(const win_ctx *c, const float *restrict cols, float *restrict img) {
    const nb_window2d *w = &c->w;
    int64_t L = c->OH * c->OW, OW = c->OW, s = w->stride[1];
    memset(img, 0, sizeof(float) * (size_t)(c->H * c->W));
    for (int64_t p = 0; p < w->kernel[0]; p++)
        for (int64_t q = 0; q < w->kernel[1]; q++) {
            const float *restrict row = cols + (p * w->kernel[1] + q) * L;
            int64_t off = q * w->dilation[1] - w->padding[1], j0, j1;
            if (c->inside) {
                fold_shifted(c, p, off, c->inside + q * L, row, img);
                continue;
            }
            inside_range(c, off, &j0, &j1);
            for (int64_t i = 0; i < c->OH; i++) {
                int64_t h = i * w->stride[0] - w->padding[0] + p * w->dilation[0], base = h * c->W + off;
                if (h < 0 || h >= c->H) continue;
                for (int64_t j = j0; j < j1; j++) img[base + j * s] += row[i * OW + j];
            }
        }
}

/* torch's max-pool rule over a window's taps (positions first + off[t], t < n, in row-major tap order):
 * start at the first tap, a later tap wins when larger or NaN.  So the result is the maximum and the
 * first tap holding it, or, when a tap is NaN, the last NaN tap: its position and its value, payload
 * and sign included (as torch and the reference backend).  The common path keeps its data-dependent
 * choices out of branches: the value by selects, then (when arg is not NULL) the position by integer
 * masks; a window with a NaN branches to its own loop. */
static inline float taps_max(const float *x, int64_t first, const int64_t *off, int n, int64_t *arg) {
    float best = x[first + off[0]];
    int nan = best != best;
    for (int t = 1; t < n; t++) {
        float v = x[first + off[t]];
        nan |= v != v;
        best = v > best ? v : best; /* maxss */
    }
    int64_t pos = first + off[0];
    if (nan) { /* the last NaN: ascending, each NaN overwrites */
        for (int t = 0; t < n; t++) {
            int64_t at = first + off[t], m = -(int64_t)(x[at] != x[at]);
            pos = (at & m) | (pos & ~m);
        }
        best = x[pos];
    } else if (arg) /* the first maximum: descending, each match overwrites */
        for (int t = n - 1; t >= 0; t--) {
            int64_t at = first + off[t], m = -(int64_t)(x[at] == best);
            pos = (at & m) | (pos & ~m);
        }
    if (arg) *arg = pos;
    return best;
}

/* Taps [*t0, *t1) of a window starting at `start` (stride dil, k taps) that land inside [0, n). */
static void taps_inside(int64_t start, int64_t k, int64_t dil, int64_t n, int64_t *t0, int64_t *t1) {
    *t0 = clamp64(ceil_div(-start, dil), 0, k);
    *t1 = clamp64(ceil_div(n - start, dil), *t0, k);
}

#define MAX_TAPS 256

/* Offsets (from tap (p0, q0)) of the taps p in [p0, p1), q in [q0, q1); their count, or 0 when too many. */
static int tap_offsets(const win_ctx *c, int64_t p0, int64_t p1, int64_t q0, int64_t q1, int64_t *off) {
    if ((p1 - p0) * (q1 - q0) > MAX_TAPS) return 0;
    int n = 0;
    for (int64_t p = 0; p < p1 - p0; p++)
        for (int64_t q = 0; q < q1 - q0; q++) off[n++] = p * c->w.dilation[0] * c->W + q * c->w.dilation[1];
    return n;
}

/* One window of a plane with taps p in [p0, p1), q in [q0, q1) inside x, its tap (0, 0) at image position base. */
static float window_max(const win_ctx *c, const float *x, int64_t base, int64_t p0, int64_t p1, int64_t q0,
                        int64_t q1, int64_t *arg) {
    int64_t first = base + p0 * c->w.dilation[0] * c->W + q0 * c->w.dilation[1], off[MAX_TAPS];
    int n = tap_offsets(c, p0, p1, q0, q1, off);
    if (n) return taps_max(x, first, off, n, arg);
    float best = x[first]; /* more than MAX_TAPS taps: the rule, tap by tap */
    int64_t pos = first;
    for (int64_t p = p0; p < p1; p++)
        for (int64_t q = q0; q < q1; q++) {
            int64_t at = base + p * c->w.dilation[0] * c->W + q * c->w.dilation[1];
            if (x[at] > best || x[at] != x[at]) {
                best = x[at];
                pos = at;
            }
        }
    if (arg) *arg = pos;
    return best;
}

/* The common 2x2 window with stride 2 and no padding, values only, over one row of n outputs: taps a, b
 * (row r0) and c, d (row r1 = r0 + W), same rule as taps_max. */
NB_SIMD_CLONES static void max_pool_2x2_row(const float *restrict r0, int64_t W, int64_t n, float *restrict out) {
    const float *restrict r1 = r0 + W;
    for (int64_t j = 0; j < n; j++) {
        float a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
        float m = b > a ? b : a;
        m = c > m ? c : m;
        m = d > m ? d : m;
        float last_nan = d != d ? d : c != c ? c : b != b ? b : a;
        out[j] = ((a != a) | (b != b) | (c != c) | (d != d)) ? last_nan : m;
    }
}

/* The 2x2 / stride-2 window with the argmax over a whole plane of n outputs: output o's taps are a, b at
 * x[t[o]], x[t[o] + 1] and c, d one row (W) below; idx[o] = the flat position in the plane of the first
 * tap holding the maximum, or of the last NaN (taps_max's rule).  With the int64 positions a row loop
 * (rows of 14 or 7 outputs in a 28x28 network) runs mostly scalar, so this loop runs over the plane
 * through the call's table t of tap offsets (gathers where the ISA has them): 2-2.5x faster measured;
 * for values only the row loop is faster (bench/RESULTS.md, section 16).  Where the ISA's table has
 * a row kernel with masked loads and stores (pool2x2_idx, AVX-512) that one runs instead. */
NB_SIMD_CLONES static void max_pool_2x2_plane_idx(const float *restrict x, const int32_t *restrict t, int64_t n,
                                                  int64_t W, float *restrict out, int64_t *restrict idx) {
    for (int64_t o = 0; o < n; o++) {
        float a = x[t[o]], b = x[t[o] + 1], c = x[t[o] + W], d = x[t[o] + W + 1];
        float m = b > a ? b : a;
        m = c > m ? c : m;
        m = d > m ? d : m;
        int32_t na = a != a, nb = b != b, nc = c != c, nd = d != d, nan = na | nb | nc | nd;
        out[o] = nan ? (nd ? d : nc ? c : nb ? b : a) : m;
        int32_t first_max = a == m ? 0 : b == m ? 1 : c == m ? (int32_t)W : (int32_t)W + 1;
        int32_t last_nan = nd ? (int32_t)W + 1 : nc ? (int32_t)W : nb ? 1 : 0;
        idx[o] = (int64_t)t[o] + (nan ? last_nan : first_max);
    }
}

/* The 2x2 window with stride 2, no padding and no dilation (max_pool_2x2_row's and _plane_idx's). */
static bool pool_2x2(const nb_window2d *w) {
    return w->kernel[0] == 2 && w->kernel[1] == 2 && w->stride[0] == 2 && w->stride[1] == 2 && w->padding[0] == 0 &&
           w->padding[1] == 0 && w->dilation[0] == 1 && w->dilation[1] == 1;
}

/* One plane of max pooling: the 2x2 / stride-2 window has its own loops (with the argmax, the ISA's row
 * kernel or the plane loop over the call's tap table c->taps); otherwise interior windows share one
 * offset table per row and border windows clip theirs. */
static void max_pool_plane(const win_ctx *c, const float *x, float *out, int64_t *idx) {
    const nb_window2d *w = &c->w;
    if (c->pool_row) {
        for (int64_t i = 0; i < c->OH; i++) c->pool_row(x, 2 * i * c->W, c->W, c->OW, out + i * c->OW, idx + i * c->OW);
        return;
    }
    if (c->taps) {
        max_pool_2x2_plane_idx(x, c->taps, c->OH * c->OW, c->W, out, idx);
        return;
    }
    if (!idx && pool_2x2(w)) {
        for (int64_t i = 0; i < c->OH; i++) max_pool_2x2_row(x + 2 * i * c->W, c->W, c->OW, out + i * c->OW);
        return;
    }
    int64_t j0, j1, k0, k1, last = (w->kernel[1] - 1) * w->dilation[1] - w->padding[1], off[MAX_TAPS];
    inside_range(c, -w->padding[1], &j0, &j1); /* columns whose first tap is inside ... */
    inside_range(c, last, &k0, &k1);           /* ... and whose last tap is inside */
    j0 = j0 > k0 ? j0 : k0;
    j1 = j1 < k1 ? j1 : k1;
    for (int64_t i = 0; i < c->OH; i++) {
        int64_t h = i * w->stride[0] - w->padding[0], p0, p1;
        taps_inside(h, w->kernel[0], w->dilation[0], c->H, &p0, &p1);
        int n = tap_offsets(c, p0, p1, 0, w->kernel[1], off);
        for (int64_t j = 0; j < c->OW; j++) {
            int64_t y = j * w->stride[1] - w->padding[1], q0, q1, o = i * c->OW + j;
            int64_t *arg = idx ? &idx[o] : NULL;
            if (n && j >= j0 && j < j1) {
                out[o] = taps_max(x, (h + p0 * w->dilation[0]) * c->W + y, off, n, arg);
                continue;
            }
            taps_inside(y, w->kernel[1], w->dilation[1], c->W, &q0, &q1);
            out[o] = window_max(c, x, h * c->W + y, p0, p1, q0, q1, arg);
        }
    }
}

static void window_planes(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const win_ctx *c = p;
    int64_t kk = c->w.kernel[0] * c->w.kernel[1], L = c->OH * c->OW, img = c->H * c->W;
    for (int64_t pl = lo; pl < hi; pl++) {
        switch (c->op) {
        case NB_OP_UNFOLD: unfold_plane(c, c->out + pl * kk * L, c->x + pl * img); break;
        case NB_OP_FOLD: fold_plane(c, c->x + pl * kk * L, c->out + pl * img); break;
        case NB_OP_MAX_POOL2D:
            max_pool_plane(c, c->x + pl * img, c->out + pl * L, c->idx ? c->idx + pl * L : NULL);
            break;
        case NB_OP_MAX_UNPOOL2D: { /* x is the pooled [OH, OW] grid here, out the [H, W] image */
            float *o = c->out + pl * img;
            const float *x = c->x + pl * L;
            const int64_t *ix = c->idx + pl * L;
            bool bad = false; /* an index out of the plane: skipped here, reported by nb__cpu_window */
            memset(o, 0, sizeof(float) * (size_t)img);
            for (int64_t k = 0; k < L; k++) {
                bool in = (uint64_t)ix[k] < (uint64_t)img; /* negatives wrap high */
                bad |= !in;
                if (in) o[ix[k]] += x[k];
            }
            for (int64_t first = atomic_load(c->bad_plane); bad && pl < first;) /* keep the lowest such plane */
                if (atomic_compare_exchange_weak(c->bad_plane, &first, pl)) break;
            break;
        }
        default: NB_ASSERT(0 && "not a window op");
        }
    }
}

/* max_pool_2x2_plane_idx's table t: each output's first tap, 2i*W + 2j (OH*OW entries). */
static int32_t *pool_taps_fill(const win_ctx *c, int32_t *t) {
    for (int64_t i = 0; i < c->OH; i++)
        for (int64_t j = 0; j < c->OW; j++) t[i * c->OW + j] = (int32_t)(2 * i * c->W + 2 * j);
    return t;
}

/* unfold_shifted's and fold_shifted's flags: for kernel column q, OH*W flags, 1 where output column k % W
 * has its tap inside the image row (inside_range). */
static uint8_t *shifted_inside_fill(const win_ctx *c, uint8_t *f) {
    int64_t L = c->OH * c->OW;
    for (int64_t q = 0; q < c->w.kernel[1]; q++) {
        int64_t j0, j1;
        inside_range(c, q * c->w.dilation[1] - c->w.padding[1], &j0, &j1);
        uint8_t *row = f + q * L; /* OW == W: the first output row, then copies of it (no division per element) */
        for (int64_t j = 0; j < c->OW; j++) row[j] = j >= j0 && j < j1;
        for (int64_t k = c->OW; k < L; k += c->OW) memcpy(row + k, row, (size_t)c->OW);
    }
    return f;
}


nb_status nb__cpu_win_prepare(nb_cpu_win *c, nb_op op, int64_t H, int64_t W, const int64_t *grid,
                              const nb_window2d *w, bool idx) {
    *c = (nb_cpu_win){.op = op, .H = H, .W = W};
    if (op == NB_OP_MAX_UNPOOL2D) {
        c->OH = grid[0];
        c->OW = grid[1];
    } else {
        c->w = *w;
        c->OH = nb__window_out(H, w->kernel[0], w->stride[0], w->padding[0], w->dilation[0]);
        c->OW = nb__window_out(W, w->kernel[1], w->stride[1], w->padding[1], w->dilation[1]);
    }
    c->work = c->OH * c->OW * (op == NB_OP_UNFOLD || op == NB_OP_FOLD ? w->kernel[0] * w->kernel[1] : 1);
    /* the pass's one table, if its op takes one (sizes in bytes; the grid and the fold's rows are never empty):
     * the pooling's tap offsets, or the shifted unfold's / fold's flags */
    bool pool_idx = op == NB_OP_MAX_POOL2D && idx && pool_2x2(w) && H * W <= INT32_MAX;
    c->pool_row = pool_idx ? nb__cpu_kernels()->pool2x2_idx : NULL;
    bool pool_taps = pool_idx && !c->pool_row && c->work <= TAPS_MAX;
    size_t inside_size = (size_t)(c->OH * c->OW * c->w.kernel[1]);
    bool shifted = (op == NB_OP_UNFOLD || op == NB_OP_FOLD) && w->stride[0] == 1 && w->stride[1] == 1 &&
                   c->OW == W && inside_size <= TAPS_MAX;
    c->table_size = pool_taps ? sizeof(int32_t) * (size_t)(c->OH * c->OW) : shifted ? inside_size : 0;
    c->table = c->table_size ? nb__buf_alloc(c->table_size) : NULL;
    if (c->table_size && !c->table) return NB_ERR_OOM;
    if (pool_taps) c->taps = pool_taps_fill(c, c->table);
    if (shifted) c->inside = shifted_inside_fill(c, c->table);
    return NB_OK;
}

void nb__cpu_win_run(const nb_cpu_win *c, const float *x, float *out, int64_t *idx, int64_t planes) {
    NB_ASSERT(c->op != NB_OP_MAX_UNPOOL2D); /* its range check is nb__cpu_window's */
    nb_cpu_win r = *c;
    r.x = x;
    r.out = out;
    r.idx = idx;
    window_planes(&r, 0, planes, 0);
}

void nb__cpu_win_release(nb_cpu_win *c) {
    if (c->table) nb__buf_free(c->table, c->table_size);
    c->table = NULL;
}

nb_status nb__cpu_window(nb_op op, nb_tensor *out, nb_tensor *idx, const nb_tensor *x, const nb_window2d *w) {
    if (x->dtype != NB_F32) return nb__ref_backend.window(op, out, idx, x, w);
    /* the image side is x for UNFOLD / MAX_POOL2D, out for FOLD / MAX_UNPOOL2D */
    const nb_tensor *img = op == NB_OP_UNFOLD || op == NB_OP_MAX_POOL2D ? x : out;
    const nb_tensor *grid = img == x ? out : x;
    nb_cpu_win c;
    nb_status st = nb__cpu_win_prepare(&c, op, img->shape[2], img->shape[3], grid->shape + 2, w, idx != NULL);
    if (st != NB_OK) return st;
    c.x = (const float *)nb__ptr(x);
    c.out = (float *)nb__ptr(out);
    c.idx = idx ? (int64_t *)nb__ptr(idx) : NULL;
    int64_t planes = img->shape[0] * img->shape[1];
    _Atomic int64_t bad_plane = planes;
    c.bad_plane = &bad_plane;
    nb__parallel_for(planes, c.work >= 16384 ? 1 : 16384 / (c.work ? c.work : 1), window_planes, &c);
    nb__cpu_win_release(&c);
    int64_t pl = atomic_load(&bad_plane), L = c.OH * c.OW, img_size = c.H * c.W;
    for (int64_t k = 0; pl < planes && k < L; k++) /* the first bad index in idx's order */
        if ((uint64_t)c.idx[pl * L + k] >= (uint64_t)img_size) return nb__index_error("max_unpool2d", c.idx[pl * L + k], img_size);
    return NB_OK;
}
