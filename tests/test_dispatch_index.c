/*
 * test_dispatch_index.c — matmul, gather, scatter_add and the window ops
 * (unfold, fold, max_pool2d, max_unpool2d) and the composites on them
 * through the one dispatch point: a traced op gives a graph node whose
 * symbolic result has the eager result's shape and dtype (a symbolic batch
 * dim B included); index values are not read while tracing (their range is
 * checked when the graph runs); eager index errors are unchanged.
 */
#include "support.h"

#include "ops/ops.h" /* nb__kinds: infer / execute as the executor calls them; whether views trace yet */

#include <string.h>

#define EAGER_B 3 /* the concrete batch size of the eager references */

static int64_t sym_b(void) {
    int64_t b = nb_dim("B");
    assert_true(nb_dim_is_symbolic(b));
    return b;
}

/* t's dtype is dt and its shape s[0..n) (dims compared with ==, symbolic ones included). */
static void assert_meta(const nb_tensor *t, nb_dtype dt, const int64_t *s, int n) {
    assert_non_null(t);
    assert_int_equal(nb_dtype_of(t), dt);
    assert_int_equal(nb_ndim(t), n);
    for (int i = 0; i < n; i++) assert_true(nb_shape(t)[i] == s[i]);
}

/* sym (traced, leading dim `lead`) has eager's metadata, eager's leading dim replaced by lead. */
static void assert_like(const nb_tensor *sym, const nb_tensor *eager, int64_t lead) {
    assert_non_null(eager);
    int64_t s[8];
    int n = nb_ndim(eager);
    memcpy(s, nb_shape(eager), sizeof(int64_t) * (size_t)n);
    if (n > 0) s[0] = lead;
    assert_meta(sym, nb_dtype_of(eager), s, n);
}

static nb_graph *begin(void) {
    nb_graph *g = nb_graph_begin("dispatch_index");
    assert_non_null(g);
    return g;
}

static void end(nb_graph *g, nb_tensor *out) {
    assert_non_null(out);
    assert_int_equal(nb_graph_output(g, "y", out), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph_release(g);
}

/* The call failed with code and a message naming op. */
static void assert_failed(nb_tensor *r, nb_status code, const char *op) {
    assert_null(r);
    assert_int_equal(nb_last_status(), code);
    if (!strstr(nb_last_message(), op)) fail_msg("message '%s' lacks '%s'", nb_last_message(), op);
    nb_clear_error();
}

static void matmul_symbolic_batch(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *ea = NBT(nb_randn(NB_SHAPE(EAGER_B, 784), NB_F32)), *eb = NBT(nb_randn(NB_SHAPE(784, 128), NB_F32));
    nb_tensor *e = NBT(nb_matmul(ea, eb));
    nb_tensor *ea4 = NBT(nb_randn(NB_SHAPE(EAGER_B, 1, 3, 4), NB_F32)), *eb3 = NBT(nb_randn(NB_SHAPE(5, 4, 6), NB_F32));
    nb_tensor *e4 = NBT(nb_matmul(ea4, eb3));
    assert_meta(e4, NB_F32, NB_SHAPE(EAGER_B, 5, 3, 6));

    nb_graph *g = begin();
    nb_tensor *a = NBT(nb_graph_input(g, "a", NB_F32, NB_SHAPE(B, 784)));
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, NB_SHAPE(784, 128)));
    int before = nb_graph_node_count(g);
    nb_tensor *y = NBT(nb_matmul(a, b));
    assert_int_equal(nb_graph_node_count(g), before + 1);
    assert_like(y, e, B);
    /* batch broadcasting with a symbolic dim: [B, 1, 3, 4] @ [5, 4, 6] */
    nb_tensor *a4 = NBT(nb_graph_input(g, "a4", NB_F32, NB_SHAPE(B, 1, 3, 4)));
    assert_like(NBT(nb_matmul(a4, eb3)), e4, B);
    /* [B, K] @ [K, N] with the same symbolic K on both sides */
    nb_tensor *ak = NBT(nb_graph_input(g, "ak", NB_F32, NB_SHAPE(2, B)));
    nb_tensor *bk = NBT(nb_graph_input(g, "bk", NB_F32, NB_SHAPE(B, 7)));
    assert_meta(NBT(nb_matmul(ak, bk)), NB_F32, NB_SHAPE(2, 7));
    /* inner dims B vs 784, and dtypes, are checked from metadata */
    assert_failed(nb_matmul(bk, b), NB_ERR_SHAPE, "matmul: inner dimensions differ");
    nb_tensor *a64 = NBT(nb_graph_input(g, "a64", NB_F64, NB_SHAPE(B, 784)));
    assert_failed(nb_matmul(a64, b), NB_ERR_DTYPE, "matmul");
    end(g, y);
}

