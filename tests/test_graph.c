/*
 * test_graph.c — traced graphs end to end: tracing unary / binary / where
 * ops on symbolic [B, 4] inputs, compiling and running for several batch
 * sizes with results bitwise equal to eager ones, the per-thread compile
 * cache's counters and LRU eviction, params read at run time and
 * overridden by name, merging values of two graphs, typed errors without
 * leaks (bad arguments, data access on symbolic tensors, an unfinished
 * graph), the verifier on hand-broken graphs, DOT text, and a plan's runs
 * reusing the last binding's metadata (also with two threads on one plan).
 */
#include "support.h"
#include "graph/graph.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ---- */

static void assert_same_bits(nb_tensor *got, nb_tensor *want) {
    assert_non_null(got);
    assert_non_null(want);
    assert_int_equal(nb_dtype_of(got), nb_dtype_of(want));
    assert_int_equal(nb_ndim(got), nb_ndim(want));
    for (int d = 0; d < nb_ndim(got); d++) assert_int_equal(nb_shape(got)[d], nb_shape(want)[d]);
    size_t nbytes = (size_t)nb_numel(want) * nb_dtype_size(nb_dtype_of(want));
    char *a = malloc(nbytes + 1), *b = malloc(nbytes + 1);
    assert_int_equal(nb_copy_to_host(got, a, nbytes), NB_OK);
    assert_int_equal(nb_copy_to_host(want, b, nbytes), NB_OK);
    assert_memory_equal(a, b, nbytes);
    free(a);
    free(b);
}

static void assert_error(nb_status st, nb_status want, const char *needle) {
    if (st != want || (needle && !strstr(nb_last_message(), needle)))
        fprintf(stderr, "got %s: %s (wanted %s containing '%s')\n", nb_status_name(st), nb_last_message(),
                nb_status_name(want), needle ? needle : "");
    assert_int_equal(st, want);
    if (needle) assert_non_null(strstr(nb_last_message(), needle));
    nb_clear_error();
}

/* The model, traced or eager: where, unary and binary ops, weak scalars (constants), two outputs. */
static nb_tensor *model(nb_tensor *x, nb_tensor *y, nb_tensor **mask) {
    nb_tensor *a = nb_mul(nb_exp(nb_neg(x)), 0.5);
    nb_tensor *b = nb_relu(nb_sub(x, y));
    *mask = nb_gt(x, y);
    nb_tensor *c = nb_where(*mask, a, nb_tanh(y));
    return nb_add(nb_add(c, b), nb_mul(x, nb_leaky_relu(y, 0.1)));
}

static nb_graph *model_graph(void) {
    nb_graph *g = nb_graph_begin("model");
    assert_non_null(g);
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *y = NBT(nb_graph_input(g, "y", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *mask;
    nb_tensor *out = NBT(model(x, y, &mask));
    assert_int_equal(nb_graph_output(g, "out", out), NB_OK);
    assert_int_equal(nb_graph_output(g, "mask", mask), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    return g;
}

static nb_status run2(nb_compiled *c, nb_tensor *x, nb_tensor *y, nb_tensor **outs) {
    return nb_compiled_run(c, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){x, y}, 2, outs);
}

/* ---- tests ---- */

static void traced_matches_eager_over_batch_sizes(void **state) {
    (void)state;
    nb_compile_cache_clear();
    nb_graph *g = model_graph();
    assert_int_equal(nb_graph_verify(g), NB_OK);
    const int64_t sizes[3] = {1, 3, 7};
    for (int k = 0; k < 3; k++) {
        nb_compiled *c = nb_graph_compile(g, NB_CPU);
        assert_non_null(c);
        assert_ptr_equal(nb_compiled_graph(c), g);
        nb_tensor *x = NBT(nb_randn(NB_SHAPE(sizes[k], 4), NB_F32));
        nb_tensor *y = NBT(nb_randn(NB_SHAPE(sizes[k], 4), NB_F32));
        nb_tensor *outs[2] = {0};
        assert_int_equal(run2(c, x, y, outs), NB_OK);
        nb_tensor *mask;
        nb_tensor *want = NBT(model(x, y, &mask));
        assert_same_bits(outs[0], want);
        assert_same_bits(outs[1], mask);
        nb_compiled_release(c);
    }
    nb_compile_cache_stats s = nb_compile_cache_stats_get();
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.hits, 2);
    assert_int_equal(s.entries, 1);
    assert_int_equal(s.capacity, 64);
    nb_graph_release(g);
    nb_compile_cache_clear();
}

static nb_graph *plus_const_graph(double v) {
    nb_graph *g = nb_graph_begin("plus");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(nb_dim("B"))));
    assert_int_equal(nb_graph_output(g, "out", nb_add(x, nb_graph_scalar(g, v, NB_F64))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    return g;
}

static void cache_counts_hits_misses_evictions(void **state) {
    (void)state;
    nb_compile_cache_clear();
    nb_graph *g1 = plus_const_graph(2.0), *g2 = plus_const_graph(2.0), *g3 = plus_const_graph(3.0);
    nb_compiled *c1 = nb_graph_compile(g1, NB_CPU);
    nb_compiled *c2 = nb_graph_compile(g2, NB_CPU); /* equal structure and constant value: a hit */
    assert_non_null(c1);
    assert_non_null(c2);
    assert_ptr_equal(nb_compiled_graph(c2), g2);
    nb_compile_cache_stats s = nb_compile_cache_stats_get();
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.hits, 1);
    nb_compiled *c3 = nb_graph_compile(g3, NB_CPU); /* another constant value: a miss */
    assert_non_null(c3);
    s = nb_compile_cache_stats_get();
    assert_int_equal(s.misses, 2);
    assert_int_equal(s.entries, 2);
    assert_null(nb_graph_compile(g1, NB_REF)); /* another device (a miss), where its constant is not */
    assert_error(nb_last_status(), NB_ERR_DEVICE, "constant");
    s = nb_compile_cache_stats_get();
    assert_int_equal(s.misses, 3);
    assert_int_equal(s.entries, 2);
    /* the constant is read back by value in each plan */
    nb_tensor *x = NBT(nb_arange(0, 5, 1, NB_F64)), *o2, *o3;
    assert_int_equal(nb_compiled_run(c2, 1, (const char *[]){"x"}, &x, 1, &o2), NB_OK);
    assert_int_equal(nb_compiled_run(c3, 1, (const char *[]){"x"}, &x, 1, &o3), NB_OK);
    assert_same_bits(o2, nb_add(x, 2.0));
    assert_same_bits(o3, nb_add(x, 3.0));
    /* capacity 1 keeps the most recently used plan only */
    assert_int_equal(nb_compile_cache_set_capacity(0), NB_ERR_ARG);
    nb_clear_error();
    assert_int_equal(nb_compile_cache_set_capacity(1), NB_OK);
    s = nb_compile_cache_stats_get();
    assert_int_equal(s.entries, 1);
    assert_int_equal(s.capacity, 1);
    assert_int_equal(s.evictions, 1); /* g1's plan, used least recently */
    nb_compiled *c5 = nb_graph_compile(g1, NB_CPU); /* evicted: compiled again, evicting g3's */
    assert_non_null(c5);
    assert_ptr_not_equal(c5, c1);
    nb_compiled_release(c5);
    s = nb_compile_cache_stats_get();
    assert_int_equal(s.misses, 4);
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.evictions, 2);
    assert_int_equal(s.entries, 1);
    nb_compile_cache_clear();
    s = nb_compile_cache_stats_get();
    assert_int_equal(s.entries, 0);
    assert_int_equal(s.hits + s.misses + s.evictions, 0);
    /* plans still referenced keep working after the cache dropped them */
    assert_int_equal(nb_compiled_run(c1, 1, (const char *[]){"x"}, &x, 1, &o2), NB_OK);
    assert_same_bits(o2, nb_add(x, 2.0));
    assert_int_equal(nb_compile_cache_set_capacity(64), NB_OK);
    nb_compiled_release(c1);
    nb_compiled_release(c2);
    nb_compiled_release(c3);
    nb_graph_release(g1);
    nb_graph_release(g2);
    nb_graph_release(g3);
}

