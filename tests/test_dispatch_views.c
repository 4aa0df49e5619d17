/*
 * test_dispatch_views.c — the view, view_grad, pad and cat kinds on the one
 * dispatch point: slicing specs (nb_index) against Python/NumPy semantics
 * worked out by hand and loop oracles over nb_from_data inputs; every
 * converted op traced on a symbolic input of a concrete shape gives the
 * eager result's shape and dtype as a view node (not a copy); symbolic dims
 * through reshape -1, flatten, cat, slices with negative bounds, select,
 * expand and pad; the documented errors where a size cannot be known.
 */
#include "support.h"

#include "graph/graph.h"

#include <string.h>

#define IDX(...) ((const int64_t[]){__VA_ARGS__})

/* [d0, d1, d2] f32 holding its own flat index (so a value names its position). */
static nb_tensor *iota(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    float buf[256];
    assert_true(n <= 256);
    for (int64_t i = 0; i < n; i++) buf[i] = (float)i;
    return NBT(nb_from_data(buf, shape, ndim, NB_F32));
}

static void assert_shape(nb_tensor *t, const int64_t *shape, int ndim) {
    assert_int_equal(nb_ndim(t), ndim);
    for (int d = 0; d < ndim; d++) assert_int_equal(nb_shape(t)[d], shape[d]);
}

static void assert_values(nb_tensor *t, const double *want, int64_t n) {
    assert_int_equal(nb_numel(t), n);
    for (int64_t i = 0; i < n; i++) assert_true(nbt_at(t, i) == want[i]);
}

static void assert_dim_name(int64_t d, const char *want) {
    char buf[64];
    assert_string_equal(nb_dim_name(d, buf, sizeof buf), want);
}

static void assert_fails(nb_tensor *r, nb_status code) {
    assert_null(r);
    assert_int_equal(nb_last_status(), code);
    nb_clear_error();
}

/* Every op node of g re-inferred (1) from its stored attrs on its symbolic inputs: the attrs are
 * normalized (unchanged) and the metadata is the stored one; (2) as the executor will at run
 * time: attrs and input shapes evaluated under bind, on concrete inputs, giving the evaluated
 * metadata.  Returns the status of the first run-time re-infer that failed (NB_OK: none). */
static nb_status check_graph(nb_graph *g, const nb_dim_binding *bind) {
    nb_status first = NB_OK;
    for (int id = 0; id < g->n; id++) {
        const nb_gnode *nd = &g->nodes[id];
        if (nd->kind != NB_GNODE_OP) continue;
        const nb_kind_impl *k = nb__kinds[nb__ops[nd->op].kind];
        nb_tensor *sym[8], *con[8];
        for (int i = 0; i < nd->n_in; i++) {
            sym[i] = nb__graph_tensor(g, nd->in[i]);
            const nb_meta *im = nb__gval_meta(g, nd->in[i]);
            int64_t shape[NB_MAX_DIMS];
            for (int d = 0; d < im->ndim; d++) shape[d] = nb__dim_eval("test", im->shape[d], bind);
            con[i] = NBT(nb__scope_take(nb_zeros(shape, im->ndim, im->dtype)));
        }
        nb_attrs a = nd->attrs;
        nb_meta m[NB_MAX_OUTS];
        assert_int_equal(k->infer(nd->op, sym, nd->n_in, &a, m), nd->n_out);
        assert_memory_equal(&a, &nd->attrs, sizeof a);
        assert_int_equal(m[0].ndim, nd->out[0].ndim);
        assert_int_equal(m[0].dtype, nd->out[0].dtype);
        assert_memory_equal(m[0].shape, nd->out[0].shape, sizeof(int64_t) * (size_t)m[0].ndim);
        a = nd->attrs;
        for (int i = 0; i < a.ni; i++) a.i[i] = nb__dim_eval("test", a.i[i], bind);
        for (int i = 0; i < a.shape_ndim; i++) a.shape[i] = nb__dim_eval("test", a.shape[i], bind);
        if (k->infer(nd->op, con, nd->n_in, &a, m) < 0) {
            if (first == NB_OK) first = nb_last_status();
            nb_clear_error();
        } else {
            assert_int_equal(m[0].ndim, nd->out[0].ndim);
            for (int d = 0; d < m[0].ndim; d++)
                assert_int_equal(m[0].shape[d], nb__dim_eval("test", nd->out[0].shape[d], bind));
        }
        for (int i = 0; i < nd->n_in; i++) {
            nb_release(sym[i]);
            nb_release(con[i]);
        }
    }
    return first;
}

