/* vjp_index.c — derivative rules of matmul and of the indexing primitives (gather, scatter_add, cat, pad). */
#include "vjp.h"

#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

RULE(matmul) {
    nb_tensor *a = n->in[0], *b = n->in[1];
    if (nb__tracked(a)) gin[0] = nb_matmul(g, nb_transpose(b, -1, -2));
    if (nb__tracked(b)) gin[1] = nb_matmul(nb_transpose(a, -1, -2), g);
    return NB_OK;
}

RULE(gather) {
    nb_tensor *x = n->in[0];
    gin[0] = nb_scatter_add(nb_zeros_like(x), n->attrs.axes[0], n->in[1], g);
    return NB_OK;
}

RULE(scatter_add) {
    gin[0] = nb__own(nb_retain(g));
    if (nb__tracked(n->in[2])) gin[2] = nb_gather(g, n->attrs.axes[0], n->in[1]);
    return NB_OK;
}

RULE(cat) {
    int a = n->attrs.axes[0];
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t len = n->in[i]->shape[a];
        if (nb__tracked(n->in[i])) gin[i] = nb_narrow(g, a, off, len);
        off += len;
    }
    return NB_OK;
}

/* The adjoint of a constant pad is the pad with negated widths (crop where it padded). */
RULE(pad) {
    int64_t neg[2 * NB_MAX_DIMS];
    for (int i = 0; i < n->attrs.ni; i++) neg[i] = -n->attrs.i[i];
    gin[0] = nb_pad(g, neg, n->attrs.ni, NB_PAD_CONSTANT, 0);
    return NB_OK;
}
