/*
 * backward.c — the reverse-mode pass: topological order of the tape nodes
 * reachable from the root, gradient propagation through each node's VJP
 * (from the op table), reduction of broadcast gradients to input shapes,
 * and accumulation into leaves or into requested outputs.
 */
#include "hooks.h"
#include "vjp.h"

#include <string.h>

static atomic_ulong pass_counter = 1;

typedef struct vec {
    nb_node **v;
    size_t n, cap;
} vec;

static bool vec_push(vec *s, nb_node *x) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 64;
        nb_node **v = nb__realloc(s->v, sizeof *v * cap);
        if (!v) return false;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = x;
    return true;
}

/* Post-order DFS (iterative) over nodes reachable from root. */
static bool topo(nb_node *root, uint64_t pass, vec *order) {
    vec stack = {0};
    vec child_i = {0}; /* parallel stack of next-child indices, stored as pointers */
    bool ok = vec_push(&stack, root) && vec_push(&child_i, NULL);
    root->mark = pass;
    while (ok && stack.n) {
        nb_node *n = stack.v[stack.n - 1];
        uintptr_t i = (uintptr_t)child_i.v[child_i.n - 1];
        if ((int)i < n->n_in) {
            child_i.v[child_i.n - 1] = (nb_node *)(i + 1);
            nb_tensor *t = n->in[i];
            if (t && t->node && t->node->mark != pass) {
                t->node->mark = pass;
                ok = vec_push(&stack, t->node) && vec_push(&child_i, NULL);
            }
        } else {
            stack.n--;
            child_i.n--;
            n->slot = (int64_t)order->n;
            ok = vec_push(order, n);
        }
    }
    nb__free(stack.v);
    nb__free(child_i.v);
    return ok;
}

nb_tensor *nb__grad_add(nb_tensor *acc, nb_tensor *g) {
    if (!acc) return g;
    nb_tensor *s = nb__binary(NB_OP_ADD, acc, g);
    nb_release(acc);
    nb_release(g);
    return s;
}

/* *slot += g (g borrowed), for a requested gradient. */
static nb_status accumulate_out(nb_tensor **slot, nb_tensor *g) {
    *slot = nb__grad_add(*slot, nb_retain(g));
    return *slot ? NB_OK : nb_last_status();
}

/* g (owned) as a tensor nobody else holds: a VJP may hand one gradient to
 * several inputs, or pass the caller's seed through, and a leaf's grad must
 * not change when another grad or the seed is updated in place. */
static nb_tensor *exclusive(nb_tensor *g) {
    bool alone = atomic_load(&g->refs) == 1 && atomic_load(&g->storage->refs) == (g->node ? 2 : 1);
    if (alone) return g;
    nb_tensor *c = nb__scope_take(nb_clone(g));
    nb_release(g);
    return c;
}

/* leaf.grad += g (consumes g). */
static nb_status accumulate_leaf(nb_tensor *leaf, nb_tensor *g) {
    nb_tensor *s = leaf->grad ? nb__binary(NB_OP_ADD, leaf->grad, g) : exclusive(g);
    if (leaf->grad) nb_release(g);
    if (!s) return nb_last_status(); /* the gradient held so far stays */
    nb_release(leaf->grad);
    leaf->grad = s;
    return NB_OK;
}

nb_tensor *nb__grad_conform(nb_tensor *g, const nb_tensor *x) {
    if (!g) return NULL;
    if (!nb__same_shape(g, x)) {
        nb_tensor *s = nb__sum_to(g, x->shape, x->ndim);
        nb_release(g);
        g = s;
    }
    if (g && g->dtype != x->dtype) {
        nb_tensor *c = nb__scope_take(nb_cast(g, x->dtype));
        nb_release(g);
        g = c;
    }
    return g;
}

