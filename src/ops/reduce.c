/*
 * reduce.c — the REDUCE (sum, prod, max, min), ARGREDUCE (argmax, argmin),
 * SCAN (cumsum, cumprod) and SIZE (numel: element counts read from shapes
 * when an op runs, for symbolic dims) kinds as infer + execute, the
 * composites built from them (mean, var, std, logsumexp, norm), and sum_to,
 * the adjoint of broadcasting.
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
        int a = axes[i] >= 0 && axes[i] < ndim ? axes[i] : nb__axis(op, axes[i], ndim); /* no call when in range */
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

/* The axes of attrs (the caller's list, maybe negative) normalized in place into the
 * sorted list of reduced axes; a rank-0 x reduces over none (axis 0 / -1 accepted, as torch).
 * Fills mask.  false with NB_ERR_AXIS naming op. */
static bool normalize_axes(const char *op, const nb_tensor *x, nb_attrs *a, bool *mask) {
    if (x->ndim == 0) {
        if (a->naxes > 0 && a->axes[0] != 0 && a->axes[0] != -1) {
            nb__error(NB_ERR_AXIS, "%s: axis %d out of range for a rank-0 tensor", op, a->axes[0]);
            return false;
        }
        memset(mask, 0, sizeof(bool) * NB_MAX_DIMS);
    } else if (nb__axes_mask(op, a->axes, a->naxes, x->ndim, mask) < 0)
        return false;
    a->naxes = 0;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d]) a->axes[a->naxes++] = d;
    return true;
}

/* attrs for the axis list (NULL: all axes of x); false with NB_ERR_AXIS for a bad count. */
static bool axes_attrs(const char *op, const nb_tensor *x, const int *axes, int naxes, nb_attrs *a) {
    if (!axes) {
        for (int d = 0; d < x->ndim; d++) a->axes[d] = d;
        a->naxes = x->ndim;
        return true;
    }
    if (naxes < 0 || naxes > NB_MAX_DIMS) {
        nb__error(NB_ERR_AXIS, "%s: %d axes given", op, naxes);
        return false;
    }
    memcpy(a->axes, axes, sizeof(int) * (size_t)naxes);
    a->naxes = naxes;
    return true;
}

/* REDUCE and ARGREDUCE: attrs.axes the reduced axes (normalized), attrs.keepdim. */
static int infer_reduce(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    const char *name = nb__ops[op].name;
    nb_tensor *x = in[0];
    bool mask[NB_MAX_DIMS];
    if (!normalize_axes(name, x, a, mask) || !nb__backend_common(name, in, 1)) return -1;
    m->ndim = 0;
    for (int d = 0; d < x->ndim; d++) {
        if (mask[d] && x->shape[d] == 0 && op != NB_OP_SUM && op != NB_OP_PROD) {
            nb__error(NB_ERR_SHAPE, "%s: cannot reduce over a zero-size axis of %s (no identity)", name,
                      NB_SHAPE_STR(x));
            return -1;
        }
        if (!mask[d] || a->keepdim) m->shape[m->ndim++] = mask[d] ? 1 : x->shape[d];
    }
    m->dtype = reduce_dtype(op, x->dtype);
    m->weak = false;
    return 1;
}

