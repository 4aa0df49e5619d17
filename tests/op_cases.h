/*
 * op_cases.h — one small program per op of the table (or a short chain
 * exercising it) on f64 leaves, with input shapes and value domains: the
 * cases test_gradcheck.c checks against finite differences and
 * test_transforms.c walks for jvp and vmap.  Every differentiable op has at
 * least one (test_gradcheck walks ops.def for it).
 */
#ifndef NB_TEST_OP_CASES_H
#define NB_TEST_OP_CASES_H

#include "nabla.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum dom {
    D_ANY,   /* standard normal */
    D_AWAY,  /* |x| >= 0.15: away from the kink at 0 (abs, relu, sign, …) */
    D_POS,   /* [0.2, 2.2]: log, sqrt, rsqrt, pow base */
    D_UNIT,  /* [-0.8, 0.8]: tan */
    D_EXACT, /* multiples of 2^-10 in about [-3, 3]: exact in f32 (cast) */
    D_ZEROS, /* normal with every third element exactly 0 (prod, cumprod) */
    D_PROB,  /* [0.05, 0.95]: probabilities */
};

typedef struct gc_input { int nd; int64_t s[4]; int dom; } gc_input;
typedef nb_tensor *(*gc_fn)(nb_tensor *const *x);
typedef struct gc_case {
    const char *op;    /* the ops.def name it covers */
    const char *label; /* what this variant exercises */
    gc_fn f;
    int n;
    gc_input in[3];
    bool second;       /* also check the second derivative */
    double h;          /* finite-difference step; 0 means 1e-6 */
} gc_case;

/** A builder named fname returning expr on the leaves x (file-local). */
#define GC(fname, expr) \
    static nb_tensor *fname(nb_tensor *const *x) { return (expr); }

extern const gc_case CASES[];
extern const size_t NCASES;

/** Uniform in [0, 1) and standard normal draws (splitmix64, a fixed seed: reproducible). */
double gc_uniform(void);
double gc_normal(void);
/** A value for element i of an input of domain dom. */
double gc_draw(int dom, int64_t i);
/** Element count of an input. */
int64_t gc_count(const gc_input *in);

/* Builders of the table the gradcheck's kink tests reuse. */
nb_tensor *f_abs(nb_tensor *const *x);
nb_tensor *f_relu(nb_tensor *const *x);
nb_tensor *f_leaky_relu(nb_tensor *const *x);
nb_tensor *f_elu(nb_tensor *const *x);
nb_tensor *f_clamp(nb_tensor *const *x);
nb_tensor *f_sign(nb_tensor *const *x);
nb_tensor *f_max_all(nb_tensor *const *x);
nb_tensor *f_prod_all(nb_tensor *const *x);
nb_tensor *f_cumprod_0(nb_tensor *const *x);

#endif
