/*
 * test_epilogue.c — relu in the product's epilogue: ADDMM and CONVOLUTION
 * with NB_SUB_RELU (what a Sequential runs for a Linear or Conv2d followed by
 * a ReLU) against relu applied after the op, bit for bit: values and
 * gradients on the CPU (f32, f64; a thin product computed transposed,
 * several k blocks, k = 0, batched operands, NaN and signed zeros), on the
 * reference backend (no matmul_add: the front end's ADD then RELU) and in bf16
 * (relu after the f32 product); conv2d with groups, with and without a bias;
 * a Sequential against its layers called one by one; and a traced Func of it
 * compiled, under vmap and under hvp.
 */
#include "support.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* Standard normal values of dtype dt with every 5th element a zero of either sign and (nan) every
 * 7th NaN. */
static nb_tensor *values(const int64_t *shape, int nd, nb_dtype dt, bool nan) {
    nb_tensor *x = NBT(nb_contiguous(NBT(nb_randn(shape, nd, NB_F64))));
    double *v = nb_data_ptr(x);
    for (int64_t i = 0; i < nb_numel(x); i++) {
        if (nan && i % 7 == 3) v[i] = NAN;
        else if (i % 5 == 1) v[i] = i % 2 ? -0.0 : 0.0;
    }
    return NBT(nb_cast(x, dt));
}

static nb_tensor *awkward(const int64_t *shape, int nd, nb_dtype dt) { return values(shape, nd, dt, true); }

/* Backward from y with a fresh seed shaped like y (drawn from `seed`, so two calls agree): of y's
 * dtype, or (odd seed) f64 whatever y's dtype is. */
static void backward_weighted(nb_tensor *y, uint64_t seed) {
    nb_manual_seed(seed);
    nb_tensor *r = NBT(nb_cast(NBT(nb_randn(nb_shape(y), nb_ndim(y), NB_F64)), seed % 2 ? NB_F64 : nb_dtype_of(y)));
    r = NBT(nb_to_device(r, nb_device_of(y)));
    if (nb_backward(y, r, false) != NB_OK) fail_msg("backward: %s", nb_last_message());
}

/* Leaves: a detached copy of t that requires its gradient. */
static nb_tensor *leaf(nb_tensor *t) {
    nb_tensor *l = NBT(nb_clone(t));
    assert_int_equal(nb_set_requires_grad(l, true), NB_OK);
    return l;
}

static void addmm_relu_is_relu_of_addmm(void **state) {
    (void)state;
    /* {batch (0: none), m, n, k, c full [m, n] (else a bias [n])} */
    const int64_t cases[][5] = {{0, 37, 3, 17, 0}, {0, 64, 200, 600, 0}, {0, 5, 9, 0, 1}, {2, 6, 10, 8, 0}, {0, 7, 5, 4, 1}};
    const nb_dtype dts[] = {NB_F32, NB_F64, NB_BF16};
    for (size_t ci = 0; ci < sizeof cases / sizeof *cases; ci++)
        for (size_t di = 0; di < 3; di++)
            for (int ref = 0; ref < 2; ref++) {
                const int64_t *c = cases[ci];
                nb_dtype dt = dts[di];
                if (ref && dt == NB_BF16) continue;
                nb_scope_begin();
                nb_manual_seed(10 + ci);
                nb_tensor *a = c[0] ? awkward(NB_SHAPE(c[0], c[1], c[3]), dt) : awkward(NB_SHAPE(c[1], c[3]), dt);
                nb_tensor *b = awkward(NB_SHAPE(c[3], c[2]), dt);
                nb_tensor *add = c[4] ? awkward(NB_SHAPE(c[1], c[2]), dt) : awkward(NB_SHAPE(c[2]), dt);
                if (ref) {
                    a = NBT(nb_to_device(a, NB_REF));
                    b = NBT(nb_to_device(b, NB_REF));
                    add = NBT(nb_to_device(add, NB_REF));
                }
                char what[96];
                snprintf(what, sizeof what, "addmm relu, case %zu, %s%s", ci, nb_dtype_name(dt), ref ? ", ref" : "");
                nb_tensor *want = NBT(nb_relu(NBT(nb_addmm(add, a, b))));
                nbt_assert_same_bits(NBT(nb__addmm_act(add, a, b, true)), want, what);
                if (dt == NB_BF16) {
                    nb_scope_end();
                    continue;
                }
                /* gradients: through the fused op and through relu after addmm */
                for (uint64_t seed = 98; seed < 100; seed++) { /* a seed of y's dtype, then an f64 one */
                    nb_tensor *l[2][3];
                    for (int fused = 0; fused < 2; fused++) {
                        for (int t = 0; t < 3; t++) l[fused][t] = leaf((nb_tensor *[]){add, a, b}[t]);
                        nb_tensor *y = fused ? NBT(nb__addmm_act(l[1][0], l[1][1], l[1][2], true))
                                             : NBT(nb_relu(NBT(nb_addmm(l[0][0], l[0][1], l[0][2]))));
                        backward_weighted(y, seed);
                    }
                    for (int t = 0; t < 3; t++) nbt_assert_same_bits(NBT(nb_grad(l[1][t])), NBT(nb_grad(l[0][t])), what);
                }
                nb_scope_end();
            }
}