static void params_are_read_at_run_time_and_overridable(void **state) {
    (void)state;
    nb_tensor *w = nb_retain(NBT(nb_full(NB_SHAPE(4), 2.0, NB_F32)));
    nb_graph *g = nb_graph_begin("scale");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    nb_tensor *pw = NBT(nb_graph_param(g, "w", w));
    assert_int_equal(nb_graph_output(g, "y", nb_mul(x, pw)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(3, 4), NB_F32)), *y;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_OK);
    assert_same_bits(y, nb_mul(xv, w));
    assert_int_equal(nb_fill_(w, 3.0), NB_OK);
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_OK);
    assert_same_bits(y, nb_mul(xv, 3.0));
    nb_tensor *w2 = NBT(nb_randn(NB_SHAPE(4), NB_F32));
    assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"w", "x"}, (nb_tensor *[]){w2, xv}, 1, &y), NB_OK);
    assert_same_bits(y, nb_mul(xv, w2));
    nb_tensor *w3 = NBT(nb_randn(NB_SHAPE(5), NB_F32));
    y = NULL;
    assert_error(nb_compiled_run(c, 2, (const char *[]){"w", "x"}, (nb_tensor *[]){w3, xv}, 1, &y), NB_ERR_SHAPE,
                 "param 'w'");
    assert_null(y);
    nb_compiled_release(c);
    nb_graph_release(g);
    nb_release(w);
}

