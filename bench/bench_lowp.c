/*
 * bench_lowp.c — scaled low-precision matmul (O10) against the f32 GEMM of the same shape in one
 * run: C [S, S] = A [S, K] · B [N, K]ᵀ with A and B quantized (MX-FP8 E4M3, MX-FP6 E2M3, MX-FP4,
 * NVFP4, per-tensor FP8) against nb_matmul of the f32 operands (B given transposed, [K, N]
 * contiguous, its usual layout).  Per case: the median time of `reps` calls (after one warm-up),
 * GFLOP/s (2 S³), the bytes of the two operands as stored (codes plus scales; f32: 4 a value),
 * and the throughput as a fraction of the f32 GEMM's.  Calls of every case alternate within a
 * repetition so that all see the same machine noise.
 *
 * Usage: bench_lowp [threads [reps [S]]]   (defaults 2, 7, 2048).  A Markdown table on stdout.
 */
#include "bench_util.h"
#include "nabla.h"

#include <math.h>

enum { NCASE = 6 };

typedef struct lowp_case {
    const char *name;
    nb_scaled_format fmt;
    nb_scale_layout layout;
    nb_quantized a, b;
} lowp_case;

static double bytes_of(const nb_quantized *q) {
    double n = (double)nb_numel(q->codes) + (double)nb_numel(q->scales) * (q->layout == NB_SCALE_TENSOR ? 4 : 1);
    return n + (q->global_scale ? 4 : 0);
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, reps = argc > 2 ? atoi(argv[2]) : 7;
    int64_t s = argc > 3 ? atoll(argv[3]) : 2048;
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    nb_set_num_threads(threads);
    nb_manual_seed(1);
    nb_scope_begin();
    nb_tensor *a = nb_randn((int64_t[]){s, s}, 2, NB_F32), *b = nb_randn((int64_t[]){s, s}, 2, NB_F32);
    nb_tensor *bt = nb_contiguous(nb_transpose(b, 0, 1)); /* [K, N] for the f32 GEMM */
    lowp_case cs[NCASE - 1] = {
        {"MX-FP8 (E4M3)", NB_FMT_F8E4M3FN, NB_SCALE_MX, {0}, {0}},
        {"MX-FP6 (E2M3)", NB_FMT_F6E2M3, NB_SCALE_MX, {0}, {0}},
        {"MX-FP4 (E2M1)", NB_FMT_F4E2M1, NB_SCALE_MX, {0}, {0}},
        {"NVFP4", NB_FMT_F4E2M1, NB_SCALE_NVFP4, {0}, {0}},
        {"FP8 E4M3, per tensor", NB_FMT_F8E4M3FN, NB_SCALE_TENSOR, {0}, {0}},
    };
    for (int c = 0; c < NCASE - 1; c++)
        if (nb_quantize(a, cs[c].fmt, cs[c].layout, &cs[c].a) != NB_OK ||
            nb_quantize(b, cs[c].fmt, cs[c].layout, &cs[c].b) != NB_OK) {
            fprintf(stderr, "bench_lowp: %s\n", nb_last_message());
            return 1;
        }
    double t[NCASE][BENCH_MAX_REPS];
    for (int r = -1; r < reps; r++)
        for (int c = 0; c < NCASE; c++) {
            nb_scope_begin();
            double t0 = bench_now();
            nb_tensor *y = c == 0 ? nb_matmul(a, bt) : nb_scaled_matmul(&cs[c - 1].a, &cs[c - 1].b, NB_F32);
            double dt = bench_now() - t0;
            if (!y) {
                fprintf(stderr, "bench_lowp: %s\n", nb_last_message());
                return 1;
            }
            nb_scope_end();
            if (r >= 0) t[c][r] = dt;
        }
    double flops = 2.0 * (double)s * (double)s * (double)s, med[NCASE];
    for (int c = 0; c < NCASE; c++) {
        qsort(t[c], (size_t)reps, sizeof(double), bench_cmp_double);
        med[c] = t[c][reps / 2];
    }
    printf("scaled_matmul %lld x %lld x %lld, %d threads, median of %d\n\n", (long long)s, (long long)s, (long long)s,
           threads, reps);
    printf("| operands | ms | GFLOP/s | operand MiB | throughput / f32 GEMM |\n|---|---|---|---|---|\n");
    for (int c = 0; c < NCASE; c++) {
        double bytes = c == 0 ? 8.0 * (double)s * (double)s : bytes_of(&cs[c - 1].a) + bytes_of(&cs[c - 1].b);
        printf("| %s | %.1f | %.0f | %.2f | %.2f |\n", c == 0 ? "f32 (nb_matmul)" : cs[c - 1].name, med[c] * 1e3,
               flops / med[c] * 1e-9, bytes / 1048576.0, med[0] / med[c]);
    }
    nb_scope_end();
    return 0;
}
