/*
 * test_dispatch_reduce.c — the reduce, argreduce, scan, copy, size (numel) and
 * random kinds on the one dispatch point: each op traced on graph inputs gives
 * one node whose output metadata is eager's, whose stored attrs are
 * normalized (inferring again from them changes nothing), and which, run on
 * concrete inputs by a small node-by-node interpreter below (infer from the
 * stored attrs, then execute, as an executor does), reproduces the eager
 * result bit for bit.  Symbolic batch dims: counts in mean / var / std come
 * from a numel node; symbolic tensors have no data (NB_ERR_STATE).  Random
 * ops: eager draws are pinned by the seed, traced ones are fresh each run.
 */
#include "support.h"

#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

/* ---- a tiny interpreter of traced graphs (the executor lives elsewhere) ---- */

static bool attrs_equal(const nb_attrs *a, const nb_attrs *b) {
    return !memcmp(a->f, b->f, sizeof a->f) && !memcmp(a->i, b->i, sizeof a->i) && a->ni == b->ni &&
           !memcmp(a->axes, b->axes, sizeof a->axes) && a->naxes == b->naxes && a->keepdim == b->keepdim &&
           a->sub == b->sub && a->shape_ndim == b->shape_ndim && !memcmp(a->shape, b->shape, sizeof a->shape);
}

/* Run op node nd on concrete inputs: infer from its stored attrs (which must be a fixed point,
 * and give its stored metadata where that has no symbolic dim), then execute.  NULL with the
 * execute step's error when that fails. */
static nb_tensor *run_node(const nb_gnode *nd, nb_tensor *const *in) {
    const nb_kind_impl *k = nb__kinds[nb__ops[nd->op].kind];
    nb_attrs a = nd->attrs;
    nb_meta m[NB_MAX_OUTS];
    assert_int_equal(k->infer(nd->op, in, nd->n_in, &a, m), nd->n_out);
    assert_true(attrs_equal(&a, &nd->attrs));
    const nb_meta *s = &nd->out[0];
    assert_int_equal(m[0].dtype, s->dtype);
    assert_int_equal(m[0].ndim, s->ndim);
    assert_int_equal(m[0].weak, s->weak);
    if (!nb__dims_any_sym(s->shape, s->ndim)) assert_memory_equal(m[0].shape, s->shape, sizeof(int64_t) * (size_t)s->ndim);
    nb_tensor *out[NB_MAX_OUTS];
    if (k->execute(nd->op, in, nd->n_in, &a, m, nd->n_out, out) != NB_OK) return NULL;
    for (int i = 1; i < nd->n_out; i++) nb_release(out[i]);
    return out[0];
}

/* Output 0 of g with its (first) input bound to x (NULL: none). Unscoped. */
static nb_tensor *run_graph(const nb_graph *g, nb_tensor *x) {
    nb_tensor **v = calloc((size_t)g->n, sizeof *v);
    assert_non_null(v);
    for (int i = 0; i < g->n; i++) {
        const nb_gnode *nd = &g->nodes[i];
        if (nd->kind == NB_GNODE_INPUT) v[i] = nb_retain(x);
        else if (nd->kind != NB_GNODE_OP) v[i] = nb_retain(nd->value);
        else {
            nb_tensor *in[8];
            for (int j = 0; j < nd->n_in; j++) {
                assert_int_equal(nd->in[j].out, 0);
                in[j] = v[nd->in[j].node];
            }
            v[i] = run_node(nd, in);
            assert_non_null(v[i]);
        }
    }
    nb_tensor *r = nb_retain(v[g->outputs[0].node]);
    for (int i = 0; i < g->n; i++) nb_release(v[i]);
    free(v);
    return r;
}


/* ---- every converted op, traced ---- */

enum { C_SUM_LAST, C_SUM_ALL, C_PROD_KEEP, C_MAX, C_MIN_ALL_KEEP, C_SUM_INT, C_ARGMAX, C_ARGMIN_KEEP, C_CUMSUM,
       C_CUMPROD, C_CAST_F64, C_CAST_I32, C_CONTIGUOUS, C_CLONE, C_TO_REF, C_NUMEL, C_CASES };

