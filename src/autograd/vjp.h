/* vjp.h — declarations of every derivative rule named RULE in ops.def, and the gradient conformance step both reverse passes share. */
#ifndef NB_VJP_H
#define NB_VJP_H

#include "../ops/ops.h"

/**
 * The gradient g of an op result made to match that op's input x: summed
 * over the axes x was broadcast along (nb_sum over axes + reshape, so
 * symbolic shapes work too), then cast to x's dtype.  Consumes g (owned,
 * unscoped); returns the owned result, NULL with an error (or for a NULL g).
 * Shared by the tape's backward pass and nb_graph_grad.
 */
nb_tensor *nb__grad_conform(nb_tensor *g, const nb_tensor *x);
/** acc + g, the sum of two gradients reaching one value (both owned, acc may be NULL:
 *  then g); returns the owned sum, NULL with an error.  Shared as nb__grad_conform. */
nb_tensor *nb__grad_add(nb_tensor *acc, nb_tensor *g);
/** The gradient through relu from its result y: g where y is nonzero (NaN included), else 0
 *  (torch's threshold_backward on the result).  Scoped, recorded.  RELU's rule, and ADDMM's and
 *  CONVOLUTION's with NB_SUB_RELU. */
nb_tensor *nb__relu_grad(nb_tensor *y, nb_tensor *g);

#define NB_VJP_DECL_RULE(name) nb_status nb__vjp_##name(const nb_node *node, nb_tensor *g, nb_tensor **gin);
#define NB_VJP_DECL_NONE(name)
#define NB_VJP_DECL_COMPOSITE(name)
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_VJP_DECL_##grad(name)
#include "../ops/ops.def"
#undef NB_OP
#undef NB_VJP_DECL_RULE
#undef NB_VJP_DECL_NONE
#undef NB_VJP_DECL_COMPOSITE

#endif
