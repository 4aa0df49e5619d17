/*
 * jvp.c — forward mode on a Func: jvp, and hvp as jvp of grad.  The tangent
 * of every op comes from its VJP rule by transposition: with u a stand-in
 * cotangent of the outputs, the pulled-back cotangents g(u) = J^T u are
 * linear in u, and J t = d/du sum <g(u), t>.  Both passes are nb_graph_grad
 * (the tape's rules), so every op with a derivative rule has a tangent with
 * no table column of its own; the compiler's folding and dead-code passes
 * drop what the stand-in u (zeros) leaves behind.
 */
#include "transform.h"

#include <stdio.h>

/* The tangents of f's float outputs (tan[i], NULL for the others) for the primal values x and
 * tangents t of the n names, built in g. */
static nb_status push_forward(nb_graph *g, const nb__replay *r, int n, nb_tensor *const *x, nb_tensor *const *t,
                              nb_tensor **tan) {
    const nb_graph *f = r->src;
    nb_tensor *u[f->n_outputs], *loss = NULL;
    int nu = 0;
    for (int i = 0; i < f->n_outputs; i++) {
        nb_tensor *y = nb__replay_output(r, i);
        tan[i] = NULL;
        if (!nb_dtype_is_float(y->dtype)) continue;
        /* a distinct stand-in per output (a fresh constant each), never merged while tracing */
        nb_tensor *ui = nb_expand(nb_graph_scalar(g, 0.0, y->dtype), y->shape, y->ndim);
        if (!ui || !(loss = nb__plus(loss, nb__inner(y, ui)))) return nb_last_status();
        u[nu++] = ui;
    }
    if (!loss) return nb__error(NB_ERR_DTYPE, "jvp: Func '%s' has no float output to push forward", f->name);
    nb_tensor *gx[n], *s = NULL;
    nb_status st = nb_graph_grad(loss, n, x, gx);
    for (int i = 0; st == NB_OK && i < n; i++)
        if (!(s = nb__plus(s, nb__inner(gx[i], t[i])))) st = nb_last_status();
    nb_tensor *ju[nu > 0 ? nu : 1];
    if (st == NB_OK) st = nb_graph_grad(s, nu, u, ju);
    for (int i = 0, k = 0; st == NB_OK && i < f->n_outputs; i++)
        if (nb_dtype_is_float(nb__replay_output(r, i)->dtype)) tan[i] = ju[k++];
    return st;
}

static nb_status jvp_body(nb_graph *g, void *vctx, void *meta) {
    (void)meta;
    const nb__tctx *c = vctx;
    const nb_graph *f = c->f;
    nb__replay r;
    nb_status st = nb__replay_init(&r, f, false, c->op);
    if (st != NB_OK) return st;
    nb_tensor *t[c->n], *x[c->n], *tan[f->n_outputs];
    if ((st = nb__replay_declare_inputs(&r, g)) == NB_OK)
        for (int i = 0; st == NB_OK && i < c->n; i++) {
            const nb_gnode *nd = &f->nodes[c->ids[i]];
            if (!nb_dtype_is_float(nd->out[0].dtype))
                st = nb__error(NB_ERR_DTYPE, "%s: '%s' of Func '%s' has dtype %s; tangents need a float input",
                               c->op, nd->name, f->name, nb_dtype_name(nd->out[0].dtype));
            else if (!(t[i] = nb__input_prefixed(g, "tangent_", nd->name, &nd->out[0])))
                st = nb_last_status();
        }
    if (st == NB_OK) st = nb__replay_run(&r, NULL, NULL);
    for (int i = 0; i < c->n; i++) x[i] = r.val[nb__slot((nb_gval){c->ids[i], 0})];
    if (st == NB_OK) st = push_forward(g, &r, c->n, x, t, tan);
    for (int i = 0; st == NB_OK && i < f->n_outputs; i++)
        st = nb_graph_output(g, f->output_names[i], nb__replay_output(&r, i));
    for (int i = 0; st == NB_OK && i < f->n_outputs; i++)
        if (tan[i]) st = nb__output_prefixed(g, "tangent_", f->output_names[i], tan[i]);
    nb__replay_free(&r);
    return st;
}

nb_graph *nb_func_jvp(nb_graph *f, int n, const char *const *wrt) {
    nb__tctx c;
    return nb__transform("jvp", f, n, wrt, true, &c, jvp_body);
}

nb_graph *nb_func_hvp(nb_graph *f, int n, const char *const *wrt) {
    const char *op = "hvp";
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_graph *g = nb_func_grad(f, n, wrt), *j = g ? nb_func_jvp(g, n, wrt) : NULL, *res = NULL;
    if (j) { /* j's outputs: grad_<w> (n), then tangent_grad_<w> (n) */
        int idx[n];
        for (int i = 0; i < n; i++) idx[i] = n + i;
        char name[256];
        snprintf(name, sizeof name, "hvp(%s)", f->name);
        res = nb__func_select(name, j, n, idx, "hvp_", wrt);
    }
    nb_graph_release(g);
    nb_graph_release(j);
    nb__own_end(&fr, op, res ? NB_OK : nb_last_status());
    return res;
}