static nb_tensor *apply_case(int c, nb_tensor *x) {
    switch (c) {
    case C_SUM_LAST: return nb_sum(x, NB_AXES(-1), false);
    case C_SUM_ALL: return nb_sum(x, NULL, 0, false);
    case C_PROD_KEEP: return nb_prod(x, NB_AXES(2, 0), true);
    case C_MAX: return nb_max(x, NB_AXES(-2), false);
    case C_MIN_ALL_KEEP: return nb_min(x, NULL, 0, true);
    case C_SUM_INT: return nb_sum(nb_cast(nb_mul(x, 10.0), NB_I32), NB_AXES(1), false);
    case C_ARGMAX: return nb_argmax(x, -1, false);
    case C_ARGMIN_KEEP: return nb_argmin(x, 1, true);
    case C_CUMSUM: return nb_cumsum(x, -2);
    case C_CUMPROD: return nb_cumprod(x, 2);
    case C_CAST_F64: return nb_cast(x, NB_F64);
    case C_CAST_I32: return nb_cast(x, NB_I32);
    case C_CONTIGUOUS: return nb_contiguous(x); /* eager: x itself; traced: a node (values have no layout) */
    case C_CLONE: return nb_clone(x);
    case C_TO_REF: return nb_to_device(x, NB_REF);
    default: return nb__numel_of(x, NB_AXES(0, -1));
    }
}

/* The op of the case's last node and its normalized attrs' axes (-1: not checked). */
static const struct {
    nb_op op;
    int naxes, axes[3];
} EXPECT[C_CASES] = {
    [C_SUM_LAST] = {NB_OP_SUM, 1, {2}},         [C_SUM_ALL] = {NB_OP_SUM, 3, {0, 1, 2}},
    [C_PROD_KEEP] = {NB_OP_PROD, 2, {0, 2}},    [C_MAX] = {NB_OP_MAX, 1, {1}},
    [C_MIN_ALL_KEEP] = {NB_OP_MIN, 3, {0, 1, 2}}, [C_SUM_INT] = {NB_OP_SUM, 1, {1}},
    [C_ARGMAX] = {NB_OP_ARGMAX, 1, {2}},        [C_ARGMIN_KEEP] = {NB_OP_ARGMIN, 1, {1}},
    [C_CUMSUM] = {NB_OP_CUMSUM, 1, {1}},        [C_CUMPROD] = {NB_OP_CUMPROD, 1, {2}},
    [C_CAST_F64] = {NB_OP_CAST, -1, {0}},       [C_CAST_I32] = {NB_OP_CAST, -1, {0}},
    [C_CONTIGUOUS] = {NB_OP_CONTIGUOUS, -1, {0}}, [C_CLONE] = {NB_OP_CONTIGUOUS, -1, {0}},
    [C_TO_REF] = {NB_OP_TO_DEVICE, -1, {0}},    [C_NUMEL] = {NB_OP_NUMEL, 2, {0, 2}},
};

static void traced_ops_match_eager(void **state) {
    (void)state;
    nb_manual_seed(11);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(2, 3, 4), NB_F32));
    for (int c = 0; c < C_CASES; c++) {
        nb_tensor *want = NBT(apply_case(c, x));
        nb_graph *g = nb_graph_begin("case");
        nb_tensor *xi = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2, 3, 4)));
        int before = nb_graph_node_count(g);
        nb_tensor *y = NBT(apply_case(c, xi));
        /* one node per op (four for the int sum: the constant 10, mul, cast, sum) */
        int extra = c == C_SUM_INT ? 4 : 1;
        assert_int_equal(nb_graph_node_count(g), before + extra);
        const nb_gnode *nd = &g->nodes[g->n - 1];
        assert_int_equal(nd->kind, NB_GNODE_OP);
        assert_int_equal(nd->op, EXPECT[c].op);
        if (EXPECT[c].naxes >= 0) {
            assert_int_equal(nd->attrs.naxes, EXPECT[c].naxes);
            assert_memory_equal(nd->attrs.axes, EXPECT[c].axes, sizeof(int) * (size_t)EXPECT[c].naxes);
        }
        assert_int_equal(nb_dtype_of(y), nb_dtype_of(want));
        assert_int_equal(nb_ndim(y), nb_ndim(want));
        assert_memory_equal(nb_shape(y), nb_shape(want), sizeof(int64_t) * (size_t)nb_ndim(want));
        double v;
        assert_int_equal(nb_item(y, &v), NB_ERR_STATE);
        nb_clear_error();
        assert_int_equal(nb_graph_output(g, "y", y), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);
        nb_tensor *got = run_graph(g, x);
        nbt_assert_same_bits(got, want, __func__);
        nb_release(got);
        nb_graph_release(g);
    }
    /* numel's value and its weak dtype (it promotes as a C number does) */
    nb_tensor *n = NBT(nb__numel_of(x, NB_AXES(0, -1)));
    double v;
    assert_int_equal(nb_item(n, &v), NB_OK);
    assert_true(v == 8);
    assert_true(n->weak);
    assert_int_equal(nb_dtype_of(NBT(nb_div(nb_sum(x, NULL, 0, false), n))), NB_F32);
}

