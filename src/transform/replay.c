/*
 * replay.c — the replay engine of the transforms (transform.h): walk a
 * finished graph's nodes in id order and issue each op again, through the
 * dispatch point, on the tensors standing for its inputs in the graph being
 * traced; plus the checks and naming every transform shares.
 */
#include "transform.h"

#include <stdio.h>
#include <string.h>

nb_status nb__replay_init(nb__replay *r, const nb_graph *src, bool batched, const char *op) {
    size_t n = (size_t)src->n * NB_MAX_OUTS + 1;
    r->src = src;
    r->val = nb__calloc(n, sizeof *r->val);
    r->bdim = batched ? nb__malloc(sizeof *r->bdim * n) : NULL;
    if (!r->val || (batched && !r->bdim)) {
        nb__replay_free(r);
        return nb__error(NB_ERR_OOM, "%s: out of memory transforming graph '%s'", op, src->name);
    }
    for (size_t i = 0; batched && i < n; i++) r->bdim[i] = -1;
    return NB_OK;
}

void nb__replay_free(nb__replay *r) {
    nb__free(r->val);
    nb__free(r->bdim);
    r->val = NULL;
    r->bdim = NULL;
}

nb_status nb__replay_declare_inputs(nb__replay *r, nb_graph *g) {
    for (int32_t id = 0; id < r->src->n; id++) {
        const nb_gnode *nd = &r->src->nodes[id];
        if (nd->kind != NB_GNODE_INPUT) continue;
        nb_tensor *t = nb_graph_input(g, nd->name, nd->out[0].dtype, nd->out[0].shape, nd->out[0].ndim);
        if (!t) return nb_last_status();
        r->val[nb__slot((nb_gval){id, 0})] = t;
    }
    return NB_OK;
}

nb_status nb__replay_apply(const nb_gnode *nd, nb_tensor *const *in, nb_tensor **out) {
    nb_attrs a = nd->attrs; /* infer may normalize its copy */
    int nout = nb__apply_n(nd->op, in, nd->n_in, &a, out);
    if (nout < 0) return nb_last_status();
    NB_ASSERT(nout == nd->n_out); /* the same op, attributes and input metadata as when traced */
    bool lost = false; /* nb__own releases a result its scope has no room for (OOM set) */
    for (int j = 0; j < nout; j++) lost |= !(out[j] = nb__own(out[j]));
    return lost ? NB_ERR_OOM : NB_OK;
}

/* The param of g standing for src's param nd: g's own of that name and tensor when it has one
 * (a Func called twice in one trace, a Jacobian's several calls), else a new one. */
static nb_tensor *param_in(nb_graph *g, const nb_gnode *nd) {
    int32_t id = nb__func_find(g, nd->name, true); /* names are unique among g's inputs and params */
    if (id < 0) return nb_graph_param(g, nd->name, nd->value);
    const nb_gnode *p = &g->nodes[id];
    if (p->kind == NB_GNODE_PARAM && p->value == nd->value) return nb__own(nb__graph_tensor(g, (nb_gval){id, 0}));
    nb__error(NB_ERR_ARG, "func_call: param '%s' of the Func called clashes with the %s '%s' of graph '%s' "
              "(bound to another tensor)", nd->name, p->kind == NB_GNODE_PARAM ? "param" : "input", nd->name, g->name);
    return NULL;
}