static void merged_graphs_give_the_right_values(void **state) {
    (void)state;
    /* an op on symbolic tensors of two graphs, one built inside the other */
    nb_graph *outer = nb_graph_begin("outer");
    nb_tensor *a = NBT(nb_graph_input(outer, "a", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    nb_graph *inner = nb_graph_begin("inner");
    nb_tensor *b = NBT(nb_graph_input(inner, "b", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    assert_int_equal(nb_graph_output(inner, "s", nb_mul(nb_exp(a), b)), NB_OK);
    assert_int_equal(nb_graph_end(inner), NB_OK);
    nb_tensor *kept = nb_retain(NBT(nb_sigmoid(a))); /* a result of outer that outlives its build */
    assert_int_equal(nb_graph_output(outer, "t", kept), NB_OK);
    assert_int_equal(nb_graph_end(outer), NB_OK);
    /* a result of a finished graph used while building another */
    nb_graph *later = nb_graph_begin("later");
    nb_tensor *c = NBT(nb_graph_input(later, "c", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    assert_int_equal(nb_graph_output(later, "u", nb_sub(kept, c)), NB_OK);
    assert_int_equal(nb_graph_end(later), NB_OK);
    nb_release(kept);

    nb_tensor *av = NBT(nb_randn(NB_SHAPE(5, 4), NB_F32)), *bv = NBT(nb_randn(NB_SHAPE(5, 4), NB_F32)), *r;
    nb_compiled *ci = nb_graph_compile(inner, NB_CPU), *cl = nb_graph_compile(later, NB_CPU);
    assert_non_null(ci);
    assert_non_null(cl);
    assert_int_equal(nb_compiled_run(ci, 2, (const char *[]){"a", "b"}, (nb_tensor *[]){av, bv}, 1, &r), NB_OK);
    assert_same_bits(r, nb_mul(nb_exp(av), bv));
    assert_int_equal(nb_compiled_run(cl, 2, (const char *[]){"c", "a"}, (nb_tensor *[]){bv, av}, 1, &r), NB_OK);
    assert_same_bits(r, nb_sub(nb_sigmoid(av), bv));
    nb_compiled_release(ci);
    nb_compiled_release(cl);
    nb_graph_release(inner);
    nb_graph_release(outer);
    nb_graph_release(later);
}

static void bad_arguments_are_typed_errors_without_leaks(void **state) {
    (void)state;
    nb_graph *g = model_graph();
    assert_null(nb_graph_compile(g, (nb_device){NB_DEVICE_CPU, 3}));
    assert_error(nb_last_status(), NB_ERR_DEVICE, NULL);
    assert_null(nb_graph_compile(NULL, NB_CPU));
    assert_error(nb_last_status(), NB_ERR_NULL, NULL);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(3, 4), NB_F32)), *y = NBT(nb_randn(NB_SHAPE(3, 4), NB_F32));
    nb_tensor *y5 = NBT(nb_randn(NB_SHAPE(5, 4), NB_F32)), *y35 = NBT(nb_randn(NB_SHAPE(3, 5), NB_F32));
    nb_tensor *yd = NBT(nb_randn(NB_SHAPE(3, 4), NB_F64)), *yr = NBT(nb_randn(NB_SHAPE(3, 4, 1), NB_F32));
    nb_tensor *outs[2] = {0};
    assert_int_equal(run2(c, x, y, outs), NB_OK); /* warm: dims interned, buffers cached */
    nb_scope_begin();
    long before = nbt_live_blocks;
    outs[0] = outs[1] = NULL;
    assert_error(nb_compiled_run(c, 2, (const char *[]){"x", "z"}, (nb_tensor *[]){x, y}, 2, outs), NB_ERR_ARG, "'z'");
    assert_error(nb_compiled_run(c, 1, (const char *[]){"x"}, &x, 2, outs), NB_ERR_ARG, "input 'y'");
    assert_error(nb_compiled_run(c, 2, (const char *[]){"x", "x"}, (nb_tensor *[]){x, x}, 2, outs), NB_ERR_ARG,
                 "twice");
    assert_error(run2(c, x, yd, outs), NB_ERR_DTYPE, "float64");
    assert_error(run2(c, x, yr, outs), NB_ERR_SHAPE, "rank 3");
    assert_error(run2(c, x, y5, outs), NB_ERR_SHAPE, "bound to 3 by an earlier input and to 5");
    assert_error(run2(c, x, y35, outs), NB_ERR_SHAPE, "axis 1");
    assert_error(run2(c, x, NULL, outs), NB_ERR_NULL, "'y'");
    assert_error(nb_compiled_run(c, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){x, y}, 3, outs), NB_ERR_ARG, NULL);
    assert_error(nb_compiled_run(NULL, 0, NULL, NULL, 0, NULL), NB_ERR_NULL, NULL);
    assert_null(outs[0]);
    assert_null(outs[1]);
    assert_int_equal(nbt_live_blocks, before);
    nb_scope_end();
    nb_compiled_release(c);
    nb_graph_release(g);
}

static void symbolic_data_and_unfinished_graphs_are_state_errors(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("data");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    nb_tensor *e = NBT(nb_exp(x));
    double v;
    float buf[4];
    assert_error(nb_item(e, &v), NB_ERR_STATE, "item");
    assert_null(nb_data_ptr(e));
    assert_error(nb_last_status(), NB_ERR_STATE, "data_ptr");
    assert_null(nb_to_string(x));
    assert_error(nb_last_status(), NB_ERR_STATE, "to_string");
    assert_error(nb_copy_to_host(x, buf, sizeof buf), NB_ERR_STATE, "copy_to_host");
    assert_error(nb_get(e, (const int64_t[]){0, 0}, &v), NB_ERR_STATE, "get");
    assert_null(nb_graph_compile(g, NB_CPU));
    assert_error(nb_last_status(), NB_ERR_STATE, "being built");
    assert_error(nb_graph_end(g), NB_ERR_STATE, "no output");
    assert_null(nb_graph_compile(g, NB_CPU));
    assert_error(nb_last_status(), NB_ERR_STATE, "no output");
    assert_null(nb_graph_build("none", NULL, NULL));
    assert_error(nb_last_status(), NB_ERR_NULL, NULL);
    assert_error(nb_graph_verify(NULL), NB_ERR_NULL, NULL);
    assert_null(nb_graph_to_dot(NULL));
    assert_error(nb_last_status(), NB_ERR_NULL, NULL);
    nb_graph_release(g);
}

/* Break one field of a valid graph, check the verifier names the node, restore. */
static void verifier_catches_malformed_graphs(void **state) {
    (void)state;
    nb_tensor *w = nb_retain(NBT(nb_full(NB_SHAPE(4), 2.0, NB_F32)));
    nb_graph *g = nb_graph_begin("broken");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    nb_tensor *p = NBT(nb_graph_param(g, "w", w));
    nb_tensor *ex = NBT(nb_exp(x)); /* sequenced: the node ids below depend on the order */
    nb_tensor *pm = NBT(nb_mul(p, 2.0));
    assert_int_equal(nb_graph_output(g, "y", nb_add(ex, pm)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_int_equal(nb_graph_verify(g), NB_OK);
    /* nodes: 0 input x, 1 param w, 2 exp, 3 const 2.0, 4 mul, 5 add */
    assert_int_equal(nb_graph_node_count(g), 6);
    nb_gnode *n = g->nodes;
    assert_int_equal(n[0].kind, NB_GNODE_INPUT);
    assert_int_equal(n[3].kind, NB_GNODE_CONST);
    assert_int_equal(n[5].kind, NB_GNODE_OP);
    nb_gnode saved[6];
    memcpy(saved, n, sizeof saved);
    nb_gval out0 = g->outputs[0];
#define BROKEN(mutation, needle)                                                \
    do {                                                                        \
        mutation;                                                               \
        assert_error(nb_graph_verify(g), NB_ERR_FORMAT, needle);                \
        assert_null(nb_graph_compile(g, NB_CPU));                               \
        assert_error(nb_last_status(), NB_ERR_STATE, "malformed");              \
        memcpy(n, saved, sizeof saved);                                         \
        g->outputs[0] = out0;                                                   \
        g->hash = 0;                                                            \
    } while (0)
    BROKEN(n[2].id = 7, "node 7 (exp)");
    BROKEN(n[2].in[0].node = 2, "node 2 (exp)");
    BROKEN(n[2].in[0].node = 4, "node 2 (exp)");
    BROKEN(n[2].in[0].out = 1, "node 2 (exp)");
    BROKEN(n[5].n_in = 9, "node 5 (add)");
    BROKEN(n[5].n_out = 0, "node 5 (add)");
    BROKEN(n[0].name = NULL, "node 0 (input)");
    BROKEN(n[1].name = n[0].name, "node 1 (param 'x')");
    BROKEN(n[3].value = NULL, "node 3 (const)");
    BROKEN(n[1].out[0].shape[0] = 5, "node 1 (param 'w')");
    BROKEN(n[2].out[0].dtype = NB_F64, "node 2 (exp)");
    BROKEN(n[4].out[0].shape[0] = 3, "node 4 (mul)");
    BROKEN(n[5].out[0].ndim = 1, "node 5 (add)");
    BROKEN(n[4].in[1] = ((nb_gval){0, 0}), "node 4 (mul)"); /* w * x is [B, 4], not w's [4] */
    BROKEN(n[4].kind = NB_GNODE_KIND_COUNT, "node 4");
    BROKEN(n[4].op = NB_OP_COUNT, "node 4");
    BROKEN(g->outputs[0].node = 6, "output 'y'");
    BROKEN(g->outputs[0].out = 1, "output 'y'");
#undef BROKEN
    assert_int_equal(nb_graph_verify(g), NB_OK);
    nb_graph_release(g);
    nb_release(w);
}

static void dot_text_names_nodes_and_dims(void **state) {
    (void)state;
    nb_graph *g = model_graph();
    char *dot = nb_graph_to_dot(g);
    assert_non_null(dot);
    const char *want[] = {"digraph", "input x", "input y", "exp", "where", "leaky_relu", "float32[B, 4]", "bool[B, 4]",
                          "output out", "output mask", "->"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        if (!strstr(dot, want[i])) fprintf(stderr, "missing '%s' in\n%s", want[i], dot);
        assert_non_null(strstr(dot, want[i]));
    }
    nb_free_string(dot);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    dot = nb_compiled_to_dot(c);
    assert_non_null(dot);
    assert_non_null(strstr(dot, "step 0"));
    assert_non_null(strstr(dot, "where"));
    assert_non_null(strstr(dot, "float32[B, 4]"));
    nb_free_string(dot);
    nb_free_string(NULL);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Nodes the outputs do not reach are not run (a failing dead op would fail the run). */
static void dead_nodes_are_not_scheduled(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("dead");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"))));
    NBT(nb_sin(nb_cos(x))); /* dead */
    assert_int_equal(nb_graph_output(g, "y", nb_exp(x)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    char *dot = nb_compiled_to_dot(c);
    assert_non_null(dot);
    assert_null(strstr(dot, "sin"));
    assert_null(strstr(dot, "cos"));
    assert_non_null(strstr(dot, "exp"));
    nb_free_string(dot);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(6), NB_F32)), *y;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_OK);
    assert_same_bits(y, nb_exp(xv));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* A run frees each intermediate after its last use: a chain of 24 ops holds two at a time. */
static void intermediates_are_freed_after_last_use(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("chain");
    nb_tensor *t = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 256)));
    for (int i = 0; i < 24; i++) t = NBT(i % 2 ? nb_sin(t) : nb_mul(t, 1.5));
    assert_int_equal(nb_graph_output(g, "y", t), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(8, 256), NB_F32)), *y = NULL;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &x, 1, &y), NB_OK); /* warm */
    long before = nbt_live_blocks;
    nbt_peak_blocks = nbt_live_blocks;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &x, 1, &y), NB_OK);
    /* each tensor is a few blocks (record, storage, data); keeping all 24 would be ~70 more */
    assert_true(nbt_peak_blocks - before < 24);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Symbolic dims held in a node's attrs are evaluated under the run's binding (an unbound one
 * is NB_ERR_SHAPE naming it).  Unary ops ignore attrs.i, so hand-set values only show there. */
