/*
 * reduce.c — reductions over axis lists (sum, prod, max, min, argmax,
 * argmin) on the backend, the composites built from them (mean, var, std,
 * logsumexp, norm), the scans (cumsum, cumprod), and sum_to, the adjoint of
 * broadcasting.
 */
#include "../backend/backend.h"

#include <math.h>
#include <string.h>

int nb__axes_mask(const char *op, const int *axes, int naxes, int ndim, bool *mask) {
    memset(mask, 0, sizeof(bool) * NB_MAX_DIMS);
    if (!axes) {
        for (int d = 0; d < ndim; d++) mask[d] = true;
        return ndim;
    }
    if (naxes < 0 || naxes > NB_MAX_DIMS) {
        nb__error(NB_ERR_AXIS, "%s: %d axes given", op, naxes);
        return -1;
    }
    for (int i = 0; i < naxes; i++) {
        int a = nb__axis(op, axes[i], ndim);
        if (a < 0) return -1;
        if (mask[a]) {
            nb__error(NB_ERR_AXIS, "%s: axis %d appears twice", op, axes[i]);
            return -1;
        }
        mask[a] = true;
    }
    return naxes;
}

static nb_dtype reduce_dtype(nb_op op, nb_dtype dt) {
    if ((op == NB_OP_SUM || op == NB_OP_PROD || op == NB_OP_CUMSUM || op == NB_OP_CUMPROD) &&
        !nb_dtype_is_float(dt))
        return NB_I64;
    if (op == NB_OP_ARGMAX || op == NB_OP_ARGMIN) return NB_I64;
    return dt;
}

nb_tensor *nb__reduce(nb_op op, nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    const char *name = nb__ops[op].name;
    NB_CHECK_ARG(name, x);
    bool mask[NB_MAX_DIMS];
    if (x->ndim == 0) { /* a scalar reduces to itself over "all" axes */
        if (axes && naxes > 0) {
            int a = axes[0];
            if (a != 0 && a != -1) {
                nb__error(NB_ERR_AXIS, "%s: axis %d out of range for a rank-0 tensor", name, a);
                return NULL;
            }
        }
        memset(mask, 0, sizeof mask);
    } else if (nb__axes_mask(name, axes, naxes, x->ndim, mask) < 0)
        return NULL;
    const nb_backend *be = nb__backend_common(name, &x, 1);
    if (!be) return NULL;
    int64_t kshape[NB_MAX_DIMS], oshape[NB_MAX_DIMS];
    int on = 0;
    bool empty_reduce = false;
    for (int d = 0; d < x->ndim; d++) {
        kshape[d] = mask[d] ? 1 : x->shape[d];
        if (mask[d] && x->shape[d] == 0) empty_reduce = true;
        if (!mask[d] || keepdim) oshape[on++] = kshape[d];
    }
    if (empty_reduce && op != NB_OP_SUM && op != NB_OP_PROD) {
        nb__error(NB_ERR_SHAPE, "%s: cannot reduce over a zero-size axis of %s (no identity)", name,
                  NB_SHAPE_STR(x));
        return NULL;
    }
    nb_tensor *out = nb__tensor_new(kshape, x->ndim, reduce_dtype(op, x->dtype), x->storage->device);
    if (!out) return NULL;
    if (be->reduce(op, out, x, mask) != NB_OK) {
        nb_release(out);
        return NULL;
    }
    if (!keepdim) { /* drop the reduced axes: a view of the same contiguous buffer */
        int64_t st[NB_MAX_DIMS];
        nb__contiguous_strides(oshape, on, st);
        nb_tensor *o2 = nb__tensor_view_of(out->storage, oshape, st, on, 0, out->dtype);
        nb_release(out);
        out = o2;
    }
    if (out && nb__ops[op].grad == NB_GRAD_RULE && nb__should_record(&x, 1)) {
        nb_attrs a = {.keepdim = keepdim, .naxes = 0};
        for (int d = 0; d < x->ndim; d++)
            if (mask[d]) a.axes[a.naxes++] = d;
        out = nb__record(out, op, &x, 1, &a);
    }
    return out;
}

