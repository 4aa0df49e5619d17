/*
 * f32_forms.h — how each float32 elementwise loop computes its op: the
 * formula of every unary op's f32 form, and the range on which the ranged
 * forms hold.  One definition for the two places that turn them into code:
 * the built-in loops (kern_template.c, compiled per ISA) and the run-time
 * kernel compiler (jit_source.c, which pastes the expanded text into the C
 * it generates), so both compute every element alike.
 *
 * F32_UNARY_<op>(V, expr) describes unary op <op> (expr: ops.def's formula
 * of x in double; in the forms, x is the float operand, p0 and p1 the
 * parameters as floats, p0d and p1d as doubles) by calling V with four
 * columns: ranged (0 or 1), form, test and slow.
 *  - F32_PLAIN(V, form): the form holds for every input (F32_DEFAULT:
 *    ops.def's formula evaluated in double, rounded once).
 *  - F32_RANGE(V, form, test, slow): the form holds where test (of x, and
 *    of the parameters p0d and p1d) is true; the other inputs, non-finite
 *    ones included, get slow, which holds everywhere (kern_template.c: in
 *    blocks, recomputing the outside inputs; jit_source.c likewise).
 *  - F32_RANGE_IF(V, when, form, test, slow): the same where `when` (of the
 *    parameters) holds; otherwise every input gets slow, as a plain form.
 * The accessors F32_FORM, F32_RANGED, F32_TEST and F32_SLOW pick a column,
 * so a new ranged form is one line here.
 */
#ifndef NB_F32_FORMS_H
#define NB_F32_FORMS_H

#include "vmath.h"

/* NB_TYPED_<dt>(...): its arguments for the ops whose ops.def result type dt
 * is a float or integer, which have typed f32/f64 loops; nothing for the
 * BOOL-valued ones (comparisons, logical ops), which run on the mask kernels
 * (kern_mask_template.c) instead. */
#define NB_TYPED_SAME(...) __VA_ARGS__
#define NB_TYPED_FLOAT(...) __VA_ARGS__
#define NB_TYPED_PROMOTE(...) __VA_ARGS__
#define NB_TYPED_FPROMOTE(...) __VA_ARGS__
#define NB_TYPED_I64(...) __VA_ARGS__
#define NB_TYPED_NA(...) __VA_ARGS__
#define NB_TYPED_BOOL(...)

#define F32_PLAIN(V, form) V(0, form, ((void)x, 1), form)
#define F32_RANGE(V, form, test, slow) V(1, form, test, slow)
#define F32_RANGE_IF(V, when, form, test, slow) V(when, form, test, slow)
#define F32_DEFAULT(V, expr) F32_PLAIN(V, (float)(expr))

#define F32_COL_RANGED(ranged, form, test, slow) ranged
#define F32_COL_FORM(ranged, form, test, slow) form
#define F32_COL_TEST(ranged, form, test, slow) test
#define F32_COL_SLOW(ranged, form, test, slow) slow
/* The f32 form of op E (an expression of x); whether it is ranged (of p0d and p1d); its range
 * test (of x, p0d and p1d); its slow form. */
#define F32_FORM(E, expr) F32_UNARY_##E(F32_COL_FORM, expr)
#define F32_RANGED(E) F32_UNARY_##E(F32_COL_RANGED, 0)
#define F32_TEST(E) (F32_UNARY_##E(F32_COL_TEST, 0))
#define F32_SLOW(E, expr) F32_UNARY_##E(F32_COL_SLOW, expr)

/* sin, cos and tan hold for |x| <= NB_VM_TRIG_MAX, beyond it ops.def's formula in double */
#define F32_TRIG(V, form, expr) F32_RANGE(V, form, __builtin_fabsf(x) <= NB_VM_TRIG_MAX, (float)(expr))

