/*
 * bench_attention.c — nb_scaled_dot_product_attention (f32) forward and forward+backward at B=4,
 * H=8, D=64 and L = NB_BENCH_L (default 1024), unmasked and causal; prints "case=<name> impl=nabla
 * ms=<median> ... rss_mb=<peak resident MiB of the process so far>" beside peers_attention.py's
 * PyTorch SDPA lines (bench_attention.sh runs both).  Environment: NB_BENCH_THREADS (2),
 * NB_BENCH_REPS (5), NB_BENCH_L, NB_BENCH_FWD_ONLY (1: forward cases only; long L).
 */
#include "bench_util.h"
#include "nabla.h"

#include <sys/resource.h>

typedef struct att {
    nb_tensor *q, *k, *v;
    nb_attention_opts o;
    bool backward;
} att;

static void run_att(void *p) {
    att *a = p;
    nb_scope_begin();
    nb_tensor *y = nb_scaled_dot_product_attention(a->q, a->k, a->v, a->o);
    if (!y) {
        fprintf(stderr, "bench_attention: %s\n", nb_last_message());
        exit(1);
    }
    if (a->backward && nb_backward(nb_sum(y, NULL, 0, false), NULL, false) != NB_OK) {
        fprintf(stderr, "bench_attention: %s\n", nb_last_message());
        exit(1);
    }
    nb_scope_end();
    if (a->backward)
        for (int i = 0; i < 3; i++) nb_zero_grad((nb_tensor *[]){a->q, a->k, a->v}[i]);
}

static double peak_mb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

int main(void) {
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 5);
    int64_t l = bench_env_int("NB_BENCH_L", 1024);
    int passes = bench_env_int("NB_BENCH_FWD_ONLY", 0) ? 1 : 2;
    nb_set_num_threads(threads);
    printf("# cpu: %s; simd %s; %d threads; median of %d after 1 warm-up call\n", bench_cpu_model(),
           nb_cpu_simd_level(), threads, reps);
    nb_manual_seed(1);
    int64_t shape[4] = {4, 8, l, 64};
    att a = {nb_randn(shape, 4, NB_F32), nb_randn(shape, 4, NB_F32), nb_randn(shape, 4, NB_F32), {0}, false};
    for (int i = 0; i < 3; i++) nb_set_requires_grad((nb_tensor *[]){a.q, a.k, a.v}[i], true);
    for (int causal = 0; causal < 2; causal++)
        for (int bwd = 0; bwd < passes; bwd++) {
            a.o.mask = causal ? NB_ATTN_MASK_CAUSAL : NB_ATTN_MASK_NONE;
            a.backward = bwd;
            if (!bwd) nb_no_grad_begin();
            bench_stat s = bench_run(run_att, &a, 1, reps, 1);
            if (!bwd) nb_no_grad_end();
            printf("case=%s_%s_L%lld impl=nabla ms=%.3f min=%.3f max=%.3f rss_mb=%.0f\n", causal ? "causal" : "none",
                   bwd ? "fwd_bwd" : "fwd", (long long)l, s.median * 1e3, s.min * 1e3, s.max * 1e3, peak_mb());
            fflush(stdout);
        }
    return 0;
}
