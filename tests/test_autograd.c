/*
 * test_autograd.c — the eager tape (SPEC A1–A3, A5, A6): when nodes are
 * recorded, backward with and without a seed, accumulation, zero_grad,
 * detach, per-thread no_grad, grad of grad, gradients of broadcast inputs
 * and across device moves, nb_autograd_grad, and passes run while an
 * unrelated error is pending.  Expected gradients are
 * closed-form derivatives worked out in each test.
 */
#include "support.h"
#include "backend/backend.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static nb_tensor *vec(const double *v, int64_t n) { return NBT(nb_from_data(v, &n, 1, NB_F64)); }

static nb_tensor *leaf(const double *v, int64_t n) {
    nb_tensor *t = vec(v, n);
    assert_int_equal(nb_set_requires_grad(t, true), NB_OK);
    return t;
}

/* Elementwise check of t against f(x[i]) (closed form) to 1e-12 relative. */
static void assert_fn(nb_tensor *t, const double *x, int64_t n, double (*f)(double)) {
    assert_int_equal(nb_numel(t), n);
    for (int64_t i = 0; i < n; i++) {
        double got = nbt_at(t, i), want = f(x[i]);
        if (!(fabs(got - want) <= 1e-12 * (1 + fabs(want)))) {
            fprintf(stderr, "element %lld: got %.17g want %.17g\n", (long long)i, got, want);
            fail();
        }
    }
}

static void assert_error(nb_status code, const char *op) {
    if (nb_last_status() != code || !strstr(nb_last_message(), op)) {
        fprintf(stderr, "expected %s naming '%s', got %s: %s\n", nb_status_name(code), op,
                nb_status_name(nb_last_status()), nb_last_message());
        fail();
    }
    nb_clear_error();
}


static const double X[] = {-1.5, -0.25, 0.5, 2.0};

/* ---- A1: recording ---- */

static void records_only_when_tracked(void **state) {
    (void)state;
    nb_tensor *x = vec(X, 4), *w = leaf(X, 4);
    assert_true(nb_is_leaf(x) && !nb_requires_grad(x));
    nb_tensor *a = NBT(nb_mul(x, 2.0));
    assert_true(nb_is_leaf(a) && !nb_requires_grad(a)); /* no tracked input: no node */
    nb_tensor *b = NBT(nb_mul(x, w));
    assert_true(!nb_is_leaf(b) && nb_requires_grad(b));
    nb_tensor *v = NBT(nb_reshape(w, NB_SHAPE(2, 2))); /* views are recorded too */
    assert_false(nb_is_leaf(v));
    nb_no_grad_begin();
    nb_tensor *c = NBT(nb_mul(x, w));
    nb_no_grad_end();
    assert_true(nb_is_leaf(c) && !nb_requires_grad(c)); /* recording off */
    /* not differentiable ops never record */
    assert_true(nb_is_leaf(NBT(nb_gt(w, 0.0))));
    assert_true(nb_is_leaf(NBT(nb_argmax(w, 0, false))));
    assert_true(nb_is_leaf(NBT(nb_cast(w, NB_I32))));
    /* flags */
    assert_int_equal(nb_set_requires_grad(NBT(nb_ones(NB_SHAPE(2), NB_I32)), true), NB_ERR_DTYPE);
    assert_error(NB_ERR_DTYPE, "set_requires_grad");
    assert_int_equal(nb_set_requires_grad(b, false), NB_ERR_STATE);
    assert_error(NB_ERR_STATE, "set_requires_grad");
    assert_int_equal(nb_set_requires_grad(w, false), NB_OK);
    assert_false(nb_requires_grad(NBT(nb_mul(x, w))));
}

/* ---- A2: backward, seeds, accumulation, zero_grad, detach ---- */

static double two_x(double x) { return 2 * x; }
static double four_x(double x) { return 4 * x; }

