/* vjp_reduce.c — derivative rules of the reductions and scans (sum, prod, max, min, cumsum, cumprod). */
#include "vjp.h"

#define X (n->in[0])
#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

/* g reshaped to the keepdim shape of the reduction, then broadcast to X's shape. */
static nb_tensor *unreduce(const nb_node *n, nb_tensor *g) {
    int64_t kshape[NB_MAX_DIMS];
    for (int d = 0; d < X->ndim; d++) kshape[d] = X->shape[d];
    for (int i = 0; i < n->attrs.naxes; i++) kshape[n->attrs.axes[i]] = 1;
    return nb_broadcast_to(nb_reshape(g, kshape, X->ndim), X->shape, X->ndim);
}

static nb_tensor *recompute(const nb_node *n, nb_tensor *(*f)(nb_tensor *, const int *, int, bool)) {
    return unreduce(n, f(X, n->attrs.axes, n->attrs.naxes, true));
}

RULE(sum) { gin[0] = unreduce(n, g); return NB_OK; }

/* d prod / d x_i = prod / x_i (inputs containing zeros get NaN/inf there; see the closing note). */
RULE(prod) { gin[0] = nb_div(nb_mul(unreduce(n, g), recompute(n, nb_prod)), X); return NB_OK; }

/* amax/amin: the gradient is shared evenly among the elements equal to the extreme. */
static nb_status extreme(const nb_node *n, nb_tensor *g, nb_tensor **gin,
                         nb_tensor *(*f)(nb_tensor *, const int *, int, bool)) {
    nb_tensor *m = nb_cast(nb_eq(X, nb_detach(recompute(n, f))), g->dtype);
    nb_tensor *cnt = nb_sum(m, n->attrs.axes, n->attrs.naxes, true);
    gin[0] = nb_div(nb_mul(unreduce(n, g), m), cnt);
    return NB_OK;
}
RULE(max) { return extreme(n, g, gin, nb_max); }
RULE(min) { return extreme(n, g, gin, nb_min); }

static nb_tensor *reverse_cumsum(nb_tensor *t, int axis) {
    return nb_flip(nb_cumsum(nb_flip(t, &axis, 1), axis), &axis, 1);
}
RULE(cumsum) { gin[0] = reverse_cumsum(g, n->attrs.axes[0]); return NB_OK; }
RULE(cumprod) {
    int a = n->attrs.axes[0];
    gin[0] = nb_div(reverse_cumsum(nb_mul(g, nb_cumprod(X, a)), a), X);
    return NB_OK;
}
