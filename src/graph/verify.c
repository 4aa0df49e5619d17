/*
 * verify.c — the graph IR's invariants: ids equal indices, inputs refer to
 * earlier nodes and existing outputs, counts within bounds, inputs and
 * params named, params and constants holding concrete values of their
 * metadata, each op node's stored metadata agreeing with its op's infer rule
 * re-run on metadata stand-ins, and valid outputs.  Errors are NB_ERR_FORMAT
 * naming the node.
 */
#include "graph.h"

#include <stdio.h>
#include <string.h>

static const char *KIND_NAMES[NB_GNODE_KIND_COUNT] = {"input", "param", "const", "op"};

/* "node 3 (exp)" / "node 0 (input 'x')" into buf (128 bytes). */
static const char *node_desc(char *buf, const nb_gnode *nd) {
    if (nd->kind == NB_GNODE_OP && (unsigned)nd->op < NB_OP_COUNT)
        snprintf(buf, 128, "node %d (%s)", (int)nd->id, nb__ops[nd->op].name);
    else if ((unsigned)nd->kind < NB_GNODE_KIND_COUNT)
        snprintf(buf, 128, "node %d (%s%s%.40s%s)", (int)nd->id, KIND_NAMES[nd->kind], nd->name ? " '" : "",
                 nd->name ? nd->name : "", nd->name ? "'" : "");
    else
        snprintf(buf, 128, "node %d (kind %d)", (int)nd->id, (int)nd->kind);
    return buf;
}

