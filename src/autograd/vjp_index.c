/* vjp_index.c — derivative rules of matmul, addmm and the indexing primitives (gather, scatter_add, cat, pad). */
#include "vjp.h"
#include "../graph/graph.h"

#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

/* True when t is the result of a permute swapping its last two axes (the weight w^T in linear),
 * read from the op that produced it: the tape node eagerly, the graph node when traced, so
 * the tape and nb_graph_grad build the same computation. */
static bool transposed_view(const nb_tensor *t) {
    const nb_attrs *a = NULL;
    if (nb__is_symbolic(t)) {
        const nb_gnode *nd = &t->graph->nodes[t->gnode];
        if (nd->kind == NB_GNODE_OP && nd->op == NB_OP_PERMUTE) a = &nd->attrs;
    } else if (t->node && t->node->op == NB_OP_PERMUTE)
        a = &t->node->attrs;
    int d = a ? a->naxes : 0;
    if (d < 2 || a->axes[d - 2] != d - 1 || a->axes[d - 1] != d - 2) return false;
    for (int i = 0; i < d - 2; i++)
        if (a->axes[i] != i) return false;
    return true;
}

/* d(a@b) = g b^T for a, a^T g for b.  An operand that is a transposed view (as the
 * weight in linear) gets its gradient computed transposed, (b^T g^T)^T, so that
 * the view's own adjoint transposes it back into a contiguous tensor. */
static nb_tensor *mm_grad(nb_tensor *lhs, nb_tensor *rhs, bool transposed) {
    if (!transposed) return nb_matmul(lhs, rhs);
    return nb_transpose(nb_matmul(nb_transpose(rhs, -1, -2), nb_transpose(lhs, -1, -2)), -1, -2);
}

RULE(matmul) {
    nb_tensor *a = n->in[0], *b = n->in[1];
    if (nb_requires_grad(a)) gin[0] = mm_grad(g, nb_transpose(b, -1, -2), transposed_view(a));
    if (nb_requires_grad(b)) gin[1] = mm_grad(nb_transpose(a, -1, -2), g, transposed_view(b));
    return NB_OK;
}

/* c + a@b: matmul's for a and b; c gets g, summed to c's shape by the gradient's conformance.
 * With NB_SUB_RELU (relu(c + a@b)), g goes through relu's derivative first. */
RULE(addmm) {
    if ((n->attrs.sub & NB_SUB_RELU) && !(g = nb__relu_grad(n->out, g))) return nb_last_status();
    nb_status st = nb__vjp_matmul(n, g, gin);
    if (st == NB_OK && nb_requires_grad(n->in[2])) gin[2] = nb__own(nb_retain(g));
    return st;
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
    if (nb_requires_grad(src)) gin[2] = pad_to(nb_gather(g, n->attrs.axes[0], n->in[1]), src);
    return NB_OK;
}

RULE(cat) {
    int a = n->attrs.axes[0];
    int64_t off = 0;
    for (int i = 0; i < n->n_in; i++) {
        int64_t len = n->in[i]->shape[a];
        if (nb_requires_grad(n->in[i])) gin[i] = nb_narrow(g, a, off, len);
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
