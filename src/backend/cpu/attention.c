/*
 * attention.c — the CPU backend's fused attention (backend.h, the attention
 * entry), in the manner of FlashAttention (Dao et al. 2022): each task takes
 * a tile of TQ queries of one head and walks the keys it may see in tiles of
 * TK — scores by the backend's GEMM, an online softmax (running maximum and
 * sum per query, the accumulated output rescaled when the maximum grows, the
 * exponentials by the eager exp kernel), the tile's P V by the GEMM — so no
 * [Lq, Lk] score tensor exists and a causal mask skips the tiles above the
 * diagonal.  Tasks run in fixed chunks, so results do not depend on the
 * thread count.
 */
#include "attention.h"
#include "gemm.h"
#include "kernels.h"
#include "pool.h"

#include <math.h>
#include <string.h>

enum { TQ = 64, TK = 256 };

/* The scratch of a tiled kernel: per chunk of tasks (min(tasks, 4 · threads) chunks) the GEMM's
 * workspace (the largest its calls need, 64-byte aligned) and then the tiles, and after the chunks
 * `extra` bytes. */
typedef struct at_ws {
    char *base, *ws, *extra;
    size_t gemm, chunk, total;
    int64_t chunks;
} at_ws;

static bool at_ws_alloc(at_ws *w, const nb_gemm *sizes, int n, size_t tiles, int64_t tasks, size_t extra) {
    size_t g = 0;
    for (int i = 0; i < n; i++) {
        size_t s = nb__gemm_ws_size(&sizes[i]);
        g = s > g ? s : g;
    }
    w->gemm = (g + 63) / 64 * 64;
    w->chunk = (w->gemm + tiles + 63) / 64 * 64;
    w->chunks = 4 * (int64_t)nb_get_num_threads();
    if (w->chunks > tasks) w->chunks = tasks;
    w->total = w->chunk * (size_t)w->chunks + 64 + extra;
    if (!(w->base = nb__buf_alloc(w->total))) return false;
    w->ws = (char *)(((uintptr_t)w->base + 63) / 64 * 64);
    w->extra = w->ws + w->chunk * (size_t)w->chunks;
    return true;
}

/* Chunk tid's scratch. */
static char *at_ws_of(const at_ws *w, int tid) { return w->ws + (size_t)tid * w->chunk; }

typedef struct at_ctx {
    const nb_tensor *out, *lse, *q, *k, *v;
    int mask;
    int64_t window, hq, hkv, lq, lk, d, dv, nqt;
    double scale;
    at_ws w;
    nb_k_unary exp_kernel;
} at_ctx;

/* The largest of x[0..n) and m, and the sum of x[0..n) in double: four independent lanes each, so
 * the loops overlap their latencies (the order is fixed: the results do not depend on threads). */
#define AT_ROWS(T)                                                                                              \
    static double row_max_##T(const T *x, int64_t n, double m) {                                             \
        T l[4] = {(T)m, (T)m, (T)m, (T)m};                                                                    \
        int64_t j = 0;                                                                                         \
        for (; j + 4 <= n; j += 4)                                                                             \
            for (int u = 0; u < 4; u++) l[u] = x[j + u] > l[u] ? x[j + u] : l[u];                             \
        for (; j < n; j++) l[0] = x[j] > l[0] ? x[j] : l[0];                                                  \
        T a = l[0] > l[1] ? l[0] : l[1], b = l[2] > l[3] ? l[2] : l[3];                                       \
        if ((a > b ? a : b) == -INFINITY) /* nothing above -inf: a NaN among them must still give NaN */     \
            for (j = 0; j < n; j++)                                                                            \
                if (x[j] != x[j]) return NAN;                                                                  \
        return a > b ? a : b; /* other NaN scores skip the maximum and reach the sum (NaN) */                  \
    }                                                                                                          \
    static double row_sum_##T(const T *x, int64_t n) {                                                        \
        double l[4] = {0, 0, 0, 0};                                                                            \
        int64_t j = 0;                                                                                         \
        for (; j + 4 <= n; j += 4)                                                                             \
            for (int u = 0; u < 4; u++) l[u] += x[j + u];                                                     \
        for (; j < n; j++) l[0] += x[j];                                                                       \
        return (l[0] + l[1]) + (l[2] + l[3]);                                                                  \
    }
