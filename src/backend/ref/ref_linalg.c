/*
 * ref_linalg.c — the reference backend's small dense linear algebra (the
 * oracle of the CPU backend's linalg.c): one matrix after another, textbook
 * formulations chosen to differ from the CPU's — Cholesky–Banachiewicz (row
 * by row), Gauss–Jordan elimination with partial pivoting on [A | B] for
 * solve and Gaussian elimination for slogdet, and triangular systems solved
 * on op(A) written out as a dense triangle.
 */
#include "ref_linalg.h"

#include <math.h>
#include <string.h>

static int64_t cholesky(const double *a, double *l, int64_t n) {
    memset(l, 0, sizeof(double) * (size_t)(n * n));
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j <= i; j++) {
            double s = 0;
            for (int64_t p = 0; p < j; p++) s += l[i * n + p] * l[j * n + p];
            if (i == j) {
                double d = a[i * n + i] - s;
                if (!(d > 0)) return i + 1;
                l[i * n + i] = sqrt(d);
            } else
                l[i * n + j] = (a[i * n + j] - s) / l[j * n + j];
        }
    return 0;
}

/* Gaussian elimination of the n x (n + k) matrix w (partial pivoting); with jordan, the pivot
 * rows are also cleared above and scaled, leaving A^-1 B in the last k columns.  Returns 0 or
 * column + 1 of a zero pivot; *sign and *logabs get det A's (from the pivots). */
static int64_t eliminate(double *w, int64_t n, int64_t k, bool jordan, double *sign, double *logabs) {
    int64_t cols = n + k;
    *sign = 1;
    *logabs = 0;
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j;
        for (int64_t i = j + 1; i < n; i++)
            if (fabs(w[i * cols + j]) > fabs(w[p * cols + j])) p = i;
        if (w[p * cols + j] == 0) return j + 1;
        if (p != j) {
            for (int64_t c = 0; c < cols; c++) {
                double t = w[j * cols + c];
                w[j * cols + c] = w[p * cols + c];
                w[p * cols + c] = t;
            }
            *sign = -*sign;
        }
        double piv = w[j * cols + j];
        if (piv < 0) *sign = -*sign;
        *logabs += log(fabs(piv));
        for (int64_t i = jordan ? 0 : j + 1; i < n; i++) {
            if (i == j) continue;
            double f = w[i * cols + j] / piv;
            for (int64_t c = j; c < cols; c++) w[i * cols + c] -= f * w[j * cols + c];
        }
        if (jordan)
            for (int64_t c = j; c < cols; c++) w[j * cols + c] /= piv;
    }
    return 0;
}

/* out [n, k] = T^-1 b with T = op(a) written out as a dense triangle. */
static int64_t triangular(const double *a, const double *b, double *out, double *t, int64_t n, int64_t k,
                          int flags) {
    bool upper = flags & NB_LA_UPPER, trans = flags & NB_LA_TRANS, unit = flags & NB_LA_UNIT;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) {
            int64_t r = trans ? j : i, c = trans ? i : j; /* T[i][j] = op(A)[i][j] = A[r][c] */
            bool kept = upper ? c >= r : c <= r;
            t[i * n + j] = i == j && unit ? 1 : kept ? a[r * n + c] : 0;
        }
    bool lower = upper == trans; /* T's triangle */
    for (int64_t s = 0; s < n; s++) {
        int64_t i = lower ? s : n - 1 - s;
        if (t[i * n + i] == 0) return i + 1;
        for (int64_t c = 0; c < k; c++) {
            double v = b[i * k + c];
            for (int64_t q = 0; q < s; q++) { /* the rows solved before: below i (upper) or above */
                int64_t j = lower ? q : n - 1 - q;
                v -= t[i * n + j] * out[j * k + c];
            }
            out[i * k + c] = v / t[i * n + i];
        }
    }
    return 0;
}

nb_status nb__ref_linalg(nb_op op, int flags, const nb_tensor *a, const nb_tensor *b, nb_tensor *out,
                         nb_tensor *out2, nb_tensor *info) {
    int64_t batch = info->shape[0], n = a->shape[a->ndim - 1], k = b ? b->shape[b->ndim - 1] : 0;
    const double *pa = (const double *)nb__ptr(a), *pb = b ? (const double *)nb__ptr(b) : NULL;
    double *po = (double *)nb__ptr(out), *w = nb__malloc(sizeof(double) * (size_t)(n * (n + k) + 1));
    int64_t *pi = (int64_t *)nb__ptr(info);
    if (!w) return nb__error(NB_ERR_OOM, "%s: out of memory", nb__ops[op].name);
    for (int64_t m = 0; m < batch; m++) {
        const double *am = pa + m * n * n;
        double sign, logabs;
        switch (op) {
        case NB_OP_CHOLESKY: pi[m] = cholesky(am, po + m * n * n, n); break;
        case NB_OP_SOLVE_TRIANGULAR: pi[m] = triangular(am, pb + m * n * k, po + m * n * k, w, n, k, flags); break;
        case NB_OP_SOLVE:
            for (int64_t i = 0; i < n; i++) { /* [A | B] */
                memcpy(w + i * (n + k), am + i * n, sizeof(double) * (size_t)n);
                memcpy(w + i * (n + k) + n, pb + (m * n + i) * k, sizeof(double) * (size_t)k);
            }
            pi[m] = eliminate(w, n, k, true, &sign, &logabs);
            for (int64_t i = 0; i < n; i++)
                memcpy(po + (m * n + i) * k, w + i * (n + k) + n, sizeof(double) * (size_t)k);
            break;
        default: /* SLOGDET */
            memcpy(w, am, sizeof(double) * (size_t)(n * n));
            pi[m] = 0;
            if (eliminate(w, n, 0, false, &sign, &logabs)) { /* a signed zero, as the CPU's */
                sign *= 0.0;
                logabs = -INFINITY;
            }
            po[m] = logabs;
            ((double *)nb__ptr(out2))[m] = sign;
        }
    }
    nb__free(w);
    return NB_OK;
}
