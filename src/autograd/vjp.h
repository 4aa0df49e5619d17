/* vjp.h — declarations of every derivative rule named RULE in ops.def. */
#ifndef NB_VJP_H
#define NB_VJP_H

#include "../ops/ops.h"

#define NB_VJP_DECL_RULE(name) nb_status nb__vjp_##name(const nb_node *node, nb_tensor *g, nb_tensor **gin);
#define NB_VJP_DECL_NONE(name)
#define NB_VJP_DECL_COMPOSITE(name)
#define NB_OP(E, name, kind, grad, dt, expr) NB_VJP_DECL_##grad(name)
#include "../ops/ops.def"
#undef NB_OP
#undef NB_VJP_DECL_RULE
#undef NB_VJP_DECL_NONE
#undef NB_VJP_DECL_COMPOSITE

#endif