/* No-copy shortcuts add no node; bad arguments add none and fail as eagerly. */
static void shortcuts_and_errors(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("short");
    nb_tensor *xi = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2, 3)));
    int n0 = nb_graph_node_count(g);
    assert_ptr_equal(NBT(nb_cast(xi, NB_F32)), xi);
    assert_ptr_equal(NBT(nb_to_device(xi, NB_CPU)), xi);
    assert_int_equal(nb_graph_node_count(g), n0);
    assert_null(nb_sum(xi, NB_AXES(2), false));
    assert_int_equal(nb_last_status(), NB_ERR_AXIS);
    nb_clear_error();
    assert_null(nb_max(NBT(nb_graph_input(g, "e", NB_F32, NB_SHAPE(0, 3))), NB_AXES(0), false));
    assert_int_equal(nb_last_status(), NB_ERR_SHAPE);
    nb_clear_error();
    assert_null(nb_cast(xi, (nb_dtype)99));
    assert_int_equal(nb_last_status(), NB_ERR_DTYPE);
    nb_clear_error();
    assert_int_equal(nb_graph_node_count(g), n0 + 1); /* the input "e" only */
    assert_int_equal(nb_graph_output(g, "y", xi), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
    /* eager: the same shortcut returns its input */
    nb_tensor *x = NBT(nb_ones(NB_SHAPE(2, 3), NB_F32));
    assert_ptr_equal(NBT(nb_contiguous(x)), x);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_false(nb_requires_grad(NBT(nb_cast(x, NB_I32)))); /* an integer result carries no gradient */
    assert_true(nb_requires_grad(NBT(nb_cast(x, NB_F64))));
}

/* A rank-0 input reduces over no axis (axis 0 / -1 accepted): normalized to an empty list. */
static void rank0_reductions(void **state) {
    (void)state;
    nb_tensor *x = NBT(nb_scalar(2.5, NB_F32));
    for (int c = 0; c < 3; c++) {
        nb_graph *g = nb_graph_begin("rank0");
        nb_tensor *xi = NBT(nb_graph_input(g, "x", NB_F32, NULL, 0));
        nb_tensor *y = NBT(c == 0 ? nb_sum(xi, NB_AXES(-1), false) : c == 1 ? nb_argmax(xi, 0, true) : nb_prod(xi, NULL, 0, false));
        const nb_gnode *nd = &g->nodes[g->n - 1];
        assert_int_equal(nd->attrs.naxes, 0);
        assert_int_equal(nb_ndim(y), 0);
        assert_int_equal(nb_graph_output(g, "y", y), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);
        nb_tensor *got = run_graph(g, x);
        nb_tensor *want = NBT(c == 0   ? nb_sum(x, NB_AXES(-1), false)
                              : c == 1 ? nb_argmax(x, 0, true)
                                       : nb_prod(x, NULL, 0, false));
        nbt_assert_same_bits(got, want, __func__);
        nb_release(got);
        nb_graph_release(g);
    }
    assert_null(nb_sum(x, NB_AXES(1), false));
    assert_int_equal(nb_last_status(), NB_ERR_AXIS);
    nb_clear_error();
}

/* ---- symbolic batch dims ---- */

enum { S_MEAN, S_MEAN_KEEP, S_MEAN_ROWS, S_VAR, S_STD, S_STD_ROWS, S_NORM, S_LAYER_NORM, S_RMS_NORM, S_MEAN_ALL,
       S_CASES };

