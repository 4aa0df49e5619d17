/*
 * test_transforms.c — the function transforms (SPEC X1-X5) against
 * independent oracles:
 *  - the seed's f.grad(["x"]).vmap(["x"], 4).jit(), and a jit that compiles once over N runs;
 *  - grad / value_and_grad against the eager tape (bitwise: the same rules and kernels), also
 *    walked over the op table;
 *  - jvp walked over the op table (every case of op_cases.h) against central differences in f64;
 *  - vmap walked over the op table for in_axes 0, 1, -1 and unbatched inputs, against running
 *    the function on each example eagerly and stacking; the non-differentiable ops too, so every
 *    op of ops.def is batched at least once;
 *  - hvp against an explicit Hessian times v; grad of grad of polynomials against exact values;
 *    jacfwd against jacrev and finite differences;
 *  - compositions (vmap∘grad, grad∘grad, jvp∘grad, vmap∘vmap with different in_axes,
 *    jit∘vmap∘grad, hvp, jacobians) against JAX goldens (tests/golden/jax/x_transforms.nbg, made by
 *    tests/golden/jax/gen_jax_golden.py with JAX from PyPI);
 *  - symbolic dims through the transforms, and the typed errors.
 */
#include "support.h"
#include "golden_reader.h"
#include "op_cases.h"
#include "ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const XN[3] = {"x0", "x1", "x2"};

/* Run Func f (compiled) with n named arguments; every output into res (scoped). */
static void run(nb_graph *f, int n, const char *const *names, nb_tensor *const *args, nb_tensor **res) {
    if (!f) fail_msg("the transform failed: %s", nb_last_message());
    if (nb_graph_verify(f) != NB_OK) fail_msg("%s", nb_last_message());
    nb_compiled *c = nb_func_jit(f);
    assert_non_null(c);
    if (nb_compiled_run(c, n, names, args, nb_graph_output_count(f), res) != NB_OK) fail_msg("%s", nb_last_message());
    nb_compiled_release(c);
}

static nb_tensor *randn(const int64_t *shape, int nd) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = gc_normal();
    nb_tensor *t = NBT(nb_from_data(v, shape, nd, NB_F64));
    free(v);
    return t;
}

static nb_tensor *drawn(const gc_input *in) {
    int64_t n = gc_count(in);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = gc_draw(in->dom, i);
    nb_tensor *t = NBT(nb_from_data(v, in->s, in->nd, NB_F64));
    free(v);
    return t;
}

static void expect_close(const char *what, nb_tensor *got, nb_tensor *want, double rtol, double atol) {
    assert_int_equal(nb_ndim(got), nb_ndim(want));
    for (int d = 0; d < nb_ndim(want); d++) assert_int_equal(nb_shape(got)[d], nb_shape(want)[d]);
    for (int64_t i = 0; i < nb_numel(want); i++) {
        double a = nbt_at(got, i), b = nbt_at(want, i);
        if (!(fabs(a - b) <= rtol * fabs(b) + atol) && !(isnan(a) && isnan(b)) && a != b) {
            fprintf(stderr, "%s: element %lld: %.17g, expected %.17g\n", what, (long long)i, a, b);
            fail();
        }
    }
}

/* ------------------------------------------------------------------------ */
/* The seed's example; jit compiles once                                    */
/* ------------------------------------------------------------------------ */

static nb_graph *square_sum(nb_dtype dt, int64_t n) {
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *x = nb_graph_input(f, "x", dt, &n, 1);
    assert_int_equal(nb_graph_output(f, "out", nb_sum(nb_mul(x, x), NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(f), NB_OK);
    return f;
}

static void seed_example(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = square_sum(NB_F32, 3);
    nb_graph *g = nb_func_grad(f, 1, (const char *[]){"x"});
    nb_graph *bg = nb_func_vmap(g, 1, (const char *[]){"x"}, (int[]){0}, 4, NULL);
    nb_graph_release(f);
    nb_graph_release(g);
    nb_compile_cache_clear();
    nb_compiled *c = nb_func_jit(bg);
    assert_non_null(c);
    for (int rep = 0; rep < 5; rep++) {
        nb_tensor *xs = NBT(nb_arange(rep, rep + 12, 1, NB_F32)), *gr = NULL;
        xs = NBT(nb_reshape(xs, NB_SHAPE(4, 3)));
        assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xs, 1, &gr), NB_OK);
        assert_int_equal(nb_shape(gr)[0], 4);
        assert_int_equal(nb_shape(gr)[1], 3);
        for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(gr, i) == 2.0 * (rep + i));
        nb_compiled *again = nb_func_jit(bg); /* jit again: the cache's plan */
        assert_ptr_equal(again, c);
        nb_compiled_release(again);
    }
    assert_int_equal(nb_compile_cache_stats_get().misses, 1);
    nb_compiled_release(c);
    nb_graph_release(bg);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* grad and value_and_grad against the eager tape                           */
/* ------------------------------------------------------------------------ */

/* loss(x [B, 4], y [B] i64; W [4, 3], b [3]) = cross_entropy(tanh(x W + b), y) */
static nb_tensor *mlp_loss(nb_tensor *x, nb_tensor *y, nb_tensor *w, nb_tensor *b) {
    return nb_cross_entropy(nb_tanh(nb_add(nb_matmul(x, w), b)), y, NB_CROSS_ENTROPY_DEFAULTS);
}

