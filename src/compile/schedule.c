/*
 * schedule.c — the compiler proper: from a verified graph to the schedule a
 * run executes.  Op by op for now: the op nodes the outputs reach, in id
 * (topological) order, with the liveness of every value so the executor
 * frees intermediates right after their last use.
 */
#include "compile.h"

#include <string.h>

void nb__schedule_free(nb_schedule *s) {
    nb__free(s->node);
    nb__free(s->free_start);
    nb__free(s->free_slot);
    memset(s, 0, sizeof *s);
}

static nb_status alloc_schedule(nb_schedule *s, int n, int nfree) {
    s->n = n;
    s->node = nb__malloc(sizeof *s->node * (size_t)(n ? n : 1));
    s->free_start = nb__malloc(sizeof *s->free_start * (size_t)(n + 1));
    s->free_slot = nb__malloc(sizeof *s->free_slot * (size_t)(nfree ? nfree : 1));
    if (s->node && s->free_start && s->free_slot) return NB_OK;
    nb__schedule_free(s);
    return nb__error(NB_ERR_OOM, "graph_compile: out of memory for a schedule of %d steps", n);
}

nb_status nb__schedule_copy(nb_schedule *dst, const nb_schedule *src) {
    int nfree = src->free_start[src->n];
    if (alloc_schedule(dst, src->n, nfree) != NB_OK) return NB_ERR_OOM;
    memcpy(dst->node, src->node, sizeof *dst->node * (size_t)src->n);
    memcpy(dst->free_start, src->free_start, sizeof *dst->free_start * (size_t)(src->n + 1));
    memcpy(dst->free_slot, src->free_slot, sizeof *dst->free_slot * (size_t)nfree);
    return NB_OK;
}

nb_status nb__schedule_build(const nb_graph *g, nb_schedule *s) {
    memset(s, 0, sizeof *s);
    int nslots = g->n * NB_MAX_OUTS;
    bool *live = nb__calloc((size_t)(g->n ? g->n : 1), sizeof *live);
    int *last = nb__malloc(sizeof *last * (size_t)(nslots ? nslots : 1)); /* step of a slot's last use */
    if (!live || !last) {
        nb__free(live);
        nb__free(last);
        return nb__error(NB_ERR_OOM, "graph_compile: out of memory scheduling graph '%s'", g->name);
    }
    /* dead-code elimination: what the outputs reach, walking ids downwards */
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i].node] = true;
    int n = 0;
    for (int id = g->n - 1; id >= 0; id--) {
        const nb_gnode *nd = &g->nodes[id];
        if (!live[id] || nd->kind != NB_GNODE_OP) continue;
        n++;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node >= 0) live[nd->in[i].node] = true;
    }
    /* liveness: a slot is freed after the step of its last use (its producer's when unused) */
    for (int k = 0; k < nslots; k++) last[k] = -1;
    int k = 0;
    for (int id = 0; id < g->n; id++) {
        const nb_gnode *nd = &g->nodes[id];
        if (!live[id] || nd->kind != NB_GNODE_OP) continue;
        for (int j = 0; j < nd->n_out; j++) last[nb__slot((nb_gval){id, j})] = k;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node >= 0) last[nb__slot(nd->in[i])] = k;
        k++;
    }
    for (int i = 0; i < g->n_outputs; i++) last[nb__slot(g->outputs[i])] = -1; /* returned, never freed early */
    int nfree = 0;
    for (int i = 0; i < nslots; i++) nfree += last[i] >= 0;
    nb_status st = alloc_schedule(s, n, nfree);
    if (st == NB_OK) {
        k = 0;
        for (int id = 0; id < g->n; id++)
            if (live[id] && g->nodes[id].kind == NB_GNODE_OP) s->node[k++] = id;
        /* slots bucketed by step (a counting sort): counts, prefix sums, then fill, advancing
         * free_start[k] to the end of bucket k and shifting it back afterwards */
        memset(s->free_start, 0, sizeof *s->free_start * (size_t)(n + 1));
        for (int i = 0; i < nslots; i++)
            if (last[i] >= 0) s->free_start[last[i] + 1]++;
        for (k = 0; k < n; k++) s->free_start[k + 1] += s->free_start[k];
        for (int i = 0; i < nslots; i++)
            if (last[i] >= 0) s->free_slot[s->free_start[last[i]]++] = i;
        for (k = n; k > 0; k--) s->free_start[k] = s->free_start[k - 1];
        s->free_start[0] = 0;
    }
    nb__free(live);
    nb__free(last);
    return st;
}
