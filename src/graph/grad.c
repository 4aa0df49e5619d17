/*
 * grad.c — reverse mode inside a graph being built (nb_graph_grad): mark the
 * nodes that depend on the wrt values, walk from the loss back in the tape's
 * order (the reverse post-order of a depth-first search over inputs in order,
 * as backward.c: gradients reaching a value from several uses are summed in
 * the eager order, to the same bits), apply each node's derivative rule from
 * the op table to symbolic tensors of its inputs while the graph's trace is
 * on top of the dispatch stack (so the rule's ops append the backward nodes
 * to the same graph), conform each input gradient as the tape does and
 * accumulate it.
 */
#include "graph.h"
#include "../autograd/vjp.h"

static const char *const OP = "graph_grad";

/* dep[id]: output 0 of node id is a function of a wrt value through float ops that have a
 * derivative rule (non-float results and NONE-gradient ops stop the gradient). */
static void mark_dependents(const nb_graph *g, int32_t last, nb_tensor *const *wrt, int n, bool *dep) {
    for (int i = 0; i < n; i++)
        if (wrt[i]->gout == 0 && wrt[i]->gnode <= last) dep[wrt[i]->gnode] = true;
    for (int32_t id = 0; id <= last; id++) {
        const nb_gnode *nd = &g->nodes[id];
        if (dep[id] || nd->kind != NB_GNODE_OP || !nb__ops[nd->op].vjp || !nb_dtype_is_float(nd->out[0].dtype))
            continue;
        for (int k = 0; k < nd->n_in; k++)
            if (nd->in[k].node >= 0 && nd->in[k].out == 0 && dep[nd->in[k].node]) dep[id] = true;
    }
}

static void rule_node_free(nb_node *r) {
    for (int k = 0; k < r->n_in; k++) nb_release(r->in[k]);
    nb_release(r->out);
    nb__free(r);
}

/* The tape-node form of graph node nd that a derivative rule reads: symbolic tensors of
 * its inputs (requires_grad set exactly on those whose gradient is wanted), then of its
 * other outputs (as the tape records a multi-output op: max_pool2d's indices), and of
 * its output. */
static nb_node *rule_node(nb_graph *g, const nb_gnode *nd, const bool *dep) {
    int n_in = nd->n_in + nd->n_out - 1;
    nb_node *r = nb__calloc(1, sizeof *r + sizeof(nb_tensor *) * (size_t)n_in);
    if (!r) {
        nb__error(NB_ERR_OOM, "%s: out of memory at node %d of graph '%s'", OP, nd->id, g->name);
        return NULL;
    }
    atomic_init(&r->refs, 1);
    r->op = nd->op;
    r->n_in = n_in;
    r->attrs = nd->attrs;
    r->out = nb__graph_tensor(g, (nb_gval){nd->id, 0});
    bool ok = r->out != NULL;
    for (int k = nd->n_in; ok && k < n_in; k++) {
        r->in[k] = nb__graph_tensor(g, (nb_gval){nd->id, k - nd->n_in + 1});
        ok = r->in[k] != NULL;
    }
    for (int k = 0; ok && k < nd->n_in; k++) {
        if (nd->in[k].node < 0) continue; /* an absent optional input */
        r->in[k] = nb__graph_tensor(g, nd->in[k]);
        ok = r->in[k] != NULL;
        if (ok) r->in[k]->requires_grad = nd->in[k].out == 0 && dep[nd->in[k].node];
    }
    if (!ok) {
        rule_node_free(r);
        return NULL;
    }
    return r;
}

/* *slot += gr (both owned), as the tape sums gradients. */
static nb_status accumulate(nb_tensor **slot, nb_tensor *gr) {
    *slot = nb__grad_add(*slot, gr);
    return *slot ? NB_OK : nb_last_status();
}

