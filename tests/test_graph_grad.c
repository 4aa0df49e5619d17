/*
 * test_graph_grad.c — nb_graph_grad (SPEC G-grad): gradients built inside a
 * traced graph against the eager tape's gradients of the same function on
 * the same data (bitwise: the same rules run the same kernels), grad of grad
 * of a polynomial against exact derivatives, a wrt the loss does not reach
 * (zeros, even for inf / NaN inputs), broadcast inputs with a symbolic
 * batch dim, a value used several times (its gradients summed in the tape's
 * order, to the tape's bits), and the typed errors.
 *
 * Graphs are verified, compiled and run by the executor.  nb_detach is a
 * stop-gradient in graphs as on the tape.
 */
#include "support.h"
#include "graph/graph.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- running a finished graph ---- */

/* Verify, compile and run g with inputs names[i] = args[i]: every output, scoped, into res. */
static void run_graph(nb_graph *g, int nargs, const char *const *names, nb_tensor *const *args, nb_tensor **res) {
    assert_int_equal(nb_graph_verify(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    assert_int_equal(nb_compiled_run(c, nargs, names, args, nb_graph_output_count(g), res), NB_OK);
    nb_compiled_release(c);
}

static nb_tensor *scalar64(double v) { return NBT(nb_scalar(v, NB_F64)); }

static void assert_bitwise(nb_tensor *got, nb_tensor *want) {
    assert_int_equal(nb_dtype_of(got), nb_dtype_of(want));
    assert_int_equal(nb_numel(got), nb_numel(want));
    for (int64_t i = 0; i < nb_numel(want); i++) {
        double a = nbt_at(got, i), b = nbt_at(want, i);
        if (memcmp(&a, &b, sizeof a) != 0) {
            fprintf(stderr, "element %lld: graph %.17g, eager %.17g\n", (long long)i, a, b);
            fail();
        }
    }
}

/* ---- the function differentiated both ways (unary, binary and where ops) ---- */

static nb_tensor *f(nb_tensor *x, nb_tensor *y) {
    nb_tensor *a = nb_mul(nb_sin(x), y);
    nb_tensor *b = nb_div(nb_exp(x), y);
    nb_tensor *c = nb_tanh(nb_mul(x, y));
    nb_tensor *d = nb_where(nb_gt(x, y), nb_square(x), nb_sigmoid(y));
    nb_tensor *e = nb_mul(nb_relu(nb_sub(x, 0.25)), nb_pow(x, y));
    nb_tensor *h = nb_maximum(e, nb_log(nb_abs(y)));
    return nb_add(nb_sub(nb_add(a, b), c), nb_add(d, h));
}

/* d f / d x, d f / d y and d2 f / d x2 on the tape (create_graph for the second order). */
static void eager_grads(double xv, double yv, nb_tensor **gx, nb_tensor **gy, nb_tensor **gxx) {
    nb_tensor *x = scalar64(xv), *y = scalar64(yv);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_int_equal(nb_set_requires_grad(y, true), NB_OK);
    nb_tensor *out[2];
    assert_int_equal(nb_autograd_grad(NBT(f(x, y)), NULL, (nb_tensor *[]){x, y}, 2, true, out), NB_OK);
    *gx = out[0];
    *gy = out[1];
    assert_int_equal(nb_autograd_grad(*gx, NULL, &x, 1, false, gxx), NB_OK);
}

static void matches_eager_tape(void **state) {
    (void)state;
    const double pts[][2] = {{0.7, -1.3}, {-0.4, 2.5}, {1.9, 0.6}, {0.25, 0.25}};
    for (size_t p = 0; p < sizeof pts / sizeof pts[0]; p++) {
        nb_graph *g = nb_graph_begin("f");
        assert_non_null(g);
        nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NULL, 0));
        nb_tensor *y = NBT(nb_graph_input(g, "y", NB_F64, NULL, 0));
        nb_tensor *loss = NBT(f(x, y)), *gr[2], *gxx;
        assert_int_equal(nb_graph_grad(loss, 2, (nb_tensor *[]){x, y}, gr), NB_OK);
        assert_int_equal(nb_graph_grad(gr[0], 1, &x, &gxx), NB_OK); /* grad of grad */
        assert_int_equal(nb_graph_output(g, "loss", loss), NB_OK);
        assert_int_equal(nb_graph_output(g, "gx", gr[0]), NB_OK);
        assert_int_equal(nb_graph_output(g, "gy", gr[1]), NB_OK);
        assert_int_equal(nb_graph_output(g, "gxx", gxx), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);

        nb_tensor *res[4], *ex, *ey, *exx;
        run_graph(g, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){scalar64(pts[p][0]), scalar64(pts[p][1])}, res);
        eager_grads(pts[p][0], pts[p][1], &ex, &ey, &exx);
        assert_bitwise(res[1], ex);
        assert_bitwise(res[2], ey);
        assert_bitwise(res[3], exx);
        nb_graph_release(g);
    }
}

