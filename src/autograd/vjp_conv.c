/*
 * vjp_conv.c — derivative rules of the sliding-window primitives, each the
 * adjoint primitive: unfold ↔ fold, max_pool2d → max_unpool2d at the
 * recorded argmax positions, max_unpool2d → gather at those positions.
 * conv2d, conv1d and avg_pool2d are composites of these and matmul; the
 * eager conv2d kernel (CONVOLUTION) gets that composite's adjoints.
 */
#include "vjp.h"
#include "../backend/backend.h"
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

/* CONVOLUTION, y[n, q] = w[q] cols[n, q] + b[q] with cols = unfold(x) as [N, groups, K, L]:
 * dw[q] = sum_n g[n, q] cols[n, q]^T, dx = fold(w[q]^T g[n, q]), db = the sum of g over n and
 * the positions.  In an eager backward pass that records nothing, dx and the per-image dw come
 * from the CONVOLUTION_BACKWARD kernel; elsewhere (create_graph) from unfold, matmul and fold,
 * so they differentiate again.  The sums are the gradient conformance's (nb__sum_to), so both
 * ways give the gradients of conv.c's composite bit for bit, whose tape makes the same ops.
 * Second derivatives agree with the composite's up to rounding only: this rule unfolds x again
 * for dw, so x's second-order terms arrive as two folds added (fold(a) + fold(b)) where the
 * composite, which reuses its forward's columns, folds their sum once.  With NB_SUB_RELU (relu
 * in the kernel's epilogue), g goes through relu's derivative first: inside the backward kernel,
 * which masks each image's g by the result as it reads it, where that kernel also takes db (or
 * none is wanted) and g has x's dtype; else as nb__relu_grad. */
RULE(convolution) {
    nb_tensor *x = X, *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    nb_window2d win = nb__window_from_attrs(&n->attrs);
    const int64_t *xs = x->shape, *ws = w->shape;
    int64_t groups = n->attrs.i[8], N = xs[0], og = ws[0] / groups, K = ws[1] * ws[2] * ws[3];
    int64_t L = nb_shape(g)[2] * nb_shape(g)[3], wg_shape[3] = {groups, og, K};
    bool rx = nb_requires_grad(x), rw = nb_requires_grad(w);
    bool rb = b && nb_requires_grad(b), kernel = (rx || rw) && !nb__interp_top() &&
                                                  !nb__should_record((nb_tensor *[]){x, w, g}, 3);
    bool relu = (n->attrs.sub & NB_SUB_RELU) != 0, db_fits = nb__conv_db_in_kernel(ws[0], L);
    bool mask = relu && kernel && g->dtype == x->dtype && (!rb || db_fits);
    if (relu && !mask && !(g = nb__relu_grad(n->out, g))) return nb_last_status();
    nb_tensor *gg = nb_reshape(g, NB_SHAPE(N, groups, og, L));
    if (!gg) return nb_last_status();
    /* the bias gradient from the kernel, which sums each image's g while it reads it, where that
     * is sum_to's bits (backend.h conv2d_backward: a contiguous g of x's dtype; the mask's result
     * is one) */
    bool kernel_db = kernel && rb && g->dtype == x->dtype && (mask || nb_is_contiguous(g)) && db_fits;
    if (rb && !kernel_db) gin[2] = nb_reshape(nb__own(nb__sum_to(gg, (int64_t[]){groups, og, 1}, 3)), NB_SHAPE(ws[0]));
    if (!rx && !rw) return NB_OK;
    if (kernel) {
        nb_attrs a = n->attrs;
        nb_tensor *o[NB_MAX_OUTS] = {NULL}, *gc = nb_cast(g, x->dtype);
        a.sub = (rx ? 1 : 0) | (rw ? 2 : 0) | (kernel_db ? 4 : 0) | (mask ? NB_SUB_CONVB_RELU : 0);
        if (!gc || nb__apply_n(NB_OP_CONVOLUTION_BACKWARD, (nb_tensor *[]){x, w, gc, n->out}, mask ? 4 : 3, &a, o) < 0)
            return nb_last_status();
        if (rx) gin[0] = nb__own(o[0]);
        if (rw) gin[1] = nb_reshape(nb__own(nb__sum_to(nb__own(o[rx]), wg_shape, 3)), ws, 4);
        if (kernel_db) gin[2] = nb__own(o[rx + rw]);
        return NB_OK;
    }
    bool pointwise = nb__window_pointwise(&win);
    if (rw) {
        nb_tensor *cols = pointwise ? x : nb_unfold(x, win);
        cols = nb_reshape(cols, NB_SHAPE(N, groups, K, L));
        nb_tensor *dw = nb_matmul(gg, nb_transpose(cols, -1, -2));
        gin[1] = dw ? nb_reshape(nb__own(nb__sum_to(dw, wg_shape, 3)), ws, 4) : NULL;
    }
    if (rx) {
        nb_tensor *dcols = nb_matmul(nb_transpose(nb_reshape(w, wg_shape, 3), -1, -2), gg);
        gin[0] = pointwise ? nb_reshape(dcols, xs, 4)
                           : nb_fold(nb_reshape(dcols, NB_SHAPE(N, groups * K, L)), xs[2], xs[3], win);
    }
    return NB_OK;
}