static void grad_matches_tape(void **state) {
    (void)state;
    nb_scope_begin();
    int64_t B = nb_dim("B");
    nb_tensor *w = randn(NB_SHAPE(4, 3)), *b = randn(NB_SHAPE(3)), *x = randn(NB_SHAPE(5, 4));
    nb_tensor *y = NBT(nb_from_data((int64_t[]){0, 2, 1, 1, 0}, NB_SHAPE(5), NB_I64));
    nb_graph *f = nb_graph_begin("loss");
    nb_tensor *xs = nb_graph_input(f, "x", NB_F64, (int64_t[]){B, 4}, 2);
    nb_tensor *ys = nb_graph_input(f, "y", NB_I64, &B, 1);
    nb_tensor *ws = nb_graph_param(f, "W", w), *bs = nb_graph_param(f, "b", b);
    assert_int_equal(nb_graph_output(f, "loss", mlp_loss(xs, ys, ws, bs)), NB_OK);
    assert_int_equal(nb_graph_output(f, "aux", nb_sum(xs, NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *vg = nb_func_value_and_grad(f, 3, (const char *[]){"W", "x", "b"});
    nb_tensor *res[5];
    run(vg, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){x, y}, res);
    /* the tape */
    nb_tensor *wl = NBT(nb_clone(w)), *bl = NBT(nb_clone(b)), *xl = NBT(nb_clone(x));
    nb_set_requires_grad(wl, true);
    nb_set_requires_grad(bl, true);
    nb_set_requires_grad(xl, true);
    nb_tensor *l = NBT(mlp_loss(xl, y, wl, bl));
    assert_int_equal(nb_backward(l, NULL, false), NB_OK);
    expect_close("value", res[0], l, 0, 0);
    expect_close("aux", res[1], NBT(nb_sum(x, NULL, 0, false)), 0, 0);
    expect_close("grad_W", res[2], NBT(nb_grad(wl)), 0, 0);
    expect_close("grad_x", res[3], NBT(nb_grad(xl)), 0, 0);
    expect_close("grad_b", res[4], NBT(nb_grad(bl)), 0, 0);
    const char *want[] = {"loss", "aux", "grad_W", "grad_x", "grad_b"};
    nb_compiled *c = nb_func_jit(vg);
    for (int i = 0; i < 5; i++) assert_string_equal(nb_graph_output_name(vg, i), want[i]);
    nb_compiled_release(c);
    /* grad alone: only the gradients */
    nb_graph *g = nb_func_grad(f, 1, (const char *[]){"W"});
    assert_int_equal(nb_graph_output_count(g), 1);
    assert_string_equal(nb_graph_output_name(g, 0), "grad_W");
    nb_graph_release(g);
    nb_graph_release(vg);
    nb_graph_release(f);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* Table walks: jvp against central differences, vmap against per-example   */
/* ------------------------------------------------------------------------ */

/* Cases a graph cannot hold, with the reason. */
static bool untraceable(const gc_case *c) {
    return !strcmp(c->op, "to_device"); /* a graph runs on one device */
}

/* Func of the case's inputs x0.. (f64, the case's shapes) with output "out". */
static nb_graph *trace_case(const gc_case *c) {
    nb_graph *f = nb_graph_begin(c->op);
    nb_tensor *x[3];
    for (int i = 0; i < c->n; i++) x[i] = nb_graph_input(f, XN[i], NB_F64, c->in[i].s, c->in[i].nd);
    nb_tensor *y = c->f(x);
    nb_status st = y ? nb_graph_output(f, "out", y) : nb_last_status();
    char msg[512];
    snprintf(msg, sizeof msg, "%s", nb_last_message());
    if (nb_graph_end(f) != NB_OK || st != NB_OK) { /* the trace is closed before failing */
        nb_graph_release(f);
        fail_msg("%s (%s): tracing: %s", c->op, c->label, msg);
    }
    return f;
}

/* c's function run eagerly on copies of x made leaves that require grad (a case may differentiate
 * inside, as view_grad's does). */
static nb_tensor *eager(const gc_case *c, nb_tensor *const *x) {
    nb_tensor *l[3];
    for (int i = 0; i < c->n; i++) {
        l[i] = NBT(nb_clone(x[i]));
        assert_int_equal(nb_set_requires_grad(l[i], true), NB_OK);
    }
    return NBT(nb_detach(NBT(c->f(l))));
}

static void jvp_case(void **state) {
    const gc_case *c = *state;
    nb_scope_begin();
    nb_graph *f = trace_case(c);
    nb_graph *j = nb_func_jvp(f, c->n, XN);
    if (!j) fail_msg("%s (%s): %s", c->op, c->label, nb_last_message());
    nb_tensor *x[3], *t[3], *args[6], *res[2];
    const char *names[6];
    for (int i = 0; i < c->n; i++) {
        x[i] = drawn(&c->in[i]);
        /* cast's case (h = 2^-10) keeps x ± h t exact in f32: integer tangents */
        t[i] = c->h ? NBT(nb_round(NBT(nb_mul(randn(c->in[i].s, c->in[i].nd), 4.0)))) : randn(c->in[i].s, c->in[i].nd);
        names[i] = XN[i];
        names[c->n + i] = (const char *[]){"tangent_x0", "tangent_x1", "tangent_x2"}[i];
        args[i] = x[i];
        args[c->n + i] = t[i];
    }
    run(j, 2 * c->n, names, args, res);
    double h = c->h ? c->h : 1e-6;
    nb_tensor *xp[3], *xm[3];
    for (int i = 0; i < c->n; i++) {
        xp[i] = NBT(nb_add(x[i], NBT(nb_mul(t[i], h))));
        xm[i] = NBT(nb_sub(x[i], NBT(nb_mul(t[i], h))));
    }
    nb_tensor *y = eager(c, x);
    nb_tensor *fd = NBT(nb_div(NBT(nb_sub(eager(c, xp), eager(c, xm))), 2 * h));
    expect_close("primal", res[0], y, 1e-12, 1e-12);
    double scale = 0;
    for (int64_t i = 0; i < nb_numel(y); i++) scale = fmax(scale, fabs(nbt_at(y, i)));
    char what[160];
    snprintf(what, sizeof what, "jvp of %s (%s)", c->op, c->label);
    expect_close(what, res[1], fd, 1e-6, 1e-8 * (1 + scale) / h * 1e-6 + 1e-9);
    nb_graph_release(j);
    nb_graph_release(f);
    nb_scope_end();
}

/* grad of L(x) = sum(f(x) * W) (W fixed random) against the eager tape's gradients: the same rules
 * and kernels, so the same bits — but for cumprod, whose rule picks its formula from the data
 * eagerly (no zeros: the cheaper one) and cannot in a graph (the one exact with zeros), and for
 * attention, whose eager gradient runs the tiled attention_backward kernel (another summation
 * order) where the graph's is written with public ops. */
static void grad_case(void **state) {
    const gc_case *c = *state;
    nb_scope_begin();
    nb_graph *f = trace_case(c);
    nb_tensor *x[3];
    for (int i = 0; i < c->n; i++) x[i] = drawn(&c->in[i]);
    nb_tensor *y = eager(c, x);
    nb_tensor *w = randn(nb_shape(y), nb_ndim(y));
    /* L as a Func calling f (nb_func_call inlines it) */
    nb_graph *l = nb_graph_begin("L");
    nb_tensor *xs[3], *out = NULL;
    for (int i = 0; i < c->n; i++) xs[i] = nb_graph_input(l, XN[i], NB_F64, c->in[i].s, c->in[i].nd);
    assert_int_equal(nb_func_call(f, c->n, XN, xs, 1, &out), NB_OK);
    assert_int_equal(nb_graph_output(l, "L", nb_sum(nb_mul(out, w), NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(l), NB_OK);
    nb_graph *g = nb_func_grad(l, c->n, XN);
    nb_tensor *res[3], *lv[3];
    run(g, c->n, XN, x, res);
    for (int i = 0; i < c->n; i++) {
        lv[i] = NBT(nb_clone(x[i]));
        assert_int_equal(nb_set_requires_grad(lv[i], true), NB_OK);
    }
    nb_tensor *lt = NBT(nb_sum(NBT(nb_mul(NBT(c->f(lv)), w)), NULL, 0, false));
    assert_int_equal(nb_backward(lt, NULL, false), NB_OK);
    for (int i = 0; i < c->n; i++) {
        char what[160];
        snprintf(what, sizeof what, "grad of %s (%s) by x%d", c->op, c->label, i);
        bool tiled = !strcmp(c->op, "scaled_dot_product_attention") || !strcmp(c->op, "attention");
        double tol = !strcmp(c->op, "cumprod") ? 1e-14 : tiled ? 1e-12 : 0;
        expect_close(what, res[i], NBT(nb_grad(lv[i])), tol, tol);
    }
    nb_graph_release(g);
    nb_graph_release(l);
    nb_graph_release(f);
    nb_scope_end();
}

/* Walk the op table: every differentiable op has a traceable case, so jvp and grad are checked
 * on it above (the one exception listed with its reason). */
static void every_differentiable_op_has_a_jvp_case(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (nb__ops[op].grad == NB_GRAD_NONE || !strcmp(nb__ops[op].name, "to_device")) continue;
        bool found = false;
        for (size_t k = 0; k < NCASES && !found; k++)
            found = !strcmp(CASES[k].op, nb__ops[op].name) && !untraceable(&CASES[k]);
        if (!found) {
            fprintf(stderr, "op '%s' is differentiable but no traceable case checks its jvp\n", nb__ops[op].name);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* The vmap variants: every input at axis 0, 1 (rank-0 ones at 0), -1, or x0 at 0 and the
 * others unbatched. */
enum { V_AXIS0, V_AXIS1, V_LAST, V_MIXED, V_COUNT };
static const char *const V_NAMES[V_COUNT] = {"in_axes 0", "in_axes 1", "in_axes -1", "x0 at 0, rest unbatched"};

typedef struct vmap_job {
    const gc_case *c;
    int variant;
} vmap_job;

static int axis_of(const gc_input *in, int i, int variant) {
    switch (variant) {
    case V_AXIS0: return 0;
    case V_AXIS1: return in->nd >= 1 ? 1 : 0;
    case V_LAST: return -1;
    default: return i == 0 ? 0 : NB_UNBATCHED;
    }
}

static void vmap_check(const gc_case *c, int variant) {
    enum { B = 3 };
    nb_scope_begin();
    nb_graph *f = trace_case(c);
    int axes[3];
    for (int i = 0; i < c->n; i++) axes[i] = axis_of(&c->in[i], i, variant);
    nb_graph *v = nb_func_vmap(f, c->n, XN, axes, B, NULL);
    if (!v) fail_msg("%s (%s), %s: %s", c->op, c->label, V_NAMES[variant], nb_last_message());
    nb_tensor *ex[B][3], *args[3], *res[1];
    for (int i = 0; i < c->n; i++) {
        for (int b = 0; b < B; b++) ex[b][i] = axes[i] == NB_UNBATCHED && b ? ex[0][i] : drawn(&c->in[i]);
        if (axes[i] == NB_UNBATCHED) {
            args[i] = ex[0][i];
            continue;
        }
        nb_tensor *col[B] = {ex[0][i], ex[1][i], ex[2][i]};
        args[i] = NBT(nb_stack(col, B, axes[i]));
    }
    run(v, c->n, XN, args, res);
    assert_int_equal(nb_shape(res[0])[0], B);
    for (int b = 0; b < B; b++) {
        char what[160];
        snprintf(what, sizeof what, "vmap of %s (%s), %s, example %d", c->op, c->label, V_NAMES[variant], b);
        expect_close(what, NBT(nb_select(res[0], 0, b)), eager(c, ex[b]), 1e-12, 1e-12);
    }
    nb_graph_release(v);
    nb_graph_release(f);
    nb_scope_end();
}

static void vmap_case(void **state) {
    const vmap_job *j = *state;
    vmap_check(j->c, j->variant);
}

/* The ops without a derivative, batched too (op_cases covers the differentiable ones). */
GC(n_cmp, nb_cast(nb_logical_xor(nb_logical_or(nb_lt(x[0], x[1]), nb_ge(x[0], 0.5)),
                                 nb_logical_and(nb_le(x[0], x[1]), nb_logical_not(nb_gt(x[1], x[0])))),
                  NB_F64))
GC(n_eq, nb_cast(nb_add(nb_cast(nb_eq(nb_round(x[0]), nb_round(x[1])), NB_I64),
                        nb_cast(nb_ne(nb_floor(x[0]), nb_floor(x[1])), NB_I64)),
                 NB_F64))
GC(n_arg, nb_cast(nb_add(nb_argmax(x[0], 1, false), nb_argmin(x[0], 0, false)), NB_F64))
GC(n_numel, nb_mul(x[0], nb__numel_of(x[0], (int[]){1}, 1)))
GC(n_one_hot, nb_mul(nb_cast(nb_one_hot(nb_argmax(x[0], -1, false), 5), NB_F64), 2.0))
GC(n_detach, nb_mul(nb_detach(x[0]), x[0]))
/* the low-precision ops (run once per example by vmap): a per-tensor scale, MX blocks of 32 */
static nb_tensor *n_quant(nb_tensor *const *x) {
    nb_quantized q;
    return nb_quantize(x[0], NB_FMT_F8E4M3FN, NB_SCALE_TENSOR, &q) == NB_OK ? nb_cast(nb_dequantize(&q, NB_F32), NB_F64)
                                                                           : NULL;
}
static nb_tensor *n_scaled_mm(nb_tensor *const *x) {
    nb_quantized a, b;
    if (nb_quantize(x[0], NB_FMT_F4E2M1, NB_SCALE_MX, &a) != NB_OK || nb_quantize(x[1], NB_FMT_F8E5M2, NB_SCALE_MX, &b) != NB_OK)
        return NULL;
    return nb_cast(nb_scaled_matmul(&a, &b, NB_F32), NB_F64);
}
static const gc_case EXTRA[] = {
    {"lt", "comparisons and logic", n_cmp, 2, {{2, {3, 4}, D_ANY}, {1, {4}, D_ANY}}, false, 0},
    {"eq", "eq, ne", n_eq, 2, {{2, {3, 4}, D_ANY}, {2, {3, 4}, D_ANY}}, false, 0},
    {"argmax", "argmax + argmin", n_arg, 1, {{2, {4, 4}, D_ANY}}, false, 0},
    {"numel", "size of axis 1", n_numel, 1, {{2, {3, 4}, D_ANY}}, false, 0},
    {"one_hot", "of an argmax", n_one_hot, 1, {{2, {3, 4}, D_ANY}}, false, 0},
    {"detach", "times itself", n_detach, 1, {{2, {3, 4}, D_ANY}}, false, 0},
    {"quantize", "per-tensor FP8, dequantized", n_quant, 1, {{2, {3, 8}, D_ANY}}, false, 0},
    {"scaled_matmul", "MXFP4 times MXFP8", n_scaled_mm, 2, {{2, {3, 32}, D_ANY}, {2, {2, 32}, D_ANY}}, false, 0},
};
#define NEXTRA (sizeof EXTRA / sizeof EXTRA[0])
/* ops covered by the extra cases beyond the one they are named after */
static const char *const EXTRA_ALSO[] = {"gt", "ge", "le", "ne", "logical_and", "logical_or", "logical_xor",
                                         "logical_not", "argmin", "dequantize"};
/* ops with no vmap case, and why */
static const struct {
    const char *op, *why;
} NO_VMAP_CASE[] = {
    {"rand", "no tensor input: nothing to batch (unbatched results are broadcast, tested in outputs_broadcast)"},
    {"randn", "as rand"},
    {"bernoulli", "random draws: per-example equality is undefined; its rule is the elementwise one"},
    {"to_device", "a graph runs on one device"},
    {"as_strided", "refused while tracing (it addresses a storage, which a symbolic tensor lacks)"},
    {"attention_backward", "run only by an eager backward pass without create_graph; traced, attention's rule is "
                           "written with public ops"},
};

static bool has_case(const char *op) {
    for (size_t k = 0; k < NCASES; k++)
        if (!strcmp(CASES[k].op, op) && !untraceable(&CASES[k])) return true;
    for (size_t k = 0; k < NEXTRA; k++)
        if (!strcmp(EXTRA[k].op, op)) return true;
    for (size_t k = 0; k < sizeof EXTRA_ALSO / sizeof *EXTRA_ALSO; k++)
        if (!strcmp(EXTRA_ALSO[k], op)) return true;
    return false;
}

/* Walk the op table: every op is batched by some case (or listed with the reason). */
static void every_op_is_batched(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        bool listed = false;
        for (size_t k = 0; k < sizeof NO_VMAP_CASE / sizeof *NO_VMAP_CASE; k++)
            listed |= !strcmp(NO_VMAP_CASE[k].op, nb__ops[op].name);
        if (!listed && !has_case(nb__ops[op].name)) {
            fprintf(stderr, "op '%s' has no vmap case: add one to op_cases.c or EXTRA\n", nb__ops[op].name);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* ------------------------------------------------------------------------ */
/* hvp, grad of grad, jacobians                                             */
/* ------------------------------------------------------------------------ */

/* f(x) = sum(a x^3) + sum(x)^2 over x [4]: H = diag(6 a x) + 2 (all ones). */
static void hvp_explicit(void **state) {
    (void)state;
    nb_scope_begin();
    const double a[4] = {1, -2, 0.5, 3}, xv[4] = {0.3, -1.2, 2, 0.7}, vv[4] = {1, 0.5, -2, 4};
    nb_graph *f = nb_graph_begin("cubic");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(4));
    nb_tensor *at = NBT(nb_from_data(a, NB_SHAPE(4), NB_F64));
    nb_tensor *s = nb_sum(x, NULL, 0, false);
    nb_graph_output(f, "out", nb_add(nb_sum(nb_mul(at, nb_pow(x, 3.0)), NULL, 0, false), nb_mul(s, s)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *h = nb_func_hvp(f, 1, (const char *[]){"x"});
    nb_tensor *res[1];
    run(h, 2, (const char *[]){"x", "tangent_x"},
        (nb_tensor *[]){NBT(nb_from_data(xv, NB_SHAPE(4), NB_F64)), NBT(nb_from_data(vv, NB_SHAPE(4), NB_F64))}, res);
    assert_string_equal(nb_graph_output_name(h, 0), "hvp_x");
    double sv = vv[0] + vv[1] + vv[2] + vv[3];
    for (int i = 0; i < 4; i++) assert_true(fabs(nbt_at(res[0], i) - (6 * a[i] * xv[i] * vv[i] + 2 * sv)) <= 1e-12);
    nb_graph_release(h);
    nb_graph_release(f);
    nb_scope_end();
}

/* p(x) = x^4 - 3x^3 + 2x: p' = 4x^3 - 9x^2 + 2, p'' = 12x^2 - 18x, p''' = 24x - 18, exactly. */
static void grad_of_grad_polynomial(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("p");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NULL, 0);
    nb_graph_output(f, "out", nb_add(nb_sub(nb_pow(x, 4.0), nb_mul(nb_pow(x, 3.0), 3.0)), nb_mul(x, 2.0)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    const char *xn[] = {"x"};
    nb_graph *g1 = nb_func_grad(f, 1, xn), *g2 = nb_func_grad(g1, 1, xn), *g3 = nb_func_grad(g2, 1, xn);
    for (double xv = -2; xv <= 2; xv += 0.5) {
        nb_tensor *arg = NBT(nb_scalar(xv, NB_F64)), *r1, *r2, *r3;
        run(g1, 1, xn, &arg, &r1);
        run(g2, 1, xn, &arg, &r2);
        run(g3, 1, xn, &arg, &r3);
        assert_true(nbt_at(r1, 0) == 4 * xv * xv * xv - 9 * xv * xv + 2);
        assert_true(nbt_at(r2, 0) == 12 * xv * xv - 18 * xv);
        assert_true(nbt_at(r3, 0) == 24 * xv - 18);
    }
    nb_graph_release(g3);
    nb_graph_release(g2);
    nb_graph_release(g1);
    nb_graph_release(f);
    nb_scope_end();
}

/* y = tanh(W x) * x[0] with W [3, 4] a param, x [4]: jacfwd == jacrev == finite differences. */
static void jacobians_agree(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *w = randn(NB_SHAPE(3, 4)), *xv = randn(NB_SHAPE(4));
    nb_graph *f = nb_graph_begin("j");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(4));
    nb_tensor *ws = nb_graph_param(f, "W", w);
    nb_graph_output(f, "y", nb_mul(nb_tanh(nb_matmul(ws, x)), nb_select(x, 0, 0)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    const char *wrt[] = {"x", "W"};
    nb_graph *jf = nb_func_jacfwd(f, 2, wrt), *jr = nb_func_jacrev(f, 2, wrt);
    nb_tensor *a[2], *b[2];
    run(jf, 1, (const char *[]){"x"}, &xv, a);
    run(jr, 1, (const char *[]){"x"}, &xv, b);
    assert_int_equal(nb_ndim(a[0]), 2);
    assert_int_equal(nb_ndim(a[1]), 3);
    assert_string_equal(nb_graph_output_name(jf, 1), "jac_W");
    expect_close("jac_x fwd vs rev", a[0], b[0], 1e-13, 1e-14);
    expect_close("jac_W fwd vs rev", a[1], b[1], 1e-13, 1e-14);
    /* column k of jac_x by central differences of the eager function */
    double h = 1e-6;
    for (int k = 0; k < 4; k++) {
        nb_tensor *e = NBT(nb_mul(NBT(nb_select(NBT(nb_eye(4, 4, NB_F64)), 0, k)), h));
        nb_tensor *xp = NBT(nb_add(xv, e)), *xm = NBT(nb_sub(xv, e));
        nb_tensor *yp = NBT(nb_mul(NBT(nb_tanh(NBT(nb_matmul(w, xp)))), NBT(nb_select(xp, 0, 0))));
        nb_tensor *ym = NBT(nb_mul(NBT(nb_tanh(NBT(nb_matmul(w, xm)))), NBT(nb_select(xm, 0, 0))));
        nb_tensor *fd = NBT(nb_div(NBT(nb_sub(yp, ym)), 2 * h));
        expect_close("jac_x vs finite differences", NBT(nb_select(a[0], 1, k)), fd, 1e-6, 1e-8);
    }
    nb_graph_release(jf);
    nb_graph_release(jr);
    nb_graph_release(f);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* vmap details: out_axes, unbatched outputs, vmap of vmap, symbolic batch  */
/* ------------------------------------------------------------------------ */

static void outputs_broadcast_and_out_axes(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("two");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(2, 3));
    nb_tensor *c = nb_graph_input(f, "c", NB_F64, NB_SHAPE(3));
    nb_graph_output(f, "y", nb_add(nb_exp(x), c));
    nb_graph_output(f, "k", nb_mul(c, 2.0)); /* reaches no batched input */
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *v = nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){2}, 4, (int[]){-1, 1});
    nb_tensor *xs = randn(NB_SHAPE(2, 3, 4)), *cs = randn(NB_SHAPE(3)), *res[2];
    run(v, 2, (const char *[]){"x", "c"}, (nb_tensor *[]){xs, cs}, res);
    /* y [2, 3, 4] with the batch last; k [3, 4] broadcast with the batch at axis 1 */
    assert_int_equal(nb_shape(res[1])[0], 3);
    assert_int_equal(nb_shape(res[1])[1], 4);
    for (int b = 0; b < 4; b++) {
        nb_tensor *xb = NBT(nb_select(xs, 2, b));
        expect_close("y", NBT(nb_select(res[0], 2, b)), NBT(nb_add(NBT(nb_exp(xb)), cs)), 0, 0);
        expect_close("k", NBT(nb_select(res[1], 1, b)), NBT(nb_mul(cs, 2.0)), 0, 0);
    }
    nb_graph_release(v);
    nb_graph_release(f);
    nb_scope_end();
}

/* vmap of vmap with different in_axes, and a symbolic batch size through grad. */
static void vmap_of_vmap_and_symbolic(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("dot");
    nb_tensor *a = nb_graph_input(f, "a", NB_F64, NB_SHAPE(3));
    nb_tensor *b = nb_graph_input(f, "b", NB_F64, NB_SHAPE(3));
    nb_graph_output(f, "out", nb_sum(nb_mul(nb_sin(a), b), NULL, 0, false));
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *v1 = nb_func_vmap(f, 2, (const char *[]){"a", "b"}, (int[]){0, NB_UNBATCHED}, 4, NULL);
    int64_t N = nb_dim("N");
    nb_graph *v2 = nb_func_vmap(v1, 1, (const char *[]){"b"}, (int[]){1}, N, NULL); /* out [N, 4] */
    nb_tensor *av = randn(NB_SHAPE(4, 3)), *bv = randn(NB_SHAPE(3, 5)), *res[1];
    run(v2, 2, (const char *[]){"a", "b"}, (nb_tensor *[]){av, bv}, res);
    assert_int_equal(nb_shape(res[0])[0], 5);
    assert_int_equal(nb_shape(res[0])[1], 4);
    nb_tensor *want = NBT(nb_transpose(NBT(nb_matmul(NBT(nb_sin(av)), bv)), 0, 1));
    expect_close("vmap of vmap", res[0], want, 1e-14, 1e-14);
    /* per-example gradients with a symbolic batch: grad of f wrt a, vmapped over a and b */
    nb_graph *g = nb_func_grad(f, 1, (const char *[]){"a"});
    nb_graph *vg = nb_func_vmap(g, 2, (const char *[]){"a", "b"}, (int[]){0, 0}, N, NULL);
    nb_tensor *bb = randn(NB_SHAPE(4, 3));
    run(vg, 2, (const char *[]){"a", "b"}, (nb_tensor *[]){av, bb}, res);
    expect_close("vmap of grad", res[0], NBT(nb_mul(NBT(nb_cos(av)), bb)), 1e-15, 1e-15);
    nb_graph_release(vg);
    nb_graph_release(g);
    nb_graph_release(v2);
    nb_graph_release(v1);
    nb_graph_release(f);
    nb_scope_end();
}

/* grad of a vmap'd loss: h(x [4, 3]) = sum(vmap(f)(x)) with f(a [3]) = sum(sin(a) a), through
 * nb_func_call inside the trace of h; and nb_func_call outside a trace (compiled and run). */
static void grad_of_vmap_and_call(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *a = nb_graph_input(f, "a", NB_F64, NB_SHAPE(3));
    nb_graph_output(f, "out", nb_sum(nb_mul(nb_sin(a), a), NULL, 0, false));
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *v = nb_func_vmap(f, 1, (const char *[]){"a"}, (int[]){0}, 4, NULL);
    nb_graph *h = nb_graph_begin("h");
    nb_tensor *x = nb_graph_input(h, "x", NB_F64, NB_SHAPE(4, 3)), *per = NULL;
    assert_int_equal(nb_func_call(v, 1, (const char *[]){"a"}, &x, 1, &per), NB_OK);
    assert_int_equal(nb_graph_output(h, "total", nb_sum(per, NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(h), NB_OK);
    nb_graph *g = nb_func_grad(h, 1, (const char *[]){"x"});
    nb_tensor *xv = randn(NB_SHAPE(4, 3)), *res[1];
    run(g, 1, (const char *[]){"x"}, &xv, res);
    nb_tensor *want = NBT(nb_add(NBT(nb_mul(NBT(nb_cos(xv)), xv)), NBT(nb_sin(xv))));
    expect_close("grad of a vmap'd loss", res[0], want, 1e-15, 1e-15);
    /* outside a trace: compiled and run on concrete arguments */
    nb_tensor *out = NULL;
    assert_int_equal(nb_func_call(v, 1, (const char *[]){"a"}, &xv, 1, &out), NB_OK);
    for (int b = 0; b < 4; b++) {
        nb_tensor *row = NBT(nb_select(xv, 0, b));
        double want_b = 0;
        assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_mul(NBT(nb_sin(row)), row)), NULL, 0, false)), &want_b), NB_OK);
        assert_true(fabs(nbt_at(out, b) - want_b) <= 1e-15 * (1 + fabs(want_b)));
    }
    nb_graph_release(g);
    nb_graph_release(h);
    nb_graph_release(v);
    nb_graph_release(f);
    nb_scope_end();
}

/* A symbolic size N through vjp, jvp and hvp: one plan each, run at two sizes, against the exact
 * derivatives of f(x [N]) = sum(exp(x) x): f' = e^x (1 + x), f'' = e^x (2 + x). */
static void symbolic_dims_through_transforms(void **state) {
    (void)state;
    nb_scope_begin();
    int64_t N = nb_dim("N");
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, &N, 1);
    nb_graph_output(f, "out", nb_sum(nb_mul(nb_exp(x), x), NULL, 0, false));
    assert_int_equal(nb_graph_end(f), NB_OK);
    const char *xn[] = {"x"}, *two[] = {"x", "tangent_x"};
    nb_graph *j = nb_func_jvp(f, 1, xn), *h = nb_func_hvp(f, 1, xn), *v = nb_func_vjp(f, 1, xn);
    for (int64_t n = 3; n <= 5; n += 2) {
        nb_tensor *xv = randn(&n, 1), *tv = randn(&n, 1), *jr[2], *hr[1], *vr[2];
        run(j, 2, two, (nb_tensor *[]){xv, tv}, jr);
        run(h, 2, two, (nb_tensor *[]){xv, tv}, hr);
        run(v, 2, (const char *[]){"x", "ct_out"}, (nb_tensor *[]){xv, NBT(nb_scalar(2.0, NB_F64))}, vr);
        double tangent = 0;
        for (int64_t i = 0; i < n; i++) {
            double a = nbt_at(xv, i), t = nbt_at(tv, i);
            tangent += exp(a) * (1 + a) * t;
            assert_true(fabs(nbt_at(hr[0], i) - exp(a) * (2 + a) * t) <= 1e-13 * (1 + fabs(exp(a) * (2 + a) * t)));
            assert_true(fabs(nbt_at(vr[1], i) - 2 * exp(a) * (1 + a)) <= 1e-13 * (1 + fabs(exp(a) * (1 + a))));
        }
        assert_true(fabs(nbt_at(jr[1], 0) - tangent) <= 1e-13 * (1 + fabs(tangent)));
    }
    nb_graph_release(v);
    nb_graph_release(h);
    nb_graph_release(j);
    nb_graph_release(f);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* Compositions against JAX goldens                                         */
/* ------------------------------------------------------------------------ */

static nbg_file jax;

static const nbg_case *golden(const char *name) {
    for (int i = 0; i < jax.ncases; i++)
        if (!strcmp(jax.cases[i].name, name)) return &jax.cases[i];
    fail_msg("golden case '%s' missing from x_transforms.nbg", name);
    return NULL;
}

static nb_tensor *gt(const nbg_case *c, const char *name) {
    const nbg_tensor *t = nbg_find(c, name);
    if (!t) fail_msg("golden %s has no tensor %s", c->name, name);
    return NBT(nbg_to_tensor(t));
}

/* loss(x [4], y [3] one-hot; W [4, 3], b [3]) = -sum(y * log_softmax(tanh(x W + b))) */
static nb_graph *golden_loss(nb_tensor *w, nb_tensor *b) {
    nb_graph *f = nb_graph_begin("ce");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(4));
    nb_tensor *y = nb_graph_input(f, "y", NB_F64, NB_SHAPE(3));
    nb_tensor *z = nb_tanh(nb_add(nb_matmul(x, nb_graph_param(f, "W", w)), nb_graph_param(f, "b", b)));
    nb_graph_output(f, "loss", nb_neg(nb_sum(nb_mul(y, nb_log_softmax(z, -1)), NULL, 0, false)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    return f;
}

static void jax_compositions(void **state) {
    (void)state;
    nb_scope_begin();
    const double tol = 1e-12;
    /* jit(vmap(grad(loss, W), in_axes (0, 0))) : per-example gradients of W */
    const nbg_case *c = golden("vmap_grad/per_example");
    nb_graph *f = golden_loss(gt(c, "in.W"), gt(c, "in.b"));
    nb_graph *g = nb_func_grad(f, 2, (const char *[]){"W", "x"});
    nb_graph *vg = nb_func_vmap(g, 2, (const char *[]){"x", "y"}, (int[]){0, 0}, 6, NULL);
    nb_tensor *res[2];
    run(vg, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){gt(c, "in.x"), gt(c, "in.y")}, res);
    expect_close("vmap(grad) W", res[0], gt(c, "out.gW"), tol, tol);
    expect_close("vmap(grad) x", res[1], gt(c, "out.gx"), tol, tol);
    nb_graph_release(vg);
    nb_graph_release(g);
    nb_graph_release(f);
    /* grad(grad(f)) of f(x) = sin(x) x^3 at a scalar, and jvp(grad(f)) (an hvp) of a vector f */
    c = golden("grad_grad/scalar");
    nb_graph *p = nb_graph_begin("p");
    nb_tensor *x = nb_graph_input(p, "x", NB_F64, NULL, 0);
    nb_graph_output(p, "out", nb_mul(nb_sin(x), nb_pow(x, 3.0)));
    assert_int_equal(nb_graph_end(p), NB_OK);
    nb_graph *g1 = nb_func_grad(p, 1, (const char *[]){"x"}), *g2 = nb_func_grad(g1, 1, (const char *[]){"x"});
    run(g2, 1, (const char *[]){"x"}, (nb_tensor *[]){gt(c, "in.x")}, res);
    expect_close("grad(grad)", res[0], gt(c, "out.0"), tol, tol);
    nb_graph_release(g2);
    nb_graph_release(g1);
    nb_graph_release(p);
    c = golden("jvp_grad/vector");
    nb_graph *q = nb_graph_begin("q");
    x = nb_graph_input(q, "x", NB_F64, NB_SHAPE(5));
    nb_tensor *s = nb_sum(x, NULL, 0, false);
    nb_graph_output(q, "out", nb_add(nb_sum(nb_mul(nb_exp(x), x), NULL, 0, false), nb_mul(s, s)));
    assert_int_equal(nb_graph_end(q), NB_OK);
    g1 = nb_func_grad(q, 1, (const char *[]){"x"});
    nb_graph *jg = nb_func_jvp(g1, 1, (const char *[]){"x"});
    run(jg, 2, (const char *[]){"x", "tangent_x"}, (nb_tensor *[]){gt(c, "in.x"), gt(c, "in.t")}, res);
    expect_close("jvp(grad) primal", res[0], gt(c, "out.0"), tol, tol);
    expect_close("jvp(grad) tangent", res[1], gt(c, "out.1"), tol, tol);
    nb_graph *h = nb_func_hvp(q, 1, (const char *[]){"x"});
    run(h, 2, (const char *[]){"x", "tangent_x"}, (nb_tensor *[]){gt(c, "in.x"), gt(c, "in.t")}, res);
    expect_close("hvp", res[0], gt(c, "out.1"), tol, tol);
    nb_graph_release(h);
    nb_graph_release(jg);
    nb_graph_release(g1);
    nb_graph_release(q);
    /* vmap(vmap(f, in_axes (0, None)), in_axes (None, 1)) of f(a, b) = sum(sin(a) * b) */
    c = golden("vmap_vmap/axes");
    nb_graph *d = nb_graph_begin("d");
    nb_tensor *a = nb_graph_input(d, "a", NB_F64, NB_SHAPE(3)), *b = nb_graph_input(d, "b", NB_F64, NB_SHAPE(3));
    nb_graph_output(d, "out", nb_sum(nb_mul(nb_sin(a), b), NULL, 0, false));
    assert_int_equal(nb_graph_end(d), NB_OK);
    nb_graph *v1 = nb_func_vmap(d, 1, (const char *[]){"a"}, (int[]){0}, 4, NULL);
    nb_graph *v2 = nb_func_vmap(v1, 1, (const char *[]){"b"}, (int[]){1}, 5, NULL);
    run(v2, 2, (const char *[]){"a", "b"}, (nb_tensor *[]){gt(c, "in.a"), gt(c, "in.b")}, res);
    expect_close("vmap(vmap)", res[0], gt(c, "out.0"), tol, tol);
    nb_graph_release(v2);
    nb_graph_release(v1);
    nb_graph_release(d);
    /* jacfwd and jacrev of y = tanh(W x) */
    c = golden("jacobian/tanh_matvec");
    nb_graph *j = nb_graph_begin("j");
    x = nb_graph_input(j, "x", NB_F64, NB_SHAPE(4));
    nb_graph_output(j, "y", nb_tanh(nb_matmul(nb_graph_param(j, "W", gt(c, "in.W")), x)));
    assert_int_equal(nb_graph_end(j), NB_OK);
    nb_graph *jf = nb_func_jacfwd(j, 1, (const char *[]){"x"}), *jr = nb_func_jacrev(j, 1, (const char *[]){"x"});
    run(jf, 1, (const char *[]){"x"}, (nb_tensor *[]){gt(c, "in.x")}, res);
    expect_close("jacfwd", res[0], gt(c, "out.0"), tol, tol);
    run(jr, 1, (const char *[]){"x"}, (nb_tensor *[]){gt(c, "in.x")}, res);
    expect_close("jacrev", res[0], gt(c, "out.0"), tol, tol);
    nb_graph_release(jf);
    nb_graph_release(jr);
    nb_graph_release(j);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* Compositions whose generated names meet, constants through nb_func_call, random draws  */
/* under vmap, and the fused plan of vmap(hvp) (regressions)                              */
/* ------------------------------------------------------------------------ */

/* f(x [3]) = sum(x^3): the Hessian diag(6x) by jacrev(grad) and jacfwd(grad); jvp of jvp (second
 * directional derivative sum(6 x t1 t2)); value_and_grad twice, names prefixed again. */
static void compositions_with_meeting_names(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("cube");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(3));
    nb_graph_output(f, "out", nb_sum(nb_pow(x, 3.0), NULL, 0, false));
    assert_int_equal(nb_graph_end(f), NB_OK);
    const char *xn[] = {"x"};
    const double xv[3] = {0.5, -1.5, 2}, t1[3] = {1, 2, -1}, t2[3] = {0.25, -1, 3};
    nb_tensor *xt = NBT(nb_from_data(xv, NB_SHAPE(3), NB_F64)), *res[4];
    nb_graph *g = nb_func_grad(f, 1, xn), *hr = nb_func_jacrev(g, 1, xn), *hf = nb_func_jacfwd(g, 1, xn);
    run(hr, 1, xn, &xt, res);
    run(hf, 1, xn, &xt, res + 1);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            assert_true(nbt_at(res[0], 3 * i + j) == (i == j ? 6 * xv[i] : 0));
            assert_true(nbt_at(res[1], 3 * i + j) == (i == j ? 6 * xv[i] : 0));
        }
    nb_graph *j1 = nb_func_jvp(f, 1, xn), *j2 = nb_func_jvp(j1, 1, xn);
    const char *jn[] = {"x", "tangent_x", "tangent_tangent_x"};
    run(j2, 3, jn,
        (nb_tensor *[]){xt, NBT(nb_from_data(t1, NB_SHAPE(3), NB_F64)), NBT(nb_from_data(t2, NB_SHAPE(3), NB_F64))},
        res);
    const char *want[] = {"out", "tangent_out", "tangent_tangent_out", "tangent_tangent_tangent_out"};
    double second = 0, along2 = 0;
    for (int i = 0; i < 3; i++) {
        second += 6 * xv[i] * t1[i] * t2[i];
        along2 += 3 * xv[i] * xv[i] * t2[i];
    }
    for (int i = 0; i < 4; i++) assert_string_equal(nb_graph_output_name(j2, i), want[i]);
    assert_true(fabs(nbt_at(res[2], 0) - along2) <= 1e-13);
    assert_true(fabs(nbt_at(res[3], 0) - second) <= 1e-13);
    nb_graph *v1 = nb_func_value_and_grad(f, 1, xn), *v2 = nb_func_value_and_grad(v1, 1, xn);
    const char *vn[] = {"out", "grad_x", "grad_grad_x"};
    for (int i = 0; i < 3; i++) assert_string_equal(nb_graph_output_name(v2, i), vn[i]);
    nb_graph *gs[] = {g, hr, hf, j1, j2, v1, v2, f};
    for (size_t i = 0; i < sizeof gs / sizeof *gs; i++) nb_graph_release(gs[i]);
    nb_scope_end();
}

static void call_returns_no_constant_and_draws_per_example(void **state) {
    (void)state;
    nb_scope_begin();
    /* a constant output of a Func called inside a trace is a symbolic tensor, not the constant */
    nb_tensor *k = NBT(nb_full(NB_SHAPE(3), 2.0, NB_F64));
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(3));
    nb_graph_output(f, "y", nb_add(x, k));
    nb_graph_output(f, "k", k);
    assert_int_equal(nb_graph_end(f), NB_OK);
    nb_graph *o = nb_graph_begin("o");
    nb_tensor *z = nb_graph_input(o, "z", NB_F64, NB_SHAPE(3)), *r[2];
    assert_int_equal(nb_func_call(f, 1, (const char *[]){"x"}, &z, 2, r), NB_OK);
    assert_ptr_not_equal(r[1], k);
    assert_int_not_equal(nb_fill_(r[1], 100.0), NB_OK); /* symbolic: no data to write */
    nb_clear_error();
    nb_graph_output(o, "y", r[0]);
    assert_int_equal(nb_graph_end(o), NB_OK);
    nb_tensor *out = NULL;
    assert_int_equal(nb_func_call(f, 1, (const char *[]){"x"}, (nb_tensor *[]){NBT(nb_ones(NB_SHAPE(3), NB_F64))}, 1,
                                  &out), NB_OK);
    for (int i = 0; i < 3; i++) assert_true(nbt_at(out, i) == 3.0);
    /* dropout under vmap: a mask per example */
    nb_graph *d = nb_graph_begin("drop");
    nb_tensor *w = nb_graph_input(d, "w", NB_F64, NB_SHAPE(64));
    nb_graph_output(d, "out", nb_dropout(w, 0.5, true));
    assert_int_equal(nb_graph_end(d), NB_OK);
    nb_graph *v = nb_func_vmap(d, 1, (const char *[]){"w"}, (int[]){NB_UNBATCHED}, 4, NULL);
    nb_tensor *res[1];
    run(v, 1, (const char *[]){"w"}, (nb_tensor *[]){NBT(nb_ones(NB_SHAPE(64), NB_F64))}, res);
    int differ = 0;
    for (int b = 1; b < 4; b++)
        for (int i = 0; i < 64; i++) differ += nbt_at(res[0], 64 * b + i) != nbt_at(res[0], i);
    for (int i = 0; i < 4 * 64; i++) assert_true(nbt_at(res[0], i) == 0 || nbt_at(res[0], i) == 2);
    assert_true(differ > 0);
    nb_graph_release(v);
    nb_graph_release(d);
    nb_graph_release(o);
    nb_graph_release(f);
    nb_scope_end();
}

/* vmap of an hvp with respect to two inputs: its fused plan once had a cycle through a kernel
 * whose members lay on both sides of the kernel being grown (fuse.c's reach_bound). */
static void vmap_of_hvp_compiles(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *x = nb_graph_input(f, "x", NB_F64, NB_SHAPE(4, 5)), *y = nb_graph_input(f, "y", NB_F64, NB_SHAPE(4, 5));
    nb_tensor *l = nb_cross_entropy(x, nb_softmax(y, -1), NB_CROSS_ENTROPY_DEFAULTS);
    nb_graph_output(f, "out", nb_mul(l, nb_sin(l)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    const char *xy[] = {"x", "y"}, *args[] = {"x", "y", "tangent_x", "tangent_y"};
    nb_graph *h = nb_func_hvp(f, 2, xy);
    nb_graph *v = nb_func_vmap(h, 1, (const char *[]){"x"}, (int[]){0}, 3, NULL);
    nb_tensor *xs = randn(NB_SHAPE(3, 4, 5)), *yv = randn(NB_SHAPE(4, 5)), *tx = randn(NB_SHAPE(4, 5)),
              *ty = randn(NB_SHAPE(4, 5)), *res[2], *one[2];
    run(v, 4, args, (nb_tensor *[]){xs, yv, tx, ty}, res);
    for (int b = 0; b < 3; b++) {
        run(h, 4, args, (nb_tensor *[]){NBT(nb_select(xs, 0, b)), yv, tx, ty}, one);
        expect_close("vmap(hvp) x", NBT(nb_select(res[0], 0, b)), one[0], 1e-13, 1e-13);
        expect_close("vmap(hvp) y", NBT(nb_select(res[1], 0, b)), one[1], 1e-13, 1e-13);
    }
    nb_graph_release(v);
    nb_graph_release(h);
    nb_graph_release(f);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */
/* Typed errors                                                             */
/* ------------------------------------------------------------------------ */

static void errors(void **state) {
    (void)state;
    nb_scope_begin();
    nb_graph *f = nb_graph_begin("f");
    nb_tensor *x = nb_graph_input(f, "x", NB_F32, NB_SHAPE(2, 3));
    nb_tensor *i = nb_graph_input(f, "i", NB_I64, NB_SHAPE(2));
    nb_graph_output(f, "out", nb_mul(x, nb_cast(nb_unsqueeze(i, 1), NB_F32)));
    assert_int_equal(nb_graph_end(f), NB_OK);
    assert_null(nb_func_grad(f, 1, (const char *[]){"z"}));
    nbt_expect_error(NB_ERR_ARG, "'z' is not an input or param of Func 'f' (it has 'x', 'i')");
    assert_null(nb_func_grad(f, 1, (const char *[]){"x"}));
    nbt_expect_error(NB_ERR_SHAPE, "output 'out' of Func 'f' has shape [2, 3]; grad needs one element");
    assert_null(nb_func_grad(f, 2, (const char *[]){"x", "x"}));
    nbt_expect_error(NB_ERR_ARG, "'x' is named twice");
    assert_null(nb_func_jvp(f, 1, (const char *[]){"i"}));
    nbt_expect_error(NB_ERR_DTYPE, "'i' of Func 'f' has dtype int64");
    assert_null(nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){3}, 4, NULL));
    nbt_expect_error(NB_ERR_AXIS, "vmap: in_axes axis 3 of 'x' (rank 2) is outside [-3, 2]");
    assert_null(nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){0}, 4, (int[]){-4}));
    nbt_expect_error(NB_ERR_AXIS, "out_axes axis -4 of 'out' (rank 2)");
    assert_null(nb_func_grad(NULL, 1, (const char *[]){"x"}));
    nbt_expect_error(NB_ERR_NULL, "grad");
    assert_null(nb_func_vmap(f, 0, NULL, NULL, 4, NULL));
    nbt_expect_error(NB_ERR_ARG, "vmap: 0 names given");
    assert_null(nb_func_grad(f, 100000000, NULL));
    nbt_expect_error(NB_ERR_ARG, "100000000 names given for Func 'f'");
    assert_null(nb_func_vmap(f, 1, NULL, (int[]){0}, 4, NULL));
    nbt_expect_error(NB_ERR_NULL, "vmap: names is NULL");
    assert_null(nb_func_grad(f, 1, (const char *[]){"i"}));
    nbt_expect_error(NB_ERR_DTYPE, "grad: 'i' of Func 'f' has dtype int64; gradients need a float input");
    assert_null(nb_func_vmap(f, 1, (const char *[]){"x"}, (int[]){NB_UNBATCHED}, nb_dim("Q"), NULL));
    nbt_expect_error(NB_ERR_ARG, "vmap: the batch size 'Q' is symbolic but no input is batched or has it");
    nb_graph *empty = nb_graph_begin("empty");
    nb_graph_input(empty, "x", NB_F32, NB_SHAPE(3));
    assert_int_equal(nb_graph_end(empty), NB_ERR_STATE);
    nb_clear_error();
    assert_null(nb_func_jacfwd(empty, 1, (const char *[]){"x"}));
    nbt_expect_error(NB_ERR_STATE, "jacfwd: Func 'empty' has no output");
    nb_graph_release(empty);
    /* batch sizes that disagree between inputs: the run names the input */
    nb_graph *v = nb_func_vmap(f, 2, (const char *[]){"x", "i"}, (int[]){0, 0}, 4, NULL);
    nb_compiled *c = nb_func_jit(v);
    nb_tensor *out = NULL;
    nb_status st = nb_compiled_run(c, 2, (const char *[]){"x", "i"},
                                   (nb_tensor *[]){NBT(nb_zeros(NB_SHAPE(4, 2, 3), NB_F32)),
                                                   NBT(nb_zeros(NB_SHAPE(5, 2), NB_I64))}, 1, &out);
    assert_int_equal(st, NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "'i'");
    nb_compiled_release(c);
    nb_graph_release(v);
    /* a tangent of the wrong shape or dtype */
    nb_graph *j = nb_func_jvp(f, 1, (const char *[]){"x"});
    c = nb_func_jit(j);
    nb_tensor *res[2];
    nb_tensor *xa = NBT(nb_zeros(NB_SHAPE(2, 3), NB_F32)), *ia = NBT(nb_zeros(NB_SHAPE(2), NB_I64));
    const char *jn[] = {"x", "i", "tangent_x"};
    st = nb_compiled_run(c, 3, jn, (nb_tensor *[]){xa, ia, NBT(nb_zeros(NB_SHAPE(3, 2), NB_F32))}, 2, res);
    assert_int_equal(st, NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "tangent_x");
    st = nb_compiled_run(c, 3, jn, (nb_tensor *[]){xa, ia, NBT(nb_zeros(NB_SHAPE(2, 3), NB_F64))}, 2, res);
    assert_int_equal(st, NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "tangent_x");
    nb_compiled_release(c);
    nb_graph_release(j);
    /* nb_func_call: inside a trace it inlines; a wrong argument is typed */
    nb_graph *outer = nb_graph_begin("outer");
    nb_tensor *y = nb_graph_input(outer, "y", NB_F32, NB_SHAPE(2, 3));
    assert_int_equal(nb_func_call(f, 1, (const char *[]){"x"}, &y, 1, res), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "input 'i' of Func 'f' is missing");
    assert_int_equal(nb_func_call(f, 2, (const char *[]){"x", "i"}, (nb_tensor *[]){y, y}, 1, res), NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "input 'i' of Func 'f' is int64, got float32");
    nb_graph_end(outer);
    nb_clear_error();
    nb_graph_release(outer);
    nb_graph_release(f);
    nb_scope_end();
}

/* ------------------------------------------------------------------------ */

static int clear_error(void **state) {
    (void)state;
    nb_clear_error();
    return 0;
}

static int load_golden(void **state) {
    (void)state;
    const char *dir = getenv("NB_GOLDEN_DIR");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/jax/x_transforms.nbg", dir ? dir : NB_GOLDEN_DEFAULT_DIR);
    if (nbg_load(path, &jax, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err);
        return -1;
    }
    return 0;
}

static int free_golden(void **state) {
    (void)state;
    nbg_free(&jax);
    return 0;
}

int main(void) {
    enum { MAXT = 2048 };
    static struct CMUnitTest tests[MAXT];
    static char names[MAXT][112];
    static vmap_job jobs[MAXT];
    size_t n = 0, nj = 0;
#define T(fn) tests[n++] = (struct CMUnitTest){#fn, fn, clear_error, NULL, NULL}
    T(seed_example);
    T(grad_matches_tape);
    T(every_op_is_batched);
    T(every_differentiable_op_has_a_jvp_case);
    T(grad_of_vmap_and_call);
    T(hvp_explicit);
    T(grad_of_grad_polynomial);
    T(jacobians_agree);
    T(outputs_broadcast_and_out_axes);
    T(vmap_of_vmap_and_symbolic);
    T(symbolic_dims_through_transforms);
    T(compositions_with_meeting_names);
    T(call_returns_no_constant_and_draws_per_example);
    T(vmap_of_hvp_compiles);
    T(jax_compositions);
    T(errors);
#undef T
    if (NCASES * (2 + V_COUNT) + NEXTRA * V_COUNT + n > MAXT) {
        fprintf(stderr, "test_transforms: more tests than MAXT (%d): raise it\n", MAXT);
        return 1;
    }
    for (size_t k = 0; k < NCASES; k++) {
        if (untraceable(&CASES[k])) continue;
        snprintf(names[n], sizeof names[n], "jvp %s %s", CASES[k].op, CASES[k].label);
        tests[n] = (struct CMUnitTest){names[n], jvp_case, clear_error, NULL, (void *)&CASES[k]};
        n++;
    }
    for (size_t k = 0; k < NCASES; k++) {
        if (untraceable(&CASES[k])) continue;
        snprintf(names[n], sizeof names[n], "grad %s %s", CASES[k].op, CASES[k].label);
        tests[n] = (struct CMUnitTest){names[n], grad_case, clear_error, NULL, (void *)&CASES[k]};
        n++;
    }
    for (size_t k = 0; k < NCASES + NEXTRA; k++) {
        const gc_case *c = k < NCASES ? &CASES[k] : &EXTRA[k - NCASES];
        if (untraceable(c)) continue;
        for (int v = 0; v < V_COUNT; v++) {
            jobs[nj] = (vmap_job){c, v};
            snprintf(names[n], sizeof names[n], "vmap %s %s, %s", c->op, c->label, V_NAMES[v]);
            tests[n] = (struct CMUnitTest){names[n], vmap_case, clear_error, NULL, &jobs[nj++]};
            n++;
        }
    }
    return _cmocka_run_group_tests("transforms", tests, n, load_golden, free_golden);
}
