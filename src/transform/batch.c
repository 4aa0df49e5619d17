/*
 * batch.c — the batching rule of every op kind (vmap): given an op node and
 * its replayed inputs with their batch axes (-1: unbatched), apply the op to
 * the whole batch at once and say where the batch axis of each result is.
 * Batched operands are brought to axis 0 by a permute (a view) and the
 * op's axis attributes shift by one; unbatched operands broadcast against
 * the batch (elementwise) or are expanded as views, never copied per
 * example.  Random ops draw once per example.  Per-op facts here are axis
 * shifts of the op table's attributes (ops.h and the infer rules in src/ops).
 */
#include "transform.h"
#include "../autograd/vjp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* t with its batch axis b moved to the front (a view; t itself for b == 0). */
static nb_tensor *front(nb_tensor *t, int b) {
    if (b <= 0) return t;
    int perm[NB_MAX_DIMS], k = 0;
    perm[k++] = b;
    for (int d = 0; d < t->ndim; d++)
        if (d != b) perm[k++] = d;
    return nb_permute(t, perm, t->ndim);
}

/* t (batch axis b, or -1) as a tensor with the batch of size B in front: unbatched ones are
 * expanded (a view with stride 0). */
static nb_tensor *batched_front(nb_tensor *t, int b, int64_t B) {
    if (b >= 0) return front(t, b);
    int64_t shape[NB_MAX_DIMS];
    shape[0] = B;
    for (int d = 0; d < t->ndim; d++) shape[d + 1] = t->shape[d];
    return nb_expand(nb_unsqueeze(t, 0), shape, t->ndim + 1);
}

/* t (batch in front) with k size-1 axes inserted after the batch axis. */
static nb_tensor *lift(nb_tensor *t, int k) {
    for (int i = 0; t && i < k; i++) t = nb_unsqueeze(t, 1);
    return t;
}

static int64_t batch_size(const nb_gnode *nd, nb_tensor *const *in, const int *bin) {
    for (int k = 0; k < nd->n_in; k++)
        if (in[k] && bin[k] >= 0) return in[k]->shape[bin[k]];
    NB_ASSERT(0); /* called only with a batched input */
}

/* Elementwise with broadcasting (BINARY, WHERE; n operands): batched operands in front, raised
 * to the largest per-example rank so that the batch axis lines up. */
static nb_status elementwise(int n, nb_tensor *const *in, const int *bin, nb_tensor **x) {
    int rmax = 0;
    for (int k = 0; k < n; k++) {
        int r = in[k]->ndim - (bin[k] >= 0);
        if (r > rmax) rmax = r;
    }
    for (int k = 0; k < n; k++) {
        x[k] = in[k];
        if (bin[k] >= 0 && !(x[k] = lift(front(in[k], bin[k]), rmax - (in[k]->ndim - 1)))) return nb_last_status();
    }
    return NB_OK;
}

/* matmul with NumPy's rules: vectors become matrices, batched operands go in front and are
 * raised so that the batch axis lines up with the other's batch dims; then the vector axes
 * are dropped again. */
static nb_tensor *batched_matmul(nb_tensor *a, int ba, nb_tensor *b, int bb) {
    int ra = a->ndim - (ba >= 0), rb = b->ndim - (bb >= 0);
    bool av = ra == 1, bv = rb == 1;
    if (ba >= 0) a = front(a, ba);
    if (bb >= 0) b = front(b, bb);
    if (a && av) a = nb_unsqueeze(a, ba >= 0 ? 1 : 0);
    if (b && bv) b = nb_unsqueeze(b, -1);
    int ma = ra > 2 ? ra : 2, mb = rb > 2 ? rb : 2, r = ma > mb ? ma : mb;
    if (a && ba >= 0) a = lift(a, r - ma);
    if (b && bb >= 0) b = lift(b, r - mb);
    nb_tensor *y;
    if (a && b && ba >= 0 && bb < 0 && b->ndim == 2) {
        /* a shared matrix: the batch folds into a's rows, one GEMM instead of one per example */
        int64_t rows[2] = {-1, a->shape[a->ndim - 1]}, shape[NB_MAX_DIMS];
        memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
        shape[a->ndim - 1] = b->shape[1];
        y = nb_reshape(nb_matmul(nb_reshape(a, rows, 2), b), shape, a->ndim);
    } else
        y = a && b ? nb_matmul(a, b) : NULL;
    if (y && av) y = nb_squeeze(y, -2);
    if (y && bv) y = nb_squeeze(y, -1);
    return y;
}

