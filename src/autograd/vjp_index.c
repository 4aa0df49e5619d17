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

/* t zero-padded at the high end of every axis up to the shape of `like` (same rank). */
static nb_tensor *pad_to(nb_tensor *t, const nb_tensor *like) {
    if (!t || nb__same_shape(t, like)) return t;
    int64_t pads[2 * NB_MAX_DIMS] = {0};
    int nd = nb_ndim(t);
    for (int k = 0; k < nd; k++) pads[2 * k + 1] = like->shape[nd - 1 - k] - nb_shape(t)[nd - 1 - k];
    return nb_pad(t, pads, 2 * nd, NB_PAD_CONSTANT, 0);
}

/* src may extend beyond index (only index's extent is scattered): the rest of its gradient is 0. */
RULE(scatter_add) {
    nb_tensor *src = n->in[2];
    gin[0] = nb__own(nb_retain(g));
    if (nb__tracked(src)) gin[2] = pad_to(nb_gather(g, n->attrs.axes[0], n->in[1]), src);
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
