/*
 * op_eval.h — scalar evaluation of the elementwise ops in double precision,
 * expanded from the `expr` column of ops.def.  The reference backend uses
 * it for every element; the CPU backend uses it where no SIMD kernel exists.
 */
#ifndef NB_OP_EVAL_H
#define NB_OP_EVAL_H

#include <math.h>

#include "ops.h"

#define NB_EV_NONE(E, expr)
#define NB_EV_CASE(E, expr) case NB_OP_##E: return (expr);

static inline double nb__eval_unary(nb_op op, double x, double p0, double p1) {
    (void)p0;
    (void)p1;
    switch (op) {
#define NB_EV_UNARY NB_EV_CASE
#define NB_EV_BINARY NB_EV_NONE
#define NB_OP(E, name, kind, grad, dt, expr) NB_EV_##kind(E, expr)
#define NB_EV_WHERE NB_EV_NONE
#define NB_EV_REDUCE NB_EV_NONE
#define NB_EV_ARGREDUCE NB_EV_NONE
#define NB_EV_SCAN NB_EV_NONE
#define NB_EV_MATMUL NB_EV_NONE
#define NB_EV_GATHER NB_EV_NONE
#define NB_EV_SCATTER_ADD NB_EV_NONE
#define NB_EV_COPY NB_EV_NONE
#define NB_EV_VIEW NB_EV_NONE
#define NB_EV_VIEW_GRAD NB_EV_NONE
#define NB_EV_PAD NB_EV_NONE
#define NB_EV_CAT NB_EV_NONE
#define NB_EV_COMPOSITE NB_EV_NONE
#define NB_EV_WINDOW NB_EV_NONE
#define NB_EV_SIZE NB_EV_NONE
#define NB_EV_RANDOM NB_EV_NONE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
    default: NB_ASSERT(0 && "not a unary op");
    }
}

static inline double nb__eval_binary(nb_op op, double a, double b) {
    switch (op) {
#define NB_EV_UNARY NB_EV_NONE
#define NB_EV_BINARY NB_EV_CASE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
    default: NB_ASSERT(0 && "not a binary op");
    }
}
#undef NB_OP

/* ---- integer evaluation --------------------------------------------------
 * Ops whose integer results are integers are evaluated exactly in int64 on
 * integer and bool operands, wrapping around on overflow (two's complement)
 * as PyTorch's integer kernels do.  Where PyTorch raises instead — integer
 * remainder or fmod by zero, negative integer powers — nabla gives 0 (and 1 or ±1 for
 * bases 1 and -1), documented in nabla.h. */

static inline bool nb__int_exact(nb_op op) {
    switch (op) {
    case NB_OP_NEG: case NB_OP_ABS: case NB_OP_SIGN: case NB_OP_SQUARE: case NB_OP_RELU:
    case NB_OP_FLOOR: case NB_OP_CEIL: case NB_OP_ROUND: case NB_OP_ADD: case NB_OP_SUB:
    case NB_OP_MUL: case NB_OP_POW: case NB_OP_MAXIMUM: case NB_OP_MINIMUM: case NB_OP_REMAINDER:
    case NB_OP_FMOD:
    case NB_OP_EQ: case NB_OP_NE: case NB_OP_LT: case NB_OP_LE: case NB_OP_GT: case NB_OP_GE:
        return true;
    default: return false;
    }
}

/* Wrapping arithmetic: unsigned in C is modular, the conversion back is two's complement. */
static inline int64_t nb__wrap(uint64_t u) { return (int64_t)u; }

static inline int64_t nb__ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (; b; b >>= 1, x *= x)
        if (b & 1) r *= x;
    return nb__wrap(r);
}

static inline int64_t nb__eval_unary_i64(nb_op op, int64_t x) {
    switch (op) {
    case NB_OP_NEG: return nb__wrap(0 - (uint64_t)x);
    case NB_OP_ABS: return x < 0 ? nb__wrap(0 - (uint64_t)x) : x;
    case NB_OP_SIGN: return (x > 0) - (x < 0);
    case NB_OP_SQUARE: return nb__wrap((uint64_t)x * (uint64_t)x);
    case NB_OP_RELU: return x < 0 ? 0 : x;
    case NB_OP_FLOOR: case NB_OP_CEIL: case NB_OP_ROUND: return x;
    default: NB_ASSERT(0 && "not an integer unary op");
    }
}

static inline int64_t nb__eval_binary_i64(nb_op op, int64_t a, int64_t b) {
    switch (op) {
    case NB_OP_ADD: return nb__wrap((uint64_t)a + (uint64_t)b);
    case NB_OP_SUB: return nb__wrap((uint64_t)a - (uint64_t)b);
    case NB_OP_MUL: return nb__wrap((uint64_t)a * (uint64_t)b);
    case NB_OP_POW: return nb__ipow(a, b);
    case NB_OP_MAXIMUM: return a > b ? a : b;
    case NB_OP_MINIMUM: return a < b ? a : b;
    case NB_OP_REMAINDER: {
        if (b == 0 || b == -1) return 0; /* b == -1: INT64_MIN % -1 is undefined in C */
        int64_t r = a % b;
        return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
    }
    case NB_OP_FMOD: return b == 0 || b == -1 ? 0 : a % b; /* C's %: sign of the dividend */
    case NB_OP_EQ: return a == b;
    case NB_OP_NE: return a != b;
    case NB_OP_LT: return a < b;
    case NB_OP_LE: return a <= b;
    case NB_OP_GT: return a > b;
    case NB_OP_GE: return a >= b;
    default: NB_ASSERT(0 && "not an integer binary op");
    }
}

/* Integer reductions (SUM, PROD, MAX, MIN) and scans, exact with wrap-around. */
static inline int64_t nb__reduce_init_i64(nb_op op) {
    return op == NB_OP_PROD || op == NB_OP_CUMPROD ? 1 : op == NB_OP_MAX ? INT64_MIN : op == NB_OP_MIN ? INT64_MAX : 0;
}
static inline int64_t nb__reduce_step_i64(nb_op op, int64_t acc, int64_t v) {
    switch (op) {
    case NB_OP_SUM: case NB_OP_CUMSUM: return nb__wrap((uint64_t)acc + (uint64_t)v);
    case NB_OP_PROD: case NB_OP_CUMPROD: return nb__wrap((uint64_t)acc * (uint64_t)v);
    case NB_OP_MAX: return v > acc ? v : acc;
    case NB_OP_MIN: return v < acc ? v : acc;
    default: NB_ASSERT(0 && "not an integer reduction");
    }
}

/** True when op on operands of dtype dt takes the exact integer path. */
static inline bool nb__int_path(nb_op op, nb_dtype dt) { return !nb_dtype_is_float(dt) && nb__int_exact(op); }
/** True when a reduction or scan on dt accumulates exactly in int64. */
static inline bool nb__int_reduce(nb_op op, nb_dtype dt) {
    return !nb_dtype_is_float(dt) && op != NB_OP_ARGMAX && op != NB_OP_ARGMIN;
}

#endif
