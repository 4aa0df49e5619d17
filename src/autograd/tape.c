/*
 * tape.c — recording: tape nodes attached to op results while recording is
 * on and an input is tracked; the per-thread no_grad switch; leaf flags,
 * accumulated gradients and detach.
 */
#include "../ops/ops.h"

#include <stdlib.h>
#include <string.h>

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
    nb_node *node = calloc(1, sizeof *node + sizeof(nb_tensor *) * (size_t)n);
    nb_tensor *alias = node ? nb__tensor_view_of(out->storage, out->shape, out->stride, out->ndim,
                                                 out->offset, out->dtype)
                            : NULL;
    if (!alias) {
        free(node);
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
    /* Iterative: dropping a long chain must not recurse once per node. */
    nb_node *stack_small[64], **stack = stack_small;
    size_t sp = 0, cap = 64;
    stack[sp++] = n;
    while (sp) {
        nb_node *x = stack[--sp];
        if (atomic_fetch_sub(&x->refs, 1) != 1) continue;
        for (int i = 0; i < x->n_in; i++) {
            nb_tensor *t = x->in[i];
            if (!t) continue;
            if (atomic_load(&t->refs) == 1 && t->node) {
                /* last reference: free the tensor here, push its node */
                nb_node *child = t->node;
                t->node = NULL;
                nb_release(t);
                if (sp == cap) {
                    nb_node **bigger = malloc(sizeof *bigger * cap * 2);
                    if (!bigger) NB_ASSERT(!"tape release stack allocation failed");
                    memcpy(bigger, stack, sizeof *bigger * sp);
                    if (stack != stack_small) free(stack);
                    stack = bigger;
                    cap *= 2;
                }
                stack[sp++] = child;
            } else {
                nb_release(t);
            }
        }
        nb_release(x->out);
        free(x);
    }
    if (stack != stack_small) free(stack);
}

nb_status nb_set_requires_grad(nb_tensor *t, bool requires_grad) {
    if (!t) return nb__error_set(NB_ERR_NULL, "set_requires_grad: tensor is NULL");
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
    return nb__own(nb__tensor_view_of(t->storage, t->shape, t->stride, t->ndim, t->offset, t->dtype));
}
