/*
 * bench_overhead.c — per-op overhead of the eager API on tiny tensors: the
 * inputs are created once, each timed call creates the output, computes it
 * and releases it (nb_add(a, b) on 4 f32 elements is the headline number).
 * Elementwise, a full reduction, and the views (reshape, transpose, slice,
 * select), whose cost is all overhead.
 *
 *   bench_overhead [N]           N elements (default 4, even); NB_BENCH_THREADS (2), NB_BENCH_REPS (9)
 *   NB_BENCH_CASE=i NB_BENCH_CALLS=k bench_overhead [N]
 *                                untimed: case i (the table's row, from 0) called k times, for
 *                                instruction counts (valgrind --tool=callgrind --toggle-collect=run_one;
 *                                the difference of two k gives instructions per call)
 */
#include "bench_util.h"
#include "nabla.h"

typedef struct ov_ctx {
    nb_tensor *a, *b, *m; /* a, b: [N]; m: a viewed as [2, N/2] */
    int64_t n;
    int which;
} ov_ctx;

enum {
    OV_ADD, OV_ADD_SCALAR, OV_MUL, OV_EXP, OV_SUM, OV_RESHAPE, OV_TRANSPOSE, OV_SLICE, OV_SELECT,
    OV_ADD_SCOPED, OV_COUNT
};
static const char *const ov_names[OV_COUNT] = {
    "nb_add(a, b)", "nb_add(a, 1.0)", "nb_mul(a, b)", "nb_exp(a)", "nb_sum(a) (all axes)",
    "nb_reshape(a, {2, N/2})", "nb_transpose(m, 0, 1) (m: [2, N/2])", "nb_slice(a, 0, 1, N-1, 1)",
    "nb_select(m, 0, 1)", "nb_add(a, b) in a scope (released by nb_scope_end every 64 calls)"};

__attribute__((noinline)) static void run_one(void *p) {
    ov_ctx *c = p;
    nb_tensor *r = NULL;
    int64_t n = c->n;
    switch (c->which) {
    case OV_ADD: r = nb_add(c->a, c->b); break;
    case OV_ADD_SCALAR: r = nb_add(c->a, 1.0); break;
    case OV_MUL: r = nb_mul(c->a, c->b); break;
    case OV_EXP: r = nb_exp(c->a); break;
    case OV_SUM: r = nb_sum(c->a, NULL, 0, false); break;
    case OV_RESHAPE: r = nb_reshape(c->a, (int64_t[]){2, n / 2}, 2); break;
    case OV_TRANSPOSE: r = nb_transpose(c->m, 0, 1); break;
    case OV_SLICE: r = nb_slice(c->a, 0, 1, n - 1, 1); break;
    case OV_SELECT: r = nb_select(c->m, 0, 1); break;
    case OV_ADD_SCOPED:
        nb_scope_begin();
        for (int i = 0; i < 64; i++) nb_add(c->a, c->b);
        nb_scope_end();
        return;
    }
    if (!r) {
        fprintf(stderr, "op failed: %s\n", nb_last_message());
        exit(1);
    }
    nb_release(r);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 4;
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 9);
    int only = bench_env_int("NB_BENCH_CASE", -1), calls = bench_env_int("NB_BENCH_CALLS", 0);
    if (n < 2 || n % 2) {
        fprintf(stderr, "bench_overhead: N must be even and at least 2, got %lld\n", (long long)n);
        return 1;
    }
    nb_set_num_threads(threads);
    nb_manual_seed(1);
    nb_tensor *a = nb_rand(&n, 1, NB_F32), *b = nb_rand(&n, 1, NB_F32);
    nb_tensor *m = a ? nb_reshape(a, (int64_t[]){2, n / 2}, 2) : NULL;
    if (!a || !b || !m) {
        fprintf(stderr, "setup failed: %s\n", nb_last_message());
        return 1;
    }
    if (only >= 0 && only < OV_COUNT) { /* untimed, for callgrind */
        ov_ctx c = {a, b, m, n, only};
        for (int i = 0; i < calls; i++) run_one(&c);
    } else {
        printf("# bench_overhead: %lld f32 elements, %d threads, median of %d reps\n", (long long)n,
               threads, reps);
        printf("# cpu: %s, simd: %s\n", bench_cpu_model(), nb_cpu_simd_level());
        printf("| case | ns per op (median) | min..max |\n|---|---|---|\n");
        for (int w = 0; w < OV_COUNT; w++) {
            ov_ctx c = {a, b, m, n, w};
            long inner = w == OV_ADD_SCOPED ? 4000 : 200000;
            double per = w == OV_ADD_SCOPED ? 64 : 1;
            bench_stat s = bench_run(run_one, &c, (int)inner / 10, reps, inner);
            printf("| %s | %.0f | %.0f..%.0f |\n", ov_names[w], s.median * 1e9 / per,
                   s.min * 1e9 / per, s.max * 1e9 / per);
        }
    }
    nb_release(m);
    nb_release(a);
    nb_release(b);
    return 0;
}
