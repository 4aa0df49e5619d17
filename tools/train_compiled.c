/*
 * train_compiled.c — `nabla train --compiled`: the whole training step
 * (input normalization, forward, cross-entropy, graph gradients, gradient
 * clipping and the SGD / Adam / AdamW update) traced once into one graph
 * with a symbolic batch dim, compiled once, and run at every step; the new
 * parameters and optimizer state are written into the model's tensors
 * (nb_compiled_run_into), so evaluation and checkpoints see them.  Under
 * mpirun the step is two graphs — the weighted loss's gradients, then
 * clipping and the update — with the gradients averaged over the ranks
 * (nb_dist_all_reduce) in between.
 */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { NCOEF = 4 }; /* per-step scalars fed to the graph: see step_coefs() */

struct cli_step {
    nb_graph *g, *gu;   /* the step; data-parallel: its gradients (g) and its update (gu) */
    nb_compiled *c, *cu;
    int n, nstate;      /* parameters; state tensors per parameter (Adam 2, SGD with momentum 1, else 0) */
    nb_tensor **params; /* the model's parameters (retained) */
    nb_tensor **state;  /* n * nstate optimizer state tensors, zeros at the start */
    nb_tensor **outs;   /* 2 + n * (1 + nstate) results of one run */
    char **gnames;      /* data-parallel: the update graph's gradient inputs, "grad.<param>" */
    cli_step_opts o;
    int64_t t;          /* steps taken */
};

static const char *const COEF_NAMES[NCOEF] = {"c0", "c1", "c2", "c3"};

/* The update of one parameter p with gradient g and state s[] (symbolic), coefficients k[]:
 *   Adam(W): k = {step size lr/(1-β1ᵗ), 1/√(1-β2ᵗ), decay 1-lr·wd (AdamW) or 1, unused};
 *            p' = p·decay; g' = g + l2·p'; m = β1 m + (1-β1) g'; v = β2 v + (1-β2) g'²;
 *            p'' = p' - step · m / (√v · k1 + eps)   (torch.optim.Adam / AdamW)
 *   SGD:     k = {lr, keep, take, unused}; g' = g + wd p; b = keep b + take g'; p' = p - lr b
 *            (keep = 0, take = 1 at the first step, as torch's momentum buffer). */
static void update(const cli_step_opts *o, nb_tensor *p, nb_tensor *g, nb_tensor **s, nb_tensor *const *k,
                   nb_tensor **np, nb_tensor **ns) {
    if (o->adam) {
        nb_tensor *pd = o->decoupled ? nb_mul(p, k[2]) : p;
        nb_tensor *gd = !o->decoupled && o->weight_decay != 0 ? nb_add(g, nb_mul(pd, o->weight_decay)) : g;
        ns[0] = nb_add(nb_mul(s[0], o->beta1), nb_mul(gd, 1 - o->beta1));
        ns[1] = nb_add(nb_mul(s[1], o->beta2), nb_mul(nb_square(gd), 1 - o->beta2));
        nb_tensor *den = nb_add(nb_mul(nb_sqrt(ns[1]), k[1]), o->eps);
        *np = nb_sub(pd, nb_mul(k[0], nb_div(ns[0], den)));
        return;
    }
    nb_tensor *gd = o->weight_decay != 0 ? nb_add(g, nb_mul(p, o->weight_decay)) : g;
    nb_tensor *b = gd;
    if (o->momentum != 0) b = ns[0] = nb_add(nb_mul(s[0], k[1]), nb_mul(gd, k[2]));
    *np = nb_sub(p, nb_mul(b, k[0]));
}

/* Scale the gradients to a global 2-norm of at most clip (torch's clip_grad_norm_). */
static void clip_grads(nb_tensor **g, int n, double clip) {
    nb_tensor *total = NULL;
    for (int i = 0; i < n; i++) {
        nb_tensor *sq = nb_sum(nb_square(g[i]), NULL, 0, false);
        total = total ? nb_add(total, sq) : sq;
    }
    nb_tensor *coef = nb_minimum(nb_div(nb_full_like(total, clip), nb_add(nb_sqrt(total), 1e-6)), 1.0);
    for (int i = 0; i < n; i++) g[i] = nb_mul(g[i], coef);
}

