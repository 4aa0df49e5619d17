/* op_table.c — the op table expanded from ops.def: names, kinds, derivative rules,
 * integer exactness and reduction starts, with the rows' consistency checked at build time; and
 * the label of an op node (its name and what its attrs fuse into it). */
#include "ops.h"
#include "../autograd/vjp.h"

#include <stdio.h>

#define NB_VJP_RULE(name) nb__vjp_##name
#define NB_VJP_NONE(name) NULL
#define NB_VJP_COMPOSITE(name) NULL
#define NB_IXF_INT(f) true
#define NB_IXF_NA false

const nb_op_info nb__ops[NB_OP_COUNT] = {
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) \
    [NB_OP_##E] = {#name, NB_KIND_##kind, NB_GRAD_##grad, NB_DT_##dt, NB_VJP_##grad(name), NB_IXF_##iexpr, \
                   NB_IDENT_##ident},
#include "ops.def"
#undef NB_OP
};

/* Build-time row checks: a REDUCE or SCAN row has an integer step and a start; only UNARY,
 * BINARY, REDUCE and SCAN rows have an integer formula; no other row has a start. */
#define NB_FOLDS(k) (NB_KIND_##k == NB_KIND_REDUCE || NB_KIND_##k == NB_KIND_SCAN)
#define NB_INT_OK(k) (NB_FOLDS(k) || NB_KIND_##k == NB_KIND_UNARY || NB_KIND_##k == NB_KIND_BINARY)
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident)                                              \
    _Static_assert(NB_FOLDS(kind) ? NB_IXF_##iexpr && NB_IDENT_##ident != NB_IDENT_NA                \
                                  : NB_IDENT_##ident == NB_IDENT_NA && (NB_INT_OK(kind) || !NB_IXF_##iexpr), \
                   "ops.def row " #E ": iexpr / ident do not fit kind " #kind);
#include "ops.def"
#undef NB_OP

int nb_op_count(void) { return NB_OP_COUNT; }

const char *nb_op_name(int i) { return (i >= 0 && i < NB_OP_COUNT) ? nb__ops[i].name : NULL; }

/* The infer / execute pair of each kind, defined in the kind's own file: a kind without one
 * fails to link. */
#define NB_KIND_DECL(k) extern const nb_kind_impl nb__kind_##k;
NB_KIND_DECL(unary) NB_KIND_DECL(binary) NB_KIND_DECL(where) NB_KIND_DECL(reduce) NB_KIND_DECL(argreduce)
NB_KIND_DECL(scan) NB_KIND_DECL(matmul) NB_KIND_DECL(gather) NB_KIND_DECL(scatter_add) NB_KIND_DECL(copy)
NB_KIND_DECL(view) NB_KIND_DECL(view_grad) NB_KIND_DECL(pad) NB_KIND_DECL(cat) NB_KIND_DECL(window)
NB_KIND_DECL(size) NB_KIND_DECL(random) NB_KIND_DECL(linalg) NB_KIND_DECL(attention)
NB_KIND_DECL(quant) NB_KIND_DECL(conv)
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
    [NB_KIND_LINALG] = &nb__kind_linalg,         [NB_KIND_ATTENTION] = &nb__kind_attention,
    [NB_KIND_QUANT] = &nb__kind_quant,         [NB_KIND_CONV] = &nb__kind_conv,
};

const char *nb__op_label(nb_op op, const nb_attrs *a, char *buf, size_t n) {
    const char *name = nb__ops[op].name;
    if ((op == NB_OP_ADDMM || op == NB_OP_CONVOLUTION) && (a->sub & NB_SUB_RELU)) {
        snprintf(buf, n, "%s+relu", name);
    } else if (op == NB_OP_CONVOLUTION_BACKWARD) { /* its outputs in sub's bit order (convolution.c) */
        static const char *const outs[3] = {"dx", "dwi", "db"};
        char list[16] = "";
        size_t len = 0;
        for (int bit = 0; bit < 3; bit++)
            if (a->sub & (1 << bit))
                len += (size_t)snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", outs[bit]);
        snprintf(buf, n, "%s(%s)%s", name, list, a->sub & NB_SUB_CONVB_RELU ? " of relu" : "");
    } else {
        snprintf(buf, n, "%s", name);
    }
    return buf;
}
