/*
 * convolution.c — the CONV kind: conv2d image by image on a backend that has
 * the kernels (backend.h conv2d, conv2d_backward), so that training makes no
 * [N, C*KH*KW, L] columns tensor.  CONVOLUTION is conv2d's forward;
 * CONVOLUTION_BACKWARD its input gradient and per-image weight gradients (as
 * PyTorch's convolution and convolution_backward).  Both compute what conv.c's
 * composite of unfold, matmul and fold computes, bit for bit (values and
 * first-order gradients; see the rules in vjp_conv.c for second derivatives,
 * which agree up to rounding).
 * Both trace: the batch N may be a symbolic dim, every other size is
 * concrete (nb_conv2d runs its composite otherwise).  In a graph, or where
 * the tape records, CONVOLUTION_BACKWARD has one output (dx, dwi or db, with
 * or without relu's mask), so that every gradient node has the derivative
 * rule of its one result; an eager backward pass that records nothing asks
 * for several at once (vjp_conv.c), and so does a compiled graph once CSE
 * has merged the one-output siblings (pass_cse.c).
 *
 * attrs: i[0..7] the window (nb__window_to_attrs), i[8] the groups.
 * CONVOLUTION:          in {x [N, C, H, W], w [O, C/groups, KH, KW], bias [O] (optional)};
 *                       out {y [N, O, OH, OW]}, relu(y) with sub NB_SUB_RELU.
 * CONVOLUTION_BACKWARD: in {x, w, g [N, O, OH, OW], y [N, O, OH, OW] (with sub NB_SUB_CONVB_RELU:
 *                       g is taken where y, the relu'd forward output, is nonzero)}; sub bit 0: out dx [N, C, H, W], bit 1:
 *                       out dwi [N, groups, O/groups, C/groups*KH*KW] (each image's weight
 *                       gradient, summed over N by the rule), bit 2: out db [O] (the bias
 *                       gradient; where nb__conv_db_in_kernel, backend.h), in that order.
 */
#include "../backend/backend.h"
#include "conv.h"

/* Whether every size of t but its first is concrete (its first may be the symbolic batch). */
static bool sizes_concrete(const nb_tensor *t) { return !nb__dims_any_sym(t->shape + 1, t->ndim - 1); }

static int infer_conv(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    const char *name = nb__ops[op].name;
    nb_tensor *x = in[0], *w = in[1];
    nb_window2d win = nb__window_from_attrs(a);
    int64_t groups = a->i[8];
    for (int i = 0; i < n; i++)
        if (in[i]->dtype != x->dtype || !sizes_concrete(in[i]) || (i == 1 && nb__dim_sym(w->shape[0])) ||
            (op == NB_OP_CONVOLUTION && i == 2 && nb__dim_sym(in[i]->shape[0]))) {
            nb__error(NB_ERR_ARG, "%s: operands of one dtype whose sizes are concrete but the batch (input %d is %s "
                      "%s; conv2d runs its composite otherwise)", name, i, nb_dtype_name(in[i]->dtype), NB_SHAPE_STR(in[i]));
            return -1;
        }
    if (!nb__backend_common(name, in, n)) return -1;
    const nb_backend *be = nb__backend_of(x);
    if (!be->conv2d || (x->dtype != NB_F32 && x->dtype != NB_F64)) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: backend '%s' has no %s convolution kernel", name, be->name,
                  nb_dtype_name(x->dtype));
        return -1;
    }
    /* the shapes were checked by nb_conv2d (conv.c) before it chose this kernel */
    NB_ASSERT(x->ndim == 4 && w->ndim == 4 && groups >= 1 && x->shape[1] == w->shape[1] * groups &&
              w->shape[0] % groups == 0 && w->shape[2] == win.kernel[0] && w->shape[3] == win.kernel[1]);
    int64_t oh = nb__window_out(x->shape[2], win.kernel[0], win.stride[0], win.padding[0], win.dilation[0]);
    int64_t ow = nb__window_out(x->shape[3], win.kernel[1], win.stride[1], win.padding[1], win.dilation[1]);
    if (op == NB_OP_CONVOLUTION) {
        m[0] = (nb_meta){.dtype = x->dtype, .ndim = 4, .shape = {x->shape[0], w->shape[0], oh, ow}};
        return 1;
    }
    NB_ASSERT(in[2]->ndim == 4 && in[2]->shape[0] == x->shape[0] && in[2]->shape[1] == w->shape[0] &&
              in[2]->shape[2] == oh && in[2]->shape[3] == ow && (a->sub & 7) &&
              (n == 4) == ((a->sub & NB_SUB_CONVB_RELU) != 0) && (n < 4 || nb__same_shape(in[3], in[2])) &&
              (!(a->sub & 4) || nb__conv_db_in_kernel(w->shape[0], oh * ow)));
    int k = 0;
    if (a->sub & 1) m[k++] = (nb_meta){.dtype = x->dtype, .ndim = 4, .shape = {x->shape[0], x->shape[1], x->shape[2], x->shape[3]}};
    if (a->sub & 2)
        m[k++] = (nb_meta){.dtype = x->dtype, .ndim = 4,
                           .shape = {x->shape[0], groups, w->shape[0] / groups, w->shape[1] * w->shape[2] * w->shape[3]}};
    if (a->sub & 4) m[k++] = (nb_meta){.dtype = x->dtype, .ndim = 1, .shape = {w->shape[0]}};
    return k;
}

static nb_status exec_conv(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                           nb_tensor **out) {
    const nb_backend *be = nb__backend_of(in[0]);
    nb_window2d win = nb__window_from_attrs(a);
    nb_tensor *t[4] = {NULL}, *r[3];
    nb_status st = nb__exec_begin(in, n, m, nout, t, r);
    if (st == NB_OK && op == NB_OP_CONVOLUTION)
        st = be->conv2d(r[0], t[0], t[1], t[2], &win, a->i[8], (a->sub & NB_SUB_RELU) != 0);
    else if (st == NB_OK) { /* the outputs in sub's bit order */
        nb_tensor *o[3] = {NULL}, **next = r;
        for (int bit = 0; bit < 3; bit++)
            if (a->sub & (1 << bit)) o[bit] = *next++;
        st = be->conv2d_backward(o[0], o[1], o[2], t[0], t[1], t[2], n > 3 ? t[3] : NULL, &win, a->i[8]);
    }
    return nb__exec_end(st, t, n, r, nout, out);
}

const nb_kind_impl nb__kind_conv = {infer_conv, exec_conv};

bool nb__convolution_fits(const nb_tensor *x, const nb_tensor *w, const nb_tensor *b) {
    const nb_backend *be = nb__backend_of(x);
    return be->conv2d && (x->dtype == NB_F32 || x->dtype == NB_F64) && nb__backend_of(w) == be &&
           (!b || nb__backend_of(b) == be) && sizes_concrete(x) && sizes_concrete(w) && !nb__dim_sym(w->shape[0]) &&
           (!b || !nb__dim_sym(b->shape[0]));
}

nb_tensor *nb__convolution(nb_tensor *x, nb_tensor *w, nb_tensor *b, const nb_window2d *win, int64_t groups,
                           bool relu) {
    nb_attrs a = {.sub = relu ? NB_SUB_RELU : 0};
    nb__window_to_attrs(&a, win);
    a.i[8] = groups;
    a.ni = 9;
    return nb__own(nb__apply(NB_OP_CONVOLUTION, (nb_tensor *[]){x, w, b}, b ? 3 : 2, &a));
}