/* Into graph g: inputs x, y (and, data-parallel, the loss weight w), the loss, hits and gradients
 * gr[] of the params p[] (bound to the model's tensors); data-parallel, the gradients are outputs. */
static nb_status trace_grads(cli_step *s, nb_graph *g, nb_module *net, const char *model, const cli_geom *geom,
                             const char *const *names, nb_tensor **p, nb_tensor **gr) {
    int64_t B = nb_dim("B");
    nb_tensor *x = nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, geom->height * geom->width));
    nb_tensor *y = nb_graph_input(g, "y", NB_I64, NB_SHAPE(B));
    for (int i = 0; i < s->n; i++) p[i] = nb_graph_param(g, names[i], s->params[i]);
    /* the module's own parameter tensors stand for the params bound to them above */
    nb_tensor *logits = nb_module_forward(net, cli_model_input(model, geom, x));
    nb_tensor *loss = nb_cross_entropy(logits, y, NB_CROSS_ENTROPY_DEFAULTS);
    nb_tensor *wl = s->o.data_parallel && loss ? nb_mul(loss, nb_graph_input(g, "w", NB_F32, NULL, 0)) : loss;
    nb_status st = wl ? nb_graph_grad(wl, s->n, p, gr) : nb_last_status();
    if (st == NB_OK) st = nb_graph_output(g, "loss", loss);
    if (st == NB_OK) st = nb_graph_output(g, "hits", nb_sum(nb_eq(nb_argmax(logits, 1, false), y), NULL, 0, false));
    char nm[256];
    for (int i = 0; i < s->n && st == NB_OK && s->o.data_parallel; i++) {
        snprintf(nm, sizeof nm, "grad.%s", names[i]);
        st = nb_graph_output(g, nm, gr[i]);
    }
    return st;
}

/* Into graph g: clipping and the update of params p[] with gradients gr[] (data-parallel: inputs of
 * g, averaged over the ranks before it runs), the new parameters and state as outputs. */
static nb_status trace_update(cli_step *s, nb_graph *g, const char *const *names, nb_tensor **p, nb_tensor **gr) {
    nb_tensor *k[NCOEF];
    for (int i = 0; i < NCOEF; i++) k[i] = nb_graph_input(g, COEF_NAMES[i], NB_F32, NULL, 0);
    nb_tensor **sv = calloc((size_t)(s->n * s->nstate) + 1, sizeof *sv);
    if (!sv) return NB_ERR_OOM;
    char nm[256];
    for (int i = 0; s->o.data_parallel && i < s->n; i++) {
        snprintf(nm, sizeof nm, "grad.%s", names[i]);
        p[i] = nb_graph_param(g, names[i], s->params[i]);
        gr[i] = nb_graph_input(g, nm, nb_dtype_of(s->params[i]), nb_shape(s->params[i]), nb_ndim(s->params[i]));
    }
    for (int i = 0; i < s->n * s->nstate; i++) {
        snprintf(nm, sizeof nm, "state%d.%s", i % s->nstate, names[i / s->nstate]);
        sv[i] = nb_graph_param(g, nm, s->state[i]);
    }
    nb_status st = nb_last_status();
    if (st == NB_OK && s->o.clip > 0) clip_grads(gr, s->n, s->o.clip);
    for (int i = 0; i < s->n && st == NB_OK; i++) {
        nb_tensor *np = NULL, *ns[2] = {NULL, NULL};
        update(&s->o, p[i], gr[i], sv + i * s->nstate, k, &np, ns);
        snprintf(nm, sizeof nm, "new.%s", names[i]);
        st = nb_graph_output(g, nm, np);
        for (int j = 0; j < s->nstate && st == NB_OK; j++) {
            snprintf(nm, sizeof nm, "new.state%d.%s", j, names[i]);
            st = nb_graph_output(g, nm, ns[j]);
        }
    }
    free(sv);
    return st;
}