static nb_status exec_reduce(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                             nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *x = in[0];
    bool mask[NB_MAX_DIMS] = {false};
    for (int i = 0; i < a->naxes; i++) mask[a->axes[i]] = true;
    int64_t kshape[NB_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) kshape[d] = mask[d] ? 1 : x->shape[d];
    nb_tensor *r = nb__tensor_new(kshape, x->ndim, m->dtype, x->storage->device);
    if (r && nb__backend_of(x)->reduce(op, r, x, mask) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    if (r && !a->keepdim) { /* drop the reduced axes: a view of the same contiguous buffer */
        int64_t st[NB_MAX_DIMS];
        nb__contiguous_strides(m->shape, m->ndim, st);
        nb_tensor *v = nb__tensor_view_of(r->storage, m->shape, st, m->ndim, 0, r->dtype);
        nb_release(r);
        r = v;
    }
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_reduce = {infer_reduce, exec_reduce};
const nb_kind_impl nb__kind_argreduce = {infer_reduce, exec_reduce};

nb_tensor *nb__reduce(nb_op op, nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    const char *name = nb__ops[op].name;
    NB_CHECK_ARG(name, x);
    nb_attrs a = {.keepdim = keepdim};
    if (!axes_attrs(name, x, axes, naxes, &a)) return NULL;
    return nb__apply(op, &x, 1, &a);
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

int64_t nb__reduced_count(const char *op, nb_tensor *x, const int *axes, int naxes) {
    bool mask[NB_MAX_DIMS];
    if (x->ndim == 0) return 1;
    if (nb__axes_mask(op, axes, naxes, x->ndim, mask) < 0) return -1;
    int64_t n = 1;
    bool sym = false;
    for (int d = 0; d < x->ndim; d++)
        if (mask[d]) {
            if (nb__dim_sym(x->shape[d])) sym = true;
            else n *= x->shape[d];
        }
    return sym && n != 0 ? NB_COUNT_SYMBOLIC : n;
}

/* NUMEL: a rank-0 weak scalar of dtype attrs.sub holding the product of the sizes of the
 * axes attrs.axes of its input (normalized as a reduction's), read from the concrete shape
 * when it runs. */
static int infer_numel(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    const char *name = nb__ops[op].name;
    bool mask[NB_MAX_DIMS];
    if ((unsigned)a->sub >= NB_DTYPE_COUNT || a->sub == NB_BOOL) {
        nb__error(NB_ERR_DTYPE, "%s: invalid result dtype %d", name, a->sub);
        return -1;
    }
    if (!normalize_axes(name, in[0], a, mask)) return -1;
    m->ndim = 0;
    m->dtype = (nb_dtype)a->sub;
    m->weak = true; /* a size takes part in promotion as a C number does */
    return 1;
}

static nb_status exec_numel(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                            nb_tensor **out) {
    (void)op;
    (void)n;
    (void)nout;
    int64_t c = 1;
    for (int i = 0; i < a->naxes; i++) c *= in[0]->shape[a->axes[i]];
    nb_tensor *r = nb__full_on(NULL, 0, (double)c, m->dtype, in[0]->storage->device);
    if (r) r->weak = true;
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_size = {infer_numel, exec_numel};

nb_tensor *nb__numel_of(nb_tensor *x, const int *axes, int naxes) {
    NB_CHECK_ARG("numel", x);
    nb_attrs a = {.sub = NB_F64};
    if (!axes_attrs("numel", x, axes, naxes, &a)) return NULL;
    return nb__own(nb__apply(NB_OP_NUMEL, &x, 1, &a));
}

static bool float_only(const char *op, nb_tensor *x) {
    if (nb_dtype_is_float(x->dtype)) return true;
    nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s (cast first)", op, nb_dtype_name(x->dtype));
    return false;
}

nb_tensor *nb_mean(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    NB_CHECK_ARG("mean", x);
    if (!float_only("mean", x)) return NULL;
    int64_t n = nb__reduced_count("mean", x, axes, naxes);
    if (n == -1) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *s = nb_sum(x, axes, naxes, keepdim);
    NB_OPMATH_RETURN(n >= 0 ? nb_div(s, (double)n) : nb_div(s, nb__numel_of(x, axes, naxes)));
}

nb_tensor *nb_var(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim) {
    NB_CHECK_ARG("var", x);
    if (!float_only("var", x)) return NULL;
    int64_t n = nb__reduced_count("var", x, axes, naxes);
    if (n == -1) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *d = nb_sub(x, nb_mean(x, axes, naxes, true));
    nb_tensor *s = nb_sum(nb_square(d), axes, naxes, keepdim);
    double den = (double)n - (double)correction;
    nb_tensor *r = n >= 0 ? nb_div(s, den > 0 ? den : 0.0)
                          : nb_div(s, nb_maximum(nb_sub(nb__numel_of(x, axes, naxes), (double)correction), 0.0));
    NB_OPMATH_RETURN(r);
}

/* sqrt(var); where var is 0 the gradient is 0 instead of 0 * inf (torch's std_backward masks it). */
nb_tensor *nb_std(nb_tensor *x, const int *axes, int naxes, int64_t correction, bool keepdim) {
    NB_CHECK_ARG("std", x);
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *v = nb_var(x, axes, naxes, correction, keepdim);
    nb_tensor *zero = v ? nb_eq(v, 0.0) : NULL;
    NB_OPMATH_RETURN(nb_masked_fill(nb_sqrt(nb_masked_fill(v, zero, 1.0)), zero, 0.0));
}

nb_tensor *nb__exp_shift(nb_tensor *x, const int *axes, int naxes) {
    int64_t n = nb__reduced_count("exp_shift", x, axes, naxes);
    if (n == -1) return NULL;
    if (n == 0) { /* nothing to shift: an empty exp-sum is 0, its log -inf, as torch */
        bool mask[NB_MAX_DIMS] = {0};
        if (x->ndim) nb__axes_mask("exp_shift", axes, naxes, x->ndim, mask);
        int64_t kshape[NB_MAX_DIMS];
        for (int d = 0; d < x->ndim; d++) kshape[d] = mask[d] ? 1 : x->shape[d];
        return nb__own(nb__full_on(kshape, x->ndim, 0, x->dtype, x->storage->device));
    }
    nb_tensor *m = nb_detach(nb_max(x, axes, naxes, true));
    return nb_masked_fill(m, nb_eq(nb_abs(m), INFINITY), 0.0);
}

nb_tensor *nb_logsumexp(nb_tensor *x, const int *axes, int naxes, bool keepdim) {
    NB_CHECK_ARG("logsumexp", x);
    if (!float_only("logsumexp", x)) return NULL;
    if (nb__reduced_count("logsumexp", x, axes, naxes) == -1) return NULL;
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
    nb_tensor *safe = nb_masked_fill(s, at0, 1.0);
    return nb_masked_fill(p == 2 ? nb_sqrt(safe) : nb_pow(safe, 1.0 / p), at0, 0.0);
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

/* SCAN: attrs.axes[0] the scanned axis (normalized). */
static int infer_scan(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    const char *name = nb__ops[op].name;
    int ax = nb__axis(name, a->axes[0], in[0]->ndim);
    if (ax < 0 || !nb__backend_common(name, in, 1)) return -1;
    a->axes[0] = ax;
    a->naxes = 1;
    nb__meta_of(m, in[0]);
    m->dtype = reduce_dtype(op, in[0]->dtype);
    m->weak = false;
    return 1;
}

static nb_status exec_scan(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                           nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *x = in[0];
    nb_tensor *r = nb__meta_new(m, x->storage->device);
    if (r && nb__backend_of(x)->scan(op, r, x, a->axes[0]) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_scan = {infer_scan, exec_scan};

static nb_tensor *scan(nb_op op, nb_tensor *x, int axis) {
    NB_CHECK_ARG(nb__ops[op].name, x);
    nb_attrs a = {.naxes = 1, .axes = {axis}};
    return nb__apply(op, &x, 1, &a);
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
