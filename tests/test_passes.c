/*
 * test_passes.c — the graph optimization passes (src/compile/passes.h):
 * dead-code elimination, common-subexpression elimination, constant folding,
 * exact algebraic simplifications and the pipeline.  After every pass on
 * every graph: the result verifies, keeps the output names / order /
 * metadata and every input and param, and its origin map is sane; compiled
 * and run with the same arguments (symbolic batch dims at two sizes, special
 * values -0 / NaN / inf, non-contiguous arguments) it gives the original
 * graph's outputs bit for bit.  The rules fire where expected (counted) and
 * not where they must not (x + 0 at -0, promotions, f16, layout-sensitive
 * readers, inputs / params / random draws in CSE, large folds, and any rule
 * that would make an output share a constant's or another output's storage); a
 * fold that fails at compile time leaves the error to the run and no
 * pending error; every allocation of nb__graph_optimize fails in turn with
 * NB_ERR_OOM and no leak; a 10^4-node chain optimizes quickly; and an MLP
 * training step (linear, relu, cross_entropy, nb_graph_grad, Adam) shrinks
 * and still gives the same bits.
 *
 * The out-of-memory test runs first: nb_set_allocator needs a process with no
 * live block, and the symbolic dims the other tests intern live forever.
 */
#include "support.h"
#include "compile/rewrite.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef nb_status (*pass_fn)(const nb_graph *, nb_graph **, int32_t **, nb_pass_stats *);

static const struct {
    const char *name;
    pass_fn fn;
} PASSES[] = {{"dce", nb__pass_dce},
              {"cse", nb__pass_cse},
              {"fold", nb__pass_fold},
              {"simplify", nb__pass_simplify},
              {"optimize", nb__graph_optimize}};
enum { NPASSES = sizeof PASSES / sizeof PASSES[0], MAXOUT = 64 };

/* ---- structure of a pass's result ---- */

static bool same_meta(const nb_meta *a, const nb_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* r (from a pass over g, with origin map o) verifies and keeps what a pass must keep. */
static void check_result(const nb_graph *g, const nb_graph *r, const int32_t *o) {
    if (nb__graph_verify(r) != NB_OK) fail_msg("result does not verify: %s", nb_last_message());
    assert_false(r->building);
    assert_int_equal(r->hash, 0);
    assert_int_equal(atomic_load(&r->refs), 1);
    assert_string_equal(r->name, g->name);
    assert_int_equal(r->device.type, g->device.type);
    assert_int_equal(r->device.index, g->device.index);
    assert_int_equal(r->n_outputs, g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) {
        assert_string_equal(r->output_names[i], g->output_names[i]);
        assert_true(same_meta(nb__gval_meta(r, r->outputs[i]), nb__gval_meta(g, g->outputs[i])));
    }
    int named = 0;
    for (int i = 0; i < g->n; i++) {
        const nb_gnode *a = &g->nodes[i];
        if (a->kind != NB_GNODE_INPUT && a->kind != NB_GNODE_PARAM) continue;
        named++;
        int found = 0;
        for (int j = 0; j < r->n; j++) {
            const nb_gnode *b = &r->nodes[j];
            if ((b->kind != NB_GNODE_INPUT && b->kind != NB_GNODE_PARAM) || strcmp(a->name, b->name)) continue;
            found++;
            assert_int_equal(b->kind, a->kind);
            assert_ptr_equal(b->value, a->value);
            assert_true(same_meta(&b->out[0], &a->out[0]));
            assert_int_equal(o[j], i);
        }
        assert_int_equal(found, 1);
    }
    int rnamed = 0;
    for (int j = 0; j < r->n; j++) {
        const nb_gnode *b = &r->nodes[j];
        rnamed += b->kind == NB_GNODE_INPUT || b->kind == NB_GNODE_PARAM;
        if (o[j] < 0) { /* created by a pass: a folded constant */
            assert_int_equal(b->kind, NB_GNODE_CONST);
            continue;
        }
        assert_true(o[j] < g->n);
        const nb_gnode *a = &g->nodes[o[j]];
        assert_int_equal(b->kind, a->kind);
        /* a node stands for one of its own op, or (the rules that change the op) an add folded into
         * addmm, a relu folded into addmm or convolution (or into the reshape of one) */
        bool changed = (a->op == NB_OP_ADD && b->op == NB_OP_ADDMM) ||
                       (a->op == NB_OP_RELU &&
                        (b->op == NB_OP_ADDMM || b->op == NB_OP_CONVOLUTION || b->op == NB_OP_RESHAPE));
        if (a->kind == NB_GNODE_OP && !changed) assert_int_equal(b->op, a->op);
    }
    assert_int_equal(rnamed, named);
}

/* One pass over g, checked; the result (the caller releases it). */
static nb_graph *apply_pass(pass_fn fn, const nb_graph *g, nb_pass_stats *st) {
    nb_graph *r = NULL;
    int32_t *o = NULL;
    nb_status s = fn(g, &r, &o, st);
    if (s != NB_OK) fail_msg("pass failed: %s: %s", nb_status_name(s), nb_last_message());
    assert_int_equal(nb_last_status(), NB_OK);
    check_result(g, r, o);
    nb__free(o);
    return r;
}

/* ---- running ---- */

static void run_graph(nb_graph *g, int n, const char *const *names, nb_tensor *const *args, nb_tensor **res) {
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    if (!c) fail_msg("compile: %s", nb_last_message());
    nb_status st = nb_compiled_run(c, n, names, args, nb_graph_output_count(g), res);
    if (st != NB_OK) fail_msg("run: %s: %s", nb_status_name(st), nb_last_message());
    nb_compiled_release(c);
}


/* Run g and r (one of its results) with the same arguments (the generator reseeded before each run,
 * for graphs that draw): every output bitwise equal. */
static void same_run(nb_graph *g, nb_graph *r, int n, const char *const *names, nb_tensor *const *args) {
    nb_tensor *a[MAXOUT], *b[MAXOUT];
    assert_true(g->n_outputs <= MAXOUT);
    nb_manual_seed(7);
    run_graph(g, n, names, args, a);
    nb_manual_seed(7);
    run_graph(r, n, names, args, b);
    for (int i = 0; i < g->n_outputs; i++) nbt_assert_same_bits(b[i], a[i], g->output_names[i]);
}

/* Every pass and the pipeline on g, each result checked and run against g with every argument set
 * (nsets sets of n arguments, row after row in args).  Returns the pipeline's stats. */
static nb_pass_stats check_all(nb_graph *g, int nsets, int n, const char *const *names, nb_tensor *const *args) {
    assert_int_equal(nb__graph_verify(g), NB_OK);
    nb_pass_stats last = {0};
    for (int p = 0; p < NPASSES; p++) {
        nb_pass_stats st;
        nb_graph *r = apply_pass(PASSES[p].fn, g, &st);
        assert_int_equal(st.nodes_before, nb__op_node_count(g));
        assert_int_equal(st.nodes_after, nb__op_node_count(r));
        for (int s = 0; s < nsets; s++) same_run(g, r, n, names, args + s * n);
        nb_graph_release(r);
        last = st;
    }
    return last;
}

/* Number of OP nodes of op in g. */
static int count_op(const nb_graph *g, nb_op op) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].kind == NB_GNODE_OP && g->nodes[i].op == op;
    return n;
}