static nb_tensor *apply_sym(int c, nb_tensor *x) {
    switch (c) {
    case S_MEAN: return nb_mean(x, NB_AXES(0), false);
    case S_MEAN_KEEP: return nb_mean(x, NB_AXES(0), true);
    case S_MEAN_ROWS: return nb_mean(x, NB_AXES(1), false);
    case S_VAR: return nb_var(x, NB_AXES(0), 1, false);
    case S_STD: return nb_std(x, NB_AXES(0), 0, false);
    case S_STD_ROWS: return nb_std(x, NB_AXES(1), 1, false);
    case S_NORM: return nb_norm(x, 2, NB_AXES(0), false);
    case S_LAYER_NORM: return nb_layer_norm(x, 1, NULL, NULL, 1e-5);
    case S_RMS_NORM: return nb_rms_norm(x, 1, NULL, 1e-6);
    default: return nb_mean(x, NULL, 0, false);
    }
}

static void symbolic_batch_counts(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_manual_seed(5);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(5, 3), NB_F32));
    for (int c = 0; c < S_CASES; c++) {
        nb_graph *g = nb_graph_begin("sym");
        nb_tensor *xi = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 3)));
        nb_tensor *y = NBT(apply_sym(c, xi));
        assert_int_equal(nb_dtype_of(y), NB_F32);
        if (c == S_MEAN || c == S_VAR || c == S_STD || c == S_NORM) {
            assert_int_equal(nb_ndim(y), 1);
            assert_true(nb_shape(y)[0] == 3);
        } else if (c == S_MEAN_KEEP) {
            assert_int_equal(nb_ndim(y), 2);
            assert_true(nb_shape(y)[0] == 1 && nb_shape(y)[1] == 3);
        } else if (c == S_MEAN_ROWS || c == S_STD_ROWS) {
            assert_int_equal(nb_ndim(y), 1);
            assert_true(nb_shape(y)[0] == B);
        } else if (c == S_LAYER_NORM || c == S_RMS_NORM) {
            assert_int_equal(nb_ndim(y), 2);
            assert_true(nb_shape(y)[0] == B && nb_shape(y)[1] == 3);
        } else
            assert_int_equal(nb_ndim(y), 0);
        double v;
        assert_int_equal(nb_item(y, &v), NB_ERR_STATE);
        nb_clear_error();
        /* a count over B comes from a numel node; a count over concrete 3 is a C number */
        bool has_numel = false;
        for (int i = 0; i < g->n; i++) has_numel |= g->nodes[i].kind == NB_GNODE_OP && g->nodes[i].op == NB_OP_NUMEL;
        assert_int_equal(has_numel, c == S_MEAN || c == S_MEAN_KEEP || c == S_VAR || c == S_STD || c == S_MEAN_ALL);
        assert_int_equal(nb_graph_output(g, "y", y), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);
        /* run with B = 5: the numbers eager gives */
        nb_tensor *got = run_graph(g, x);
        nb_tensor *want = NBT(apply_sym(c, x));
        nbt_assert_same_bits(got, want, __func__);
        nb_release(got);
        nb_graph_release(g);
    }
}

/* ---- random draws ---- */

static void eager_draws_follow_the_seed(void **state) {
    (void)state;
    nb_manual_seed(3);
    nb_tensor *a = NBT(nb_rand(NB_SHAPE(5), NB_F32)), *b = NBT(nb_randn(NB_SHAPE(2, 2), NB_F64));
    nb_tensor *c = NBT(nb_bernoulli(NBT(nb_full(NB_SHAPE(7), 0.5, NB_F32))));
    nb_manual_seed(3);
    nbt_assert_same_bits(NBT(nb_rand(NB_SHAPE(5), NB_F32)), a, __func__);
    nbt_assert_same_bits(NBT(nb_randn(NB_SHAPE(2, 2), NB_F64)), b, __func__);
    nbt_assert_same_bits(NBT(nb_bernoulli(NBT(nb_full(NB_SHAPE(7), 0.5, NB_F32)))), c, __func__);
    /* the draws differ from each other: the counter advanced */
    nb_manual_seed(3);
    nb_tensor *a1 = NBT(nb_rand(NB_SHAPE(5), NB_F32)), *a2 = NBT(nb_rand(NB_SHAPE(5), NB_F32));
    double u, w;
    assert_int_equal(nb_get(a1, (int64_t[]){0}, &u), NB_OK);
    assert_int_equal(nb_get(a2, (int64_t[]){0}, &w), NB_OK);
    assert_true(u != w);
    assert_null(nb_rand(NB_SHAPE(2), NB_I32));
    assert_int_equal(nb_last_status(), NB_ERR_DTYPE);
    nb_clear_error();
}

