/*
 * module.c — the module tree (N1): records, the Sequential container, the
 * training flag, forward dispatch, and parameters under dotted torch-style
 * names ("fc1.weight", "0.bias"), flattened depth-first on demand.
 */
#include "nn_internal.h"

#include <stdio.h>
#include <string.h>

nb_module *nb__module_new(const char *kind, nb_tensor *(*forward)(nb_module *, nb_tensor *)) {
    nb_module *m = nb__calloc(1, sizeof *m);
    if (!m) {
        nb__error(NB_ERR_OOM, "%s: out of memory", kind);
        return NULL;
    }
    m->kind = kind;
    m->forward = forward;
    m->training = true;
    return m;
}

void nb__module_add_param(nb_module *m, const char *name, nb_tensor *t) {
    NB_ASSERT(m->nparam < NB_MODULE_MAX_PARAMS);
    m->pname[m->nparam] = name;
    m->param[m->nparam++] = t;
}

static void flat_clear(nb_module *m) {
    for (int i = 0; i < m->nflat; i++) nb__free(m->flat_name[i]);
    nb__free(m->flat_name);
    nb__free(m->flat);
    m->flat_name = NULL;
    m->flat = NULL;
    m->nflat = 0;
    m->flat_valid = false;
}

/* The tree under m changed: drop the cached lists of m and its ancestors. */
static void invalidate(nb_module *m) {
    for (; m; m = m->parent) flat_clear(m);
}

void nb_module_free(nb_module *m) {
    if (!m) return;
    if (m->parent) { /* owned by its container: freed with it */
        nb__error_set(NB_ERR_STATE, "module_free: the %s belongs to a container; free the container", m->kind);
        return;
    }
    for (int i = 0; i < m->nchild; i++) {
        m->child[i]->parent = NULL;
        nb_module_free(m->child[i]);
        nb__free(m->cname[i]);
    }
    for (int i = 0; i < m->nparam; i++) nb_release(m->param[i]);
    flat_clear(m);
    nb__free(m->child);
    nb__free(m->cname);
    nb__free(m);
}

/* ---- Sequential ---- */

/* The children in order; a layer with forward_relu (Linear, Conv2d) and the ReLU after it run as
 * one op, relu in the product's epilogue: the same values and gradients bit for bit, one pass
 * fewer over the activation each way. */
static nb_tensor *sequential_forward(nb_module *m, nb_tensor *x) {
    NB_COMPOSITE_BEGIN();
    for (int i = 0; i < m->nchild && x; i++) {
        nb_module *c = m->child[i];
        if (c->forward_relu && i + 1 < m->nchild && m->child[i + 1]->forward == nb__relu_forward)
            x = c->forward_relu(c, x), i++;
        else
            x = c->forward(c, x);
    }
    NB_COMPOSITE_RETURN(x);
}

nb_module *nb_nn_sequential(void) { return nb__module_new("Sequential", sequential_forward); }

static bool name_ok(nb_module *seq, const char *name) {
    if (!*name || strchr(name, '.')) {
        nb__error_set(NB_ERR_ARG, "sequential_add: child name '%s' must be non-empty and free of '.'", name);
        return false;
    }
    for (int i = 0; i < seq->nchild; i++)
        if (!strcmp(seq->cname[i], name)) {
            nb__error_set(NB_ERR_ARG, "sequential_add: a child named '%s' already exists", name);
            return false;
        }
    return true;
}

nb_status nb__module_add_child(nb_module *seq, const char *name, nb_module *child) {
    char index[24];
    if (!name) {
        snprintf(index, sizeof index, "%d", seq->nchild);
        name = index;
    }
    if (!name_ok(seq, name)) return NB_ERR_ARG;
    if (seq->nchild == seq->cap) {
        int cap = seq->cap ? 2 * seq->cap : 8;
        nb_module **c = nb__realloc(seq->child, sizeof *c * (size_t)cap);
        if (c) seq->child = c;
        char **n = c ? nb__realloc(seq->cname, sizeof *n * (size_t)cap) : NULL;
        if (n) seq->cname = n;
        if (!c || !n) return nb__error_set(NB_ERR_OOM, "sequential_add: out of memory");
        seq->cap = cap;
    }
    char *copy = nb__strdup(name);
    if (!copy) return nb__error_set(NB_ERR_OOM, "sequential_add: out of memory");
    seq->cname[seq->nchild] = copy;
    seq->child[seq->nchild++] = child;
    child->parent = seq;
    invalidate(seq);
    return NB_OK;
}