static int count_kind(const nb_graph *g, nb_gnode_kind k) {
    int n = 0;
    for (int i = 0; i < g->n; i++) n += g->nodes[i].kind == k;
    return n;
}

/* [rows, cols] f32 of repeating special values: ±0, ±inf, NaN, a subnormal, ordinary numbers. */
static nb_tensor *special(int64_t rows, int64_t cols, int salt) {
    static const float V[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1e-40f, -2.5f, 3.0f, 0.75f, -1.0f, 1.0f};
    int64_t n = rows * cols;
    float *d = malloc(sizeof *d * (size_t)n);
    for (int64_t i = 0; i < n; i++) d[i] = V[(i * 7 + salt) % (int64_t)(sizeof V / sizeof V[0])];
    nb_tensor *t = NBT(nb_from_data(d, NB_SHAPE(rows, cols), NB_F32));
    free(d);
    return t;
}

/* A node the front-ends never make (they return t itself): the internal dispatch point. */
static nb_tensor *cast_same(nb_tensor *t) {
    nb_attrs a = {.sub = (int)nb_dtype_of(t)};
    return NBT(nb__own(nb__apply(NB_OP_CAST, &t, 1, &a)));
}

/* ---- out of memory (first: see the header) ---- */

typedef struct fault {
    long calls, fail_at, refused, live;
    bool sticky;
} fault;
static fault F;

static void *fault_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud;
    (void)osize;
    if (nsize == 0) {
        F.live--;
        free(ptr);
        return NULL;
    }
    F.calls++;
    if (F.fail_at > 0 && (F.calls == F.fail_at || (F.sticky && F.calls > F.fail_at))) {
        F.refused++;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p && !ptr) F.live++;
    return p;
}

/* Concrete shapes only (a symbolic dim would stay interned, and allocated, for good): every pass
 * has work — constants to fold, duplicates, identities, dead code, an unused input. */