nb_status nb__replay_run(nb__replay *r, nb__replay_rule rule, void *ctx) {
    const nb_graph *src = r->src;
    nb_graph *g = nb__graph_tracing();
    NB_ASSERT(g != NULL);
    for (int32_t id = 0; id < src->n; id++) {
        const nb_gnode *nd = &src->nodes[id];
        nb_tensor **slot = &r->val[nb__slot((nb_gval){id, 0})];
        if (nd->kind == NB_GNODE_INPUT) {
            NB_ASSERT(*slot != NULL); /* the transform declared it */
        } else if (nd->kind == NB_GNODE_PARAM) {
            if (!(*slot = param_in(g, nd))) return nb_last_status();
        } else if (nd->kind == NB_GNODE_CONST) {
            *slot = nd->value;
        } else {
            nb_tensor *in[8], *out[NB_MAX_OUTS];
            int bin[8], bout[NB_MAX_OUTS];
            for (int k = 0; k < nd->n_in; k++) {
                in[k] = nd->in[k].node >= 0 ? r->val[nb__slot(nd->in[k])] : NULL;
                bin[k] = nd->in[k].node >= 0 && r->bdim ? r->bdim[nb__slot(nd->in[k])] : -1;
            }
            nb_status st = rule ? rule(ctx, nd, in, r->bdim ? bin : NULL, out, r->bdim ? bout : NULL)
                                : nb__replay_apply(nd, in, out);
            if (st != NB_OK) return st;
            for (int j = 0; j < nd->n_out; j++) {
                slot[j] = out[j];
                if (r->bdim) r->bdim[nb__slot((nb_gval){id, j})] = bout[j];
            }
        }
    }
    return NB_OK;
}

int32_t nb__func_find(const nb_graph *f, const char *name, bool params) {
    for (int32_t id = 0; id < f->n; id++) {
        const nb_gnode *nd = &f->nodes[id];
        if ((nd->kind == NB_GNODE_INPUT || (params && nd->kind == NB_GNODE_PARAM)) && !strcmp(nd->name, name))
            return id;
    }
    return -1;
}

nb_status nb__func_check(const char *op, const nb_graph *f) {
    if (!f) return nb__error(NB_ERR_NULL, "%s: Func (graph) is NULL", op);
    if (f->building) return nb__error(NB_ERR_STATE, "%s: graph '%s' is still being built (end it first)", op, f->name);
    if (f->lazy) return nb__error(NB_ERR_STATE, "%s: graph '%s' is an eval-mode (lazy) graph, not a Func", op, f->name);
    if (f->n_outputs == 0) return nb__error(NB_ERR_STATE, "%s: Func '%s' has no output", op, f->name);
    return NB_OK;
}

/* "x, y" — f's input names (and params when params) into buf. */
static const char *input_list(char *buf, size_t size, const nb_graph *f, bool params) {
    size_t k = 0;
    buf[0] = 0;
    for (int32_t id = 0; id < f->n && k + 1 < size; id++) {
        const nb_gnode *nd = &f->nodes[id];
        if (nd->kind == NB_GNODE_INPUT || (params && nd->kind == NB_GNODE_PARAM))
            k += (size_t)snprintf(buf + k, size - k, "%s'%s'", k ? ", " : "", nd->name);
    }
    return buf[0] ? buf : "none";
}

nb_status nb__func_names(const char *op, const nb_graph *f, int n, const char *const *names, bool params,
                         int32_t *ids) {
    for (int i = 0; i < n; i++) {
        if (!names[i]) return nb__error(NB_ERR_NULL, "%s: names[%d] is NULL", op, i);
        if ((ids[i] = nb__func_find(f, names[i], params)) < 0) {
            char buf[256];
            if (!params && nb__func_find(f, names[i], true) >= 0)
                return nb__error(NB_ERR_ARG, "%s: '%s' is a param of Func '%s'; %s takes inputs only (make it an "
                                 "input to batch it)", op, names[i], f->name, op);
            return nb__error(NB_ERR_ARG, "%s: '%s' is not an input%s of Func '%s' (it has %s)", op, names[i],
                             params ? " or param" : "", f->name, input_list(buf, sizeof buf, f, params));
        }
        for (int j = 0; j < i; j++)
            if (ids[j] == ids[i]) return nb__error(NB_ERR_ARG, "%s: '%s' is named twice", op, names[i]);
    }
    return NB_OK;
}

