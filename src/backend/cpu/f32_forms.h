/*
 * f32_forms.h — how each float32 elementwise loop computes its op: the
 * formula of every unary op's f32 form, and the range on which the ranged
 * forms hold.  One definition for the two places that turn them into code:
 * the built-in loops (kern_template.c, compiled per ISA) and the run-time
 * kernel compiler (jit_source.c, which pastes the expanded text into the C
 * it generates), so both compute every element alike.
 *
 * The f32 loops evaluate ops.def's formula in float where that is exact
 * enough (the formula's double literals are narrowed), except the ops given
 * an F32_UNARY form below (in the formulas, x is the float operand, p0 and
 * p1 the parameters as floats, p0d and p1d as doubles).  Some of those forms
 * hold on a range of inputs only: sin, cos and tan for |x| <= NB_VM_TRIG_MAX
 * (F32_IN_RANGE_TRIG), gelu for x >= NB_VM_GELU_MIN (F32_IN_RANGE_GELU),
 * exp where its result is normal (F32_IN_RANGE_EXP) and tanh where the
 * exponential in it is (F32_IN_RANGE_TANH).  The other inputs, non-finite
 * ones included, get the op's slow form, which holds everywhere: ops.def's
 * formula in double for the trig functions, vmath.h's general function for
 * the others (F32_SLOW_<op>; kern_template.c: in blocks, recomputing the
 * outside inputs).
 */
#ifndef NB_F32_FORMS_H
#define NB_F32_FORMS_H

#include "vmath.h"

#define F32_RANGED(E)                                                                              \
    (NB_OP_##E == NB_OP_SIN || NB_OP_##E == NB_OP_COS || NB_OP_##E == NB_OP_TAN || NB_OP_##E == NB_OP_GELU || \
     NB_OP_##E == NB_OP_EXP || NB_OP_##E == NB_OP_TANH)
#define F32_IN_RANGE_GELU(x) ((x) >= NB_VM_GELU_MIN)
#define F32_IN_RANGE_TRIG(x) (__builtin_fabsf(x) <= NB_VM_TRIG_MAX)
#define F32_IN_RANGE_EXP(x) ((x) >= NB_VM_EXP_MIN && (x) <= NB_VM_EXP_MAX)
#define F32_IN_RANGE_TANH(x) (__builtin_fabsf(x) <= NB_VM_TANH_MAX)
#define F32_SLOW_GELU(x) nb_gelu_erfcf(x)
#define F32_SLOW_EXP(x) nb_expf(x)
#define F32_SLOW_TANH(x) nb_tanhf(x)
#define F32_SLOW(E, expr)                                                                          \
    (NB_OP_##E == NB_OP_GELU  ? F32_SLOW_GELU(x)                                                  \
     : NB_OP_##E == NB_OP_EXP ? F32_SLOW_EXP(x)                                                   \
     : NB_OP_##E == NB_OP_TANH ? F32_SLOW_TANH(x)                                                 \
                               : (float)(expr))

/* f32 formulas: default is ops.def's (evaluated in double, rounded once);
 * the transcendental ops and activations use vmath.h. */
#define F32_DEFAULT(expr) (float)(expr)
#define F32_UNARY_NEG F32_DEFAULT
#define F32_UNARY_ABS F32_DEFAULT
#define F32_UNARY_SIGN F32_DEFAULT
#define F32_UNARY_EXP(expr) nb_expf_normal(x)
#define F32_UNARY_EXPM1(expr) nb_expm1f(x)
#define F32_UNARY_LOG(expr) nb_logf(x)
#define F32_UNARY_LOG1P(expr) nb_log1pf(x)
#define F32_UNARY_SQRT(expr) __builtin_sqrtf(x)
#define F32_UNARY_RSQRT(expr) (1.0f / __builtin_sqrtf(x))
#define F32_UNARY_SQUARE(expr) (x * x)
#define F32_UNARY_RECIPROCAL(expr) (1.0f / x)
#define F32_UNARY_SIN(expr) nb_sinf(x)
#define F32_UNARY_COS(expr) nb_cosf(x)
#define F32_UNARY_TAN(expr) nb_tanf(x)
#define F32_UNARY_TANH(expr) nb_tanhf_normal(x)
#define F32_UNARY_SIGMOID(expr) nb_sigmoidf(x)
#define F32_UNARY_RELU(expr) (x < 0.0f ? 0.0f : x)
#define F32_UNARY_LEAKY_RELU F32_DEFAULT
#define F32_UNARY_ELU(expr) nb_eluf(x, p0d)
#define F32_UNARY_GELU(expr) nb_geluf(x)
#define F32_UNARY_GELU_TANH(expr) nb_gelu_tanhf(x)
#define F32_UNARY_SILU(expr) nb_siluf(x)
#define F32_UNARY_SOFTPLUS(expr) nb_softplusf(x, p0d, p1d)
#define F32_UNARY_ERF(expr) nb_erff(x)
#define F32_UNARY_FLOOR(expr) __builtin_floorf(x)
#define F32_UNARY_CEIL(expr) __builtin_ceilf(x)
#define F32_UNARY_ROUND(expr) __builtin_nearbyintf(x)
#define F32_UNARY_CLAMP F32_DEFAULT

#endif /* NB_F32_FORMS_H */
