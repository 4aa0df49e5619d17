/*
 * test_fusion.c — fused compiled plans against eager execution.
 *
 *  - A random-program differential tester: programs of random elementwise,
 *    broadcast, view (negative steps included) and reduction ops on random
 *    shapes are run eagerly and traced + compiled (fused); every output
 *    must be BITWISE equal — fused kernels call the eager kernels and
 *    reduce rows in the eager order.  A fixed seed in the suite;
 *    NB_FUSION_PROGRAMS=N runs N programs (and NB_FUSION_SEED another seed).
 *  - Fusion indexing: broadcast operands into a multi-axis reduction, a
 *    compiled result copied into a negative-stride slice, a kernel over a
 *    transposed and stepped view.
 *  - Kernel formation (softmax and layer_norm are one kernel each), the
 *    op-by-op fallback (rows too long for a row kernel), thread counts.
 *  - Kernels compiled at run time (the CPU backend's JIT) at the edges of
 *    the ranged f32 forms, on non-finite values, strided and broadcast; the
 *    suite runs this file with the JIT on each ISA's flags and with PATH
 *    emptied (no compiler: the interpreter, the same bits).
 */
#include "support.h"
#include "backend/cpu/kernels.h"
#include "compile/compile.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- bitwise comparison ---- */

static bool same_bits(nb_tensor *a, nb_tensor *b, const char *what) {
    nb_scope_begin();
    bool ok = nb_dtype_of(a) == nb_dtype_of(b) && nb_ndim(a) == nb_ndim(b) &&
              !memcmp(nb_shape(a), nb_shape(b), sizeof(int64_t) * (size_t)nb_ndim(a));
    if (ok) {
        nb_tensor *ac = NBT(nb_contiguous(a)), *bc = NBT(nb_contiguous(b));
        size_t es = nb_dtype_size(nb_dtype_of(ac));
        for (int64_t i = 0; ok && i < nb_numel(ac); i++) {
            const char *x = (const char *)nb_data_ptr(ac) + i * (int64_t)es, *y = (const char *)nb_data_ptr(bc) + i * (int64_t)es;
            double dx = nbt_at(ac, i), dy = nbt_at(bc, i);
            /* every bit, but a NaN's sign and payload: IEEE 754 leaves which operand's NaN an op
             * returns open, and a compiler may swap the operands of a commutative op */
            if (!memcmp(x, y, es) || (dx != dx && dy != dy)) continue;
            ok = false;
            fprintf(stderr, "%s: element %lld: eager %.17g, compiled %.17g\n", what, (long long)i, dx, dy);
        }
    } else {
        fprintf(stderr, "%s: dtype or shape differ\n", what);
    }
    nb_scope_end();
    return ok;
}

/* ---- random programs ---- */

static uint64_t rng_state;
static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 0x2545F4914F6CDD1DULL) >> 32);
}
static int rndn(int n) { return (int)(rnd() % (uint32_t)n); }

enum { MAXV = 40 };

typedef enum opk {
    OK_UNARY, OK_BINARY, OK_SCALAR, OK_WHERE, OK_CAST, OK_PERMUTE, OK_SLICE, OK_FLIP, OK_EXPAND, OK_SELECT,
    OK_RESHAPE, OK_REDUCE, OK_NORM, OK_COUNT
} opk;

/** One op of a program: applied once to eager tensors, once to the trace's. */
typedef struct prog_op {
    opk kind;
    int a, b, c;      /* operand values */
    int which;        /* the op within its kind */
    int axis, axis2;
    int64_t i0, i1, i2;
    double s;
    bool keep;
    int64_t shape[NB_MAX_DIMS];
    int nshape;
} prog_op;

static nb_tensor *unary(int which, nb_tensor *x) {
    switch (which) {
    case 0: return nb_neg(x);
    case 1: return nb_abs(x);
    case 2: return nb_exp(x);
    case 3: return nb_tanh(x);
    case 4: return nb_sigmoid(x);
    case 5: return nb_relu(x);
    case 6: return nb_gelu(x);
    case 7: return nb_silu(x);
    case 8: return nb_sqrt(nb_abs(x));
    case 9: return nb_log1p(nb_abs(x));
    case 10: return nb_sin(x);
    case 11: return nb_square(x);
    case 12: return nb_clamp(x, -0.5, 0.7);
    case 13: return nb_leaky_relu(x, 0.1);
    default: return nb_erf(x);
    }
}

static nb_tensor *binary(int which, nb_tensor *a, nb_tensor *b) {
    switch (which) {
    case 0: return nb_add(a, b);
    case 1: return nb_sub(a, b);
    case 2: return nb_mul(a, b);
    case 3: return nb_div(a, b);
    case 4: return nb_maximum(a, b);
    default: return nb_minimum(a, b);
    }
}

static nb_tensor *binary_scalar(int which, nb_tensor *a, double b) {
    switch (which) {
    case 0: return nb_add(a, b);
    case 1: return nb_sub(a, b);
    case 2: return nb_mul(a, b);
    case 3: return nb_div(a, b);
    case 4: return nb_maximum(a, b);
    case 5: return nb_minimum(a, b);
    default: return nb_mul(a, (int64_t)3);
    }
}

static nb_tensor *apply(const prog_op *o, nb_tensor **v) {
    nb_tensor *a = v[o->a];
    switch (o->kind) {
    case OK_UNARY: return unary(o->which, a);
    case OK_BINARY: return binary(o->which, a, v[o->b]);
    case OK_SCALAR: return binary_scalar(o->which, a, o->s);
    case OK_WHERE:
        return o->which ? nb_where(nb_gt(a, v[o->b]), a, v[o->b]) : nb_masked_fill(v[o->b], nb_lt(v[o->b], o->s), -o->s);
    case OK_CAST: return nb_cast(a, nb_dtype_of(a) == NB_F32 ? NB_F64 : NB_F32);
    case OK_PERMUTE: {
        int perm[NB_MAX_DIMS], nd = nb_ndim(a);
        for (int d = 0; d < nd; d++) perm[d] = nd - 1 - d;
        if (nd > 2 && o->which) {
            int t = perm[0];
            perm[0] = perm[1];
            perm[1] = t;
        }
        return nb_permute(a, perm, nd);
    }
    case OK_SLICE: return nb_slice(a, o->axis, o->i0, o->i1, o->i2);
    case OK_FLIP: return nb_flip(a, &o->axis, 1);
    case OK_EXPAND: return nb_expand(a, o->shape, o->nshape);
    case OK_SELECT: return nb_select(a, o->axis, o->i0);
    case OK_RESHAPE: return nb_reshape(a, o->shape, o->nshape);
    case OK_REDUCE: {
        int axes[2] = {o->axis, o->axis2};
        int na = o->axis2 >= 0 ? 2 : 1;
        switch (o->which) {
        case 0: return nb_sum(a, axes, na, o->keep);
        case 1: return nb_max(a, axes, na, o->keep);
        case 2: return nb_min(a, axes, na, o->keep);
        case 3: return nb_mean(a, axes, na, o->keep);
        default: return nb_logsumexp(a, axes, na, o->keep);
        }
    }
    case OK_NORM:
        switch (o->which) {
        case 0: return nb_softmax(a, o->axis);
        case 1: return nb_log_softmax(a, o->axis);
        case 2: return nb_layer_norm(a, 1, NULL, NULL, 1e-5);
        default: return nb_sub(a, nb_mean(a, &o->axis, 1, true));
        }
    default: return NULL;
    }
}

/* t's shape as "[2, 3]" into buf. */
static const char *shape_str(nb_tensor *t, char *buf, size_t size) {
    size_t k = (size_t)snprintf(buf, size, "[");
    for (int d = 0; d < nb_ndim(t) && k < size; d++)
        k += (size_t)snprintf(buf + k, size - k, d ? ", %lld" : "%lld", (long long)nb_shape(t)[d]);
    if (k < size) snprintf(buf + k, size - k, "]");
    return buf;
}