/* p(x) = 3x^3 - 2x^2 + 5x - 7: p' = 9x^2 - 4x + 5, p'' = 18x - 4, p''' = 18 (exact in binary at these x). */
static void polynomial_higher_orders(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("poly");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NULL, 0));
    nb_tensor *p = nb_sub(nb_add(nb_sub(nb_mul(nb_mul(nb_square(x), x), 3.0), nb_mul(nb_square(x), 2.0)),
                                 nb_mul(x, 5.0)), 7.0);
    nb_tensor *d[3], *v = NBT(p);
    for (int k = 0; k < 3; k++) {
        assert_int_equal(nb_graph_grad(v, 1, &x, &d[k]), NB_OK);
        v = d[k];
    }
    const char *names[] = {"d1", "d2", "d3"};
    for (int k = 0; k < 3; k++) assert_int_equal(nb_graph_output(g, names[k], d[k]), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    const double xs[] = {1.5, -2.0, 0.0};
    for (int i = 0; i < 3; i++) {
        double xv = xs[i];
        nb_tensor *res[3];
        run_graph(g, 1, (const char *[]){"x"}, (nb_tensor *[]){scalar64(xv)}, res);
        assert_true(nbt_at(res[0], 0) == 9 * xv * xv - 4 * xv + 5);
        assert_true(nbt_at(res[1], 0) == 18 * xv - 4);
        assert_true(nbt_at(res[2], 0) == 18);
    }
    nb_graph_release(g);
}

/* A wrt the loss does not reach (or reaches only through a comparison, a non-float value)
 * gets zeros of its shape and dtype, whatever its values. */
static void unreached_wrt_is_zeros(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("unreached");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NULL, 0));
    nb_tensor *y = NBT(nb_graph_input(g, "y", NB_F32, NB_SHAPE(3)));
    nb_tensor *z = NBT(nb_graph_input(g, "z", NB_F64, NULL, 0));
    nb_tensor *loss = NBT(nb_where(nb_gt(z, 0.0), nb_exp(x), nb_neg(x))), *gr[3];
    assert_int_equal(nb_graph_grad(loss, 3, (nb_tensor *[]){x, y, z}, gr), NB_OK);
    assert_int_equal(nb_dtype_of(gr[1]), NB_F32);
    assert_int_equal(nb_ndim(gr[1]), 1);
    assert_int_equal(nb_shape(gr[1])[0], 3);
    for (int i = 0; i < 3; i++) assert_ptr_equal(gr[i]->graph, g);
    assert_int_equal(nb_graph_output(g, "gx", gr[0]), NB_OK);
    assert_int_equal(nb_graph_output(g, "gy", gr[1]), NB_OK);
    assert_int_equal(nb_graph_output(g, "gz", gr[2]), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_tensor *yv = NBT(nb_from_data((float[]){INFINITY, NAN, 1}, NB_SHAPE(3), NB_F32)), *res[3];
    run_graph(g, 3, (const char *[]){"x", "y", "z"}, (nb_tensor *[]){scalar64(0.5), yv, scalar64(INFINITY)}, res);
    assert_true(nbt_at(res[0], 0) == exp(0.5));
    for (int i = 0; i < 3; i++) assert_true(nbt_at(res[1], i) == 0 && !signbit(nbt_at(res[1], i)));
    assert_true(nbt_at(res[2], 0) == 0);
    nb_graph_release(g);
}

/* loss = sum(tanh(x + b) * b) with x [B, 4] and b [4]: the gradient of b is summed over the batch. */
static nb_tensor *bias_loss(nb_tensor *x, nb_tensor *b) {
    return nb_sum(nb_mul(nb_tanh(nb_add(x, b)), b), NULL, 0, false);
}

