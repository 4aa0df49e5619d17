/*
 * test_gradcheck.c — A4: every differentiable op's derivative against
 * central finite differences in f64.  The test walks the op table: an op
 * whose grad column is RULE or COMPOSITE must have a case below (named by
 * its ops.def name), and an op with neither a case nor the NONE mark fails.
 *
 * Each case applies the op to f64 leaves (values drawn away from kinks and
 * outside the op's singularities), forms L = sum(op(x) · W) with fixed random
 * weights W, and compares dL/dx from nb_backward with
 * (L(x + h e_j) - L(x - h e_j)) / 2h, h = 1e-6, for every element j of every
 * input: |analytic - fd| <= 1e-6 |fd| + 1e-8 (1 + |L|) — the absolute term
 * covers the rounding noise of the difference quotient (~1e-16 |L| / h).
 *
 * Second order (A5): for the cases marked `second` (most of them, among them
 * exp, sin, tanh, mul, div, matmul, sum and softmax), the gradients taken
 * with create_graph define S = Σ_i sum(dL/dx_i · V_i) (V random), a function
 * of x whose gradient — a Hessian-vector product — comes from
 * differentiating the recorded backward pass and is checked against finite
 * differences of S the same way.
 *
 * At kinks, where finite differences cannot decide, PyTorch's conventions
 * (derivatives.yaml) are pinned with derived values: abs/relu at 0, clamp at
 * its bounds, maximum/amax ties and NaN, pow at 0, prod/cumprod with zeros,
 * norm at 0.
 */
#include "support.h"
#include "ops/ops.h"
#include "op_cases.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* ------------------------------------------------------------------------ */
/* The check                                                                */
/* ------------------------------------------------------------------------ */

typedef struct gc_run {
    const gc_case *c;
    double *v[3];      /* current input values (perturbed in place) */
    nb_tensor *w;      /* weights of L */
    nb_tensor *dir[3]; /* directions V_i of S (second order) */
    int order;
} gc_run;

/* Fresh tracked leaves holding the current values. */
static void leaves(const gc_run *r, nb_tensor **x) {
    for (int i = 0; i < r->c->n; i++) {
        x[i] = NBT(nb_from_data(r->v[i], r->c->in[i].s, r->c->in[i].nd, NB_F64));
        assert_int_equal(nb_set_requires_grad(x[i], true), NB_OK);
    }
}

/* The checked scalar: order 1 L(x) = sum(f(x)·W); order 2 S(x) = Σ_i sum(∂L/∂x_i · V_i). */
static nb_tensor *objective(const gc_run *r, nb_tensor **x) {
    leaves(r, x);
    nb_tensor *y = NBT(r->c->f(x));
    nb_tensor *l = NBT(nb_sum(nb_mul(y, r->w), NULL, 0, false));
    if (r->order == 1) return l;
    nb_tensor *g[3];
    if (nb_autograd_grad(l, NULL, x, r->c->n, true, g) != NB_OK) fail_msg("%s", nb_last_message());
    nb_tensor *s = NULL;
    for (int i = 0; i < r->c->n; i++) {
        nb_tensor *t = NBT(nb_sum(nb_mul(g[i], r->dir[i]), NULL, 0, false));
        s = s ? NBT(nb_add(s, t)) : t;
    }
    return s;
}

static double value_at(const gc_run *r) {
    nb_scope_begin();
    nb_tensor *x[3];
    double v = 0;
    assert_int_equal(nb_item(objective(r, x), &v), NB_OK);
    nb_scope_end();
    return v;
}

static nb_tensor *random_like(const int64_t *shape, int nd) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = gc_normal();
    nb_tensor *t = NBT(nb_from_data(v, shape, nd, NB_F64));
    free(v);
    return t;
}

