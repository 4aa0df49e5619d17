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

/* Exclusive cumulative product along axis a: [1, x0, x0 x1, ...] (pad one 1 in front, drop the last). */
static nb_tensor *excl_cumprod(nb_tensor *x, int a) {
    int64_t pads[2 * NB_MAX_DIMS] = {0};
    int k = nb_ndim(x) - 1 - a;
    pads[2 * k] = 1;
    pads[2 * k + 1] = -1;
    return nb_cumprod(nb_pad(x, pads, 2 * k + 2, NB_PAD_CONSTANT, 1.0), a);
}

/* prod_{j != i} x_j along the last axis, by exclusive products from both ends (no division, so zeros are exact). */
static nb_tensor *others_product(nb_tensor *x) {
    int a = nb_ndim(x) - 1;
    nb_tensor *right = nb_flip(excl_cumprod(nb_flip(x, &a, 1), a), &a, 1);
    return nb_mul(excl_cumprod(x, a), right);
}

/* d prod / d x_i = product of the other reduced elements (as torch: exact with zeros, no prod / x_i).
 * The reduced axes are moved last and merged into one axis to form the products. */
RULE(prod) {
    int nd = X->ndim, perm[NB_MAX_DIMS], inv[NB_MAX_DIMS], kept = 0;
    int64_t merged[NB_MAX_DIMS + 1], rdims[NB_MAX_DIMS];
    bool reduced[NB_MAX_DIMS] = {false};
    for (int i = 0; i < n->attrs.naxes; i++) reduced[n->attrs.axes[i]] = true;
    for (int d = 0; d < nd; d++)
        if (!reduced[d]) {
            merged[kept] = X->shape[d];
            perm[kept++] = d;
        }
    for (int d = 0, k = kept; d < nd; d++)
        if (reduced[d]) {
            rdims[k - kept] = X->shape[d];
            perm[k++] = d;
        }
    for (int d = 0; d < nd; d++) inv[perm[d]] = d;
    int64_t count = nb__dims_prod("prod", rdims, nd - kept); /* symbolic dims allowed (traced) */
    if (count == -1) return nb_last_status();
    merged[kept] = count;
    if (count == 0) { /* an empty reduction: x, and so its gradient, has no elements */
        gin[0] = nb_zeros_like(X);
        return NB_OK;
    }
    nb_tensor *xt = nb_permute(X, perm, nd);
    nb_tensor *others = nb_reshape(others_product(nb_reshape(xt, merged, kept + 1)), nb_shape(xt), nd);
    gin[0] = nb_mul(unreduce(n, g), nb_permute(others, inv, nd));
    return NB_OK;
}

/* amax/amin: the gradient is shared evenly among the elements equal to the extreme
 * (a NaN extreme: among the NaNs), as torch's evenly_distribute_backward. */
static nb_status extreme(const nb_node *n, nb_tensor *g, nb_tensor **gin,
                         nb_tensor *(*f)(nb_tensor *, const int *, int, bool)) {
    nb_tensor *v = recompute(n, f); /* only compared (bool results): no gradient flows through it */
    nb_tensor *both_nan = nb_logical_and(nb_ne(X, X), nb_ne(v, v));
    nb_tensor *m = nb_cast(nb_logical_or(nb_eq(X, v), both_nan), g->dtype);
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
/*
 * cumprod's gradient d/dx_j of sum_i g_i prod_{k<=i} x_k = sum_{i>=j} g_i
 * prod_{k<=i, k!=j} x_k, as torch's cumprod_backward (FunctionsManual.cpp):
 * an O(L) form, and under create_graph with a zero an O(L^2) one whose own
 * derivative is right (the O(L) form masks what it knows to be 0, and its
 * derivative misses what those terms contribute).
 *
 * O(L): let z be the first zero along the axis.  Before z no factor
 * vanishes: sum_{i>=j} g_i out_i / x_j, keeping i < z.  At z: prod_{k<z} x_k
 * * sum_{i>=z} g_i prod_{z<k<=i} x_k.  After z: 0, since every product that
 * contains x_j also contains x_z.  Without zeros this is the division form,
 * differentiable as it stands.
 */
static nb_tensor *cumprod_grad_linear(nb_tensor *x, nb_tensor *g, int a) {
    nb_tensor *zero = nb_eq(x, 0.0), *seen = nb_cumsum(zero, a); /* zeros up to and including each position */
    nb_tensor *before = nb_eq(seen, 0), *first = nb_logical_and(zero, nb_eq(seen, 1));
    nb_tensor *upto = nb_eq(nb_sub(seen, nb_cast(zero, NB_I64)), 0); /* at or before the first zero */
    nb_tensor *zeros = nb_zeros_like(g), *ones = nb_ones_like(x);
    nb_tensor *safe = nb_where(before, x, ones);
    nb_tensor *head = nb_where(before, nb_mul(g, nb_cumprod(safe, a)), zeros);
    nb_tensor *ga = nb_where(before, nb_div(reverse_cumsum(head, a), safe), zeros);
    nb_tensor *tail = nb_where(before, zeros, nb_mul(g, nb_cumprod(nb_where(upto, ones, x), a)));
    nb_tensor *gb = nb_where(first, nb_mul(excl_cumprod(safe, a), reverse_cumsum(tail, a)), zeros);
    return nb_add(ga, gb);
}

/* O(L^2), with the axis moved last: Y[.., j, k] = (k == j ? 1 : x_k), so
 * cumprod(Y)[.., j, i] = prod_{k<=i, k!=j} x_k and grad_j = sum_{i>=j} g_i
 * cumprod(Y)[.., j, i].  Recorded ops and no division: exact at zeros. */
static nb_tensor *cumprod_grad_pairs(nb_tensor *x, nb_tensor *g, int a) {
    int last = nb_ndim(x) - 1;
    nb_tensor *i = nb_arange(0, (double)nb_size(x, a), 1, NB_I64), *j = nb_unsqueeze(i, 1);
    nb_tensor *y = nb_where(nb_eq(j, i), nb_scalar(1, nb_dtype_of(x)), nb_unsqueeze(nb_transpose(x, a, last), -2));
    nb_tensor *terms = nb_mul(nb_unsqueeze(nb_transpose(g, a, last), -2), nb_cumprod(y, -1));
    nb_tensor *sum = nb_sum(nb_masked_fill(terms, nb_lt(i, j), 0.0), (int[]){-1}, 1, false);
    return nb_transpose(sum, a, last);
}

/* Traced (nb_graph_grad) there is no data to count zeros in, and the gradient may be
 * differentiated again: the pairs form wherever the axis length is static. */
RULE(cumprod) {
    int a = n->attrs.axes[0];
    double zeros = 0;
    if (X->ndim && nb__is_symbolic(X)) zeros = !nb_dim_is_symbolic(X->shape[a]);
    else if (X->ndim && nb_grad_enabled()) {
        nb_status st = nb_item(nb_sum(nb_eq(X, 0.0), NULL, 0, false), &zeros);
        if (st != NB_OK) return st;
    }
    gin[0] = zeros > 0 ? cumprod_grad_pairs(X, g, a) : cumprod_grad_linear(X, g, a);
    return NB_OK;
}