static void broadcast_reduces_with_symbolic_batch(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_graph *g = nb_graph_begin("bias");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, NB_SHAPE(4)));
    nb_tensor *gr[2];
    assert_int_equal(nb_graph_grad(NBT(bias_loss(x, b)), 2, (nb_tensor *[]){x, b}, gr), NB_OK);
    assert_int_equal(nb_ndim(gr[0]), 2);
    assert_true(nb_shape(gr[0])[0] == B);
    assert_int_equal(nb_shape(gr[0])[1], 4);
    assert_int_equal(nb_ndim(gr[1]), 1);
    assert_int_equal(nb_shape(gr[1])[0], 4);
    assert_int_equal(nb_graph_output(g, "gx", gr[0]), NB_OK);
    assert_int_equal(nb_graph_output(g, "gb", gr[1]), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);

    /* one graph, every batch size: against the tape on the same data */
    const float bd[4] = {0.5f, -1.0f, 2.0f, 0.1f};
    float xd[20];
    for (int i = 0; i < 20; i++) xd[i] = 0.3f * (float)i - 1.7f;
    for (int64_t rows = 1; rows <= 5; rows += 2) {
        nb_tensor *xv = NBT(nb_from_data(xd, NB_SHAPE(rows, 4), NB_F32)), *bv = NBT(nb_from_data(bd, NB_SHAPE(4), NB_F32));
        nb_tensor *res[2], *want[2];
        run_graph(g, 2, (const char *[]){"x", "b"}, (nb_tensor *[]){xv, bv}, res);
        nb_tensor *xl = NBT(nb_clone(xv)), *bl = NBT(nb_clone(bv));
        assert_int_equal(nb_set_requires_grad(xl, true), NB_OK);
        assert_int_equal(nb_set_requires_grad(bl, true), NB_OK);
        assert_int_equal(nb_autograd_grad(NBT(bias_loss(xl, bl)), NULL, (nb_tensor *[]){xl, bl}, 2, false, want), NB_OK);
        assert_int_equal(nb_shape(res[0])[0], rows);
        assert_bitwise(res[0], want[0]);
        assert_bitwise(res[1], want[1]);
    }
    nb_graph_release(g);
}

/* A two-layer perceptron's mean-free loss: sum(relu(x W1^T + b1) W2^T)^2 / 2 (W as nb_linear stores it). */
static nb_tensor *mlp_loss(nb_tensor *x, nb_tensor *w1, nb_tensor *b1, nb_tensor *w2) {
    nb_tensor *h = nb_relu(nb_add(nb_matmul(x, nb_transpose(w1, 0, 1)), b1));
    return nb_mul(nb_sum(nb_square(nb_matmul(h, nb_transpose(w2, 0, 1))), NULL, 0, false), 0.5);
}

static void mlp_params_match_tape(void **state) {
    (void)state;
    double w1d[15], b1d[5], w2d[10], xd[12];
    for (int i = 0; i < 15; i++) w1d[i] = sin(1.3 * i);
    for (int i = 0; i < 5; i++) b1d[i] = 0.1 * i - 0.2;
    for (int i = 0; i < 10; i++) w2d[i] = cos(0.7 * i);
    for (int i = 0; i < 12; i++) xd[i] = 0.25 * i - 1.4;
    nb_tensor *w1 = NBT(nb_from_data(w1d, NB_SHAPE(5, 3), NB_F64)), *b1 = NBT(nb_from_data(b1d, NB_SHAPE(5), NB_F64));
    nb_tensor *w2 = NBT(nb_from_data(w2d, NB_SHAPE(2, 5), NB_F64)), *xv = NBT(nb_from_data(xd, NB_SHAPE(4, 3), NB_F64));

    nb_graph *g = nb_graph_begin("mlp");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(nb_dim("N"), 3)));
    nb_tensor *p[3] = {NBT(nb_graph_param(g, "w1", w1)), NBT(nb_graph_param(g, "b1", b1)), NBT(nb_graph_param(g, "w2", w2))};
    nb_tensor *gr[3];
    assert_int_equal(nb_graph_grad(NBT(mlp_loss(x, p[0], p[1], p[2])), 3, p, gr), NB_OK);
    const char *names[] = {"gw1", "gb1", "gw2"};
    for (int i = 0; i < 3; i++) assert_int_equal(nb_graph_output(g, names[i], gr[i]), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_tensor *res[3], *want[3];
    run_graph(g, 1, (const char *[]){"x"}, &xv, res);
    nb_graph_release(g);

    nb_tensor *leaves[3] = {NBT(nb_clone(w1)), NBT(nb_clone(b1)), NBT(nb_clone(w2))};
    for (int i = 0; i < 3; i++) assert_int_equal(nb_set_requires_grad(leaves[i], true), NB_OK);
    assert_int_equal(nb_autograd_grad(NBT(mlp_loss(xv, leaves[0], leaves[1], leaves[2])), NULL, leaves, 3, false, want),
                     NB_OK);
    /* the tape computes a transposed weight's gradient transposed (same products, another
     * summation layout in the GEMM), so 1e-12 relative rather than bitwise */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nb_ndim(res[i]), nb_ndim(want[i]));
        assert_close(res[i], want[i], 1e-12, 1e-12);
    }
}