static void conv2d_relu_is_relu_of_conv2d(void **state) {
    (void)state;
    nb_conv2d_opts o = {{2, 1}, {1, 1}, {1, 1}, 2};
    for (int dti = 0; dti < 2; dti++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            nb_scope_begin();
            nb_dtype dt = dti ? NB_F64 : NB_F32;
            nb_manual_seed(20 + dti);
            nb_tensor *x = awkward(NB_SHAPE(3, 4, 9, 8), dt), *w = NBT(nb_cast(NBT(nb_randn(NB_SHAPE(6, 2, 3, 3), NB_F64)), dt));
            nb_tensor *bias = with_bias ? NBT(nb_cast(NBT(nb_randn(NB_SHAPE(6), NB_F64)), dt)) : NULL;
            nb_tensor *want = NBT(nb_relu(NBT(nb_conv2d(x, w, bias, o))));
            nbt_assert_same_bits(NBT(nb__conv2d_relu(x, w, bias, o)), want, "conv2d relu");
            /* finite x for the gradients (a NaN would reach every weight gradient) */
            nb_tensor *xf = values(NB_SHAPE(3, 4, 9, 8), dt, false);
            for (uint64_t seed = 98; seed < 100; seed++) { /* a seed of y's dtype, then an f64 one */
                nb_tensor *l[2][3] = {{NULL}};
                for (int fused = 0; fused < 2; fused++) {
                    l[fused][0] = leaf(xf);
                    l[fused][1] = leaf(w);
                    l[fused][2] = bias ? leaf(bias) : NULL;
                    nb_tensor *y = fused ? NBT(nb__conv2d_relu(l[1][0], l[1][1], l[1][2], o))
                                         : NBT(nb_relu(NBT(nb_conv2d(l[0][0], l[0][1], l[0][2], o))));
                    backward_weighted(y, seed);
                }
                for (int t = 0; t < 2 + with_bias; t++)
                    nbt_assert_same_bits(NBT(nb_grad(l[1][t])), NBT(nb_grad(l[0][t])), "conv2d relu gradient");
            }
            nb_scope_end();
        }
}

/* Sequential(Conv2d(2, 3, 3x3, padding 1), ReLU, MaxPool2d(2), Flatten, Linear(27, 8), ReLU, Linear(8, 4)). */
static nb_module *small_cnn(void) {
    nb_module *s = nb_nn_sequential();
    nb_conv2d_opts o = {{1, 1}, {1, 1}, {1, 1}, 1};
    assert_int_equal(nb_sequential_add(s, "conv", nb_nn_conv2d(2, 3, 3, 3, o, true)), NB_OK);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_relu()), NB_OK);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))), NB_OK);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_flatten(1, -1)), NB_OK);
    assert_int_equal(nb_sequential_add(s, "fc1", nb_nn_linear(27, 8, true)), NB_OK);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_relu()), NB_OK);
    assert_int_equal(nb_sequential_add(s, "fc2", nb_nn_linear(8, 4, true)), NB_OK);
    return s;
}

/* small_cnn's computation, layer by layer with relu as its own op. */
static nb_tensor *small_cnn_by_hand(nb_module *s, nb_tensor *x) {
    nb_conv2d_opts o = {{1, 1}, {1, 1}, {1, 1}, 1};
    nb_tensor *p[6];
    const char *names[6] = {"conv.weight", "conv.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"};
    for (int i = 0; i < 6; i++) p[i] = NBT(nb_module_param_named(s, names[i]));
    nb_tensor *h = nb_relu(nb_conv2d(x, p[0], p[1], o));
    h = nb_flatten(nb_max_pool2d(h, NB_POOL2D(2, 2)), 1, -1);
    return nb_linear(nb_relu(nb_linear(h, p[2], p[3])), p[4], p[5]);
}