static nb_graph *oom_graph(void) {
    float cv[4] = {1, 2, 3, 4};
    nb_tensor *cdata = NBT(nb_from_data(cv, NB_SHAPE(4), NB_F32));
    nb_graph *g = nb_graph_begin("oom");
    assert_non_null(g);
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(3, 4)));
    NBT(nb_graph_input(g, "unused", NB_F32, NB_SHAPE(2)));
    nb_tensor *c = NBT(nb_graph_constant(g, cdata));
    nb_tensor *f = NBT(nb_add(nb_exp(c), 1.5));                 /* folded */
    nb_tensor *a = NBT(nb_mul(nb_tanh(x), f)), *b = NBT(nb_mul(nb_tanh(x), f)); /* merged */
    nb_tensor *s = NBT(nb_mul(nb_add(a, b), 1.0));              /* simplified */
    NBT(nb_sin(x));                                              /* dead */
    nb_tensor *p = NBT(nb_permute(nb_permute(s, NB_AXES(1, 0)), NB_AXES(1, 0)));
    assert_int_equal(nb_graph_output(g, "y", nb_exp(p)), NB_OK);
    assert_int_equal(nb_graph_output(g, "z", nb_sum(s, NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_release(cdata);
    return g;
}

static void oom_every_allocation_of_optimize(void **state) {
    (void)state;
    memset(&F, 0, sizeof F);
    if (nb_set_allocator(fault_alloc, NULL) != NB_OK)
        fail_msg("nb_set_allocator: %s (this test must run first, before any block stays live)", nb_last_message());
    nb_graph *g = oom_graph();
    long base = F.live;
    F.calls = 0;
    nb_graph *r;
    int32_t *o;
    nb_pass_stats st;
    assert_int_equal(nb__graph_optimize(g, &r, &o, &st), NB_OK);
    long total = F.calls;
    assert_true(st.folded == 2 && st.cse == 2 && st.simplified == 2 && st.dead >= 1);
    nb_graph_release(r);
    nb__free(o);
    assert_int_equal(F.live, base);
    for (int sticky = 0; sticky < 2; sticky++) {
        long failed = 0;
        for (long k = 1; k <= total; k++) {
            nb_clear_error();
            F.calls = F.refused = 0;
            F.fail_at = k;
            F.sticky = sticky;
            r = (nb_graph *)1;
            o = (int32_t *)1;
            nb_status s = nb__graph_optimize(g, &r, &o, &st);
            F.fail_at = 0;
            assert_true(F.refused > 0);
            if (s != NB_ERR_OOM || nb_last_status() != NB_ERR_OOM || !strstr(nb_last_message(), "out of memory"))
                fail_msg("k = %ld%s: %s, pending %s: %s", k, sticky ? " (sticky)" : "", nb_status_name(s),
                         nb_status_name(nb_last_status()), nb_last_message());
            assert_null(r);
            assert_null(o);
            if (F.live != base) fail_msg("k = %ld%s: %ld blocks leaked", k, sticky ? " (sticky)" : "", F.live - base);
            failed++;
        }
        print_message("optimize%s: %ld allocations, each refused in turn: %ld runs failed with NB_ERR_OOM\n",
                      sticky ? " (sticky)" : "", total, failed);
    }
    nb_clear_error();
    assert_int_equal(nb__graph_optimize(g, &r, &o, NULL), NB_OK); /* a clean run afterwards */
    nb_graph_release(r);
    nb__free(o);
    for (int p = 0; p < NPASSES; p++) nb_graph_release(apply_pass(PASSES[p].fn, g, NULL));
    nb_graph_release(g);
    assert_int_equal(F.live, 0);
    assert_int_equal(nb_set_allocator(NULL, NULL), NB_OK);
}

/* ---- the simplification rules ---- */

static nb_graph *rules_graph(void) {
    nb_graph *g = nb_graph_begin("rules");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *y = NBT(nb_graph_input(g, "y", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *e = NBT(nb_neg(x)); /* a fresh row-major value: every rule may fire on it */
    nb_tensor *one = NBT(nb_graph_scalar(g, 1.0, NB_F32)), *nz = NBT(nb_graph_scalar(g, -0.0, NB_F32));
    nb_tensor *t[13];
    t[0] = NBT(nb_mul(e, 1.0));
    t[1] = NBT(nb_mul(one, e));
    t[2] = NBT(nb_div(e, 1.0));
    t[3] = NBT(nb_sub(e, 0.0));
    t[4] = NBT(nb_add(e, -0.0));
    t[5] = NBT(nb_add(nz, e));
    t[6] = NBT(nb_pow(e, 1.0));
    t[7] = NBT(nb_neg(nb_neg(e)));
    t[8] = cast_same(e);
    t[9] = NBT(nb_where(nb_gt(x, y), e, e));
    t[10] = NBT(nb_detach(e));
    t[11] = NBT(nb_reshape(e, NB_SHAPE(B, 4)));
    t[12] = NBT(nb_expand(e, NB_SHAPE(B, 4)));
    nb_tensor *sum = t[0];
    for (int i = 1; i < 13; i++) sum = NBT(nb_add(sum, t[i]));
    assert_int_equal(nb_graph_output(g, "sum", sum), NB_OK);
    assert_int_equal(nb_graph_output(g, "x1", t[0]), NB_OK); /* an output standing for e */
    /* reshape of a reshape: one reshape */
    assert_int_equal(nb_graph_output(g, "r", nb_reshape(nb_reshape(e, NB_SHAPE(-1)), NB_SHAPE(B, 2, 2))), NB_OK);
    /* permutes: an identity pair, and a pair composed into one */
    nb_tensor *e3 = NBT(nb_reshape(nb_exp(x), NB_SHAPE(B, 2, 2)));
    nb_tensor *p1 = NBT(nb_permute(nb_permute(e3, NB_AXES(1, 0, 2)), NB_AXES(1, 0, 2)));
    nb_tensor *p2 = NBT(nb_permute(nb_permute(e3, NB_AXES(2, 0, 1)), NB_AXES(0, 2, 1)));
    assert_int_equal(nb_graph_output(g, "p1", nb_exp(p1)), NB_OK);
    assert_int_equal(nb_graph_output(g, "p2", nb_exp(p2)), NB_OK);
    assert_int_equal(nb_graph_output(g, "clone", nb_clone(x)), NB_OK); /* a copy, never an alias of x */
    assert_int_equal(nb_graph_output(g, "clone_e", nb_clone(nb_mul(e, 1.0))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    return g;
}

static void simplification_rules_fire_and_keep_the_bits(void **state) {
    (void)state;
    nb_graph *g = rules_graph();
    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_simplify, g, &st);
    /* 13 rules on e, reshape∘reshape, the identity permute pair, the composed pair, clone_e's e * 1;
     * not x1 = e * 1: the output r is a view of e, and x1 must not share its storage */
    assert_int_equal(st.simplified, 16);
    nb_graph_release(r);
    r = apply_pass(nb__graph_optimize, g, &st);
    const nb_op gone[] = {NB_OP_DIV, NB_OP_SUB, NB_OP_POW, NB_OP_CAST, NB_OP_WHERE, NB_OP_DETACH, NB_OP_EXPAND,
                          NB_OP_GT};
    for (size_t i = 0; i < sizeof gone / sizeof gone[0]; i++) assert_int_equal(count_op(r, gone[i]), 0);
    assert_int_equal(count_op(r, NB_OP_MUL), 1); /* x1 */
    assert_int_equal(count_op(r, NB_OP_NEG), 1);
    assert_int_equal(count_op(r, NB_OP_RESHAPE), 2);  /* e3, and the one of "r" */
    assert_int_equal(count_op(r, NB_OP_PERMUTE), 1);  /* the composed pair */
    assert_int_equal(count_op(r, NB_OP_CONTIGUOUS), 2);
    assert_int_equal(count_kind(r, NB_GNODE_CONST), 1); /* x1's 1 */
    nb_tensor *xin = NBT(nb_randn(NB_SHAPE(2, 4), NB_F32)), *outs[MAXOUT];
    run_graph(r, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){xin, xin}, outs);
    assert_false(nb_shares_storage(outs[1], outs[2])); /* x1, r */
    assert_false(nb_shares_storage(outs[5], xin));      /* clone */
    nb_graph_release(r);
    /* the same bits as the original at two batch sizes, on special values */
    const char *names[2] = {"x", "y"};
    nb_tensor *args[4] = {special(3, 4, 0), NBT(nb_randn(NB_SHAPE(3, 4), NB_F32)), special(7, 4, 3),
                          NBT(nb_randn(NB_SHAPE(7, 4), NB_F32))};
    nb_pass_stats all = check_all(g, 2, 2, names, args);
    print_message("rules graph: %d -> %d op nodes (%d simplified, %d dead)\n", all.nodes_before, all.nodes_after,
                  all.simplified, all.dead);
    nb_graph_release(g);
}

/* x + 0 and x - (-0) at x = -0, promotions, f16 and layout-sensitive readers: kept. */
static void rules_do_not_fire_where_inexact(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("kept");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *i = NBT(nb_graph_input(g, "i", NB_I32, NB_SHAPE(B, 4)));
    nb_tensor *h = NBT(nb_graph_input(g, "h", NB_F16, NB_SHAPE(B, 4)));
    nb_tensor *e = NBT(nb_neg(x));
    float ones[4] = {1, 1, 1, 1};
    nb_tensor *ones_t = NBT(nb_from_data(ones, NB_SHAPE(1, 4), NB_F32));
    assert_int_equal(nb_graph_output(g, "plus0", nb_add(e, 0.0)), NB_OK);          /* -0 + 0 = +0 */
    assert_int_equal(nb_graph_output(g, "minus_neg0", nb_sub(e, -0.0)), NB_OK);    /* -0 - -0 = +0 */
    assert_int_equal(nb_graph_output(g, "plus_int0", nb_add(e, (int64_t)0)), NB_OK); /* an integer 0 is +0 */
    assert_int_equal(nb_graph_output(g, "int_times_1.0", nb_mul(i, 1.0)), NB_OK);  /* i32 -> f32 */
    assert_int_equal(nb_graph_output(g, "f16_times_1", nb_mul(nb_neg(h), 1.0)), NB_OK);
    assert_int_equal(nb_graph_output(g, "times_2", nb_mul(e, 2.0)), NB_OK);
    assert_int_equal(nb_graph_output(g, "times_ones", nb_mul(e, nb_graph_constant(g, ones_t))), NB_OK);
    /* a view of an argument times 1, read by a sum: the product is row-major, the view is not, and the
     * layout decides the sum's order (pairwise over contiguous runs, else sequential): in f64 the bits differ */
    nb_tensor *w = NBT(nb_graph_input(g, "w", NB_F64, NB_SHAPE(B, 64)));
    assert_int_equal(nb_graph_output(g, "sum_t", nb_sum(nb_mul(nb_transpose(w, 0, 1), 1.0), NB_AXES(1), false)),
                     NB_OK);
    /* reshape(reshape(wT, [-1]), wT's shape): the inner reshape copies (wT is no row-major view), so
     * the sum reads a row-major tensor, where wT itself is strided */
    nb_tensor *wt = NBT(nb_transpose(w, 0, 1));
    nb_tensor *rr = NBT(nb_reshape(nb_reshape(wt, NB_SHAPE(-1)), NB_SHAPE(64, B)));
    assert_int_equal(nb_graph_output(g, "sum_rr", nb_sum(rr, NB_AXES(1), false)), NB_OK);
    nb_tensor *xt = NBT(nb_transpose(x, 0, 1));
    /* these fire: an integer zero, and x * 1 read only by an elementwise op; not the integer one
     * next: both outputs would then be one tensor, ni */
    nb_tensor *ni = NBT(nb_neg(i));
    assert_int_equal(nb_graph_output(g, "int_plus_0", nb_add(ni, (int64_t)0)), NB_OK);
    assert_int_equal(nb_graph_output(g, "int_times_1", nb_mul(ni, (int64_t)1)), NB_OK);
    assert_int_equal(nb_graph_output(g, "exp_x_times_1", nb_exp(nb_mul(xt, 1.0))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);

    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_simplify, g, &st);
    assert_int_equal(st.simplified, 2);
    nb_graph_release(r);

    /* x = +0 makes e = -0; x given transposed (a strided argument) */
    const char *names[4] = {"x", "i", "h", "w"};
    nb_tensor *args[8];
    for (int s = 0; s < 2; s++) {
        int64_t b = s ? 100 : 2;
        nb_tensor *xs = special(4, b, s); /* [4, b], given transposed: [b, 4] with strides (1, b) */
        args[4 * s] = NBT(nb_transpose(xs, 0, 1));
        assert_false(nb_is_contiguous(args[4 * s]));
        args[4 * s + 1] = NBT(nb_cast(nb_mul(nb_randn(NB_SHAPE(b, 4), NB_F32), 100.0), NB_I32));
        args[4 * s + 2] = NBT(nb_cast(special(b, 4, s + 1), NB_F16));
        args[4 * s + 3] = NBT(nb_randn(NB_SHAPE(b, 64), NB_F64));
    }
    check_all(g, 2, 4, names, args);
    nb_graph_release(g);
}

/* matmul + addend (either order) into addmm where the add is the product's only reader and the sum
 * keeps the product's dtype and shape; kept when the product has another reader, when it would be
 * broadcast up to the addend, or promoted. */
static void matmul_plus_addend_becomes_addmm(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("addmm");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 5)));
    nb_tensor *w[5];
    for (int i = 0; i < 5; i++) {
        char name[8];
        snprintf(name, sizeof name, "w%d", i);
        w[i] = NBT(nb_graph_input(g, name, NB_F32, NB_SHAPE(5, 3)));
    }
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, NB_SHAPE(3)));
    nb_tensor *c = NBT(nb_graph_input(g, "c", NB_F32, NB_SHAPE(2, B, 3)));
    nb_tensor *b64 = NBT(nb_graph_input(g, "b64", NB_F64, NB_SHAPE(3)));
    assert_int_equal(nb_graph_output(g, "bias_after", nb_add(nb_matmul(x, w[0]), b)), NB_OK);
    assert_int_equal(nb_graph_output(g, "bias_before", nb_add(b, nb_matmul(x, w[1]))), NB_OK);
    nb_tensor *p = NBT(nb_matmul(x, w[2]));
    assert_int_equal(nb_graph_output(g, "shared_sum", nb_add(p, b)), NB_OK); /* p is read twice */
    assert_int_equal(nb_graph_output(g, "shared_twice", nb_mul(p, 2.0)), NB_OK);
    assert_int_equal(nb_graph_output(g, "broadcast_up", nb_add(nb_matmul(x, w[3]), c)), NB_OK);
    assert_int_equal(nb_graph_output(g, "promoted", nb_add(nb_matmul(x, w[4]), b64)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_simplify, g, &st);
    assert_int_equal(st.simplified, 2);
    nb_graph_release(r);
    r = apply_pass(nb__graph_optimize, g, &st);
    assert_int_equal(count_op(r, NB_OP_ADDMM), 2);
    assert_int_equal(count_op(r, NB_OP_MATMUL), 3); /* the dead products are gone */
    nb_graph_release(r);
    const char *names[9] = {"x", "w0", "w1", "w2", "w3", "w4", "b", "c", "b64"};
    nb_tensor *args[18];
    for (int s = 0; s < 2; s++) {
        int64_t rows = s ? 37 : 2;
        args[9 * s] = s ? NBT(nb_randn(NB_SHAPE(rows, 5), NB_F32)) : special(rows, 5, 1);
        for (int i = 0; i < 5; i++) args[9 * s + 1 + i] = NBT(nb_randn(NB_SHAPE(5, 3), NB_F32));
        args[9 * s + 6] = special(1, 3, s + 2);
        args[9 * s + 6] = NBT(nb_reshape(args[9 * s + 6], NB_SHAPE(3)));
        args[9 * s + 7] = NBT(nb_randn(NB_SHAPE(2, rows, 3), NB_F32));
        args[9 * s + 8] = NBT(nb_randn(NB_SHAPE(3), NB_F64));
    }
    check_all(g, 2, 9, names, args);
    nb_graph_release(g);
}

