/*
 * vjp_conv.c — derivative rules of the sliding-window primitives, each the
 * adjoint primitive: unfold ↔ fold, max_pool2d → max_unpool2d at the
 * recorded argmax positions, max_unpool2d → gather at those positions.
 * conv1d and avg_pool2d are composites of these and matmul, and so is
 * conv2d where its operands do not fit the image-by-image kernels; the
 * kernels (CONVOLUTION, CONVOLUTION_BACKWARD) get that composite's adjoints.
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

/* ---- CONVOLUTION and CONVOLUTION_BACKWARD ----
 * y[n, q] = w[q] cols[n, q] + b[q] for image n and group q, with cols = unfold(x) as
 * [N, groups, K, L]: dw[q] = sum_n g[n, q] cols[n, q]^T, dx = fold(w[q]^T g[n, q]), db = the sum
 * of g over n and the positions.  The sums are the gradient conformance's (nb__sum_to), so every
 * way below gives the gradients of conv.c's composite bit for bit, whose tape makes the same ops. */

/* x's columns as [N, groups, K, L] (x itself, reshaped, for a pointwise window). */
static nb_tensor *columns(nb_tensor *x, const nb_window2d *win, int64_t groups, int64_t K, int64_t L) {
    nb_tensor *cols = nb__window_pointwise(win) ? x : nb_unfold(x, *win);
    return nb_reshape(cols, NB_SHAPE(x->shape[0], groups, K, L));
}

/* Columns dcols [N, groups, K, L] folded back into an image shaped like x. */
static nb_tensor *fold_like(nb_tensor *dcols, const nb_tensor *x, const nb_window2d *win, int64_t groups, int64_t K,
                            int64_t L) {
    const int64_t *xs = x->shape;
    return nb__window_pointwise(win) ? nb_reshape(dcols, xs, 4)
                                     : nb_fold(nb_reshape(dcols, NB_SHAPE(xs[0], groups * K, L)), xs[2], xs[3], *win);
}

/* The geometry a rule of node n reads: window, groups, and for w [O, C/groups, KH, KW] and g
 * [N, O, OH, OW] the sizes O/groups, K = C/groups*KH*KW and L = OH*OW. */
typedef struct conv_geom {
    nb_window2d win;
    int64_t groups, og, K, L;
} conv_geom;

static conv_geom geom(const nb_node *n, const nb_tensor *w, const nb_tensor *g) {
    const int64_t *ws = w->shape; /* C and O may be symbolic (the composite's operands) */
    conv_geom c = {nb__window_from_attrs(&n->attrs), n->attrs.i[8], 0, nb__dims_prod("conv2d", ws + 1, 3),
                   g->shape[2] * g->shape[3]};
    c.og = nb__dim_div("conv2d", ws[0], c.groups);
    return c;
}

/* g [N, O, OH, OW] as [N, groups, O/groups, L]. */
static nb_tensor *grouped(nb_tensor *g, const conv_geom *c) {
    return nb_reshape(g, NB_SHAPE(g->shape[0], c->groups, c->og, c->L));
}

/* One output of CONVOLUTION_BACKWARD (sub bit 1: dx, 2: dwi, 4: db) for x, w and g (cast to x's
 * dtype), g taken where y is nonzero when y is given (NB_SUB_CONVB_RELU: relu's derivative inside
 * the kernel), as its own node: scoped, NULL with the error. */
static nb_tensor *conv_backward(const nb_node *n, nb_tensor *x, nb_tensor *w, nb_tensor *g, nb_tensor *y, int bit) {
    nb_attrs a = n->attrs;
    a.sub = bit | (y ? NB_SUB_CONVB_RELU : 0);
    nb_tensor *gc = nb_cast(g, x->dtype);
    return gc ? nb__own(nb__apply(NB_OP_CONVOLUTION_BACKWARD, (nb_tensor *[]){x, w, gc, y}, y ? 4 : 3, &a)) : NULL;
}

