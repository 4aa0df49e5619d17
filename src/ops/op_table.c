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