/* relu of an addmm (made from matmul + bias in the same pass, or written as one), of conv2d's
 * composite (a reshaped addmm), of the CONVOLUTION op conv2d traces as and of conv1d's (a reshaped
 * CONVOLUTION), into the op's epilogue where the relu is the only reader; kept when the product is
 * read twice. */
static void relu_folds_into_addmm(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("relu_addmm");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 5)));
    nb_tensor *w = NBT(nb_graph_input(g, "w", NB_F32, NB_SHAPE(5, 3)));
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, NB_SHAPE(3)));
    nb_tensor *xc = NBT(nb_graph_input(g, "xc", NB_F32, NB_SHAPE(B, 2, 5, 5)));
    nb_tensor *wc = NBT(nb_graph_input(g, "wc", NB_F32, NB_SHAPE(3, 2, 3, 3)));
    nb_conv2d_opts o = {{1, 1}, {1, 1}, {1, 1}, 1};
    assert_int_equal(nb_graph_output(g, "addmm", nb_relu(nb_addmm(b, x, w))), NB_OK);
    assert_int_equal(nb_graph_output(g, "bias_add", nb_relu(nb_add(nb_matmul(x, w), b))), NB_OK);
    assert_int_equal(nb_graph_output(g, "conv", nb_relu(nb_conv2d(xc, wc, b, o))), NB_OK);
    nb_tensor *cols = NBT(nb_unfold(xc, (nb_window2d){{3, 3}, {1, 1}, {1, 1}, {1, 1}}));
    nb_tensor *y = NBT(nb_addmm(nb_reshape(b, NB_SHAPE(3, 1)), nb_reshape(wc, NB_SHAPE(3, 18)), cols));
    assert_int_equal(nb_graph_output(g, "composite", nb_relu(nb_reshape(y, NB_SHAPE(B, 3, 5, 5)))), NB_OK);
    nb_tensor *x1 = NBT(nb_reshape(xc, NB_SHAPE(B, 2, 25))), *w1 = NBT(nb_select(wc, 2, 1));
    assert_int_equal(nb_graph_output(g, "conv1d", nb_relu(nb_conv1d(x1, w1, b, 1, 1, 1, 1))), NB_OK);
    nb_tensor *p = NBT(nb_addmm(b, x, nb_mul(w, 2.0)));
    assert_int_equal(nb_graph_output(g, "shared_relu", nb_relu(p)), NB_OK); /* p is read twice */
    assert_int_equal(nb_graph_output(g, "shared_twice", nb_mul(p, 2.0)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__graph_optimize, g, &st);
    assert_int_equal(count_op(r, NB_OP_RELU), 1);
    int fused[2] = {0, 0};
    for (int i = 0; i < r->n; i++)
        if (r->nodes[i].kind == NB_GNODE_OP && (r->nodes[i].attrs.sub & NB_SUB_RELU))
            fused[r->nodes[i].op == NB_OP_CONVOLUTION] += r->nodes[i].op == NB_OP_ADDMM || r->nodes[i].op == NB_OP_CONVOLUTION;
    assert_int_equal(fused[0], 3); /* addmm, bias_add, composite */
    assert_int_equal(fused[1], 2); /* conv, conv1d */
    nb_graph_release(r);
    const char *names[5] = {"x", "w", "b", "xc", "wc"};
    nb_tensor *args[10];
    for (int s = 0; s < 2; s++) {
        int64_t rows = s ? 37 : 2;
        args[5 * s] = s ? NBT(nb_randn(NB_SHAPE(rows, 5), NB_F32)) : special(rows, 5, 1);
        args[5 * s + 1] = NBT(nb_randn(NB_SHAPE(5, 3), NB_F32));
        args[5 * s + 2] = NBT(nb_reshape(special(1, 3, s + 2), NB_SHAPE(3)));
        args[5 * s + 3] = NBT(nb_randn(NB_SHAPE(rows, 2, 5, 5), NB_F32));
        args[5 * s + 4] = NBT(nb_randn(NB_SHAPE(3, 2, 3, 3), NB_F32));
    }
    check_all(g, 2, 5, names, args);
    nb_graph_release(g);
}

