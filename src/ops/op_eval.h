/*
 * op_eval.h — scalar evaluation of the elementwise ops and of the reduction
 * and scan steps, expanded from ops.def: in double precision from the `expr`
 * column, exactly in int64 from `iexpr`, the reductions' starts from `ident`.
 * The reference backend uses it for every element; the CPU backend uses it
 * where no SIMD kernel exists.
 */
#ifndef NB_OP_EVAL_H
#define NB_OP_EVAL_H

#include <math.h>

#include "ops.h"

/* Integer helpers of ops.def's iexpr column.  Wrapping arithmetic: unsigned in C is
 * modular, the conversion back is two's complement.  Where PyTorch raises instead —
 * integer remainder or fmod by zero, negative integer powers — nabla gives 0 (and 1 or
 * ±1 for bases 1 and -1), documented in nabla.h. */
static inline int64_t nb__wrap(uint64_t u) { return (int64_t)u; }

static inline int64_t nb__ipow(int64_t a, int64_t b) {
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (; b; b >>= 1, x *= x)
        if (b & 1) r *= x;
    return nb__wrap(r);
}

/* Python-style integer remainder (the divisor's sign); 0 for b == 0 and b == -1
 * (INT64_MIN % -1 is undefined in C). */
static inline int64_t nb__py_remainder_i64(int64_t a, int64_t b) {
    if (b == 0 || b == -1) return 0;
    int64_t r = a % b;
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

/* Each evaluator is one switch whose cases are expanded from the rows of the kinds it
 * serves: NB_EV_<kind> is NB_EV_CASE for those and NB_EV_NONE for the others. */
#define NB_EV_NONE(E, expr)
#define NB_EV_WHERE NB_EV_NONE
#define NB_EV_ARGREDUCE NB_EV_NONE
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
#define NB_EV_LINALG NB_EV_NONE
#define NB_EV_QUANT NB_EV_NONE
#define NB_EV_CONV NB_EV_NONE
#define NB_EV_ATTENTION NB_EV_NONE

/* ---- double precision: the expr column ---- */
#define NB_EV_CASE(E, expr) case NB_OP_##E: return (expr);
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_EV_##kind(E, expr)

static inline double nb__eval_unary(nb_op op, double x, double p0, double p1) {
    (void)p0;
    (void)p1;
    switch (op) {
#define NB_EV_UNARY NB_EV_CASE
#define NB_EV_BINARY NB_EV_NONE
#define NB_EV_REDUCE NB_EV_NONE
#define NB_EV_SCAN NB_EV_NONE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not a unary op");
    }
}

static inline double nb__eval_binary(nb_op op, double a, double b) {
    switch (op) {
#define NB_EV_UNARY NB_EV_NONE
#define NB_EV_BINARY NB_EV_CASE
#define NB_EV_REDUCE NB_EV_NONE
#define NB_EV_SCAN NB_EV_NONE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not a binary op");
    }
}

/** The running value acc of a REDUCE or SCAN op combined with the next element v. */
static inline double nb__eval_step(nb_op op, double acc, double v) {
    switch (op) {
#define NB_EV_UNARY NB_EV_NONE
#define NB_EV_BINARY NB_EV_NONE
#define NB_EV_REDUCE NB_EV_CASE
#define NB_EV_SCAN NB_EV_CASE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not a reduction or scan");
    }
}
#undef NB_OP
#undef NB_EV_CASE

/* ---- exact int64: the iexpr column ----------------------------------------
 * On integer and bool operands the rows marked INT(f) are computed by f in int64
 * (nb__int_path); rows marked NA have no case.  NB_IX_##iexpr turns INT(f) into the
 * pair "INT, f" and NA into "NA, 0", and the tag selects a case or nothing. */
#define NB_IX_INT(f) INT, f
#define NB_IX_NA NA, 0
#define NB_IX_SEL(E, ...) NB_IX_SEL2(E, __VA_ARGS__)
#define NB_IX_SEL2(E, tag, f) NB_IX_CASE_##tag(E, f)
#define NB_IX_CASE_INT(E, f) case NB_OP_##E: return (f);
#define NB_IX_CASE_NA(E, f)
#define NB_EV_CASE(E, iexpr) NB_IX_SEL(E, NB_IX_##iexpr)
#define NB_OP(E, name, kind, grad, dt, expr, iexpr, ident) NB_EV_##kind(E, iexpr)

static inline int64_t nb__eval_unary_i64(nb_op op, int64_t x) {
    switch (op) {
#define NB_EV_UNARY NB_EV_CASE
#define NB_EV_BINARY NB_EV_NONE
#define NB_EV_REDUCE NB_EV_NONE
#define NB_EV_SCAN NB_EV_NONE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not an integer unary op");
    }
}

static inline int64_t nb__eval_binary_i64(nb_op op, int64_t a, int64_t b) {
    switch (op) {
#define NB_EV_UNARY NB_EV_NONE
#define NB_EV_BINARY NB_EV_CASE
#define NB_EV_REDUCE NB_EV_NONE
#define NB_EV_SCAN NB_EV_NONE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not an integer binary op");
    }
}

/** The int64 running value acc of an integer REDUCE or SCAN combined with v (wrapping). */
static inline int64_t nb__eval_step_i64(nb_op op, int64_t acc, int64_t v) {
    switch (op) {
#define NB_EV_UNARY NB_EV_NONE
#define NB_EV_BINARY NB_EV_NONE
#define NB_EV_REDUCE NB_EV_CASE
#define NB_EV_SCAN NB_EV_CASE
#include "ops.def"
#undef NB_EV_UNARY
#undef NB_EV_BINARY
#undef NB_EV_REDUCE
#undef NB_EV_SCAN
    default: NB_ASSERT(0 && "not an integer reduction or scan");
    }
}
#undef NB_OP
#undef NB_EV_CASE

/** The start of a REDUCE or SCAN op (ops.def's ident) in double and in int64. */
static inline double nb__ident_f64(nb_op op) {
    switch (nb__ops[op].ident) {
    case NB_IDENT_ZERO: return 0;
    case NB_IDENT_ONE: return 1;
    case NB_IDENT_LOWEST: return -INFINITY;
    case NB_IDENT_HIGHEST: return INFINITY;
    default: NB_ASSERT(0 && "not a reduction or scan");
    }
    return 0;
}
static inline int64_t nb__ident_i64(nb_op op) {
    switch (nb__ops[op].ident) {
    case NB_IDENT_ZERO: return 0;
    case NB_IDENT_ONE: return 1;
    case NB_IDENT_LOWEST: return INT64_MIN;
    case NB_IDENT_HIGHEST: return INT64_MAX;
    default: NB_ASSERT(0 && "not a reduction or scan");
    }
    return 0;
}

/** True when op (elementwise, reduction or scan) on operands of dtype dt takes the exact
 *  integer path (ops.def's iexpr). */
static inline bool nb__int_path(nb_op op, nb_dtype dt) { return !nb_dtype_is_float(dt) && nb__ops[op].int_exact; }

#endif