static void backward_scalar_and_seed(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4);
    nb_tensor *y = NBT(nb_sum(NBT(nb_mul(x, x)), NULL, 0, false));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    assert_fn(NBT(nb_grad(x)), X, 4, two_x); /* d/dx sum x^2 = 2x */

    /* accumulation over a second graph */
    nb_tensor *y2 = NBT(nb_sum(NBT(nb_square(x)), NULL, 0, false));
    assert_int_equal(nb_backward(y2, NULL, false), NB_OK);
    assert_fn(NBT(nb_grad(x)), X, 4, four_x);
    nb_zero_grad(x);
    assert_null(nb_grad(x));
    assert_int_equal(nb_last_status(), NB_OK); /* "no grad yet" is not an error */

    /* explicit seed s for a non-scalar root: grad = 2 x s */
    nb_tensor *s = vec((double[]){1, -2, 0.5, 3}, 4);
    nb_tensor *z = NBT(nb_mul(x, x));
    assert_int_equal(nb_backward(z, s, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int i = 0; i < 4; i++) assert_true(nbt_at(g, i) == 2 * X[i] * nbt_at(s, i));
    nb_zero_grad(x);

    /* a seed of another dtype is cast to root's first (torch too): through a matmul, whose rule
     * needs one dtype, the same bits as the cast seed */
    nb_tensor *w = NBT(nb_randn(NB_SHAPE(4, 3), NB_F32)), *v = NBT(nb_cast(NBT(nb_detach(x)), NB_F32)), *gv[2];
    assert_int_equal(nb_set_requires_grad(v, true), NB_OK);
    nb_tensor *s64 = NBT(nb_randn(NB_SHAPE(1, 3), NB_F64));
    for (int k = 0; k < 2; k++) {
        nb_tensor *mm = NBT(nb_matmul(NBT(nb_reshape(v, NB_SHAPE(1, 4))), w));
        assert_int_equal(nb_backward(mm, k ? s64 : NBT(nb_cast(s64, NB_F32)), false), NB_OK);
        gv[k] = NBT(nb_grad(v));
        nb_zero_grad(v);
    }
    nbt_assert_same_bits(gv[1], gv[0], "f64 seed on an f32 root");

    assert_int_equal(nb_backward(z, NULL, false), NB_ERR_SHAPE); /* non-scalar needs a seed */
    assert_error(NB_ERR_SHAPE, "backward");
    assert_int_equal(nb_backward(z, NBT(nb_ones(NB_SHAPE(2, 2), NB_F64)), false), NB_ERR_SHAPE);
    assert_error(NB_ERR_SHAPE, "backward");
    assert_int_equal(nb_backward(NBT(nb_ones(NB_SHAPE(1), NB_F64)), NULL, false), NB_ERR_STATE);
    assert_error(NB_ERR_STATE, "backward");
    assert_int_equal(nb_backward(z, NBT(nb_to_device(s, NB_REF)), false), NB_ERR_DEVICE);
    assert_error(NB_ERR_DEVICE, "backward");
    assert_null(nb_grad(x));

    /* a tracked leaf as its own root */
    nb_tensor *one = leaf((double[]){3}, 1);
    assert_int_equal(nb_backward(one, NULL, false), NB_OK);
    assert_true(nbt_at(NBT(nb_grad(one)), 0) == 1);
}

/* A gradient used by two leaves, or equal to the seed, is never shared. */
static void leaf_grads_are_exclusive(void **state) {
    (void)state;
    nb_tensor *a = leaf(X, 4), *b = leaf(X, 4);
    nb_tensor *s = vec((double[]){1, 1, 1, 1}, 4);
    assert_int_equal(nb_backward(NBT(nb_add(a, b)), s, false), NB_OK);
    nb_tensor *ga = NBT(nb_grad(a)), *gb = NBT(nb_grad(b));
    assert_false(nb_shares_storage(ga, gb));
    assert_false(nb_shares_storage(ga, s) || nb_shares_storage(gb, s));
    nb_no_grad_begin();
    assert_int_equal(nb_mul_scalar_(ga, 3), NB_OK); /* e.g. gradient clipping, one parameter at a time */
    nb_no_grad_end();
    assert_true(nbt_at(gb, 0) == 1 && nbt_at(s, 0) == 1);
}

/* Branches that meet again: the engine sums both paths (y = x*x + sin x). */
static double two_x_plus_cos(double x) { return 2 * x + cos(x); }
static void fan_in_fan_out(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4);
    nb_tensor *y = NBT(nb_sum(NBT(nb_add(NBT(nb_mul(x, x)), NBT(nb_sin(x)))), NULL, 0, false));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    assert_fn(NBT(nb_grad(x)), X, 4, two_x_plus_cos);
    /* the graph survives backward: a second pass over it accumulates again */
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int i = 0; i < 4; i++) assert_true(fabs(nbt_at(g, i) - 2 * two_x_plus_cos(X[i])) < 1e-12);
}

