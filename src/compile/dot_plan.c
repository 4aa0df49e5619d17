/*
 * dot_plan.c — Graphviz DOT text of a compiled plan: the leaves its steps
 * read, then each scheduled step (numbered, with the values freed after it)
 * and its input edges, and the outputs.
 */
#include "compile.h"

#include <stdio.h>

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
            for (int k = 0; k < s->n && !used; k++)
                for (int i = 0; i < g->nodes[s->node[k]].n_in; i++) used |= g->nodes[s->node[k]].in[i].node == id;
            for (int i = 0; i < g->n_outputs; i++) used |= g->outputs[i].node == id;
            if (used) nb__dot_node(&b, g, id, NULL);
        }
    for (int k = 0; k < s->n; k++) {
        char extra[64];
        int nfree = s->free_start[k + 1] - s->free_start[k];
        snprintf(extra, sizeof extra, "step %d, frees %d", k, nfree);
        nb__dot_node(&b, g, s->node[k], extra);
        nb__dot_edges(&b, g, s->node[k]);
    }
    for (int i = 0; i < g->n_outputs; i++)
        nb__text_printf(&b, "  out%d [shape=doubleoctagon, label=\"output %d\"];\n  n%d -> out%d;\n", i, i,
                        (int)g->outputs[i].node, i);
    nb__text_printf(&b, "}\n");
    return nb__text_done(&b, "compiled_to_dot");
}
