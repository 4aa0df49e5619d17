/*
 * bench_reduce.c — f32 sum of a [4096, 4096] tensor over all elements, the
 * last axis and the first axis (and max over the last axis), against the
 * read rate of memcpy measured in the same run (bytes read / time, memcpy's
 * read side only).
 *
 *   bench_reduce [R C]           shape (default 4096 4096); NB_BENCH_THREADS (2), NB_BENCH_REPS (9)
 */
#include "bench_util.h"
#include "nabla.h"

typedef struct red_ctx {
    nb_tensor *(*op)(nb_tensor *x, const int *axes, int naxes, bool keepdim);
    nb_tensor *x;
    const int *axes;
    int naxes;
} red_ctx;

static void run_sum(void *p) {
    red_ctx *c = p;
    nb_tensor *r = c->op(c->x, c->axes, c->naxes, false);
    if (!r) {
        fprintf(stderr, "sum failed: %s\n", nb_last_message());
        exit(1);
    }
    nb_release(r);
}

int main(int argc, char **argv) {
    int64_t shape[2] = {argc > 2 ? atoll(argv[1]) : 4096, argc > 2 ? atoll(argv[2]) : 4096};
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 9);
    nb_set_num_threads(threads);
    size_t bytes = (size_t)(shape[0] * shape[1]) * sizeof(float);
    printf("# bench_reduce: f32 [%lld, %lld] (%.0f MB), %d threads, median of %d reps\n",
           (long long)shape[0], (long long)shape[1], bytes / 1e6, threads, reps);
    printf("# cpu: %s, simd: %s\n", bench_cpu_model(), nb_cpu_simd_level());

    printf("| case | ms (median) | min..max | GB/s read | vs best memcpy read rate |\n|---|---|---|---|---|\n");
    double read_bw = bench_copy_baselines(bytes, threads, reps, (double)bytes);

    nb_manual_seed(1);
    nb_tensor *x = nb_randn(shape, 2, NB_F32);
    if (!x) {
        fprintf(stderr, "setup failed: %s\n", nb_last_message());
        return 1;
    }
    static const int last[] = {1}, first[] = {0};
    struct {
        const char *name;
        red_ctx c;
    } cases[] = {{"sum all", {nb_sum, x, NULL, 0}},
                 {"sum axis -1 (rows)", {nb_sum, x, last, 1}},
                 {"sum axis 0 (columns)", {nb_sum, x, first, 1}},
                 {"max axis -1 (rows, as in softmax)", {nb_max, x, last, 1}}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        bench_stat s = bench_run(run_sum, &cases[i].c, 2, reps, 1);
        double bw = (double)bytes / s.median / 1e9;
        printf("| nb %s | %.2f | %.2f..%.2f | %.1f | %.2fx |\n", cases[i].name, s.median * 1e3,
               s.min * 1e3, s.max * 1e3, bw, bw / read_bw);
    }
    nb_release(x);
    return 0;
}