AT_ROWS(float)
AT_ROWS(double)

#define AT_DEFINE(T, DT, NAME)                                                                                   \
    static void NAME(const at_ctx *c, int64_t task, char *ws) {                                               \
        int64_t d = c->d, dv = c->dv, qt = task % c->nqt, bh = task / c->nqt, h = bh % c->hq, b = bh / c->hq; \
        int64_t kvh = h / (c->hq / c->hkv), i0 = qt * TQ, rows = c->lq - i0 < TQ ? c->lq - i0 : TQ;         \
        const T *q = (const T *)nb__ptr(c->q) + ((b * c->hq + h) * c->lq + i0) * d;                          \
        const T *k = (const T *)nb__ptr(c->k) + (b * c->hkv + kvh) * c->lk * d;                              \
        const T *v = (const T *)nb__ptr(c->v) + (b * c->hkv + kvh) * c->lk * dv;                             \
        T *out = (T *)nb__ptr(c->out) + ((b * c->hq + h) * c->lq + i0) * dv;                                 \
        T *lse = (T *)nb__ptr(c->lse) + (b * c->hq + h) * c->lq + i0;                                         \
        T *qs = (T *)(ws + c->w.gemm), *s = qs + TQ * d, *ot = s + TQ * TK, *acc = ot + TQ * dv;             \
        double *mx = (double *)(acc + TQ * dv), *sum = mx + TQ;                                               \
        for (int64_t r = 0; r < rows * d; r++) qs[r] = (T)(q[r] * c->scale);                                \
        memset(acc, 0, sizeof(T) * (size_t)(rows * dv));                                                     \
        for (int64_t r = 0; r < rows; r++) {                                                                   \
            mx[r] = -INFINITY;                                                                                 \
            sum[r] = 0;                                                                                        \
        }                                                                                                      \
        int64_t jlo = 0, jhi = c->lk;                                                                          \
        if (c->mask != NB_ATTN_MASK_NONE && i0 + rows < jhi) jhi = i0 + rows; /* keys after the last query */ \
        if (c->mask == NB_ATTN_MASK_SLIDING && i0 - c->window + 1 > 0) jlo = i0 - c->window + 1;             \
        for (int64_t j0 = jlo; j0 < jhi; j0 += TK) {                                                          \
            int64_t cols = jhi - j0 < TK ? jhi - j0 : TK;                                                     \
            nb_gemm gs = {DT, rows, cols, d, qs, d, 1, k + j0 * d, 1, d, s, TK, NULL, NULL, NULL, 0, 0, false};                \
            nb__gemm(&gs, ws, 1);                                                                              \
            for (int64_t r = 0; r < rows; r++) {                                                               \
                T *row = s + r * TK;                                                                           \
                int64_t i = i0 + r, lo = 0, hi = cols;                                                         \
                if (c->mask != NB_ATTN_MASK_NONE && i - j0 + 1 < hi) hi = i - j0 + 1;                         \
                if (c->mask == NB_ATTN_MASK_SLIDING && i - c->window + 1 - j0 > lo) lo = i - c->window + 1 - j0; \
                if (hi < lo) hi = lo;                                                                          \
                double m = row_max_##T(row + lo, hi - lo, mx[r]);                                              \
                for (int64_t j = 0; j < lo; j++) row[j] = 0;                                                   \
                for (int64_t j = hi; j < cols; j++) row[j] = 0;                                                \
                if (hi == lo || m == -INFINITY) { /* nothing seen in this tile */                              \
                    for (int64_t j = lo; j < hi; j++) row[j] = 0;                                              \
                    continue;                                                                                  \
                }                                                                                              \
                T mt = (T)m;                                                                                   \
                for (int64_t j = lo; j < hi; j++) row[j] -= mt;                                                \
                c->exp_kernel(hi - lo, (char *)(row + lo), sizeof(T), (const char *)(row + lo), sizeof(T), 0, 0); \
                double add = row_sum_##T(row + lo, hi - lo), alpha = mx[r] == -INFINITY ? 0 : exp(mx[r] - m); \
                sum[r] = sum[r] * alpha + add;                                                                 \
                mx[r] = m;                                                                                     \
                if (alpha != 1)                                                                                \
                    for (int64_t e = 0; e < dv; e++) acc[r * dv + e] = (T)(acc[r * dv + e] * alpha);          \
            }                                                                                                  \
            /* acc + P V into the other buffer by the GEMM's epilogue (no pass of its own), then swapped */    \
            nb_gemm gv = {DT, rows, dv, cols, s, TK, 1, v + j0 * dv, dv, 1, ot, dv, NULL, NULL, acc, dv, 1, false};            \
            nb__gemm(&gv, ws, 1);                                                                              \
            T *sw = acc;                                                                                       \
            acc = ot;                                                                                          \
            ot = sw;                                                                                           \
        }                                                                                                      \
        for (int64_t r = 0; r < rows; r++) {                                                                   \
            for (int64_t e = 0; e < dv; e++)                                                                   \
                out[r * dv + e] = sum[r] != 0 ? (T)(acc[r * dv + e] / sum[r]) : (T)0; /* NaN stays */       \
            lse[r] = sum[r] != 0 ? (T)(mx[r] + log(sum[r])) : (T)-INFINITY;                                   \
        }                                                                                                      \
    }

