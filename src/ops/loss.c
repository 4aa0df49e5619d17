/*
 * loss.c — the losses as composites of public ops (autograd flows through
 * their parts): cross_entropy (class indices or class probabilities, label
 * smoothing, ignore_index), nll_loss, mse_loss, bce_with_logits.  Formulas
 * follow ATen's LossNLL.cpp / Loss.cpp (PyTorch 2.x).
 */
#include "ops.h"

#include <math.h>
#include <string.h>

static bool check_reduction(const char *op, nb_reduction r) {
    if ((unsigned)r < NB_REDUCTION_COUNT) return true;
    nb__error(NB_ERR_ARG, "%s: unknown reduction %d", op, (int)r);
    return false;
}

static bool require_float(const char *op, const char *what, nb_tensor *t) {
    if (nb_dtype_is_float(t->dtype)) return true;
    nb__error(NB_ERR_DTYPE, "%s: %s must have a float dtype, got %s", op, what, nb_dtype_name(t->dtype));
    return false;
}

/* Elementwise losses reduced the usual way (mean over all elements, sum, or none). */
static nb_tensor *reduce_all(nb_tensor *l, nb_reduction r) {
    if (r == NB_REDUCE_MEAN) return nb_mean(l, NULL, 0, false);
    if (r == NB_REDUCE_SUM) return nb_sum(l, NULL, 0, false);
    return l;
}

/* Class axis of logits: 1 for [N, C, d1, …], 0 for [C]. */
static int class_axis(const nb_tensor *x) { return x->ndim == 1 ? 0 : 1; }

/* Class-index targets decoded for one batch, with ops (so they may be symbolic). */
typedef struct class_targets {
    nb_tensor *index; /* i64, target's shape with a size-1 class axis; ignored entries point at class 0 */
    nb_tensor *keep;  /* bool, target's shape: false where ignored */
} class_targets;

/* NB_ERR_INDEX naming op unless every target t (contiguous i64) is in [0, C) or ignored. */
static bool targets_in_range(const char *op, nb_tensor *t, int64_t C, int64_t ignore) {
    const int64_t *tv = (const int64_t *)nb__ptr(t);
    for (int64_t i = 0, n = nb__numel(t); i < n; i++)
        if (tv[i] != ignore && (tv[i] < 0 || tv[i] >= C)) {
            nb__error(NB_ERR_INDEX, "%s: target %lld at position %lld out of range [0, %lld) (ignore_index %lld)", op,
                      (long long)tv[i], (long long)i, (long long)C, (long long)ignore);
            return false;
        }
    return true;
}

/*
 * Validate integer class targets against logits x (shape: x's without the
 * class axis; values in [0, C) or ignore_index: checked here for a concrete
 * target, by the gather when the graph runs for a symbolic one) and decode
 * them.  Runs inside the caller's composite scope; the tensors it makes
 * belong to that scope.
 */
static bool decode_targets(const char *op, nb_tensor *x, nb_tensor *target, int64_t ignore, class_targets *ct) {
    if (x->ndim == 0) {
        nb__error(NB_ERR_SHAPE, "%s: input must have a class axis ([C] or [N, C, ...]), got %s", op, NB_SHAPE_STR(x));
        return false;
    }
    int ca = class_axis(x);
    int64_t want[NB_MAX_DIMS];
    for (int d = 0, k = 0; d < x->ndim; d++)
        if (d != ca) want[k++] = x->shape[d];
    if (target->ndim != x->ndim - 1 || memcmp(target->shape, want, sizeof(int64_t) * (size_t)target->ndim)) {
        nb__error(NB_ERR_SHAPE, "%s: target %s does not match input %s (expected target %s)", op,
                  NB_SHAPE_STR(target), NB_SHAPE_STR(x), NB_DIMS_STR(want, x->ndim - 1));
        return false;
    }
    if (nb_dtype_is_float(target->dtype) || target->dtype == NB_BOOL) {
        nb__error(NB_ERR_DTYPE, "%s: class-index target must have an integer dtype, got %s", op,
                  nb_dtype_name(target->dtype));
        return false;
    }
    if (!nb__is_host(target->storage->device) || !nb__is_host(x->storage->device)) {
        nb__error(NB_ERR_DEVICE, "%s: class-index targets are decoded in host memory", op);
        return false;
    }
    nb_tensor *t = nb_to_device(nb_cast(target, NB_I64), x->storage->device);
    if (!t) return false;
    if (!nb__is_symbolic(t)) {
        nb_tensor *tc = nb_contiguous(t);
        if (!tc || !targets_in_range(op, tc, x->shape[ca], ignore)) return false;
    }
    ct->keep = nb_ne(t, ignore);
    ct->index = nb_unsqueeze(nb_mul(t, ct->keep), ca); /* ignored entries: class 0 */
    return ct->keep && ct->index;
}