/* One line describing op k (value nin + k) of a failing program. */
static void describe(const prog_op *o, int val, nb_tensor *const *v) {
    static const char *const kinds[] = {"unary", "binary", "scalar", "where", "cast", "permute", "slice",
                                        "flip", "expand", "select", "reshape", "reduce", "norm"};
    char sh[192];
    fprintf(stderr, "  v%d = %s#%d(v%d, v%d; axis %d %d, i %lld %lld %lld, s %g, keep %d) -> %s\n", val, kinds[o->kind],
            o->which, o->a, o->b, o->axis, o->axis2, (long long)o->i0, (long long)o->i1, (long long)o->i2, o->s,
            o->keep, shape_str(v[val], sh, sizeof sh));
}

/* A random op on the values v[0..n) (eager), filled into *o; false when it does not apply. */
static bool random_op(prog_op *o, nb_tensor **v, int n) {
    memset(o, 0, sizeof *o);
    o->kind = (opk)rndn(OK_COUNT);
    o->a = n - 1 - rndn(n < 4 ? n : 4); /* mostly recent values: chains */
    o->b = rndn(n);
    nb_tensor *a = v[o->a];
    int nd = nb_ndim(a);
    const int64_t *sh = nb_shape(a);
    o->axis = nd ? rndn(nd) : 0;
    o->axis2 = -1;
    switch (o->kind) {
    case OK_UNARY: o->which = rndn(15); break;
    case OK_BINARY: o->which = rndn(6); break;
    case OK_SCALAR:
        o->which = rndn(7);
        o->s = (double)(rndn(7) - 3) * 0.75;
        break;
    case OK_WHERE:
        o->which = rndn(2);
        o->s = 0.25;
        break;
    case OK_SLICE: {
        if (!nd) return false;
        int64_t len = sh[o->axis];
        o->i2 = rndn(2) ? 1 + rndn(2) : -1 - rndn(2);
        o->i0 = rndn((int)len + 1) - (rndn(2) ? 0 : len);
        o->i1 = rndn(3) ? NB_END : rndn((int)len + 1);
        if (o->i2 < 0 && o->i1 == NB_END) o->i0 = -1;
        break;
    }
    case OK_FLIP:
        if (!nd) return false;
        break;
    case OK_EXPAND: {
        int k = -1;
        for (int d = 0; d < nd; d++)
            if (sh[d] == 1) k = d;
        o->nshape = nd + (rndn(3) == 0);
        int lead = o->nshape - nd;
        for (int d = 0; d < o->nshape; d++) o->shape[d] = d < lead ? 2 : sh[d - lead];
        if (k >= 0) o->shape[k + lead] = 3;
        if (o->nshape == nd && k < 0) return false;
        break;
    }
    case OK_SELECT:
        if (nd < 2 || sh[o->axis] == 0) return false;
        o->i0 = rndn((int)sh[o->axis]) - (rndn(2) ? sh[o->axis] : 0);
        break;
    case OK_RESHAPE:
        if (rndn(2)) {
            o->nshape = 1;
            o->shape[0] = -1;
        } else {
            o->nshape = nd + 1; /* an axis of 1 inserted */
            for (int d = 0, k = rndn(nd + 1); d <= nd; d++) o->shape[d] = d < k ? sh[d] : d == k ? 1 : sh[d - 1];
        }
        break;
    case OK_REDUCE:
        if (!nd) return false;
        o->which = rndn(5);
        o->keep = rndn(2);
        o->axis = rndn(2) ? nd - 1 : rndn(3) ? 0 : rndn(nd);
        if (nd > 1 && rndn(3) == 0) {
            o->axis2 = nd - 2;
            if (o->axis == nd - 2) o->axis = nd - 1;
        } else if (nd > 2 && rndn(3) == 0) { /* two leading axes: a column reduction */
            o->axis = 0;
            o->axis2 = 1;
        }
        break;
    case OK_NORM:
        if (!nd) return false;
        o->which = rndn(4);
        o->axis = rndn(3) ? nd - 1 : rndn(nd);
        break;
    default: break;
    }
    return true;
}

static nb_tensor *random_input(const int64_t *base, int nd, bool f64) {
    int64_t shape[NB_MAX_DIMS];
    int k = rndn(3) == 0 ? rndn(nd + 1) : 0; /* a suffix of the base shape: broadcasts */
    for (int d = k; d < nd; d++) shape[d - k] = rndn(4) == 0 ? 1 : base[d];
    nb_tensor *x = nb_randn(shape, nd - k, f64 ? NB_F64 : NB_F32);
    if (rndn(5) == 0) { /* a few exact values: zeros (signed), ties */
        nb_tensor *m = nb_gt(nb_rand(shape, nd - k, NB_F32), 0.8);
        x = nb_where(m, nb_neg(nb_zeros_like(x)), x);
    }
    return x;
}

typedef struct prog_stats {
    int programs, ops, kernels, fused_nodes, outputs;
    int col_kernels, col_ran; /* column kernels formed, and run as one kernel */
    int64_t planned_bytes, arena_bytes;
} prog_stats;

/* Build, run and compare one random program. */
static void one_program(int id, prog_stats *ps) {
    nb_scope_begin();
    int nd = 1 + rndn(4);
    int64_t base[NB_MAX_DIMS];
    for (int d = 0; d < nd; d++) base[d] = rndn(6) == 0 ? 40 + rndn(30) : 1 + rndn(7);
    int nin = 1 + rndn(3);
    nb_tensor *v[MAXV];
    prog_op ops[MAXV];
    int n = 0, nops = 0;
    for (int i = 0; i < nin; i++) v[n++] = NBT(random_input(base, nd, rndn(8) == 0));
    int want = 3 + rndn(14);
    for (int tries = 0; nops < want && n < MAXV && tries < 200; tries++) {
        prog_op o;
        if (!random_op(&o, v, n)) continue;
        nb_tensor *r = apply(&o, v);
        if (!r) {
            nb_clear_error();
            continue;
        }
        if (nb_numel(r) > 200000) continue;
        ops[nops++] = o;
        v[n++] = r;
    }
    /* outputs: the last value and a few random others (multi-output kernels) */
    int outs[4], nout = 0;
    outs[nout++] = n - 1;
    for (int k = rndn(3); k > 0 && n > nin; k--) outs[nout++] = nin + rndn(n - nin);
    /* the same program traced */
    nb_graph *g = nb_graph_begin("random");
    nb_tensor *s[MAXV];
    char names[3][16];
    for (int i = 0; i < nin; i++) {
        snprintf(names[i], sizeof names[i], "x%d", i);
        int64_t shape[NB_MAX_DIMS];
        memcpy(shape, nb_shape(v[i]), sizeof(int64_t) * (size_t)nb_ndim(v[i]));
        s[i] = NBT(nb_graph_input(g, names[i], nb_dtype_of(v[i]), shape, nb_ndim(v[i])));
    }
    for (int k = 0; k < nops; k++) s[nin + k] = NBT(apply(&ops[k], s));
    for (int i = 0; i < nout; i++) {
        char on[16];
        snprintf(on, sizeof on, "y%d", i);
        assert_int_equal(nb_graph_output(g, on, s[outs[i]]), NB_OK);
    }
    assert_int_equal(nb_graph_end(g), NB_OK);
    const char *dump = getenv("NB_FUSION_DUMP"); /* NB_FUSION_DUMP=id: print program id before compiling it */
    if (dump && atoi(dump) == id) {
        for (int k = 0; k < nin; k++) {
            char sh[192];
            fprintf(stderr, "  v%d = input %s %s\n", k, nb_dtype_name(nb_dtype_of(v[k])), shape_str(v[k], sh, sizeof sh));
        }
        for (int k = 0; k < nops; k++) describe(&ops[k], nin + k, v);
        for (int i = 0; i < nout; i++) fprintf(stderr, "  output v%d\n", outs[i]);
    }
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    const char *nm[3] = {names[0], names[1], names[2]};
    nb_tensor *res[4];
    nb__cpu_stream_set_min(id % 2 ? 0 : -1); /* odd programs: row kernels stream their outputs */
    nb_status rc = nb_compiled_run(c, nin, nm, v, nout, res);
    nb__cpu_stream_set_min(-1);
    if (rc != NB_OK) fail_msg("program %d: %s", id, nb_last_message());
    for (int i = 0; i < nout; i++) {
        char what[64];
        snprintf(what, sizeof what, "program %d output %d (value %d)", id, i, outs[i]);
        if (!same_bits(v[outs[i]], res[i], what)) {
            for (int k = 0; k < nin; k++) {
                char sh[192];
                fprintf(stderr, "  v%d = input %s %s\n", k, nb_dtype_name(nb_dtype_of(v[k])), shape_str(v[k], sh, sizeof sh));
            }
            for (int k = 0; k < nops; k++) describe(&ops[k], nin + k, v);
            char *dot = nb_compiled_to_dot(c);
            fprintf(stderr, "%s\n", dot);
            nb_free_string(dot);
            fail();
        }
    }
    /* the memory plan of that run: no two values live at once overlap */
    char why[256];
    if (!nb__mplan_check(&c->run.mem, c->g->n * NB_MAX_OUTS, why, sizeof why)) fail_msg("program %d: %s", id, why);
    ps->planned_bytes += c->run.mem.intermediates;
    ps->arena_bytes += c->run.mem.arena;
    ps->programs++;
    ps->ops += nops;
    ps->outputs += nout;
    for (int k = 0; k < c->s.nfused; k++) {
        ps->fused_nodes += c->s.fused[k].nmember;
        ps->col_kernels += c->s.fused[k].k.lead;
        ps->col_ran += c->s.fused[k].k.lead && c->run.ran && c->run.ran[k] != NB_FK_RAN_OPS;
    }
    ps->kernels += c->s.nfused;
    nb_compiled_release(c);
    nb_graph_release(g);
    nb_scope_end();
}