AT_DEFINE(float, NB_F32, tile_f32)
AT_DEFINE(double, NB_F64, tile_f64)

static void at_range(void *p, int64_t lo, int64_t hi, int tid) {
    const at_ctx *c = p;
    char *ws = at_ws_of(&c->w, tid);
    for (int64_t t = lo; t < hi; t++) {
        if (c->out->dtype == NB_F32) tile_f32(c, t, ws);
        else tile_f64(c, t, ws);
    }
}

nb_status nb__cpu_attention(nb_tensor *out, nb_tensor *lse, const nb_tensor *q, const nb_tensor *k,
                            const nb_tensor *v, int mask, int64_t window, double scale) {
    at_ctx c = {out, lse, q, k, v, mask, window, q->shape[1], k->shape[1], q->shape[2], k->shape[2], q->shape[3],
                v->shape[3], (q->shape[2] + TQ - 1) / TQ, scale, {0}, NULL};
    int slot = out->dtype == NB_F64;
    size_t es = nb_dtype_size(out->dtype);
    c.exp_kernel = nb__cpu_kernels()->unary[NB_OP_EXP][slot];
    nb_gemm sizes[2] = {{.dt = out->dtype, .m = TQ, .n = TK, .k = c.d}, {.dt = out->dtype, .m = TQ, .n = c.dv, .k = TK}};
    size_t tiles = es * (size_t)(TQ * c.d + TQ * TK + 2 * TQ * c.dv) + 2 * sizeof(double) * TQ;
    int64_t tasks = out->shape[0] * c.hq * c.nqt;
    if (tasks == 0) return NB_OK;
    if (!at_ws_alloc(&c.w, sizes, 2, tiles, tasks, 0))
        return nb__error(NB_ERR_OOM, "attention: out of memory for the tiles' workspace");
    nb__parallel_chunks(tasks, c.w.chunks, at_range, &c);
    nb__buf_free(c.w.base, c.w.total);
    return NB_OK;
}