static void sequential_runs_layer_and_relu_as_one_op(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(5);
    nb_module *s = small_cnn();
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(5, 2, 6, 6), NB_F32));
    nbt_assert_same_bits(NBT(nb_module_forward(s, x)), NBT(small_cnn_by_hand(s, x)), "Sequential");
    /* the parameters' gradients both ways */
    nb_tensor *g[2][6];
    for (int fused = 0; fused < 2; fused++) {
        for (int i = 0; i < 6; i++) nb_zero_grad(NBT(nb_module_param(s, i)));
        backward_weighted(fused ? NBT(nb_module_forward(s, x)) : NBT(small_cnn_by_hand(s, x)), 7);
        for (int i = 0; i < 6; i++) g[fused][i] = NBT(nb_grad(NBT(nb_module_param(s, i))));
    }
    for (int i = 0; i < 6; i++) nbt_assert_same_bits(g[1][i], g[0][i], "Sequential gradient");
    /* traced: the fused Sequential has no relu node (its labels say "+relu"), the layer-by-layer version two */
    for (int fused = 0; fused < 2; fused++) {
        nb_graph *f = nb_graph_begin("cnn");
        nb_tensor *xi = nb_graph_input(f, "x", NB_F32, NB_SHAPE(5, 2, 6, 6));
        nb_graph_output(f, "y", fused ? nb_module_forward(s, xi) : small_cnn_by_hand(s, xi));
        assert_int_equal(nb_graph_end(f), NB_OK);
        char *dot = nb_graph_to_dot(f);
        assert_non_null(dot);
        assert_true((strstr(dot, "label=\"relu") != NULL) == !fused);
        assert_true((strstr(dot, "+relu\\n") != NULL) == fused); /* the fused node's label says so */
        nb_free_string(dot);
        nb_graph_release(f);
    }
    nb_module_free(s);
    nb_scope_end();
}

/* f(x) = sum(small_cnn(x)^2) traced fused and layer by layer: compiled, vmapped over a batch of
 * inputs and its Hessian-vector product agree bit for bit. */
static void traced_fused_layers_under_transforms(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(6);
    nb_module *s = small_cnn();
    nb_graph *f[2], *v[2], *h[2];
    for (int fused = 0; fused < 2; fused++) {
        f[fused] = nb_graph_begin("f");
        nb_tensor *xi = nb_graph_input(f[fused], "x", NB_F32, NB_SHAPE(3, 2, 6, 6));
        nb_tensor *y = fused ? nb_module_forward(s, xi) : small_cnn_by_hand(s, xi);
        nb_graph_output(f[fused], "out", nb_sum(nb_mul(y, y), NULL, 0, false));
        assert_int_equal(nb_graph_end(f[fused]), NB_OK);
        v[fused] = nb_func_vmap(f[fused], 1, (const char *[]){"x"}, (int[]){0}, 4, NULL);
        h[fused] = nb_func_hvp(f[fused], 1, (const char *[]){"x"});
        assert_non_null(v[fused]);
        assert_non_null(h[fused]);
    }
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(3, 2, 6, 6), NB_F32)), *xs = NBT(nb_randn(NB_SHAPE(4, 3, 2, 6, 6), NB_F32));
    nb_tensor *t = NBT(nb_randn(NB_SHAPE(3, 2, 6, 6), NB_F32)), *r[2][3];
    for (int fused = 0; fused < 2; fused++) {
        assert_int_equal(nb_func_call(f[fused], 1, (const char *[]){"x"}, &x, 1, &r[fused][0]), NB_OK);
        assert_int_equal(nb_func_call(v[fused], 1, (const char *[]){"x"}, &xs, 1, &r[fused][1]), NB_OK);
        assert_int_equal(nb_func_call(h[fused], 2, (const char *[]){"x", "tangent_x"}, (nb_tensor *[]){x, t}, 1,
                                      &r[fused][2]),
                         NB_OK);
    }
    const char *what[3] = {"compiled", "vmap", "hvp"};
    for (int k = 0; k < 3; k++) nbt_assert_same_bits(r[1][k], r[0][k], what[k]);
    /* and the compiled value is the eager one */
    nb_tensor *y = NBT(nb_module_forward(s, x));
    nbt_assert_same_bits(r[1][0], NBT(nb_sum(NBT(nb_mul(y, y)), NULL, 0, false)), "compiled against eager");
    for (int fused = 0; fused < 2; fused++) {
        nb_graph_release(f[fused]);
        nb_graph_release(v[fused]);
        nb_graph_release(h[fused]);
    }
    nb_module_free(s);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(addmm_relu_is_relu_of_addmm),
        cmocka_unit_test(conv2d_relu_is_relu_of_conv2d),
        cmocka_unit_test(sequential_runs_layer_and_relu_as_one_op),
        cmocka_unit_test(traced_fused_layers_under_transforms),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