nb_tensor *nb_sum(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_SUM, x, axes, naxes, keepdim));
}
nb_tensor *nb_prod(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_PROD, x, axes, naxes, keepdim));
}
nb_tensor *nb_max(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_MAX, x, axes, naxes, keepdim));
}
nb_tensor *nb_min(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_MIN, x, axes, naxes, keepdim));
}
nb_tensor *nb_argmax(nb_tensor *x, int axis, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_ARGMAX, x, &axis, 1, keepdim));
}
nb_tensor *nb_argmin(nb_tensor *x, int axis, bool keepdim) {
    return nb__own(nb__reduce(NB_OP_ARGMIN, x, &axis, 1, keepdim));
}

/* Number of elements reduced by (axes, naxes) over x; -1 on a bad axis. */
static int64_t reduced_count(const char *op, nb_tensor *x, const int *axes, int naxes) {
    bool mask[NB_MAX_DIMS];
    if (x->ndim == 0) return 1;
    if (nb__axes_mask(op, axes, naxes, x->ndim, mask) < 0) return -1;
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d]) n *= x->shape[d];
    return n;
}

static bool float_only(const char *op, nb_tensor *x) {
    if (nb_dtype_is_float(x->dtype)) return true;
    nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s (cast first)", op, nb_dtype_name(x->dtype));
    return false;
}