static void linear_symbolic_batch(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *w = NBT(nb_randn(NB_SHAPE(128, 784), NB_F32)), *bias = NBT(nb_randn(NB_SHAPE(128), NB_F32));
    nb_tensor *e = NBT(nb_linear(NBT(nb_randn(NB_SHAPE(EAGER_B, 784), NB_F32)), w, bias));
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 784)));
    nb_tensor *y = NBT(nb_relu(nb_linear(x, w, bias))); /* captured weight and bias */
    assert_like(y, e, B);
    assert_failed(nb_linear(x, NBT(nb_randn(NB_SHAPE(128, 10), NB_F32)), NULL), NB_ERR_SHAPE, "linear");
    end(g, y);
}

static void linear_traced_weight(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *w = NBT(nb_randn(NB_SHAPE(128, 784), NB_F32));
    nb_tensor *e = NBT(nb_linear(NBT(nb_randn(NB_SHAPE(EAGER_B, 784), NB_F32)), w, NULL));
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 784)));
    nb_tensor *y = NBT(nb_linear(x, NBT(nb_graph_param(g, "w", w)), NULL));
    assert_like(y, e, B);
    end(g, y);
}

static void gather_scatter_symbolic(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *ex = NBT(nb_randn(NB_SHAPE(EAGER_B, 5), NB_F32));
    nb_tensor *eidx = NBT(nb_zeros(NB_SHAPE(EAGER_B, 2), NB_I32));
    nb_tensor *esrc = NBT(nb_randn(NB_SHAPE(EAGER_B, 2), NB_F32));
    nb_tensor *eg = NBT(nb_gather(ex, 1, eidx)), *es = NBT(nb_scatter_add(ex, 1, eidx, esrc));
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 5)));
    nb_tensor *idx = NBT(nb_graph_input(g, "idx", NB_I32, NB_SHAPE(B, 2)));
    nb_tensor *src = NBT(nb_graph_input(g, "src", NB_F32, NB_SHAPE(B, 2)));
    int before = nb_graph_node_count(g);
    nb_tensor *y = NBT(nb_gather(x, -1, idx));
    assert_like(y, eg, B);
    assert_like(NBT(nb_scatter_add(x, -1, idx, src)), es, B);
    assert_int_equal(nb_graph_node_count(g), before + 2);
    /* the dtype is checked while tracing, under the op's name */
    nb_tensor *fidx = NBT(nb_graph_input(g, "fidx", NB_F32, NB_SHAPE(B, 2)));
    assert_failed(nb_gather(x, 1, fidx), NB_ERR_DTYPE, "gather: index must have an integer dtype");
    assert_failed(nb_scatter_add(x, 1, fidx, src), NB_ERR_DTYPE, "scatter_add: index must have an integer dtype");
    assert_failed(nb_gather(x, 2, idx), NB_ERR_AXIS, "gather");
    end(g, y);
}

/* A captured index out of range traces (its values are checked when the graph runs);
 * the same call eagerly is NB_ERR_INDEX naming the op and the first bad value. */
