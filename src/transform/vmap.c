/*
 * vmap.c — the vmap transform's driver: declare the batched inputs with
 * their batch axis, replay f through the batching rules (batch.c), then move
 * each output's batch axis to its out_axes entry (broadcasting outputs that
 * no batched input reaches).
 */
#include "transform.h"

typedef struct vmap_ctx {
    nb__tctx t;
    const int *in_axes;
    int64_t batch;
    const int *out_axes;
} vmap_ctx;

/* axis in [-r-1, r] (a position among r + 1 axes) normalized; -1 with NB_ERR_AXIS. */
static int position(const char *what, const char *name, int axis, int r) {
    if (axis >= -r - 1 && axis <= r) return axis < 0 ? axis + r + 1 : axis;
    nb__error(NB_ERR_AXIS, "vmap: %s axis %d of '%s' (rank %d) is outside [%d, %d]", what, axis, name, r, -r - 1, r);
    return -1;
}

/* Declare f's inputs in g, the named ones with the batch axis inserted. */
static nb_status declare(nb_graph *g, const vmap_ctx *c, nb__replay *r) {
    for (int32_t id = 0; id < c->t.f->n; id++) {
        const nb_gnode *nd = &c->t.f->nodes[id];
        if (nd->kind != NB_GNODE_INPUT) continue;
        nb_meta m = nd->out[0];
        int ax = -1;
        for (int i = 0; i < c->t.n; i++)
            if (c->t.ids[i] == id && c->in_axes[i] != NB_UNBATCHED &&
                (ax = position("in_axes", nd->name, c->in_axes[i], m.ndim)) < 0)
                return nb_last_status();
        if (ax >= 0) {
            if (m.ndim == NB_MAX_DIMS)
                return nb__error(NB_ERR_SHAPE, "vmap: input '%s' has rank %d already (the most is %d)", nd->name,
                                 m.ndim, NB_MAX_DIMS);
            for (int d = m.ndim; d > ax; d--) m.shape[d] = m.shape[d - 1];
            m.shape[ax] = c->batch;
            m.ndim++;
        }
        nb_tensor *t = nb_graph_input(g, nd->name, m.dtype, m.shape, m.ndim);
        if (!t) return nb_last_status();
        r->val[nb__slot((nb_gval){id, 0})] = t;
        r->bdim[nb__slot((nb_gval){id, 0})] = ax;
    }
    return NB_OK;
}

/* t (batch axis b, -1: none) with the batch at axis `to` of rank r + 1. */
static nb_tensor *place(nb_tensor *t, int b, int to, int64_t batch) {
    if (b < 0) {
        int64_t shape[NB_MAX_DIMS];
        for (int d = 0, k = 0; d <= t->ndim; d++) shape[d] = d == to ? batch : t->shape[k++];
        return nb_expand(nb_unsqueeze(t, to), shape, t->ndim + 1);
    }
    if (b == to) return t;
    int perm[NB_MAX_DIMS], k = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (d == b) continue;
        if (k == to) perm[k++] = b;
        perm[k++] = d;
    }
    if (k == to) perm[k++] = b;
    return nb_permute(t, perm, t->ndim);
}

static nb_status vmap_body(nb_graph *g, void *vctx, void *meta) {
    (void)meta;
    const vmap_ctx *c = vctx;
    const nb_graph *f = c->t.f;
    if (!c->in_axes) return nb__error(NB_ERR_NULL, "vmap: in_axes is NULL");
    if (c->batch < 0 && !nb__dim_sym(c->batch))
        return nb__error(NB_ERR_ARG, "vmap: batch size %lld is negative (give a size or a symbolic dim)",
                         (long long)c->batch);
    bool carried = false; /* does an input of the new Func carry a symbolic batch size? */
    for (int i = 0; i < c->t.n; i++) carried |= c->in_axes[i] != NB_UNBATCHED;
    for (int32_t id = 0; !carried && nb__dim_sym(c->batch) && id < f->n; id++)
        for (int d = 0; f->nodes[id].kind == NB_GNODE_INPUT && d < f->nodes[id].out[0].ndim; d++)
            carried |= f->nodes[id].out[0].shape[d] == c->batch;
    if (nb__dim_sym(c->batch) && !carried) {
        char s[64];
        return nb__error(NB_ERR_ARG, "vmap: the batch size '%s' is symbolic but no input is batched or has it, so "
                         "nothing would bind it", nb__dim_str(s, c->batch));
    }
    nb__replay r;
    nb_status st = nb__replay_init(&r, f, true, "vmap");
    if (st != NB_OK) return st;
    if ((st = declare(g, c, &r)) == NB_OK) st = nb__replay_run(&r, nb__batch_rule, (void *)&c->batch);
    for (int i = 0; st == NB_OK && i < f->n_outputs; i++) {
        nb_tensor *t = nb__replay_output(&r, i);
        int b = r.bdim[nb__slot(f->outputs[i])], rank = t->ndim - (b >= 0);
        int to = position("out_axes", f->output_names[i], c->out_axes ? c->out_axes[i] : 0, rank);
        if (to < 0 || !(t = place(t, b, to, c->batch))) st = nb_last_status();
        else st = nb_graph_output(g, f->output_names[i], t);
    }
    nb__replay_free(&r);
    return st;
}

nb_graph *nb_func_vmap(nb_graph *f, int n, const char *const *names, const int *in_axes, int64_t batch,
                       const int *out_axes) {
    vmap_ctx c = {.in_axes = in_axes, .batch = batch, .out_axes = out_axes};
    return nb__transform("vmap", f, n, names, false, &c.t, vmap_body);
}