/* Is name an output of g (outputs), or an input or param of g (!outputs)? */
static bool taken(const nb_graph *g, const char *name, bool outputs) {
    for (int i = 0; outputs && i < g->n_outputs; i++)
        if (!strcmp(g->output_names[i], name)) return true;
    return !outputs && nb__func_find(g, name, true) >= 0;
}

/* prefix + name into buf (256 bytes), the prefix repeated until the name is free in g (among
 * its outputs, or its inputs and params); NULL with NB_ERR_ARG when that is over 255 characters. */
static const char *fresh_name(char *buf, const nb_graph *g, const char *prefix, const char *name, bool outputs) {
    char tmp[256];
    snprintf(tmp, sizeof tmp, "%s", name);
    for (;;) {
        if (snprintf(buf, 256, "%s%s", prefix, tmp) >= 256) {
            nb__error(NB_ERR_ARG, "name '%s%.32s…' is longer than 255 characters", prefix, tmp);
            return NULL;
        }
        if (!taken(g, buf, outputs)) return buf;
        memcpy(tmp, buf, sizeof tmp);
    }
}

nb_status nb__output_prefixed(nb_graph *g, const char *prefix, const char *name, nb_tensor *t) {
    char buf[256];
    return fresh_name(buf, g, prefix, name, true) ? nb_graph_output(g, buf, t) : nb_last_status();
}

nb_tensor *nb__input_prefixed(nb_graph *g, const char *prefix, const char *name, const nb_meta *m) {
    char buf[256];
    return fresh_name(buf, g, prefix, name, false) ? nb_graph_input(g, buf, m->dtype, m->shape, m->ndim) : NULL;
}

/* The graph name "<op>(<f's name>)" into buf (256 bytes, truncated). */
static const char *func_name(char *buf, const char *op, const nb_graph *f) {
    snprintf(buf, 256, "%s(%s)", op, f->name);
    return buf;
}

nb_graph *nb__transform(const char *op, nb_graph *f, int n, const char *const *names, bool params, nb__tctx *ctx,
                        nb_graph_fn_with body) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_status st = nb__func_check(op, f);
    if (st == NB_OK && (n < 1 || n > f->n))
        st = nb__error(NB_ERR_ARG, "%s: %d names given for Func '%s' (at least one, at most its inputs and params)",
                       op, n, f->name);
    if (st == NB_OK && !names) st = nb__error(NB_ERR_NULL, "%s: names is NULL", op);
    int32_t ids[st == NB_OK ? n : 1];
    if (st == NB_OK) st = nb__func_names(op, f, n, names, params, ids);
    nb_graph *res = NULL;
    if (st == NB_OK) {
        char name[256];
        *ctx = (nb__tctx){op, f, n, ids};
        if (!(res = nb_graph_build_with(func_name(name, op, f), body, ctx, NULL))) st = nb_last_status();
    }
    nb__own_end(&fr, op, st);
    return res;
}

typedef struct select_ctx {
    const nb_graph *f;
    int k;
    const int *idx;
    const char *prefix;
    const char *const *names;
} select_ctx;

static nb_status select_body(nb_graph *g, void *vctx, void *meta) {
    (void)meta;
    const select_ctx *c = vctx;
    nb__replay r;
    nb_status st = nb__replay_init(&r, c->f, false, "select");
    if (st != NB_OK) return st;
    if ((st = nb__replay_declare_inputs(&r, g)) == NB_OK) st = nb__replay_run(&r, NULL, NULL);
    for (int i = 0; st == NB_OK && i < c->k; i++)
        st = nb__output_prefixed(g, c->prefix, c->names[i], nb__replay_output(&r, c->idx[i]));
    nb__replay_free(&r);
    return st;
}

nb_graph *nb__func_select(const char *name, const nb_graph *f, int k, const int *idx, const char *prefix,
                          const char *const *names) {
    select_ctx c = {f, k, idx, prefix, names};
    return nb_graph_build_with(name, select_body, &c, NULL);
}