nb_status nb_sequential_add(nb_module *seq, const char *name, nb_module *child) {
    nb_status st;
    if (!seq || !child) st = nb__error_set(NB_ERR_NULL, "sequential_add: %s is NULL", seq ? "child" : "container");
    else if (seq->forward != sequential_forward)
        st = nb__error_set(NB_ERR_ARG, "sequential_add: the container is a %s, not a Sequential", seq->kind);
    else if (child->parent || child == seq)
        return nb__error_set(NB_ERR_ARG, "sequential_add: the %s already belongs to a container", child->kind);
    else st = nb__module_add_child(seq, name, child);
    if (st != NB_OK && !(child && child->parent)) nb_module_free(child);
    return st;
}

/* ---- forward, mode ---- */

nb_tensor *nb_module_forward(nb_module *m, nb_tensor *x) {
    if (!m) {
        nb__error(NB_ERR_NULL, "module_forward: module is NULL");
        return NULL;
    }
    NB_CHECK_ARG(m->kind, x);
    return m->forward(m, x);
}

void nb_module_train(nb_module *m, bool training) {
    if (!m) return;
    m->training = training;
    for (int i = 0; i < m->nchild; i++) nb_module_train(m->child[i], training);
}

/* ---- parameters ---- */

static bool flat_push(nb_module *root, const char *prefix, const char *name, nb_tensor *t) {
    size_t len = strlen(prefix) + strlen(name) + 1;
    char *full = nb__malloc(len);
    char **names = nb__realloc(root->flat_name, sizeof *names * (size_t)(root->nflat + 1));
    if (names) root->flat_name = names;
    nb_tensor **ts = names ? nb__realloc(root->flat, sizeof *ts * (size_t)(root->nflat + 1)) : NULL;
    if (ts) root->flat = ts;
    if (!full || !ts) {
        nb__free(full);
        return false;
    }
    snprintf(full, len, "%s%s", prefix, name);
    root->flat_name[root->nflat] = full;
    root->flat[root->nflat++] = t;
    return true;
}

static bool flatten_into(nb_module *root, nb_module *m, const char *prefix) {
    for (int i = 0; i < m->nparam; i++)
        if (!flat_push(root, prefix, m->pname[i], m->param[i])) return false;
    for (int i = 0; i < m->nchild; i++) {
        size_t len = strlen(prefix) + strlen(m->cname[i]) + 2;
        char *sub = nb__malloc(len);
        if (!sub) return false;
        snprintf(sub, len, "%s%s.", prefix, m->cname[i]);
        bool ok = flatten_into(root, m->child[i], sub);
        nb__free(sub);
        if (!ok) return false;
    }
    return true;
}

/* The cached flat list of m, built when needed; false with NB_ERR_NULL / NB_ERR_OOM. */
static bool flat_ready(nb_module *m, const char *op) {
    if (!m) {
        nb__error(NB_ERR_NULL, "%s: module is NULL", op);
        return false;
    }
    if (m->flat_valid) return true;
    flat_clear(m);
    if (!flatten_into(m, m, "")) {
        flat_clear(m);
        nb__error(NB_ERR_OOM, "%s: out of memory", op);
        return false;
    }
    m->flat_valid = true;
    return true;
}

int nb_module_param_count(nb_module *m) { return flat_ready(m, "module_param_count") ? m->nflat : -1; }

const char *nb_module_param_name(nb_module *m, int i) {
    if (!flat_ready(m, "module_param_name")) return NULL;
    return i >= 0 && i < m->nflat ? m->flat_name[i] : NULL;
}

nb_tensor *nb_module_param(nb_module *m, int i) {
    if (!flat_ready(m, "module_param")) return NULL;
    if (i < 0 || i >= m->nflat) {
        nb__error(NB_ERR_INDEX, "module_param: index %d outside [0, %d)", i, m->nflat);
        return NULL;
    }
    return nb__own(nb_retain(m->flat[i]));
}

nb_tensor *nb_module_param_named(nb_module *m, const char *name) {
    if (!flat_ready(m, "module_param_named")) return NULL;
    for (int i = 0; name && i < m->nflat; i++)
        if (!strcmp(m->flat_name[i], name)) return nb__own(nb_retain(m->flat[i]));
    nb__error(NB_ERR_ARG, "module_param_named: the %s has no parameter '%s'", m->kind, name ? name : "(null)");
    return NULL;
}

int nb_module_params(nb_module *m, nb_tensor **out, int max) {
    if (!flat_ready(m, "module_params")) return -1;
    if (max > 0 && !out) {
        nb__error(NB_ERR_NULL, "module_params: out is NULL");
        return -1;
    }
    for (int i = 0; i < m->nflat && i < max; i++)
        if (!(out[i] = nb__own(nb_retain(m->flat[i])))) return -1; /* the scope holds out[0 … i-1] */
    return m->nflat;
}