static void symbolic_attrs_are_evaluated_at_run_time(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("attrs");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    assert_int_equal(nb_graph_output(g, "y", nb_exp(x)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_int_equal(g->nodes[1].kind, NB_GNODE_OP);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(3, 4), NB_F32)), *y = NULL;
    g->nodes[1].attrs.i[0] = nb_dim("unbound_C");
    g->hash = 0;
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    assert_error(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_ERR_SHAPE, "unbound_C");
    assert_null(y);
    nb_compiled_release(c);
    g->nodes[1].attrs.i[0] = nb__dim_mul("test", nb_dim("B"), 2);
    g->hash = 0;
    c = nb_graph_compile(g, NB_CPU);
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_OK);
    assert_same_bits(y, nb_exp(xv));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* A plan runs eagerly while another graph is being built on the same thread. */
static void runs_inside_a_trace_are_eager(void **state) {
    (void)state;
    nb_graph *g = plus_const_graph(1.0);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *x = NBT(nb_arange(0, 4, 1, NB_F64)), *y = NULL;
    nb_graph *h = nb_graph_begin("around");
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &x, 1, &y), NB_OK);
    double v;
    assert_int_equal(nb_get(y, (const int64_t[]){3}, &v), NB_OK); /* concrete, not a node of h */
    assert_true(v == 4.0);
    nb_tensor *keep = nb_retain(y);
    assert_int_equal(nb_graph_node_count(h), 0);
    assert_int_equal(nb_graph_end(h), NB_ERR_STATE); /* no output */
    nb_clear_error();
    assert_same_bits(keep, nb_add(x, 1.0));
    nb_release(keep);
    nb_graph_release(h);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* index_select(reshape(x, [2B, 2]) * 3, 0, idx) summed over axis 1: a symbolic reshape attr, a
 * run-time index check. */
