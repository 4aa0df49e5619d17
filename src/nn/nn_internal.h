/* nn_internal.h — the module record shared by the container code (module.c) and the layers (layers.c). */
#ifndef NB_NN_INTERNAL_H
#define NB_NN_INTERNAL_H

#include "../ops/ops.h"

#define NB_MODULE_MAX_PARAMS 2

struct nb_module {
    const char *kind; /* "Linear", "Sequential", … (messages) */
    /** Layer computation; returns a new (scoped) reference. */
    nb_tensor *(*forward)(nb_module *m, nb_tensor *x);
    /** forward, then relu, as one op (Linear, Conv2d: relu in the product's epilogue); NULL for
     *  other layers.  A Sequential runs it for the layer and the ReLU that follows it. */
    nb_tensor *(*forward_relu)(nb_module *m, nb_tensor *x);
    nb_tensor *param[NB_MODULE_MAX_PARAMS]; /* own parameters (leaves, unscoped references) */
    const char *pname[NB_MODULE_MAX_PARAMS];
    int nparam;
    union { /* per-layer settings */
        nb_conv2d_opts conv;
        nb_window2d pool;
        struct { int start, end; } flat;
        struct { int nnorm; double eps; } norm;
        struct { int64_t heads, kv_heads; nb_attention_opts opts; } attn;
        double p;
    } cfg;
    bool training;
    nb_module *parent;
    /* container: children and their names */
    nb_module **child;
    char **cname;
    int nchild, cap;
    /* flattened dotted parameter list, rebuilt when the tree changes */
    char **flat_name;
    nb_tensor **flat;
    int nflat;
    bool flat_valid;
};

/** A zeroed module of `kind` with forward fn, in training mode; NULL with NB_ERR_OOM. */
nb_module *nb__module_new(const char *kind, nb_tensor *(*forward)(nb_module *, nb_tensor *));
/** Append child (owned from here on, unless this fails with NB_ERR_ARG / NB_ERR_OOM) to m's
 *  children as `name` (NULL: its position). */
nb_status nb__module_add_child(nb_module *m, const char *name, nb_module *child);
/** The ReLU module's forward (a Sequential recognizes the ReLU after a layer by it). */
nb_tensor *nb__relu_forward(nb_module *m, nb_tensor *x);
/** Register parameter t (reference taken over) as `name` of m. */
void nb__module_add_param(nb_module *m, const char *name, nb_tensor *t);

#endif
