/* op_table.c — the op table expanded from ops.def: names, kinds, derivative rules. */
#include "ops.h"
#include "../autograd/vjp.h"

#define NB_VJP_RULE(name) nb__vjp_##name
#define NB_VJP_NONE(name) NULL
#define NB_VJP_COMPOSITE(name) NULL

const nb_op_info nb__ops[NB_OP_COUNT] = {
#define NB_OP(E, name, kind, grad, dt, expr) \
    [NB_OP_##E] = {#name, NB_KIND_##kind, NB_GRAD_##grad, NB_DT_##dt, NB_VJP_##grad(name)},
#include "ops.def"
#undef NB_OP
};

int nb_op_count(void) { return NB_OP_COUNT; }

const char *nb_op_name(int i) { return (i >= 0 && i < NB_OP_COUNT) ? nb__ops[i].name : NULL; }

/* The infer / execute pair of each kind, defined in the kind's own file: a kind without one
 * fails to link. */
#define NB_KIND_DECL(k) extern const nb_kind_impl nb__kind_##k;
NB_KIND_DECL(unary) NB_KIND_DECL(binary) NB_KIND_DECL(where) NB_KIND_DECL(reduce) NB_KIND_DECL(argreduce)
NB_KIND_DECL(scan) NB_KIND_DECL(matmul) NB_KIND_DECL(gather) NB_KIND_DECL(scatter_add) NB_KIND_DECL(copy)
NB_KIND_DECL(view) NB_KIND_DECL(view_grad) NB_KIND_DECL(pad) NB_KIND_DECL(cat) NB_KIND_DECL(window)
NB_KIND_DECL(size) NB_KIND_DECL(random)
#undef NB_KIND_DECL

const nb_kind_impl *const nb__kinds[NB_KIND_COUNT] = {
    [NB_KIND_UNARY] = &nb__kind_unary,         [NB_KIND_BINARY] = &nb__kind_binary,
    [NB_KIND_WHERE] = &nb__kind_where,         [NB_KIND_REDUCE] = &nb__kind_reduce,
    [NB_KIND_ARGREDUCE] = &nb__kind_argreduce, [NB_KIND_SCAN] = &nb__kind_scan,
    [NB_KIND_MATMUL] = &nb__kind_matmul,       [NB_KIND_GATHER] = &nb__kind_gather,
    [NB_KIND_SCATTER_ADD] = &nb__kind_scatter_add, [NB_KIND_COPY] = &nb__kind_copy,
    [NB_KIND_VIEW] = &nb__kind_view,           [NB_KIND_VIEW_GRAD] = &nb__kind_view_grad,
    [NB_KIND_PAD] = &nb__kind_pad,             [NB_KIND_CAT] = &nb__kind_cat,
    [NB_KIND_COMPOSITE] = NULL,                [NB_KIND_WINDOW] = &nb__kind_window,
    [NB_KIND_SIZE] = &nb__kind_size,           [NB_KIND_RANDOM] = &nb__kind_random,
};