/* The window ops (unfold, fold, max_pool2d, max_unpool2d), attention and the convolution kernels:
 * the batch folded into the leading dim N of their operands and results, but for the unbatched
 * operands in the mask `shared` (a convolution's weight and bias), passed as they are. */
static nb_status fold_into_n(const nb_gnode *nd, nb_tensor *const *in, const int *bin, int64_t B, unsigned shared,
                             nb_tensor **out) {
    nb_tensor *x[8];
    for (int k = 0; k < nd->n_in; k++)
        if (!(x[k] = in[k] && (shared >> k & 1) ? in[k] : nb_flatten(batched_front(in[k], bin[k], B), 0, 1)))
            return nb_last_status();
    nb_status st = nb__replay_apply(nd, x, out);
    for (int j = 0; st == NB_OK && j < nd->n_out; j++) {
        int64_t shape[NB_MAX_DIMS];
        shape[0] = B;
        for (int d = 0; d < nd->out[j].ndim; d++) shape[d + 1] = nd->out[j].shape[d];
        if (!(out[j] = nb_reshape(out[j], shape, nd->out[j].ndim + 1))) st = nb_last_status();
    }
    return st;
}

/* An op without a batching rule (the QUANT ops: their scales cover whole tensors or rows; a
 * convolution kernel with batched weights): run once per example and the results stacked, as
 * torch.vmap's fallback for such ops.  B must be concrete. */
static nb_status per_example(const nb_gnode *nd, nb_tensor *const *in, const int *bin, int64_t B, nb_tensor **out) {
    if (nb__dim_sym(B) || B > INT_MAX)
        return nb__error(NB_ERR_SHAPE, "vmap: %s runs once per example (it has no batching rule), which needs a "
                         "concrete batch size", nb__ops[nd->op].name);
    if (B == 0) { /* no example: empty results of the right shape (which may hold a symbolic dim: a
                   * zero constant expanded, as nb_zeros_like makes for a traced tensor) */
        for (int j = 0; j < nd->n_out; j++) {
            int64_t shape[NB_MAX_DIMS + 1] = {0};
            memcpy(shape + 1, nd->out[j].shape, sizeof(int64_t) * (size_t)nd->out[j].ndim);
            nb_tensor *z = nb__own(nb__full_on(NULL, 0, 0, nd->out[j].dtype, in[0]->storage->device));
            if (!z || !(out[j] = nb_expand(z, shape, nd->out[j].ndim + 1))) return nb_last_status();
        }
        return NB_OK;
    }
    nb_tensor **parts = malloc(sizeof(nb_tensor *) * (size_t)(B * nd->n_out + 1));
    if (!parts) return nb__error(NB_ERR_OOM, "vmap: out of memory");
    nb_status st = NB_OK;
    for (int64_t b = 0; b < B && st == NB_OK; b++) {
        nb_tensor *x[8], *r[NB_MAX_OUTS];
        for (int k = 0; k < nd->n_in; k++) x[k] = bin[k] >= 0 ? nb_select(in[k], bin[k], b) : in[k];
        st = nb__replay_apply(nd, x, r);
        for (int j = 0; st == NB_OK && j < nd->n_out; j++) parts[j * B + b] = r[j];
    }
    for (int j = 0; st == NB_OK && j < nd->n_out; j++)
        if (!(out[j] = nb_stack(parts + j * B, (int)B, 0))) st = nb_last_status();
    free(parts);
    return st;
}