/* The step's graph(s), traced and ended; NB_OK or the error. */
static nb_status trace(cli_step *s, nb_module *net, const char *model, const cli_geom *geom,
                       const char *const *names) {
    nb_tensor **p = calloc(2 * (size_t)s->n + 1, sizeof *p), **gr = p ? p + s->n : NULL;
    if (!p) return NB_ERR_OOM;
    nb_status st = (s->g = nb_graph_begin("train_step")) ? NB_OK : nb_last_status();
    if (st == NB_OK) st = trace_grads(s, s->g, net, model, geom, names, p, gr);
    if (st == NB_OK && s->o.data_parallel) {
        st = nb_graph_end(s->g);
        if (st == NB_OK) st = (s->gu = nb_graph_begin("train_update")) ? NB_OK : nb_last_status();
        if (st == NB_OK) st = trace_update(s, s->gu, names, p, gr);
        nb_status e = s->gu ? nb_graph_end(s->gu) : NB_OK;
        if (st == NB_OK) st = e;
    } else if (s->g) {
        if (st == NB_OK) st = trace_update(s, s->g, names, p, gr);
        nb_status e = nb_graph_end(s->g);
        if (st == NB_OK) st = e;
    }
    free(p);
    return st;
}

cli_step *cli_step_new(nb_module *net, const char *model, const cli_geom *geom, cli_step_opts o) {
    cli_step *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->o = o;
    s->n = nb_module_param_count(net);
    s->nstate = o.adam ? 2 : o.momentum != 0 ? 1 : 0;
    nb_tensor **params = s->params = calloc((size_t)s->n + 1, sizeof *params);
    const char **names = calloc((size_t)s->n + 1, sizeof *names);
    s->state = calloc((size_t)(s->n * s->nstate) + 1, sizeof *s->state);
    s->outs = calloc((size_t)(2 + s->n * (1 + s->nstate)), sizeof *s->outs);
    bool ok = params && names && s->state && s->outs && nb_module_params(net, params, s->n) == s->n;
    for (int i = 0; ok && i < s->n; i++) names[i] = nb_module_param_name(net, i);
    if (ok && o.data_parallel) ok = (s->gnames = calloc((size_t)s->n + 1, sizeof *s->gnames)) != NULL;
    for (int i = 0; ok && s->gnames && i < s->n; i++) {
        size_t len = strlen(names[i]) + 6;
        ok = (s->gnames[i] = malloc(len)) != NULL;
        if (ok) snprintf(s->gnames[i], len, "grad.%s", names[i]);
    }
    for (int i = 0; ok && i < s->n * s->nstate; i++) {
        nb_tensor *pi = params[i / s->nstate];
        ok = (s->state[i] = nb_zeros(nb_shape(pi), nb_ndim(pi), nb_dtype_of(pi))) != NULL;
    }
    if (ok) ok = trace(s, net, model, geom, names) == NB_OK;
    if (ok) ok = (s->c = nb_graph_compile(s->g, NB_CPU)) != NULL;
    if (ok && s->gu) ok = (s->cu = nb_graph_compile(s->gu, NB_CPU)) != NULL;
    free(names);
    if (!ok) {
        cli_step_free(s);
        return NULL;
    }
    return s;
}

/* The per-step scalars of step t (1-based) at learning rate lr (see update()). */
static void step_coefs(const cli_step_opts *o, int64_t t, double lr, double *k) {
    if (o->adam) {
        k[0] = lr / (1 - pow(o->beta1, (double)t));
        k[1] = 1 / sqrt(1 - pow(o->beta2, (double)t));
        k[2] = o->decoupled ? 1 - lr * o->weight_decay : 1;
        k[3] = 0;
    } else {
        k[0] = lr;
        k[1] = t == 1 ? 0 : o->momentum;
        k[2] = t == 1 ? 1 : 1 - o->dampening;
        k[3] = 0;
    }
}

/* Data-parallel: the gradients of this rank's rows averaged over the ranks, then the update graph run
 * into the parameters and state. */