static void check(const gc_case *c, int order) {
    nb_scope_begin();
    gc_run r = {.c = c, .order = order};
    for (int i = 0; i < c->n; i++) {
        r.v[i] = malloc(sizeof(double) * (size_t)(gc_count(&c->in[i]) + 1));
        assert_non_null(r.v[i]);
        for (int64_t j = 0; j < gc_count(&c->in[i]); j++) r.v[i][j] = gc_draw(c->in[i].dom, j);
        r.dir[i] = random_like(c->in[i].s, c->in[i].nd);
    }
    nb_tensor *x[3];
    leaves(&r, x);
    nb_tensor *y = NBT(c->f(x)); /* for the shape of W */
    r.w = random_like(nb_shape(y), nb_ndim(y));
    /* analytic: the gradient accumulated into fresh leaves by nb_backward */
    nb_tensor *obj = objective(&r, x);
    double at = 0;
    assert_int_equal(nb_item(obj, &at), NB_OK);
    bool tracked = nb_requires_grad(obj); /* S need not depend on x (a linear op) */
    if (tracked) assert_int_equal(nb_backward(obj, NULL, false), NB_OK);
    const double h = c->h > 0 ? c->h : 1e-6, atol = 1e-8 * (1 + fabs(at));
    int bad = 0;
    for (int i = 0; i < c->n && !bad; i++) {
        nb_tensor *g = tracked ? nb_grad(x[i]) : NULL;
        for (int64_t j = 0; j < gc_count(&c->in[i]) && !bad; j++) {
            double a = g ? nbt_at(g, j) : 0, v0 = r.v[i][j];
            r.v[i][j] = v0 + h;
            double lp = value_at(&r);
            r.v[i][j] = v0 - h;
            double lm = value_at(&r);
            r.v[i][j] = v0;
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(a - fd) <= 1e-6 * fabs(fd) + atol)) {
                fprintf(stderr, "%s (%s), order %d: d/dx%d[%lld]: analytic %.12g vs finite difference %.12g\n", c->op,
                        c->label, order, i, (long long)j, a, fd);
                bad = 1;
            }
        }
    }
    for (int i = 0; i < c->n; i++) free(r.v[i]);
    nb_scope_end();
    if (bad) fail();
}

static void test_first_order(void **state) { check(*state, 1); }
static void test_second_order(void **state) { check(*state, 2); }

