/*
 * dot.c — Graphviz DOT text of a traced graph (one node per graph node
 * labelled with its op, and what it has fused (nb__op_label), or its name;
 * the dtype and shape of each output with symbolic dims by name, an edge
 * per input, the outputs marked), and the node / edge writers the compiled
 * plan's DOT shares.
 */
#include "graph.h"

#include <stdio.h>
#include <string.h>

const char *nb__dot_escape(char *buf, const char *s) {
    size_t n = 0;
    for (; s && *s && n < 120; s++) {
        if (*s == '"' || *s == '\\') buf[n++] = '\\';
        buf[n++] = *s;
    }
    buf[n] = 0;
    return buf;
}

static const char *KIND_LABEL[NB_GNODE_KIND_COUNT] = {"input", "param", "const", ""};

void nb__dot_node(nb__text *b, const nb_graph *g, int32_t id, const char *extra) {
    const nb_gnode *nd = &g->nodes[id];
    char nm[128];
    if (nd->kind == NB_GNODE_OP)
        nb__text_printf(b, "  n%d [label=\"%s", (int)id, nb__op_label(nd->op, &nd->attrs, nm, sizeof nm));
    else
        nb__text_printf(b, "  n%d [shape=box, label=\"%s%s%s", (int)id, KIND_LABEL[nd->kind], nd->name ? " " : "",
                        nb__dot_escape(nm, nd->name));
    for (int j = 0; j < nd->n_out; j++) {
        const nb_meta *m = &nd->out[j];
        nb__text_printf(b, "\\n%s[", nb_dtype_name(m->dtype));
        for (int d = 0; d < m->ndim; d++) {
            char s[64];
            nb__text_printf(b, d ? ", %s" : "%s", nb__dot_escape(nm, nb__dim_str(s, m->shape[d])));
        }
        nb__text_printf(b, "]");
    }
    if (extra) nb__text_printf(b, "\\n%s", extra);
    nb__text_printf(b, "\"];\n");
}

void nb__dot_edges(nb__text *b, const nb_graph *g, int32_t id) {
    const nb_gnode *nd = &g->nodes[id];
    for (int i = 0; i < nd->n_in; i++) {
        if (nd->in[i].node < 0) continue;
        nb__text_printf(b, "  n%d -> n%d", (int)nd->in[i].node, (int)id);
        if (g->nodes[nd->in[i].node].n_out > 1) nb__text_printf(b, " [label=\"%d\"]", (int)nd->in[i].out);
        nb__text_printf(b, ";\n");
    }
}

char *nb_graph_to_dot(const nb_graph *g) {
    if (!g) {
        nb__error(NB_ERR_NULL, "graph_to_dot: graph is NULL");
        return NULL;
    }
    nb__text b = {0};
    char nm[128];
    nb__text_printf(&b, "digraph \"%s\" {\n", nb__dot_escape(nm, g->name));
    for (int i = 0; i < g->n; i++) nb__dot_node(&b, g, i, NULL);
    for (int i = 0; i < g->n; i++) nb__dot_edges(&b, g, i);
    for (int i = 0; i < g->n_outputs; i++) {
        nb__text_printf(&b, "  out%d [shape=doubleoctagon, label=\"output %s\"];\n", i,
                        nb__dot_escape(nm, g->output_names[i]));
        nb__text_printf(&b, "  n%d -> out%d;\n", (int)g->outputs[i].node, i);
    }
    nb__text_printf(&b, "}\n");
    return nb__text_done(&b, "graph_to_dot");
}

void nb_free_string(char *s) { nb__free(s); }
