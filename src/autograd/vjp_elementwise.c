/*
 * vjp_elementwise.c — derivative rules of the unary, binary and where ops,
 * written with public ops so they can be differentiated again (create_graph).
 * Rules recompute from the inputs instead of reusing the detached output
 * wherever the output's own derivative would matter.  Formulas follow the
 * derivatives in PyTorch's tools/autograd/derivatives.yaml.  Only public ops
 * and metadata are used, so that traced (nb_graph_grad) they build graph nodes.
 */
#include "vjp.h"

#include <math.h>

#define X (n->in[0])
#define P0 (n->attrs.f[0])
#define P1 (n->attrs.f[1])
#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

RULE(neg) { gin[0] = nb_neg(g); return NB_OK; }
RULE(abs) { gin[0] = nb_mul(g, nb_sign(X)); return NB_OK; }
RULE(sign) { (void)g; gin[0] = nb_zeros_like(X); return NB_OK; }
RULE(exp) { gin[0] = nb_mul(g, nb_exp(X)); return NB_OK; }
RULE(expm1) { gin[0] = nb_mul(g, nb_exp(X)); return NB_OK; }
RULE(log) { gin[0] = nb_div(g, X); return NB_OK; }
RULE(log1p) { gin[0] = nb_div(g, nb_add(X, 1.0)); return NB_OK; }
RULE(sqrt) { gin[0] = nb_div(g, nb_mul(nb_sqrt(X), 2.0)); return NB_OK; }
RULE(rsqrt) { gin[0] = nb_mul(g, nb_mul(nb_div(nb_rsqrt(X), X), -0.5)); return NB_OK; }
RULE(square) { gin[0] = nb_mul(g, nb_mul(X, 2.0)); return NB_OK; }
RULE(reciprocal) { gin[0] = nb_neg(nb_div(g, nb_square(X))); return NB_OK; }
RULE(sin) { gin[0] = nb_mul(g, nb_cos(X)); return NB_OK; }
RULE(cos) { gin[0] = nb_neg(nb_mul(g, nb_sin(X))); return NB_OK; }
RULE(tan) { gin[0] = nb_mul(g, nb_add(nb_square(nb_tan(X)), 1.0)); return NB_OK; }
RULE(tanh) { gin[0] = nb_mul(g, nb_sub(nb_ones_like(X), nb_square(nb_tanh(X)))); return NB_OK; }
RULE(sigmoid) {
    nb_tensor *s = nb_sigmoid(X);
    gin[0] = nb_mul(g, nb_mul(s, nb_sub(nb_ones_like(s), s)));
    return NB_OK;
}
/* torch's threshold_backward(g, result, 0), as torch's relu calls it: g where the result is not 0
 * (x > 0, and a NaN x, whose result NaN torch also lets g through), else 0.  One select with the
 * result itself as the condition (a float condition's truth is != 0) against a rank-0 zero (never
 * materialized): no comparison pass, no mask. */
nb_tensor *nb__relu_grad(nb_tensor *y, nb_tensor *g) {
    return nb_where(y, g, nb__own(nb__full_on(NULL, 0, 0, g->dtype, g->storage->device)));
}

RULE(relu) {
    gin[0] = nb__relu_grad(n->out, g);
    return NB_OK;
}
RULE(leaky_relu) { gin[0] = nb_mul(g, nb_where(nb_gt(X, 0.0), nb_ones_like(X), nb_full_like(X, P0))); return NB_OK; }
RULE(elu) { gin[0] = nb_mul(g, nb_where(nb_gt(X, 0.0), nb_ones_like(X), nb_mul(nb_exp(X), P0))); return NB_OK; }
RULE(gelu) {
    /* d/dx x Φ(x) = Φ(x) + x φ(x) */
    nb_tensor *cdf = nb_mul(nb_add(nb_erf(nb_mul(X, 0.70710678118654752440)), 1.0), 0.5);
    nb_tensor *pdf = nb_mul(nb_exp(nb_mul(nb_square(X), -0.5)), 0.39894228040143267794);
    gin[0] = nb_mul(g, nb_add(cdf, nb_mul(X, pdf)));
    return NB_OK;
}
RULE(gelu_tanh) {
    /* u = k (x + c x³); y = x (1 + tanh u) / 2; dy = (1 + t)/2 + x (1 - t²) k (1 + 3 c x²) / 2 */
    const double k = 0.79788456080286535588, c = 0.044715;
    nb_tensor *x2 = nb_square(X);
    nb_tensor *t = nb_tanh(nb_mul(nb_add(X, nb_mul(nb_mul(x2, X), c)), k));
    nb_tensor *a = nb_mul(nb_add(t, 1.0), 0.5);
    nb_tensor *b = nb_mul(nb_mul(nb_mul(X, nb_sub(nb_ones_like(t), nb_square(t))), nb_add(nb_mul(x2, 3 * c), 1.0)), 0.5 * k);
    gin[0] = nb_mul(g, nb_add(a, b));
    return NB_OK;
}
RULE(silu) {
    nb_tensor *s = nb_sigmoid(X);
    gin[0] = nb_mul(g, nb_mul(s, nb_add(nb_mul(X, nb_sub(nb_ones_like(s), s)), 1.0)));
    return NB_OK;
}
RULE(softplus) {
    nb_tensor *bx = nb_mul(X, P0);
    gin[0] = nb_mul(g, nb_where(nb_gt(bx, P1), nb_ones_like(X), nb_sigmoid(bx)));
    return NB_OK;
}
RULE(erf) { gin[0] = nb_mul(g, nb_mul(nb_exp(nb_neg(nb_square(X))), 1.12837916709551257390)); return NB_OK; }
RULE(floor) { (void)g; gin[0] = nb_zeros_like(X); return NB_OK; }
RULE(ceil) { (void)g; gin[0] = nb_zeros_like(X); return NB_OK; }
RULE(round) { (void)g; gin[0] = nb_zeros_like(X); return NB_OK; }
/* torch 2.x (scalar bounds): the gradient passes strictly inside, not at a bound. */
RULE(clamp) { gin[0] = nb_mul(g, nb_logical_and(nb_gt(X, P0), nb_lt(X, P1))); return NB_OK; }

