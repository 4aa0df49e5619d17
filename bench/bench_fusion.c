/*
 * bench_fusion.c — compiled (fused) graphs against the same ops run eagerly
 * one by one and against the memory-copy bandwidth measured in the same run:
 *
 *   gelu       y = gelu(x * 1.5 + 0.5) over N f32 (default 64M): 1 read + 1 write
 *   softmax    softmax over the rows of [R, C] f32 (default 8192 x 4096)
 *   layer_norm layer_norm over the rows of [R, C] f32 (no affine)
 *   col_sum    sum(relu(x) * 0.5, axis 0) over [R, C] f32: the columns summed (a bias gradient's
 *              shape): 1 read, so its bandwidth counts the bytes read only
 *   adam       the Adam update of a [256, 784] f32 parameter (its moments and
 *              gradient), 13 ops: the compiled plan writes p, m, v in place
 *
 * each run by a compiled plan into a fresh output (nabla-fused) and into a
 * caller's tensor (nabla-fused-into: nb_compiled_run_into, so no fresh output
 * pages; the kernel alone), and eagerly; plus the compile latency of each
 * graph (first nb_graph_compile, a miss), the cached latency (compiling an
 * equal graph again: a hit), the first run's time (it builds the kernels the
 * CPU backend compiles at run time, or loads them from NB_JIT_CACHE), and the memory
 * plan of the Fashion-MNIST MLP's forward and backward pass (784-256-128-10,
 * relu, cross-entropy, the six parameter gradients; batch 128): the bytes
 * its ops would allocate one by one against the plan's arena.
 *
 *   bench_fusion              NB_BENCH_THREADS (2), NB_BENCH_REPS (5), NB_BENCH_N, NB_BENCH_ROWS, NB_BENCH_COLS
 *   NB_BENCH_FILTER=softmax   only the cases whose name contains the text
 *
 * The copy baseline is the faster of memcpy split in one call per thread and in 256 KiB pieces.
 * Output: one line per case, "case=<name> impl=<nabla-fused|nabla-fused-into|nabla-eager|memcpy> ms=<median> min=.. max=..
 * gbps=<bytes moved / time>" (bench_fusion.sh reads them), then the compile latencies.
 */
#include "bench_util.h"
#include "nabla.h"

typedef struct fcase {
    const char *name;
    nb_tensor *(*fn)(nb_tensor *x); /* the computation, eager or traced alike */
    int rank;                       /* 1: [N]; 2: [R, C] */
    int passes;                     /* bytes moved per byte of x: 2 (read + write), 1 (read) */
} fcase;

static nb_tensor *f_gelu(nb_tensor *x) { return nb_gelu(nb_add(nb_mul(x, 1.5), 0.5)); }
static nb_tensor *f_softmax(nb_tensor *x) { return nb_softmax(x, -1); }
static nb_tensor *f_layer_norm(nb_tensor *x) { return nb_layer_norm(x, 1, NULL, NULL, 1e-5); }
static nb_tensor *f_col_sum(nb_tensor *x) { return nb_sum(nb_mul(nb_relu(x), 0.5), NB_AXES(0), false); }

typedef struct run_ctx {
    const fcase *c;
    nb_compiled *plan;
    nb_tensor *x, *y; /* y: run_compiled_into's destination */
} run_ctx;

static void check(nb_tensor *t) {
    if (!t) {
        fprintf(stderr, "bench_fusion: %s\n", nb_last_message());
        exit(1);
    }
}

static void run_eager(void *p) {
    run_ctx *r = p;
    nb_scope_begin();
    check(r->c->fn(r->x));
    nb_scope_end();
}

static void run_compiled(void *p) {
    run_ctx *r = p;
    nb_tensor *y = NULL;
    if (nb_compiled_run(r->plan, 1, (const char *[]){"x"}, &r->x, 1, &y) != NB_OK) check(NULL);
    nb_release(y);
}

/* Into a caller's tensor (NumPy's out=, JAX's donation): the kernel alone, no fresh output pages. */
static void run_compiled_into(void *p) {
    run_ctx *r = p;
    if (nb_compiled_run_into(r->plan, 1, (const char *[]){"x"}, &r->x, 1, &r->y) != NB_OK) check(NULL);
}

static nb_graph *trace(const fcase *c, const int64_t *shape) {
    nb_graph *g = nb_graph_begin(c->name);
    int64_t sym[2] = {nb_dim("B"), shape[1]}; /* the leading dim symbolic, as a batch is */
    nb_tensor *x = nb_graph_input(g, "x", NB_F32, sym, c->rank);
    nb_graph_output(g, "y", c->fn(x));
    nb_graph_end(g);
    return g;
}

static void report(const char *name, const char *impl, bench_stat s, double bytes) {
    printf("case=%s impl=%s ms=%.3f min=%.3f max=%.3f gbps=%.1f\n", name, impl, s.median * 1e3, s.min * 1e3,
           s.max * 1e3, bytes / s.median / 1e9);
}

