/* test_lazy.c — eval mode (G6): lazy tensors build graphs, reads compile and run them through the
 * per-thread compile cache; values against eager results, bitwise. */
#include "support.h"

#include "graph/graph.h"

#include <stdlib.h>
#include <string.h>

#define NX 20

static void fill(float *v, int n, float scale, float shift) {
    for (int i = 0; i < n; i++) v[i] = scale * (float)((i * 7) % 11) + shift; /* mixed signs */
}

/* The bytes of t (a float tensor of NX or fewer elements) read through nb_copy_to_host. */
static void host(nb_tensor *t, float *out, size_t n) {
    assert_int_equal(nb_copy_to_host(t, out, n * sizeof *out), NB_OK);
}

static void assert_same_bits(nb_tensor *lazy, nb_tensor *eager) {
    assert_true(nb_is_lazy(lazy));
    assert_false(nb_is_lazy(eager));
    int64_t n = nb_numel(eager);
    assert_int_equal(nb_numel(lazy), n);
    assert_int_equal(nb_dtype_of(lazy), nb_dtype_of(eager));
    size_t bytes = (size_t)n * nb_dtype_size(nb_dtype_of(eager));
    char a[512], b[512];
    assert_true(bytes <= sizeof a);
    assert_int_equal(nb_copy_to_host(lazy, a, bytes), NB_OK);
    assert_int_equal(nb_copy_to_host(eager, b, bytes), NB_OK);
    assert_memory_equal(a, b, bytes);
}

/* (a + b).relu() * a - exp(b) and a where on a comparison, lazy vs eager, with broadcasting. */
static nb_tensor *expr(nb_tensor *a, nb_tensor *b) {
    nb_tensor *r = nb_sub(nb_mul(nb_relu(nb_add(a, b)), a), nb_exp(b));
    return nb_where(nb_gt(a, b), r, nb_mul(b, 2.0));
}

static void values_match_eager(void **state) {
    (void)state;
    float av[NX], bv[5];
    fill(av, NX, 0.5f, -2.f);
    fill(bv, 5, -0.25f, 1.f);
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(4, 5), NB_F32));
    nb_tensor *b = NBT(nb_from_data(bv, NB_SHAPE(5), NB_F32));
    nb_tensor *la = NBT(nb_lazy(a)), *lb = NBT(nb_lazy(b));
    assert_true(nb_is_lazy(la) && !nb_is_lazy(a) && !nb_is_lazy(NULL));
    nb_tensor *lr = NBT(expr(la, lb));
    assert_int_equal(nb_ndim(lr), 2);
    assert_true(nb_shape(lr)[0] == 4 && nb_shape(lr)[1] == 5);
    assert_same_bits(lr, NBT(expr(a, b)));
    /* the seed's example: (a + b).relu() of [1, 2, 3] and ones is [2, 3, 4] */
    nb_tensor *s = NBT(nb_relu(nb_add(nb_lazy(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32)),
                                      nb_lazy(nb_ones(NB_SHAPE(3), NB_F32)))));
    float sv[3];
    host(s, sv, 3);
    assert_true(sv[0] == 2 && sv[1] == 3 && sv[2] == 4);
    /* integer promotion and a weak C integer: i32 * 3 + f64 -> f64 */
    nb_tensor *i = NBT(nb_from_data((int32_t[]){-4, 0, 9}, NB_SHAPE(3), NB_I32));
    nb_tensor *d = NBT(nb_from_data((double[]){0.5, -1.5, 1e10}, NB_SHAPE(3), NB_F64));
    assert_same_bits(NBT(nb_add(nb_mul(nb_lazy(i), 3), nb_lazy(d))), NBT(nb_add(nb_mul(i, 3), d)));
    /* a lazy tensor of nothing but its data reads back as that data */
    assert_same_bits(NBT(nb_lazy(a)), a);
}