static nb_dim_binding bind_b(int64_t b) {
    nb_dim_binding bind = {0};
    assert_int_equal(nb__dim_bind("test", nb_dim("B"), b, false, &bind), NB_OK);
    return bind;
}

/* ---- slicing specs, eagerly ---- */

/* One spec on a 1-D axis of 6 elements 0..5, against Python's x[spec] written out. */
static void one_axis(nb_slice_spec s, const double *want, int64_t n, bool keeps_axis) {
    nb_tensor *x = iota(IDX(6), 1);
    nb_tensor *r = NBT(nb_index(x, &s, 1));
    assert_int_equal(nb_ndim(r), keeps_axis ? 1 : 0);
    assert_values(r, want, n);
}

static void slicing_one_axis(void **state) {
    (void)state;
    one_axis(NB_RG(-4, -1), (double[]){2, 3, 4}, 3, true);               /* x[-4:-1] */
    one_axis(NB_RG(1, 100), (double[]){1, 2, 3, 4, 5}, 5, true);         /* x[1:100] */
    one_axis(NB_RG(-100, 2), (double[]){0, 1}, 2, true);                 /* x[-100:2] */
    one_axis(NB_RG(3, 1), NULL, 0, true);                                /* x[3:1] */
    one_axis(NB_RGS(NB_END, NB_END, -2), (double[]){5, 3, 1}, 3, true);  /* x[::-2] */
    one_axis(NB_RGS(-1, -5, -2), (double[]){5, 3}, 2, true);             /* x[-1:-5:-2] */
    one_axis(NB_RGS(4, 0, -1), (double[]){4, 3, 2, 1}, 4, true);         /* x[4:0:-1] */
    one_axis(NB_RGS(0, NB_END, 4), (double[]){0, 4}, 2, true);           /* x[0::4] */
    one_axis(NB_TAIL(-2), (double[]){4, 5}, 2, true);                    /* x[-2:] */
    one_axis(NB_TAIL(9), NULL, 0, true);                                 /* x[9:] */
    one_axis(NB_IX(-1), (double[]){5}, 1, true);                         /* x[-1:] as an index */
    one_axis(NB_IX(2), (double[]){2}, 1, true);
    one_axis(NB_SEL(-2), (double[]){4}, 1, false);                       /* x[-2] */
    one_axis(NB_ALL, (double[]){0, 1, 2, 3, 4, 5}, 6, true);
    one_axis(NB_RGS(0, 4, INT64_MAX), (double[]){0}, 1, true);           /* x[0:4:huge]: no overflow */
    one_axis(NB_RGS(-1, NB_END, INT64_MIN + 1), (double[]){5}, 1, true); /* x[-1::-huge] */
}

/* x[1:, -2, ::2] and x[:, IX(-1)] on [3, 4, 5], against loops over the flat data. */
static void slicing_multi_axis(void **state) {
    (void)state;
    nb_tensor *x = iota(IDX(3, 4, 5), 3);
    nb_tensor *r = NBT(nb_index(x, NB_S(NB_TAIL(1), NB_SEL(-2), NB_RGS(NB_END, NB_END, 2))));
    assert_shape(r, IDX(2, 3), 2);
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++) assert_true(nbt_at(r, i * 3 + k) == (1 + i) * 20 + 2 * 5 + 2 * k);
    nb_tensor *q = NBT(nb_index(x, NB_S(NB_ALL, NB_IX(-1))));
    assert_shape(q, IDX(3, 1, 5), 3);
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 5; k++) assert_true(nbt_at(q, i * 5 + k) == i * 20 + 3 * 5 + k);
    /* zero-copy: a write through the view shows in x */
    assert_int_equal(nb_set(r, IDX(1, 2), -7), NB_OK);
    double v;
    assert_int_equal(nb_get(x, IDX(2, 2, 4), &v), NB_OK);
    assert_true(v == -7);
    /* all-NB_ALL specs (and none) give x itself */
    assert_ptr_equal(nb_data_ptr(NBT(nb_index(x, NB_S(NB_ALL, NB_ALL)))), nb_data_ptr(x));
    assert_shape(NBT(nb_index(x, NULL, 0)), IDX(3, 4, 5), 3);
}

