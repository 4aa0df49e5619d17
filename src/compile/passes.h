/*
 * passes.h — graph-to-graph optimization passes (issue row G7), run before a
 * graph is scheduled: dead-code elimination, common-subexpression
 * elimination, constant folding and exact algebraic simplifications, and the
 * pipeline that repeats them.  Each pass reads a verified graph and builds a
 * NEW graph computing the same named outputs bit for bit; the input graph is
 * never modified.
 *
 * Files: rewrite.c (the one rewrite walker every pass runs on, rewrite.h),
 * pass_dce.c, pass_cse.c, pass_fold.c, pass_simplify.c (one pass each),
 * passes.c (the pipeline).
 *
 * What "the same outputs" means here
 * ----------------------------------
 * Same output names, order, dtypes, shapes (symbolic dims included) and weak
 * flags, and at run time the same bits, for every binding of the symbolic
 * dims.  Two further guarantees the passes keep:
 *
 *  - Layout.  The CPU backend's float reductions (sum / max / min) pick a
 *    summation order from the input's strides, so replacing a value by
 *    another with the same elements but another layout could change the bits
 *    of a reduction downstream.  A simplification that replaces an op's fresh
 *    (row-major) result by an operand x therefore fires only when x is known
 *    to be row-major when the graph runs (the result of an elementwise op,
 *    cast / copy or matmul, a reshape or detach of one, a contiguous constant)
 *    or when nothing that depends on the layout reads the replaced value (no
 *    reduction, scatter_add or window op reads it, through views or not, and
 *    it is not a graph output).  The reshape rules (to x's own shape, reshape
 *    of a reshape) have the same condition: a reshape copies where no view
 *    exists, so reshape(reshape(x)) can be row-major where reshape(x) is not.
 *    Rewrites that keep the view's exact strides (identity permute, permute
 *    of permute, expand to the same shape, detach) need no such condition.
 *  - Outputs.  The executor hands out a constant's own tensor, and an output
 *    that is a view shares its base's storage; a caller writing into one
 *    output must not change a constant for later runs, nor another output.
 *    So no pass makes an output's storage (the output's tensor, or the one it
 *    views) a constant's or another output's where it was not before:
 *    folding skips every node whose storage an output holds; CSE never
 *    merges two such nodes (distinct outputs stay distinct tensors); a
 *    simplification does not replace such a node by a value whose storage is
 *    a constant's or another output's.  An output that was a view keeping its
 *    input's strides (detach, identity permute, expand to the same shape) of
 *    an input or param may become that argument itself (the run then returns
 *    the argument's tensor, as nb_compiled_run documents; the view shared its
 *    storage already); the other rules never make an output an argument, as
 *    an argument's layout is unknown (see Layout).
 *
 * Why x + 0 is not simplified (and x + (-0) is)
 * ---------------------------------------------
 * In IEEE arithmetic (-0) + (+0) = +0, so x + 0 turns a negative zero into a
 * positive one: replacing x + 0 by x would change the sign bit of the result
 * wherever x is -0.  x + (-0) = x for every x (-0 + -0 = -0, +0 + -0 = +0),
 * and so is x - (+0); x - (-0) = x + (+0) is not.  An integer zero converts
 * to +0, so on float results only a float -0 constant counts for x + c and
 * only +0 (float or integer) for x - c.  On integer and bool results any zero
 * does.
 *
 * Simplifications (pass_simplify.c), each exact: x*1, 1*x, x/1, x-(+0),
 * x+(-0), (-0)+x, x**1 (float x), neg(neg(x)), cast of x to its own dtype,
 * where(c, x, x), detach(x), reshape to x's shape, reshape of a reshape (one
 * reshape), expand to x's shape, identity permute, permute of a permute (one
 * permute), matmul(a, b) + c (either order) whose add is the product's only
 * reader into addmm(c, a, b) (c of the product's dtype, broadcast to its
 * shape: the product rounded, then c added, as before), relu of an addmm or
 * a convolution (directly or through one reshape) that is its only reader
 * into the op's epilogue (NB_SUB_RELU: relu's own expression on each sum).
 * "1" and "0" are one-element CONST nodes (weak or not) read in
 * their own dtype.  A rule fires only when the result's dtype, shape and weak
 * flag equal those of the value it is replaced by.  The arithmetic rules (and
 * neg of neg) are limited to f32 / f64 and integer / bool results: f16 and
 * bf16 arithmetic runs through float conversions (f16's drops NaN payloads),
 * so x * 1 is not x bit for bit there.  Signaling NaNs are quieted by the
 * arithmetic and not by the simplified graph (as in every compiler that
 * folds x * 1).  No rule removes a CONTIGUOUS node: contiguous / clone of a
 * value must stay a copy of it, not an alias.
 */