/* The rules of every other kind, traced.  Each f maps x [3, 4] to a scalar. */
static nb_tensor *total(nb_tensor *t) { return nb_sum(t, NULL, 0, false); }
static nb_tensor *k_slice(nb_tensor *x) { return total(nb_exp(nb_slice(x, 1, 1, 4, 2))); }
static nb_tensor *k_select(nb_tensor *x) { return total(nb_sin(nb_select(x, 0, 2))); }
static nb_tensor *k_cat(nb_tensor *x) { return total(nb_square(nb_cat((nb_tensor *[]){x, nb_exp(x)}, 2, 1))); }
static nb_tensor *k_pad(nb_tensor *x) {
    return total(nb_exp(nb_pad(x, (int64_t[]){1, -1, 2, 0}, 4, NB_PAD_CONSTANT, 0.5)));
}
static nb_tensor *k_gather(nb_tensor *x) {
    nb_tensor *idx = nb_from_data((int64_t[]){3, 0, 0, 1, 2, 2}, NB_SHAPE(3, 2), NB_I64);
    return total(nb_square(nb_gather(x, 1, idx)));
}
static nb_tensor *k_scans(nb_tensor *x) { return total(nb_mul(nb_cumsum(x, 1), nb_cumprod(x, 0))); }
static nb_tensor *k_prod_max(nb_tensor *x) {
    return nb_add(total(nb_prod(x, NB_AXES(1), false)), total(nb_max(nb_square(x), NB_AXES(0), false)));
}
static nb_tensor *k_layout(nb_tensor *x) {
    nb_tensor *t = nb_reshape(nb_permute(x, NB_AXES(1, 0)), NB_SHAPE(2, 2, 3));
    return total(nb_mul(nb_exp(t), nb_broadcast_to(nb_reshape(nb_select(x, 0, 0), NB_SHAPE(2, 2, 1)), NB_SHAPE(2, 2, 3))));
}
static nb_tensor *k_softmax(nb_tensor *x) {
    return nb_add(total(nb_square(nb_softmax(x, 1))), nb_mean(nb_log_softmax(x, 0), NULL, 0, false));
}
static nb_tensor *k_matmul(nb_tensor *x) { return total(nb_tanh(nb_matmul(x, nb_transpose(x, 0, 1)))); }
static nb_tensor *k_pool(nb_tensor *x) {
    nb_tensor *img = nb_reshape(nb_exp(x), NB_SHAPE(1, 1, 3, 4));
    return nb_add(total(nb_square(nb_max_pool2d(img, NB_POOL2D(1, 2)))), total(nb_avg_pool2d(img, NB_POOL2D(3, 2), false)));
}
static nb_tensor *k_cast(nb_tensor *x) { return total(nb_cast(nb_exp(nb_cast(x, NB_F32)), NB_F64)); }