static nb_status engine(nb_tensor *root, nb_tensor *seed, nb_tensor *const *inputs, int n_inputs,
                        bool create_graph, nb_tensor **grads_out) {
    const char *op = inputs ? "autograd_grad" : "backward";
    if (!root) return nb__error(NB_ERR_NULL, "%s: root is NULL", op);
    if (nb__hooks_running())
        return nb__error_set(NB_ERR_STATE, "%s: called from a gradient hook inside a backward pass", op);
    if (!root->requires_grad)
        return nb__error_set(NB_ERR_STATE, "%s: root does not require grad (no tracked input reached it)", op);
    nb_tensor *g0;
    if (seed) {
        if (!nb__same_shape(seed, root))
            return nb__error_set(NB_ERR_SHAPE, "%s: seed shape %s differs from root shape %s", op,
                                 NB_SHAPE_STR(seed), NB_SHAPE_STR(root));
        if (!nb__same_device(seed->storage->device, root->storage->device))
            return nb__error_set(NB_ERR_DEVICE, "%s: seed and root are on different devices", op);
        /* a seed of another dtype is cast to root's, as every gradient is to its value's (torch too) */
        if (!(g0 = nb__grad_conform(nb_retain(seed), root))) return nb_last_status();
    } else {
        if (nb__numel(root) != 1)
            return nb__error_set(NB_ERR_SHAPE, "%s: root of shape %s is not a scalar; pass a seed", op,
                                 NB_SHAPE_STR(root));
        g0 = nb__full_on(root->shape, root->ndim, 1, root->dtype, root->storage->device);
        if (!g0) return nb_last_status();
    }
    for (int i = 0; i < n_inputs; i++) grads_out[i] = NULL;

    nb_status st = NB_OK;
    if (!create_graph) nb_no_grad_begin();
    if (!root->node) { /* the root is itself a leaf */
        for (int i = 0; i < n_inputs; i++)
            if (inputs[i] == root) grads_out[i] = nb_retain(g0);
        if (!inputs) st = accumulate_leaf(root, nb_retain(g0));
        nb_release(g0);
        goto done;
    }
    uint64_t pass = atomic_fetch_add(&pass_counter, 1);
    vec order = {0};
    if (!topo(root->node, pass, &order)) {
        nb__free(order.v);
        nb_release(g0);
        st = nb__error(NB_ERR_OOM, "%s: out of memory sorting the tape", op);
        goto done;
    }
    nb_tensor **grads = nb__calloc(order.n, sizeof *grads);
    if (!grads) {
        nb__free(order.v);
        nb_release(g0);
        st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
        goto done;
    }
    grads[root->node->slot] = g0;
    nb__hook_pass *hp = NULL; /* post-accumulate hooks: only when leaves' grads accumulate */
    if (!inputs) st = nb__hooks_begin(order.v, order.n, &hp);
    for (size_t k = order.n; k-- > 0 && st == NB_OK;) {
        nb_node *n = order.v[k];
        nb_tensor *g = grads[k];
        grads[k] = NULL;
        if (!g) {
            nb__hooks_node_done(hp, n);
            continue;
        }
        /* a requested non-leaf input: its gradient is the one reaching its node */
        for (int i = 0; i < n_inputs && st == NB_OK; i++)
            if (inputs[i] && inputs[i]->node == n) st = accumulate_out(&grads_out[i], g);
        if (st != NB_OK) {
            nb_release(g);
            break;
        }
        nb_vjp_fn vjp = nb__ops[n->op].vjp;
        NB_ASSERT(vjp);
        nb_tensor *gin_s[8] = {0}, **gin = n->n_in <= 8 ? gin_s : nb__calloc((size_t)n->n_in, sizeof *gin);
        if (!gin) {
            nb_release(g);
            st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
            break;
        }
        nb_scope_begin();
        st = vjp(n, g, gin);
        /* the pass runs with a clean error state (NB_OWN_STATUS), so an error
         * recorded now is a failing op inside the rule, never an absent gradient */
        if (st == NB_OK) st = nb_last_status();
        for (int i = 0; i < n->n_in; i++) gin[i] = nb__scope_take(gin[i]);
        nb_scope_end();
        nb_release(g);
        if (st == NB_OK)
            for (int i = 0; i < n->n_in && st == NB_OK; i++) {
                nb_tensor *x = n->in[i];
                if (!gin[i] || !nb__tracked(x)) continue;
                nb_tensor *gi = nb__grad_conform(gin[i], x);
                gin[i] = NULL;
                if (!gi) {
                    st = nb_last_status() ? nb_last_status() : NB_ERR_OOM;
                    break;
                }
                if (x->node) {
                    int64_t s = x->node->slot;
                    grads[s] = nb__grad_add(grads[s], gi);
                    if (!grads[s]) st = nb_last_status();
                } else if (inputs) { /* leaves not asked for are skipped */
                    for (int j = 0; j < n_inputs && st == NB_OK; j++)
                        if (inputs[j] == x) st = accumulate_out(&grads_out[j], gi);
                    nb_release(gi);
                } else {
                    st = accumulate_leaf(x, gi);
                }
            }
        for (int i = 0; i < n->n_in; i++) nb_release(gin[i]);
        if (gin != gin_s) nb__free(gin);
        if (st == NB_OK) nb__hooks_node_done(hp, n);
        if (st == NB_OK) st = nb_last_status(); /* a hook's failure */
    }
    nb__hooks_end(hp);
    for (size_t k = 0; k < order.n; k++) nb_release(grads[k]);
    nb__free(grads);
    nb__free(order.v);
done:
    if (!create_graph) nb_no_grad_end();
    if (st == NB_OK) st = nb_last_status(); /* any failed accumulation or conversion */
    if (st == NB_OK && inputs) {
        for (int i = 0; i < n_inputs; i++)
            if (!grads_out[i] && inputs[i]) {
                grads_out[i] = nb__full_on(inputs[i]->shape, inputs[i]->ndim, 0, inputs[i]->dtype,
                                           inputs[i]->storage->device);
                if (!grads_out[i]) st = nb_last_status();
            }
    }
    if (st != NB_OK && inputs)
        for (int i = 0; i < n_inputs; i++) {
            nb_release(grads_out[i]);
            grads_out[i] = NULL;
        }
    return st;
}