/* logp at the target classes, target-shaped (ignored entries not yet zeroed). */
static nb_tensor *picked(nb_tensor *logp, const class_targets *ct) {
    if (!logp) return NULL;
    int ca = class_axis(logp);
    return nb_squeeze(nb_gather(logp, ca, ct->index), ca);
}

/*
 * The loss is -l: zero the ignored entries, reduce, and negate last (on the
 * reduced value when there is one; first without a reduction, so that the
 * ignored entries are +0).  Mean divides by the number of targets
 * kept (NaN when none), counted with ops: -1 / count rounded once to the
 * loss's dtype, as a C number -1.0 / count would be.
 */
static nb_tensor *reduce_targets(nb_tensor *l, const class_targets *ct, nb_reduction r) {
    if (!l) return NULL;
    if (r == NB_REDUCE_NONE) l = nb_neg(l); /* before zeroing: ignored entries are +0, as torch */
    l = nb_where(ct->keep, l, nb__own(nb__full_on(NULL, 0, 0, l->dtype, l->storage->device)));
    if (r == NB_REDUCE_NONE) return l;
    nb_tensor *s = nb_sum(l, NULL, 0, false);
    if (r == NB_REDUCE_SUM) return nb_mul(s, -1.0);
    nb_tensor *count = nb_cast(nb_sum(ct->keep, NULL, 0, false), NB_F64);
    return nb_mul(s, nb_cast(nb_neg(nb_reciprocal(count)), s ? s->dtype : NB_F32));
}

/* v / C for the class count C of logits as a weak scalar (scoped): the C number when C is
 * concrete, else divided by the count when the graph runs. */
static nb_tensor *per_class(nb_tensor *logits, double v) {
    int ca = class_axis(logits);
    int64_t C = logits->shape[ca];
    nb_device dev = logits->storage->device;
    if (!nb__dim_sym(C)) return nb__own(nb__weak_scalar(v / (double)C, dev));
    return nb_div(nb__own(nb__weak_scalar(v, dev)), nb__numel_of(logits, &ca, 1));
}

nb_tensor *nb_nll_loss(nb_tensor *logp, nb_tensor *target, nb_reduction reduction, int64_t ignore_index) {
    NB_CHECK_ARG("nll_loss", logp);
    NB_CHECK_ARG("nll_loss", target);
    if (!check_reduction("nll_loss", reduction) || !require_float("nll_loss", "input", logp)) return NULL;
    NB_COMPOSITE_BEGIN();
    class_targets ct;
    nb_tensor *r = NULL;
    if (decode_targets("nll_loss", logp, target, ignore_index, &ct))
        r = reduce_targets(picked(logp, &ct), &ct, reduction);
    NB_COMPOSITE_RETURN(r);
}

/*
 * Class-index cross entropy (ATen cross_entropy_loss_label_smoothing):
 * per target (1-ls)·(-logp[t]) + (ls/C)·(-Σ_c logp[c]), ignored targets 0.
 */
static nb_tensor *ce_indices(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_opts o) {
    class_targets ct;
    if (!decode_targets("cross_entropy", logits, target, o.ignore_index, &ct)) return NULL;
    int ca = class_axis(logits);
    nb_tensor *logp = nb_log_softmax(logits, ca);
    nb_tensor *l = picked(logp, &ct);
    if (o.label_smoothing > 0) {
        double ls = o.label_smoothing;
        l = nb_add(nb_mul(l, 1 - ls), nb_mul(nb_sum(logp, &ca, 1, false), per_class(logits, ls)));
    }
    return reduce_targets(l, &ct, o.reduction);
}