/* The weight gradient [O, C/groups, KH, KW] of a convolution of x by w that received g (masked by
 * y when given): the per-image gradients summed over N.  `fits`: from CONVOLUTION_BACKWARD
 * (nb__convolution_fits), else (y NULL) from unfold and matmul. */
static nb_tensor *weight_grad(const nb_node *n, nb_tensor *x, nb_tensor *w, nb_tensor *g, nb_tensor *y, bool fits) {
    conv_geom c = geom(n, w, g);
    nb_tensor *dwi = fits ? conv_backward(n, x, w, g, y, 2)
                          : nb_matmul(grouped(g, &c), nb_transpose(columns(x, &c.win, c.groups, c.K, c.L), -1, -2));
    return dwi ? nb_reshape(nb__own(nb__sum_to(dwi, (int64_t[]){c.groups, c.og, c.K}, 3)), w->shape, 4) : NULL;
}

/* The input gradient (shaped like x) of a convolution of x by w that received g (masked by y when
 * given): from CONVOLUTION_BACKWARD where it fits, else (y NULL) fold(w[q]^T g[n, q]). */
static nb_tensor *input_grad(const nb_node *n, nb_tensor *x, nb_tensor *w, nb_tensor *g, nb_tensor *y, bool fits) {
    if (fits) return conv_backward(n, x, w, g, y, 1);
    conv_geom c = geom(n, w, g);
    nb_tensor *wt = nb_transpose(nb_reshape(w, NB_SHAPE(c.groups, c.og, c.K)), -1, -2);
    return fold_like(nb_matmul(wt, grouped(g, &c)), x, &c.win, c.groups, c.K, c.L);
}

/* CONVOLUTION.  In an eager backward pass that records nothing, dx, the per-image dw and db come
 * from one CONVOLUTION_BACKWARD with several outputs; elsewhere (graphs, transforms, create_graph)
 * from one CONVOLUTION_BACKWARD node per gradient, each differentiable again (its rule below) —
 * the compiler merges them back into one (pass_cse.c) — or from unfold, matmul and fold where the
 * operands do not fit the kernels.  db comes from the kernel where that keeps sum_to's bits
 * (backend.h conv2d_backward: a contiguous g of x's dtype, or a masked one), else from sum_to.
 * With NB_SUB_RELU (relu in the kernel's epilogue), g goes through relu's derivative first:
 * inside the backward kernels, which mask each image's g by the result as they read it, where
 * they take g in x's dtype and also give db (or none is wanted); else as nb__relu_grad. */
RULE(convolution) {
    nb_tensor *x = X, *w = n->in[1], *b = n->n_in > 2 ? n->in[2] : NULL;
    const int64_t *ws = w->shape;
    bool rx = nb_requires_grad(x), rw = nb_requires_grad(w), fits = nb__convolution_fits(x, w, b);
    bool rb = b && nb_requires_grad(b), kernel = (rx || rw) && fits && !nb__interp_top() &&
                                                  !nb__should_record((nb_tensor *[]){x, w, g}, 3);
    conv_geom c = geom(n, w, g);
    bool relu = (n->attrs.sub & NB_SUB_RELU) != 0, db_fits = nb__conv_db_in_kernel(ws[0], c.L);
    bool mask = relu && fits && g->dtype == x->dtype && (!rb || db_fits);
    if (relu && !mask && !(g = nb__relu_grad(n->out, g))) return nb_last_status();
    nb_tensor *y = mask ? n->out : NULL;
    bool kernel_db = rb && g->dtype == x->dtype && db_fits && (mask || (kernel && nb_is_contiguous(g)));
    if (rb && !kernel_db) {
        nb_tensor *gg = grouped(g, &c);
        if (!gg) return nb_last_status();
        gin[2] = nb_reshape(nb__own(nb__sum_to(gg, (int64_t[]){c.groups, c.og, 1}, 3)), NB_SHAPE(ws[0]));
    }
    if (!kernel) {
        if (kernel_db) gin[2] = conv_backward(n, x, w, g, y, 4);
        if (rw) gin[1] = weight_grad(n, x, w, g, y, fits);
        if (rx) gin[0] = input_grad(n, x, w, g, y, fits);
        return NB_OK;
    }
    nb_attrs a = n->attrs;
    nb_tensor *o[NB_MAX_OUTS] = {NULL}, *gc = nb_cast(g, x->dtype);
    a.sub = (rx ? 1 : 0) | (rw ? 2 : 0) | (kernel_db ? 4 : 0) | (mask ? NB_SUB_CONVB_RELU : 0);
    if (!gc || nb__apply_n(NB_OP_CONVOLUTION_BACKWARD, (nb_tensor *[]){x, w, gc, y}, mask ? 4 : 3, &a, o) < 0)
        return nb_last_status();
    if (rx) gin[0] = nb__own(o[0]);
    if (rw) gin[1] = nb_reshape(nb__own(nb__sum_to(nb__own(o[rx]), (int64_t[]){c.groups, c.og, c.K}, 3)), ws, 4);
    if (kernel_db) gin[2] = nb__own(o[rx + rw]);
    return NB_OK;
}

