/*
 * ref_attention.c — the reference backend's attention (the oracle of the CPU
 * backend's tiled kernel): one query at a time in double, the textbook
 * softmax over the keys it may see (maximum, exponentials, sum), then the
 * weighted sum of the values.
 */
#include "ref_attention.h"

#include <math.h>

static double at(const nb_tensor *t, int64_t i) {
    return t->dtype == NB_F64 ? ((const double *)nb__ptr(t))[i] : ((const float *)nb__ptr(t))[i];
}

nb_status nb__ref_attention(nb_tensor *out, const nb_tensor *q, const nb_tensor *k, const nb_tensor *v, int mask,
                            int64_t window, double scale) {
    int64_t bn = q->shape[0], hq = q->shape[1], lq = q->shape[2], d = q->shape[3];
    int64_t hkv = k->shape[1], lk = k->shape[2], dv = v->shape[3];
    double *p = nb__malloc(sizeof(double) * (size_t)(lk + dv + 1)), *acc = p + lk;
    if (!p) return nb__error(NB_ERR_OOM, "attention: out of memory");
    for (int64_t b = 0; b < bn; b++)
        for (int64_t h = 0; h < hq; h++) {
            int64_t kh = b * hkv + h / (hq / hkv);
            for (int64_t i = 0; i < lq; i++) {
                int64_t lo = 0, hi = lk, qi = ((b * hq + h) * lq + i) * d;
                if (mask != NB_ATTN_MASK_NONE && i + 1 < hi) hi = i + 1;
                if (mask == NB_ATTN_MASK_SLIDING && i - window + 1 > lo) lo = i - window + 1;
                double mx = -INFINITY, sum = 0;
                for (int64_t j = lo; j < hi; j++) {
                    double s = 0;
                    for (int64_t e = 0; e < d; e++) s += at(q, qi + e) * scale * at(k, (kh * lk + j) * d + e);
                    p[j] = s;
                    if (s > mx) mx = s;
                }
                for (int64_t e = 0; e < dv; e++) acc[e] = 0;
                for (int64_t j = lo; j < hi; j++) {
                    double w = exp(p[j] - mx);
                    sum += w;
                    for (int64_t e = 0; e < dv; e++) acc[e] += w * at(v, (kh * lk + j) * dv + e);
                }
                for (int64_t e = 0; e < dv; e++) {
                    double y = hi > lo ? acc[e] / sum : 0;
                    int64_t o = ((b * hq + h) * lq + i) * dv + e;
                    if (out->dtype == NB_F64) ((double *)nb__ptr(out))[o] = y;
                    else ((float *)nb__ptr(out))[o] = (float)y;
                }
            }
        }
    nb__free(p);
    return NB_OK;
}