/* ---- CSE ---- */

static void cse_merges_pure_duplicates_only(void **state) {
    (void)state;
    float pv[4] = {0.5f, -1, 2, 0.25f};
    nb_tensor *w1 = NBT(nb_from_data(pv, NB_SHAPE(4), NB_F32)), *w2 = NBT(nb_from_data(pv, NB_SHAPE(4), NB_F32));
    nb_graph *g = nb_graph_begin("cse");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *a = NBT(nb_graph_input(g, "a", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *b = NBT(nb_graph_input(g, "b", NB_F32, NB_SHAPE(B, 4)));
    nb_tensor *p1 = NBT(nb_graph_param(g, "p1", w1)), *p2 = NBT(nb_graph_param(g, "p2", w2));
    nb_tensor *c1 = NBT(nb_add(nb_exp(x), 2.0)), *c2 = NBT(nb_add(nb_exp(x), 2.0)); /* exp, 2.0, add: merged */
    assert_int_equal(nb_graph_output(g, "c", nb_mul(c1, c2)), NB_OK);
    assert_int_equal(nb_graph_output(g, "ab", nb_sub(nb_exp(a), nb_exp(b))), NB_OK);   /* distinct inputs */
    assert_int_equal(nb_graph_output(g, "pp", nb_sub(nb_mul(x, p1), nb_mul(x, p2))), NB_OK); /* distinct params */
    nb_tensor *r1 = NBT(nb_randn(NB_SHAPE(4), NB_F32)), *r2 = NBT(nb_randn(NB_SHAPE(4), NB_F32));
    assert_int_equal(nb_graph_output(g, "rr", nb_sub(r1, r2)), NB_OK);                 /* two draws */
    assert_int_equal(nb_graph_output(g, "o1", nb_sin(x)), NB_OK);                      /* two outputs */
    assert_int_equal(nb_graph_output(g, "o2", nb_sin(x)), NB_OK);
    /* views of two exp(x) as outputs: the first merges with c's exp(x), the second may not (the two
     * outputs would share storage) */
    assert_int_equal(nb_graph_output(g, "v1", nb_reshape(nb_exp(x), NB_SHAPE(-1))), NB_OK);
    assert_int_equal(nb_graph_output(g, "v2", nb_reshape(nb_exp(x), NB_SHAPE(-1))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_int_equal(count_op(g, NB_OP_RANDN), 2);

    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_cse, g, &st);
    assert_int_equal(st.cse, 4);
    assert_int_equal(count_op(r, NB_OP_EXP), 4); /* exp(x) twice, exp(a), exp(b) */
    assert_int_equal(count_op(r, NB_OP_RANDN), 2);
    assert_int_equal(count_op(r, NB_OP_SIN), 2);
    assert_int_equal(count_kind(r, NB_GNODE_PARAM), 2);
    assert_int_equal(count_kind(r, NB_GNODE_INPUT), 3);

    /* equal data in a and b, in p1 and p2: the same results; then a and p1 given other values */
    const char *names[3] = {"x", "a", "b"};
    nb_tensor *xa = NBT(nb_randn(NB_SHAPE(5, 4), NB_F32));
    nb_tensor *args[6] = {xa, xa, xa, NBT(nb_randn(NB_SHAPE(2, 4), NB_F32)), NBT(nb_randn(NB_SHAPE(2, 4), NB_F32)),
                          NBT(nb_randn(NB_SHAPE(2, 4), NB_F32))};
    check_all(g, 2, 3, names, args);
    nb_tensor *out[9];
    const char *names4[4] = {"x", "a", "b", "p1"};
    nb_tensor *args4[4] = {xa, xa, NBT(nb_exp(xa)), NBT(nb_full(NB_SHAPE(4), 3.0, NB_F32))};
    run_graph(r, 4, names4, args4, out);
    assert_false(nb_shares_storage(out[4], out[5])); /* o1, o2 */
    assert_false(nb_shares_storage(out[6], out[7])); /* v1, v2 */
    assert_true(nbt_at(out[1], 0) != 0);            /* exp(a) - exp(b) */
    assert_true(nbt_at(out[2], 0) != 0);            /* x p1 - x p2 */
    bool differ = false;                            /* the two draws differ */
    for (int k = 0; k < 4; k++) differ |= nbt_at(out[3], k) != 0;
    assert_true(differ);
    nb_graph_release(r);
    nb_graph_release(g);
    nb_release(w1);
    nb_release(w2);
}

/* ---- folding ---- */

static void folding_computes_small_constant_ops(void **state) {
    (void)state;
    float a[3] = {1, 2, 3}, b[3] = {0.5f, -0.25f, 4};
    nb_tensor *ca = NBT(nb_from_data(a, NB_SHAPE(3), NB_F32)), *cb = NBT(nb_from_data(b, NB_SHAPE(3), NB_F32));
    nb_tensor *big = NBT(nb_full(NB_SHAPE(NB_FOLD_MAX_ELEMS + 10), 0.5, NB_F32));
    nb_tensor *p = NBT(nb_full(NB_SHAPE(3), 0.5, NB_F32));
    nb_graph *g = nb_graph_begin("fold");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 3)));
    nb_tensor *c1 = NBT(nb_graph_constant(g, ca)), *c2 = NBT(nb_graph_constant(g, cb));
    nb_tensor *f = NBT(nb_add(nb_exp(c1), c2)); /* exp and add folded */
    assert_int_equal(nb_graph_output(g, "y", nb_mul(x, f)), NB_OK);
    assert_int_equal(nb_graph_output(g, "const_out", nb_sub(c1, c2)), NB_OK); /* an output: kept */
    nb_tensor *s = NBT(nb_graph_scalar(g, 2.0, NB_F32));
    nb_tensor *ex = NBT(nb_expand(s, NB_SHAPE(300, 300))); /* more elements than its input */
    assert_int_equal(nb_graph_output(g, "ex", nb_sum(ex, NULL, 0, false)), NB_OK);
    nb_tensor *cbig = NBT(nb_graph_constant(g, big)); /* over the bound */
    assert_int_equal(nb_graph_output(g, "big", nb_sum(nb_exp(cbig), NULL, 0, false)), NB_OK);
    /* an output viewing a folded value would view a constant's storage: not folded */
    assert_int_equal(nb_graph_output(g, "view_out", nb_reshape(nb_exp(c2), NB_SHAPE(3, 1))), NB_OK);
    nb_tensor *bern = NBT(nb_bernoulli(nb_graph_constant(g, p))); /* random: never folded */
    assert_int_equal(nb_graph_output(g, "bern", nb_add(x, bern)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);

    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_fold, g, &st);
    assert_int_equal(st.folded, 2);
    assert_int_equal(count_op(r, NB_OP_BERNOULLI), 1);
    assert_int_equal(count_op(r, NB_OP_EXPAND), 1);
    assert_int_equal(count_op(r, NB_OP_EXP), 2); /* exp(big), exp(c2) of view_out */
    nb_graph_release(r);
    r = apply_pass(nb__graph_optimize, g, &st);
    assert_int_equal(st.folded, 2);
    nb_graph_release(r);
    const char *names[1] = {"x"};
    nb_tensor *args[2] = {NBT(nb_randn(NB_SHAPE(2, 3), NB_F32)), NBT(nb_randn(NB_SHAPE(9, 3), NB_F32))};
    check_all(g, 2, 1, names, args);
    nb_graph_release(g);
}

