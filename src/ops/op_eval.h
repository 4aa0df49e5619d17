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

#endif