static void random_programs_match_eager(void **state) {
    (void)state;
    const char *np = getenv("NB_FUSION_PROGRAMS"), *sd = getenv("NB_FUSION_SEED");
    int n = np ? atoi(np) : getenv("NB_TEST_QUICK") ? 150 : 600;
    rng_state = sd ? strtoull(sd, NULL, 10) : 0x9E3779B97F4A7C15ULL;
    nb_manual_seed(7);
    prog_stats ps = {0};
    for (int i = 0; i < n; i++) one_program(i, &ps);
    printf("fusion: %d programs, %d ops, %d outputs, %d fused kernels holding %d ops (%d column kernels, %d run as "
           "one); arenas %lld bytes for %lld planned\n", ps.programs, ps.ops, ps.outputs, ps.kernels, ps.fused_nodes,
           ps.col_kernels, ps.col_ran, (long long)ps.arena_bytes, (long long)ps.planned_bytes);
    /* the programs exercise fusion, not only the op-by-op path */
    assert_true(ps.kernels > n / 2);
    assert_true(ps.fused_nodes > ps.ops / 4);
    assert_true(ps.col_ran > n / 100);
}

/* ---- kernels of known graphs ---- */

typedef nb_tensor *(*graph_fn1)(nb_tensor *x);
static nb_tensor *f_softmax(nb_tensor *x) { return nb_softmax(x, -1); }
static nb_tensor *f_log_softmax(nb_tensor *x) { return nb_log_softmax(x, -1); }
static nb_tensor *f_layer_norm(nb_tensor *x) { return nb_layer_norm(x, 1, NULL, NULL, 1e-5); }
static nb_tensor *f_logsumexp(nb_tensor *x) { return nb_logsumexp(x, NB_AXES(-1), false); }

/* fn traced on x [B, cols] (B symbolic), compiled; *c its plan. */
static nb_graph *trace1(graph_fn1 fn, int64_t cols, nb_compiled **c) {
    nb_graph *g = nb_graph_begin("f");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), cols)));
    assert_int_equal(nb_graph_output(g, "y", fn(x)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(*c);
    return g;
}

static nb_tensor *run1(nb_compiled *c, nb_tensor *x) {
    nb_tensor *y = NULL;
    if (nb_compiled_run(c, 1, (const char *[]){"x"}, &x, 1, &y) != NB_OK) fail_msg("%s", nb_last_message());
    return y;
}

/* softmax, log_softmax, layer_norm and logsumexp over rows are one fused kernel each, equal to
 * eager bit for bit at several batch sizes and row lengths (tiles of 1024: 2500 spans three),
 * with outputs stored through the caches or past them (stream.c). */
static void row_functions_are_one_kernel(void **state) {
    (void)state;
    graph_fn1 fns[] = {f_softmax, f_log_softmax, f_layer_norm, f_logsumexp};
    int64_t cols[] = {10, 2500};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++)
        for (int k = 0; k < 2; k++) {
            nb_compiled *c;
            nb_graph *g = trace1(fns[i], cols[k], &c);
            nb_compiled_stats st;
            assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
            assert_int_equal(st.kernels, 1);
            assert_true(st.steps <= 2); /* logsumexp without keepdim: the kernel, then a reshape view */
            for (int64_t b = 1; b <= 33; b += 16) {
                nb_tensor *x = NBT(nb_randn(NB_SHAPE(b, cols[k]), NB_F32));
                nb__cpu_stream_set_min(b == 17 ? 0 : -1); /* b = 17: outputs stored past the caches */
                nb_tensor *y = run1(c, x);
                nb__cpu_stream_set_min(-1);
                assert_true(same_bits(fns[i](x), y, "row function"));
                /* their elementwise stages are compiled at run time where a compiler runs */
                assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
                assert_int_equal(st.kernels_compiled, strstr(nb_fusion_mode(), "compiled at run time") ? 1 : 0);
            }
            nb_compiled_release(c);
            nb_graph_release(g);
        }
}

/* layer_norm with a weight and a bias (loads broadcast along the rows) for the tests below. */
static nb_tensor *ln_w, *ln_b;
static nb_tensor *f_layer_norm_affine(nb_tensor *x) { return nb_layer_norm(x, 1, ln_w, ln_b, 1e-5); }

/* Short rows (up to 512 elements) run in groups, a stage's compiled kernel called once over the
 * group's rows (fused.c, batch_rows): eager's bits for row lengths around the group sizes, row
 * counts that leave a partial group, a 3-d domain whose groups stop at each outer index,
 * transposed inputs and rows apart (loads that do not run on from row to row: expanded), the affine
 * layer_norm's broadcast weight and bias, and 1 and 3 threads. */
static void short_rows_run_in_groups(void **state) {
    (void)state;
    graph_fn1 fns[] = {f_softmax, f_log_softmax, f_layer_norm_affine, f_logsumexp};
    const int64_t cols[] = {1, 3, 10, 256, 257, 512, 513}, rows[] = {1, 5, 300, 1030};
    int saved = nb_get_num_threads();
    for (size_t c = 0; c < sizeof cols / sizeof cols[0]; c++) {
        ln_w = NBT(nb_randn(NB_SHAPE(cols[c]), NB_F32));
        ln_b = NBT(nb_randn(NB_SHAPE(cols[c]), NB_F32));
        for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
            nb_compiled *plan;
            nb_graph *g = trace1(fns[i], cols[c], &plan);
            for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
                for (int t = 0; t < 3; t++) { /* contiguous, transposed, rows apart (one copy a row) */
                    nb_scope_begin();
                    nb_tensor *x = NBT(nb_randn(NB_SHAPE(rows[r], cols[c] + (t == 2) * 3), NB_F32));
                    if (t == 1) x = NBT(nb_transpose(NBT(nb_contiguous(NBT(nb_transpose(x, 0, 1)))), 0, 1));
                    if (t == 2) x = NBT(nb_narrow(x, 1, 2, cols[c]));
                    nb_set_num_threads(t ? 3 : 1);
                    assert_true(same_bits(fns[i](x), run1(plan, x), "short rows"));
                    nb_scope_end();
                }
            nb_compiled_release(plan);
            nb_graph_release(g);
        }
    }
    nb_set_num_threads(saved);
    nb_graph *g = nb_graph_begin("f3"); /* [A, R, C]: groups end where the middle axis does */
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("A"), 7, 5)));
    assert_int_equal(nb_graph_output(g, "y", nb_log_softmax(x, -1)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *plan = nb_graph_compile(g, NB_CPU);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(3, 7, 5), NB_F32));
    assert_true(same_bits(nb_log_softmax(xv, -1), run1(plan, xv), "short rows, 3-d"));
    nb_compiled_release(plan);
    nb_graph_release(g);
}