/* A fold whose op fails (gather out of range) is left for the run; no error stays pending, and a
 * caller's pending error survives. */
static void failing_fold_is_left_to_the_run(void **state) {
    (void)state;
    float xv[6] = {1, 2, 3, 4, 5, 6};
    int64_t iv[2] = {0, 5};
    nb_tensor *xc = NBT(nb_from_data(xv, NB_SHAPE(2, 3), NB_F32)), *idx = NBT(nb_from_data(iv, NB_SHAPE(1, 2), NB_I64));
    nb_graph *g = nb_graph_begin("bad_fold");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(1, 2)));
    nb_tensor *gth = NBT(nb_gather(nb_graph_constant(g, xc), 1, nb_graph_constant(g, idx)));
    assert_int_equal(nb_graph_output(g, "y", nb_mul(x, gth)), NB_OK);
    assert_int_equal(nb_graph_output(g, "z", nb_mul(x, nb_exp(nb_graph_constant(g, idx)))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_graph *r;
    int32_t *o;
    nb_pass_stats st;
    assert_int_equal(nb__graph_optimize(g, &r, &o, &st), NB_OK);
    assert_int_equal(nb_last_status(), NB_OK);
    assert_int_equal(st.folded, 1); /* exp(idx) only */
    assert_int_equal(count_op(r, NB_OP_GATHER), 1);
    check_result(g, r, o);
    nb__free(o);
    for (int p = 0; p < NPASSES; p++) nb_graph_release(apply_pass(PASSES[p].fn, g, NULL));
    nb__error_set(NB_ERR_ARG, "a caller's pending error");
    nb_graph *r2;
    assert_int_equal(nb__graph_optimize(g, &r2, NULL, NULL), NB_OK);
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    assert_non_null(strstr(nb_last_message(), "a caller's pending error"));
    nb_clear_error();
    nb_graph_release(r2);
    /* the optimized graph compiles; its run reports the index error, as the original's */
    nb_tensor *xin = NBT(nb_randn(NB_SHAPE(1, 2), NB_F32)), *out[2];
    nb_graph *both[2] = {g, r};
    for (int k = 0; k < 2; k++) {
        nb_compiled *c = nb_graph_compile(both[k], NB_CPU);
        assert_non_null(c);
        assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xin, 2, out), NB_ERR_INDEX);
        assert_non_null(strstr(nb_last_message(), "gather"));
        nb_clear_error();
        nb_compiled_release(c);
    }
    nb_graph_release(r);
    nb_graph_release(g);
}