/* Every op with a derivative (RULE or COMPOSITE) has a case; the rest are marked NONE. */
static void test_every_differentiable_op_has_a_case(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (nb__ops[op].grad == NB_GRAD_NONE) continue;
        bool found = false;
        for (size_t k = 0; k < NCASES && !found; k++) found = !strcmp(CASES[k].op, nb__ops[op].name);
        if (!found) {
            fprintf(stderr, "op '%s' is differentiable (%s) but has no gradcheck case; add one or mark it NONE\n",
                    nb__ops[op].name, nb__ops[op].grad == NB_GRAD_RULE ? "RULE" : "COMPOSITE");
            missing++;
        }
        if ((nb__ops[op].grad == NB_GRAD_RULE) != (nb__ops[op].vjp != NULL)) {
            fprintf(stderr, "op '%s': RULE mark and VJP pointer disagree\n", nb__ops[op].name);
            missing++;
        }
    }
    for (size_t k = 0; k < NCASES; k++) { /* and every case names a real op */
        bool known = false;
        for (int op = 0; op < NB_OP_COUNT && !known; op++) known = !strcmp(CASES[k].op, nb__ops[op].name);
        if (!known) {
            fprintf(stderr, "gradcheck case '%s' names no op in ops.def\n", CASES[k].op);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* ------------------------------------------------------------------------ */
/* Kinks and singular points: PyTorch's conventions (derivatives.yaml),      */
/* where finite differences cannot decide                                   */
/* ------------------------------------------------------------------------ */

/* d sum(f(x)) / dx at the n values v must equal want. */
static void expect_grad(const char *what, gc_fn f, const double *v, int64_t n, const double *want) {
    nb_scope_begin();
    nb_tensor *x = NBT(nb_from_data(v, &n, 1, NB_F64));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(f(&x)), NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int64_t i = 0; i < n; i++)
        if (!(nbt_at(g, i) == want[i] || (isnan(want[i]) && isnan(nbt_at(g, i))))) {
            fprintf(stderr, "%s: d/dx[%lld] = %g, expected %g\n", what, (long long)i, nbt_at(g, i), want[i]);
            fail();
        }
    nb_scope_end();
}

/* The Hessian of sum(f(x)) at the n values v (row i: the gradient of dL/dx_i, taken
 * through the create_graph pass) must equal want (n x n, row-major). */
static void expect_hessian(const char *what, gc_fn f, const double *v, int64_t n, const double *want) {
    nb_scope_begin();
    nb_tensor *x = NBT(nb_from_data(v, &n, 1, NB_F64)), *g = NULL;
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *l = NBT(nb_sum(NBT(f(&x)), NULL, 0, false));
    assert_int_equal(nb_autograd_grad(l, NULL, &x, 1, true, &g), NB_OK);
    for (int64_t i = 0; i < n; i++) {
        nb_tensor *h = NULL;
        assert_int_equal(nb_autograd_grad(NBT(nb_select(g, 0, i)), NULL, &x, 1, false, &h), NB_OK);
        for (int64_t j = 0; j < n; j++)
            if (!(nbt_at(h, j) == want[i * n + j])) {
                fprintf(stderr, "%s: d2L/dx%lld dx%lld = %g, expected %g\n", what, (long long)i, (long long)j,
                        nbt_at(h, j), want[i * n + j]);
                fail();
            }
    }
    nb_scope_end();
}

/* sum(cumprod([a, b, c])) = a + ab + abc: gradient [1 + b + bc, a + ac, ab] and
 * Hessian [[0, 1 + c, b], [1 + c, 0, a], [b, a, 0]], exact for any zeros. */
static void expect_cumprod3(const double *v) {
    double a = v[0], b = v[1], c = v[2];
    expect_grad("cumprod", f_cumprod_0, v, 3, (double[]){1 + b + b * c, a + a * c, a * b});
    expect_hessian("cumprod", f_cumprod_0, v, 3, (double[]){0, 1 + c, b, 1 + c, 0, a, b, a, 0});
}

static void test_cumprod_zeros(void **state) {
    (void)state;
    /* sum(cumprod([a, b])) = a + ab at [0, 3]: gradient [4, 0], Hessian [[0, 1], [1, 0]] */
    expect_grad("cumprod [0, 3]", f_cumprod_0, (double[]){0, 3}, 2, (double[]){4, 0});
    expect_hessian("cumprod [0, 3]", f_cumprod_0, (double[]){0, 3}, 2, (double[]){0, 1, 1, 0});
    const double cases[][3] = {{2, 0, 3}, {0, 2, 3}, {2, 3, 0}, {0, 0, 3}, {2, 0, 0}, {0, 3, 0}, {0, 0, 0}, {2, -3, 5}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) expect_cumprod3(cases[k]);
    /* prod is built on cumprod: prod([a, b, c]) has Hessian [[0, c, b], [c, 0, a], [b, a, 0]] */
    expect_hessian("prod [0, 0, 3]", f_prod_all, (double[]){0, 0, 3}, 3, (double[]){0, 3, 0, 3, 0, 0, 0, 0, 0});
    expect_hessian("prod [2, 0, 3]", f_prod_all, (double[]){2, 0, 3}, 3, (double[]){0, 3, 0, 3, 0, 2, 0, 2, 0});
}

GC(k_max_self, nb_maximum(x[0], nb_mul(x[0], 1.0)))       /* a tie everywhere: 1/2 + 1/2 */
GC(k_max_one, nb_maximum(x[0], NBT(nb_ones_like(x[0])))) /* vs 1: ties at 1, NaN to both */
GC(k_min_one, nb_minimum(NBT(nb_ones_like(x[0])), x[0]))
GC(k_pow0, nb_pow(x[0], 0.0))
GC(k_pow_base0, nb_pow(NBT(nb_zeros_like(x[0])), x[0])) /* d/db 0^b */
GC(k_norm2, nb_norm(x[0], 2, NULL, 0, false))
GC(k_cube_norm, nb_norm(x[0], 3, NULL, 0, false))

static void test_kink_conventions(void **state) {
    (void)state;
    const double z3[] = {0, 0, 0}, k[] = {-1, 0, 1}, ties[] = {1, 3, 3}, nan_in[] = {1, NAN, 2};
    expect_grad("abs at 0", f_abs, k, 3, (double[]){-1, 0, 1});
    expect_grad("relu at 0", f_relu, k, 3, (double[]){0, 0, 1});
    /* torch 2.15: relu(x).sum().backward() at [nan, -0., 0., -1., 2.] gives [1, 0, 0, 0, 1] (its
     * threshold_backward reads the result, NaN there, which is not <= 0) */
    expect_grad("relu at NaN and signed zeros", f_relu, (double[]){NAN, -0.0, 0, -1, 2}, 5, (double[]){1, 0, 0, 0, 1});
    expect_grad("leaky_relu at 0", f_leaky_relu, k, 3, (double[]){0.2, 0.2, 1});
    expect_grad("elu at 0", f_elu, k, 3, (double[]){1.3 * exp(-1.0), 1.3, 1});
    /* torch 2.x with scalar bounds: no gradient at a bound (torch 1.13 passed it) */
    expect_grad("clamp at its bounds", f_clamp, (double[]){-0.8, 0.9, 2, 0.5}, 4, (double[]){0, 0, 0, 1});
    expect_grad("sign", f_sign, k, 3, (double[]){-1, 0, 1}); /* d(sign(x) x) = sign(x) + 0 */
    expect_grad("maximum of a tie", k_max_self, k, 3, (double[]){1, 1, 1});
    expect_grad("maximum(x, 1)", k_max_one, (double[]){0, 1, 2, NAN}, 4, (double[]){0, 0.5, 1, 1});
    expect_grad("minimum(1, x)", k_min_one, (double[]){0, 1, 2, NAN}, 4, (double[]){1, 0.5, 0, 1});
    expect_grad("amax ties", f_max_all, ties, 3, (double[]){0, 0.5, 0.5});
    expect_grad("amax with NaN", f_max_all, nan_in, 3, (double[]){0, 1, 0});
    expect_grad("pow(x, 0) at 0", k_pow0, z3, 3, z3);
    expect_grad("pow(0, b), b >= 0", k_pow_base0, (double[]){0, 1, 2.5}, 3, z3);
    expect_grad("prod with one zero", f_prod_all, (double[]){2, 0, 3}, 3, (double[]){0, 6, 0});
    expect_grad("prod with two zeros", f_prod_all, (double[]){0, 0, 3}, 3, z3);
    /* sum(cumprod([a, b, c])) = a + ab + abc: gradient [1 + b + bc, a + ac, ab] */
    expect_grad("cumprod with a zero", f_cumprod_0, (double[]){2, 0, 3}, 3, (double[]){1, 8, 0});
    expect_grad("2-norm at 0", k_norm2, z3, 3, z3);
    expect_grad("3-norm at 0", k_cube_norm, z3, 3, z3);
}

/* Each test starts without a pending error from an earlier one. */
static int clear_error(void **state) {
    (void)state;
    nb_clear_error();
    return 0;
}

int main(void) {
    enum { MAXT = 512 };
    static struct CMUnitTest tests[MAXT];
    static char names[MAXT][96];
    if (2 * NCASES + 3 > MAXT) {
        fprintf(stderr, "test_gradcheck: more tests than MAXT (%d): raise it\n", MAXT);
        return 1;
    }
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"kink conventions", test_kink_conventions, clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"cumprod and prod with zeros, first and second order", test_cumprod_zeros,
                                     clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"every differentiable op has a case", test_every_differentiable_op_has_a_case,
                                     clear_error, NULL, NULL};
    for (int order = 1; order <= 2; order++)
        for (size_t k = 0; k < NCASES; k++) {
            if (order == 2 && !CASES[k].second) continue;
            snprintf(names[n], sizeof names[n], "%s %s%s", CASES[k].op, CASES[k].label, order == 2 ? " (2nd order)" : "");
            tests[n] = (struct CMUnitTest){names[n], order == 1 ? test_first_order : test_second_order, NULL, NULL,
                                           (void *)&CASES[k]};
            n++;
        }
    return _cmocka_run_group_tests("gradcheck", tests, n, NULL, NULL);
}