/* Propagate gr (owned), the gradient of node nd's output 0, to the inputs that want one. */
static nb_status back_through(nb_graph *g, const nb_gnode *nd, nb_tensor *gr, const bool *dep, nb_tensor **grads) {
    nb_vjp_fn vjp = nd->kind == NB_GNODE_OP ? nb__ops[nd->op].vjp : NULL;
    nb_node *r = vjp ? rule_node(g, nd, dep) : NULL;
    if (!r) {
        nb_release(gr);
        return vjp ? nb_last_status() : NB_OK; /* inputs, params, constants: nothing above */
    }
    nb_tensor *gin[8 + NB_MAX_OUTS] = {0};
    nb_scope_begin();
    nb_status st = vjp(r, gr, gin);
    if (st == NB_OK) st = nb_last_status(); /* a failing op inside the rule */
    for (int k = 0; k < r->n_in; k++) gin[k] = nb__scope_take(gin[k]);
    nb_scope_end();
    nb_release(gr);
    for (int k = 0; k < r->n_in; k++) {
        nb_tensor *gi = gin[k];
        if (!gi) continue;
        if (st != NB_OK || !nb_requires_grad(r->in[k])) {
            nb_release(gi);
            continue;
        }
        gi = nb__grad_conform(gi, r->in[k]);
        st = gi ? accumulate(&grads[nd->in[k].node], gi) : nb_last_status() ? nb_last_status() : NB_ERR_OOM;
    }
    rule_node_free(r);
    return st;
}

/* The dependent nodes the loss reaches (dep[last] set) into order, in the post-order of a
 * depth-first search over each node's dependent inputs in input order — backward.c's topo
 * over tracked tensors — so that walking it backwards visits every consumer before its
 * producers, in the tape's order.  Returns the count, -1 (typed error) out of memory. */
static int32_t post_order(const nb_graph *g, int32_t last, const bool *dep, int32_t *order) {
    int32_t *stack = nb__calloc((size_t)last + 1, sizeof *stack), *next = nb__calloc((size_t)last + 1, sizeof *next);
    bool *seen = nb__calloc((size_t)last + 1, sizeof *seen);
    int32_t n = 0, top = 0;
    if (!stack || !next || !seen) {
        nb__error(NB_ERR_OOM, "%s: out of memory ordering graph '%s'", OP, g->name);
        n = -1;
    } else {
        stack[top++] = last;
        seen[last] = true;
    }
    while (n >= 0 && top > 0) {
        const nb_gnode *nd = &g->nodes[stack[top - 1]];
        int32_t k = next[top - 1]++;
        if (k < nd->n_in) {
            nb_gval in = nd->in[k];
            if (in.node >= 0 && in.out == 0 && dep[in.node] && !seen[in.node]) {
                seen[in.node] = true;
                next[top] = 0;
                stack[top++] = in.node;
            }
        } else {
            order[n++] = stack[--top];
        }
    }
    nb__free(seen);
    nb__free(next);
    nb__free(stack);
    return n;
}

/* t (owned) as a value of g: concrete tensors a rule made (zeros of a static shape) are captured. */
static nb_tensor *in_graph(nb_graph *g, nb_tensor *t) {
    if (!t || t->graph == g) return t;
    nb_gval v = nb__graph_value_of(g, t);
    nb_release(t);
    return v.node < 0 ? NULL : nb__graph_tensor(g, v);
}

/* acc[i] = d loss / d wrt[i] (owned, NULL when the loss does not reach wrt[i]). */
static nb_status walk(nb_graph *g, nb_tensor *loss, int n, nb_tensor *const *wrt, nb_tensor **acc) {
    int32_t last = loss->gnode, norder = 0;
    bool *dep = nb__calloc((size_t)last + 1, sizeof *dep);
    nb_tensor **grads = dep ? nb__calloc((size_t)last + 1, sizeof *grads) : NULL;
    int32_t *order = grads ? nb__calloc((size_t)last + 1, sizeof *order) : NULL;
    nb_status st = NB_OK;
    if (!order) st = nb__error(NB_ERR_OOM, "%s: out of memory for graph '%s'", OP, g->name);
    if (st == NB_OK) mark_dependents(g, last, wrt, n, dep);
    if (st == NB_OK && loss->gout == 0 && dep[last]) {
        grads[last] = nb__scope_take(nb_ones_like(loss)); /* the seed */
        if (!grads[last]) st = nb_last_status();
        else if ((norder = post_order(g, last, dep, order)) < 0) st = nb_last_status();
    }
    for (int32_t k = norder - 1; k >= 0 && st == NB_OK; k--) {
        int32_t id = order[k];
        nb_tensor *gr = grads[id];
        if (!gr) continue;
        grads[id] = NULL;
        /* a wrt value's gradient is the one reaching its node; it keeps flowing to earlier wrt */
        for (int i = 0; i < n && st == NB_OK; i++)
            if (wrt[i]->gnode == id && wrt[i]->gout == 0) st = accumulate(&acc[i], nb_retain(gr));
        nb_gnode nd = g->nodes[id]; /* a copy: the rule appends nodes, which may move the array */
        if (st == NB_OK) st = back_through(g, &nd, gr, dep, grads);
        else nb_release(gr);
    }
    if (grads)
        for (int32_t id = 0; id <= last; id++) nb_release(grads[id]);
    nb__free(order);
    nb__free(grads);
    nb__free(dep);
    return st;
}

