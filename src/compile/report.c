/*
 * report.c — what the compiler made of a graph, for people and for tests:
 * nb_compiled_stats (the passes' counts, steps, fused kernels, missed
 * fusions, the memory plan of the last run) and nb_compiled_report (the
 * same as text, with every kernel's ops and every missed fusion's reason).
 */
#include "compile.h"

#include <stdio.h>

static const char *const MISS_REASON[NB_FUSE_MISS_COUNT] = {
    [NB_FUSE_OK] = "fused",
    [NB_FUSE_MISS_KIND] = "its kind never fuses",
    [NB_FUSE_MISS_DTYPE] = "a dtype fused kernels do not compute",
    [NB_FUSE_MISS_AXES] = "a reduction over axes neither trailing nor leading (or a leading max, min or prod)",
    [NB_FUSE_MISS_SHAPE] = "its shape fits no neighbouring kernel",
    [NB_FUSE_MISS_CYCLE] = "joining would make the kernels depend on each other",
    [NB_FUSE_MISS_LIMIT] = "the kernel would exceed its operand or instruction limits",
    [NB_FUSE_MISS_ALONE] = "no fusible neighbour",
    [NB_FUSE_MISS_PASS] = "it reads a column reduction along the reduced axes (a second pass)",
};

/* A node of a fusible kind left alone (what the report lists as a missed fusion). */
static bool missed(uint8_t why) { return why != NB_FUSE_OK && why != NB_FUSE_MISS_KIND; }

/* The numbers of c into *st (c and st not NULL). */
static void stats_of(const nb_compiled *c, nb_compiled_stats *st) {
    const nb_schedule *s = &c->s;
    *st = (nb_compiled_stats){.graph_ops = c->passes.nodes_before, .ops = s->nops, .merged = c->passes.cse,
                              .folded = c->passes.folded, .simplified = c->passes.simplified, .dead = c->passes.dead,
                              .steps = s->n, .kernels = s->nfused};
    for (int f = 0; f < s->nfused; f++) st->fused_ops += s->fused[f].nmember;
    for (int id = 0; id < c->g->n; id++) st->missed += missed(s->miss[id]);
    if (c->run.valid) {
        st->intermediate_bytes = c->run.mem.unfused;
        st->materialized_bytes = c->run.mem.intermediates;
        st->live_bytes = c->run.mem.live_peak;
        st->arena_bytes = c->run.mem.arena;
        for (int f = 0; f < s->nfused; f++) st->kernels_compiled += c->run.ran && c->run.ran[f] == NB_FK_RAN_COMPILED;
    }
}

nb_status nb_compiled_stats_get(const nb_compiled *c, nb_compiled_stats *st) {
    if (!c || !st) return nb__error_set(NB_ERR_NULL, "compiled_stats_get: plan or result is NULL");
    stats_of(c, st);
    return NB_OK;
}

char *nb_compiled_report(const nb_compiled *c) {
    if (!c) {
        nb__error_set(NB_ERR_NULL, "compiled_report: plan is NULL");
        return NULL;
    }
    nb_compiled_stats st;
    stats_of(c, &st);
    const nb_graph *g = c->g;
    const nb_schedule *s = &c->s;
    nb__text b = {0};
    nb__text_printf(&b, "plan of graph '%s': %d ops; passes: %d merged, %d folded, %d simplified, %d dead -> %d ops\n",
                    g->name, st.graph_ops, st.merged, st.folded, st.simplified, st.dead, st.ops);
    nb__text_printf(&b, "steps: %d (%d fused kernels holding %d ops, %d ops alone)%s\n", st.steps, st.kernels,
                    st.fused_ops, st.steps - st.kernels, s->fused || st.missed ? "" : nb_fusion_mode()[1] == 'f'
                                                                                         ? "; fusion off (NB_FUSE=0)" : "");
    for (int f = 0; f < s->nfused; f++) {
        const nb_fstep *k = &s->fused[f];
        nb__text_printf(&b, "  kernel %d: %s over [", f, !k->k.nred ? "elementwise" : k->k.lead ? "column reductions" : "row reductions");
        for (int d = 0; d < k->nd; d++) {
            char dim[64];
            nb__text_printf(&b, d ? ", %s" : "%s", nb__dim_str(dim, k->dom[d]));
        }
        nb__text_printf(&b, "], %d loads, %d outputs:", k->k.nin, k->k.nout);
        for (int i = 0; i < k->nmember; i++) nb__text_printf(&b, " %s", nb__ops[g->nodes[k->member[i]].op].name);
        if (c->run.valid && c->run.ran && c->run.ran[f] == NB_FK_RAN_OPS)
            nb__text_printf(&b, "; the last run ran these ops one by one (the backend declined: rows longer than it "
                                "takes, a reduced input that is not one contiguous run, or a single column)");
        else if (c->run.valid && c->run.ran)
            nb__text_printf(&b, c->run.ran[f] == NB_FK_RAN_COMPILED ? "; the last run: code compiled at run time"
                                                                     : "; the last run: the interpreter");
        nb__text_printf(&b, "\n");
    }
    nb__text_printf(&b, "missed fusions: %d\n", st.missed);
    for (int id = 0; id < g->n; id++)
        if (missed(s->miss[id])) {
            const nb_gnode *nd = &g->nodes[id];
            nb__text_printf(&b, "  node %d %s: %s", id, nb__ops[nd->op].name, MISS_REASON[s->miss[id]]);
            if (s->miss[id] == NB_FUSE_MISS_DTYPE)
                nb__text_printf(&b, " (%s from %s)", nb_dtype_name(nd->out[0].dtype),
                                nd->n_in ? nb_dtype_name(nb__gval_meta(g, nd->in[0])->dtype) : "nothing");
            nb__text_printf(&b, "\n");
        }
    if (c->run.valid)
        nb__text_printf(&b, "memory of the last run: intermediates %lld bytes (op by op), %lld written by the plan, "
                        "liveness bound %lld, arena %lld\n", (long long)st.intermediate_bytes,
                        (long long)st.materialized_bytes, (long long)st.live_bytes, (long long)st.arena_bytes);
    else
        nb__text_printf(&b, "memory: planned at the first run\n");
    return nb__text_done(&b, "compiled_report");
}