#define A (n->in[0])
#define B (n->in[1])
RULE(add) { gin[0] = nb__own(nb_retain(g)); gin[1] = nb__own(nb_retain(g)); return NB_OK; }
RULE(sub) { gin[0] = nb__own(nb_retain(g)); gin[1] = nb_neg(g); return NB_OK; }
RULE(mul) { gin[0] = nb_mul(g, B); gin[1] = nb_mul(g, A); return NB_OK; }
RULE(div) {
    gin[0] = nb_div(g, B);
    gin[1] = nb_neg(nb_div(nb_mul(g, A), nb_square(B)));
    return NB_OK;
}
/* torch's pow_backward: d/da = b a^(b-1), taken as 0 where b == 0 (even at a == 0);
 * d/db = a^b log a, taken as 0 where a == 0 and b >= 0. */
RULE(pow) {
    nb_tensor *zero = nb_zeros_like(g);
    gin[0] = nb_mul(g, nb_where(nb_eq(B, 0.0), zero, nb_mul(B, nb_pow(A, nb_sub(B, 1.0)))));
    if (nb_requires_grad(B)) { /* the exponent's gradient only where it is wanted */
        nb_tensor *at0 = nb_logical_and(nb_eq(A, 0.0), nb_ge(B, 0.0));
        nb_tensor *safe = nb_where(at0, nb_ones_like(A), A);
        gin[1] = nb_mul(g, nb_where(at0, zero, nb_mul(nb_pow(A, B), nb_log(safe))));
    }
    return NB_OK;
}
/* maximum/minimum (torch's max/min backward): the gradient goes to the input that wins,
 * is split evenly on ties, and reaches both where either is NaN.  `loses(self, other)` is
 * lt for maximum, gt for minimum. */
static nb_tensor *winner_share(nb_tensor *g, nb_tensor *self, nb_tensor *other,
                               nb_tensor *(*loses)(nb_tensor *, nb_tensor *)) {
    nb_tensor *w = nb_cast(nb_logical_not(loses(self, other)), g->dtype);
    return nb_mul(g, nb_where(nb_eq(self, other), nb_full_like(w, 0.5), w));
}
RULE(maximum) {
    gin[0] = winner_share(g, A, B, nb_lt_t);
    gin[1] = winner_share(g, B, A, nb_lt_t);
    return NB_OK;
}
RULE(minimum) {
    gin[0] = winner_share(g, A, B, nb_gt_t);
    gin[1] = winner_share(g, B, A, nb_gt_t);
    return NB_OK;
}
RULE(atan2) {
    nb_tensor *den = nb_add(nb_square(A), nb_square(B));
    gin[0] = nb_div(nb_mul(g, B), den);
    gin[1] = nb_neg(nb_div(nb_mul(g, A), den));
    return NB_OK;
}
RULE(remainder) {
    gin[0] = nb__own(nb_retain(g));
    gin[1] = nb_neg(nb_mul(g, nb_floor(nb_div(A, B))));
    return NB_OK;
}
/* torch: d/da = 1, d/db = -trunc(a / b) (trunc as floor or ceil by sign: piecewise constant). */
RULE(fmod) {
    nb_tensor *q = nb_div(A, B);
    gin[0] = nb__own(nb_retain(g));
    gin[1] = nb_neg(nb_mul(g, nb_where(nb_lt(q, 0.0), nb_ceil(q), nb_floor(q))));
    return NB_OK;
}
RULE(where) {
    nb_tensor *c = n->in[0], *zero = nb_zeros_like(g);
    gin[1] = nb_where(c, g, zero);
    gin[2] = nb_where(c, zero, g);
    return NB_OK;
}