static void detach_cuts_the_tape(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4);
    nb_tensor *y = NBT(nb_mul(x, x));
    nb_tensor *d = NBT(nb_detach(y));
    assert_true(nb_is_leaf(d) && !nb_requires_grad(d));
    assert_true(nb_shares_storage(d, y));
    /* d acts as a constant: d/dx sum(x * detach(x^2)) = x^2 */
    nb_tensor *z = NBT(nb_sum(NBT(nb_mul(x, d)), NULL, 0, false));
    assert_int_equal(nb_backward(z, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int i = 0; i < 4; i++) assert_true(nbt_at(g, i) == X[i] * X[i]);
    assert_true(nb_is_leaf(NBT(nb_mul(d, 3.0))));
}

/* ---- A3: no_grad nests and is per thread ---- */

typedef struct thread_result {
    bool enabled, recorded;
    nb_tensor *w;
} thread_result;

static void *other_thread(void *arg) {
    thread_result *r = arg;
    r->enabled = nb_grad_enabled();
    nb_tensor *y = nb_mul(r->w, 2.0); /* no scope on this thread: we own y */
    r->recorded = y && !nb_is_leaf(y);
    nb_release(y);
    return NULL;
}

static void no_grad_nested_per_thread(void **state) {
    (void)state;
    nb_tensor *w = leaf(X, 4);
    assert_true(nb_grad_enabled());
    nb_no_grad_begin();
    nb_no_grad_begin();
    nb_no_grad_end();
    assert_false(nb_grad_enabled()); /* still inside the outer region */
    assert_true(nb_is_leaf(NBT(nb_mul(w, 2.0))));
    thread_result r = {.w = w};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, other_thread, &r), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(r.enabled && r.recorded); /* the other thread records */
    nb_no_grad_end();
    assert_true(nb_grad_enabled());
    nb_no_grad_end(); /* unbalanced end is ignored */
    assert_true(nb_grad_enabled());
    assert_false(nb_is_leaf(NBT(nb_mul(w, 2.0))));
}

/* ---- A5: grad of grad ---- */

static double three_x2(double x) { return 3 * x * x; }
static double six_x(double x) { return 6 * x; }
static double neg_sin(double x) { return -sin(x); }
static double cosine(double x) { return cos(x); }

/* First and second derivative of sum(f(x)) through nb_autograd_grad. */
static void check_second_order(nb_tensor *(*f)(nb_tensor *), double (*d1)(double), double (*d2)(double)) {
    nb_tensor *x = leaf(X, 4);
    nb_tensor *y = NBT(nb_sum(NBT(f(x)), NULL, 0, false));
    nb_tensor *g1 = NULL, *g2 = NULL;
    assert_int_equal(nb_autograd_grad(y, NULL, &x, 1, true, &g1), NB_OK);
    assert_fn(g1, X, 4, d1);
    assert_true(nb_requires_grad(g1)); /* recorded: differentiable again */
    nb_tensor *s = NBT(nb_sum(g1, NULL, 0, false));
    assert_int_equal(nb_autograd_grad(s, NULL, &x, 1, false, &g2), NB_OK);
    assert_fn(g2, X, 4, d2);
    assert_false(nb_requires_grad(g2));
    assert_null(nb_grad(x)); /* autograd_grad leaves .grad alone */
}

static nb_tensor *cube_mul(nb_tensor *x) { return nb_mul(nb_mul(x, x), x); }
static nb_tensor *cube_pow(nb_tensor *x) { return nb_pow(x, 3.0); }

static void grad_of_grad(void **state) {
    (void)state;
    check_second_order(cube_mul, three_x2, six_x);
    check_second_order(cube_pow, three_x2, six_x);
    check_second_order(nb_sin, cosine, neg_sin);

    /* nb_backward(create_graph) leaves a differentiable .grad; zero_grad breaks the
     * leaf -> grad -> graph -> leaf reference cycle (ASan checks nothing leaks) */
    nb_tensor *x = leaf(X, 4);
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(cube_mul(x)), NULL, 0, false)), NULL, true), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    assert_true(nb_requires_grad(g));
    nb_tensor *gs = NBT(nb_sum(g, NULL, 0, false));
    nb_zero_grad(x);
    assert_int_equal(nb_backward(gs, NULL, false), NB_OK);
    assert_fn(NBT(nb_grad(x)), X, 4, six_x);
    nb_zero_grad(x);
}