/* ---- the gradient (FlashAttention-2's backward, Dao 2023, Algorithm 2, with its loops swapped
 * so that one task owns a query head): for each tile of TQ queries and each tile of TK keys it
 * sees, P = exp(S − lse) from the scores recomputed by the GEMM, then dV_j += Pᵀ dO_i,
 * dP = dO_i V_jᵀ, dS = P ⊙ (dP − rowsum(dO_i ⊙ O_i)), dQ_i += dS K_j, dK_j += dSᵀ (scale Q_i): five
 * GEMMs per tile pair and no [Lq, Lk] tensor.  A task writes its query head's dQ and (one query
 * head per key head) that key head's dK and dV; with grouped heads each task writes its own
 * dK, dV buffers, summed over the group in head order afterwards — the same sums for any thread
 * count. ---- */

typedef struct atb_ctx {
    const nb_tensor *const *in; /* q, k, v, out, dout, lse */
    nb_tensor *gq, *gk, *gv; /* dq, dk, dv */
    char *bufs; /* grouped heads: per query head [Lk, D] then [Lk, Dv] */
    int mask;
    int64_t window, bn, hq, hkv, lq, lk, d, dv;
    double scale;
    at_ws w;
    nb_k_unary exp_kernel;
} atb_ctx;

/* y[0..n) += x[0..n) */
#define ATB_ADD(T) \
    static void add_##T(T *restrict y, const T *restrict x, int64_t n) { for (int64_t i = 0; i < n; i++) y[i] += x[i]; }
ATB_ADD(float)
ATB_ADD(double)