static nb_status run_parallel(cli_step *s, nb_tensor *x, nb_tensor *y, double weight, const double *k, double *loss,
                              int64_t *hits) {
    int n = s->n, nout = 2 + n * (1 + s->nstate);
    const char **names = calloc((size_t)(n + NCOEF), sizeof *names);
    nb_tensor **vals = calloc((size_t)(n + NCOEF), sizeof *vals), **res = calloc((size_t)(2 + n), sizeof *res);
    nb_status st = names && vals && res ? NB_OK : NB_ERR_OOM;
    double h = 0;
    *loss = 0;
    if (st == NB_OK && x) { /* this rank has rows: their weighted loss's gradients */
        st = nb_compiled_run(s->c, 3, (const char *[]){"x", "y", "w"},
                             (nb_tensor *[]){x, y, nb_scalar(weight, NB_F32)}, 2 + n, res);
        if (st == NB_OK) st = nb_item(res[0], loss);
        if (st == NB_OK) st = nb_item(res[1], &h);
    }
    for (int i = 0; names && i < n; i++) { /* no rows: zeros.  A rank that failed still takes part
                                             * (with NULL): every rank then fails here, none hangs */
        nb_tensor *p = s->params[i], *g = st != NB_OK ? NULL : x ? nb_contiguous(res[2 + i])
                                                          : nb_zeros(nb_shape(p), nb_ndim(p), nb_dtype_of(p));
        nb_status r = nb_dist_all_reduce(g, NB_DIST_MEAN);
        if (st == NB_OK) st = r;
        if (r != NB_OK) break;
        names[i] = s->gnames[i];
        vals[i] = g;
    }
    for (int i = 0; st == NB_OK && i < NCOEF; i++) {
        names[n + i] = COEF_NAMES[i];
        vals[n + i] = nb_scalar(k[i], NB_F32);
    }
    for (int i = 0; st == NB_OK && i < n; i++) {
        nb_tensor **o = s->outs + i * (1 + s->nstate); /* the update graph has no loss, hits */
        o[0] = s->params[i];
        for (int j = 0; j < s->nstate; j++) o[1 + j] = s->state[i * s->nstate + j];
    }
    nb_no_grad_begin();
    if (st == NB_OK) st = nb_compiled_run_into(s->cu, n + NCOEF, names, vals, nout - 2, s->outs);
    nb_no_grad_end();
    *hits = (int64_t)h;
    free(names);
    free(vals);
    free(res);
    return st;
}

nb_status cli_step_run(cli_step *s, nb_tensor *x, nb_tensor *y, double weight, double lr, double *loss, int64_t *hits) {
    double k[NCOEF];
    step_coefs(&s->o, ++s->t, lr, k);
    nb_scope_begin();
    if (s->o.data_parallel) {
        nb_status st = run_parallel(s, x, y, weight, k, loss, hits);
        nb_scope_end();
        return st;
    }
    const char *names[2 + NCOEF] = {"x", "y"};
    nb_tensor *vals[2 + NCOEF] = {x, y};
    for (int i = 0; i < NCOEF; i++) {
        names[2 + i] = COEF_NAMES[i];
        vals[2 + i] = nb_scalar(k[i], NB_F32);
    }
    /* the new parameters and state go straight into the tensors the graph's params read */
    int nout = 2 + s->n * (1 + s->nstate);
    s->outs[0] = s->outs[1] = NULL;
    for (int i = 0; i < s->n; i++) {
        nb_tensor **o = s->outs + 2 + i * (1 + s->nstate);
        o[0] = s->params[i];
        for (int j = 0; j < s->nstate; j++) o[1 + j] = s->state[i * s->nstate + j];
    }
    nb_no_grad_begin();
    nb_status st = nb_compiled_run_into(s->c, 2 + NCOEF, names, vals, nout, s->outs);
    nb_no_grad_end();
    double h = 0;
    if (st == NB_OK) st = nb_item(s->outs[0], loss);
    if (st == NB_OK) st = nb_item(s->outs[1], &h);
    *hits = (int64_t)h;
    nb_scope_end();
    return st;
}

nb_compiled *cli_step_plan(cli_step *s) { return s->c; }

void cli_step_free(cli_step *s) {
    if (!s) return;
    nb_compiled_release(s->c);
    nb_compiled_release(s->cu);
    nb_graph_release(s->g);
    nb_graph_release(s->gu);
    for (int i = 0; s->params && i < s->n; i++) nb_release(s->params[i]);
    for (int i = 0; s->state && i < s->n * s->nstate; i++) nb_release(s->state[i]);
    for (int i = 0; s->gnames && i < s->n; i++) free(s->gnames[i]);
    free(s->gnames);
    free(s->params);
    free(s->state);
    free(s->outs);
    free(s);
}