#ifndef NB_PASSES_H
#define NB_PASSES_H

#include "../graph/graph.h"

/** What a pass (or the pipeline) did. */
typedef struct nb_pass_stats {
    int nodes_before, nodes_after;     /* OP nodes in g / in the result */
    int cse, folded, simplified, dead; /* nodes merged, constant-folded, rewritten, dropped */
} nb_pass_stats;

/*
 * The passes.  Each takes a verified graph g (not being built; never
 * modified) and builds a NEW graph *out (one reference, not building, hash
 * 0, same name and device) that computes the same outputs (names, order,
 * metadata, bits; see above).  Every INPUT and PARAM node of g is kept with
 * its name, metadata and (PARAM) bound tensor, even when no output needs it.
 * *origin (nb__malloc'd, at least (*out)->n entries; free it with nb__free)
 * maps each node of *out to the node of g it stands for, -1 for nodes a pass
 * created (a folded constant); origin may be NULL when the map is not
 * wanted.  *st (st may be NULL) is overwritten with the pass's counts.
 * Returns NB_OK; NB_ERR_NULL (g or out NULL), NB_ERR_STATE (g still being
 * built), or NB_ERR_OOM with nothing allocated left behind, *out and
 * *origin set to NULL.  A pending error of the caller is kept on success and
 * replaced by the pass's own on failure (as NB_OWN_STATUS).
 */

/** Dead-code elimination: drops the OP and CONST nodes no output reaches (st->dead). */
nb_status nb__pass_dce(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);
/**
 * Common-subexpression elimination (hash table, linear time): an OP node with
 * the same op, attrs (compared field by field), inputs (after merging) and
 * output metadata as an earlier one, or a CONST node equal to an earlier one
 * in dtype, shape, weak flag, device, layout and bytes, is replaced by it
 * (st->cse).  Never merged: INPUT and PARAM nodes (distinct names are
 * distinct values), RANDOM ops (each draws afresh), two nodes whose storage
 * graph outputs hold (see Outputs).  Merged-away nodes are left out of the
 * result.  Sibling CONVOLUTION_BACKWARD nodes — one output each (dx, dwi or
 * db), the same inputs, attrs equal but for the output bits — become one
 * node with their outputs in bit order (st->cse counts the absorbed ones).
 */
nb_status nb__pass_cse(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);
/**
 * Constant folding: an OP node whose inputs are all CONST nodes, that is not
 * a RANDOM or TO_DEVICE op nor holds a graph output's storage, whose outputs and attrs have
 * only concrete dims, and whose every output has at most 65536 elements and
 * no more than its largest input, is computed now by the executor's eager
 * step (the kind's infer on the concrete inputs, then nb__eager_apply under
 * no-grad) and replaced by CONST nodes holding the results (st->folded).  An
 * error of that step other than out of memory (an index out of range, ...)
 * leaves the node as it is, to fail when the graph runs, and leaves the
 * thread's error state as it was; out of memory fails the pass.
 */
nb_status nb__pass_fold(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);
/** The exact algebraic simplifications listed above (st->simplified). */
nb_status nb__pass_simplify(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);
/**
 * The pipeline: simplify, fold, cse, dce, the four repeated while a round
 * changes something (at most NB_OPTIMIZE_ROUNDS rounds).  *origin maps the
 * result's nodes to g's through every pass; st->nodes_before / nodes_after
 * count g's and the result's OP nodes, the other counts are summed over all
 * passes and rounds.  Contract and errors as the passes.
 */
nb_status nb__graph_optimize(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st);

/** The bound on nb__graph_optimize's rounds. */
#define NB_OPTIMIZE_ROUNDS 4
/** Constant folding's bound on the elements of one folded result. */
#define NB_FOLD_MAX_ELEMS 65536

#endif /* NB_PASSES_H */
