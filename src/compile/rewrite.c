/*
 * rewrite.c — the rewrite walker shared by the optimization passes
 * (rewrite.h): builds the new graph node by node as each pass's visit
 * decides, keeps the old-value -> new-value map and the origin of every new
 * node, maps the outputs, and owns the clean-up on failure; plus the helpers
 * the passes share (metadata equality, element counts, re-inferring a
 * rewritten node against the new graph).
 */
#include "rewrite.h"

#include <string.h>

bool nb__meta_equal(const nb_meta *a, const nb_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

int64_t nb__meta_numel(const nb_meta *m) {
    int64_t n = 1;
    for (int d = 0; d < m->ndim; d++) {
        if (m->shape[d] < 0) return -1; /* symbolic (a verified graph has no other negative size) */
        n *= m->shape[d];               /* no overflow: the verifier checked the shape */
    }
    return n;
}

int nb__op_node_count(const nb_graph *g) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].kind == NB_GNODE_OP;
    return n;
}

nb_status nb__rw_infers(const nb_graph *g, const nb_gnode *nd, bool *ok) {
    const nb_kind_impl *k = nb__kinds[nb__ops[nd->op].kind];
    *ok = false;
    if (!k || !k->infer) return NB_OK;
    /* metadata stand-ins of the inputs, as the verifier builds them (no allocation) */
    nb_storage ss[8];
    nb_tensor st[8], *in[8];
    nb__graph_standins(g, nd, ss, st, in);
    nb_attrs a = nd->attrs;
    nb_meta meta[NB_MAX_OUTS];
    memset(meta, 0, sizeof meta);
    nb__error_frame fr;
    nb__own_begin(&fr);
    unsigned long failures = nb__alloc_failures();
    int nout = k->infer(nd->op, in, nd->n_in, &a, meta);
    if (nout < 0 && nb__alloc_failures() != failures) {
        nb__error_set(NB_ERR_OOM, "rewrite: out of memory re-inferring a rewritten %s node of graph '%s'",
                      nb__ops[nd->op].name, g->name);
        return nb__own_end(&fr, "rewrite", NB_ERR_OOM);
    }
    nb__own_end(&fr, "rewrite", NB_OK); /* an infer error is a rejected rewrite, not the caller's */
    *ok = nout == nd->n_out;
    for (int j = 0; *ok && j < nout; j++) *ok = nb__meta_equal(&meta[j], &nd->out[j]);
    return NB_OK;
}

nb_status nb__rw_oom(const char *pass, const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    if (out) *out = NULL;
    if (origin) *origin = NULL;
    if (st) memset(st, 0, sizeof *st);
    return nb__error_set(NB_ERR_OOM, "%s: out of memory optimizing graph '%s'", pass, g->name);
}

/* NB_ERR_OOM naming the pass and the graph (kept behind an error already recorded by the failing
 * call). */
/* Is input i of source node origin absent (an optional input), so unmapped legitimately? */
static bool g_absent(const nb_rw *rw, int32_t origin, int i) {
    return origin >= 0 && rw->src->nodes[origin].in[i].node < 0;
}

static nb_status oom(const nb_rw *rw) {
    return nb__error(NB_ERR_OOM, "%s: out of memory optimizing graph '%s'", rw->pass, rw->src->name);
}

int32_t nb__rw_append(nb_rw *rw, const nb_gnode *nd, int32_t origin) {
    nb_graph *d = rw->dst;
    for (int i = 0; i < nd->n_in; i++) /* absent optional inputs are {-1, -1} in the source too */
        NB_ASSERT(nd->in[i].node >= 0 || g_absent(rw, origin, i)); /* a pass dropped a value a kept node reads */
    if (d->n == rw->origin_cap) {
        int cap = 2 * rw->origin_cap;
        int32_t *o = nb__realloc(rw->origin, sizeof *o * (size_t)cap);
        if (o) rw->origin = o;
        bool *a = o ? nb__realloc(rw->dst_alias, sizeof *a * (size_t)cap) : NULL;
        if (!a) {
            oom(rw);
            return -1;
        }
        rw->dst_alias = a;
        rw->origin_cap = cap;
    }
    nb_gnode c = *nd;
    c.name = nd->name ? nb__strdup(nd->name) : NULL;
    if (nd->name && !c.name) {
        oom(rw);
        return -1;
    }
    int32_t id = nb__graph_append(d, &c); /* the graph owns c.name from here on */
    if (id < 0) {
        nb__free(c.name);
        return -1;
    }
    nb_retain(c.value);
    rw->origin[id] = origin;
    rw->dst_alias[id] = origin >= 0 && rw->out_alias[origin];
    return id;
}

nb_status nb__rw_keep(nb_rw *rw, int32_t id, const nb_gnode *nd) {
    int32_t nid = nb__rw_append(rw, nd, id);
    if (nid < 0) return NB_ERR_OOM;
    for (int j = 0; j < nd->n_out; j++) nb__rw_forward(rw, id, j, (nb_gval){nid, j});
    return NB_OK;
}

