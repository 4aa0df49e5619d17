/*
 * grad.c — the reverse-mode transforms of a Func: grad, value_and_grad and
 * vjp.  Each traces a new graph that replays f and appends the backward
 * nodes of nb_graph_grad (the eager tape's derivative rules) for the loss
 * (f's output 0), or for sum_out <out, ct_out> when cotangents are given.
 */
#include "transform.h"

typedef enum { G_GRAD, G_VALUE_AND_GRAD, G_VJP } grad_mode;

typedef struct grad_ctx {
    nb__tctx t;
    grad_mode mode;
} grad_ctx;

static nb_status grad_body(nb_graph *g, void *vctx, void *meta) {
    (void)meta;
    const grad_ctx *gc = vctx;
    const nb__tctx *c = &gc->t;
    const nb_graph *f = c->f;
    grad_mode mode = gc->mode;
    for (int i = 0; i < c->n; i++) {
        const nb_gnode *nd = &f->nodes[c->ids[i]];
        if (!nb_dtype_is_float(nd->out[0].dtype))
            return nb__error(NB_ERR_DTYPE, "%s: '%s' of Func '%s' has dtype %s; gradients need a float input", c->op,
                             nd->name, f->name, nb_dtype_name(nd->out[0].dtype));
    }
    const nb_meta *m0 = nb__gval_meta(f, f->outputs[0]);
    if (mode != G_VJP && !nb_dtype_is_float(m0->dtype))
        return nb__error(NB_ERR_DTYPE, "%s: output '%s' of Func '%s' has dtype %s; grad needs a float output", c->op,
                         f->output_names[0], f->name, nb_dtype_name(m0->dtype));
    nb__replay r;
    nb_status st = nb__replay_init(&r, f, false, c->op);
    if (st != NB_OK) return st;
    nb_tensor *ct[f->n_outputs > 0 ? f->n_outputs : 1];
    if ((st = nb__replay_declare_inputs(&r, g)) == NB_OK && mode == G_VJP)
        for (int i = 0; st == NB_OK && i < f->n_outputs; i++) {
            const nb_meta *m = nb__gval_meta(f, f->outputs[i]);
            ct[i] = nb_dtype_is_float(m->dtype) ? nb__input_prefixed(g, "ct_", f->output_names[i], m) : NULL;
            if (nb_dtype_is_float(m->dtype) && !ct[i]) st = nb_last_status();
        }
    if (st == NB_OK) st = nb__replay_run(&r, NULL, NULL);
    nb_tensor *loss = NULL;
    if (st == NB_OK && mode != G_VJP) {
        loss = nb__replay_output(&r, 0);
        bool one = true;
        for (int d = 0; d < loss->ndim; d++) one &= loss->shape[d] == 1;
        if (!one)
            st = nb__error(NB_ERR_SHAPE, "%s: output '%s' of Func '%s' has shape %s; grad needs one element "
                           "(use vjp for other outputs)", c->op, f->output_names[0], f->name, NB_SHAPE_STR(loss));
    }
    for (int i = 0; st == NB_OK && mode == G_VJP && i < f->n_outputs; i++) {
        if (!ct[i]) continue;
        if (!(loss = nb__plus(loss, nb__inner(nb__replay_output(&r, i), ct[i])))) st = nb_last_status();
    }
    if (st == NB_OK && !loss)
        st = nb__error(NB_ERR_DTYPE, "%s: Func '%s' has no float output to pull back", c->op, f->name);
    nb_tensor *wrt[c->n], *grads[c->n];
    for (int i = 0; i < c->n; i++) wrt[i] = r.val[nb__slot((nb_gval){c->ids[i], 0})];
    if (st == NB_OK) st = nb_graph_grad(loss, c->n, wrt, grads);
    for (int i = 0; st == NB_OK && mode != G_GRAD && i < f->n_outputs; i++)
        st = nb_graph_output(g, f->output_names[i], nb__replay_output(&r, i));
    for (int i = 0; st == NB_OK && i < c->n; i++) st = nb__output_prefixed(g, "grad_", f->nodes[c->ids[i]].name, grads[i]);
    nb__replay_free(&r);
    return st;
}

static nb_graph *reverse(const char *op, nb_graph *f, int n, const char *const *wrt, grad_mode mode) {
    grad_ctx c = {.mode = mode};
    return nb__transform(op, f, n, wrt, true, &c.t, grad_body);
}

nb_graph *nb_func_grad(nb_graph *f, int n, const char *const *wrt) { return reverse("grad", f, n, wrt, G_GRAD); }

nb_graph *nb_func_value_and_grad(nb_graph *f, int n, const char *const *wrt) {
    return reverse("value_and_grad", f, n, wrt, G_VALUE_AND_GRAD);
}

nb_graph *nb_func_vjp(nb_graph *f, int n, const char *const *wrt) { return reverse("vjp", f, n, wrt, G_VJP); }
