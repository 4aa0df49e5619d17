/*
 * hooks.c — post-accumulate gradient hooks: a process-wide registry of
 * (leaf, fn, ctx) and, for one backward pass, the countdown of each hooked
 * leaf's pending contributions, so a hook fires right after the leaf's last
 * one (backward.c).
 */
#include "hooks.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct hook {
    int64_t id;
    nb_tensor *leaf;
    nb_grad_hook_fn fn;
    void *ctx;
} hook;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static hook *hooks;
static int nhooks, cap;
static int64_t next_id = 1;

int64_t nb_register_post_accumulate_grad_hook(nb_tensor *leaf, nb_grad_hook_fn fn, void *ctx) {
    const char *op = "register_post_accumulate_grad_hook";
    if (!leaf || !fn) {
        nb__error(NB_ERR_NULL, "%s: %s is NULL", op, leaf ? "fn" : "leaf");
        return 0;
    }
    if (leaf->node || !leaf->requires_grad) {
        nb__error(NB_ERR_STATE, "%s: the tensor is not a tracked leaf (nb_set_requires_grad)", op);
        return 0;
    }
    pthread_mutex_lock(&lock);
    int64_t id = 0;
    if (nhooks == cap) {
        int nc = cap ? 2 * cap : 16;
        hook *h = nb__realloc(hooks, sizeof *h * (size_t)nc);
        if (h) {
            hooks = h;
            cap = nc;
        }
    }
    if (nhooks < cap) {
        id = next_id++;
        hooks[nhooks++] = (hook){id, nb_retain(leaf), fn, ctx};
    }
    pthread_mutex_unlock(&lock);
    if (!id) nb__error(NB_ERR_OOM, "%s: out of memory", op);
    return id;
}

nb_status nb_remove_grad_hook(int64_t id) {
    nb_tensor *leaf = NULL;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nhooks; i++)
        if (hooks[i].id == id) {
            leaf = hooks[i].leaf;
            memmove(hooks + i, hooks + i + 1, sizeof *hooks * (size_t)(nhooks - i - 1));
            nhooks--;
            break;
        }
    if (nhooks == 0) { /* none left: no memory kept */
        nb__free(hooks);
        hooks = NULL;
        cap = 0;
    }
    pthread_mutex_unlock(&lock);
    if (!leaf) return nb__error(NB_ERR_ARG, "remove_grad_hook: no hook with id %lld", (long long)id);
    nb_release(leaf);
    return NB_OK;
}

/* One pass's view: the hooked leaves its tape reaches and their pending contributions. */
struct nb__hook_pass {
    int n;
    hook *h;        /* copies sorted by leaf, then id (leaves not retained: the registry holds them) */
    int64_t *left;  /* per copy: contributions still to come */
};

static _Thread_local bool tl_in_hook; /* a hook of this thread is running */

bool nb__hooks_running(void) { return tl_in_hook; }

static int by_leaf(const void *a, const void *b) {
    const hook *x = a, *y = b;
    uintptr_t u = (uintptr_t)x->leaf, v = (uintptr_t)y->leaf;
    return u != v ? (u > v) - (u < v) : (x->id > y->id) - (x->id < y->id);
}

/* The first copy of leaf in p's sorted hooks, or p->n. */
static int first_of(const nb__hook_pass *p, const nb_tensor *leaf) {
    int lo = 0, hi = p->n;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((uintptr_t)p->h[mid].leaf < (uintptr_t)leaf) lo = mid + 1;
        else hi = mid;
    }
    return lo < p->n && p->h[lo].leaf == leaf ? lo : p->n;
}

nb_status nb__hooks_begin(nb_node *const *order, size_t n, nb__hook_pass **out) {
    *out = NULL;
    pthread_mutex_lock(&lock);
    nb__hook_pass *p = NULL;
    bool oom = false;
    if (nhooks > 0) {
        p = nb__calloc(1, sizeof *p);
        if (p) p->h = nb__malloc(sizeof *p->h * (size_t)nhooks);
        if (p && p->h) p->left = nb__calloc((size_t)nhooks, sizeof *p->left);
        oom = !p || !p->h || !p->left;
        if (!oom) {
            p->n = nhooks;
            memcpy(p->h, hooks, sizeof *hooks * (size_t)nhooks);
            qsort(p->h, (size_t)nhooks, sizeof *p->h, by_leaf);
        }
    }
    pthread_mutex_unlock(&lock);
    if (oom) {
        nb__hooks_end(p);
        return nb__error(NB_ERR_OOM, "backward: out of memory for the gradient hooks");
    }
    for (size_t k = 0; p && k < n; k++)
        for (int i = 0; i < order[k]->n_in; i++)
            for (int j = first_of(p, order[k]->in[i]); j < p->n && p->h[j].leaf == order[k]->in[i]; j++) p->left[j]++;
    *out = p;
    return NB_OK;
}

void nb__hooks_node_done(nb__hook_pass *p, const nb_node *node) {
    for (int i = 0; p && i < node->n_in; i++)
        for (int j = first_of(p, node->in[i]); j < p->n && p->h[j].leaf == node->in[i]; j++)
            if (--p->left[j] == 0) {
                tl_in_hook = true;
                p->h[j].fn(p->h[j].ctx, p->h[j].leaf);
                tl_in_hook = false;
            }
}

void nb__hooks_end(nb__hook_pass *p) {
    if (!p) return;
    nb__free(p->h);
    nb__free(p->left);
    nb__free(p);
}