static void slicing_errors(void **state) {
    (void)state;
    nb_tensor *x = iota(IDX(3, 4), 2);
    assert_fails(nb_index(x, NB_S(NB_ALL, NB_ALL, NB_ALL)), NB_ERR_INDEX);
    assert_fails(nb_index(x, NB_S(NB_IX(3))), NB_ERR_INDEX);
    assert_fails(nb_index(x, NB_S(NB_IX(-4))), NB_ERR_INDEX);
    assert_fails(nb_index(x, NB_S(NB_SEL(4))), NB_ERR_INDEX);
    assert_fails(nb_index(x, NB_S(NB_RGS(0, 2, 0))), NB_ERR_ARG);
    assert_fails(nb_index(x, NB_S(((nb_slice_spec){NB_SLICE_KIND_COUNT, 0, 0, 1}))), NB_ERR_ARG);
    assert_fails(nb_index(x, NULL, 1), NB_ERR_NULL);
    assert_fails(nb_index(NULL, NB_S(NB_ALL)), NB_ERR_NULL);
    assert_fails(nb_index(x, (nb_slice_spec[]){NB_ALL}, -1), NB_ERR_ARG);
}

/* Gradients flow through an indexed view (slice + select adjoints). */
static void slicing_grad(void **state) {
    (void)state;
    nb_tensor *x = iota(IDX(3, 4), 2);
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *y = NBT(nb_sum(NBT(nb_index(x, NB_S(NB_RG(-2, NB_END), NB_SEL(1)))), NULL, 0, false));
    assert_int_equal(nb_backward(y, NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int i = 0; i < 12; i++) assert_true(nbt_at(g, i) == ((i / 4 >= 1 && i % 4 == 1) ? 1.0 : 0.0));
}

/* ---- every converted op: traced shape/dtype == eager, recorded as the view op ---- */

typedef nb_tensor *(*op_fn)(nb_tensor *x);
typedef struct op_case {
    const char *name;
    op_fn fn;
    nb_op op;      /* the op of the graph's output node */
    int64_t shape[3];
    int ndim;
    nb_dtype dt;
} op_case;

static nb_tensor *f_reshape(nb_tensor *x) { return nb_reshape(x, IDX(-1, 6), 2); }
static nb_tensor *f_view(nb_tensor *x) { return nb_view(x, IDX(4, -1), 2); }
static nb_tensor *f_flatten(nb_tensor *x) { return nb_flatten(x, 0, 1); }
static nb_tensor *f_squeeze(nb_tensor *x) { return nb_squeeze(nb_unsqueeze(x, 1), 1); }
static nb_tensor *f_unsqueeze(nb_tensor *x) { return nb_unsqueeze(nb_select(x, 0, 1), -2); }
static nb_tensor *f_permute(nb_tensor *x) { return nb_permute(x, (int[]){2, 0, 1}, 3); }
static nb_tensor *f_transpose(nb_tensor *x) { return nb_transpose(x, 0, -1); }
static nb_tensor *f_expand(nb_tensor *x) { return nb_expand(nb_select(x, 2, 0), IDX(5, -1, -1), 3); }
static nb_tensor *f_broadcast(nb_tensor *x) { return nb_broadcast_to(nb_select(x, 2, 0), IDX(2, 2, 3), 3); }
static nb_tensor *f_slice(nb_tensor *x) { return nb_slice(x, 2, -3, NB_END, 2); }
static nb_tensor *f_narrow(nb_tensor *x) { return nb_narrow(x, 1, 1, 2); }
static nb_tensor *f_select(nb_tensor *x) { return nb_select(x, -1, -1); }
static nb_tensor *f_diagonal(nb_tensor *x) { return nb_diagonal(x, 1, 1, 2); }
static nb_tensor *f_flip(nb_tensor *x) { return nb_flip(x, (int[]){1}, 1); }
static nb_tensor *f_index(nb_tensor *x) { return nb_index(x, NB_S(NB_IX(-1), NB_RGS(NB_END, NB_END, -2))); }
static nb_tensor *f_cat(nb_tensor *x) { return nb_cat((nb_tensor *[]){x, nb_narrow(x, 1, 0, 1)}, 2, 1); }
static nb_tensor *f_pad(nb_tensor *x) { return nb_pad(x, IDX(1, -1, 2, 0), 4, NB_PAD_CONSTANT, 3.0); }
static nb_tensor *f_view_grad(nb_tensor *x) {
    nb_attrs a = {.ni = 4, .i = {1, 1, 1, 2}};
    return nb__own(nb__view_grad(nb_slice(x, 1, 1, 3, 1), NB_OP_SLICE, &a, IDX(2, 3, 4), 3));
}

static const op_case op_cases[] = {
    {"reshape", f_reshape, NB_OP_RESHAPE, {4, 6}, 2, NB_F32},
    {"view", f_view, NB_OP_RESHAPE, {4, 6}, 2, NB_F32},
    {"flatten", f_flatten, NB_OP_RESHAPE, {6, 4}, 2, NB_F32},
    {"squeeze", f_squeeze, NB_OP_RESHAPE, {2, 3, 4}, 3, NB_F32},
    {"unsqueeze", f_unsqueeze, NB_OP_RESHAPE, {3, 1, 4}, 3, NB_F32},
    {"permute", f_permute, NB_OP_PERMUTE, {4, 2, 3}, 3, NB_F32},
    {"transpose", f_transpose, NB_OP_PERMUTE, {4, 3, 2}, 3, NB_F32},
    {"expand", f_expand, NB_OP_EXPAND, {5, 2, 3}, 3, NB_F32},
    {"broadcast_to", f_broadcast, NB_OP_EXPAND, {2, 2, 3}, 3, NB_F32},
    {"slice", f_slice, NB_OP_SLICE, {2, 3, 2}, 3, NB_F32},
    {"narrow", f_narrow, NB_OP_SLICE, {2, 2, 4}, 3, NB_F32},
    {"select", f_select, NB_OP_SELECT, {2, 3}, 2, NB_F32},
    {"diagonal", f_diagonal, NB_OP_DIAGONAL, {2, 3}, 2, NB_F32},
    {"flip", f_flip, NB_OP_SLICE, {2, 3, 4}, 3, NB_F32},
    {"index", f_index, NB_OP_SLICE, {1, 2, 4}, 3, NB_F32},
    {"cat", f_cat, NB_OP_CAT, {2, 4, 4}, 3, NB_F32},
    {"pad", f_pad, NB_OP_PAD, {2, 5, 4}, 3, NB_F32},
    {"view_grad", f_view_grad, NB_OP_VIEW_GRAD, {2, 3, 4}, 3, NB_F32},
};

static void traced_equals_eager(void **state) {
    (void)state;
    nb_tensor *x = iota(IDX(2, 3, 4), 3);
    for (size_t k = 0; k < sizeof op_cases / sizeof op_cases[0]; k++) {
        const op_case *c = &op_cases[k];
        nb_tensor *e = c->fn(x);
        if (!e) fail_msg("%s eager: %s", c->name, nb_last_message());
        assert_shape(e, c->shape, c->ndim);
        assert_int_equal(nb_dtype_of(e), c->dt);
        nb_graph *g = nb_graph_begin(c->name);
        nb_tensor *xs = NBT(nb_graph_input(g, "x", NB_F32, IDX(2, 3, 4), 3));
        nb_tensor *s = c->fn(xs);
        if (!s) fail_msg("%s traced: %s", c->name, nb_last_message());
        assert_true(nb_graph_output(g, "y", s) == NB_OK);
        assert_true(nb__is_symbolic(s));
        assert_int_equal(nb_ndim(s), nb_ndim(e));
        assert_memory_equal(nb_shape(s), nb_shape(e), sizeof(int64_t) * (size_t)nb_ndim(e));
        assert_int_equal(nb_dtype_of(s), nb_dtype_of(e));
        const nb_gnode *out = &g->nodes[g->outputs[0].node];
        if (out->kind != NB_GNODE_OP || out->op != c->op)
            fail_msg("%s: output node is op %d, want %d", c->name, (int)out->op, (int)c->op);
        assert_int_equal(nb_graph_end(g), NB_OK);
        assert_int_equal(check_graph(g, NULL), NB_OK);
        nb_graph_release(g);
    }
}

/* Values of the converted ops eagerly, against loops over the iota input. */
static void eager_values(void **state) {
    (void)state;
    nb_tensor *x = iota(IDX(2, 3, 4), 3);
    nb_tensor *p = NBT(f_pad(x)); /* [2, 5, 4]: axis 2 padded (1, -1), axis 1 (2, 0), value 3 */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++) {
                int sj = j - 2, sk = k - 1;
                double want = (sj >= 0 && sk >= 0 && sk < 3) ? i * 12 + sj * 4 + sk : 3.0;
                assert_true(nbt_at(p, (i * 5 + j) * 4 + k) == want);
            }
    nb_tensor *d = NBT(f_diagonal(x)); /* [2, 3]: x[i, j, j + 1] */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) assert_true(nbt_at(d, i * 3 + j) == i * 12 + j * 4 + j + 1);
    nb_tensor *vg = NBT(f_view_grad(x)); /* zeros with x[:, 1:3] written at [:, 1:3] */
    for (int i = 0; i < 24; i++) assert_true(nbt_at(vg, i) == ((i / 4) % 3 >= 1 ? i : 0));
    /* a reshape that needs a copy (transposed input) is not a view of x */
    nb_tensor *r = NBT(nb_reshape(nb_transpose(x, 0, 2), IDX(24), 1));
    assert_true(nb_data_ptr(r) != nb_data_ptr(x));
    for (int i = 0; i < 24; i++) { /* row-major over the transposed [4, 3, 2] */
        int a = i / 6, b = (i / 2) % 3, c = i % 2;
        assert_true(nbt_at(r, i) == c * 12 + b * 4 + a);
    }
    assert_ptr_equal(nb_data_ptr(NBT(nb_reshape(x, IDX(6, 4), 2))), nb_data_ptr(x)); /* a view */
    assert_fails(nb_view(nb_transpose(x, 0, 2), IDX(24), 1), NB_ERR_SHAPE);
    /* cat of more tensors than one dispatch takes (8): one eager node, values in order */
    nb_tensor *ts[11];
    for (int i = 0; i < 11; i++) ts[i] = NBT(nb_add_sf(nb_narrow(x, 1, 0, 1), 100.0 * i)); /* [2, 1, 4] */
    nb_tensor *c = NBT(nb_cat(ts, 11, 1));
    assert_shape(c, IDX(2, 11, 4), 3);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 11; j++)
            for (int k = 0; k < 4; k++) assert_true(nbt_at(c, (i * 11 + j) * 4 + k) == 100.0 * j + i * 12 + k);
}