/*
 * Class-probability cross entropy (ATen cross_entropy_loss_prob_target):
 * -Σ_c logp[c]·t'[c] with t' = t(1-ls) + ls/C; mean divides by numel/C (the
 * count of the other axes; 0 when C is).
 */
static nb_tensor *ce_probs(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_opts o) {
    if (!require_float("cross_entropy", "probability target", target)) return NULL;
    int ca = class_axis(logits);
    nb_tensor *t = target;
    if (o.label_smoothing > 0) t = nb_add(nb_mul(target, 1 - o.label_smoothing), per_class(logits, o.label_smoothing));
    nb_tensor *l = nb_neg(nb_sum(nb_mul(nb_log_softmax(logits, ca), t), &ca, 1, false));
    if (o.reduction == NB_REDUCE_NONE) return l;
    nb_tensor *s = nb_sum(l, NULL, 0, false);
    if (o.reduction == NB_REDUCE_SUM) return s;
    int others[NB_MAX_DIMS], k = 0;
    for (int d = 0; d < logits->ndim; d++)
        if (d != ca) others[k++] = d;
    int64_t n = logits->shape[ca] == 0 ? 0 : nb__reduced_count("cross_entropy", logits, others, k);
    return n >= 0 ? nb_div(s, (double)n) : nb_div(s, nb__numel_of(logits, others, k));
}

nb_tensor *nb_cross_entropy(nb_tensor *logits, nb_tensor *target, nb_cross_entropy_opts opts) {
    NB_CHECK_ARG("cross_entropy", logits);
    NB_CHECK_ARG("cross_entropy", target);
    if (!check_reduction("cross_entropy", opts.reduction) || !require_float("cross_entropy", "input", logits))
        return NULL;
    if (!(opts.label_smoothing >= 0 && opts.label_smoothing <= 1)) {
        nb__error(NB_ERR_ARG, "cross_entropy: label_smoothing %g outside [0, 1]", opts.label_smoothing);
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    /* as torch: a target shaped like the input holds class probabilities */
    bool probs = logits->ndim > 0 && nb__same_shape(logits, target);
    NB_COMPOSITE_RETURN(probs ? ce_probs(logits, target, opts) : ce_indices(logits, target, opts));
}

nb_tensor *nb_mse_loss(nb_tensor *input, nb_tensor *target, nb_reduction reduction) {
    NB_CHECK_ARG("mse_loss", input);
    NB_CHECK_ARG("mse_loss", target);
    int64_t shape[NB_MAX_DIMS];
    if (!check_reduction("mse_loss", reduction) ||
        nb__broadcast_shapes("mse_loss", input->shape, input->ndim, target->shape, target->ndim, shape) < 0)
        return NULL;
    if (!nb_dtype_is_float(nb_promote_types(input->dtype, target->dtype))) {
        nb__error(NB_ERR_DTYPE, "mse_loss: needs a float input or target, got %s and %s", nb_dtype_name(input->dtype),
                  nb_dtype_name(target->dtype));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    NB_COMPOSITE_RETURN(reduce_all(nb_square(nb_sub(input, target)), reduction));
}

nb_tensor *nb_bce_with_logits(nb_tensor *logits, nb_tensor *target, nb_reduction reduction) {
    NB_CHECK_ARG("bce_with_logits", logits);
    NB_CHECK_ARG("bce_with_logits", target);
    if (!check_reduction("bce_with_logits", reduction) || !require_float("bce_with_logits", "input", logits))
        return NULL;
    if (!nb__same_shape(logits, target)) {
        nb__error(NB_ERR_SHAPE, "bce_with_logits: target %s must have the shape of input %s", NB_SHAPE_STR(target),
                  NB_SHAPE_STR(logits));
        return NULL;
    }
    /* softplus is linear past the threshold; 20 (torch's default) is exact in single
     * precision, double needs 40 (exp(-40) is below its rounding) */
    double threshold = logits->dtype == NB_F64 ? 40.0 : 20.0;
    NB_COMPOSITE_BEGIN();
    /* (1 - t) x - log σ(x) = x - t x + softplus(-x): smooth at x = 0, unlike the max/abs form */
    nb_tensor *l = nb_add(nb_sub(logits, nb_mul(target, logits)), nb_softplus(nb_neg(logits), 1.0, threshold));
    NB_COMPOSITE_RETURN(reduce_all(l, reduction));
}