static nb_status __attribute__((format(printf, 3, 4))) bad(const nb_graph *g, const nb_gnode *nd, const char *fmt, ...) {
    char what[256], desc[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nb__error_set(NB_ERR_FORMAT, "graph_verify: graph '%s', %s: %s", g->name,
                         nd ? node_desc(desc, nd) : "outputs", what);
}

static bool meta_valid(const nb_meta *m) {
    if ((unsigned)m->dtype >= NB_DTYPE_COUNT || m->ndim < 0 || m->ndim > NB_MAX_DIMS) return false;
    for (int d = 0; d < m->ndim; d++)
        if (m->shape[d] < 0 && !nb__dim_sym(m->shape[d])) return false;
    return true;
}

static bool meta_same(const nb_meta *a, const nb_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static const char *meta_str(char *buf, const nb_meta *m) {
    char dims[192] = "";
    size_t n = 0;
    for (int d = 0; d < m->ndim && n < 120; d++) {
        char s[64];
        n += (size_t)snprintf(dims + n, sizeof dims - n, d ? ", %s" : "%s", nb__dim_str(s, m->shape[d]));
    }
    snprintf(buf, 256, "%s[%s]%s", nb_dtype_name(m->dtype), dims, m->weak ? " weak" : "");
    return buf;
}

static nb_status check_leaf(const nb_graph *g, const nb_gnode *nd) {
    if (nd->n_in != 0 || nd->n_out != 1) return bad(g, nd, "%d inputs and %d outputs (want 0 and 1)", nd->n_in, nd->n_out);
    if (nd->kind != NB_GNODE_CONST && (!nd->name || !*nd->name)) return bad(g, nd, "no name");
    if (nd->kind == NB_GNODE_INPUT) return NB_OK;
    if (!nd->value) return bad(g, nd, "no value");
    if (nb__is_symbolic(nd->value)) return bad(g, nd, "its value is a symbolic tensor");
    nb_meta vm;
    nb__meta_of(&vm, nd->value);
    if (nd->kind == NB_GNODE_PARAM) vm.weak = false;
    char a[256], b[256];
    if (!meta_same(&vm, &nd->out[0]))
        return bad(g, nd, "metadata %s but its value is %s", meta_str(a, &nd->out[0]), meta_str(b, &vm));
    return NB_OK;
}

void nb__graph_standins(const nb_graph *g, const nb_gnode *nd, nb_storage *ss, nb_tensor *st, nb_tensor **in) {
    for (int i = 0; i < nd->n_in; i++) {
        nb_gval v = nd->in[i];
        if (v.node < 0) {
            in[i] = NULL;
            continue;
        }
        const nb_gnode *src = &g->nodes[v.node];
        const nb_meta *m = &src->out[v.out];
        memset(&ss[i], 0, sizeof ss[i]);
        atomic_init(&ss[i].refs, 1);
        ss[i].device = src->value ? src->value->storage->device : g->device;
        memset(&st[i], 0, sizeof st[i]);
        atomic_init(&st[i].refs, 1);
        st[i].ndim = m->ndim;
        st[i].dtype = m->dtype;
        st[i].weak = m->weak;
        memcpy(st[i].shape, m->shape, sizeof(int64_t) * (size_t)m->ndim);
        st[i].storage = &ss[i];
        st[i].graph = (nb_graph *)g;
        st[i].gnode = v.node;
        st[i].gout = v.out;
        in[i] = &st[i];
    }
}

/* Re-run the op's infer on stand-ins carrying the inputs' stored metadata. */
static nb_status check_op(const nb_graph *g, const nb_gnode *nd) {
    if ((unsigned)nd->op >= NB_OP_COUNT) return bad(g, nd, "op %d outside the op table", (int)nd->op);
    const nb_kind_impl *k = nb__kinds[nb__ops[nd->op].kind];
    if (!k || !k->infer) return bad(g, nd, "op kind has no infer rule (not a primitive op of the dispatch point)");
    nb_storage ss[8];
    nb_tensor st[8], *in[8];
    nb__graph_standins(g, nd, ss, st, in);
    nb_attrs attrs = nd->attrs;
    nb_meta meta[NB_MAX_OUTS];
    memset(meta, 0, sizeof meta);
    int nout = k->infer(nd->op, in, nd->n_in, &attrs, meta);
    if (nout < 0) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s", nb_last_message());
        return bad(g, nd, "its infer rule rejects the inputs: %s", msg);
    }
    if (nout != nd->n_out) return bad(g, nd, "%d outputs stored, its infer rule gives %d", nd->n_out, nout);
    char a[256], b[256];
    for (int j = 0; j < nout; j++)
        if (!meta_same(&meta[j], &nd->out[j]))
            return bad(g, nd, "output %d stored as %s, its infer rule gives %s", j, meta_str(a, &nd->out[j]),
                       meta_str(b, &meta[j]));
    return NB_OK;
}

static nb_status check_node(const nb_graph *g, int id) {
    const nb_gnode *nd = &g->nodes[id];
    if (nd->id != id) return bad(g, nd, "id %d at index %d", (int)nd->id, id);
    if ((unsigned)nd->kind >= NB_GNODE_KIND_COUNT) return bad(g, nd, "invalid kind");
    if (nd->n_in < 0 || nd->n_in > 8 || nd->n_out < 1 || nd->n_out > NB_MAX_OUTS)
        return bad(g, nd, "%d inputs and %d outputs (bounds: 0..8 and 1..%d)", nd->n_in, nd->n_out, NB_MAX_OUTS);
    for (int j = 0; j < nd->n_out; j++)
        if (!meta_valid(&nd->out[j])) return bad(g, nd, "output %d has an invalid dtype, rank or size", j);
    for (int i = 0; i < nd->n_in; i++) {
        nb_gval v = nd->in[i];
        if (v.node == -1 && v.out == -1) continue; /* an absent optional input */
        if (v.node < 0 || v.node >= id) return bad(g, nd, "input %d refers to node %d, not an earlier one", i, (int)v.node);
        if (v.out < 0 || v.out >= g->nodes[v.node].n_out)
            return bad(g, nd, "input %d refers to output %d of node %d, which has %d", i, (int)v.out, (int)v.node,
                       g->nodes[v.node].n_out);
    }
    if (nd->kind != NB_GNODE_OP) return check_leaf(g, nd);
    return check_op(g, nd);
}

nb_status nb__graph_verify(const nb_graph *g) {
    if (!g) return nb__error_set(NB_ERR_NULL, "graph_verify: graph is NULL");
    if (g->n < 0 || (g->n && !g->nodes)) return nb__error_set(NB_ERR_FORMAT, "graph_verify: graph '%s': no node array", g->name);
    for (int id = 0; id < g->n; id++) {
        nb_status st = check_node(g, id);
        if (st != NB_OK) return st;
        const nb_gnode *nd = &g->nodes[id];
        if (nd->kind == NB_GNODE_INPUT || nd->kind == NB_GNODE_PARAM)
            for (int j = 0; j < id; j++)
                if ((g->nodes[j].kind == NB_GNODE_INPUT || g->nodes[j].kind == NB_GNODE_PARAM) &&
                    !strcmp(g->nodes[j].name, nd->name))
                    return bad(g, nd, "its name is also node %d's", j);
    }
    if (g->n_outputs < 1) return bad(g, NULL, "the graph has no output");
    for (int i = 0; i < g->n_outputs; i++) {
        nb_gval v = g->outputs[i];
        const char *nm = g->output_names[i];
        if (!nm || !*nm) return bad(g, NULL, "output %d has no name", i);
        if (v.node < 0 || v.node >= g->n || v.out < 0 || v.out >= g->nodes[v.node].n_out)
            return bad(g, NULL, "output '%.40s' refers to output %d of node %d, which does not exist", nm, (int)v.out,
                       (int)v.node);
        for (int j = 0; j < i; j++)
            if (!strcmp(g->output_names[j], nm)) return bad(g, NULL, "two outputs are named '%.40s'", nm);
    }
    return NB_OK;
}

nb_status nb_graph_verify(const nb_graph *g) { NB_OWN_STATUS("graph_verify", nb__graph_verify(g)); }