/* C-number exponents keep double precision in the rule: d/dx x^(1/3) in f64. */
static void pow_rule_precision(void **state) {
    (void)state;
    nb_tensor *x = leaf((double[]){2, 5}, 2);
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_pow(x, 1.0 / 3)), NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    assert_int_equal(nb_dtype_of(g), NB_F64);
    for (int i = 0; i < 2; i++) {
        double v = i ? 5 : 2, want = pow(v, -2.0 / 3) / 3;
        assert_true(fabs(nbt_at(g, i) - want) <= 4e-16 * want);
    }
}

/* Long chains: the sort, the pass and the release are iterative (no deep
 * recursion).  No scope is open here, so each link is held only by the next. */
static void long_chain(void **state) {
    (void)state;
    const int n = 50000;
    nb_clear_error();
    double one = 1;
    nb_tensor *x = NBT(nb_from_data(&one, NB_SHAPE(1), NB_F64));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = nb_retain(x);
    for (int i = 0; i < n; i++) {
        nb_tensor *next = NBT(nb_add(y, 1.0));
        nb_release(y);
        y = next;
    }
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    assert_true(nbt_at(g, 0) == 1 && nbt_at(y, 0) == n + 1);
    nb_release(g);
    nb_release(y); /* frees the whole chain */
    /* the engine's internal casts and copies with no scope open: an f32 leaf
     * used in f64 math gets its gradient cast back to f32 */
    nb_tensor *s = NBT(nb_full(NB_SHAPE(2), 1.5, NB_F32));
    assert_int_equal(nb_set_requires_grad(s, true), NB_OK);
    nb_tensor *c = NBT(nb_cast(s, NB_F64)), *p = NBT(nb_mul(c, c)), *sum = NBT(nb_sum(p, NULL, 0, false));
    assert_int_equal(nb_backward(sum, NULL, false), NB_OK);
    nb_tensor *gs = NBT(nb_grad(s));
    assert_int_equal(nb_dtype_of(gs), NB_F32);
    assert_true(nbt_at(gs, 1) == 3);
    nb_tensor *all[] = {gs, sum, p, c, s, x};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) nb_release(all[i]);
}

/* ---- A6: broadcasting and device moves ---- */

static void broadcast_grads_reduce(void **state) {
    (void)state;
    nb_tensor *xl = NBT(nb_reshape(vec((double[]){1, 2, 3}, 3), NB_SHAPE(3, 1))); /* untracked: a leaf */
    assert_int_equal(nb_set_requires_grad(xl, true), NB_OK);
    nb_tensor *b = NBT(nb_reshape(NBT(nb_arange(0, 24, 1, NB_F64)), NB_SHAPE(2, 3, 4)));
    /* y = sum(x * b): dy/dx[i] = sum over the broadcast axes of b[:, i, :] */
    nb_tensor *y = NBT(nb_sum(NBT(nb_mul(xl, b)), NULL, 0, false));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(xl));
    assert_int_equal(nb_ndim(g), 2);
    assert_true(nb_shape(g)[0] == 3 && nb_shape(g)[1] == 1);
    for (int i = 0; i < 3; i++) {
        double want = 0;
        for (int a = 0; a < 2; a++)
            for (int k = 0; k < 4; k++) want += a * 12 + i * 4 + k;
        assert_true(nbt_at(g, i) == want);
    }
    /* a rank-0 leaf against a matrix, and a dtype change on the way (f32 leaf, f64 math) */
    nb_tensor *s = NBT(nb_scalar(2, NB_F32));
    assert_int_equal(nb_set_requires_grad(s, true), NB_OK);
    nb_tensor *y2 = NBT(nb_sum(NBT(nb_mul(NBT(nb_cast(s, NB_F64)), b)), NULL, 0, false));
    assert_int_equal(nb_backward(y2, NULL, false), NB_OK);
    nb_tensor *gs = NBT(nb_grad(s));
    assert_int_equal(nb_ndim(gs), 0);
    assert_int_equal(nb_dtype_of(gs), NB_F32);
    assert_true(nbt_at(gs, 0) == 276); /* sum 0..23 */
    /* expand is a broadcast too */
    nb_tensor *e = leaf((double[]){1, 2}, 2);
    nb_tensor *ee = NBT(nb_expand(e, NB_SHAPE(3, 2)));
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_mul(ee, ee)), NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *ge = NBT(nb_grad(e));
    assert_true(nbt_at(ge, 0) == 6 && nbt_at(ge, 1) == 12); /* 3 rows of 2x */
}

