/*
 * nn.c — the neural-network functions built as composites of public ops, so
 * autograd flows through their parts: softmax, log_softmax, layer_norm,
 * rms_norm, dropout.
 */
#include "ops.h"

#include <math.h>
#include <string.h>

/* NB_ERR_DTYPE unless x has a float dtype (torch rejects integer inputs here). */
static bool require_float(const char *op, nb_tensor *x) {
    if (nb_dtype_is_float(x->dtype)) return true;
    nb__error(NB_ERR_DTYPE, "%s: expected a float dtype, got %s (cast first)", op, nb_dtype_name(x->dtype));
    return false;
}

nb_tensor *nb_softmax(nb_tensor *x, int axis) {
    NB_CHECK_ARG("softmax", x);
    if (!require_float("softmax", x) || nb__axis("softmax", axis, x->ndim == 0 ? 1 : x->ndim) < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    /* the shift is a constant for differentiation: its gradient cancels; each row is scaled by
     * the reciprocal of its sum, as PyTorch's CPU kernel does (one division per row, not per
     * element) */
    nb_tensor *e = nb_exp(nb_sub(x, nb__exp_shift(x, &axis, 1)));
    NB_OPMATH_RETURN(nb_mul(e, nb_reciprocal(nb_sum(e, &axis, 1, true))));
}

nb_tensor *nb_log_softmax(nb_tensor *x, int axis) {
    NB_CHECK_ARG("log_softmax", x);
    if (!require_float("log_softmax", x) || nb__axis("log_softmax", axis, x->ndim == 0 ? 1 : x->ndim) < 0)
        return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *d = nb_sub(x, nb__exp_shift(x, &axis, 1));
    NB_OPMATH_RETURN(nb_sub(d, nb_log(nb_sum(nb_exp(d), &axis, 1, true))));
}

/*
 * Check the normalized trailing axes of x and an optional affine parameter
 * (which must have exactly their shape); fills axes with the last nnorm axes.
 */
static bool norm_args(const char *op, nb_tensor *x, int nnorm, nb_tensor *p, const char *pname, int *axes) {
    if (!require_float(op, x)) return false;
    if (nnorm < 1 || nnorm > x->ndim) {
        nb__error(NB_ERR_ARG, "%s: nnorm %d must be in [1, %d] for input %s", op, nnorm, x->ndim, NB_SHAPE_STR(x));
        return false;
    }
    const int64_t *tail = x->shape + (x->ndim - nnorm);
    if (p && !(p->ndim == nnorm && !memcmp(p->shape, tail, sizeof(int64_t) * (size_t)nnorm))) {
        nb__error(NB_ERR_SHAPE, "%s: %s %s must have the normalized shape %s of input %s", op, pname, NB_SHAPE_STR(p),
                  NB_DIMS_STR(tail, nnorm), NB_SHAPE_STR(x));
        return false;
    }
    for (int i = 0; i < nnorm; i++) axes[i] = x->ndim - nnorm + i;
    return true;
}

nb_tensor *nb_layer_norm(nb_tensor *x, int nnorm, nb_tensor *weight, nb_tensor *bias, double eps) {
    NB_CHECK_ARG("layer_norm", x);
    int axes[NB_MAX_DIMS];
    if (!norm_args("layer_norm", x, nnorm, weight, "weight", axes) ||
        !norm_args("layer_norm", x, nnorm, bias, "bias", axes))
        return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *d = nb_sub(x, nb_mean(x, axes, nnorm, true));
    nb_tensor *y = nb_mul(d, nb_rsqrt(nb_add(nb_mean(nb_square(d), axes, nnorm, true), eps)));
    if (weight) y = nb_mul(y, weight);
    if (bias) y = nb_add(y, bias);
    NB_OPMATH_RETURN(y);
}

nb_tensor *nb_rms_norm(nb_tensor *x, int nnorm, nb_tensor *weight, double eps) {
    NB_CHECK_ARG("rms_norm", x);
    int axes[NB_MAX_DIMS];
    if (!norm_args("rms_norm", x, nnorm, weight, "weight", axes)) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    nb_tensor *y = nb_mul(x, nb_rsqrt(nb_add(nb_mean(nb_square(x), axes, nnorm, true), eps)));
    if (weight) y = nb_mul(y, weight);
    NB_OPMATH_RETURN(y);
}

nb_tensor *nb_dropout(nb_tensor *x, double p, bool training) {
    NB_CHECK_ARG("dropout", x);
    if (!(p >= 0 && p <= 1)) {
        nb__error(NB_ERR_ARG, "dropout: probability p = %g outside [0, 1]", p);
        return NULL;
    }
    if (!training || p == 0 || nb__reduced_count("dropout", x, NULL, 0) == 0) return nb__own(nb_retain(x));
    if (!require_float("dropout", x)) return NULL;
    NB_COMPOSITE_BEGIN();
    /* as ATen's _dropout_impl: p == 1 multiplies by zero, else by bernoulli(1-p)/(1-p)
     * (the probability 1-p in x's dtype, broadcast to x's shape) */
    nb_tensor *keep = nb__own(nb__full_on(NULL, 0, 1 - p, x->dtype, x->storage->device));
    nb_tensor *y = p == 1 ? nb_mul(x, 0.0) : nb_mul(x, nb_div(nb_bernoulli(nb_broadcast_to(keep, x->shape, x->ndim)), 1 - p));
    NB_COMPOSITE_RETURN(y);
}