static void index_range_checked_at_run_time(void **state) {
    (void)state;
    int64_t B = sym_b();
    int64_t bad[2] = {1, 7};
    nb_tensor *ix = NBT(nb_from_data(bad, NB_SHAPE(1, 2), NB_I64));
    nb_tensor *ex = NBT(nb_randn(NB_SHAPE(EAGER_B, 5), NB_F32)), *esrc = NBT(nb_randn(NB_SHAPE(1, 2), NB_F32));
    assert_failed(nb_gather(ex, 1, ix), NB_ERR_INDEX, "gather: index 7 out of range [0, 5)");
    assert_failed(nb_scatter_add(ex, 1, ix, esrc), NB_ERR_INDEX, "scatter_add: index 7 out of range [0, 5)");
    /* a long index (checked in blocks of 4096): the first bad value, in the third block, is named, not a
     * later negative one */
    int64_t *many = test_calloc(10000, sizeof(int64_t));
    many[9000] = -1;
    many[8500] = 5;
    nb_tensor *lix = NBT(nb_from_data(many, NB_SHAPE(1, 10000), NB_I64));
    test_free(many);
    assert_failed(nb_gather(ex, 1, lix), NB_ERR_INDEX, "gather: index 5 out of range [0, 5)");
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 5)));
    nb_tensor *y = NBT(nb_gather(x, 1, ix));
    assert_meta(y, NB_F32, NB_SHAPE(1, 2));
    assert_meta(NBT(nb_scatter_add(x, 1, ix, esrc)), NB_F32, NB_SHAPE(B, 5));
    end(g, y);
}

static void window_ops_symbolic_batch(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_window2d w = {{3, 3}, {1, 1}, {1, 1}, {1, 1}}, p = NB_POOL2D(2, 2);
    nb_tensor *ex = NBT(nb_randn(NB_SHAPE(EAGER_B, 3, 8, 8), NB_F32));
    nb_tensor *eu = NBT(nb_unfold(ex, w)), *ef = NBT(nb_fold(eu, 8, 8, w)), *eidx = NULL;
    nb_tensor *ep = NBT(nb_max_pool2d_with_indices(ex, p, &eidx));
    nb_tensor *eun = NBT(nb_max_unpool2d(ep, eidx, 8, 8));
    assert_meta(eu, NB_F32, NB_SHAPE(EAGER_B, 27, 64));

    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 3, 8, 8)));
    nb_tensor *u = NBT(nb_unfold(x, w));
    assert_like(u, eu, B);
    assert_like(NBT(nb_fold(u, 8, 8, w)), ef, B);
    int before = nb_graph_node_count(g);
    nb_tensor *idx = NULL, *pooled = NBT(nb_max_pool2d_with_indices(x, p, &idx));
    assert_int_equal(nb_graph_node_count(g), before + 1); /* one node, two outputs */
    assert_like(pooled, ep, B);
    assert_like(idx, eidx, B);
    assert_like(NBT(nb_max_pool2d(x, p)), ep, B);
    nb_tensor *y = NBT(nb_max_unpool2d(pooled, idx, 8, 8));
    assert_like(y, eun, B);
    /* symbolic channels: unfold's rows are C*KH*KW */
    int64_t C = nb_dim("C");
    nb_tensor *xc = NBT(nb_graph_input(g, "xc", NB_F32, NB_SHAPE(B, C, 8, 8)));
    nb_tensor *uc = NBT(nb_unfold(xc, w));
    char buf[64];
    assert_string_equal(nb_dim_name(nb_shape(uc)[1], buf, sizeof buf), "9*C");
    assert_meta(NBT(nb_fold(uc, 8, 8, w)), NB_F32, NB_SHAPE(B, C, 8, 8));
    /* a symbolic plane is not supported: NB_ERR_SHAPE naming the op and the dim */
    int64_t H = nb_dim("H");
    nb_tensor *xh = NBT(nb_graph_input(g, "xh", NB_F32, NB_SHAPE(B, 3, H, 8)));
    assert_failed(nb_unfold(xh, w), NB_ERR_SHAPE, "unfold: the height of the input plane is the symbolic dim H");
    assert_failed(nb_max_pool2d(xh, p), NB_ERR_SHAPE, "max_pool2d");
    /* indices dtype checked while tracing */
    nb_tensor *fidx = NBT(nb_graph_input(g, "fidx", NB_F32, NB_SHAPE(B, 3, 4, 4)));
    assert_failed(nb_max_unpool2d(pooled, fidx, 8, 8), NB_ERR_DTYPE, "max_unpool2d: indices must have an integer dtype");
    end(g, y);
}