/* ---- symbolic dims ---- */

static void symbolic_reshape_flatten(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_graph *g = nb_graph_begin("reshape");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, IDX(B, 784), 2));
    nb_tensor *r = NBT(nb_reshape(x, IDX(-1, 28, 28), 3));
    assert_shape(r, IDX(B, 28, 28), 3);
    const nb_gnode *nd = &g->nodes[r->gnode]; /* recorded attrs: -1 resolved */
    assert_int_equal(nd->attrs.shape_ndim, 3);
    assert_true(nd->attrs.shape[0] == B);
    assert_shape(NBT(nb_reshape(x, IDX(B, 1, 28, 28), 4)), IDX(B, 1, 28, 28), 4);
    assert_shape(NBT(nb_reshape(r, IDX(B, -1), 2)), IDX(B, 784), 2);
    assert_shape(NBT(nb_view(r, IDX(-1, 784), 2)), IDX(B, 784), 2);
    nb_tensor *f = NBT(nb_flatten(r, 1, 2));
    assert_shape(f, IDX(B, 784), 2);
    nb_tensor *all = NBT(nb_flatten(r, 0, -1));
    assert_dim_name(nb_shape(all)[0], "784*B");
    assert_shape(NBT(nb_reshape(all, IDX(-1, 784), 2)), IDX(B, 784), 2);
    assert_shape(NBT(nb_squeeze(nb_unsqueeze(x, 1), 1)), IDX(B, 784), 2);
    assert_shape(NBT(nb_squeeze_all(nb_unsqueeze(x, 0))), IDX(B, 784), 2);
    assert_shape(NBT(nb_transpose(x, 0, 1)), IDX(784, B), 2);
    assert_shape(NBT(nb_permute(r, (int[]){1, 2, 0}, 3)), IDX(28, 28, B), 3);
    assert_fails(nb_reshape(x, IDX(-1, 27), 2), NB_ERR_SHAPE);   /* 784*B / 27 is not exact */
    assert_fails(nb_reshape(x, IDX(B, 783), 2), NB_ERR_SHAPE);
    assert_fails(nb_squeeze(x, 0), NB_ERR_SHAPE);                /* B is not known to be 1 */
    assert_fails(nb_as_strided(x, IDX(2), IDX(1), 1, 0), NB_ERR_UNSUPPORTED);
    assert_true(nb_graph_output(g, "r", r) == NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_dim_binding bind = bind_b(5);
    assert_int_equal(check_graph(g, &bind), NB_OK);
    nb_graph_release(g);
}

