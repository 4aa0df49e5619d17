/*
 * bench_transforms.c — the function transforms on the Fashion-MNIST MLP's
 * loss (784-256-128-10, ReLU, softmax cross-entropy on one-hot labels, f32):
 *   per_example  jit(vmap(grad(loss of one example, every param), x and y at 0)), batch 128:
 *                one gradient per example and param (JAX: jit(vmap(grad)))
 *   grad         jit(grad(mean loss over the batch, every param)), batch 128
 *   vmap_f       jit(vmap(per-example loss)) over 128 examples, against 128 separate calls of
 *                the jitted per-example loss (impl=vmap and impl=loop)
 * Each prints "case=<name> impl=nabla ms=<median> ...", beside peers_transforms.py's JAX lines
 * (bench_transforms.sh runs both and prints the ratios).  Compile latency of the first call
 * and of a cached one too.  Environment: NB_BENCH_THREADS (2), NB_BENCH_REPS (7).
 */
#include "bench_util.h"
#include "nabla.h"

enum { IN = 784, H1 = 256, H2 = 128, OUT = 10, BATCH = 128, NPARAM = 6 };
static const char *const PNAMES[NPARAM] = {"W1", "b1", "W2", "b2", "W3", "b3"};

static nb_tensor *params[NPARAM];

/* -sum(y * log_softmax(relu(relu(x W1 + b1) W2 + b2) W3 + b3)) over the last axis; x [.., 784]. */
static nb_tensor *loss_of(nb_tensor *x, nb_tensor *y, nb_tensor *const *p) {
    nb_tensor *h = nb_relu(nb_add(nb_matmul(x, p[0]), p[1]));
    h = nb_relu(nb_add(nb_matmul(h, p[2]), p[3]));
    nb_tensor *z = nb_add(nb_matmul(h, p[4]), p[5]);
    return nb_neg(nb_sum(nb_mul(y, nb_log_softmax(z, -1)), (int[]){-1}, 1, false));
}

/* The loss Func of one example (batch 0) or the mean over a batch of n. */
static nb_graph *loss_func(int64_t n) {
    nb_graph *f = nb_graph_begin(n ? "mean_loss" : "loss");
    int64_t xs[2] = {n, IN}, ys[2] = {n, OUT};
    nb_tensor *x = nb_graph_input(f, "x", NB_F32, n ? xs : xs + 1, n ? 2 : 1);
    nb_tensor *y = nb_graph_input(f, "y", NB_F32, n ? ys : ys + 1, n ? 2 : 1);
    nb_tensor *p[NPARAM];
    for (int i = 0; i < NPARAM; i++) p[i] = nb_graph_param(f, PNAMES[i], params[i]);
    nb_tensor *l = loss_of(x, y, p);
    nb_graph_output(f, "loss", n ? nb_mean(l, NULL, 0, false) : l);
    if (nb_graph_end(f) != NB_OK) {
        fprintf(stderr, "bench_transforms: %s\n", nb_last_message());
        exit(1);
    }
    return f;
}

typedef struct job {
    nb_compiled *c;
    nb_tensor *args[2];
    int nout;
    int64_t per_call; /* > 0: run c once per example on these slices (the loop) */
    nb_tensor **rows[2];
} job;

static void run_job(void *vj) {
    job *j = vj;
    nb_scope_begin();
    nb_tensor *out[NPARAM];
    const char *names[2] = {"x", "y"};
    if (j->per_call) {
        for (int64_t i = 0; i < j->per_call; i++)
            if (nb_compiled_run(j->c, 2, names, (nb_tensor *[]){j->rows[0][i], j->rows[1][i]}, 1, out) != NB_OK) break;
    } else if (nb_compiled_run(j->c, 2, names, j->args, j->nout, out) != NB_OK) {
        fprintf(stderr, "bench_transforms: %s\n", nb_last_message());
        exit(1);
    }
    nb_scope_end();
}

