/*
 * passes.c — the optimization pipeline (passes.h): simplify, fold, cse and
 * dce in rounds until a round changes nothing (at most NB_OPTIMIZE_ROUNDS),
 * composing each pass's origin map into one from the result to the input
 * graph and summing the passes' counts.
 */
#include "rewrite.h"

#include <string.h>

typedef nb_status (*pass_fn)(const nb_graph *, nb_graph **, int32_t **, nb_pass_stats *);

nb_status nb__graph_optimize(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    static const pass_fn PASSES[] = {nb__pass_simplify, nb__pass_fold, nb__pass_cse, nb__pass_dce};
    const char *op = "graph_optimize";
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_pass_stats total = {0};
    if (st) memset(st, 0, sizeof *st);
    if (out) *out = NULL;
    if (origin) *origin = NULL;
    if (!g || !out) return nb__own_end(&fr, op, nb__error(NB_ERR_NULL, "%s: graph or result pointer is NULL", op));
    const nb_graph *cur = g;   /* the latest graph (g itself, or one of ours) */
    int32_t *map = NULL;       /* cur's nodes -> g's (NULL: the identity, cur == g) */
    nb_status s = NB_OK;
    for (int round = 0; round < NB_OPTIMIZE_ROUNDS && s == NB_OK; round++) {
        int changes = 0;
        for (size_t p = 0; p < sizeof PASSES / sizeof PASSES[0] && s == NB_OK; p++) {
            nb_graph *next;
            int32_t *o;
            nb_pass_stats ps;
            s = PASSES[p](cur, &next, &o, &ps);
            if (s != NB_OK) break;
            if (map) /* compose: next -> cur -> g */
                for (int i = 0; i < next->n; i++) o[i] = o[i] < 0 ? -1 : map[o[i]];
            nb__free(map);
            map = o;
            if (cur != g) nb_graph_release((nb_graph *)cur);
            cur = next;
            changes += ps.cse + ps.folded + ps.simplified + ps.dead;
            total.cse += ps.cse;
            total.folded += ps.folded;
            total.simplified += ps.simplified;
            total.dead += ps.dead;
        }
        if (!changes) break;
    }
    if (s != NB_OK) {
        if (cur != g) nb_graph_release((nb_graph *)cur);
        nb__free(map);
        return nb__own_end(&fr, op, s);
    }
    total.nodes_before = nb__op_node_count(g);
    total.nodes_after = nb__op_node_count(cur);
    if (st) *st = total;
    *out = (nb_graph *)cur; /* a pass ran at least once: never g itself */
    if (origin) *origin = map;
    else nb__free(map);
    return nb__own_end(&fr, op, NB_OK);
}