/* max_unpool2d: positions out of the plane trace, and are NB_ERR_INDEX eagerly. */
static void unpool_positions_checked_at_run_time(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *bad = NBT(nb_full(NB_SHAPE(1, 1, 1, 1), 9, NB_I64));
    nb_tensor *ex = NBT(nb_ones(NB_SHAPE(1, 1, 1, 1), NB_F32));
    assert_failed(nb_max_unpool2d(ex, bad, 3, 3), NB_ERR_INDEX, "max_unpool2d: index 9 out of range [0, 9)");
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(1, 1, 1, 1)));
    nb_tensor *y = NBT(nb_max_unpool2d(x, bad, 3, 3));
    assert_meta(y, NB_F32, NB_SHAPE(1, 1, 3, 3));
    (void)B;
    end(g, y);
}

/* The derivative rule of max_pool2d reads the indices the eager node keeps as its second input. */
static void max_pool_gradient_at_argmax(void **state) {
    (void)state;
    float v[8] = {1, 5, 2, 0, -1, -2, 7, 3};
    nb_tensor *x = NBT(nb_from_data(v, NB_SHAPE(1, 1, 2, 4), NB_F32));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = NBT(nb_max_pool2d(x, NB_POOL2D(2, 2)));
    assert_int_equal(nb_backward(nb_sum(y, NULL, 0, false), NULL, false), NB_OK);
    float want[8] = {0, 1, 0, 0, 0, 0, 1, 0};
    assert_close(nb_grad(x), NBT(nb_from_data(want, NB_SHAPE(1, 1, 2, 4), NB_F32)), 0, 0);
}

static void composites_on_views_trace(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_tensor *tab = NBT(nb_randn(NB_SHAPE(10, 4), NB_F32));
    nb_tensor *eidx = NBT(nb_zeros(NB_SHAPE(EAGER_B, 6), NB_I64)), *ex = NBT(nb_randn(NB_SHAPE(EAGER_B, 10), NB_F32));
    nb_tensor *e_emb = NBT(nb_embedding(tab, eidx));
    nb_tensor *e_sel = NBT(nb_index_select(ex, 1, NBT(nb_zeros(NB_SHAPE(6), NB_I64))));
    nb_tensor *e_take = NBT(nb_take_along_axis(ex, eidx, 1));
    nb_tensor *e_hot = NBT(nb_one_hot(eidx, 10));
    nb_tensor *eimg = NBT(nb_randn(NB_SHAPE(EAGER_B, 3, 8, 8), NB_F32)), *wt = NBT(nb_randn(NB_SHAPE(5, 3, 3, 3), NB_F32));
    nb_tensor *e_conv = NBT(nb_conv2d(eimg, wt, NULL, NB_CONV2D_DEFAULTS));
    nb_tensor *e_avg = NBT(nb_avg_pool2d(eimg, NB_POOL2D(2, 2), true));
    nb_tensor *eseq = NBT(nb_randn(NB_SHAPE(EAGER_B, 3, 8), NB_F32)), *w1 = NBT(nb_randn(NB_SHAPE(5, 3, 3), NB_F32));
    nb_tensor *e_c1 = NBT(nb_conv1d(eseq, w1, NULL, 1, 0, 1, 1));

    nb_graph *g = begin();
    nb_tensor *idx = NBT(nb_graph_input(g, "idx", NB_I64, NB_SHAPE(B, 6)));
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 10)));
    nb_tensor *y = NBT(nb_embedding(tab, idx));
    assert_like(y, e_emb, B);
    assert_like(NBT(nb_index_select(x, 1, NBT(nb_zeros(NB_SHAPE(6), NB_I64)))), e_sel, B);
    assert_like(NBT(nb_take_along_axis(x, idx, 1)), e_take, B);
    assert_like(NBT(nb_one_hot(idx, 10)), e_hot, B);
    nb_tensor *img = NBT(nb_graph_input(g, "img", NB_F32, NB_SHAPE(B, 3, 8, 8)));
    assert_like(NBT(nb_conv2d(img, wt, NULL, NB_CONV2D_DEFAULTS)), e_conv, B);
    assert_like(NBT(nb_avg_pool2d(img, NB_POOL2D(2, 2), true)), e_avg, B);
    nb_tensor *seq = NBT(nb_graph_input(g, "seq", NB_F32, NB_SHAPE(B, 3, 8)));
    assert_like(NBT(nb_conv1d(seq, w1, NULL, 1, 0, 1, 1)), e_c1, B);
    /* a captured out-of-range index traces: checked when the graph runs */
    int64_t bad[2] = {0, 10};
    assert_meta(NBT(nb_embedding(tab, NBT(nb_from_data(bad, NB_SHAPE(2), NB_I64)))), NB_F32, NB_SHAPE(2, 4));
    end(g, y);
}