/* ---- DCE ---- */

static void dce_drops_dead_nodes_and_keeps_every_argument(void **state) {
    (void)state;
    nb_tensor *w = NBT(nb_full(NB_SHAPE(4), 2.0, NB_F32));
    nb_graph *g = nb_graph_begin("dce");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 4)));
    NBT(nb_graph_input(g, "unused", NB_I64, NB_SHAPE(3)));
    NBT(nb_graph_param(g, "unused_param", w));
    NBT(nb_exp(x));                              /* dead op */
    NBT(nb_graph_scalar(g, 3.0, NB_F64));        /* dead constant */
    assert_int_equal(nb_graph_output(g, "y", nb_tanh(x)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_pass_stats st;
    nb_graph *r = apply_pass(nb__pass_dce, g, &st);
    assert_int_equal(st.dead, 2);
    assert_int_equal(r->n, g->n - 2);
    assert_int_equal(st.nodes_before, 2);
    assert_int_equal(st.nodes_after, 1);
    nb_graph_release(r);
    const char *names[2] = {"x", "unused"};
    nb_tensor *args[4] = {NBT(nb_randn(NB_SHAPE(3, 4), NB_F32)), NBT(nb_zeros(NB_SHAPE(3), NB_I64)),
                          NBT(nb_randn(NB_SHAPE(1, 4), NB_F32)), NBT(nb_zeros(NB_SHAPE(3), NB_I64))};
    check_all(g, 2, 2, names, args);
    nb_graph_release(g);
}

/* ---- an MLP training step ---- */

enum { IN = 12, HID = 16, CLS = 5 };
static const char *const PNAMES[4] = {"fc1.w", "fc1.b", "fc2.w", "fc2.b"};

static nb_graph *train_step_graph(nb_tensor **params, nb_tensor **state) {
    nb_graph *g = nb_graph_begin("train_step");
    int64_t B = nb_dim("B");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(B, IN)));
    nb_tensor *y = NBT(nb_graph_input(g, "y", NB_I64, NB_SHAPE(B)));
    nb_tensor *k0 = NBT(nb_graph_input(g, "k0", NB_F32, NULL, 0)), *k1 = NBT(nb_graph_input(g, "k1", NB_F32, NULL, 0));
    nb_tensor *p[4], *sv[8], *gr[4];
    char nm[64];
    for (int i = 0; i < 4; i++) {
        p[i] = NBT(nb_graph_param(g, PNAMES[i], params[i]));
        for (int j = 0; j < 2; j++) {
            snprintf(nm, sizeof nm, "state%d.%s", j, PNAMES[i]);
            sv[2 * i + j] = NBT(nb_graph_param(g, nm, state[2 * i + j]));
        }
    }
    nb_tensor *logits = NBT(nb_linear(nb_relu(nb_linear(x, p[0], p[1])), p[2], p[3]));
    nb_tensor *loss = NBT(nb_cross_entropy(logits, y, NB_CROSS_ENTROPY_DEFAULTS));
    assert_int_equal(nb_graph_grad(loss, 4, p, gr), NB_OK);
    assert_int_equal(nb_graph_output(g, "loss", loss), NB_OK);
    assert_int_equal(nb_graph_output(g, "hits", nb_sum(nb_eq(nb_argmax(logits, 1, false), y), NULL, 0, false)), NB_OK);
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8;
    for (int i = 0; i < 4; i++) { /* Adam: m, v, p - k0 m / (sqrt(v) k1 + eps) */
        nb_tensor *m = NBT(nb_add(nb_mul(sv[2 * i], b1), nb_mul(gr[i], 1 - b1)));
        nb_tensor *v = NBT(nb_add(nb_mul(sv[2 * i + 1], b2), nb_mul(nb_square(gr[i]), 1 - b2)));
        nb_tensor *np = NBT(nb_sub(p[i], nb_mul(k0, nb_div(m, nb_add(nb_mul(nb_sqrt(v), k1), eps)))));
        snprintf(nm, sizeof nm, "new.%s", PNAMES[i]);
        assert_int_equal(nb_graph_output(g, nm, np), NB_OK);
        snprintf(nm, sizeof nm, "new.m.%s", PNAMES[i]);
        assert_int_equal(nb_graph_output(g, nm, m), NB_OK);
        snprintf(nm, sizeof nm, "new.v.%s", PNAMES[i]);
        assert_int_equal(nb_graph_output(g, nm, v), NB_OK);
    }
    assert_int_equal(nb_graph_end(g), NB_OK);
    return g;
}