static nb_status check(nb_tensor *loss, int n, nb_tensor *const *wrt, nb_tensor **grads) {
    if (!loss) return nb__error(NB_ERR_NULL, "%s: loss is NULL", OP);
    if (n < 0) return nb__error(NB_ERR_ARG, "%s: %d wrt tensors", OP, n);
    if (n > 0 && (!wrt || !grads)) return nb__error(NB_ERR_NULL, "%s: wrt or grads is NULL", OP);
    for (int i = 0; i < n; i++)
        if (!wrt[i]) return nb__error(NB_ERR_NULL, "%s: wrt[%d] is NULL", OP, i);
    if (!nb__is_symbolic(loss))
        return nb__error(NB_ERR_STATE, "%s: loss is not a symbolic tensor (trace it between nb_graph_begin and "
                         "nb_graph_end; eager results use nb_backward)", OP);
    nb_graph *g = loss->graph;
    if (nb__graph_tracing() != g)
        return nb__error(NB_ERR_STATE, "%s: the loss's graph '%s' is not the graph being traced on this thread "
                         "(the innermost nb_graph_begin)", OP, g->name);
    if (!nb_dtype_is_float(loss->dtype))
        return nb__error(NB_ERR_DTYPE, "%s: loss has dtype %s; only float losses have gradients", OP,
                         nb_dtype_name(loss->dtype));
    if (nb__dims_any_sym(loss->shape, loss->ndim) || nb__numel(loss) != 1)
        return nb__error(NB_ERR_SHAPE, "%s: loss of shape %s is not a scalar (one element)", OP, NB_SHAPE_STR(loss));
    for (int i = 0; i < n; i++) {
        if (wrt[i]->graph != g)
            return nb__error(NB_ERR_STATE, "%s: wrt[%d] is not a symbolic tensor of the loss's graph '%s'", OP, i,
                             g->name);
        if (!nb_dtype_is_float(wrt[i]->dtype))
            return nb__error(NB_ERR_DTYPE, "%s: wrt[%d] has dtype %s; only float tensors have gradients", OP, i,
                             nb_dtype_name(wrt[i]->dtype));
    }
    return NB_OK;
}

static nb_status graph_grad(nb_tensor *loss, int n, nb_tensor *const *wrt, nb_tensor **grads) {
    for (int i = 0; grads && i < n; i++) grads[i] = NULL;
    nb_status st = check(loss, n, wrt, grads);
    if (st != NB_OK) return st;
    nb_graph *g = loss->graph;
    st = walk(g, loss, n, wrt, grads);
    for (int i = 0; i < n && st == NB_OK; i++) {
        nb_tensor *r = grads[i] ? grads[i] : nb__scope_take(nb_zeros_like(wrt[i])); /* not reached */
        grads[i] = in_graph(g, r);
        if (!grads[i]) st = nb_last_status() ? nb_last_status() : NB_ERR_OOM;
    }
    for (int i = 0; i < n; i++) {
        if (st == NB_OK && !(grads[i] = nb__own(grads[i]))) /* released: its scope had no room */
            st = nb_last_status() ? nb_last_status() : NB_ERR_OOM;
        else if (st != NB_OK) {
            nb_release(grads[i]);
            grads[i] = NULL;
        }
    }
    for (int i = 0; st != NB_OK && i < n; i++) grads[i] = NULL; /* those owned before a failure stay with the scope */
    return st;
}

nb_status nb_graph_grad(nb_tensor *loss, int n, nb_tensor *const *wrt, nb_tensor **grads) {
    NB_OWN_STATUS(OP, graph_grad(loss, n, wrt, grads));
}