static void graphs_merge(void **state) {
    (void)state;
    float av[NX], bv[NX], cv[NX];
    fill(av, NX, 1.f, -3.f);
    fill(bv, NX, -0.5f, 2.f);
    fill(cv, NX, 0.125f, 0.f);
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(NX), NB_F32));
    nb_tensor *b = NBT(nb_from_data(bv, NB_SHAPE(NX), NB_F32));
    nb_tensor *c = NBT(nb_from_data(cv, NB_SHAPE(NX), NB_F32));
    nb_tensor *la = NBT(nb_lazy(a)), *lb = NBT(nb_lazy(b)), *lc = NBT(nb_lazy(c));
    /* two expressions on separate graphs, then merged both ways round */
    nb_tensor *x = NBT(nb_add(nb_mul(la, lb), la));
    nb_tensor *y = NBT(nb_tanh(nb_sub(lc, lb)));
    nb_tensor *ex = NBT(nb_add(nb_mul(a, b), a)), *ey = NBT(nb_tanh(nb_sub(c, b)));
    assert_same_bits(NBT(nb_mul(x, y)), NBT(nb_mul(ex, ey)));
    assert_same_bits(NBT(nb_div(y, nb_add(x, 100.0))), NBT(nb_div(ey, nb_add(ex, 100.0))));
    /* extending x's graph after it was merged leaves x and the merged values as they were */
    assert_same_bits(NBT(nb_neg(x)), NBT(nb_neg(ex)));
    assert_same_bits(x, ex);
    assert_same_bits(y, ey);
}

static void cache_hits(void **state) {
    (void)state;
    float v1[NX], v2[NX];
    fill(v1, NX, 1.f, -5.f);
    fill(v2, NX, -2.f, 3.f);
    nb_tensor *x1 = NBT(nb_from_data(v1, NB_SHAPE(NX), NB_F32));
    nb_tensor *x2 = NBT(nb_from_data(v2, NB_SHAPE(NX), NB_F32));
    nb_compile_cache_clear();
    nb_tensor *r1 = NBT(nb_relu(nb_add(nb_lazy(x1), 2.0)));
    nb_tensor *e1 = NBT(nb_eval(r1));
    assert_false(nb_is_lazy(e1));
    nb_compile_cache_stats st = nb_compile_cache_stats_get();
    assert_true(st.misses == 1 && st.hits == 0);
    /* a second read of the same tensor returns the cached value without compiling or running */
    nb_tensor *e1b = NBT(nb_eval(r1));
    assert_ptr_equal(nb_data_ptr(e1b), nb_data_ptr(e1));
    assert_ptr_equal(nb_data_ptr(r1), nb_data_ptr(e1));
    float out[NX];
    host(r1, out, NX);
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 1 && st.hits == 0);
    /* the same expression over other data: a cache hit, with the other data's values */
    nb_tensor *r2 = NBT(nb_relu(nb_add(nb_lazy(x2), 2.0)));
    assert_same_bits(r2, NBT(nb_relu(nb_add(x2, 2.0))));
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 1 && st.hits == 1);
    assert_same_bits(r1, NBT(nb_relu(nb_add(x1, 2.0))));
    /* another C constant is another expression */
    assert_same_bits(NBT(nb_relu(nb_add(nb_lazy(x2), 3.0))), NBT(nb_relu(nb_add(x2, 3.0))));
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 2 && st.hits == 1);
    /* the key is the expression alone: a graph extended with other branches still hits */
    nb_tensor *l1 = NBT(nb_lazy(x1));
    NBT(nb_exp(l1));
    NBT(nb_sin(l1));
    assert_same_bits(NBT(nb_relu(nb_add(l1, 2.0))), e1);
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 2 && st.hits == 2);
    /* an op on a tensor read before captures its value: r1 - 1 and exp(x2) - 1 are both c0 - 1 */
    assert_same_bits(NBT(nb_sub(r1, 1.0)), NBT(nb_sub(e1, 1.0)));
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 3 && st.hits == 2);
    nb_tensor *r3 = NBT(nb_exp(nb_lazy(x2)));
    NBT(nb_eval(r3));
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 4 && st.hits == 2);
    assert_same_bits(NBT(nb_sub(r3, 1.0)), NBT(nb_sub(nb_exp(x2), 1.0)));
    st = nb_compile_cache_stats_get();
    assert_true(st.misses == 4 && st.hits == 3);
    nb_compile_cache_clear();
}

/* A loop that reads its lazy state at every step: each step is one small graph, computed once. */
static void read_every_step(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_from_data((float[]){1, -2, 3}, NB_SHAPE(3), NB_F32));
    nb_tensor *x = NBT(nb_retain(nb_lazy(a)));
    for (int step = 0; step < 6; step++) {
        nb_scope_begin();
        nb_tensor *y = NBT(nb_mul(nb_add(x, 1.0), 2.0));
        float v[3];
        host(y, v, 3);
        nb_release(x);
        x = nb_retain(y);
        nb_scope_end();
        assert_int_equal(nb_graph_node_count(x->graph), 5); /* a or the value read, 1, add, 2, mul */
    }
    float v[3];
    host(x, v, 3);
    for (int i = 0; i < 3; i++) { /* x -> 2x + 2, six times: 64 x + 126 */
        float e = nbt_at(a, i);
        for (int k = 0; k < 6; k++) e = (e + 1) * 2;
        assert_true(v[i] == e);
    }
    nb_release(x);
}