static nb_tensor *reuse_model(nb_tensor *x, nb_tensor *idx, int64_t B) {
    nb_tensor *r = nb_mul(nb_reshape(x, NB_SHAPE(nb__is_symbolic(x) ? nb__dim_mul("test", B, 2) : 2 * B, 2)), 3.0);
    return nb_sum(nb_index_select(r, 0, idx), (const int[]){1}, 1, false);
}

static nb_compiled *reuse_plan(nb_graph **g) {
    *g = nb_graph_begin("reuse");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(*g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *idx = NBT(nb_graph_input(*g, "idx", NB_I64, NB_SHAPE(nb_dim("K"))));
    assert_int_equal(nb_graph_output(*g, "y", reuse_model(x, idx, B)), NB_OK);
    assert_int_equal(nb_graph_end(*g), NB_OK);
    nb_compiled *c = nb_graph_compile(*g, NB_CPU);
    assert_non_null(c);
    return c;
}

/* Run c on a random x [B, 4] and the indices 0, 2B-1, 1, 0 (or `bad` for the second) against eager. */
static nb_status run_reuse(nb_compiled *c, int64_t B, int64_t bad) {
    nb_scope_begin();
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(B, 4), NB_F32)), *y = NULL;
    int64_t iv[4] = {0, bad ? bad : 2 * B - 1, 1, 0};
    nb_tensor *idx = NBT(nb_from_data(iv, NB_SHAPE(4), NB_I64));
    nb_status st = nb_compiled_run(c, 2, (const char *[]){"x", "idx"}, (nb_tensor *[]){x, idx}, 1, &y);
    if (st == NB_OK) assert_same_bits(y, NBT(reuse_model(x, idx, B)));
    nb_scope_end();
    return st;
}

/* A run under the binding of the plan's previous run reuses its attrs and metas: right values when
 * the batch size comes back, after another, and after a run that failed at run time. */
static void runs_under_the_last_binding_reuse_it(void **state) {
    (void)state;
    nb_graph *g;
    nb_compiled *c = reuse_plan(&g);
    const int64_t sizes[] = {3, 3, 5, 3, 1, 1};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) assert_int_equal(run_reuse(c, sizes[k], 0), NB_OK);
    assert_error(run_reuse(c, 1, 7), NB_ERR_INDEX, NULL); /* index 7 of 2 rows, same binding */
    assert_int_equal(run_reuse(c, 1, 0), NB_OK);
    assert_error(run_reuse(c, 4, 8), NB_ERR_INDEX, NULL); /* a new binding that fails */
    assert_int_equal(run_reuse(c, 4, 0), NB_OK);
    assert_int_equal(run_reuse(c, 1, 0), NB_OK);
    nb_compiled_release(c);
    nb_graph_release(g);
}

static void *run_reuse_on_thread(void *arg) {
    for (int k = 0; k < 50; k++)
        if (run_reuse(arg, 2 + k % 3, 0) != NB_OK) return arg;
    return NULL;
}

/* One plan run from two threads at once: each run right (one of them without the plan's run cache). */
static void a_plan_runs_on_two_threads_at_once(void **state) {
    (void)state;
    nb_graph *g;
    nb_compiled *c = reuse_plan(&g);
    pthread_t th[2];
    void *res[2];
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_create(&th[i], NULL, run_reuse_on_thread, c), 0);
    for (int i = 0; i < 2; i++) assert_int_equal(pthread_join(th[i], &res[i]), 0);
    assert_null(res[0]);
    assert_null(res[1]);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Each thread has its own cache; a thread's plans are released when it exits. */