/* A broadcast operand feeding a reduction over two trailing axes: one kernel, eager's bits. */
static void broadcast_into_multi_axis_reduction(void **state) {
    (void)state;
    nb_tensor *bias = NBT(nb_randn(NB_SHAPE(5, 1), NB_F32));
    nb_graph *g = nb_graph_begin("bred");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 5, 7)));
    nb_tensor *y = nb_sum(nb_exp(nb_add(x, bias)), NB_AXES(1, 2), true);
    assert_int_equal(nb_graph_output(g, "y", nb_div(nb_exp(nb_add(x, bias)), y)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
    assert_int_equal(st.kernels, 1);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(6, 5, 7), NB_F32));
    nb_tensor *want = nb_div(nb_exp(nb_add(xv, bias)), nb_sum(nb_exp(nb_add(xv, bias)), NB_AXES(1, 2), true));
    assert_true(same_bits(want, run1(c, xv), "broadcast reduction"));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* A kernel whose load is a transposed, stepped (negative step too) view of its input. */
static void kernel_over_transposed_stepped_view(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("view");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(41, 37)));
    nb_tensor *v = nb_slice(nb_slice(nb_t(x), 0, NB_END, 0, -3), 1, 0, NB_END, 2);
    assert_int_equal(nb_graph_output(g, "y", nb_add(nb_mul(nb_tanh(v), 2.0), v)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
    assert_int_equal(st.kernels, 1);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(41, 37), NB_F32));
    nb_tensor *vv = nb_slice(nb_slice(nb_t(xv), 0, NB_END, 0, -3), 1, 0, NB_END, 2);
    assert_true(same_bits(nb_add(nb_mul(nb_tanh(vv), 2.0), vv), run1(c, xv), "strided view"));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* A compiled result written into a negative-stride slice of a larger buffer (run_into copies it
 * in: the destination is not contiguous); the elements outside the slice stay. */
static void result_into_negative_stride_slice(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("neg");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(8)));
    assert_int_equal(nb_graph_output(g, "y", nb_exp(nb_mul(x, 0.5))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(8), NB_F32)), *buf = NBT(nb_zeros(NB_SHAPE(17), NB_F32));
    nb_tensor *dst = NBT(nb_slice(buf, 0, -1, 0, -2)); /* buf[16], buf[14], ..., buf[2] */
    nb_tensor *outs[1] = {dst};
    assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"x"}, &xv, 1, outs), NB_OK);
    assert_ptr_equal(outs[0], dst);
    assert_true(same_bits(nb_exp(nb_mul(xv, 0.5)), dst, "negative-stride destination"));
    for (int64_t i = 0; i < 17; i += 2) assert_true(i == 0 ? nbt_at(buf, i) == 0 : nbt_at(buf, i) != 0);
    for (int64_t i = 1; i < 17; i += 2) assert_true(nbt_at(buf, i) == 0);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* ---- column kernels ---- */

/* A bias gradient as training makes it: g' = where(y > 0, g, 0) (relu's backward) and its sum over
 * the batch, and a scaled sum.  Inputs y, g [B, C]; outputs g', db [C], sum(g' / 2) [1, C]. */
static void bias_grad(nb_tensor *y, nb_tensor *g, nb_tensor **out) {
    out[0] = nb_where(nb_gt(y, 0.0), g, nb_scalar(0.0, nb_dtype_of(g)));
    out[1] = nb_sum(out[0], NB_AXES(0), false);
    out[2] = nb_sum(nb_mul(out[0], 0.5), NB_AXES(0), true);
}

/* The output's kernel report line holds `kind` and the last run did not fall back op by op. */
static void assert_ran_as(nb_compiled *c, const char *kind) {
    char *r = nb_compiled_report(c);
    assert_non_null(strstr(r, kind));
    assert_null(strstr(r, "ran these ops one by one"));
    nb_free_string(r);
}

/* The bias gradient is one column kernel (the where written, the sums beside it) equal to eager
 * bit for bit, on batches around the eager column sum's groups of 4 and blocks of 64 rows, on
 * rows of 1 to 2 tiles, f32 and f64, on 1 and 3 threads; short rows over many rows also in parts
 * of rows on 3 threads (4000 and 20000 rows: 3 parts, a partial block at the end). */
static void column_sums_are_one_kernel(void **state) {
    (void)state;
    const int64_t batches[] = {1, 3, 4, 63, 64, 65, 130, 1000, 4000, 20000}, cols[] = {2, 17, 1500};
    int keep = nb_get_num_threads();
    for (int f64 = 0; f64 < 2; f64++)
        for (size_t ci = 0; ci < sizeof cols / sizeof cols[0]; ci++) {
            nb_dtype dt = f64 ? NB_F64 : NB_F32;
            nb_graph *g = nb_graph_begin("bias_grad");
            nb_tensor *in[2], *out[3];
            in[0] = NBT(nb_graph_input(g, "y", dt, NB_SHAPE(nb_dim("B"), cols[ci])));
            in[1] = NBT(nb_graph_input(g, "g", dt, NB_SHAPE(nb_dim("B"), cols[ci])));
            bias_grad(in[0], in[1], out);
            for (int i = 0; i < 3; i++) {
                char name[8];
                snprintf(name, sizeof name, "o%d", i);
                assert_int_equal(nb_graph_output(g, name, out[i]), NB_OK);
            }
            assert_int_equal(nb_graph_end(g), NB_OK);
            nb_compiled *c = nb_graph_compile(g, NB_CPU);
            assert_non_null(c);
            nb_compiled_stats st;
            assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
            assert_int_equal(st.kernels, 1);
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; bi++) {
                if (batches[bi] > 1000 && cols[ci] > 100) continue;
                nb_tensor *x[2] = {NBT(nb_randn(NB_SHAPE(batches[bi], cols[ci]), dt)), NBT(nb_randn(NB_SHAPE(batches[bi], cols[ci]), dt))};
                nb_tensor *want[3];
                bias_grad(x[0], x[1], want);
                for (int threads = 1; threads <= 3; threads += 2) {
                    nb_set_num_threads(threads);
                    nb_tensor *got[3];
                    assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"y", "g"}, x, 3, got), NB_OK);
                    for (int i = 0; i < 3; i++) {
                        char what[96];
                        snprintf(what, sizeof what, "bias gradient %s [%lld, %lld] output %d, %d threads", nb_dtype_name(dt),
                                 (long long)batches[bi], (long long)cols[ci], i, threads);
                        assert_true(same_bits(want[i], got[i], what));
                    }
                }
                nb_set_num_threads(keep);
                assert_ran_as(c, "column reductions");
            }
            nb_compiled_release(c);
            nb_graph_release(g);
        }
}

/* Sums over two leading axes with operands broadcast every way (a per-column bias computed in the
 * kernel before the sums, a scalar, a value repeated along the first axis) and per-column work
 * after them; a reduced value that is a strided load, and a single column, fall back op by op. */
