/*
 * dot_plan.c — Graphviz DOT text of a compiled plan: the leaves its steps
 * read, then each scheduled step (numbered, with the values freed after it)
 * and its input edges, and the outputs.  A fused kernel is one box listing
 * its ops; the values it writes to memory hang off it as their nodes.
 */
#include "compile.h"

#include <stdio.h>

/* Does step k read the value of node id? */
static bool step_reads(const nb_graph *g, const nb_schedule *s, int k, int32_t id) {
    const nb_fstep *f = nb__step_kernel(s, k);
    if (f) {
        for (int j = 0; j < f->k.nin; j++)
            if (f->load_slot[j] / NB_MAX_OUTS == id) return true;
        return false;
    }
    for (int i = 0; i < g->nodes[s->node[k]].n_in; i++)
        if (g->nodes[s->node[k]].in[i].node == id) return true;
    return false;
}

static void dot_kernel(nb__text *b, const nb_graph *g, const nb_fstep *f, int fid, int k, int nfree) {
    nb__text_printf(b, "  k%d [shape=box3d, label=\"fused kernel %d (step %d, frees %d)\\n", fid, fid, k, nfree);
    for (int i = 0; i < f->nmember; i++)
        nb__text_printf(b, "%s%s", i ? (i % 6 ? ", " : ",\\n") : "", nb__ops[g->nodes[f->member[i]].op].name);
    nb__text_printf(b, "\\n%d loads, %d outputs%s\"];\n", f->k.nin, f->k.nout, !f->k.nred ? "" : f->k.lead ? ", column reductions" : ", row reductions");
    for (int j = 0; j < f->k.nin; j++) {
        bool dup = false; /* one edge per producer */
        for (int i = 0; i < j; i++) dup |= f->load_slot[i] / NB_MAX_OUTS == f->load_slot[j] / NB_MAX_OUTS;
        if (!dup) nb__text_printf(b, "  n%d -> k%d;\n", (int)(f->load_slot[j] / NB_MAX_OUTS), fid);
    }
    for (int o = 0; o < f->k.nout; o++) {
        int32_t id = f->out_slot[o] / NB_MAX_OUTS;
        nb__dot_node(b, g, id, "written by the kernel");
        nb__text_printf(b, "  k%d -> n%d;\n", fid, (int)id);
    }
}

char *nb_compiled_to_dot(const nb_compiled *c) {
    if (!c) {
        nb__error(NB_ERR_NULL, "compiled_to_dot: compiled plan is NULL");
        return NULL;
    }
    const nb_graph *g = c->g;
    const nb_schedule *s = &c->s;
    nb__text b = {0};
    nb__text_printf(&b, "digraph plan {\n");
    for (int id = 0; id < g->n; id++) /* leaves: every input and param (a run binds them all), used constants */
        if (g->nodes[id].kind != NB_GNODE_OP) {
            bool used = g->nodes[id].kind != NB_GNODE_CONST;
            for (int k = 0; k < s->n && !used; k++) used |= step_reads(g, s, k, id);
            for (int i = 0; i < g->n_outputs; i++) used |= g->outputs[i].node == id;
            if (used) nb__dot_node(&b, g, id, NULL);
        }
    for (int k = 0; k < s->n; k++) {
        int nfree = s->free_start[k + 1] - s->free_start[k];
        const nb_fstep *f = nb__step_kernel(s, k);
        if (f) {
            dot_kernel(&b, g, f, -1 - s->node[k], k, nfree);
            continue;
        }
        char extra[64];
        snprintf(extra, sizeof extra, "step %d, frees %d", k, nfree);
        nb__dot_node(&b, g, s->node[k], extra);
        nb__dot_edges(&b, g, s->node[k]);
    }
    for (int i = 0; i < g->n_outputs; i++)
        nb__text_printf(&b, "  out%d [shape=doubleoctagon, label=\"output %s\"];\n  n%d -> out%d;\n", i,
                        nb__dot_escape((char[128]){0}, g->output_names[i]), (int)g->outputs[i].node, i);
    nb__text_printf(&b, "}\n");
    return nb__text_done(&b, "compiled_to_dot");
}