/* CONVOLUTION_BACKWARD with one output (the form graphs and the recording tape hold), linear in g
 * and in x or w; with NB_SUB_CONVB_RELU its g is first taken where y is nonzero, which passes on
 * to g's gradient (y, a relu's result, gets none).  dx = fold(w[q]^T g[n, q]) takes u
 * [N, C, H, W]: to g the convolution of u by w, to w the weight gradient of u's convolution that
 * received g; x gives only its shape.  dwi[n, q] = g[n, q] cols[n, q]^T takes v [N, groups,
 * O/groups, K]: to x fold(v[n, q]^T g[n, q]) (the input gradient under per-image weights v), to g
 * v[n, q] cols[n, q]; w gives only its shape.  db = the sum of g over images and positions takes
 * d [O]: to g d broadcast.  Second derivatives of conv2d therefore agree with its composite's up
 * to rounding: the composite reuses its forward's columns where this unfolds x again, and adds x's
 * second-order terms in another order. */
RULE(convolution_backward) {
    nb_tensor *x = X, *w = n->in[1], *gr = n->in[2], *y = n->n_in > 3 ? n->in[3] : NULL, *dg = NULL;
    int out = n->attrs.sub & 7;
    if (out != 1 && out != 2 && out != 4)
        return nb__error(NB_ERR_UNSUPPORTED, "convolution_backward: no derivative of the form with outputs %d (only "
                         "one output, dx, dwi or db, is differentiable)", out);
    bool fits = nb__convolution_fits(x, w, NULL), rg = nb_requires_grad(gr);
    conv_geom c = geom(n, w, gr);
    if (out == 1) {
        if (rg) {
            nb_conv2d_opts o = {{c.win.stride[0], c.win.stride[1]}, {c.win.padding[0], c.win.padding[1]},
                                {c.win.dilation[0], c.win.dilation[1]}, c.groups};
            dg = nb_conv2d(nb_cast(g, x->dtype), w, NULL, o);
        }
        if (nb_requires_grad(w)) gin[1] = weight_grad(n, g, w, gr, y, fits);
    } else if (out == 2) {
        if (nb_requires_grad(x)) {
            nb_tensor *gm = y ? nb__relu_grad(y, gr) : gr;
            gin[0] = gm ? fold_like(nb_matmul(nb_transpose(g, -1, -2), grouped(gm, &c)), x, &c.win, c.groups, c.K, c.L)
                        : NULL;
        }
        if (rg) dg = nb_reshape(nb_matmul(g, columns(x, &c.win, c.groups, c.K, c.L)), nb_shape(gr), 4);
    } else if (rg) {
        dg = nb_expand(nb_reshape(nb_cast(g, gr->dtype), NB_SHAPE(1, w->shape[0], 1, 1)), nb_shape(gr), 4);
    }
    if (rg) gin[2] = y && dg ? nb__relu_grad(y, dg) : dg;
    return rg && !gin[2] ? nb_last_status() : NB_OK;
}