static void mlp_training_step_shrinks_with_the_same_bits(void **state) {
    (void)state;
    nb_manual_seed(3);
    const int64_t shapes[4][2] = {{HID, IN}, {HID, 0}, {CLS, HID}, {CLS, 0}};
    nb_tensor *params[4], *st8[8];
    for (int i = 0; i < 4; i++) {
        int nd = shapes[i][1] ? 2 : 1;
        params[i] = nb_retain(NBT(nb_mul(nb_randn(shapes[i], nd, NB_F32), 0.3)));
        st8[2 * i] = nb_retain(NBT(nb_mul(nb_randn(shapes[i], nd, NB_F32), 0.01)));
        st8[2 * i + 1] = nb_retain(NBT(nb_abs(nb_mul(nb_randn(shapes[i], nd, NB_F32), 0.01))));
    }
    nb_graph *g = train_step_graph(params, st8);
    print_message("MLP training step: %d nodes, %d op nodes\n", g->n, nb__op_node_count(g));
    for (int p = 0; p < NPASSES; p++) {
        nb_pass_stats s;
        nb_graph *r = apply_pass(PASSES[p].fn, g, &s);
        print_message("  %-8s alone: %d -> %d op nodes (cse %d, folded %d, simplified %d, dead %d)\n", PASSES[p].name,
                      s.nodes_before, s.nodes_after, s.cse, s.folded, s.simplified, s.dead);
        if (p == NPASSES - 1) assert_true(s.nodes_after < s.nodes_before);
        nb_graph_release(r);
    }
    /* the pipeline by hand, pass after pass, round after round (each step checked against its input) */
    static const pass_fn order[4] = {nb__pass_simplify, nb__pass_fold, nb__pass_cse, nb__pass_dce};
    static const char *const order_names[4] = {"simplify", "fold", "cse", "dce"};
    nb_graph *cur = nb_graph_retain(g);
    for (int round = 1, changes = 1; changes && round <= NB_OPTIMIZE_ROUNDS; round++) {
        changes = 0;
        for (int p = 0; p < 4; p++) {
            nb_pass_stats s;
            nb_graph *next = apply_pass(order[p], cur, &s);
            print_message("  round %d %-8s: %d -> %d op nodes (cse %d, folded %d, simplified %d, dead %d)\n", round,
                          order_names[p], s.nodes_before, s.nodes_after, s.cse, s.folded, s.simplified, s.dead);
            changes += s.cse + s.folded + s.simplified + s.dead;
            nb_graph_release(cur);
            cur = next;
        }
    }
    nb_pass_stats all;
    nb_graph_release(apply_pass(nb__graph_optimize, g, &all));
    assert_int_equal(nb__op_node_count(cur), all.nodes_after);
    nb_graph_release(cur);
    const char *names[4] = {"x", "y", "k0", "k1"};
    nb_tensor *args[8];
    for (int s = 0; s < 2; s++) {
        int64_t b = s ? 8 : 5, yv[8];
        for (int k = 0; k < b; k++) yv[k] = (k * 3 + s) % CLS;
        args[4 * s] = NBT(nb_randn(NB_SHAPE(b, IN), NB_F32));
        args[4 * s + 1] = NBT(nb_from_data(yv, NB_SHAPE(b), NB_I64));
        args[4 * s + 2] = NBT(nb_scalar(2e-3 / (1 - 0.9), NB_F32));
        args[4 * s + 3] = NBT(nb_scalar(1 / sqrt(1 - 0.999), NB_F32));
    }
    check_all(g, 2, 4, names, args);
    nb_graph_release(g);
    for (int i = 0; i < 4; i++) nb_release(params[i]);
    for (int i = 0; i < 8; i++) nb_release(st8[i]);
}

/* ---- a large graph ---- */

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void large_chain_optimizes_quickly(void **state) {
    (void)state;
    enum { ROUNDS = 2000 }; /* 5 nodes each: exp, exp, a weak 1.0, mul, add */
    nb_graph *g = nb_graph_begin("chain");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"))));
    nb_tensor *v = x;
    for (int i = 0; i < ROUNDS; i++) {
        nb_scope_begin();
        nb_tensor *a = NBT(nb_tanh(v)), *b = NBT(nb_tanh(v));
        v = nb_scope_keep(NBT(nb_add(a, nb_mul(b, 1.0))));
        nb_scope_end();
    }
    assert_int_equal(nb_graph_output(g, "y", v), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    assert_true(g->n >= 5 * ROUNDS);
    double t0 = now();
    nb_graph *r;
    int32_t *o;
    nb_pass_stats st;
    assert_int_equal(nb__graph_optimize(g, &r, &o, &st), NB_OK);
    double dt = now() - t0;
    print_message("chain of %d nodes: optimized in %.1f ms, %d -> %d op nodes\n", g->n, 1e3 * dt, st.nodes_before,
                  st.nodes_after);
#ifdef NB_ASAN
    assert_true(dt < 10.0);
#else
    assert_true(dt < 0.5);
#endif
    assert_int_equal(st.simplified, ROUNDS);
    assert_true(st.cse >= ROUNDS);
    assert_int_equal(st.nodes_after, 2 * ROUNDS); /* tanh and add per round */
    check_result(g, r, o);
    nb__free(o);
    const char *names[1] = {"x"};
    nb_tensor *xin = NBT(nb_randn(NB_SHAPE(6), NB_F32));
    same_run(g, r, 1, names, &xin);
    nb_graph_release(r);
    check_all(g, 1, 1, names, &xin);
    nb_graph_release(g);
}

/* ---- errors ---- */

static void bad_arguments_are_errors(void **state) {
    (void)state;
    nb_graph *r = (nb_graph *)1;
    int32_t *o = (int32_t *)1;
    for (int p = 0; p < NPASSES; p++) {
        assert_int_equal(PASSES[p].fn(NULL, &r, &o, NULL), NB_ERR_NULL);
        assert_null(r);
        assert_null(o);
        nb_clear_error();
    }
    nb_graph *g = nb_graph_begin("open");
    for (int p = 0; p < NPASSES; p++) {
        assert_int_equal(PASSES[p].fn(g, &r, &o, NULL), NB_ERR_STATE);
        nb_clear_error();
    }
    NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(2)));
    assert_int_equal(nb_graph_end(g), NB_ERR_STATE); /* no output */
    nb_clear_error();
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(oom_every_allocation_of_optimize), /* first: see the header */
        cmocka_unit_test_setup_teardown(simplification_rules_fire_and_keep_the_bits, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(rules_do_not_fire_where_inexact, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(matmul_plus_addend_becomes_addmm, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(relu_folds_into_addmm, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(cse_merges_pure_duplicates_only, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(folding_computes_small_constant_ops, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(failing_fold_is_left_to_the_run, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(dce_drops_dead_nodes_and_keeps_every_argument, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(mlp_training_step_shrinks_with_the_same_bits, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(large_chain_optimizes_quickly, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(bad_arguments_are_errors, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