#define F32_UNARY_NEG F32_DEFAULT
#define F32_UNARY_ABS F32_DEFAULT
#define F32_UNARY_SIGN F32_DEFAULT
/* exp where its result is normal */
#define F32_UNARY_EXP(V, expr) F32_RANGE(V, nb_expf_normal(x), x >= NB_VM_EXP_MIN && x <= NB_VM_EXP_MAX, nb_expf(x))
/* expm1 (and elu, below) where it needs no clamp and its result is normal */
#define F32_EXPM1_RANGE (x >= NB_VM_EXPM1_MIN && x <= NB_VM_EXP_MAX)
#define F32_UNARY_EXPM1(V, expr) F32_RANGE(V, nb_expm1f_normal(x), F32_EXPM1_RANGE, nb_expm1f(x))
#define F32_UNARY_LOG(V, expr) F32_PLAIN(V, nb_logf(x))
#define F32_UNARY_LOG1P(V, expr) F32_PLAIN(V, nb_log1pf(x))
#define F32_UNARY_SQRT(V, expr) F32_PLAIN(V, __builtin_sqrtf(x))
#define F32_UNARY_RSQRT(V, expr) F32_PLAIN(V, (1.0f / __builtin_sqrtf(x)))
#define F32_UNARY_SQUARE(V, expr) F32_PLAIN(V, (x * x))
#define F32_UNARY_RECIPROCAL(V, expr) F32_PLAIN(V, (1.0f / x))
#define F32_UNARY_SIN(V, expr) F32_TRIG(V, nb_sinf(x), expr)
#define F32_UNARY_COS(V, expr) F32_TRIG(V, nb_cosf(x), expr)
#define F32_UNARY_TAN(V, expr) F32_TRIG(V, nb_tanf(x), expr)
/* tanh where the exponential in it is normal */
#define F32_UNARY_TANH(V, expr) F32_RANGE(V, nb_tanhf_normal(x), __builtin_fabsf(x) <= NB_VM_TANH_MAX, nb_tanhf(x))
/* sigmoid (and silu, below) where e^{-|x|} is normal */
#define F32_UNARY_SIGMOID(V, expr) F32_RANGE(V, nb_sigmoidf_normal(x), __builtin_fabsf(x) <= NB_VM_SIGMOID_MAX, nb_sigmoidf(x))
#define F32_UNARY_RELU(V, expr) F32_PLAIN(V, (x < 0.0f ? 0.0f : x))
#define F32_UNARY_LEAKY_RELU F32_DEFAULT
#define F32_UNARY_ELU(V, expr) F32_RANGE(V, nb_eluf_normal(x, p0d), F32_EXPM1_RANGE, nb_eluf(x, p0d))
#define F32_UNARY_GELU(V, expr) F32_RANGE(V, nb_geluf(x), x >= NB_VM_GELU_MIN, nb_gelu_erfcf(x))
/* gelu_tanh where its sigmoid's exponential is normal */
#define F32_UNARY_GELU_TANH(V, expr) F32_RANGE(V, nb_gelu_tanhf_normal(x), __builtin_fabsf(x) <= NB_VM_GELU_TANH_MAX, nb_gelu_tanhf(x))
#define F32_UNARY_SILU(V, expr) F32_RANGE(V, nb_siluf_normal(x), __builtin_fabsf(x) <= NB_VM_SIGMOID_MAX, nb_siluf(x))
/* softplus: for beta = 1, where e^{-|x|} is normal, up to the threshold */
#define F32_UNARY_SOFTPLUS(V, expr) F32_RANGE_IF(V, p0d == 1.0, nb_softplusf_unit(x), __builtin_fabsf(x) <= NB_VM_SIGMOID_MAX && !((double)x > p1d), nb_softplusf(x, p0d, p1d))
#define F32_UNARY_ERF(V, expr) F32_PLAIN(V, nb_erff(x))
#define F32_UNARY_FLOOR(V, expr) F32_PLAIN(V, __builtin_floorf(x))
#define F32_UNARY_CEIL(V, expr) F32_PLAIN(V, __builtin_ceilf(x))
#define F32_UNARY_ROUND(V, expr) F32_PLAIN(V, __builtin_nearbyintf(x))
#define F32_UNARY_CLAMP F32_DEFAULT

#endif /* NB_F32_FORMS_H */
