/*
 * linalg.c — the CPU backend's small dense linear algebra (backend.h, the
 * linalg entry): the matrices of a batch in parallel, each factored in
 * double with row-oriented loops over contiguous memory — Cholesky–Crout
 * (column by column), LU with partial pivoting (right-looking, rows swapped
 * in place) and forward / back substitution over all right-hand sides at once.
 */
#include "../backend.h"
#include "pool.h"

#include <math.h>
#include <string.h>

typedef struct la_ctx {
    nb_op op;
    int flags;
    int64_t n, k;
    const double *a, *b;
    double *out, *out2;
    int64_t *info;
    double *scratch; /* SOLVE, SLOGDET: an n x n matrix per range */
} la_ctx;

/* L (lower, zeros above) of a; 0 or the order of the first leading minor that is not positive. */
static int64_t cholesky(const double *a, double *l, int64_t n) {
    memset(l, 0, sizeof(double) * (size_t)(n * n));
    for (int64_t j = 0; j < n; j++) {
        double d = a[j * n + j];
        for (int64_t p = 0; p < j; p++) d -= l[j * n + p] * l[j * n + p];
        if (!(d > 0)) return j + 1;
        double ljj = sqrt(d);
        l[j * n + j] = ljj;
        for (int64_t i = j + 1; i < n; i++) {
            double s = a[i * n + j];
            for (int64_t p = 0; p < j; p++) s -= l[i * n + p] * l[j * n + p];
            l[i * n + j] = s / ljj;
        }
    }
    return 0;
}

/* LU of lu (n x n, in place, partial pivoting; the swaps applied to x [n, k] too when given, and
 * their parity to *sign); 0 or column + 1 of the first zero pivot. */
static int64_t lu(double *lu, int64_t n, double *x, int64_t k, double *sign) {
    for (int64_t j = 0; j < n; j++) {
        int64_t p = j;
        for (int64_t i = j + 1; i < n; i++)
            if (fabs(lu[i * n + j]) > fabs(lu[p * n + j])) p = i;
        if (lu[p * n + j] == 0) return j + 1;
        if (p != j) {
            for (int64_t c = 0; c < n; c++) {
                double t = lu[j * n + c];
                lu[j * n + c] = lu[p * n + c];
                lu[p * n + c] = t;
            }
            for (int64_t c = 0; x && c < k; c++) {
                double t = x[j * k + c];
                x[j * k + c] = x[p * k + c];
                x[p * k + c] = t;
            }
            *sign = -*sign;
        }
        double piv = lu[j * n + j];
        for (int64_t i = j + 1; i < n; i++) {
            double f = lu[i * n + j] /= piv;
            if (f == 0) continue;
            for (int64_t c = j + 1; c < n; c++) lu[i * n + c] -= f * lu[j * n + c];
        }
    }
    return 0;
}

/* x [n, k] := T^-1 x for the triangular T = op(a): T[i][j] = a[i][j], or a[j][i] when trans;
 * lower says which triangle of T holds it (after the transposition); unit: ones on the diagonal.
 * 0 or i + 1 for a zero diagonal element. */
static int64_t substitute(const double *a, double *x, int64_t n, int64_t k, bool lower, bool trans, bool unit) {
    for (int64_t s = 0; s < n; s++) {
        int64_t i = lower ? s : n - 1 - s;
        double *xi = x + i * k;
        for (int64_t t = 0; t < s; t++) {
            int64_t j = lower ? t : n - 1 - t;
            double tij = trans ? a[j * n + i] : a[i * n + j];
            if (tij == 0) continue;
            const double *xj = x + j * k;
            for (int64_t c = 0; c < k; c++) xi[c] -= tij * xj[c];
        }
        if (unit) continue;
        double d = a[i * n + i];
        if (d == 0) return i + 1;
        for (int64_t c = 0; c < k; c++) xi[c] /= d;
    }
    return 0;
}

static void la_range(void *p, int64_t lo, int64_t hi, int tid) {
    const la_ctx *c = p;
    int64_t n = c->n, k = c->k;
    double *scratch = c->scratch ? c->scratch + tid * n * n : NULL;
    for (int64_t m = lo; m < hi; m++) {
        const double *a = c->a + m * n * n;
        int64_t info = 0;
        switch (c->op) {
        case NB_OP_CHOLESKY: info = cholesky(a, c->out + m * n * n, n); break;
        case NB_OP_SOLVE_TRIANGULAR: {
            double *x = c->out + m * n * k;
            memcpy(x, c->b + m * n * k, sizeof(double) * (size_t)(n * k));
            bool upper = c->flags & NB_LA_UPPER, trans = c->flags & NB_LA_TRANS;
            info = substitute(a, x, n, k, upper == trans, trans, c->flags & NB_LA_UNIT);
            break;
        }
        case NB_OP_SOLVE: {
            double *x = c->out + m * n * k, sign = 1;
            memcpy(scratch, a, sizeof(double) * (size_t)(n * n));
            memcpy(x, c->b + m * n * k, sizeof(double) * (size_t)(n * k));
            info = lu(scratch, n, x, k, &sign);
            if (!info) substitute(scratch, x, n, k, true, false, true); /* L y = P b */
            if (!info) substitute(scratch, x, n, k, false, false, false); /* U x = y */
            break;
        }
        default: { /* SLOGDET */
            double sign = 1, logabs = 0;
            memcpy(scratch, a, sizeof(double) * (size_t)(n * n));
            int64_t zero = lu(scratch, n, NULL, 0, &sign); /* a zero pivot in column zero - 1 */
            for (int64_t j = 0; j < (zero ? zero - 1 : n); j++) {
                double u = scratch[j * n + j];
                if (u < 0) sign = -sign;
                logabs += log(fabs(u));
            }
            if (zero) { /* singular: a zero with the sign of the factors so far (torch's -0 or +0) */
                sign *= 0.0;
                logabs = -INFINITY;
            }
            c->out[m] = logabs;
            c->out2[m] = sign;
        }
        }
        c->info[m] = info;
    }
}

nb_status nb__cpu_linalg(nb_op op, int flags, const nb_tensor *a, const nb_tensor *b, nb_tensor *out,
                         nb_tensor *out2, nb_tensor *info) {
    int64_t batch = info->shape[0], n = a->shape[a->ndim - 1];
    la_ctx c = {op, flags, n, b ? b->shape[b->ndim - 1] : 0, (const double *)nb__ptr(a),
                b ? (const double *)nb__ptr(b) : NULL, (double *)nb__ptr(out),
                out2 ? (double *)nb__ptr(out2) : NULL, (int64_t *)nb__ptr(info), NULL};
    if (op == NB_OP_SOLVE || op == NB_OP_SLOGDET) { /* a scratch matrix per range (at most 4 per thread) */
        int64_t ranges = 4 * (int64_t)nb_get_num_threads();
        if (ranges > batch) ranges = batch;
        if (!(c.scratch = nb__malloc(sizeof(double) * (size_t)(ranges * n * n + 1))))
            return nb__error(NB_ERR_OOM, "%s: out of memory for %lld scratch matrices of %lld x %lld",
                             nb__ops[op].name, (long long)ranges, (long long)n, (long long)n);
    }
    int64_t work = n * n * (n + c.k) + 1; /* about the flops of one matrix */
    nb__parallel_for(batch, work >= 65536 ? 1 : 65536 / work, la_range, &c);
    nb__free(c.scratch);
    return NB_OK;
}
