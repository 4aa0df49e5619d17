/*
 * ref_attention.c — the reference backend's attention and its gradient (the
 * oracle of the CPU backend's tiled kernels): one query at a time in double,
 * the textbook softmax over the keys it may see (maximum, exponentials, sum),
 * then the weighted sum of the values; the gradient from the probabilities
 * recomputed the same way (not from the forward's logsumexp or output).
 */
#include "ref_attention.h"

#include <math.h>
#include <string.h>

static double at(const nb_tensor *t, int64_t i) {
    return t->dtype == NB_F64 ? ((const double *)nb__ptr(t))[i] : ((const float *)nb__ptr(t))[i];
}

static void put(nb_tensor *t, int64_t i, double v) {
    if (t->dtype == NB_F64) ((double *)nb__ptr(t))[i] = v;
    else ((float *)nb__ptr(t))[i] = (float)v;
}

typedef struct ref_dims {
    int64_t bn, hq, lq, d, hkv, lk, dv;
} ref_dims;

static ref_dims dims_of(const nb_tensor *q, const nb_tensor *k, const nb_tensor *v) {
    return (ref_dims){q->shape[0], q->shape[1], q->shape[2], q->shape[3], k->shape[1], k->shape[2], v->shape[3]};
}

/* The probabilities p[lo..hi) of query i of head (b, h) (key head kh), their maximum score and sum;
 * [lo, hi) the keys it sees. */
static void probs(const ref_dims *m, const nb_tensor *q, const nb_tensor *k, int64_t b, int64_t h, int64_t kh,
                  int64_t i, int mask, int64_t window, double scale, double *p, int64_t *lo, int64_t *hi,
                  double *mx, double *sum) {
    int64_t qi = ((b * m->hq + h) * m->lq + i) * m->d;
    *lo = 0;
    *hi = m->lk;
    if (mask != NB_ATTN_MASK_NONE && i + 1 < *hi) *hi = i + 1;
    if (mask == NB_ATTN_MASK_SLIDING && i - window + 1 > *lo) *lo = i - window + 1;
    *mx = -INFINITY;
    *sum = 0;
    for (int64_t j = *lo; j < *hi; j++) {
        double s = 0;
        for (int64_t e = 0; e < m->d; e++) s += at(q, qi + e) * scale * at(k, (kh * m->lk + j) * m->d + e);
        p[j] = s;
        if (s > *mx) *mx = s;
    }
    for (int64_t j = *lo; j < *hi; j++) {
        p[j] = exp(p[j] - *mx);
        *sum += p[j];
    }
    for (int64_t j = *lo; j < *hi; j++) p[j] /= *sum;
}

nb_status nb__ref_attention(nb_tensor *out, nb_tensor *lse, const nb_tensor *q, const nb_tensor *k,
                            const nb_tensor *v, int mask, int64_t window, double scale) {
    ref_dims m = dims_of(q, k, v);
    double *p = nb__malloc(sizeof(double) * (size_t)(m.lk + m.dv + 1)), *acc = p + m.lk;
    if (!p) return nb__error(NB_ERR_OOM, "attention: out of memory");
    for (int64_t b = 0; b < m.bn; b++)
        for (int64_t h = 0; h < m.hq; h++) {
            int64_t kh = b * m.hkv + h / (m.hq / m.hkv);
            for (int64_t i = 0; i < m.lq; i++) {
                int64_t lo, hi, row = (b * m.hq + h) * m.lq + i;
                double mx, sum;
                probs(&m, q, k, b, h, kh, i, mask, window, scale, p, &lo, &hi, &mx, &sum);
                for (int64_t e = 0; e < m.dv; e++) acc[e] = 0;
                for (int64_t j = lo; j < hi; j++)
                    for (int64_t e = 0; e < m.dv; e++) acc[e] += p[j] * at(v, (kh * m.lk + j) * m.dv + e);
                for (int64_t e = 0; e < m.dv; e++) put(out, row * m.dv + e, hi > lo ? acc[e] : 0);
                put(lse, row, hi > lo ? mx + log(sum) : -INFINITY);
            }
        }
    nb__free(p);
    return NB_OK;
}

nb_status nb__ref_attention_backward(nb_tensor *dq, nb_tensor *dk, nb_tensor *dv, const nb_tensor *const *in,
                                     int mask, int64_t window, double scale) {
    const nb_tensor *q = in[0], *k = in[1], *v = in[2], *g = in[4];
    ref_dims m = dims_of(q, k, v);
    int64_t nk = m.bn * m.hkv * m.lk;
    double *p = nb__malloc(sizeof(double) * (size_t)(2 * m.lk + m.d + nk * (m.d + m.dv) + 1));
    if (!p) return nb__error(NB_ERR_OOM, "attention_backward: out of memory");
    double *ds = p + m.lk, *gq = ds + m.lk, *gk = gq + m.d, *gv = gk + nk * m.d;
    memset(gk, 0, sizeof(double) * (size_t)(nk * (m.d + m.dv)));
    for (int64_t b = 0; b < m.bn; b++)
        for (int64_t h = 0; h < m.hq; h++) {
            int64_t kh = b * m.hkv + h / (m.hq / m.hkv);
            for (int64_t i = 0; i < m.lq; i++) {
                int64_t lo, hi, row = (b * m.hq + h) * m.lq + i;
                double mx, sum, dot = 0;
                probs(&m, q, k, b, h, kh, i, mask, window, scale, p, &lo, &hi, &mx, &sum);
                for (int64_t j = lo; j < hi; j++) { /* dP_j = dout_i · v_j; dot = Σ_j P_j dP_j */
                    ds[j] = 0;
                    for (int64_t e = 0; e < m.dv; e++) ds[j] += at(g, row * m.dv + e) * at(v, (kh * m.lk + j) * m.dv + e);
                    dot += p[j] * ds[j];
                }
                for (int64_t e = 0; e < m.d; e++) gq[e] = 0;
                for (int64_t j = lo; j < hi; j++) {
                    double s = p[j] * (ds[j] - dot) * scale; /* scale · dS_j */
                    for (int64_t e = 0; e < m.dv; e++) gv[(kh * m.lk + j) * m.dv + e] += p[j] * at(g, row * m.dv + e);
                    for (int64_t e = 0; e < m.d; e++) {
                        gq[e] += s * at(k, (kh * m.lk + j) * m.d + e);
                        gk[(kh * m.lk + j) * m.d + e] += s * at(q, row * m.d + e);
                    }
                }
                for (int64_t e = 0; e < m.d; e++) put(dq, row * m.d + e, gq[e]);
            }
        }
    for (int64_t i = 0; i < nk * m.d; i++) put(dk, i, gk[i]);
    for (int64_t i = 0; i < nk * m.dv; i++) put(dv, i, gv[i]);
    nb__free(p);
    return NB_OK;
}