static void column_kernels_broadcast_and_fall_back(void **state) {
    (void)state;
    nb_tensor *bias = NBT(nb_randn(NB_SHAPE(7), NB_F32)), *rep = NBT(nb_randn(NB_SHAPE(1, 5, 7), NB_F32));
    nb_graph *g = nb_graph_begin("cols");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("A"), 5, 7)));
    nb_tensor *t = nb_mul(nb_relu(x), rep);
    nb_tensor *s = nb_sum(t, NB_AXES(0, 1), false);
    nb_tensor *u = nb_mul(t, nb_exp(bias)); /* exp(bias) joins as a per-column value before the sums */
    assert_int_equal(nb_graph_output(g, "s", nb_sqrt(nb_abs(nb_add(s, 2.0)))), NB_OK);
    assert_int_equal(nb_graph_output(g, "u", u), NB_OK);
    assert_int_equal(nb_graph_output(g, "su", nb_sum(u, NB_AXES(0, 1), true)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
    assert_int_equal(st.kernels, 1);
    int keep = nb_get_num_threads();
    for (int64_t a = 1; a <= 2002; a += a < 40 ? 13 : 1962) { /* 2002: rows in 3 parts on 3 threads */
        nb_set_num_threads(a > 40 ? 3 : keep);
        nb_tensor *xv = NBT(nb_randn(NB_SHAPE(a, 5, 7), NB_F32)), *y[3];
        nb_tensor *tv = nb_mul(nb_relu(xv), rep), *uv = nb_mul(tv, nb_exp(bias));
        assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 3, y), NB_OK);
        assert_true(same_bits(nb_sqrt(nb_abs(nb_add(nb_sum(tv, NB_AXES(0, 1), false), 2.0))), y[0], "sums of two axes"));
        assert_true(same_bits(uv, y[1], "full output"));
        assert_true(same_bits(nb_sum(uv, NB_AXES(0, 1), true), y[2], "keepdim sums"));
    }
    nb_set_num_threads(keep);
    assert_ran_as(c, "column reductions");
    nb_compiled_release(c);
    nb_graph_release(g);
    /* a summed view with a size-1 axis of another stride ([B, C, 1] from [B, 1, C]): the eager sum
     * drops that axis too, so both add the columns in one order */
    g = nb_graph_begin("unit_axis");
    x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(nb_dim("B"), 1, 17)));
    assert_int_equal(nb_graph_output(g, "y", nb_mul(nb_sum(nb_transpose(x, 1, 2), NB_AXES(0), false), 0.5)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    nb_tensor *xb = NBT(nb_mul(NBT(nb_randn(NB_SHAPE(1000, 1, 17), NB_F64)),
                               NBT(nb_exp(NBT(nb_mul(NBT(nb_randn(NB_SHAPE(1000, 1, 17), NB_F64)), 20.0))))));
    nb_tensor *want = nb_mul(nb_sum(nb_transpose(xb, 1, 2), NB_AXES(0), false), 0.5);
    assert_true(same_bits(want, run1(c, xb), "sum of a view with a unit axis"));
    assert_ran_as(c, "column reductions");
    nb_compiled_release(c);
    nb_graph_release(g);
    /* the summed value is the graph's input seen transposed: the eager sum walks it with another
     * order, so the kernel declines; and a single column is summed as a run by eager */
    g = nb_graph_begin("strided");
    x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("C"), 300)));
    nb_tensor *xt = nb_transpose(x, 0, 1);
    assert_int_equal(nb_graph_output(g, "y", nb_mul(nb_sum(xt, NB_AXES(0), false), 3.0)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    for (int64_t cols = 1; cols <= 9; cols += 8) {
        nb_tensor *xv = NBT(nb_randn(NB_SHAPE(cols, 300), NB_F32));
        nb_tensor *want = nb_mul(nb_sum(nb_transpose(xv, 0, 1), NB_AXES(0), false), 3.0);
        assert_true(same_bits(want, run1(c, xv), "strided sum"));
        char *r = nb_compiled_report(c);
        assert_non_null(strstr(r, "ran these ops one by one"));
        nb_free_string(r);
    }
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Rows longer than a row kernel takes run op by op (the backend declines): the same bits. */
static void long_rows_fall_back_op_by_op(void **state) {
    (void)state;
    nb_compiled *c;
    nb_graph *g = trace1(f_softmax, 70000, &c);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(2, 70000), NB_F32));
    assert_true(same_bits(nb_softmax(x, -1), run1(c, x), "long rows"));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Fused results do not depend on the thread count (rows and tiles are independent). */
static void thread_counts_give_the_same_bits(void **state) {
    (void)state;
    int keep = nb_get_num_threads();
    nb_compiled *c;
    nb_graph *g = trace1(f_layer_norm, 3000, &c);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(64, 3000), NB_F32));
    nb_set_num_threads(1);
    nb_tensor *one = run1(c, x);
    nb_set_num_threads(3);
    nb_tensor *three = run1(c, x);
    nb_set_num_threads(keep);
    assert_true(same_bits(one, three, "1 vs 3 threads"));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* The memory plan: buffers reused across steps (an arena smaller than the intermediates), an
 * elementwise kernel writing over its dead input in place, no overlap of values live together. */
static void plan_reuses_and_works_in_place(void **state) {
    (void)state;
    nb_tensor *w = NBT(nb_randn(NB_SHAPE(64, 64), NB_F32));
    nb_graph *g = nb_graph_begin("chain");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 64)));
    nb_tensor *t = x;
    for (int i = 0; i < 6; i++) t = nb_tanh(nb_add(nb_matmul(t, w), 0.5)); /* matmul, then a kernel in place */
    assert_int_equal(nb_graph_output(g, "y", nb_sum(t, NULL, 0, false)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(32, 64), NB_F32));
    nb_tensor *want = xv;
    for (int i = 0; i < 6; i++) want = nb_tanh(nb_add(nb_matmul(want, w), 0.5));
    assert_true(same_bits(nb_sum(want, NULL, 0, false), run1(c, xv), "chain"));
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
    int64_t one = 32 * 64 * 4;
    /* op by op: six matmul, add and tanh results each; the plan writes the six matmul results
     * and five kernel results (the last add, tanh and the sum are one kernel) */
    assert_int_equal(st.intermediate_bytes, 18 * one);
    assert_int_equal(st.materialized_bytes, 11 * one);
    assert_true(st.live_bytes <= st.arena_bytes);
    assert_true(st.arena_bytes <= 2 * one);            /* in place: each kernel over its matmul's buffer */
    char why[256];
    assert_true(nb__mplan_check(&c->run.mem, c->g->n * NB_MAX_OUTS, why, sizeof why));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* run_into: an update written over its own parameters in place (same buffers, eager's values),
 * a destination read later by another step copied in at the end instead, bad destinations. */
static void run_into_updates_in_place(void **state) {
    (void)state;
    nb_tensor *p = NBT(nb_randn(NB_SHAPE(300, 7), NB_F32)), *m = NBT(nb_zeros(NB_SHAPE(300, 7), NB_F32));
    nb_graph *g = nb_graph_begin("update");
    nb_tensor *gp = NBT(nb_graph_param(g, "p", p)), *gm = NBT(nb_graph_param(g, "m", m));
    nb_tensor *gr = NBT(nb_graph_input(g, "g", NB_F32, NB_SHAPE(300, 7)));
    nb_tensor *nm = nb_add(nb_mul(gm, 0.9), gr);
    assert_int_equal(nb_graph_output(g, "p", nb_sub(gp, nb_mul(nm, 0.01))), NB_OK);
    assert_int_equal(nb_graph_output(g, "m", nm), NB_OK);
    assert_int_equal(nb_graph_output(g, "norm", nb_sum(nb_square(gp), NULL, 0, false)), NB_OK); /* reads old p */
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *grad = NBT(nb_randn(NB_SHAPE(300, 7), NB_F32));
    for (int step = 0; step < 3; step++) {
        nb_tensor *wm = nb_add(nb_mul(nb_clone(m), 0.9), grad), *wp = nb_sub(nb_clone(p), nb_mul(wm, 0.01));
        nb_tensor *wn = nb_sum(nb_square(p), NULL, 0, false);
        void *pd = nb_data_ptr(p), *md = nb_data_ptr(m);
        nb_tensor *outs[3] = {p, m, NULL};
        assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"g"}, &grad, 3, outs), NB_OK);
        assert_ptr_equal(nb_data_ptr(p), pd);
        assert_ptr_equal(nb_data_ptr(m), md);
        assert_true(same_bits(wp, p, "p"));
        assert_true(same_bits(wm, m, "m"));
        assert_true(same_bits(wn, outs[2], "norm of the old p"));
    }
    /* bad destinations: checked before anything runs */
    nb_tensor *small = NBT(nb_zeros(NB_SHAPE(3), NB_F32)), *ints = NBT(nb_zeros(NB_SHAPE(300, 7), NB_I32));
    nb_tensor *bad[3][3] = {{small, NULL, NULL}, {ints, NULL, NULL}, {p, p, NULL}};
    nb_status want[3] = {NB_ERR_SHAPE, NB_ERR_DTYPE, NB_ERR_ARG};
    nb_tensor *before = NBT(nb_clone(p));
    for (int i = 0; i < 3; i++) {
        assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"g"}, &grad, 3, bad[i]), want[i]);
        assert_non_null(strstr(nb_last_message(), "compiled_run"));
        nb_clear_error();
    }
    assert_true(same_bits(before, p, "p untouched by refused runs"));
    nb_tensor *tracked = NBT(nb_zeros(NB_SHAPE(300, 7), NB_F32));
    assert_int_equal(nb_set_requires_grad(tracked, true), NB_OK);
    assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"g"}, &grad, 1, (nb_tensor *[]){tracked}),
                     NB_ERR_STATE);
    nb_clear_error();
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Found by a break-it trial: a kernel's f32 [2, 4] output placed over a dying f64 [1, 4] load it
 * reads broadcast (as many bytes): in place only over a load of the output's own shape. */