#define ATB_DEFINE(T, DT, NAME)                                                                                  \
    static void NAME(const atb_ctx *c, int64_t task, char *ws) {                                              \
        int64_t d = c->d, dv = c->dv, h = task % c->hq, b = task / c->hq, grp = c->hq / c->hkv, kvh = h / grp; \
        int64_t qo = (b * c->hq + h) * c->lq, ko = (b * c->hkv + kvh) * c->lk;                               \
        const T *q = (const T *)nb__ptr(c->in[0]) + qo * d, *k = (const T *)nb__ptr(c->in[1]) + ko * d;        \
        const T *v = (const T *)nb__ptr(c->in[2]) + ko * dv, *o = (const T *)nb__ptr(c->in[3]) + qo * dv;      \
        const T *g = (const T *)nb__ptr(c->in[4]) + qo * dv, *lse = (const T *)nb__ptr(c->in[5]) + qo;        \
        T *dq = (T *)nb__ptr(c->gq) + qo * d;                                                                   \
        T *dk = grp == 1 ? (T *)nb__ptr(c->gk) + ko * d : (T *)c->bufs + task * c->lk * (d + dv);             \
        T *dvv = grp == 1 ? (T *)nb__ptr(c->gv) + ko * dv : dk + c->lk * d;                                   \
        T *qs = (T *)(ws + c->w.gemm), *p = qs + TQ * d, *dp = p + TQ * TK, *tmp = dp + TQ * TK;              \
        T *dqa = tmp + TK * (d > dv ? d : dv);                                                                  \
        double *dr = (double *)(dqa + TQ * d);                                                                  \
        memset(dk, 0, sizeof(T) * (size_t)(c->lk * d));                                                         \
        memset(dvv, 0, sizeof(T) * (size_t)(c->lk * dv));                                                       \
        for (int64_t i0 = 0; i0 < c->lq; i0 += TQ) {                                                           \
            int64_t rows = c->lq - i0 < TQ ? c->lq - i0 : TQ;                                                  \
            const T *qi = q + i0 * d, *gi = g + i0 * dv;                                                       \
            for (int64_t r = 0; r < rows * d; r++) qs[r] = (T)(qi[r] * c->scale);                             \
            for (int64_t r = 0; r < rows; r++) {                                                               \
                double s = 0;                                                                                  \
                for (int64_t e = 0; e < dv; e++) s += (double)gi[r * dv + e] * o[(i0 + r) * dv + e];          \
                dr[r] = s;                                                                                     \
            }                                                                                                  \
            memset(dqa, 0, sizeof(T) * (size_t)(rows * d));                                                   \
            int64_t jlo = 0, jhi = c->lk;                                                                      \
            if (c->mask != NB_ATTN_MASK_NONE && i0 + rows < jhi) jhi = i0 + rows;                             \
            if (c->mask == NB_ATTN_MASK_SLIDING && i0 - c->window + 1 > 0) jlo = i0 - c->window + 1;         \
            for (int64_t j0 = jlo; j0 < jhi; j0 += TK) {                                                      \
                int64_t cols = jhi - j0 < TK ? jhi - j0 : TK;                                                 \
                nb_gemm gs = {DT, rows, cols, d, qs, d, 1, k + j0 * d, 1, d, p, TK, NULL, NULL, NULL, 0, 0, false};  \
                nb__gemm(&gs, ws, 1);                                                                          \
                for (int64_t r = 0; r < rows; r++) { /* P = exp(S - lse) where the query sees the key */     \
                    T *row = p + r * TK;                                                                       \
                    int64_t i = i0 + r, lo = 0, hi = cols;                                                     \
                    if (c->mask != NB_ATTN_MASK_NONE && i - j0 + 1 < hi) hi = i - j0 + 1;                     \
                    if (c->mask == NB_ATTN_MASK_SLIDING && i - c->window + 1 - j0 > lo) lo = i - c->window + 1 - j0; \
                    if (hi < lo || lse[i] == -INFINITY) hi = lo;                                               \
                    for (int64_t j = 0; j < lo; j++) row[j] = 0;                                               \
                    for (int64_t j = hi; j < cols; j++) row[j] = 0;                                            \
                    for (int64_t j = lo; j < hi; j++) row[j] -= lse[i];                                        \
                    c->exp_kernel(hi - lo, (char *)(row + lo), sizeof(T), (const char *)(row + lo), sizeof(T), 0, 0); \
                }                                                                                              \
                nb_gemm gv = {DT, cols, dv, rows, p, 1, TK, gi, dv, 1, tmp, dv, NULL, NULL, NULL, 0, 0, false}; /* Pᵀ dO */ \
                nb__gemm(&gv, ws, 1);                                                                          \
                add_##T(dvv + j0 * dv, tmp, cols * dv);                                                        \
                nb_gemm gp = {DT, rows, cols, dv, gi, dv, 1, v + j0 * dv, 1, dv, dp, TK, NULL, NULL, NULL, 0, 0, false}; /* dO Vᵀ */ \
                nb__gemm(&gp, ws, 1);                                                                          \
                for (int64_t r = 0; r < rows; r++) {                                                           \
                    T dri = (T)dr[r], *pr = p + r * TK, *sr = dp + r * TK;                                     \
                    for (int64_t j = 0; j < cols; j++) sr[j] = pr[j] * (sr[j] - dri);                         \
                }                                                                                              \
                nb_gemm gq = {DT, rows, d, cols, dp, TK, 1, k + j0 * d, d, 1, tmp, d, NULL, NULL, NULL, 0, 0, false}; /* dS K */ \
                nb__gemm(&gq, ws, 1);                                                                          \
                add_##T(dqa, tmp, rows * d);                                                                   \
                nb_gemm gk = {DT, cols, d, rows, dp, 1, TK, qs, d, 1, tmp, d, NULL, NULL, NULL, 0, 0, false}; /* dSᵀ (scale Q) */ \
                nb__gemm(&gk, ws, 1);                                                                          \
                add_##T(dk + j0 * d, tmp, cols * d);                                                           \
            }                                                                                                  \
            for (int64_t r = 0; r < rows * d; r++) dq[i0 * d + r] = (T)(dqa[r] * c->scale);                   \
        }                                                                                                      \
    }

ATB_DEFINE(float, NB_F32, grad_f32)
ATB_DEFINE(double, NB_F64, grad_f64)