/* The new graph's outputs: g's, mapped (names duplicated). */
static nb_status map_outputs(nb_rw *rw) {
    const nb_graph *g = rw->src;
    nb_graph *d = rw->dst;
    int n = g->n_outputs;
    d->outputs = nb__malloc(sizeof *d->outputs * (size_t)(n ? n : 1));
    d->output_names = nb__calloc((size_t)(n ? n : 1), sizeof *d->output_names);
    if (!d->outputs || !d->output_names) return oom(rw);
    d->cap_outputs = n ? n : 1;
    for (int i = 0; i < n; i++) {
        nb_gval v = rw->map[nb__slot(g->outputs[i])];
        NB_ASSERT(v.node >= 0 && v.node < d->n); /* a pass dropped a value an output reads */
        char *nm = nb__strdup(g->output_names[i]);
        if (!nm) return oom(rw);
        d->outputs[i] = v;
        d->output_names[i] = nm;
        d->n_outputs = i + 1;
    }
    return NB_OK;
}

/* a[id] for every node of g: an output, or read by a view op whose result is an output's storage
 * (ids descending: every reader of a node is decided before the node). */
static void find_out_alias(const nb_graph *g, bool *a) {
    memset(a, 0, sizeof *a * (size_t)g->n);
    for (int i = 0; i < g->n_outputs; i++) a[g->outputs[i].node] = true;
    for (int id = g->n - 1; id >= 0; id--) {
        const nb_gnode *nd = &g->nodes[id];
        if (a[id] && nd->kind == NB_GNODE_OP && nb__ops[nd->op].kind == NB_KIND_VIEW)
            for (int i = 0; i < nd->n_in; i++)
                if (nd->in[i].node >= 0) a[nd->in[i].node] = true;
    }
}

/* Visit every node of rw->src in id order (inputs mapped first), then map the outputs. */
static nb_status walk(nb_rw *rw, nb_rw_visit visit) {
    const nb_graph *g = rw->src;
    for (int32_t id = 0; id < g->n; id++) {
        nb_gnode nd = g->nodes[id];
        for (int i = 0; i < nd.n_in; i++) /* (unmapped: dropped by DCE, as the node reading it) */
            if (nd.in[i].node >= 0) nd.in[i] = rw->map[nb__slot(nd.in[i])];
        nb_status st = visit(rw, id, &nd);
        if (st != NB_OK) return st;
    }
    return map_outputs(rw);
}

nb_status nb__rw_run(const char *pass, const nb_graph *g, nb_rw_visit visit, void *ctx, nb_graph **out,
                     int32_t **origin, nb_pass_stats *st) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_pass_stats local;
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    if (out) *out = NULL;
    if (origin) *origin = NULL;
    if (!g || !out) return nb__own_end(&fr, pass, nb__error(NB_ERR_NULL, "%s: graph or result pointer is NULL", pass));
    if (g->building)
        return nb__own_end(&fr, pass, nb__error(NB_ERR_STATE, "%s: graph '%s' is still being built", pass, g->name));
    nb_rw rw = {.src = g, .st = st, .ctx = ctx, .pass = pass};
    size_t nslots = (size_t)g->n * NB_MAX_OUTS;
    bool *out_alias = nb__malloc(sizeof *out_alias * (size_t)(g->n ? g->n : 1));
    rw.map = nb__malloc(sizeof *rw.map * (nslots ? nslots : 1));
    rw.origin_cap = g->n + 8;
    rw.origin = nb__malloc(sizeof *rw.origin * (size_t)rw.origin_cap);
    rw.dst_alias = nb__malloc(sizeof *rw.dst_alias * (size_t)rw.origin_cap);
    rw.dst = out_alias && rw.map && rw.origin && rw.dst_alias ? nb__graph_new(pass, g->name, g->device) : NULL;
    nb_status s = NB_OK;
    if (!rw.dst) s = oom(&rw);
    if (s == NB_OK) {
        memset(rw.map, 0xff, sizeof *rw.map * nslots); /* {-1, -1}: not mapped */
        find_out_alias(g, out_alias);
        rw.out_alias = out_alias;
        s = walk(&rw, visit);
    }
    nb__free(out_alias);
    nb__free(rw.map);
    nb__free(rw.dst_alias);
    if (s != NB_OK) {
        nb_graph_release(rw.dst);
        nb__free(rw.origin);
        memset(st, 0, sizeof *st);
        return nb__own_end(&fr, pass, s);
    }
    rw.dst->hash = 0;
    rw.dst->building = false;
    st->nodes_before = nb__op_node_count(g);
    st->nodes_after = nb__op_node_count(rw.dst);
    *out = rw.dst;
    if (origin) *origin = rw.origin;
    else nb__free(rw.origin);
    return nb__own_end(&fr, pass, NB_OK);
}