nb_status nb_backward(nb_tensor *root, nb_tensor *seed, bool create_graph) {
    NB_OWN_STATUS("backward", engine(root, seed, NULL, 0, create_graph, NULL));
}

static nb_status grad_impl(nb_tensor *root, nb_tensor *seed, nb_tensor *const *inputs, int n,
                           bool create_graph, nb_tensor **grads_out) {
    if (n < 0) return nb__error_set(NB_ERR_ARG, "autograd_grad: %d inputs", n);
    if (n > 0 && (!inputs || !grads_out))
        return nb__error_set(NB_ERR_NULL, "autograd_grad: inputs or grads_out is NULL");
    for (int i = 0; i < n; i++) grads_out[i] = NULL;
    for (int i = 0; i < n; i++) {
        if (!inputs[i]) return nb__error(NB_ERR_NULL, "autograd_grad: input %d is NULL", i);
        if (!inputs[i]->requires_grad)
            return nb__error_set(NB_ERR_STATE, "autograd_grad: input %d does not require grad", i);
    }
    nb_status st = engine(root, seed, inputs, n, create_graph, grads_out);
    for (int i = 0; i < n && st == NB_OK; i++) {
        if ((grads_out[i] = nb__own(grads_out[i]))) continue;
        st = nb_last_status(); /* the scope could not take it */
        for (int j = 0; j < n; j++) {
            if (j > i) nb_release(grads_out[j]);
            grads_out[j] = NULL; /* those before i belong to the scope */
        }
    }
    return st;
}

nb_status nb_autograd_grad(nb_tensor *root, nb_tensor *seed, nb_tensor *const *inputs, int n,
                           bool create_graph, nb_tensor **grads_out) {
    NB_OWN_STATUS("autograd_grad", grad_impl(root, seed, inputs, n, create_graph, grads_out));
}
