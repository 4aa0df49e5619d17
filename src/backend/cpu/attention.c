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

typedef struct at_ctx {
    const nb_tensor *out, *q, *k, *v;
    int mask;
    int64_t window, hq, hkv, lq, lk, d, dv, nqt;
    double scale;
    char *ws; /* per chunk: GEMM workspace, then the tiles */
    size_t ws_gemm, ws_chunk;
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
        T *qs = (T *)(ws + c->ws_gemm), *s = qs + TQ * d, *ot = s + TQ * TK, *acc = ot + TQ * dv;            \
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
            nb_gemm gs = {DT, rows, cols, d, qs, d, 1, k + j0 * d, 1, d, s, TK, NULL, NULL};                            \
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
            nb_gemm gv = {DT, rows, dv, cols, s, TK, 1, v + j0 * dv, dv, 1, ot, dv, NULL, NULL};                       \
            nb__gemm(&gv, ws, 1);                                                                              \
            for (int64_t e = 0; e < rows * dv; e++) acc[e] += ot[e];                                           \
        }                                                                                                      \
        for (int64_t r = 0; r < rows; r++)                                                                     \
            for (int64_t e = 0; e < dv; e++)                                                                   \
                out[r * dv + e] = sum[r] != 0 ? (T)(acc[r * dv + e] / sum[r]) : (T)0; /* NaN stays */       \
    }

AT_DEFINE(float, NB_F32, tile_f32)
AT_DEFINE(double, NB_F64, tile_f64)

static void at_range(void *p, int64_t lo, int64_t hi, int tid) {
    const at_ctx *c = p;
    char *ws = c->ws + (size_t)tid * c->ws_chunk;
    for (int64_t t = lo; t < hi; t++) {
        if (c->out->dtype == NB_F32) tile_f32(c, t, ws);
        else tile_f64(c, t, ws);
    }
}

nb_status nb__cpu_attention(nb_tensor *out, const nb_tensor *q, const nb_tensor *k, const nb_tensor *v, int mask,
                            int64_t window, double scale) {
    at_ctx c = {out, q, k, v, mask, window, q->shape[1], k->shape[1], q->shape[2], k->shape[2], q->shape[3],
                v->shape[3], (q->shape[2] + TQ - 1) / TQ, scale, NULL, 0, 0, NULL};
    int slot = out->dtype == NB_F64;
    size_t es = nb_dtype_size(out->dtype);
    c.exp_kernel = nb__cpu_kernels()->unary[NB_OP_EXP][slot];
    nb_gemm sizes[2] = {{.dt = out->dtype, .m = TQ, .n = TK, .k = c.d}, {.dt = out->dtype, .m = TQ, .n = c.dv, .k = TK}};
    size_t g0 = nb__gemm_ws_size(&sizes[0]), g1 = nb__gemm_ws_size(&sizes[1]);
    c.ws_gemm = ((g0 > g1 ? g0 : g1) + 63) / 64 * 64;
    size_t tiles = es * (size_t)(TQ * c.d + TQ * TK + 2 * TQ * c.dv) + 2 * sizeof(double) * TQ;
    c.ws_chunk = (c.ws_gemm + tiles + 63) / 64 * 64;
    int64_t tasks = out->shape[0] * c.hq * c.nqt, chunks = 4 * (int64_t)nb_get_num_threads();
    if (chunks > tasks) chunks = tasks;
    if (tasks == 0) return NB_OK;
    c.ws = nb__buf_alloc(c.ws_chunk * (size_t)chunks + 64);
    if (!c.ws) return nb__error(NB_ERR_OOM, "attention: out of memory for the tiles' workspace");
    char *base = c.ws;
    c.ws = (char *)(((uintptr_t)base + 63) / 64 * 64); /* the GEMM workspace: 64-byte aligned */
    nb__parallel_chunks(tasks, chunks, at_range, &c);
    nb__buf_free(base, c.ws_chunk * (size_t)chunks + 64);
    return NB_OK;
}