static void *compile_on_thread(void *arg) {
    nb_compile_cache_stats *out = arg;
    nb_graph *g = plus_const_graph(5.0);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_compiled_release(nb_graph_compile(g, NB_CPU));
    *out = nb_compile_cache_stats_get();
    nb_compiled_release(c);
    nb_graph_release(g);
    return NULL;
}

static void caches_are_per_thread(void **state) {
    (void)state;
    nb_compile_cache_clear();
    nb_graph *g = plus_const_graph(5.0);
    nb_compiled_release(nb_graph_compile(g, NB_CPU));
    nb_compile_cache_stats other = {0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, compile_on_thread, &other), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(other.misses, 1); /* not a hit on this thread's plan */
    assert_int_equal(other.hits, 1);
    nb_compile_cache_stats mine = nb_compile_cache_stats_get();
    assert_int_equal(mine.misses, 1);
    assert_int_equal(mine.hits, 0);
    nb_graph_release(g);
    nb_compile_cache_clear();
}

/* Merging joins inputs / params only when they are the same (name, dtype, shape; a param's
 * tensor), else NB_ERR_ARG at the op; deep graphs merge without recursion. */
static void merging_refuses_clashing_names_and_handles_deep_graphs(void **state) {
    (void)state;
    nb_tensor *w1 = NBT(nb_full(NB_SHAPE(2), 1.0, NB_F32)), *w7 = NBT(nb_full(NB_SHAPE(2), 7.0, NB_F32));
    nb_graph *g1 = nb_graph_begin("g1");
    nb_tensor *x1 = nb_retain(NBT(nb_graph_input(g1, "x", NB_F32, NB_SHAPE(3))));
    nb_tensor *p1 = nb_retain(NBT(nb_graph_param(g1, "w", w1)));
    nb_tensor *q1 = nb_retain(NBT(nb_graph_param(g1, "q", w7)));
    nb_tensor *deep = x1;
    for (int i = 0; i < 100000; i++) deep = NBT(nb_neg(deep));
    deep = nb_retain(deep);
    assert_int_equal(nb_graph_output(g1, "p", p1), NB_OK);
    assert_int_equal(nb_graph_end(g1), NB_OK);
    nb_graph *g2 = nb_graph_begin("g2");
    NBT(nb_graph_input(g2, "x", NB_I64, NB_SHAPE(5, 2)));
    nb_tensor *p2 = NBT(nb_graph_param(g2, "w", w7));
    NBT(nb_graph_param(g2, "q", w7));
    assert_null(nb_mul(x1, 2.0));
    assert_error(nb_last_status(), NB_ERR_ARG, "input 'x' (int64[5, 2]) clashes with input 'x' (float32[3])");
    assert_null(nb_add(p1, p2));
    assert_error(nb_last_status(), NB_ERR_ARG, "bound to another tensor");
    nb_tensor *s = NBT(nb_add(q1, p2)); /* the same param: one value */
    assert_int_equal(nb_graph_output(g2, "s", s), NB_OK);
    assert_int_equal(nb_graph_end(g2), NB_OK);
    nb_compiled *c = nb_graph_compile(g2, NB_CPU);
    assert_non_null(c);
    nb_tensor *xv = NBT(nb_ones(NB_SHAPE(5, 2), NB_I64)), *o = NULL;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &o), NB_OK);
    assert_same_bits(o, nb_full(NB_SHAPE(2), 14.0, NB_F32));
    nb_compiled_release(c);
    nb_graph *g3 = nb_graph_begin("g3"); /* 10^5 chained ops imported at once */
    assert_int_equal(nb_graph_output(g3, "d", deep), NB_OK);
    assert_int_equal(nb_graph_end(g3), NB_OK);
    assert_true(nb_graph_node_count(g3) == 100001);
    nb_graph_release(g3);
    nb_release(deep);
    nb_release(x1);
    nb_release(p1);
    nb_release(q1);
    nb_graph_release(g1);
    nb_graph_release(g2);
}

/* Symbolic dims are not numbers: nb_numel and constructors refuse them; inputs' concrete sizes must fit. */
static void symbolic_sizes_are_refused_where_a_count_is_needed(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("sizes");
    int64_t N = nb_dim("N");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(N, 4)));
    assert_int_equal(nb_numel(x), -1);
    assert_error(nb_last_status(), NB_ERR_STATE, "symbolic dim N");
    assert_int_equal(nb_numel(NBT(nb_graph_input(g, "s", NB_F32, NB_SHAPE(3, 4)))), 12);
    assert_null(nb_zeros(NB_SHAPE(N, 4), NB_F32));
    assert_error(nb_last_status(), NB_ERR_SHAPE, "symbolic dim N at axis 0");
    assert_null(nb_graph_input(g, "big", NB_F32, NB_SHAPE((int64_t)1 << 40, (int64_t)1 << 40)));
    assert_error(nb_last_status(), NB_ERR_OVERFLOW, "overflows");
    assert_null(nb_graph_input(g, "big", NB_F32, NB_SHAPE(INT64_MAX, 2, N)));
    assert_error(nb_last_status(), NB_ERR_OVERFLOW, "overflows");
    assert_int_equal(nb_graph_output(g, "y", x), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
}

/* A captured tensor finds its node in O(1): a bound param's tensor stands for the param, and
 * 10^5 ops with a C scalar (one constant each) trace in linear time. */