static void other_kinds_match_tape(void **state) {
    (void)state;
    nb_tensor *(*const fs[])(nb_tensor *) = {k_slice, k_select, k_cat, k_pad, k_gather, k_scans,
                                             k_prod_max, k_layout, k_softmax, k_matmul, k_pool, k_cast};
    const char *names[] = {"slice", "select", "cat", "pad", "gather", "scans", "prod_max", "layout", "softmax", "matmul", "pool", "cast"};
    double xd[12] = {0.5, -1.25, 2.0, 0.0, 1.5, -0.75, 0.25, 3.0, -2.0, 1.0, 0.0, -0.5};
    nb_tensor *xv = NBT(nb_from_data(xd, NB_SHAPE(3, 4), NB_F64));
    for (size_t k = 0; k < sizeof fs / sizeof fs[0]; k++) {
        nb_graph *g = nb_graph_begin(names[k]);
        assert_non_null(g);
        nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(3, 4))), *gx;
        nb_tensor *loss = fs[k](x);
        if (!loss) fprintf(stderr, "%s: %s\n", names[k], nb_last_message());
        assert_non_null(loss);
        assert_int_equal(nb_graph_grad(loss, 1, &x, &gx), NB_OK);
        assert_int_equal(nb_graph_output(g, "gx", gx), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);
        nb_tensor *res, *want, *xl = NBT(nb_clone(xv));
        run_graph(g, 1, (const char *[]){"x"}, &xv, &res);
        nb_graph_release(g);
        assert_int_equal(nb_set_requires_grad(xl, true), NB_OK);
        assert_int_equal(nb_autograd_grad(NBT(fs[k](xl)), NULL, &xl, 1, false, &want), NB_OK);
        if (nbt_close_ratio(res, want, 1e-12, 1e-12) > 1) {
            fprintf(stderr, "%s: graph gradient differs from the tape's\n", names[k]);
            fail();
        }
    }
}

/* x used three times, the uses created in another order than the tape's depth-first walk
 * visits them (softplus first, then sub's subtree): the graph sums the three gradients of x in
 * the tape's order, so the bits are the tape's (summed in creation order they differ). */
static nb_tensor *multi_use(nb_tensor *x, nb_tensor *t) {
    nb_tensor *s = nb_softplus(nb_neg(x), 1.0, 40.0), *m = nb_mul(t, x);
    return nb_sum(nb_add(nb_sub(x, m), s), NULL, 0, false);
}

static void multi_use_sums_in_tape_order(void **state) {
    (void)state;
    double xd[12], td[12];
    for (int i = 0; i < 12; i++) {
        xd[i] = 0.37 * i - 2.1 + 0.013 * i * i;
        td[i] = (i % 3) * 0.45 + 0.05 * i;
    }
    nb_tensor *xv = NBT(nb_from_data(xd, NB_SHAPE(3, 4), NB_F64)), *tv = NBT(nb_from_data(td, NB_SHAPE(3, 4), NB_F64));
    nb_graph *g = nb_graph_begin("multi_use");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(3, 4)));
    nb_tensor *t = NBT(nb_graph_input(g, "t", NB_F64, NB_SHAPE(3, 4))), *gx;
    assert_int_equal(nb_graph_grad(NBT(multi_use(x, t)), 1, &x, &gx), NB_OK);
    assert_int_equal(nb_graph_output(g, "gx", gx), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_tensor *res, *want, *xl = NBT(nb_clone(xv));
    run_graph(g, 2, (const char *[]){"x", "t"}, (nb_tensor *[]){xv, tv}, &res);
    nb_graph_release(g);
    assert_int_equal(nb_set_requires_grad(xl, true), NB_OK);
    assert_int_equal(nb_autograd_grad(NBT(multi_use(xl, tv)), NULL, &xl, 1, false, &want), NB_OK);
    assert_bitwise(res, want);
}