/* What the executor does at run time: infer again from the stored attrs (no data read),
 * then execute, whose range check is the typed error naming the op the node runs for. */
static void execute_checks_index_values(void **state) {
    (void)state;
    int64_t bad[2] = {1, 7};
    nb_tensor *ix = NBT(nb_from_data(bad, NB_SHAPE(1, 2), NB_I64));
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(2, 5), NB_F32)), *src = NBT(nb_randn(NB_SHAPE(1, 2), NB_F32));
    struct {
        nb_op op, named;
        int n;
        const char *msg;
    } cases[] = {{NB_OP_GATHER, NB_OP_EMBEDDING, 2, "embedding: index 7 out of range [0, 5)"},
                 {NB_OP_GATHER, 0, 2, "gather: index 7 out of range [0, 5)"},
                 {NB_OP_SCATTER_ADD, NB_OP_ONE_HOT, 3, "one_hot: index 7 out of range [0, 5)"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const nb_kind_impl *k = nb__kinds[nb__ops[cases[i].op].kind];
        nb_attrs at = {.naxes = 1, .axes = {-1}, .sub = (int)cases[i].named};
        nb_tensor *in[3] = {x, ix, src}, *out[NB_MAX_OUTS] = {NULL};
        nb_meta m[NB_MAX_OUTS];
        assert_int_equal(k->infer(cases[i].op, in, cases[i].n, &at, m), 1);
        assert_int_equal(at.axes[0], 1); /* normalized */
        assert_int_equal(k->execute(cases[i].op, in, cases[i].n, &at, m, 1, out), NB_ERR_INDEX);
        assert_null(out[0]);
        assert_int_equal(nb_last_status(), NB_ERR_INDEX);
        assert_string_equal(nb_last_message(), cases[i].msg);
        nb_clear_error();
    }
    /* max_unpool2d's positions */
    nb_tensor *p = NBT(nb_full(NB_SHAPE(1, 1, 1, 1), 9, NB_I32)), *v = NBT(nb_ones(NB_SHAPE(1, 1, 1, 1), NB_F32));
    nb_attrs at = {.ni = 10, .i = {[8] = 3, [9] = 3}};
    nb_meta m[NB_MAX_OUTS];
    nb_tensor *out[NB_MAX_OUTS] = {NULL};
    const nb_kind_impl *k = nb__kinds[NB_KIND_WINDOW];
    assert_int_equal(k->infer(NB_OP_MAX_UNPOOL2D, (nb_tensor *[]){v, p}, 2, &at, m), 1);
    assert_int_equal(k->execute(NB_OP_MAX_UNPOOL2D, (nb_tensor *[]){v, p}, 2, &at, m, 1, out), NB_ERR_INDEX);
    assert_string_equal(nb_last_message(), "max_unpool2d: index 9 out of range [0, 9)");
    nb_clear_error();
}

