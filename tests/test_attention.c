/*
 * test_attention.c — what the op goldens (tests/golden/o9_attention.nbg, PyTorch SDPA and the float64
 * formula) and the table walks do not pin for attention (O9): the multi-head attention layer against
 * PyTorch (tests/golden/layers/n1_attention.nbg: F.linear + SDPA with the same weights), queries whose
 * every key is masked (zeros, not NaN, and zero gradients), half precision computed in float32, the
 * layer in a compiled graph with a symbolic batch, and the typed errors.
 */
#include "golden_reader.h"
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static nb_tensor *golden_tensor(const nbg_case *c, const char *name) {
    const nbg_tensor *t = nbg_find(c, name);
    if (!t) fail_msg("golden %s lacks %s", c->name, name);
    return NBT(nbg_to_tensor(t));
}

/* The layer with the golden's weights against PyTorch's result, eagerly and compiled. */
static void layer_matches_torch(void **state) {
    (void)state;
    const char *dir = getenv("NB_GOLDEN_DIR");
    char path[512], err[256];
    snprintf(path, sizeof path, "%s/layers/n1_attention.nbg", dir ? dir : NB_GOLDEN_DEFAULT_DIR);
    nbg_file f;
    if (nbg_load(path, &f, err, sizeof err) != 0) fail_msg("%s: %s", path, err);
    nb_scope_begin();
    const nbg_case *c = &f.cases[0];
    assert_string_equal(c->name, "multi_head_attention/gqa_causal");
    nb_attention_opts o = {.mask = NB_ATTN_MASK_CAUSAL};
    nb_module *m = nb_nn_multi_head_attention(8, 4, 2, o, true);
    assert_non_null(m);
    const char *names[] = {"in.wq", "in.bq", "in.wk", "in.bk", "in.wv", "in.bv", "in.wo", "in.bo"};
    const char *params[] = {"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                            "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias"};
    nb_no_grad_begin();
    for (int i = 0; i < 8; i++) {
        assert_string_equal(nb_module_param_name(m, i), params[i]);
        nb_tensor *p = NBT(nb_module_param(m, i));
        assert_int_equal(nb_copy_(p, golden_tensor(c, names[i])), NB_OK);
        nb_release(p);
    }
    nb_no_grad_end();
    nb_tensor *x = golden_tensor(c, "in.x"), *want = golden_tensor(c, "out.0");
    nb_tensor *y = NBT(nb_module_forward(m, x));
    assert_close(y, want, 1e-5, 1e-5);
    /* traced with a symbolic batch, compiled, run */
    nb_graph *g = nb_graph_begin("mha");
    nb_tensor *xs = nb_graph_input(g, "x", NB_F32, (int64_t[]){nb_dim("B"), 5, 8}, 3);
    nb_graph_output(g, "y", nb_module_forward(m, xs));
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *cp = nb_graph_compile(g, NB_CPU);
    nb_tensor *yc = NULL;
    assert_int_equal(nb_compiled_run(cp, 1, (const char *[]){"x"}, &x, 1, &yc), NB_OK);
    assert_close(yc, want, 1e-5, 1e-5);
    nb_compiled_release(cp);
    nb_graph_release(g);
    nb_module_free(m);
    nb_scope_end();
    nbg_free(&f);
}

/* Queries with no key (key lengths 0; a bool mask with an all-false row): zeros and zero gradients. */
static void fully_masked_rows_are_zeros(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(3);
    nb_tensor *q = NBT(nb_randn(NB_SHAPE(2, 1, 3, 4), NB_F64)), *k = NBT(nb_randn(NB_SHAPE(2, 1, 5, 4), NB_F64));
    nb_tensor *v = NBT(nb_randn(NB_SHAPE(2, 1, 5, 2), NB_F64));
    nb_set_requires_grad(q, true);
    nb_set_requires_grad(v, true);
    nb_tensor *len = NBT(nb_from_data((int64_t[]){0, 5}, NB_SHAPE(2), NB_I64));
    nb_attention_opts o = {.mask = NB_ATTN_MASK_KEY_PADDING, .mask_tensor = len};
    nb_tensor *y = NBT(nb_scaled_dot_product_attention(q, k, v, o));
    for (int64_t i = 0; i < 6; i++) assert_true(nbt_at(y, i) == 0); /* batch row 0: no key */
    for (int64_t i = 6; i < 12; i++) assert_true(isfinite(nbt_at(y, i)) && nbt_at(y, i) != 0);
    assert_int_equal(nb_backward(NBT(nb_sum(y, NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *gq = NBT(nb_grad(q)), *gv = NBT(nb_grad(v));
    for (int64_t i = 0; i < 12; i++) assert_true(nbt_at(gq, i) == 0);
    for (int64_t i = 0; i < 10; i++) assert_true(nbt_at(gv, i) == 0);
    for (int64_t i = 0; i < nb_numel(gq); i++) assert_false(isnan(nbt_at(gq, i)));
    /* no keys at all: zeros for every mask kind */
    nb_tensor *k0 = NBT(nb_zeros(NB_SHAPE(1, 1, 0, 3), NB_F64)), *q1 = NBT(nb_randn(NB_SHAPE(1, 1, 2, 3), NB_F64));
    nb_tensor *y0 = NBT(nb_scaled_dot_product_attention(
        q1, k0, k0, (nb_attention_opts){.mask = NB_ATTN_MASK_SLIDING, .window = 2}));
    for (int64_t i = 0; i < 6; i++) assert_true(nbt_at(y0, i) == 0);
    /* a soft-cap beyond the dtype's range caps nothing */
    nb_tensor *ya = NBT(nb_scaled_dot_product_attention(q1, q1, q1, (nb_attention_opts){.softcap = INFINITY}));
    nb_tensor *yb = NBT(nb_scaled_dot_product_attention(q1, q1, q1, (nb_attention_opts){0}));
    assert_close(ya, yb, 0, 0);
    /* a window of one key past the last key (Lq 4 > Lk 2): queries 2 and 3 see nothing */
    nb_tensor *q4 = NBT(nb_randn(NB_SHAPE(1, 1, 4, 3), NB_F64)), *k2 = NBT(nb_randn(NB_SHAPE(1, 1, 2, 3), NB_F64));
    nb_tensor *ys = NBT(nb_scaled_dot_product_attention(
        q4, k2, k2, (nb_attention_opts){.mask = NB_ATTN_MASK_SLIDING, .window = 1}));
    for (int64_t i = 0; i < 12; i++) assert_true(i < 6 ? isfinite(nbt_at(ys, i)) : nbt_at(ys, i) == 0);
    nb_scope_end();
}

/* f16 inputs compute in f32 (torch's opmath) and give f16. */
static void half_precision(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *q = NBT(nb_randn(NB_SHAPE(1, 2, 4, 8), NB_F32)), *k = NBT(nb_randn(NB_SHAPE(1, 2, 4, 8), NB_F32));
    nb_tensor *v = NBT(nb_randn(NB_SHAPE(1, 2, 4, 8), NB_F32));
    nb_attention_opts o = {.mask = NB_ATTN_MASK_CAUSAL};
    nb_tensor *want = NBT(nb_scaled_dot_product_attention(q, k, v, o));
    nb_tensor *h = NBT(nb_scaled_dot_product_attention(NBT(nb_cast(q, NB_F16)), NBT(nb_cast(k, NB_F16)),
                                                       NBT(nb_cast(v, NB_F16)), o));
    assert_int_equal(nb_dtype_of(h), NB_F16);
    assert_close(NBT(nb_cast(h, NB_F32)), want, 4e-3, 4e-3);
    nb_scope_end();
}

/* The default scale 1/sqrt(D) with a symbolic D (worked out when the graph runs), through the kernel
 * (causal) and the composite (key lengths); and NaN scores give NaN on both paths. */
static void symbolic_head_dim_and_nan(void **state) {
    (void)state;
    nb_scope_begin();
    nb_manual_seed(9);
    nb_tensor *q = NBT(nb_randn(NB_SHAPE(2, 2, 3, 4), NB_F64)), *k = NBT(nb_randn(NB_SHAPE(2, 1, 5, 4), NB_F64));
    nb_tensor *v = NBT(nb_randn(NB_SHAPE(2, 1, 5, 3), NB_F64));
    nb_tensor *len = NBT(nb_from_data((int64_t[]){5, 2}, NB_SHAPE(2), NB_I64));
    nb_attention_opts opts[2] = {{.mask = NB_ATTN_MASK_CAUSAL},
                                 {.mask = NB_ATTN_MASK_KEY_PADDING, .mask_tensor = len}};
    int64_t D = nb_dim("D");
    for (int i = 0; i < 2; i++) {
        nb_graph *g = nb_graph_begin("att");
        nb_tensor *gq = nb_graph_input(g, "q", NB_F64, (int64_t[]){2, 2, 3, D}, 4);
        nb_tensor *gk = nb_graph_input(g, "k", NB_F64, (int64_t[]){2, 1, 5, D}, 4);
        nb_tensor *gv = nb_graph_input(g, "v", NB_F64, NB_SHAPE(2, 1, 5, 3));
        nb_graph_output(g, "y", nb_scaled_dot_product_attention(gq, gk, gv, opts[i]));
        assert_int_equal(nb_graph_end(g), NB_OK);
        nb_tensor *y = NULL;
        assert_int_equal(nb_func_call(g, 3, (const char *[]){"q", "k", "v"}, (nb_tensor *[]){q, k, v}, 1, &y), NB_OK);
        assert_close(y, NBT(nb_scaled_dot_product_attention(q, k, v, opts[i])), 1e-14, 1e-14);
        nb_graph_release(g);
    }
    assert_int_equal(nb_set(q, (int64_t[]){0, 0, 1, 2}, NAN), NB_OK);
    for (int i = 0; i < 2; i++) {
        nb_tensor *y = NBT(nb_scaled_dot_product_attention(q, k, v, opts[i]));
        for (int64_t e = 0; e < 3; e++) assert_true(isnan(nbt_at(y, 3 + e))); /* query 1 of head 0 */
        assert_false(isnan(nbt_at(y, 0)));
    }
    nb_scope_end();
}

static void errors(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *q = NBT(nb_zeros(NB_SHAPE(1, 3, 4, 8), NB_F32)), *k = NBT(nb_zeros(NB_SHAPE(1, 2, 4, 8), NB_F32));
    nb_attention_opts none = {0};
    assert_null(nb_scaled_dot_product_attention(q, k, k, none));
    nbt_expect_error(NB_ERR_SHAPE, "with Hq a multiple of Hkv");
    assert_null(nb_scaled_dot_product_attention(NBT(nb_zeros(NB_SHAPE(4, 8), NB_F32)), k, k, none));
    nbt_expect_error(NB_ERR_SHAPE, "q, k, v must be [B, H, L, D], got [4, 8]");
    nb_tensor *q2 = NBT(nb_zeros(NB_SHAPE(1, 2, 4, 8), NB_F32));
    assert_null(nb_scaled_dot_product_attention(q2, k, NBT(nb_zeros(NB_SHAPE(1, 2, 4, 8), NB_F64)), none));
    nbt_expect_error(NB_ERR_DTYPE, "q, k, v must share one float dtype");
    assert_null(nb_scaled_dot_product_attention(q2, k, k, (nb_attention_opts){.mask = NB_ATTN_MASK_SLIDING}));
    nbt_expect_error(NB_ERR_ARG, "a sliding window of 0 keys");
    nb_tensor *lens = NBT(nb_zeros(NB_SHAPE(3), NB_I64));
    assert_null(nb_scaled_dot_product_attention(
        q2, k, k, (nb_attention_opts){.mask = NB_ATTN_MASK_KEY_PADDING, .mask_tensor = lens}));
    nbt_expect_error(NB_ERR_SHAPE, "a key-padding mask is lengths [1] (integers) or a bool [1, 4], got [3]");
    assert_null(nb_scaled_dot_product_attention(
        q2, k, k, (nb_attention_opts){.mask = NB_ATTN_MASK_BOOL, .mask_tensor = NBT(nb_zeros(NB_SHAPE(4, 4), NB_F32))}));
    nbt_expect_error(NB_ERR_DTYPE, "the bool mask needs a bool tensor");
    assert_null(nb_scaled_dot_product_attention(q2, k, k, (nb_attention_opts){.softcap = -1}));
    nbt_expect_error(NB_ERR_ARG, "soft-cap -1");
    assert_null(nb_rotary_embedding(NBT(nb_zeros(NB_SHAPE(4, 5), NB_F32)), 0, 10000, false));
    nbt_expect_error(NB_ERR_SHAPE, "rotary_embedding: x must be float [..., L, D] with an even concrete D");
    assert_null(nb_nn_multi_head_attention(8, 3, 1, none, true));
    nbt_expect_error(NB_ERR_ARG, "MultiheadAttention: 3 heads must divide embed_dim 8");
    assert_null(nb_nn_multi_head_attention(8, 2, 1, (nb_attention_opts){.mask = NB_ATTN_MASK_SLIDING}, true));
    nbt_expect_error(NB_ERR_ARG, "MultiheadAttention: a sliding window of 0 keys");
    nb_module *m = nb_nn_multi_head_attention(8, 4, 2, none, false);
    assert_null(nb_module_forward(m, NBT(nb_zeros(NB_SHAPE(2, 3, 7), NB_F32)))); /* E = 7, not 8 */
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    nb_clear_error();
    nb_module_free(m);
    assert_null(nb_scaled_dot_product_attention(
        q2, k, k, (nb_attention_opts){.mask = NB_ATTN_MASK_BIAS, .mask_tensor = NBT(nb_zeros(NB_SHAPE(4, 4), NB_I32))}));
    nbt_expect_error(NB_ERR_DTYPE, "the bias mask needs a float tensor, got int32");
    assert_null(nb_scaled_dot_product_attention(
        q2, k, k, (nb_attention_opts){.mask = NB_ATTN_MASK_BOOL, .mask_tensor = NBT(nb_ones(NB_SHAPE(3, 4), NB_BOOL))}));
    nbt_expect_error(NB_ERR_SHAPE, "the bool mask [3, 4] does not broadcast to [B, Hq, Lq, Lk] = [1, 2, 4, 4]");
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(layer_matches_torch),
        cmocka_unit_test(fully_masked_rows_are_zeros),
        cmocka_unit_test(half_precision),
        cmocka_unit_test(symbolic_head_dim_and_nan),
        cmocka_unit_test(errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