static void grads_across_devices(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4);
    nb_tensor *xr = NBT(nb_to_device(x, NB_REF));
    assert_false(nb_is_leaf(xr));
    nb_tensor *yr = NBT(nb_sum(NBT(nb_mul(xr, xr)), NULL, 0, false)); /* computed on REF */
    nb_tensor *y = NBT(nb_to_device(yr, NB_CPU));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    assert_int_equal(nb_device_of(g).type, NB_DEVICE_CPU); /* on the leaf's device */
    assert_fn(g, X, 4, two_x);
    /* and from a REF root */
    nb_zero_grad(x);
    assert_int_equal(nb_backward(yr, NULL, false), NB_OK);
    assert_fn(NBT(nb_grad(x)), X, 4, two_x);
    assert_int_equal(nb_device_of(NBT(nb_grad(x))).type, NB_DEVICE_CPU);
}

/* ---- nb_autograd_grad ---- */

static void autograd_grad_inputs(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4), *unused = leaf(X, 4);
    nb_tensor *h = NBT(nb_mul(x, 2.0)); /* non-leaf input */
    nb_tensor *y = NBT(nb_sum(NBT(nb_mul(h, h)), NULL, 0, false));
    nb_tensor *ins[3] = {h, unused, x}, *outs[3] = {NULL, NULL, NULL};
    assert_int_equal(nb_autograd_grad(y, NULL, ins, 3, false, outs), NB_OK);
    for (int i = 0; i < 4; i++) {
        assert_true(nbt_at(outs[0], i) == 2 * (2 * X[i])); /* dy/dh = 2h */
        assert_true(nbt_at(outs[1], i) == 0);              /* not reached: zeros */
        assert_true(nbt_at(outs[2], i) == 8 * X[i]);       /* dy/dx = 8x */
    }
    assert_int_equal(nb_ndim(outs[1]), 1);
    assert_null(nb_grad(x));
    assert_null(nb_grad(unused));
    /* errors */
    nb_tensor *plain = vec(X, 4), *o = NULL;
    assert_int_equal(nb_autograd_grad(y, NULL, &plain, 1, false, &o), NB_ERR_STATE);
    assert_error(NB_ERR_STATE, "autograd_grad");
    assert_int_equal(nb_autograd_grad(y, NULL, NULL, 1, false, &o), NB_ERR_NULL);
    assert_error(NB_ERR_NULL, "autograd_grad");
    assert_int_equal(nb_autograd_grad(NULL, NULL, &x, 1, false, &o), NB_ERR_NULL);
    assert_error(NB_ERR_NULL, "autograd_grad");
    assert_null(o);
}

/* Views in the middle of a graph: slice (negative step), select, diagonal, permute. */
static void view_gradients(void **state) {
    (void)state;
    double v[12];
    for (int i = 0; i < 12; i++) v[i] = i + 1;
    nb_tensor *x = leaf(v, 12);
    nb_tensor *m = NBT(nb_reshape(x, NB_SHAPE(3, 4)));
    /* y = sum(m[:, ::-2]) * 1 + 10 * m[1][2] + 100 * sum(diag(m)) + 1000 * mT[3][0] */
    nb_tensor *t1 = NBT(nb_sum(NBT(nb_slice(m, 1, NB_END, NB_END, -2)), NULL, 0, false));
    nb_tensor *t2 = NBT(nb_mul(NBT(nb_select(NBT(nb_select(m, 0, 1)), 0, 2)), 10.0));
    nb_tensor *t3 = NBT(nb_mul(NBT(nb_sum(NBT(nb_diagonal(m, 0, 0, 1)), NULL, 0, false)), 100.0));
    nb_tensor *t4 = NBT(nb_mul(NBT(nb_select(NBT(nb_select(NBT(nb_t(m)), 0, 3)), 0, 0)), 1000.0));
    nb_tensor *y = NBT(nb_add(NBT(nb_add(t1, t2)), NBT(nb_add(t3, t4))));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) {
            double want = (j == 3 || j == 1 ? 1 : 0) + (i == 1 && j == 2 ? 10 : 0) + (i == j ? 100 : 0) +
                          (i == 0 && j == 3 ? 1000 : 0);
            assert_true(nbt_at(g, i * 4 + j) == want);
        }
}

/* ---- a pass while an unrelated error is pending ---- */

/* The REF backend with a binary kernel that fails on demand, recording its
 * error as a device backend out of memory would. */