static void in_place_never_over_a_broadcast_load(void **state) {
    (void)state;
    nb_tensor *xv = NBT(nb_from_data((double[]){1, 2, 3, 4, 5, 7, 9, 11}, NB_SHAPE(2, 4), NB_F64));
    nb_graph *g = nb_graph_begin("bcast");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F64, NB_SHAPE(2, 4)));
    nb_tensor *d = nb_cast(nb_sub(x, nb_mean(x, NB_AXES(0), true)), NB_F32);
    assert_int_equal(nb_graph_output(g, "y", nb_sum(d, NB_AXES(0), false)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *want = nb_sum(nb_cast(nb_sub(xv, nb_mean(xv, NB_AXES(0), true)), NB_F32), NB_AXES(0), false);
    assert_true(same_bits(want, run1(c, xv), "broadcast load"));
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Found by a break-it trial: destinations receive what the graph computed from the arguments as
 * they were, whatever else is written (an output that is the param itself; a swap of two params;
 * a view of a param); constant outputs are copies; stride-0 or overlapping destinations, and ones
 * in a constant's memory, are refused before anything runs; more than 96 outputs run. */
static void destinations_see_the_arguments_as_they_were(void **state) {
    (void)state;
    nb_tensor *w = NBT(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32)), *d = NBT(nb_zeros(NB_SHAPE(3), NB_F32));
    nb_tensor *dt = NBT(nb_zeros(NB_SHAPE(3), NB_F32));
    nb_graph *g = nb_graph_begin("sgd");
    nb_tensor *gw = NBT(nb_graph_param(g, "w", w));
    assert_int_equal(nb_graph_output(g, "w_new", nb_sub(gw, 0.5)), NB_OK);
    assert_int_equal(nb_graph_output(g, "w_old", gw), NB_OK);
    assert_int_equal(nb_graph_output(g, "w_flip", nb_flip(gw, NULL, 0)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    nb_tensor *o[3] = {w, d, dt};
    assert_int_equal(nb_compiled_run_into(c, 0, NULL, NULL, 3, o), NB_OK);
    assert_true(same_bits(NBT(nb_from_data((float[]){0.5f, 1.5f, 2.5f}, NB_SHAPE(3), NB_F32)), w, "w"));
    assert_true(same_bits(NBT(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32)), d, "old w"));
    assert_true(same_bits(NBT(nb_from_data((float[]){3, 2, 1}, NB_SHAPE(3), NB_F32)), dt, "old w flipped"));
    /* the old w and its flip returned instead (a helper's case: they came back as views of w,
     * showing the new values): copies of what they were */
    nb_tensor *ret[3] = {w, NULL, NULL};
    assert_int_equal(nb_compiled_run_into(c, 0, NULL, NULL, 3, ret), NB_OK);
    assert_true(same_bits(NBT(nb_from_data((float[]){0.0f, 1.0f, 2.0f}, NB_SHAPE(3), NB_F32)), w, "w, again"));
    assert_true(same_bits(NBT(nb_from_data((float[]){0.5f, 1.5f, 2.5f}, NB_SHAPE(3), NB_F32)), NBT(ret[1]), "old w returned"));
    assert_true(same_bits(NBT(nb_from_data((float[]){2.5f, 1.5f, 0.5f}, NB_SHAPE(3), NB_F32)), NBT(ret[2]), "flip returned"));
    assert_ptr_not_equal(nb_data_ptr(ret[1]), nb_data_ptr(w));
    nb_compiled_release(c);
    nb_graph_release(g);
    /* a swap */
    nb_tensor *a = NBT(nb_from_data((float[]){1, 2}, NB_SHAPE(2), NB_F32)), *b = NBT(nb_from_data((float[]){10, 20}, NB_SHAPE(2), NB_F32));
    g = nb_graph_begin("swap");
    nb_tensor *ga = NBT(nb_graph_param(g, "a", a)), *gb = NBT(nb_graph_param(g, "b", b));
    assert_int_equal(nb_graph_output(g, "a_new", gb), NB_OK);
    assert_int_equal(nb_graph_output(g, "b_new", ga), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    nb_tensor *o2[2] = {a, b};
    assert_int_equal(nb_compiled_run_into(c, 0, NULL, NULL, 2, o2), NB_OK);
    assert_true(nbt_at(a, 0) == 10 && nbt_at(a, 1) == 20 && nbt_at(b, 0) == 1 && nbt_at(b, 1) == 2);
    nb_compiled_release(c);
    nb_graph_release(g);
    /* a constant output is a copy; a destination in a constant's memory is refused */
    nb_tensor *k = NBT(nb_from_data((float[]){1, 2, 3}, NB_SHAPE(3), NB_F32));
    g = nb_graph_begin("const");
    nb_tensor *gk = NBT(nb_graph_constant(g, k));
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(3)));
    assert_int_equal(nb_graph_output(g, "k", gk), NB_OK);
    assert_int_equal(nb_graph_output(g, "y", nb_add(x, gk)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    nb_tensor *xv = NBT(nb_ones(NB_SHAPE(3), NB_F32)), *r[2];
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 2, r), NB_OK);
    assert_int_equal(nb_fill_(r[0], 100), NB_OK);
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 2, r), NB_OK);
    assert_true(nbt_at(r[1], 0) == 2 && nbt_at(r[1], 2) == 4);
    nb_tensor *into[2] = {NULL, k};
    assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"x"}, &xv, 2, into), NB_ERR_ARG);
    assert_non_null(strstr(nb_last_message(), "constant"));
    nb_clear_error();
    nb_tensor *zero_stride = NBT(nb_expand(NBT(nb_zeros(NB_SHAPE(1), NB_F32)), NB_SHAPE(3)));
    into[1] = zero_stride;
    assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"x"}, &xv, 2, into), NB_ERR_ARG);
    nb_clear_error();
    nb_compiled_release(c);
    nb_graph_release(g);
    /* 120 outputs through nb_compiled_run */
    g = nb_graph_begin("many");
    x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(3)));
    for (int i = 0; i < 120; i++) {
        char nm[16];
        snprintf(nm, sizeof nm, "o%d", i);
        assert_int_equal(nb_graph_output(g, nm, nb_mul(x, (double)i)), NB_OK);
    }
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    nb_tensor *many[120];
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 120, many), NB_OK);
    assert_true(nbt_at(many[119], 0) == 119);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* The report names each kernel's ops and each missed fusion's reason. */
/* ---- kernels compiled at run time ---- */

/* The ops of the edge test, eager and traced alike: every output is one elementwise kernel. */
static void edge_ops(nb_tensor *x, nb_tensor *y, nb_tensor **out) {
    out[0] = nb_gelu(nb_add(nb_mul(x, 1.5), 0.5));                 /* gelu's slow form below -4 */
    out[1] = nb_add(nb_sin(x), nb_mul(nb_cos(x), nb_tan(x)));      /* trig's beyond 2^24 and at inf */
    out[2] = nb_where(nb_gt(x, 0.0), nb_exp(x), nb_add(nb_log1p(nb_abs(x)), nb_expm1(x))); /* past -18, 88 */
    out[3] = nb_add(nb_cast(x, NB_F64), y);                        /* f32 -> f64, a broadcast f64 row */
    out[4] = nb_logical_or(nb_logical_and(nb_ne(x, 0.0), nb_lt(x, 1.0)), nb_logical_not(nb_cast(x, NB_BOOL)));
    out[5] = nb_mul(nb_leaky_relu(nb_clamp(x, -3.0, 2.0), 0.25),   /* softplus's form for beta 1: */
                    nb_add(nb_softplus(x, 2.0, 10.0), nb_softplus(x, 1.0, 5.0))); /* past 5, 86 */
    out[6] = nb_sub(nb_mul(nb_elu(x, 0.5), nb_tanh(x)), nb_square(nb_erf(x))); /* a product into a difference */
    out[7] = nb_add(nb_add(nb_sigmoid(x), nb_silu(x)), nb_gelu_tanh(x)); /* slow forms beyond |x| = 86, 9 */
}
enum { XY_OUTS = 8 }; /* outputs of edge_ops and contraction_chains (compile_xy) */

