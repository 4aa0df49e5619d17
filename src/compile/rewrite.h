/*
 * rewrite.h — the one rewrite walker the optimization passes share
 * (rewrite.c), and the small helpers they have in common.  A pass is a
 * visit function: the walker copies the source graph's nodes in id order,
 * each with its inputs mapped to values of the new graph, and the visit
 * decides per node — keep it (a copy), replace its outputs by values the new
 * graph already has, append other nodes in its place (a folded constant, a
 * rewritten op), or drop it.  The walker then maps the outputs, so a pass
 * never repeats the rebuild loop, the ownership rules or the OOM clean-up.
 */
#ifndef NB_REWRITE_H
#define NB_REWRITE_H

#include "compile.h"
#include "passes.h"

typedef struct nb_rw nb_rw;

/**
 * A pass's decision for node id of rw->src.  nd is a private copy of that
 * node whose present inputs are already mapped to values of rw->dst (the
 * visit may modify it, e.g. before nb__rw_keep).  The visit must map every
 * output of id that a later node or an output reads (nb__rw_keep,
 * nb__rw_forward, or appending with nb__rw_append and forwarding); a node it
 * leaves unmapped is dropped.  Returns NB_OK, or an error (NB_ERR_OOM, set)
 * that ends the pass.
 */
typedef nb_status (*nb_rw_visit)(nb_rw *rw, int32_t id, nb_gnode *nd);

/** The state of one rewrite, seen by the visit. */
struct nb_rw {
    const nb_graph *src;  /* the graph rewritten (verified, never modified) */
    nb_graph *dst;        /* the new graph being built */
    nb_gval *map;         /* nb__slot-indexed over src: the dst value standing for each src value ({-1, -1}: none yet) */
    int32_t *origin;      /* dst node -> src node (-1: created by the pass); origin_cap entries */
    bool *dst_alias;      /* dst node -> it stands for a src node with out_alias set; origin_cap entries */
    int origin_cap;
    const bool *out_alias; /* src node -> a graph output holds its storage: it is an output, or a view
                              op (VIEW kind) reading it is */
    nb_pass_stats *st;    /* the pass's counts (the walker fills nodes_before / nodes_after) */
    void *ctx;            /* the pass's own state */
    const char *pass;     /* the pass's name, for messages */
};

/**
 * Run one pass over g: a new graph (named as g, on g's device) built by
 * calling visit(rw, id, nd) for every node of g in id order, then g's
 * outputs mapped to it.  ctx is handed to the visit as rw->ctx.  Fills *st
 * (zeroed first; nodes_before / nodes_after here, the rest by the visit) when
 * st is not NULL, *out, and *origin when origin is not NULL (see passes.h).
 * Errors: NB_ERR_NULL, NB_ERR_STATE (g being built), NB_ERR_OOM, or the
 * visit's; then nothing is left allocated, *out / *origin are NULL and *st
 * is zeroed.  Runs
 * inside its own error frame (a caller's pending error survives success).
 */
nb_status nb__rw_run(const char *pass, const nb_graph *g, nb_rw_visit visit, void *ctx, nb_graph **out,
                     int32_t **origin, nb_pass_stats *st);

/** A pass's failure to allocate its own state before nb__rw_run: *out, *origin (when not NULL)
 *  set to NULL, *st (when not NULL) zeroed, and NB_ERR_OOM set (replacing a pending error, as
 *  nb__rw_run's own failures do) and returned. */
nb_status nb__rw_oom(const char *pass, const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);

/**
 * Append a copy of nd to rw->dst standing for src node `origin` (-1: none;
 * its dst_alias is origin's out_alias): its name is duplicated and its value
 * retained (nd itself stays the caller's).  Returns the new node's id, or -1
 * with NB_ERR_OOM set (nothing appended).
 */
int32_t nb__rw_append(nb_rw *rw, const nb_gnode *nd, int32_t origin);
/** Keep src node id as nd (its mapped copy, possibly modified): nb__rw_append, then map every
 *  output j of id to output j of the new node.  NB_OK or NB_ERR_OOM. */
nb_status nb__rw_keep(nb_rw *rw, int32_t id, const nb_gnode *nd);
/** Let output `out` of src node id stand for value `to` of rw->dst (to's node then shares id's
 *  out_alias in dst_alias). */
static inline void nb__rw_forward(nb_rw *rw, int32_t id, int out, nb_gval to) {
    rw->map[nb__slot((nb_gval){id, out})] = to;
    rw->dst_alias[to.node] |= rw->out_alias[id];
}
/** The node of rw->dst holding value v. */
static inline const nb_gnode *nb__rw_node(const nb_rw *rw, nb_gval v) { return &rw->dst->nodes[v.node]; }

/** Equal dtype, rank, shape (symbolic dims included) and weak flag (what the verifier compares). */
bool nb__meta_equal(const nb_meta *a, const nb_meta *b);
/** Elements of m, -1 when a dim is symbolic. */
int64_t nb__meta_numel(const nb_meta *m);
/** Number of OP nodes of g. */
int nb__op_node_count(const nb_graph *g);
/**
 * Whether nd's op, re-inferred from the metadata of its inputs (values of g)
 * with its attrs, gives exactly nd's n_out outputs and their metadata (a
 * rewritten node that does also passes nb__graph_verify): NB_OK with the
 * answer in *ok, the thread's error state left as it was (an infer error is
 * only a "no"); NB_ERR_OOM (set) when memory ran out on the way (infer may
 * intern a new symbolic dim).
 */
nb_status nb__rw_infers(const nb_graph *g, const nb_gnode *nd, bool *ok);

#endif /* NB_REWRITE_H */
