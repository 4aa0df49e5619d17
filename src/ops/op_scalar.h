/*
 * op_scalar.h — the double-precision helpers that ops.def's formulas call.
 * Self-contained (no other nabla header): the CPU backend's run-time kernel
 * compiler (src/backend/cpu/jit.c) pastes this file's text, with vmath.h's,
 * ahead of the C it generates, so generated kernels evaluate the formulas
 * exactly as the built-in loops do.
 */
#ifndef NB_OP_SCALAR_H
#define NB_OP_SCALAR_H

/** torch.clamp's min(max(x, lo), hi) with std::max/min semantics, used by ops.def: hi
 * everywhere when lo > hi, NaN passes, a zero x keeps its sign (clamp(-0, 0, 1) = -0). */
static inline double nb__clamp(double x, double lo, double hi) {
    double v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

/** Python-style remainder (result has the divisor's sign), used by ops.def. */
static inline double nb__py_remainder(double a, double b) {
    double r = __builtin_fmod(a, b);
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
}

#endif /* NB_OP_SCALAR_H */