nb_tensor *nb_mean(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    NB_CHECK_ARG("mean", x);
    if (!float_only("mean", x)) return NULL;
    int64_t n = reduced_count("mean", x, axes, naxes);
    if (n < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    NB_OPMATH_RETURN(nb_div(nb_sum(x, axes, naxes, keepdim), (double)n));
}

nb_tensor *nb_var(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim) {
    NB_CHECK_ARG("var", x);
    if (!float_only("var", x)) return NULL;
    int64_t n = reduced_count("var", x, axes, naxes);
    if (n < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *d = nb_sub(x, nb_mean(x, axes, naxes, true));
    double den = (double)n - (double)correction;
    NB_OPMATH_RETURN(nb_div(nb_sum(nb_square(d), axes, naxes, keepdim), den > 0 ? den : 0.0));
}

/* sqrt(var); where var is 0 the gradient is 0 instead of 0 * inf (torch's std_backward masks it). */
nb_tensor *nb_std(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim) {
    NB_CHECK_ARG("std", x);
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *v = nb_var(x, axes, naxes, correction, keepdim);
    nb_tensor *zero = v ? nb_eq(v, 0.0) : NULL;
    NB_OPMATH_RETURN(nb_where(zero, nb_zeros_like(v), nb_sqrt(nb_where(zero, nb_ones_like(v), v))));
}

nb_tensor *nb__exp_shift(nb_tensor *x, const int *axes, int naxes) {
    int64_t n = reduced_count("exp_shift", x, axes, naxes);
    if (n < 0) return NULL;
    if (n == 0) { /* nothing to shift: an empty exp-sum is 0, its log -inf, as torch */
        bool mask[NB_MAX_DIMS] = {0};
        if (x->ndim) nb__axes_mask("exp_shift", axes, naxes, x->ndim, mask);
        int64_t kshape[NB_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) kshape[d] = mask[d] ? 1 : x->shape[d];
        return nb__own(nb__full_on(kshape, x->ndim, 0, x->dtype, x->storage->device));
    }
    nb_tensor *m = nb_detach(nb_max(x, axes, naxes, true));
    return nb_where(nb_eq(nb_abs(m), INFINITY), nb_zeros_like(m), m);
}

nb_tensor *nb_logsumexp(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    NB_CHECK_ARG("logsumexp", x);
    if (!float_only("logsumexp", x)) return NULL;
    if (reduced_count("logsumexp", x, axes, naxes) < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *m = nb__exp_shift(x, axes, naxes);
    nb_tensor *r = nb_add(nb_log(nb_sum(nb_exp(nb_sub(x, m)), axes, naxes, true)), m);
    if (!keepdim && r) {
        bool mask[NB_MAX_DIMS];
        nb__axes_mask("logsumexp", axes, naxes, x->ndim, mask);
        int64_t shape[NB_MAX_DIMS];
        int k = 0;
        for (int dd = 0; dd < x->ndim; dd++)
            if (!mask[dd]) shape[k++] = x->shape[dd];
        r = nb_reshape(r, shape, k);
    }
    NB_OPMATH_RETURN(r);
}

/* s^(1/p) whose gradient is 0 (not 0 · inf = NaN) where s == 0, as torch's norm_backward masks it. */
static nb_tensor *root_of(nb_tensor *s, double p) {
    nb_tensor *at0 = nb_eq(s, 0.0);
    nb_tensor *safe = nb_where(at0, nb_ones_like(s), s);
    return nb_where(at0, nb_zeros_like(s), p == 2 ? nb_sqrt(safe) : nb_pow(safe, 1.0 / p));
}

nb_tensor *nb_norm(nb_tensor *x, double p, const int *axes, int naxes, bool keepdim) {
    NB_CHECK_ARG("norm", x);
    if (!float_only("norm", x)) return NULL;
    if (!(p > 0)) {
        nb__error(NB_ERR_ARG, "norm: p must be > 0, got %g", p);
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *r;
    if (isinf(p)) r = nb_max(nb_abs(x), axes, naxes, keepdim);
    else if (p == 1) r = nb_sum(nb_abs(x), axes, naxes, keepdim);
    else r = root_of(nb_sum(p == 2 ? nb_square(x) : nb_pow(nb_abs(x), p), axes, naxes, keepdim), p);
    NB_OPMATH_RETURN(r);
}

static nb_tensor *scan(nb_op op, nb_tensor *x, int axis) {
    const char *name = nb__ops[op].name;
    NB_CHECK_ARG(name, x);
    int a = nb__axis(name, axis, x->ndim);
    if (a < 0) return NULL;
    const nb_backend *be = nb__backend_common(name, &x, 1);
    if (!be) return NULL;
    nb_tensor *out = nb__tensor_new(x->shape, x->ndim, reduce_dtype(op, x->dtype), x->storage->device);
    if (out && be->scan(op, out, x, a) != NB_OK) {
        nb_release(out);
        out = NULL;
    }
    if (out && nb__should_record(&x, 1)) {
        nb_attrs at = {.naxes = 1, .axes = {a}};
        out = nb__record(out, op, &x, 1, &at);
    }
    return out;
}

/* torch accepts axis 0 / -1 on a rank-0 tensor: it scans as a one-element vector. */
static nb_tensor *scan_any_rank(nb_op op, nb_tensor *x, int axis) {
    if (!x || x->ndim > 0 || (axis != 0 && axis != -1)) return nb__own(scan(op, x, axis));
    NB_COMPOSITE_BEGIN();
    nb_tensor *r = nb__own(scan(op, nb_reshape(x, (int64_t[]){1}, 1), 0));
    NB_COMPOSITE_RETURN(nb_reshape(r, NULL, 0));
}

nb_tensor *nb_cumsum(nb_tensor *x, int axis) { return scan_any_rank(NB_OP_CUMSUM, x, axis); }
nb_tensor *nb_cumprod(nb_tensor *x, int axis) { return scan_any_rank(NB_OP_CUMPROD, x, axis); }

nb_tensor *nb__sum_to(nb_tensor *g, const int64_t *shape, int ndim) {
    int lead = g->ndim - ndim;
    if (lead < 0) {
        nb__error(NB_ERR_SHAPE, "sum_to: cannot sum %s down to %s", NB_SHAPE_STR(g), NB_DIMS_STR(shape, ndim));
        return NULL;
    }
    int axes[NB_MAX_DIMS], n = 0;
    for (int d = 0; d < g->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1)) axes[n++] = d;
    NB_COMPOSITE_BEGIN();
    nb_tensor *s = n ? nb_sum(g, axes, n, true) : g;
    nb_tensor *r = nb_reshape(s, shape, ndim);
    nb_tensor *out = nb__scope_take(r);
    nb_scope_end();
    return out;
}