/* Eager index errors keep their codes and messages (the range checks now run in execute). */
static void eager_index_errors(void **state) {
    (void)state;
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(3, 4), NB_F32));
    int64_t bad[3] = {0, 3, -1};
    nb_tensor *ix = NBT(nb_from_data(bad, NB_SHAPE(3), NB_I64));
    assert_failed(nb_index_select(x, 0, ix), NB_ERR_INDEX, "index_select: index 3 out of range [0, 3)");
    assert_failed(nb_embedding(x, ix), NB_ERR_INDEX, "embedding: index 3 out of range [0, 3)");
    assert_failed(nb_one_hot(ix, 3), NB_ERR_INDEX, "one_hot: index 3 out of range [0, 3)");
    assert_failed(nb_one_hot(NBT(nb_zeros(NB_SHAPE(2), NB_F32)), 3), NB_ERR_DTYPE,
                  "one_hot: index must have an integer dtype, got float32");
    assert_failed(nb_one_hot(ix, -1), NB_ERR_ARG, "one_hot: num_classes must be positive");
    nb_tensor *ix2 = NBT(nb_from_data(bad, NB_SHAPE(3, 1), NB_I64));
    assert_failed(nb_take_along_axis(x, ix2, 1), NB_ERR_INDEX, "take_along_axis: index -1 out of range [0, 4)");
    /* values agree with an oracle written out */
    int64_t good[2] = {2, 0};
    nb_tensor *hot = NBT(nb_one_hot(NBT(nb_from_data(good, NB_SHAPE(2), NB_I32)), 3));
    int64_t want[6] = {0, 0, 1, 1, 0, 0};
    assert_int_equal(nb_dtype_of(hot), NB_I64);
    assert_close(hot, NBT(nb_from_data(want, NB_SHAPE(2, 3), NB_I64)), 0, 0);
}

/* cross_entropy with class-index targets reads them (range check, kept count for the
 * mean): a traced target is NB_ERR_STATE, not a read of missing data. */
/* cross_entropy with a symbolic target traces: run at two batch sizes it equals eager bitwise;
 * an out-of-range target is NB_ERR_INDEX when the graph runs (checked by the gather). */
static void cross_entropy_traced_target(void **state) {
    (void)state;
    int64_t B = sym_b();
    nb_graph *g = begin();
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 10)));
    nb_tensor *t = NBT(nb_graph_input(g, "t", NB_I64, NB_SHAPE(B)));
    nb_tensor *l = NBT(nb_cross_entropy(x, t, NB_CROSS_ENTROPY_DEFAULTS));
    assert_int_equal(nb_ndim(l), 0);
    assert_int_equal(nb_graph_output(g, "y", l), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    for (int64_t n = 2; n <= 5; n += 3) {
        nb_tensor *xv = NBT(nb_randn(NB_SHAPE(n, 10), NB_F32));
        nb_tensor *tv = NBT(nb_remainder(nb_arange(0, (double)n, 1, NB_I64), 10));
        nb_tensor *out = NULL;
        assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"x", "t"}, (nb_tensor *[]){xv, tv}, 1, &out), NB_OK);
        double got, want;
        assert_int_equal(nb_item(out, &got), NB_OK);
        assert_int_equal(nb_item(NBT(nb_cross_entropy(xv, tv, NB_CROSS_ENTROPY_DEFAULTS)), &want), NB_OK);
        assert_memory_equal(&got, &want, sizeof got);
    }
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(2, 10), NB_F32));
    int64_t bad[2] = {3, 10};
    nb_tensor *tv = NBT(nb_from_data(bad, NB_SHAPE(2), NB_I64));
    nb_tensor *out = NULL;
    assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"x", "t"}, (nb_tensor *[]){xv, tv}, 1, &out), NB_ERR_INDEX);
    assert_null(out);
    nb_clear_error();
    nb_compiled_release(c);
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(matmul_symbolic_batch, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(linear_symbolic_batch, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(linear_traced_weight, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(gather_scatter_symbolic, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(index_range_checked_at_run_time, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(window_ops_symbolic_batch, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(unpool_positions_checked_at_run_time, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(max_pool_gradient_at_argmax, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(composites_on_views_trace, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(execute_checks_index_values, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(eager_index_errors, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(cross_entropy_traced_target, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