static void mixed_concrete(void **state) {
    (void)state;
    float av[NX], bv[NX];
    fill(av, NX, 0.75f, -4.f);
    fill(bv, NX, 0.5f, -1.f);
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(NX), NB_F32));
    nb_tensor *b = NBT(nb_from_data(bv, NB_SHAPE(NX), NB_F32));
    nb_tensor *la = NBT(nb_lazy(a));
    nb_tensor *r = NBT(nb_maximum(nb_mul(b, la), b)); /* the concrete operand first and twice */
    assert_same_bits(r, NBT(nb_maximum(nb_mul(b, a), b)));
    nb_tensor *c = NBT(nb_from_data((float[]){-1, 0, 1}, NB_SHAPE(3, 1), NB_F32));
    nb_tensor *w = NBT(nb_where(nb_gt(c, 0.0), la, c)); /* broadcast [3,1] x [NX] */
    assert_same_bits(w, NBT(nb_where(nb_gt(c, 0.0), a, c)));
}

static void reads(void **state) {
    (void)state;
    nb_tensor *s = NBT(nb_scalar(2.5, NB_F32));
    nb_tensor *ls = NBT(nb_mul(nb_lazy(s), nb_lazy(s)));
    double v = 0;
    assert_int_equal(nb_item(ls, &v), NB_OK);
    assert_true(v == 6.25);
    float av[6] = {1.5f, -2, 0, 3.25f, -0.f, 7};
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(2, 3), NB_F32));
    nb_tensor *la = NBT(nb_sub(nb_lazy(a), 1.0)), *ea = NBT(nb_sub(a, 1.0));
    char *ts = nb_to_string(la), *te = nb_to_string(ea);
    assert_non_null(ts);
    assert_non_null(te);
    assert_string_equal(ts, te);
    free(ts);
    free(te);
    assert_int_equal(nb_get(la, (int64_t[]){1, 0}, &v), NB_OK);
    assert_true(v == 2.25);
    const float *p = nb_data_ptr(la);
    assert_non_null(p);
    assert_true(p[5] == 6.f);
    FILE *f = tmpfile();
    assert_non_null(f);
    assert_int_equal(nb_print(la, f), NB_OK);
    fclose(f);
    /* a concrete tensor evaluates to itself; a lazy copy source is read */
    assert_ptr_equal(NBT(nb_eval(a)), a);
    nb_tensor *dst = NBT(nb_zeros(NB_SHAPE(2, 3), NB_F32));
    assert_int_equal(nb_copy_(dst, la), NB_OK);
    assert_int_equal(nb_add_(dst, la, 1.0), NB_OK);
    assert_same_bits(NBT(nb_lazy(dst)), NBT(nb_mul(ea, 2.0)));
}

static void expect(nb_status code) {
    assert_int_equal(nb_last_status(), code);
    nb_clear_error();
}

static void errors_typed(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_ones(NB_SHAPE(3), NB_F32));
    nb_tensor *la = NBT(nb_lazy(a));
    nb_tensor *lb = NBT(nb_lazy(nb_ones(NB_SHAPE(4), NB_F32)));
    assert_null(nb_add(la, lb));
    expect(NB_ERR_SHAPE);
    double v;
    assert_int_equal(nb_item(la, &v), NB_ERR_SHAPE);
    nb_clear_error();
    float buf[4];
    assert_int_equal(nb_copy_to_host(la, buf, sizeof buf), NB_ERR_ARG);
    nb_clear_error();
    assert_int_equal(nb_fill_(la, 1.0), NB_ERR_STATE);
    nb_clear_error();
    assert_int_equal(nb_copy_(la, a), NB_ERR_STATE);
    nb_clear_error();
    assert_null(nb_eval(NULL));
    expect(NB_ERR_NULL);
    assert_null(nb_lazy(NULL));
    expect(NB_ERR_NULL);
    /* devices: a lazy expression on one device, an operand on another */
    nb_tensor *lr = NBT(nb_lazy_on(a, NB_REF));
    assert_true(nb_device_of(lr).type == NB_DEVICE_REF);
    assert_null(nb_add(lr, la));
    expect(NB_ERR_DEVICE);
    assert_null(nb_add(a, lr));
    expect(NB_ERR_DEVICE);
    nb_tensor *er = NBT(nb_eval(nb_add(lr, lr)));
    assert_true(nb_device_of(er).type == NB_DEVICE_REF);
    assert_true(nbt_at(er, 2) == 2.0);
    /* symbolic tensors of a trace stay unreadable; a finished trace's tensors are not lazy */
    nb_graph *g = nb_graph_begin("t");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(3)));
    assert_false(nb_is_lazy(x));
    assert_int_equal(nb_item(x, &v), NB_ERR_STATE);
    nb_clear_error();
    assert_null(nb_to_string(x));
    expect(NB_ERR_STATE);
    assert_null(nb_data_ptr(x));
    expect(NB_ERR_STATE);
    assert_null(nb_eval(x));
    expect(NB_ERR_STATE);
    assert_null(nb_lazy(x));
    expect(NB_ERR_STATE);
    nb_tensor *keep = nb_retain(x);
    assert_int_equal(nb_graph_output(g, "y", nb_add(x, la)), NB_OK); /* a lazy operand is imported */
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_null(nb_add(la, keep));
    expect(NB_ERR_STATE);
    assert_null(nb_add(keep, la));
    expect(NB_ERR_STATE);
    nb_release(keep);
    /* the traced graph with the imported lazy operand runs like any graph */
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    nb_tensor *y = NULL, *xv = NBT(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32));
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 1, &y), NB_OK);
    assert_true(nbt_at(y, 0) == 2 && nbt_at(y, 2) == 4);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* The tape does not record lazy or symbolic tensors: flagging them, or making a tracked tensor lazy, is refused. */
