/*
 * transform.h — what the function transforms (grad, vjp, jvp, hvp, vmap,
 * jacfwd, jacrev) share: the replay engine that re-issues the ops of a
 * finished graph (a Func) through the one dispatch point while the trace of
 * the result graph is on top of the stack, so each op becomes a node of the
 * new graph — as it is (grad, jvp) or through its batching rule (vmap).
 * Every transform is graph -> graph, which is what makes them compose.
 */
#ifndef NB_TRANSFORM_H
#define NB_TRANSFORM_H

#include "../graph/graph.h"

/** The value table of one replay of `src` (nb__slot-indexed): the tensor of the result graph
 *  standing for each value of src and, for vmap, its batch axis (-1: unbatched). */
typedef struct nb__replay {
    const nb_graph *src;
    nb_tensor **val; /* borrowed: scoped in the result graph's trace, or src's constants */
    int *bdim;       /* NULL unless batched */
} nb__replay;

/** A rule applying op node nd of src to the replayed inputs in[0..nd->n_in) (NULL where
 *  absent; bin their batch axes when batched, else NULL): writes nd->n_out scoped tensors to
 *  out (and their batch axes to bout when batched).  NB_OK or the error. */
typedef nb_status (*nb__replay_rule)(void *ctx, const nb_gnode *nd, nb_tensor *const *in, const int *bin,
                                     nb_tensor **out, int *bout);

/** An empty table for src (bdim too when batched); NB_ERR_OOM naming op. */
nb_status nb__replay_init(nb__replay *r, const nb_graph *src, bool batched, const char *op);
void nb__replay_free(nb__replay *r);
/** Declare src's inputs (same names, dtypes and shapes) in g, the graph being traced, and map
 *  them.  NB_OK or nb_graph_input's error. */
nb_status nb__replay_declare_inputs(nb__replay *r, nb_graph *g);
/** Replay every node of src in order into the graph being traced: inputs must be mapped
 *  already, params become params of the same name and tensor, constants stand for themselves,
 *  op nodes go through rule (NULL: nb__replay_apply).  NB_OK or the first error. */
nb_status nb__replay_run(nb__replay *r, nb__replay_rule rule, void *ctx);
/** The default rule: op nd through the dispatch point on in, with nd's attributes. */
nb_status nb__replay_apply(const nb_gnode *nd, nb_tensor *const *in, nb_tensor **out);
/** The tensor standing for src's output i. */
static inline nb_tensor *nb__replay_output(const nb__replay *r, int i) {
    return r->val[nb__slot(r->src->outputs[i])];
}

/** What every transform's trace reads first (the first member of its context): the transform's
 *  name, the source Func and the ids of its n named inputs (or params). */
typedef struct nb__tctx {
    const char *op;
    nb_graph *f;
    int n;
    const int32_t *ids;
} nb__tctx;
/** The entry of transform op: f checked, the n names resolved (params too when params) into
 *  ctx->ids, then body traced with ctx into the new graph "<op>(<f>)".  Returns it, or NULL
 *  with the first error (the caller's pending error kept on success). */
nb_graph *nb__transform(const char *op, nb_graph *f, int n, const char *const *names, bool params, nb__tctx *ctx,
                        nb_graph_fn_with body);

/** The id of src's input named name (also a param when params), -1 when none. */
int32_t nb__func_find(const nb_graph *f, const char *name, bool params);
/** Check f is a finished graph; NB_ERR_NULL / NB_ERR_STATE naming op otherwise. */
nb_status nb__func_check(const char *op, const nb_graph *f);
/** Check the n names of a transform's list: non-NULL, distinct, each an input (or a param when
 *  params) of f; ids[i] their nodes.  NB_ERR_ARG (naming the name and f's inputs) / NB_ERR_NULL. */
nb_status nb__func_names(const char *op, const nb_graph *f, int n, const char *const *names, bool params,
                         int32_t *ids);
/** nb_graph_output(g, prefix + name, t), the prefix repeated while that name is an output of g
 *  already (grad of value_and_grad: grad_grad_x); NB_ERR_ARG for a name over 255 characters. */
nb_status nb__output_prefixed(nb_graph *g, const char *prefix, const char *name, nb_tensor *t);
/** nb_graph_input(g, prefix + name, …), the prefix repeated while that name is an input or param
 *  of g already (jvp of jvp: tangent_tangent_x); NULL with the error. */
nb_tensor *nb__input_prefixed(nb_graph *g, const char *prefix, const char *name, const nb_meta *m);

/** A Func named name of f's inputs whose outputs are f's outputs idx[0..k) renamed prefix +
 *  names[i].  NULL with the error. */
nb_graph *nb__func_select(const char *name, const nb_graph *f, int k, const int *idx, const char *prefix,
                          const char *const *names);

/** sum(a · b) as a rank-0 scalar, and acc + term (term alone when acc is NULL): the losses grad,
 *  vjp and jvp build (scoped; a NULL operand gives NULL with the op's error pending). */
static inline nb_tensor *nb__inner(nb_tensor *a, nb_tensor *b) { return nb_sum(nb_mul(a, b), NULL, 0, false); }
static inline nb_tensor *nb__plus(nb_tensor *acc, nb_tensor *term) { return acc && term ? nb_add(acc, term) : term; }

/** The batching rule of every op (vmap.c's replay rule; ctx unused). */
nb_status nb__batch_rule(void *ctx, const nb_gnode *nd, nb_tensor *const *in, const int *bin, nb_tensor **out,
                         int *bout);

#endif /* NB_TRANSFORM_H */