/* Apply nd with its attributes adjusted by the caller (a) to x. */
static nb_status apply_with(const nb_gnode *nd, const nb_attrs *a, nb_tensor *const *x, nb_tensor **out) {
    nb_gnode c = *nd;
    c.attrs = *a;
    return nb__replay_apply(&c, x, out);
}

/* A random draw: one per example even when nothing batched reaches it (as running f once per
 * example would draw; torch.func.vmap's randomness="different"): RAND / RANDN draw the batch's
 * shape, BERNOULLI's probabilities are expanded to the batch first. */
static nb_status draw_per_example(const nb_gnode *nd, nb_tensor *const *in, const int *bin, int64_t B,
                                  nb_tensor **out) {
    nb_attrs a = nd->attrs;
    nb_tensor *x[1];
    if (nd->n_in == 0) {
        for (int d = a.shape_ndim; d > 0; d--) a.shape[d] = a.shape[d - 1];
        a.shape[0] = B;
        a.shape_ndim++;
    } else if (!(x[0] = batched_front(in[0], bin[0], B)))
        return nb_last_status();
    return apply_with(nd, &a, x, out);
}

nb_status nb__batch_rule(void *ctx, const nb_gnode *nd, nb_tensor *const *in, const int *bin, nb_tensor **out,
                         int *bout) {
    if (nb__ops[nd->op].kind == NB_KIND_RANDOM) {
        bout[0] = 0;
        return draw_per_example(nd, in, bin, *(const int64_t *)ctx, out);
    }
    bool any = false;
    for (int k = 0; k < nd->n_in; k++) any |= in[k] && bin[k] >= 0;
    for (int j = 0; j < nd->n_out; j++) bout[j] = any ? 0 : -1;
    if (!any) return nb__replay_apply(nd, in, out);
    int64_t B = batch_size(nd, in, bin);
    nb_attrs a = nd->attrs;
    nb_tensor *x[8];
    for (int k = 0; k < nd->n_in; k++) x[k] = in[k];
    nb_status st = NB_OK;
    switch (nb__ops[nd->op].kind) {
    case NB_KIND_UNARY:
    case NB_KIND_COPY:
        bout[0] = bin[0]; /* layout-preserving: the batch axis stays where it is */
        return nb__replay_apply(nd, x, out);
    case NB_KIND_BINARY:
    case NB_KIND_WHERE:
        return (st = elementwise(nd->n_in, in, bin, x)) == NB_OK ? nb__replay_apply(nd, x, out) : st;
    case NB_KIND_REDUCE:
    case NB_KIND_ARGREDUCE:
    case NB_KIND_SCAN:
    case NB_KIND_SIZE:
        for (int i = 0; i < a.naxes; i++) a.axes[i]++;
        if (!(x[0] = front(in[0], bin[0]))) return nb_last_status();
        if (nb__ops[nd->op].kind == NB_KIND_SIZE) bout[0] = -1; /* a per-example count */
        return apply_with(nd, &a, x, out);
    case NB_KIND_MATMUL: { /* addmm: the batched product, then its addend added as an elementwise operand
                            * (and relu, NB_SUB_RELU) */
        nb_tensor *y = batched_matmul(in[0], bin[0], in[1], bin[1]), *yc[2];
        int by[2] = {bin[0] >= 0 || bin[1] >= 0 ? 0 : -1, bin[2]};
        if (y && nd->op == NB_OP_ADDMM)
            y = elementwise(2, (nb_tensor *[]){y, in[2]}, by, yc) == NB_OK ? nb_add(yc[0], yc[1]) : NULL;
        if (y && nd->op == NB_OP_ADDMM && (nd->attrs.sub & NB_SUB_RELU)) y = nb_relu(y);
        return (out[0] = y) ? NB_OK : nb_last_status();
    }
    case NB_KIND_LINALG: { /* matrices batched over their leading dims, which broadcast as elementwise
                              * operands do: batched operands in front, raised to the same batch rank */
        int r = 0;
        for (int k = 0; k < nd->n_in; k++)
            if (in[k]->ndim - (bin[k] >= 0) - 2 > r) r = in[k]->ndim - (bin[k] >= 0) - 2;
        for (int k = 0; k < nd->n_in; k++)
            if (bin[k] >= 0 && !(x[k] = lift(front(in[k], bin[k]), r - (in[k]->ndim - 3)))) return nb_last_status();
        return nb__replay_apply(nd, x, out);
    }
    case NB_KIND_GATHER:
    case NB_KIND_SCATTER_ADD:
    case NB_KIND_CAT:
        a.axes[0]++;
        for (int k = 0; k < nd->n_in; k++)
            if (!(x[k] = batched_front(in[k], bin[k], B))) return nb_last_status();
        return apply_with(nd, &a, x, out);
    case NB_KIND_PAD: /* widths count from the last axis */
        return (x[0] = front(in[0], bin[0])) ? nb__replay_apply(nd, x, out) : nb_last_status();
    case NB_KIND_WINDOW:
    case NB_KIND_ATTENTION: /* [N, ...] operands: the batch folds into N */
        return fold_into_n(nd, in, bin, B, 0, out);
    case NB_KIND_CONV: { /* images, gradients and results fold into N where the weight (and
                          * CONVOLUTION's bias) is shared; else once per example.  The bias gradient
                          * of CONVOLUTION_BACKWARD (which graphs hold alone) sums over the images:
                          * g, masked by y, summed over all but the batch and channel axes */
        if (nd->op == NB_OP_CONVOLUTION_BACKWARD && (a.sub & 4)) {
            NB_ASSERT(nd->n_out == 1);
            nb_tensor *g = batched_front(in[2], bin[2], B);
            if (g && nd->n_in > 3) {
                nb_tensor *y = batched_front(in[3], bin[3], B);
                g = y ? nb__relu_grad(y, g) : NULL;
            }
            return (out[0] = g ? nb_sum(g, (int[]){1, 3, 4}, 3, false) : NULL) ? NB_OK : nb_last_status();
        }
        unsigned shared = nd->op == NB_OP_CONVOLUTION ? 6u : 2u;
        bool fold = true;
        for (int k = 0; k < nd->n_in; k++) fold &= !(shared >> k & 1) || !in[k] || bin[k] < 0;
        return fold ? fold_into_n(nd, in, bin, B, shared, out) : per_example(nd, in, bin, B, out);
    }
    case NB_KIND_QUANT:
        return per_example(nd, in, bin, B, out);
    case NB_KIND_VIEW:
    case NB_KIND_VIEW_GRAD: {
        int op = nb__ops[nd->op].kind == NB_KIND_VIEW_GRAD ? a.sub : (int)nd->op;
        if (nd->op == NB_OP_DETACH) {
            bout[0] = bin[0];
            return nb__replay_apply(nd, x, out);
        }
        NB_ASSERT(nd->op != NB_OP_AS_STRIDED); /* refused while tracing: never a graph node */
        if (!(x[0] = front(in[0], bin[0]))) return nb_last_status();
        if (nd->op == NB_OP_EXPAND && !(x[0] = lift(x[0], a.shape_ndim - (in[0]->ndim - 1)))) return nb_last_status();
        if (nd->op == NB_OP_RESHAPE || nd->op == NB_OP_EXPAND || nd->op == NB_OP_VIEW_GRAD) {
            /* a target (or base) shape: the batch in front */
            for (int d = a.shape_ndim; d > 0; d--) a.shape[d] = a.shape[d - 1];
            a.shape[0] = B;
            a.shape_ndim++;
        }
        if (op == NB_OP_PERMUTE) {
            for (int d = a.naxes; d > 0; d--) a.axes[d] = a.axes[d - 1] + 1;
            a.axes[0] = 0;
            a.naxes++;
        } else if (op == NB_OP_SLICE || op == NB_OP_SELECT) {
            a.i[0]++;
        } else if (op == NB_OP_DIAGONAL) {
            a.i[1]++;
            a.i[2]++;
        }
        return apply_with(nd, &a, x, out);
    }
    default:
        NB_ASSERT(0); /* COMPOSITE ops are never graph nodes (their parts are) */
    }
}
