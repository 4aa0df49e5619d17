/*
 * vjp_linalg.c — derivative rules of the LINALG ops, written with public ops
 * (so they serve the tape, graphs and the transforms, and differentiate
 * again).  Formulas: M. B. Giles, "Collected matrix derivative results for
 * forward and reverse mode algorithmic differentiation" (2008), §2.3 (inverse
 * and solve, determinant); I. Murray, "Differentiation of the Cholesky
 * decomposition" (2016), eq. 10, symmetrized as PyTorch's cholesky_backward.
 */
#include "vjp.h"
#include "../backend/backend.h"

#define A (n->in[0])
#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

static nb_tensor *mT(nb_tensor *t) { return nb_transpose(t, -2, -1); }

/* The rules recompute the op's result from its inputs rather than reading the recorded one, so
 * that a second derivative sees how it depends on them (as the other rules do; a graph's CSE
 * merges the two). */

/* X = A^-1 B: gB = A^-T gX, gA = -gB X^T. */
RULE(solve) {
    nb_tensor *gb = nb_solve(mT(A), g);
    if (nb_requires_grad(A)) gin[0] = nb_neg(nb_matmul(gb, mT(nb_solve(A, n->in[1]))));
    gin[1] = gb;
    return NB_OK;
}

/* X = op(A)^-1 B with A triangular: gB = op(A)^-T gX; gA = -gB X^T (op = A) or -X gB^T
 * (op = A^T), kept on A's triangle (off its diagonal when the diagonal is taken as ones). */
RULE(solve_triangular) {
    int f = n->attrs.sub;
    bool upper = f & NB_LA_UPPER, trans = f & NB_LA_TRANS, unit = f & NB_LA_UNIT;
    nb_tensor *gb = nb_solve_triangular(A, g, upper, !trans, unit);
    if (nb_requires_grad(A)) {
        nb_tensor *x = nb_solve_triangular(A, n->in[1], upper, trans, unit);
        nb_tensor *ga = nb_neg(trans ? nb_matmul(x, mT(gb)) : nb_matmul(gb, mT(x)));
        gin[0] = upper ? nb_triu(ga, unit ? 1 : 0) : nb_tril(ga, unit ? -1 : 0);
    }
    gin[1] = gb;
    return NB_OK;
}

/* L = cholesky(A): P = Φ(L^T tril(gL)) (the lower triangle, its diagonal halved), then
 * gA = L^-T P L^-1 by two triangular solves, symmetrized. */
RULE(cholesky) {
    nb_tensor *l = nb_cholesky(A, false), *p = nb_matmul(mT(l), nb_tril(g, 0));
    nb_tensor *phi = nb_sub(nb_tril(p, 0), nb_mul(nb_sub(nb_tril(p, 0), nb_tril(p, -1)), 0.5));
    nb_tensor *m = nb_solve_triangular(l, phi, false, true, false);              /* L^-T P */
    nb_tensor *ga = mT(nb_solve_triangular(l, mT(m), false, true, false));      /* (L^-T (L^-T P)^T)^T */
    gin[0] = nb_mul(nb_add(ga, mT(ga)), 0.5);
    return NB_OK;
}

/* log|det A|: its gradient is A^-T = solve(A^T, I) (the sign has none). */
RULE(slogdet) {
    nb_tensor *inv_t = nb_solve(mT(A), nb__eye_like(A));
    gin[0] = nb_mul(nb_unsqueeze(nb_unsqueeze(g, -1), -1), inv_t);
    return NB_OK;
}