static void symbolic_expand_cat_pad(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_graph *g = nb_graph_begin("cat");
    nb_tensor *a = NBT(nb_graph_input(g, "a", NB_F32, IDX(B, 2), 2));
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, IDX(B, 3), 2));
    assert_shape(NBT(nb_cat((nb_tensor *[]){a, b}, 2, 1)), IDX(B, 5), 2);
    nb_tensor *d = NBT(nb_graph_input(g, "d", NB_F64, IDX(B, 1), 2)); /* dtypes promote */
    assert_int_equal(nb_dtype_of(NBT(nb_cat((nb_tensor *[]){a, d}, 2, 1))), NB_F64);
    nb_tensor *c0 = NBT(nb_cat((nb_tensor *[]){a, a}, 2, 0));
    assert_int_equal(nb_shape(c0)[1], 2);
    assert_dim_name(nb_shape(c0)[0], "2*B");
    assert_dim_name(nb_shape(NBT(nb_cat((nb_tensor *[]){c0, a, NBT(nb_zeros(IDX(3, 2), 2, NB_F32))}, 3, 0)))[0],
                    "3*B+3");
    nb_tensor *many[10]; /* more than one dispatch takes: a cat of cats, same result */
    for (int i = 0; i < 10; i++) many[i] = a;
    assert_dim_name(nb_shape(NBT(nb_cat(many, 10, 0)))[0], "10*B");
    assert_shape(NBT(nb_cat(many, 10, 1)), IDX(B, 20), 2);
    assert_fails(nb_cat((nb_tensor *[]){a, NBT(nb_graph_input(g, "c", NB_F32, IDX(nb_dim("C"), 3), 2))}, 2, 1),
                 NB_ERR_SHAPE);
    /* expand / broadcast_to to symbolic targets */
    nb_tensor *row = NBT(nb_zeros(IDX(1, 2), 2, NB_F32));
    assert_shape(NBT(nb_expand(row, IDX(B, -1), 2)), IDX(B, 2), 2);
    assert_shape(NBT(nb_broadcast_to(a, IDX(4, B, 2), 3)), IDX(4, B, 2), 3);
    assert_fails(nb_expand(a, IDX(5, 2), 2), NB_ERR_SHAPE); /* B is not known to be 5 or 1 */
    /* pad of a symbolic axis: B + 1 + 2, and a crop: B - 1 */
    nb_tensor *p = NBT(nb_pad(a, IDX(0, 0, 1, 2), 4, NB_PAD_CONSTANT, 0));
    assert_dim_name(nb_shape(p)[0], "B+3");
    assert_int_equal(nb_shape(p)[1], 2);
    assert_dim_name(nb_shape(NBT(nb_pad(a, IDX(1, 1, -1, 0), 4, NB_PAD_CONSTANT, 0)))[0], "B-1");
    const nb_gnode *nd = &g->nodes[p->gnode]; /* the value is part of the node */
    assert_int_equal(nd->op, NB_OP_PAD);
    assert_int_equal(nd->attrs.ni, 4);
    assert_true(nb_graph_output(g, "p", p) == NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_dim_binding bind = bind_b(4);
    assert_int_equal(check_graph(g, &bind), NB_OK);
    nb_graph_release(g);
}

