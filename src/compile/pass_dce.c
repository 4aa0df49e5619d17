/*
 * pass_dce.c — dead-code elimination (passes.h): the OP and CONST nodes no
 * graph output reaches are left out of the new graph; INPUT and PARAM
 * nodes always stay (a run must accept every input the graph declares).
 */
#include "rewrite.h"

/* The pass's visit: rw->ctx marks the nodes an output reaches; the other OP and CONST nodes are
 * left unmapped (dropped), everything else kept. */
static nb_status dce_visit(nb_rw *rw, int32_t id, nb_gnode *nd) {
    const bool *live = rw->ctx;
    if (!live[id] && (nd->kind == NB_GNODE_OP || nd->kind == NB_GNODE_CONST)) {
        rw->st->dead++;
        return NB_OK; /* unmapped: dropped */
    }
    return nb__rw_keep(rw, id, nd);
}

nb_status nb__pass_dce(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    if (!g) return nb__rw_run("optimize_dce", g, dce_visit, NULL, out, origin, st); /* reports the NULL */
    bool *live = nb__calloc((size_t)(g->n ? g->n : 1), sizeof *live);
    if (!live) return nb__rw_oom("optimize_dce", g, out, origin, st);
    /* what the outputs reach: ids descending, as every input is an earlier node */
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i].node] = true;
    for (int id = g->n - 1; id >= 0; id--) {
        const nb_gnode *nd = &g->nodes[id];
        if (!live[id]) continue;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node >= 0) live[nd->in[i].node] = true;
    }
    nb_status s = nb__rw_run("optimize_dce", g, dce_visit, live, out, origin, st);
    nb__free(live);
    return s;
}