static bool flaky_fails;
static nb_backend flaky;
static nb_status flaky_binary(nb_op op, nb_tensor *out, const nb_tensor *a, const nb_tensor *b) {
    if (flaky_fails) return nb__error(NB_ERR_DEVICE, "%s: injected device failure", nb__ops[op].name);
    return nb__ref_backend.binary(op, out, a, b);
}

static void plant_unrelated_error(void) {
    nb_clear_error();
    assert_null(nb_reshape(NBT(nb_zeros(NB_SHAPE(2), NB_F32)), NB_SHAPE(7)));
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
}

/* y = sum(x * w) on REF; the mul rule's products fail inside the pass. */
static void failing_rule_is_reported_with_error_pending(void **state) {
    (void)state;
    flaky = nb__ref_backend;
    flaky.binary = flaky_binary;
    assert_int_equal(nb_backend_register(NB_DEVICE_REF, &flaky), NB_OK);
    const double xv[] = {1, 2}, wv[] = {3, 4};
    nb_tensor *x = NBT(nb_to_device(vec(xv, 2), NB_REF)), *w = NBT(nb_to_device(vec(wv, 2), NB_REF));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_int_equal(nb_set_requires_grad(w, true), NB_OK);
    nb_tensor *y = NBT(nb_sum(NBT(nb_mul(x, w)), NULL, 0, false));
    for (int create_graph = 0; create_graph < 2; create_graph++) {
        plant_unrelated_error();
        flaky_fails = true;
        assert_int_equal(nb_backward(y, NULL, create_graph), NB_ERR_DEVICE);
        flaky_fails = false;
        assert_error(NB_ERR_DEVICE, "injected device failure");
        nb_zero_grad(x);
        nb_zero_grad(w);
        nb_tensor *outs[2] = {NULL, NULL};
        plant_unrelated_error();
        flaky_fails = true;
        assert_int_equal(nb_autograd_grad(y, NULL, (nb_tensor *[]){x, w}, 2, create_graph, outs), NB_ERR_DEVICE);
        flaky_fails = false;
        assert_error(NB_ERR_DEVICE, "injected device failure");
        assert_true(outs[0] == NULL && outs[1] == NULL);
    }
    assert_int_equal(nb_backend_register(NB_DEVICE_REF, &nb__ref_backend), NB_OK);
}

/* A normal pass delivers every gradient and leaves the pending error as it was. */
static void pass_succeeds_with_error_pending(void **state) {
    (void)state;
    nb_tensor *x = leaf(X, 4), *w = leaf(X + 1, 3);
    nb_tensor *wx = NBT(nb_slice(x, 0, 1, NB_END, 1));
    nb_tensor *y = NBT(nb_sum(NBT(nb_mul(NBT(nb_mul(wx, w)), w)), NULL, 0, false)); /* sum(x[1:] w^2) */
    plant_unrelated_error();
    assert_int_equal(nb_backward(y, NULL, true), NB_OK);
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    assert_non_null(strstr(nb_last_message(), "reshape"));
    nb_tensor *gx = nb_grad(x), *gw = nb_grad(w);
    assert_true(gx && gw);
    assert_true(nbt_at(gx, 0) == 0);
    for (int i = 0; i < 3; i++) {
        assert_true(nbt_at(gx, i + 1) == X[i + 1] * X[i + 1]);
        assert_true(nbt_at(gw, i) == 2 * X[i + 1] * X[i + 1]);
    }
    nb_tensor *outs[2] = {NULL, NULL};
    assert_int_equal(nb_autograd_grad(y, NULL, (nb_tensor *[]){x, w}, 2, false, outs), NB_OK);
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    assert_close(outs[0], gx, 0, 0);
    assert_close(outs[1], gw, 0, 0);
    nb_clear_error();
    nb_zero_grad(x);
    nb_zero_grad(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(records_only_when_tracked, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(backward_scalar_and_seed, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(leaf_grads_are_exclusive, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(fan_in_fan_out, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(detach_cuts_the_tape, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(no_grad_nested_per_thread, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(grad_of_grad, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(pow_rule_precision, nbt_setup, nbt_teardown),
        cmocka_unit_test(long_chain),
        cmocka_unit_test_setup_teardown(broadcast_grads_reduce, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(grads_across_devices, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(autograd_grad_inputs, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(view_gradients, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(failing_rule_is_reported_with_error_pending, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(pass_succeeds_with_error_pending, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