static void symbolic_slices(void **state) {
    (void)state;
    int64_t B = nb_dim("B");
    nb_graph *g = nb_graph_begin("slices");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, IDX(B, 128), 2));
    nb_tensor *w = NBT(nb_index(x, NB_S(NB_ALL, NB_RG(0, 64)))); /* the seed's window slice */
    assert_shape(w, IDX(B, 64), 2);
    assert_int_equal(g->nodes[w->gnode].op, NB_OP_SLICE); /* a view node, no copy */
    nb_tensor *last3 = NBT(nb_slice(x, 0, -3, NB_END, 1)); /* x[-3:] */
    assert_shape(last3, IDX(3, 128), 2);
    const nb_gnode *nd = &g->nodes[last3->gnode]; /* normalized: {axis, start B-3, step, len} */
    assert_int_equal(nd->attrs.ni, 4);
    assert_int_equal(nd->attrs.i[0], 0);
    assert_dim_name(nd->attrs.i[1], "B-3");
    assert_int_equal(nd->attrs.i[2], 1);
    assert_int_equal(nd->attrs.i[3], 3);
    assert_dim_name(nb_shape(NBT(nb_slice(x, 0, 1, -1, 1)))[0], "B-2");        /* x[1:-1] */
    assert_dim_name(nb_shape(NBT(nb_slice(x, 0, -5, -1, 1)))[0], "4");         /* x[-5:-1] */
    assert_dim_name(nb_shape(NBT(nb_slice(x, 0, 2, NB_END, 1)))[0], "B-2");    /* x[2:] */
    assert_dim_name(nb_shape(NBT(nb_slice(x, 0, NB_END, NB_END, -1)))[0], "B"); /* x[::-1] */
    assert_dim_name(nb_shape(NBT(nb_slice(x, 0, -2, NB_END, -1)))[0], "B-1");  /* x[-2::-1] */
    assert_dim_name(nb_shape(NBT(nb_index(x, NB_S(NB_TAIL(-4)))))[0], "4");
    assert_dim_name(nb_shape(NBT(nb_index(x, NB_S(NB_IX(-1)))))[0], "1");
    assert_dim_name(nb_shape(NBT(nb_flip(x, (int[]){0}, 1)))[0], "B");
    nb_tensor *c = NBT(nb_cat((nb_tensor *[]){x, x}, 2, 0)); /* [2*B, 128]: step 2 divides exactly */
    assert_dim_name(nb_shape(NBT(nb_slice(c, 0, NB_END, NB_END, 2)))[0], "B");
    assert_dim_name(nb_shape(NBT(nb_narrow(x, 0, 1, 3)))[0], "3");
    assert_dim_name(nb_shape(NBT(nb_narrow(c, 0, B, B)))[0], "B"); /* symbolic start and length */
    nb_tensor *s = NBT(nb_select(x, 0, -1)); /* x[-1]: index B-1 */
    assert_shape(s, IDX(128), 1);
    assert_dim_name(g->nodes[s->gnode].attrs.i[1], "B-1");
    /* lengths that depend on the unknown size: NB_ERR_SHAPE naming it */
    assert_fails(nb_slice(x, 0, -3, 2, 1), NB_ERR_SHAPE);     /* x[-3:2] */
    assert_fails(nb_slice(x, 0, 1, -1, -1), NB_ERR_SHAPE);    /* x[1:-1:-1] */
    assert_fails(nb_slice(x, 0, 0, NB_END, 2), NB_ERR_SHAPE); /* B/2 */
    assert_fails(nb_slice(c, 0, 1, NB_END, 2), NB_ERR_SHAPE); /* (2*B-1)/2 */
    assert_true(nb_graph_output(g, "w", w) == NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_dim_binding bind = bind_b(10);
    assert_int_equal(check_graph(g, &bind), NB_OK);
    /* B = 2: x[-3:] (and x[-5:-1], x[-4:]) no longer fit the axis; the run-time infer says so */
    bind = bind_b(2);
    assert_int_equal(check_graph(g, &bind), NB_ERR_INDEX);
    nb_clear_error();
    nb_graph_release(g);
    /* a run-time out-of-range select counted from the end names the index given, not B + index */
    g = nb_graph_begin("select_end");
    x = NBT(nb_graph_input(g, "x", NB_F32, IDX(B, 4), 2));
    assert_true(nb_graph_output(g, "s", nb_select(x, 0, -3)) == NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *cp = nb_graph_compile(g, NB_CPU);
    nb_tensor *xv = NBT(nb_zeros(IDX(2, 4), 2, NB_F32)), *o = NULL;
    assert_int_equal(nb_compiled_run(cp, 1, (const char *[]){"x"}, &xv, 1, &o), NB_ERR_INDEX);
    assert_non_null(strstr(nb_last_message(), "select: index -3 out of range for axis 0 of size 2"));
    nb_clear_error();
    nb_compiled_release(cp);
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(slicing_one_axis, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(slicing_multi_axis, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(slicing_errors, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(slicing_grad, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(traced_equals_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(eager_values, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_reshape_flatten, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_expand_cat_pad, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(symbolic_slices, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