static void errors(void **state) {
    (void)state;
    nb_tensor *gr[1];
    assert_int_equal(nb_graph_grad(NULL, 0, NULL, NULL), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "graph_grad: loss is NULL");
    nb_tensor *c = scalar64(1);
    assert_int_equal(nb_graph_grad(c, 1, &c, gr), NB_ERR_STATE); /* a concrete loss */
    nbt_expect_error(NB_ERR_STATE, "loss is not a symbolic tensor");

    nb_graph *outer = nb_graph_begin("outer");
    assert_non_null(outer);
    nb_tensor *a = NBT(nb_graph_input(outer, "a", NB_F32, NULL, 0));
    nb_tensor *v = NBT(nb_graph_input(outer, "v", NB_F32, NB_SHAPE(3)));
    nb_tensor *i = NBT(nb_graph_input(outer, "i", NB_I32, NULL, 0));
    nb_tensor *s = NBT(nb_exp(a));
    assert_int_equal(nb_graph_grad(NBT(nb_exp(v)), 1, &v, gr), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "loss of shape [3] is not a scalar");
    assert_null(gr[0]);
    assert_int_equal(nb_graph_grad(s, 1, &i, gr), NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "wrt[0] has dtype int32");
    assert_int_equal(nb_graph_grad(NBT(nb_mul(i, i)), 1, &a, gr), NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "loss has dtype int32");
    assert_int_equal(nb_graph_grad(s, 1, (nb_tensor *[]){NULL}, gr), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "wrt[0] is NULL");
    assert_int_equal(nb_graph_grad(s, 1, NULL, gr), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "wrt or grads is NULL");
    assert_int_equal(nb_graph_grad(s, 1, &c, gr), NB_ERR_STATE); /* a concrete wrt */
    nbt_expect_error(NB_ERR_STATE, "wrt[0] is not a symbolic tensor of the loss's graph 'outer'");

    nb_graph *inner = nb_graph_begin("inner");
    assert_non_null(inner);
    nb_tensor *b = NBT(nb_graph_input(inner, "b", NB_F32, NULL, 0));
    nb_tensor *t = NBT(nb_mul(b, b));
    assert_int_equal(nb_graph_grad(t, 1, &a, gr), NB_ERR_STATE); /* wrt of another graph */
    nbt_expect_error(NB_ERR_STATE, "wrt[0] is not a symbolic tensor of the loss's graph 'inner'");
    assert_int_equal(nb_graph_grad(s, 1, &a, gr), NB_ERR_STATE); /* outer is not the innermost trace */
    nbt_expect_error(NB_ERR_STATE, "'outer' is not the graph being traced");
    assert_int_equal(nb_graph_output(inner, "t", t), NB_OK);
    assert_int_equal(nb_graph_end(inner), NB_OK);

    int64_t B = nb_dim("B");
    nb_tensor *w = NBT(nb_graph_input(outer, "w", NB_F32, NB_SHAPE(B)));
    assert_int_equal(nb_graph_grad(NBT(nb_exp(w)), 1, &w, gr), NB_ERR_SHAPE); /* [B] is no scalar */
    nbt_expect_error(NB_ERR_SHAPE, "loss of shape [B]");
    assert_int_equal(nb_graph_grad(s, 1, &a, gr), NB_OK); /* outer is the innermost again */
    assert_ptr_equal(gr[0]->graph, outer);
    assert_int_equal(nb_graph_output(outer, "s", s), NB_OK);
    nb_tensor *kept[2] = {nb_retain(s), nb_retain(a)}; /* past the graph's scope */
    assert_int_equal(nb_graph_end(outer), NB_OK);
    assert_int_equal(nb_graph_grad(kept[0], 1, &kept[1], gr), NB_ERR_STATE); /* no longer being built */
    nbt_expect_error(NB_ERR_STATE, "'outer' is not the graph being traced");
    nb_release(kept[0]);
    nb_release(kept[1]);
    nb_graph_release(inner);
    nb_graph_release(outer);
}

/* d/dx sum(x * detach(x)) is detach(x) = x, not 2x: the DETACH node stops the gradient. */
static void detach_stops_gradient(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("detach");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(3))), *gx;
    nb_tensor *loss = NBT(nb_sum(nb_mul(x, nb_detach(x)), NULL, 0, false));
    assert_int_equal(nb_graph_grad(loss, 1, &x, &gx), NB_OK);
    assert_int_equal(nb_graph_output(g, "gx", gx), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_tensor *xv = NBT(nb_from_data((double[]){1.5, -2, 4}, NB_SHAPE(3), NB_F64)), *res;
    run_graph(g, 1, (const char *[]){"x"}, &xv, &res);
    for (int i = 0; i < 3; i++) assert_true(nbt_at(res, i) == nbt_at(xv, i));
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(matches_eager_tape, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(polynomial_higher_orders, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(unreached_wrt_is_zeros, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(broadcast_reduces_with_symbolic_batch, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(mlp_params_match_tape, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(other_kinds_match_tape, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(multi_use_sums_in_tape_order, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(errors, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(detach_stops_gradient, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
