/* vjp_layout.c — derivative rules of copies and views: cast, contiguous, to_device, reshape, permute, expand, slice, select, diagonal, view_grad. */
#include "vjp.h"

#define X (n->in[0])
#define RULE(name) nb_status nb__vjp_##name(const nb_node *n, nb_tensor *g, nb_tensor **gin)

/* The engine casts to X's dtype and sums broadcast axes, so these pass g through. */
RULE(cast) { (void)n; gin[0] = nb__own(nb_retain(g)); return NB_OK; }
RULE(contiguous) { (void)n; gin[0] = nb__own(nb_retain(g)); return NB_OK; }
RULE(expand) { (void)n; gin[0] = nb__own(nb_retain(g)); return NB_OK; }
RULE(to_device) {
    gin[0] = nb_to_device(g, nb_device_of(X)); /* back where the input was */
    return NB_OK;
}
RULE(reshape) { gin[0] = nb_reshape(g, X->shape, X->ndim); return NB_OK; }
RULE(permute) {
    int inv[NB_MAX_DIMS];
    for (int i = 0; i < n->attrs.naxes; i++) inv[n->attrs.axes[i]] = i;
    gin[0] = nb_permute(g, inv, n->attrs.naxes);
    return NB_OK;
}
static nb_status view_adjoint(const nb_node *n, nb_tensor *g, nb_tensor **gin) {
    gin[0] = nb__own(nb__view_grad(g, (nb_op)n->op, &n->attrs, X->shape, X->ndim));
    return NB_OK;
}
RULE(slice) { return view_adjoint(n, g, gin); }
RULE(select) { return view_adjoint(n, g, gin); }
RULE(diagonal) { return view_adjoint(n, g, gin); }
RULE(view_grad) {
    gin[0] = nb__own(nb__apply_view((nb_op)n->attrs.sub, g, &n->attrs));
    return NB_OK;
}