static void report(const char *name, const char *impl, job *j, int reps) {
    bench_stat s = bench_run(run_job, j, 2, reps, 1);
    printf("case=%s impl=%s ms=%.3f min=%.3f max=%.3f\n", name, impl, s.median * 1e3, s.min * 1e3, s.max * 1e3);
    fflush(stdout);
}

/* Transform f, jit it (timing the first compile and a cached one) and time a run on x, y. */
static void bench_case(const char *name, nb_graph *g, nb_tensor *x, nb_tensor *y, int nout, int reps) {
    nb_compile_cache_clear();
    double t0 = bench_now();
    nb_compiled *c = nb_func_jit(g);
    double t1 = bench_now();
    nb_compiled_release(nb_func_jit(g));
    double t2 = bench_now();
    if (!c) {
        fprintf(stderr, "bench_transforms: %s: %s\n", name, nb_last_message());
        exit(1);
    }
    printf("compile case=%s first_ms=%.3f cached_ms=%.4f\n", name, (t1 - t0) * 1e3, (t2 - t1) * 1e3);
    job j = {c, {x, y}, nout, 0, {NULL, NULL}};
    report(name, "nabla", &j, reps);
    nb_compiled_release(c);
}

int main(void) {
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 7);
    nb_set_num_threads(threads);
    printf("# cpu: %s; simd %s; %d threads; median of %d after 2 warm-up calls\n", bench_cpu_model(),
           nb_cpu_simd_level(), threads, reps);
    nb_manual_seed(7);
    const int64_t shapes[NPARAM][2] = {{IN, H1}, {H1, 0}, {H1, H2}, {H2, 0}, {H2, OUT}, {OUT, 0}};
    for (int i = 0; i < NPARAM; i++)
        params[i] = nb_mul(nb_randn(shapes[i], shapes[i][1] ? 2 : 1, NB_F32), 0.05);
    nb_tensor *x = nb_rand((int64_t[]){BATCH, IN}, 2, NB_F32);
    nb_tensor *y = nb_one_hot(nb_cast(nb_mul(nb_rand((int64_t[]){BATCH}, 1, NB_F32), (double)OUT), NB_I64), OUT);
    y = nb_cast(y, NB_F32);
    nb_graph *one = loss_func(0), *mean = loss_func(BATCH);
    const char *xy[2] = {"x", "y"};

    nb_graph *g1 = nb_func_grad(one, NPARAM, PNAMES);
    nb_graph *pe = nb_func_vmap(g1, 2, xy, (int[]){0, 0}, BATCH, NULL);
    bench_case("per_example", pe, x, y, NPARAM, reps);

    nb_graph *gm = nb_func_grad(mean, NPARAM, PNAMES);
    bench_case("grad", gm, x, y, NPARAM, reps);

    nb_graph *vf = nb_func_vmap(one, 2, xy, (int[]){0, 0}, BATCH, NULL);
    bench_case("vmap_f", vf, x, y, 1, reps);
    nb_compiled *c1 = nb_func_jit(one);
    nb_tensor *xr[BATCH], *yr[BATCH];
    for (int i = 0; i < BATCH; i++) {
        xr[i] = nb_contiguous(nb_select(x, 0, i));
        yr[i] = nb_contiguous(nb_select(y, 0, i));
    }
    job loop = {c1, {NULL, NULL}, 1, BATCH, {xr, yr}};
    report("vmap_f", "nabla-loop", &loop, reps);
    for (int i = 0; i < BATCH; i++) {
        nb_release(xr[i]);
        nb_release(yr[i]);
    }
    nb_compiled_release(c1);
    nb_graph *graphs[] = {g1, pe, gm, vf, one, mean};
    for (size_t i = 0; i < sizeof graphs / sizeof *graphs; i++) nb_graph_release(graphs[i]);
    nb_release(x);
    nb_release(y);
    for (int i = 0; i < NPARAM; i++) nb_release(params[i]);
    return 0;
}
