/*
 * tape.c — recording: tape nodes attached to op results while recording is
 * on and an input is tracked; the per-thread no_grad switch; leaf flags,
 * accumulated gradients and detach.
 */
#include "../graph/graph.h"

static _Thread_local int tl_no_grad;
static atomic_ulong node_seq;

void nb_no_grad_begin(void) { tl_no_grad++; }
void nb_no_grad_end(void) {
    if (tl_no_grad > 0) tl_no_grad--;
}
bool nb_grad_enabled(void) { return tl_no_grad == 0; }

bool nb__should_record(nb_tensor *const *in, int n) {
    if (tl_no_grad) return false;
    for (int i = 0; i < n; i++)
        if (nb__tracked(in[i])) return true;
    return false;
}

nb_tensor *nb__record(nb_tensor *out, int op, nb_tensor *const *in, int n, const nb_attrs *attrs) {
    NB_ASSERT(!out->node);
    nb_node *node = nb__calloc(1, sizeof *node + sizeof(nb_tensor *) * (size_t)n);
    nb_tensor *alias = node ? nb__tensor_view_of(out->storage, out->shape, out->stride, out->ndim,
                                                 out->offset, out->dtype)
                            : NULL;
    if (!alias) {
        nb__free(node);
        nb_release(out);
        nb__error(NB_ERR_OOM, "%s: out of memory recording the tape", nb__ops[op].name);
        return NULL;
    }
    atomic_init(&node->refs, 1);
    node->op = op;
    node->n_in = n;
    node->out = alias;
    if (attrs) node->attrs = *attrs;
    node->seq = atomic_fetch_add(&node_seq, 1);
    for (int i = 0; i < n; i++) node->in[i] = nb_retain(in[i]);
    out->node = node;
    out->requires_grad = true;
    return out;
}

void nb__node_release(nb_node *n) {
    /* Iterative, and without allocating: dropping a long chain must neither
     * recurse once per node nor fail.  Dead nodes (no references left) wait
     * in a list linked through their own `dead_next`. */
    if (!n || atomic_fetch_sub(&n->refs, 1) != 1) return;
    n->dead_next = NULL;
    while (n) {
        nb_node *x = n;
        n = x->dead_next;
        for (int i = 0; i < x->n_in; i++) {
            nb_tensor *t = x->in[i];
            nb_node *child = t && atomic_load(&t->refs) == 1 ? t->node : NULL;
            if (child) t->node = NULL; /* last reference: free the tensor here, its node below */
            nb_release(t);
            if (child && atomic_fetch_sub(&child->refs, 1) == 1) {
                child->dead_next = n;
                n = child;
            }
        }
        nb_release(x->out);
        nb__free(x);
    }
}

nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad) {
    if (!t) return nb__error_set(NB_ERR_NULL, "set_requires_grad: tensor is NULL");
    if (nb__is_symbolic(t))
        return nb__error_set(NB_ERR_STATE, "set_requires_grad: the tensor is %s; the tape records concrete tensors "
                             "only (differentiate a graph with nb_graph_grad)", t->graph->lazy ? "lazy" : "symbolic");
    if (t->node)
        return nb__error_set(NB_ERR_STATE, "set_requires_grad: only leaf tensors can be flagged (this one is the result of '%s')",
                             nb__ops[t->node->op].name);
    if (requires_grad && !nb_dtype_is_float(t->dtype))
        return nb__error_set(NB_ERR_DTYPE, "set_requires_grad: only float tensors can require gradients, got %s",
                             nb_dtype_name(t->dtype));
    t->requires_grad = requires_grad;
    return NB_OK;
}

bool nb_requires_grad(const nb_tensor *t) { return t && t->requires_grad; }
bool nb_is_leaf(const nb_tensor *t) { return t && !t->node; }

nb_tensor *nb_grad(nb_tensor *t) {
    NB_CHECK_ARG("grad", t);
    return nb__own(nb_retain(t->grad));
}

void nb_zero_grad(nb_tensor *t) {
    if (!t) return;
    nb_release(t->grad);
    t->grad = NULL;
}

nb_tensor *nb_detach(nb_tensor *t) {
    NB_CHECK_ARG("detach", t);
    return nb__own(nb__apply(NB_OP_DETACH, &t, 1, NULL)); /* a DETACH node stops graph gradients too */
}