static void tape_flags_refused(void **state) {
    (void)state;
    nb_tensor *a = NBT(nb_ones(NB_SHAPE(2), NB_F32));
    nb_tensor *la = NBT(nb_lazy(a));
    assert_int_equal(nb_set_requires_grad(la, true), NB_ERR_STATE);
    assert_non_null(strstr(nb_last_message(), "lazy"));
    nb_clear_error();
    assert_false(nb_requires_grad(la));
    assert_int_equal(nb_set_requires_grad(a, true), NB_OK);
    assert_null(nb_lazy(a));
    expect(NB_ERR_STATE);
    assert_non_null(nb_lazy(NBT(nb_detach(a))));
    nb_graph *g = nb_graph_begin("flag");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    assert_int_equal(nb_set_requires_grad(x, true), NB_ERR_STATE);
    assert_non_null(strstr(nb_last_message(), "symbolic"));
    nb_clear_error();
    assert_int_equal(nb_graph_output(g, "y", x), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
}

/* A deep lazy expression (10^4 chained ops) is read without deep recursion. */
static void deep_chain(void **state) {
    (void)state;
    nb_tensor *z = NBT(nb_full(NB_SHAPE(3), 2.0, NB_F32)), *l = NBT(nb_lazy(z));
    for (int i = 0; i < 10001; i++) l = NBT(nb_neg(l));
    double v = 0;
    assert_int_equal(nb_item(NBT(nb_sum(l, NULL, 0, false)), &v), NB_OK);
    assert_true(v == -6.0);
}

/* Ops on a long-lived lazy tensor do not grow its graph (only a chain's end is extended in place). */
static void long_lived_state(void **state) {
    (void)state;
    nb_tensor *w = NBT(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32)), *l = NBT(nb_lazy(w));
    for (int step = 0; step < 20; step++) {
        nb_scope_begin();
        double v = 0;
        assert_int_equal(nb_item(nb_mul(nb_sum(l, NULL, 0, false), 2.0), &v), NB_OK);
        assert_true(v == 12.0);
        nb_scope_end();
        assert_int_equal(nb_graph_node_count(l->graph), 1);
    }
    nb_tensor *n1 = NBT(nb_neg(l)), *c = NBT(nb_exp(nb_neg(n1))); /* a chain: n1's graph, extended */
    assert_ptr_equal(c->graph, n1->graph);
    assert_int_equal(nb_graph_node_count(c->graph), 4); /* l's data, neg, neg, exp */
    nb_tensor *b = NBT(nb_sin(n1)); /* a branch off n1: a graph of its own */
    assert_true(b->graph != n1->graph);
    assert_int_equal(nb_graph_node_count(c->graph), 4);
    assert_int_equal(nb_graph_node_count(l->graph), 1);
    assert_same_bits(c, NBT(nb_exp(w)));
    assert_same_bits(b, NBT(nb_sin(nb_neg(w))));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(values_match_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(graphs_merge, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(cache_hits, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(read_every_step, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(mixed_concrete, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(reads, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(errors_typed, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(tape_flags_refused, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(deep_chain, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(long_lived_state, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