static nb_tensor *make_rand(nb_graph *g, void *ctx) {
    (void)g;
    (void)ctx;
    return nb_add(nb_rand(NB_SHAPE(6), NB_F32), nb_randn(NB_SHAPE(6), NB_F32));
}

/* A traced draw is a node asking for fresh values: each run draws anew from the generator,
 * as the same code run eagerly would after the same seed. */
static void traced_draws_are_fresh(void **state) {
    (void)state;
    nb_graph *g = nb_graph_build("rand", make_rand, NULL);
    assert_non_null(g);
    int draws = 0;
    for (int i = 0; i < g->n; i++)
        if (g->nodes[i].kind == NB_GNODE_OP && (g->nodes[i].op == NB_OP_RAND || g->nodes[i].op == NB_OP_RANDN)) {
            assert_true(g->nodes[i].attrs.i[2] == 1);
            draws++;
        }
    assert_int_equal(draws, 2);
    nb_manual_seed(9);
    nb_tensor *r1 = run_graph(g, NULL), *r2 = run_graph(g, NULL);
    nb_manual_seed(9);
    nb_tensor *e1 = NBT(make_rand(NULL, NULL)), *e2 = NBT(make_rand(NULL, NULL));
    nbt_assert_same_bits(r1, e1, __func__);
    nbt_assert_same_bits(r2, e2, __func__);
    double u, w;
    assert_int_equal(nb_get(r1, (int64_t[]){0}, &u), NB_OK);
    assert_int_equal(nb_get(r2, (int64_t[]){0}, &w), NB_OK);
    assert_true(u != w);
    nb_release(r1);
    nb_release(r2);
    nb_graph_release(g);
}

/* dropout traced on an input: a bernoulli node, fresh at every run; bernoulli's data check
 * (probabilities in [0, 1]) happens when it runs. */
static void traced_dropout_and_bernoulli(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("drop");
    nb_tensor *xi = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(16, 16)));
    nb_tensor *y = NBT(nb_dropout(xi, 0.5, true));
    assert_int_equal(nb_dtype_of(y), NB_F32);
    assert_int_equal(nb_graph_output(g, "y", y), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    bool has = false;
    for (int i = 0; i < g->n; i++) has |= g->nodes[i].kind == NB_GNODE_OP && g->nodes[i].op == NB_OP_BERNOULLI;
    assert_true(has);
    nb_tensor *x = NBT(nb_ones(NB_SHAPE(16, 16), NB_F32));
    nb_manual_seed(21);
    nb_tensor *r1 = run_graph(g, x), *r2 = run_graph(g, x);
    nb_manual_seed(21);
    nbt_assert_same_bits(r1, NBT(nb_dropout(x, 0.5, true)), __func__);
    nbt_assert_same_bits(r2, NBT(nb_dropout(x, 0.5, true)), __func__);
    double s1, s2;
    assert_int_equal(nb_item(NBT(nb_sum(NBT(nb_abs(NBT(nb_sub(r1, r2)))), NULL, 0, false)), &s1), NB_OK);
    assert_true(s1 > 0); /* two runs, two masks */
    assert_int_equal(nb_item(NBT(nb_sum(r1, NULL, 0, false)), &s2), NB_OK);
    assert_true(s2 > 0 && s2 < 512);
    nb_release(r1);
    nb_release(r2);
    nb_graph_release(g);

    g = nb_graph_begin("bern");
    nb_tensor *pi = NBT(nb_graph_input(g, "p", NB_F32, NB_SHAPE(4)));
    assert_int_equal(nb_graph_output(g, "y", NBT(nb_bernoulli(pi))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    const nb_gnode *nd = &g->nodes[g->n - 1];
    assert_int_equal(nd->op, NB_OP_BERNOULLI);
    nb_tensor *bad = NBT(nb_full(NB_SHAPE(4), 2.0, NB_F32));
    assert_null(run_node(nd, &bad));
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    nb_clear_error();
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(traced_ops_match_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(shortcuts_and_errors, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(rank0_reductions, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_batch_counts, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(eager_draws_follow_the_seed, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(traced_draws_are_fresh, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(traced_dropout_and_bernoulli, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
