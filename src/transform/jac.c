/*
 * jac.c — full Jacobians of a Func's first output (jax.jacfwd, jax.jacrev)
 * as compositions of the other transforms: jacfwd pushes the identity basis
 * of each input through vmap(jvp), jacrev pulls the basis of the output back
 * through vmap(vjp); either result is reshaped to out.shape ++ in.shape.
 */
#include "transform.h"

#include <stdio.h>

typedef struct jac_ctx {
    nb__tctx t;
    bool forward;
} jac_ctx;

static int64_t count(const nb_meta *m) {
    int64_t k = 1;
    for (int d = 0; d < m->ndim; d++) k *= m->shape[d];
    return k;
}

/* The identity basis of a value of metadata m: [numel, *shape], concrete, scoped. */
static nb_tensor *basis(const nb_meta *m) {
    int64_t k = count(m), shape[NB_MAX_DIMS];
    shape[0] = k;
    for (int d = 0; d < m->ndim; d++) shape[d + 1] = m->shape[d];
    return nb_reshape(nb_eye(k, k, m->dtype), shape, m->ndim + 1);
}

/* rows [k, *a] -> [*a, k] when `out_first` is false (jacfwd's tangents: [W, *O] -> [*O, W]),
 * then reshaped to O ++ W. */
static nb_tensor *arrange(nb_tensor *rows, bool forward, const nb_meta *o, const nb_meta *w) {
    if (forward && rows) {
        int perm[NB_MAX_DIMS];
        for (int d = 1; d < rows->ndim; d++) perm[d - 1] = d;
        perm[rows->ndim - 1] = 0;
        rows = nb_permute(rows, perm, rows->ndim);
    }
    int64_t shape[2 * NB_MAX_DIMS];
    for (int d = 0; d < o->ndim; d++) shape[d] = o->shape[d];
    for (int d = 0; d < w->ndim; d++) shape[o->ndim + d] = w->shape[d];
    return rows ? nb_reshape(rows, shape, o->ndim + w->ndim) : NULL;
}

/* Output 0 and every name concrete, float, and the Jacobian within NB_MAX_DIMS axes. */
static nb_status check_shapes(const char *op, const nb_graph *f, int n, const int32_t *ids) {
    const nb_meta *o = nb__gval_meta(f, f->outputs[0]);
    if (!nb_dtype_is_float(o->dtype))
        return nb__error(NB_ERR_DTYPE, "%s: output '%s' of Func '%s' is %s, not float", op, f->output_names[0], f->name,
                         nb_dtype_name(o->dtype));
    for (int i = -1; i < n; i++) {
        const nb_meta *m = i < 0 ? o : &f->nodes[ids[i]].out[0];
        const char *name = i < 0 ? f->output_names[0] : f->nodes[ids[i]].name;
        for (int d = 0; d < m->ndim; d++)
            if (nb__dim_sym(m->shape[d]))
                return nb__error(NB_ERR_SHAPE, "%s: '%s' has the symbolic shape %s; a Jacobian needs concrete sizes",
                                 op, name, NB_DIMS_STR(m->shape, m->ndim));
        if (i >= 0 && o->ndim + m->ndim > NB_MAX_DIMS)
            return nb__error(NB_ERR_SHAPE, "%s: the Jacobian of '%s' %s by '%s' %s would have more than %d axes", op,
                             f->output_names[0], NB_DIMS_STR(o->shape, o->ndim), name, NB_DIMS_STR(m->shape, m->ndim),
                             NB_MAX_DIMS);
    }
    return NB_OK;
}

/* The name of the k-th input of g (inputs in their order). */
static const char *input_name(const nb_graph *g, int k) {
    for (int32_t id = 0; id < g->n; id++)
        if (g->nodes[id].kind == NB_GNODE_INPUT && k-- == 0) return g->nodes[id].name;
    NB_ASSERT(0); /* the transforms declare f's inputs first, then their own */
}

/* The vmap'd transform of f whose outputs give the Jacobian by name j: forward, vmap(jvp) over
 * its tangent input (its last input); reverse, vmap(vjp) over the cotangent of output 0 (the
 * first input after f's nin).  Its inputs: f's, then the tangent or the cotangents. */