static void atb_range(void *p, int64_t lo, int64_t hi, int tid) {
    const atb_ctx *c = p;
    char *ws = at_ws_of(&c->w, tid);
    for (int64_t t = lo; t < hi; t++) {
        if (c->gq->dtype == NB_F32) grad_f32(c, t, ws);
        else grad_f64(c, t, ws);
    }
}

/* Grouped heads: dk, dv of key head (b, kvh) = the sum of its query heads' buffers, in head order. */
static void atb_reduce(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid;
    const atb_ctx *c = p;
    size_t es = nb_dtype_size(c->gq->dtype);
    int64_t grp = c->hq / c->hkv, per = c->lk * (c->d + c->dv);
    for (int64_t t = lo; t < hi; t++) { /* t = b * hkv + kvh */
        char *dst[2] = {nb__ptr(c->gk) + (size_t)(t * c->lk * c->d) * es, nb__ptr(c->gv) + (size_t)(t * c->lk * c->dv) * es};
        int64_t n[2] = {c->lk * c->d, c->lk * c->dv};
        for (int part = 0; part < 2; part++)
            for (int64_t m = 0; m < grp; m++) {
                const char *src = c->bufs + (size_t)(t * grp + m) * (size_t)per * es + (part ? (size_t)n[0] * es : 0);
                if (m == 0) memcpy(dst[part], src, (size_t)n[part] * es);
                else if (es == 4) add_float((float *)dst[part], (const float *)src, n[part]);
                else add_double((double *)dst[part], (const double *)src, n[part]);
            }
    }
}

nb_status nb__cpu_attention_backward(nb_tensor *dq, nb_tensor *dk, nb_tensor *dv, const nb_tensor *const *in,
                                     int mask, int64_t window, double scale) {
    const nb_tensor *q = in[0], *k = in[1], *v = in[2];
    atb_ctx c = {.in = in, .gq = dq, .gk = dk, .gv = dv, .mask = mask, .window = window, .bn = q->shape[0],
                 .hq = q->shape[1], .hkv = k->shape[1], .lq = q->shape[2], .lk = k->shape[2], .d = q->shape[3],
                 .dv = v->shape[3], .scale = scale};
    size_t es = nb_dtype_size(q->dtype);
    c.exp_kernel = nb__cpu_kernels()->unary[NB_OP_EXP][q->dtype == NB_F64];
    int64_t wmax = c.d > c.dv ? c.d : c.dv;
    nb_gemm sizes[3] = {{.dt = q->dtype, .m = TQ, .n = TK, .k = wmax}, {.dt = q->dtype, .m = TK, .n = wmax, .k = TQ},
                        {.dt = q->dtype, .m = TQ, .n = wmax, .k = TK}};
    size_t tiles = es * (size_t)(TQ * c.d + 2 * TQ * TK + TK * wmax + TQ * c.d) + sizeof(double) * TQ;
    int64_t tasks = c.bn * c.hq;
    if (tasks == 0 || c.lk == 0) { /* nothing to sum: zeros (no query: every gradient; no key: dq) */
        memset(nb__ptr(dq), 0, (size_t)nb_numel(dq) * es);
        memset(nb__ptr(dk), 0, (size_t)nb_numel(dk) * es);
        memset(nb__ptr(dv), 0, (size_t)nb_numel(dv) * es);
        return NB_OK;
    }
    size_t bufs = c.hq == c.hkv ? 0 : (size_t)(tasks * c.lk * (c.d + c.dv)) * es;
    if (!at_ws_alloc(&c.w, sizes, 3, tiles, tasks, bufs))
        return nb__error(NB_ERR_OOM, "attention_backward: out of memory for the tiles' workspace");
    c.bufs = bufs ? c.w.extra : NULL;
    int64_t chunks = c.w.chunks, heads = c.bn * c.hkv;
    nb__parallel_chunks(tasks, chunks, atb_range, &c);
    if (bufs) nb__parallel_chunks(heads, chunks < heads ? chunks : heads, atb_reduce, &c);
    nb__buf_free(c.w.base, c.w.total);
    return NB_OK;
}