static void captures_are_found_in_constant_time(void **state) {
    (void)state;
    nb_tensor *w = NBT(nb_full(NB_SHAPE(2), 3.0, NB_F32));
    nb_graph *g = nb_graph_begin("scalars");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    NBT(nb_graph_param(g, "w", w));
    nb_tensor *y = NBT(nb_add(x, w)); /* w is the param: no new node */
    assert_int_equal(nb_graph_node_count(g), 3);
    clock_t t0 = clock();
    for (int i = 0; i < 100000; i++) y = NBT(nb_add(y, 1.0));
    double secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
    assert_int_equal(nb_graph_node_count(g), 3 + 2 * 100000);
    assert_true(secs < 20.0); /* quadratic capture: ~10 minutes */
    assert_int_equal(nb_graph_output(g, "y", nb_add(y, w)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_int_equal(nb_graph_node_count(g), 3 + 2 * 100000 + 1);
    nb_graph_release(g);
}

/* A param or constant is on its tensor's device: mixing it with the graph's inputs elsewhere
 * is NB_ERR_DEVICE at the op, as in eager code. */
static void params_on_another_device_fail_at_the_op(void **state) {
    (void)state;
    nb_tensor *wr = NBT(nb_to_device(NBT(nb_ones(NB_SHAPE(2), NB_F32)), NB_REF));
    nb_graph *g = nb_graph_begin("dev");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    nb_tensor *p = NBT(nb_graph_param(g, "w", wr));
    assert_true(nb_device_of(p).type == NB_DEVICE_REF);
    assert_null(nb_add(x, p));
    assert_error(nb_last_status(), NB_ERR_DEVICE, "add: operands on different devices");
    assert_null(nb_add(x, wr));
    assert_error(nb_last_status(), NB_ERR_DEVICE, "add: operands on different devices");
    assert_int_equal(nb_graph_output(g, "y", nb_mul(p, 2.0)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_REF);
    assert_non_null(c);
    nb_tensor *xv = NBT(nb_to_device(NBT(nb_ones(NB_SHAPE(2), NB_F32)), NB_REF)), *o = NULL;
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &o), NB_OK);
    assert_same_bits(o, nb_mul(wr, 2.0));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Dim names are identifiers (so DOT text needs no escaping of them); derived dims come from nb_dim_add / _mul. */
static void dim_names_are_identifiers(void **state) {
    (void)state;
    const char *bad[] = {"B+1", "7", "-3", "2*B", "a\"b", "x y", "1B"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(nb_dim(bad[i]), -1);
        assert_error(nb_last_status(), NB_ERR_ARG, "not an identifier");
    }
    int64_t B = nb_dim("B"), M = nb_dim("_m2");
    assert_true(nb_dim_is_symbolic(B) && nb_dim_is_symbolic(M) && nb_dim_is_symbolic(nb_dim("?")));
    assert_true(nb_dim_is_symbolic(nb_dim(NULL)) && nb_dim_is_symbolic(nb_dim("")));
    char buf[64];
    assert_string_equal(nb_dim_name(nb_dim_add(nb_dim_mul(B, 2), 1), buf, sizeof buf), "2*B+1");
    assert_true(nb_dim_add(B, 1) == nb__dim_add("test", B, 1));
    assert_true(nb_dim_mul(3, 4) == 12);
    assert_int_equal(nb_dim_mul(nb_dim_add(B, 1), nb_dim_add(M, 1)), -1);
    assert_error(nb_last_status(), NB_ERR_SHAPE, "dim_mul");
}

/* Inputs declared with derived dims (B-5, 2*B) are checked once B is bound, whatever the
 * argument order; a derived size that works out negative matches no input. */
static void derived_dims_bind_in_any_order(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_graph *g = nb_graph_begin("derived");
    assert_non_null(g);
    nb_tensor *z = nb_graph_input(g, "z", NB_F32, NB_SHAPE(B, 3));
    nb_tensor *a = nb_graph_input(g, "a", NB_F32, NB_SHAPE(nb_dim_add(B, -5), 3));
    nb_tensor *d = nb_graph_input(g, "d", NB_F32, NB_SHAPE(nb_dim_mul(B, 2)));
    assert_int_equal(nb_graph_output(g, "o", nb_add(nb_sum(a, NULL, 0, false), nb_sum(nb_add(z, 1.0), NULL, 0, false))),
                     NB_OK);
    assert_int_equal(nb_graph_output(g, "p", nb_exp(d)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    nb_tensor *z7 = nb_zeros(NB_SHAPE(7, 3), NB_F32), *a2 = nb_ones(NB_SHAPE(2, 3), NB_F32);
    nb_tensor *d14 = nb_zeros(NB_SHAPE(14), NB_F32), *out[2] = {NULL, NULL};
    const char *orders[2][3] = {{"z", "a", "d"}, {"a", "d", "z"}};
    for (int k = 0; k < 2; k++) {
        nb_tensor *vals[3];
        for (int i = 0; i < 3; i++) vals[i] = orders[k][i][0] == 'z' ? z7 : orders[k][i][0] == 'a' ? a2 : d14;
        assert_int_equal(nb_compiled_run(c, 3, orders[k], vals, 2, out), NB_OK);
        double v;
        assert_int_equal(nb_item(out[0], &v), NB_OK);
        assert_true(v == 6 + 21); /* the outputs, like the inputs, belong to the test's scope */
    }
    nb_tensor *z2 = nb_zeros(NB_SHAPE(2, 3), NB_F32), *a0 = nb_ones(NB_SHAPE(0, 3), NB_F32);
    nb_tensor *d4 = nb_zeros(NB_SHAPE(4), NB_F32);
    out[0] = NULL;
    assert_int_equal(nb_compiled_run(c, 3, (const char *[]){"a", "z", "d"}, (nb_tensor *[]){a0, z2, d4}, 2, out),
                     NB_ERR_SHAPE); /* B = 2: B-5 = -3 matches no size */
    assert_null(out[0]);
    assert_non_null(strstr(nb_last_message(), "'a'"));
    nb_clear_error();
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* The trace holds its own reference to its graph and guards its scope. */
static void trace_owns_its_graph_and_scope(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("warm"); /* scope item arrays stay with the thread */
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    nb_scope_begin();
    NBT(nb_neg(x));
    nb_scope_end();
    nb_graph_end(g);
    nb_clear_error();
    nb_graph_release(g);
    long before = nbt_live_blocks;
    g = nb_graph_begin("released");
    x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    nb_graph_release(g); /* the trace still holds it */
    NBT(nb_exp(x));
    assert_error(nb_graph_end(g), NB_ERR_STATE, "no output");
    assert_int_equal(nbt_live_blocks, before);
    /* an unmatched nb_scope_end inside a trace cannot close the trace's scope */
    g = nb_graph_begin("guarded");
    x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    nb_scope_end();
    assert_error(nb_last_status(), NB_ERR_STATE, "graph trace");
    assert_int_equal(nb_graph_output(g, "y", nb_exp(x)), NB_OK);
    nb_scope_begin(); /* left open by the user: closed with the trace */
    NBT(nb_neg(x));
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
    assert_int_equal(nbt_live_blocks, before);
}

static void *trace_and_exit(void *arg) {
    (void)arg;
    nb_graph *g = nb_graph_begin("abandoned");
    nb_exp(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    nb_graph_release(g);
    return NULL;
}

static nb_tensor *fn_leaves_a_trace_open(nb_graph *g, void *ctx) {
    nb_tensor *x = nb_graph_input(g, "x", NB_F32, NB_SHAPE(2));
    *(nb_graph **)ctx = nb_graph_begin("nested");
    return nb_exp(x);
}

static nb_tensor *fn_fails(nb_graph *g, void *ctx) {
    (void)ctx;
    return nb_graph_input(g, "x", (nb_dtype)99, NB_SHAPE(2));
}

static nb_status fn_with_fails(nb_graph *g, void *ctx, void *meta) {
    (void)ctx;
    (void)meta;
    return nb_graph_input(g, "", NB_F32, NB_SHAPE(2)) ? NB_OK : nb_last_status();
}

/* Traces left open are ended: by a thread's exit, by nb_graph_build after its fn; fn's error is kept. */
static void open_traces_are_unwound_and_fn_errors_kept(void **state) {
    (void)state;
    long before = nbt_live_blocks;
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, trace_and_exit, NULL), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(nbt_live_blocks, before);
    nb_graph *nested = NULL;
    assert_null(nb_graph_build("outer", fn_leaves_a_trace_open, &nested));
    assert_error(nb_last_status(), NB_ERR_STATE, "left graph 'nested' open");
    assert_null(nb__graph_tracing());
    nb_tensor *a = NBT(nb_full(NB_SHAPE(2), 1.0, NB_F32));
    double v = 0;
    assert_int_equal(nb_item(nb_sum(nb_add(a, 1.0), NULL, 0, false), &v), NB_OK); /* eager again */
    assert_true(v == 4.0);
    assert_error(nb_graph_end(nested), NB_ERR_STATE, "innermost");
    nb_graph_release(nested);
    assert_null(nb_graph_build("fails", fn_fails, NULL));
    assert_error(nb_last_status(), NB_ERR_DTYPE, "invalid dtype");
    assert_null(nb_graph_build_with("fails", fn_with_fails, NULL, NULL));
    assert_error(nb_last_status(), NB_ERR_ARG, "non-empty");
    assert_null(nb__graph_tracing());
}

int main(void) {
    if (nb_set_allocator(nbt_counting_alloc, NULL) != NB_OK) return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(traced_matches_eager_over_batch_sizes, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(runs_under_the_last_binding_reuse_it, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(a_plan_runs_on_two_threads_at_once, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(cache_counts_hits_misses_evictions, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(params_are_read_at_run_time_and_overridable, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(merged_graphs_give_the_right_values, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(bad_arguments_are_typed_errors_without_leaks, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_data_and_unfinished_graphs_are_state_errors, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(verifier_catches_malformed_graphs, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(dot_text_names_nodes_and_dims, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(dead_nodes_are_not_scheduled, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(intermediates_are_freed_after_last_use, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(runs_inside_a_trace_are_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_attrs_are_evaluated_at_run_time, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(caches_are_per_thread, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(trace_owns_its_graph_and_scope, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(derived_dims_bind_in_any_order, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(dim_names_are_identifiers, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(params_on_another_device_fail_at_the_op, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(captures_are_found_in_constant_time, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_sizes_are_refused_where_a_count_is_needed, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(merging_refuses_clashing_names_and_handles_deep_graphs, nbt_setup,
                                        nbt_teardown),
        cmocka_unit_test_setup_teardown(open_traces_are_unwound_and_fn_errors_kept, nbt_setup, nbt_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nb_compile_cache_clear();
    return rc;
}