/* The MLP's forward + backward graph (B = 128), run once; prints its memory plan. */
static void mlp_memory(void) {
    const int64_t sizes[4] = {784, 256, 128, 10};
    nb_tensor *w[3], *b[3];
    for (int l = 0; l < 3; l++) { /* before the trace: inside it, randn would be a traced draw */
        w[l] = nb_randn(NB_SHAPE(sizes[l + 1], sizes[l]), NB_F32);
        b[l] = nb_zeros(NB_SHAPE(sizes[l + 1]), NB_F32);
    }
    nb_graph *g = nb_graph_begin("mlp_fwd_bwd");
    nb_tensor *x = nb_graph_input(g, "x", NB_F32, NB_SHAPE(nb_dim("B"), 784));
    nb_tensor *y = nb_graph_input(g, "y", NB_I64, NB_SHAPE(nb_dim("B")));
    nb_tensor *h = x, *p[6];
    for (int l = 0; l < 3; l++) {
        char nw[8], nbias[8];
        snprintf(nw, sizeof nw, "w%d", l);
        snprintf(nbias, sizeof nbias, "b%d", l);
        p[2 * l] = nb_graph_param(g, nw, w[l]);
        p[2 * l + 1] = nb_graph_param(g, nbias, b[l]);
        h = nb_linear(h, p[2 * l], p[2 * l + 1]);
        if (l < 2) h = nb_relu(h);
    }
    nb_tensor *loss = nb_cross_entropy(h, y, NB_CROSS_ENTROPY_DEFAULTS), *gr[6];
    check(loss);
    if (nb_graph_grad(loss, 6, p, gr) != NB_OK) check(NULL);
    nb_graph_output(g, "loss", loss);
    for (int i = 0; i < 6; i++) {
        char nm[8];
        snprintf(nm, sizeof nm, "g%d", i);
        nb_graph_output(g, nm, gr[i]);
    }
    nb_graph_end(g);
    nb_compiled *c = nb_graph_compile(g, NB_CPU);
    check((nb_tensor *)c);
    nb_tensor *xv = nb_randn(NB_SHAPE(128, 784), NB_F32), *yv = nb_zeros(NB_SHAPE(128), NB_I64), *out[7];
    if (nb_compiled_run(c, 2, (const char *[]){"x", "y"}, (nb_tensor *[]){xv, yv}, 7, out) != NB_OK) check(NULL);
    nb_compiled_stats st;
    nb_compiled_stats_get(c, &st);
    printf("memory case=mlp_fwd_bwd intermediates=%lld materialized=%lld live=%lld arena=%lld kernels=%d steps=%d "
           "ops=%d\n", (long long)st.intermediate_bytes, (long long)st.materialized_bytes, (long long)st.live_bytes,
           (long long)st.arena_bytes, st.kernels, st.steps, st.ops);
    for (int i = 0; i < 7; i++) nb_release(out[i]);
    for (int l = 0; l < 3; l++) {
        nb_release(w[l]);
        nb_release(b[l]);
    }
    nb_release(xv);
    nb_release(yv);
    nb_compiled_release(c);
    nb_graph_release(g);
}

/* ---- the Adam update (torch.optim.Adam's step on one parameter, as `nabla train --compiled` traces it) ---- */

typedef struct adam_ctx {
    nb_tensor *v[4]; /* p, g, m, v */
    nb_compiled *plan;
} adam_ctx;

static void adam_ops(nb_tensor *const *in, nb_tensor **out) {
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, c1 = 1 - 0.9 * 0.9, c2 = 1 - 0.999 * 0.999; /* step 2 */
    nb_tensor *p = in[0], *g = in[1];
    out[1] = nb_add(nb_mul(in[2], b1), nb_mul(g, 1 - b1));
    out[2] = nb_add(nb_mul(in[3], b2), nb_mul(nb_square(g), 1 - b2));
    nb_tensor *den = nb_add(nb_sqrt(nb_div(out[2], c2)), eps);
    out[0] = nb_sub(p, nb_mul(nb_div(nb_div(out[1], c1), den), lr));
}

static void run_adam_eager(void *q) {
    adam_ctx *a = q;
    nb_scope_begin();
    nb_tensor *out[3];
    adam_ops(a->v, out);
    check(out[0]);
    nb_scope_end();
}

static void run_adam_fused(void *q) { /* new p, m, v written over p, m, v (in place, as training does) */
    adam_ctx *a = q;
    nb_tensor *dst[3] = {a->v[0], a->v[2], a->v[3]};
    if (nb_compiled_run_into(a->plan, 4, (const char *[]){"p", "g", "m", "v"}, a->v, 3, dst) != NB_OK) check(NULL);
}

/* The update of the MLP's first weight, [256, 784] f32 (200,704 parameters): eager op by op against
 * the compiled plan (one fused kernel, three outputs in place). */