static nb_graph *mapped_of(const jac_ctx *c, int j, int nin) {
    nb_graph *f = c->t.f;
    const nb_meta *m = c->forward ? &f->nodes[c->t.ids[j]].out[0] : nb__gval_meta(f, f->outputs[0]);
    const char *names[c->t.n];
    for (int i = 0; i < c->t.n; i++) names[i] = f->nodes[c->t.ids[i]].name;
    nb_graph *d = c->forward ? nb_func_jvp(f, 1, &names[j]) : nb_func_vjp(f, c->t.n, names);
    const char *batched = d ? input_name(d, nin) : NULL;
    nb_graph *v = d ? nb_func_vmap(d, 1, &batched, (const int[]){0}, count(m), NULL) : NULL;
    nb_graph_release(d);
    return v;
}

static nb_status jac_body(nb_graph *g, void *vctx, void *meta) {
    (void)meta;
    const jac_ctx *c = vctx;
    const nb_graph *f = c->t.f;
    const nb_meta *o = nb__gval_meta(f, f->outputs[0]);
    nb_status st = check_shapes(c->t.op, f, c->t.n, c->t.ids);
    if (st != NB_OK) return st;
    int nin = 0;
    for (int32_t id = 0; id < f->n; id++) nin += f->nodes[id].kind == NB_GNODE_INPUT;
    /* arguments: f's inputs, then the basis (and, reverse, zero cotangents of the other outputs),
     * named as the mapped Func names its inputs */
    const char *names[nin + f->n_outputs + 1];
    nb_tensor *args[nin + f->n_outputs + 1];
    for (int32_t id = 0, k = 0; id < f->n; id++) {
        const nb_gnode *nd = &f->nodes[id];
        if (nd->kind != NB_GNODE_INPUT) continue;
        names[k] = nd->name;
        if (!(args[k++] = nb_graph_input(g, nd->name, nd->out[0].dtype, nd->out[0].shape, nd->out[0].ndim)))
            return nb_last_status();
    }
    for (int j = 0; st == NB_OK && j < (c->forward ? c->t.n : 1); j++) {
        nb_graph *m = mapped_of(c, j, nin); /* traced while g's trace waits below it */
        if (!m) return nb_last_status();
        int k = nin;
        if (c->forward) {
            names[k] = input_name(m, k);
            if (!(args[k++] = basis(&f->nodes[c->t.ids[j]].out[0]))) st = nb_last_status();
        } else
            for (int i = 0; st == NB_OK && i < f->n_outputs; i++) {
                const nb_meta *mi = nb__gval_meta(f, f->outputs[i]);
                if (!nb_dtype_is_float(mi->dtype)) continue;
                names[k] = input_name(m, k);
                args[k] = i == 0 ? basis(mi) : nb_expand(nb_graph_scalar(g, 0.0, mi->dtype), mi->shape, mi->ndim);
                if (!args[k++]) st = nb_last_status();
            }
        nb_tensor *outs[m->n_outputs];
        if (st == NB_OK) st = nb_func_call(m, k, names, args, m->n_outputs, outs);
        /* forward: m's outputs are f's, then the tangents (output 0's first); reverse: f's, then
         * grad_<w> in the order of the names */
        for (int i = 0; st == NB_OK && i < (c->forward ? 1 : c->t.n); i++) {
            const nb_gnode *w = &f->nodes[c->t.ids[c->forward ? j : i]];
            nb_tensor *jac = arrange(outs[f->n_outputs + i], c->forward, o, &w->out[0]);
            st = jac ? nb__output_prefixed(g, "jac_", w->name, jac) : nb_last_status();
        }
        nb_graph_release(m);
    }
    return st;
}

static nb_graph *jacobian(const char *op, nb_graph *f, int n, const char *const *wrt, bool forward) {
    jac_ctx c = {.forward = forward};
    return nb__transform(op, f, n, wrt, true, &c.t, jac_body);
}

nb_graph *nb_func_jacfwd(nb_graph *f, int n, const char *const *wrt) { return jacobian("jacfwd", f, n, wrt, true); }
nb_graph *nb_func_jacrev(nb_graph *f, int n, const char *const *wrt) { return jacobian("jacrev", f, n, wrt, false); }