/* Elementwise kernels compiled at run time (nb_fusion_mode says whether they are; NB_TEST_EXPECT_JIT
 * = 1 / 0 makes the test insist) equal eager bit for bit: over inputs outside the ranged forms'
 * ranges, non-finite ones, signed zeros and subnormals, contiguous, transposed (strided) and
 * broadcast; and the report and stats say how each kernel ran. */
/* The graph of x [B, n] (dtype xdt) and y (dtype ydt, shape ysh, ndim yndim) with outputs o0 .. o7,
 * ops' XY_OUTS results, in *gp; compiled. */
static nb_compiled *compile_xy(const char *name, nb_dtype xdt, int64_t n, nb_dtype ydt, const int64_t *ysh, int yndim,
                               void (*ops)(nb_tensor *, nb_tensor *, nb_tensor **), nb_graph **gp) {
    nb_graph *g = *gp = nb_graph_begin(name);
    nb_tensor *xg = NBT(nb_graph_input(g, "x", xdt, NB_SHAPE(nb_dim("B"), n)));
    nb_tensor *yg = NBT(nb_graph_input(g, "y", ydt, ysh, yndim));
    nb_tensor *og[XY_OUTS];
    ops(xg, yg, og);
    const char *names[XY_OUTS] = {"o0", "o1", "o2", "o3", "o4", "o5", "o6", "o7"};
    for (int i = 0; i < XY_OUTS; i++) assert_int_equal(nb_graph_output(g, names[i], og[i]), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    assert_non_null(c);
    return c;
}

/* Chains where a product meets an addition across two ops, or two transcendental forms read one
 * value: each compiled kernel (barriers only where jit_source.c's needs_barrier puts them), f32 and
 * f64, equals the ops run one by one, bit for bit, where a fused multiply-add or shared code would
 * not. */
static void contraction_chains(nb_tensor *x, nb_tensor *y, nb_tensor **o) {
    o[0] = nb_gelu(nb_add(nb_mul(x, 1.5), 0.5));
    o[1] = nb_add(nb_exp(x), nb_mul(x, y));
    o[2] = nb_add(nb_mul(nb_tanh(x), y), x);
    o[3] = nb_add(nb_sigmoid(y), nb_neg(nb_mul(x, y)));
    o[4] = nb_mul(nb_exp(x), nb_tanh(x));
    o[5] = nb_add(nb_silu(x), y);
    o[6] = nb_add(nb_maximum(nb_mul(x, y), nb_scalar(0.3, NB_F32)), nb_erf(x));
    o[7] = nb_sub(nb_square(x), nb_exp(nb_mul(y, 0.25)));
}

/* Products that reach an addition through ops that pass a value on (where, abs of a square, a
 * cast there and back, relu, a condition always true), which the compiler sees through or, in
 * loops it does not vectorize (f64 forms call libm), turns into branches with the addition copied
 * into each. */
static void passthrough_chains(nb_tensor *x, nb_tensor *y, nb_tensor **o) {
    nb_tensor *c = nb_gt(y, 0.0), *p = nb_where(c, nb_mul(x, y), y);
    o[0] = nb_exp(nb_add(p, y));
    o[1] = nb_sin(nb_sub(y, p));
    o[2] = nb_pow(nb_abs(nb_add(p, y)), 1.5);
    o[3] = nb_exp(nb_add(nb_cast(nb_cast(nb_mul(x, y), NB_F64), nb_dtype_of(x)), y));
    o[4] = nb_exp(nb_add(nb_abs(nb_square(x)), y));
    o[5] = nb_tanh(nb_add(nb_where(nb_logical_or(c, nb_logical_not(c)), nb_mul(x, y), y), y));
    o[6] = nb_gelu(nb_sub(y, nb_abs(nb_square(x))));
    o[7] = nb_tanh(nb_add(nb_relu(nb_mul(x, y)), y));
}

static void contraction_sites_equal_eager(void **state) {
    (void)state;
    void (*const sets[2])(nb_tensor *, nb_tensor *, nb_tensor **) = {contraction_chains, passthrough_chains};
    for (int set = 0; set < 2; set++)
        for (int dt = 0; dt < 2; dt++) {
            nb_dtype d = dt ? NB_F64 : NB_F32;
            nb_graph *g;
            nb_compiled *c = compile_xy("chains", d, 64, d, NB_SHAPE(nb_dim("B"), 64), sets[set], &g);
            nb_manual_seed(21);
            nb_tensor *args[2] = {NBT(nb_mul(nb_randn(NB_SHAPE(257, 64), d), 2.0)),
                                  NBT(nb_mul(nb_randn(NB_SHAPE(257, 64), d), 2.0))};
            nb_tensor *eager[XY_OUTS], *out[XY_OUTS];
            sets[set](args[0], args[1], eager);
            assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"x", "y"}, args, XY_OUTS, out), NB_OK);
            int bad = 0;
            for (int i = 0; i < XY_OUTS; i++) {
                char what[48];
                snprintf(what, sizeof what, "set %d, %s, chain %d", set, nb_dtype_name(d), i);
                bad += !same_bits(NBT(eager[i]), out[i], what);
            }
            assert_int_equal(bad, 0);
            nb_compiled_release(c);
            nb_graph_release(g);
        }
}

