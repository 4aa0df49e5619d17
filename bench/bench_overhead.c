/*
 * bench_overhead.c — per-op overhead of the eager API on tiny tensors: the
 * inputs are created once, each timed call creates the output, computes it
 * and releases it (nb_add(a, b) on 4 f32 elements is the headline number).
 *
 *   bench_overhead [N]           N elements (default 4); NB_BENCH_THREADS (2), NB_BENCH_REPS (9)
 */
#include "bench_util.h"
#include "nabla.h"

typedef struct ov_ctx {
    nb_tensor *a, *b;
    int which;
} ov_ctx;

enum { OV_ADD, OV_ADD_SCALAR, OV_MUL, OV_EXP, OV_SUM, OV_ADD_SCOPED, OV_COUNT };
static const char *const ov_names[OV_COUNT] = {
    "nb_add(a, b)", "nb_add(a, 1.0)", "nb_mul(a, b)", "nb_exp(a)", "nb_sum(a) (all axes)",
    "nb_add(a, b) in a scope (released by nb_scope_end every 64 calls)"};

static void run_one(void *p) {
    ov_ctx *c = p;
    nb_tensor *r = NULL;
    switch (c->which) {
    case OV_ADD: r = nb_add(c->a, c->b); break;
    case OV_ADD_SCALAR: r = nb_add(c->a, 1.0); break;
    case OV_MUL: r = nb_mul(c->a, c->b); break;
    case OV_EXP: r = nb_exp(c->a); break;
    case OV_SUM: r = nb_sum(c->a, NULL, 0, false); break;
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
    nb_set_num_threads(threads);
    printf("# bench_overhead: %lld f32 elements, %d threads, median of %d reps\n", (long long)n,
           threads, reps);
    printf("# cpu: %s, simd: %s\n", bench_cpu_model(), nb_cpu_simd_level());
    nb_manual_seed(1);
    nb_tensor *a = nb_rand(&n, 1, NB_F32), *b = nb_rand(&n, 1, NB_F32);
    if (!a || !b) {
        fprintf(stderr, "setup failed: %s\n", nb_last_message());
        return 1;
    }
    printf("| case | ns per op (median) | min..max |\n|---|---|---|\n");
    for (int w = 0; w < OV_COUNT; w++) {
        ov_ctx c = {a, b, w};
        long inner = w == OV_ADD_SCOPED ? 4000 : 200000;
        double per = w == OV_ADD_SCOPED ? 64 : 1;
        bench_stat s = bench_run(run_one, &c, (int)inner / 10, reps, inner);
        printf("| %s | %.0f | %.0f..%.0f |\n", ov_names[w], s.median * 1e9 / per,
               s.min * 1e9 / per, s.max * 1e9 / per);
    }
    nb_release(a);
    nb_release(b);
    return 0;
}
