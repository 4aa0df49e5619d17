/*
 * vjp_conv.c — derivative rules of the sliding-window primitives, each the
 * adjoint primitive: unfold ↔ fold, max_pool2d → max_unpool2d at the
 * recorded argmax positions, max_unpool2d → gather at those positions.
 * conv2d, conv1d and avg_pool2d are composites of these and matmul.
 */
#include "vjp.h"
#include "../ops/conv.h"

#define X (n->in[0])
#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

RULE(unfold) {
    gin[0] = nb_fold(g, X->shape[2], X->shape[3], nb__window_from_attrs(&n->attrs));
    return NB_OK;
}

RULE(fold) {
    gin[0] = nb_unfold(g, nb__window_from_attrs(&n->attrs));
    return NB_OK;
}

/* in[1]: the argmax positions recorded by the forward pass. */
RULE(max_pool2d) {
    gin[0] = nb_max_unpool2d(g, n->in[1], X->shape[2], X->shape[3]);
    return NB_OK;
}

/* out.flat[idx[i]] += x[i], so dx[i] = g.flat[idx[i]] within each [N, C] plane. */
RULE(max_unpool2d) {
    nb_tensor *gp = nb_flatten(g, 2, 3), *ip = nb_flatten(n->in[1], 2, 3);
    gin[0] = nb_reshape(nb_gather(gp, 2, ip), X->shape, 4);
    return NB_OK;
}