static void compiled_kernels_equal_eager_at_the_edges(void **state) {
    (void)state;
    bool jit = strstr(nb_fusion_mode(), "compiled at run time") != NULL;
    const char *expect = getenv("NB_TEST_EXPECT_JIT");
    if (expect) assert_int_equal(jit, strcmp(expect, "0") != 0);
    nb_graph *g;
    nb_compiled *c = compile_xy("edges", NB_F32, 41, NB_F64, NB_SHAPE(41), edge_ops, &g);
    const float special[] = {-4.5f, -4.0f, -3.9999998f, -14.2f, -30.0f, 0x1p24f, -0x1.000002p24f, 3e30f, INFINITY,
                             -INFINITY, NAN, -0.0f, 0.0f, 0x1p-140f, -0x1p-130f, 1.0f, 88.8f, -104.0f, 44.5f, -86.5f,
                             9.0f, -9.000001f};
    nb_manual_seed(11);
    nb_tensor *x = NBT(nb_mul(nb_randn(NB_SHAPE(300, 41), NB_F32), 3.0)); /* about 10% below -4 */
    float *xp = nb_data_ptr(x);
    for (int i = 0; i < 300 * 41; i += 7) xp[i] = special[(i / 7) % (int)(sizeof special / sizeof special[0])];
    nb_tensor *y = NBT(nb_randn(NB_SHAPE(41), NB_F64));
    nb_tensor *xt = NBT(nb_transpose(nb_contiguous(nb_transpose(x, 0, 1)), 0, 1)); /* the same values, strided */
    nb_tensor *xb = NBT(nb_broadcast_to(nb_slice(x, 1, 0, 1, 1), NB_SHAPE(300, 41))); /* stride 0 along rows */
    nb_tensor *args[3][2] = {{x, y}, {xt, y}, {xb, y}};
    for (int a = 0; a < 3; a++) {
        nb_tensor *eager[XY_OUTS], *out[XY_OUTS];
        edge_ops(args[a][0], args[a][1], eager);
        assert_int_equal(nb_compiled_run(c, 2, (const char *[]){"x", "y"}, args[a], XY_OUTS, out), NB_OK);
        for (int i = 0; i < XY_OUTS; i++) {
            char what[32];
            snprintf(what, sizeof what, "input %d output %d", a, i);
            assert_true(same_bits(NBT(eager[i]), out[i], what));
        }
        nb_compiled_stats st;
        assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
        assert_int_equal(st.kernels, XY_OUTS); /* one per output (no sibling fusion) */
        assert_int_equal(st.kernels_compiled, jit ? XY_OUTS : 0);
    }
    char *r = nb_compiled_report(c);
    assert_non_null(strstr(r, jit ? "the last run: code compiled at run time" : "the last run: the interpreter"));
    nb_free_string(r);
    nb_compiled_release(c);
    nb_graph_release(g);
    /* in place: the result written over its own argument while the slow forms re-read it */
    g = nb_graph_begin("edges_in_place");
    nb_tensor *xg = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 41)));
    assert_int_equal(nb_graph_output(g, "y", nb_add(nb_gelu(nb_add(nb_mul(xg, 1.5), 0.5)), nb_sin(xg))), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    c = nb_graph_compile(g, NB_CPU);
    nb_tensor *want = NBT(nb_add(nb_gelu(nb_add(nb_mul(x, 1.5), 0.5)), nb_sin(x)));
    nb_tensor *dst = NBT(nb_clone(x));
    assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"x"}, &dst, 1, &dst), NB_OK);
    assert_true(same_bits(want, dst, "in place"));
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(c, &st), NB_OK);
    assert_int_equal(st.kernels_compiled, jit ? 1 : 0);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* Kernels whose source depends on an op's parameters (softplus is ranged only for beta = 1) are
 * told apart in the run-time compiler's cache: graphs alike but for beta, compiled one after the
 * other in either order, each equal eager bit for bit (a beta-1 kernel reused for beta 2 gave
 * beta 1's values). */
static void kernels_differ_by_parameters(void **state) {
    (void)state;
    const double orders[2][3] = {{1.0, 2.0, 1.0}, {0.5, 1.0, 0.5}};
    nb_manual_seed(13);
    nb_tensor *x = NBT(nb_mul(nb_randn(NB_SHAPE(3001), NB_F32), 4.0));
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 3; i++) {
            double beta = orders[o][i];
            nb_graph *g = nb_graph_begin("softplus_beta");
            nb_tensor *xg = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("N"))));
            assert_int_equal(nb_graph_output(g, "y", nb_neg(nb_softplus(xg, beta, 20.0))), NB_OK);
            assert_int_equal(nb_graph_end(g), NB_OK);
            nb_compiled *c = nb_graph_compile(g, NB_CPU);
            assert_non_null(c);
            char what[48];
            snprintf(what, sizeof what, "softplus beta %g (order %d)", beta, o);
            assert_true(same_bits(NBT(nb_neg(nb_softplus(x, beta, 20.0))), run1(c, x), what));
            nb_compiled_release(c);
            nb_graph_release(g);
        }
}

static nb_tensor *softplus_1_20(nb_tensor *x) { return nb_softplus(x, 1.0, 20.0); }
static nb_tensor *elu_1_5(nb_tensor *x) { return nb_elu(x, 1.5); }

/* Each ranged f32 form's kernel writing its result over its own input (run_into with the input as
 * the destination), compiled and interpreted alike: the inputs outside the range must be read
 * before the form overwrites them (the interpreter runs the built-in loop from x into x). */
static void ranged_forms_in_place(void **state) {
    (void)state;
    nb_tensor *(*const ops[])(nb_tensor *) = {nb_sigmoid, nb_silu,      nb_exp,        nb_expm1, elu_1_5,
                                              nb_tanh,    nb_gelu_tanh, softplus_1_20, nb_gelu,  nb_sin};
    const float special[] = {INFINITY, -INFINITY, NAN, 90.0f, -87.0f, -86.5f, 86.5f, -104.0f, 3e30f, -5.0f};
    nb_manual_seed(12);
    nb_tensor *x = NBT(nb_mul(nb_randn(NB_SHAPE(3000), NB_F32), 20.0));
    float *xp = nb_data_ptr(x);
    for (int i = 0; i < 3000; i += 5) xp[i] = special[(i / 5) % (int)(sizeof special / sizeof special[0])];
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        nb_graph *g = nb_graph_begin("ranged_in_place");
        nb_tensor *xg = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("N"))));
        nb_tensor *yg = ops[k](xg);
        assert_int_equal(nb_graph_output(g, "z", nb_mul(yg, 3.0)), NB_OK);
        assert_int_equal(nb_graph_output(g, "y", yg), NB_OK);
        assert_int_equal(nb_graph_end(g), NB_OK);
        nb_compiled *c = nb_graph_compile(g, NB_CPU);
        assert_non_null(c);
        nb_tensor *want = NBT(ops[k](x)), *want3 = NBT(nb_mul(want, 3.0));
        nb_tensor *dst = NBT(nb_clone(x)), *z = NBT(nb_empty(NB_SHAPE(3000), NB_F32));
        nb_tensor *outs[2] = {z, dst};
        assert_int_equal(nb_compiled_run_into(c, 1, (const char *[]){"x"}, &dst, 2, outs), NB_OK);
        assert_true(same_bits(want, dst, "ranged form in place"));
        assert_true(same_bits(want3, z, "ranged form in place, its product"));
        nb_compiled_release(c);
        nb_graph_release(g);
    }
}

static void report_names_kernels_and_misses(void **state) {
    (void)state;
    nb_graph *g = nb_graph_begin("rep");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 16)));
    nb_tensor *h = nb_relu(nb_add(x, 1.0)), *col = nb_sum(nb_exp(h), NB_AXES(0), false);
    assert_int_equal(nb_graph_output(g, "col", col), NB_OK);
    assert_int_equal(nb_graph_output(g, "sm", nb_softmax(h, -1)), NB_OK);
    assert_int_equal(nb_graph_output(g, "max", nb_max(nb_exp(h), NB_AXES(0), false)), NB_OK);
    assert_int_equal(nb_graph_output(g, "centred", nb_sub(nb_sqrt(h), col)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    char *r = nb_compiled_report(c);
    assert_non_null(r);
    assert_non_null(strstr(r, "kernel 0"));
    assert_non_null(strstr(r, "relu"));
    assert_non_null(strstr(r, "row reductions"));
    assert_non_null(strstr(r, "column reductions"));
    assert_non_null(strstr(r, "max: a reduction over axes neither trailing nor leading (or a leading max, min or prod)"));
    assert_non_null(strstr(r, "sub: it reads a column reduction along the reduced axes (a second pass)"));
    assert_non_null(strstr(r, "memory: planned at the first run"));
    nb_free_string(r);
    nb_tensor *xv = NBT(nb_randn(NB_SHAPE(4, 16), NB_F32)), *y[4];
    assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &xv, 4, y), NB_OK);
    r = nb_compiled_report(c);
    assert_non_null(strstr(r, "memory of the last run"));
    nb_free_string(r);
    char *dot = nb_compiled_to_dot(c);
    assert_non_null(strstr(dot, "fused kernel 0"));
    nb_free_string(dot);
    nb_compiled_stats st;
    assert_int_equal(nb_compiled_stats_get(NULL, &st), NB_ERR_NULL);
    assert_null(nb_compiled_report(NULL));
    nb_clear_error();
    nb_compiled_release(c);
    nb_graph_release(g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(random_programs_match_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(row_functions_are_one_kernel, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(short_rows_run_in_groups, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(broadcast_into_multi_axis_reduction, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(kernel_over_transposed_stepped_view, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(result_into_negative_stride_slice, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(long_rows_fall_back_op_by_op, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(column_sums_are_one_kernel, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(column_kernels_broadcast_and_fall_back, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(thread_counts_give_the_same_bits, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(plan_reuses_and_works_in_place, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(run_into_updates_in_place, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(report_names_kernels_and_misses, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(in_place_never_over_a_broadcast_load, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(destinations_see_the_arguments_as_they_were, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(compiled_kernels_equal_eager_at_the_edges, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(contraction_sites_equal_eager, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(ranged_forms_in_place, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(kernels_differ_by_parameters, nbt_setup, nbt_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