static void adam_case(int reps) {
    int64_t shape[2] = {256, 784};
    nb_manual_seed(3);
    adam_ctx a;
    for (int i = 0; i < 4; i++) check(a.v[i] = nb_randn(shape, 2, NB_F32));
    nb_tensor *v3 = nb_abs(a.v[3]);
    nb_release(a.v[3]);
    a.v[3] = v3;
    nb_graph *g = nb_graph_begin("adam");
    nb_tensor *in[4], *out[3];
    const char *names[4] = {"p", "g", "m", "v"}, *onames[3] = {"p_new", "m_new", "v_new"};
    for (int i = 0; i < 4; i++) in[i] = nb_graph_input(g, names[i], NB_F32, shape, 2);
    adam_ops(in, out);
    for (int i = 0; i < 3; i++) nb_graph_output(g, onames[i], out[i]);
    nb_graph_end(g);
    check((nb_tensor *)(a.plan = nb_graph_compile(g, NB_CPU)));
    run_adam_fused(&a); /* builds the kernel */
    double bytes = 7.0 * 256 * 784 * sizeof(float); /* 4 reads, 3 writes */
    report("adam", "nabla-fused", bench_run(run_adam_fused, &a, 2, reps, 20), bytes);
    report("adam", "nabla-eager", bench_run(run_adam_eager, &a, 2, reps, 20), bytes);
    nb_compiled_stats st;
    nb_compiled_stats_get(a.plan, &st);
    printf("adam: %d kernel(s), %d compiled at run time (%s)\n", st.kernels, st.kernels_compiled, nb_fusion_mode());
    nb_compiled_release(a.plan);
    nb_graph_release(g);
    for (int i = 0; i < 4; i++) nb_release(a.v[i]);
}

int main(void) {
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 5);
    int64_t n = bench_env_int("NB_BENCH_N", 64 << 20), rows = bench_env_int("NB_BENCH_ROWS", 8192),
            cols = bench_env_int("NB_BENCH_COLS", 4096);
    const char *filter = getenv("NB_BENCH_FILTER");
    nb_set_num_threads(threads);
    printf("# cpu: %s; simd %s; %d threads; median of %d after 2 warm-up calls\n", bench_cpu_model(),
           nb_cpu_simd_level(), threads, reps);
    const fcase cases[] = {{"gelu", f_gelu, 1, 2}, {"softmax", f_softmax, 2, 2}, {"layer_norm", f_layer_norm, 2, 2},
                           {"col_sum", f_col_sum, 2, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const fcase *c = &cases[i];
        if (filter && !strstr(c->name, filter)) continue;
        int64_t shape[2] = {c->rank == 1 ? n : rows, cols};
        size_t bytes = (size_t)(c->rank == 1 ? n : rows * cols) * sizeof(float);
        nb_manual_seed(1);
        run_ctx r = {.c = c, .x = nb_randn(shape, c->rank, NB_F32)};
        check(r.x);
        /* the copy baseline: the faster of one memcpy per thread and memcpy in 256 KiB pieces */
        bench_copy cc = {malloc(bytes), malloc(bytes), bytes, threads, 0};
        memset((char *)cc.src, 1, bytes);
        memset(cc.dst, 0, bytes);
        bench_stat whole = bench_run(bench_copy_run, &cc, 2, reps, 1);
        cc.piece = (size_t)256 << 10;
        bench_stat pieces = bench_run(bench_copy_run, &cc, 2, reps, 1);
        report(c->name, "memcpy", whole.median < pieces.median ? whole : pieces, 2.0 * (double)bytes);
        double moved = c->passes * (double)bytes;
        free(cc.dst);
        free((char *)cc.src);
        nb_graph *g = trace(c, shape);
        double t0 = bench_now();
        r.plan = nb_graph_compile(g, NB_CPU);
        double first = bench_now() - t0;
        check((nb_tensor *)r.plan);
        nb_graph *g2 = trace(c, shape);
        t0 = bench_now();
        nb_compiled *again = nb_graph_compile(g2, NB_CPU);
        double cached = bench_now() - t0;
        t0 = bench_now();
        run_compiled(&r); /* the first run builds the run-time compiled kernels (or loads them from disk) */
        double first_run = bench_now() - t0;
        report(c->name, "nabla-fused", bench_run(run_compiled, &r, 2, reps, 1), moved);
        r.y = c->fn(r.x); /* a destination of the result's shape */
        check(r.y);
        report(c->name, "nabla-fused-into", bench_run(run_compiled_into, &r, 2, reps, 1), moved);
        nb_release(r.y);
        report(c->name, "nabla-eager", bench_run(run_eager, &r, 2, reps, 1), moved);
        printf("compile case=%s first_ms=%.3f cached_ms=%.3f first_run_ms=%.3f\n", c->name, first * 1e3, cached * 1e3,
               first_run * 1e3);
        nb_compiled_release(again);
        nb_compiled_release(r.plan);
        nb_graph_release(g2);
        nb_graph_release(g);
        nb_release(r.x);
    }
    if (!filter || strstr("adam", filter)) adam_case(reps);
    if (!filter || strstr("mlp_fwd_bwd", filter)) mlp_memory();
    return 0;
}
