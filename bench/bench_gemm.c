/*
 * bench_gemm.c — sgemm throughput of nabla's CPU GEMM (nb_matmul on NB_CPU)
 * against OpenBLAS's cblas_sgemm (when built with it), both on the same
 * thread count, next to the machine's measured FMA peak.
 *
 * Shapes: squares 256..2048 and one MLP layer Y[B x 256] = X[B x 784] W[784 x 256]
 * with its backward products dW = X^T G (X^T a transposed view) and
 * dX = G W^T (W^T a transposed view), B = 64, 128, 256; the CNN's
 * per-image convolution products (single-threaded in training: run them
 * with threads = 1, NB_BENCH_CPUTIME=1 on a loaded machine); the eight
 * products of one training step of the MLP (784-256-128-10, batch 128,
 * weights [out, in] as nn.Linear keeps them), in the layouts `nabla train`
 * hands nb__gemm, with their sum: the GEMM time of one step, which no
 * compiled step can go below (times 469 steps: one epoch's GEMMs).
 * Each entry is the median of `reps` timed repetitions (after one warm-up),
 * each repetition long enough (>= 30 ms) to swamp the clock; nabla and
 * OpenBLAS alternate within a repetition so both see the same machine noise
 * (nabla after a 150 ms pause that lets OpenBLAS's spinning workers go to
 * sleep), and the ratio column is the median of the per-repetition ratios.
 * On a shared machine NB_BENCH_QUIET=1 keeps only the repetitions with a
 * short FMA probe at >= 90% of peak just before and just after (up to 20
 * tries per kept repetition), and NB_BENCH_CPUTIME=1 (one thread) times in
 * process CPU time instead of wall time.
 *
 * Usage: [NB_BENCH_QUIET=1 | NB_BENCH_CPUTIME=1] bench_gemm [threads [reps [filter]]]
 * (defaults 2, 7, all shapes; threads sets nb_set_num_threads and
 * openblas_set_num_threads; filter keeps the shapes whose name contains it).
 * The table goes to stdout as Markdown.
 */
#include "nabla.h"

#include <immintrin.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef NB_HAVE_CBLAS
#include <cblas.h>
#endif

enum { REPS_MAX = 64 };

/* Wall clock, or with NB_BENCH_CPUTIME=1 the process's CPU time: with one
 * thread that discounts time the OS gives to other processes on a shared
 * machine (the FMA peak is then measured the same way). */
static clockid_t bench_clock = CLOCK_MONOTONIC;

static double now(void) {
    struct timespec ts;
    clock_gettime(bench_clock, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* ---- FMA peak: independent FMA chains, register resident ---------------- */

#define PEAK_ITERS 20000000L
#define PROBE_ITERS 500000L
#define PEAK_CHAINS 12

typedef struct fma_job {
    long iters;
    float sink;
} fma_job;

/* Independent FMA chains of one vector width (W float lanes); the AVX-512
 * loop on CPUs that have it, else the AVX2 one (fma_lanes says which). */
#define FMA_LOOP(NAME, TARGET, V, W, SET1, FMADD, STORE)                                   \
    __attribute__((target(TARGET))) static void *NAME(void *arg) {                       \
        fma_job *job = arg;                                                               \
        V acc[PEAK_CHAINS], x = SET1(1.0f - 1e-7f), y = SET1(1e-7f);                      \
        _Pragma("GCC unroll 12") for (int i = 0; i < PEAK_CHAINS; i++) acc[i] = SET1((float)i); \
        for (long it = 0; it < job->iters; it++) {                                        \
            _Pragma("GCC unroll 12") for (int i = 0; i < PEAK_CHAINS; i++) {              \
                acc[i] = FMADD(acc[i], x, y);                                             \
                __asm__ volatile("" : "+v"(acc[i])); /* keep every chain live and in a register */ \
            }                                                                             \
        }                                                                                 \
        float s = 0, lanes[W];                                                            \
        for (int i = 0; i < PEAK_CHAINS; i++) {                                           \
            STORE(lanes, acc[i]);                                                         \
            for (int j = 0; j < (W); j++) s += lanes[j];                                  \
        }                                                                                 \
        job->sink = s;                                                                    \
        return NULL;                                                                      \
    }
FMA_LOOP(fma_loop512, "avx512f", __m512, 16, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_storeu_ps)
FMA_LOOP(fma_loop256, "avx2,fma", __m256, 8, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_storeu_ps)

static int fma_lanes(void) { return __builtin_cpu_supports("avx512f") ? 16 : 8; }
static void *fma_loop(void *arg) { return fma_lanes() == 16 ? fma_loop512(arg) : fma_loop256(arg); }

/* GFLOP/s of `threads` concurrent FMA loops of `iters` steps (2 flops per lane per FMA). */
static double fma_rate(int threads, long iters) {
    pthread_t th[64];
    fma_job jobs[64];
    double t0 = now();
    for (int i = 0; i < threads; i++) jobs[i].iters = iters;
    for (int i = 1; i < threads; i++) pthread_create(&th[i], NULL, fma_loop, &jobs[i]);
    fma_loop(&jobs[0]);
    for (int i = 1; i < threads; i++) pthread_join(th[i], NULL);
    return (double)threads * (double)iters * PEAK_CHAINS * fma_lanes() * 2 / (now() - t0) / 1e9;
}

static double fma_peak(int threads) {
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        double g = fma_rate(threads, PEAK_ITERS);
        if (g > best) best = g;
    }
    return best;
}

/* ---- one shape ------------------------------------------------------------ */

typedef struct shape {
    const char *name;
    int64_t m, n, k;
    bool ta, tb; /* A (resp. B) is a transposed view of a row-major matrix */
} shape;

/* Is s one of the MLP training step's products (its name starts with "step ")? */
static bool in_step(const shape *s) { return strncmp(s->name, "step ", 5) == 0; }

typedef struct timing {
    double nabla, blas; /* median seconds a call (blas 0 without OpenBLAS); nabla 0 when nothing was kept */
} timing;

typedef struct operands {
    nb_tensor *a, *b;       /* views as nb_matmul sees them */
    float *pa, *pb, *pc;    /* the stored matrices, for cblas */
} operands;

static operands make(const shape *s) {
    operands o;
    int64_t ar = s->ta ? s->k : s->m, ac = s->ta ? s->m : s->k;
    int64_t br = s->tb ? s->n : s->k, bc = s->tb ? s->k : s->n;
    nb_tensor *as = nb_randn(NB_SHAPE(ar, ac), NB_F32), *bs = nb_randn(NB_SHAPE(br, bc), NB_F32);
    o.a = s->ta ? nb_t(as) : nb_retain(as);
    o.b = s->tb ? nb_t(bs) : nb_retain(bs);
    o.pa = nb_data_ptr(as);
    o.pb = nb_data_ptr(bs);
    o.pc = malloc(sizeof(float) * (size_t)(s->m * s->n));
    nb_release(as); /* the views keep the storage */
    nb_release(bs);
    return o;
}

static void run_nabla(const shape *s, const operands *o) {
    (void)s;
    nb_tensor *c = nb_matmul(o->a, o->b);
    if (!c) {
        fprintf(stderr, "nb_matmul: %s\n", nb_last_message());
        exit(1);
    }
    nb_release(c);
}

#ifdef NB_HAVE_CBLAS
static void run_cblas(const shape *s, const operands *o) {
    cblas_sgemm(CblasRowMajor, s->ta ? CblasTrans : CblasNoTrans, s->tb ? CblasTrans : CblasNoTrans,
                (int)s->m, (int)s->n, (int)s->k, 1.0f, o->pa, s->ta ? (int)s->m : (int)s->k, o->pb,
                s->tb ? (int)s->k : (int)s->n, 0.0f, o->pc, (int)s->n);
}
#endif

typedef void (*runner)(const shape *, const operands *);

/* Seconds per call, over a batch of `iters` calls. */
static double time_batch(runner fn, const shape *s, const operands *o, long iters) {
    double t0 = now();
    for (long i = 0; i < iters; i++) fn(s, o);
    return (now() - t0) / (double)iters;
}

static long calibrate(runner fn, const shape *s, const operands *o) {
    fn(s, o); /* warm-up */
    double t = time_batch(fn, s, o, 1);
    long iters = (long)(0.03 / (t > 1e-7 ? t : 1e-7)) + 1;
    return iters;
}

typedef struct config {
    int threads, reps;
    bool quiet;  /* keep only repetitions bracketed by two calm FMA probes */
    double ref;  /* GFLOP/s the % peak columns refer to */
} config;

/* OpenBLAS's idle workers spin (yielding) for 2^28 cycles after each call,
 * about 0.1 s here, competing with the next library's threads for the
 * cores; wait them out before timing nabla.  (nabla's pool spins 200 us.) */
static void settle(void) { nanosleep(&(struct timespec){.tv_nsec = 150000000}, NULL); }

/* True when `threads` FMA loops now run at >= 90% of the reference peak. */
static bool calm(const config *cfg) { return !cfg->quiet || fma_rate(cfg->threads, PROBE_ITERS) >= 0.9 * cfg->ref; }

/* Time one shape, print its table row and return its median times. */
static timing bench_shape(const shape *s, const config *cfg) {
    operands o = make(s);
    double flop = 2.0 * (double)s->m * (double)s->n * (double)s->k;
    double tn[REPS_MAX], tb[REPS_MAX] = {0}, ratio[REPS_MAX] = {0};
    long in = calibrate(run_nabla, s, &o);
#ifdef NB_HAVE_CBLAS
    long ib = calibrate(run_cblas, s, &o);
#endif
    int kept = 0, tries = 0;
    while (kept < cfg->reps && tries < 20 * cfg->reps) {
        tries++;
        bool before = calm(cfg);
        settle();
        tn[kept] = time_batch(run_nabla, s, &o, in);
#ifdef NB_HAVE_CBLAS
        tb[kept] = time_batch(run_cblas, s, &o, ib);
#endif
        if (before && calm(cfg)) {
            ratio[kept] = tb[kept] / tn[kept];
            kept++;
        }
    }
    printf("| %s | %lld x %lld x %lld ", s->name, (long long)s->m, (long long)s->n, (long long)s->k);
    timing t = {0, 0};
    if (kept == 0) {
        printf("| - | - | - | - | - | 0/%d |\n", tries);
    } else {
        t = (timing){median(tn, kept), tb[0] > 0 ? median(tb, kept) : 0};
        double gn = flop / t.nabla / 1e9, gb = t.blas > 0 ? flop / t.blas / 1e9 : 0;
        printf("| %.1f | %.0f%% | %.1f | %.0f%% | %.2f | %d/%d |\n", gn, 100 * gn / cfg->ref, gb,
               100 * gb / cfg->ref, median(ratio, kept), kept, tries);
    }
    fflush(stdout);
    nb_release(o.a);
    nb_release(o.b);
    free(o.pc);
    return t;
}

int main(int argc, char **argv) {
    config cfg = {.threads = argc > 1 ? atoi(argv[1]) : 2, .reps = argc > 2 ? atoi(argv[2]) : 7};
    const char *filter = argc > 3 ? argv[3] : "";
    cfg.reps = cfg.reps < 1 ? 1 : cfg.reps > REPS_MAX ? REPS_MAX : cfg.reps;
    const char *cpu_env = getenv("NB_BENCH_CPUTIME"), *quiet_env = getenv("NB_BENCH_QUIET");
    cfg.quiet = quiet_env && atoi(quiet_env);
    if (cpu_env && atoi(cpu_env)) {
        if (cfg.threads != 1 || cfg.quiet) {
            fprintf(stderr, "NB_BENCH_CPUTIME=1 needs threads = 1 (CPU time adds up over threads) "
                            "and no NB_BENCH_QUIET\n");
            return 2;
        }
        bench_clock = CLOCK_PROCESS_CPUTIME_ID;
    }
    nb_set_num_threads(cfg.threads);
    nb_manual_seed(42);
    double peak1 = fma_peak(1), peak = cfg.threads > 1 ? fma_peak(cfg.threads) : peak1;
    cfg.ref = peak1 * cfg.threads;
    const char *blas_env = getenv("OPENBLAS_CORETYPE");
#ifdef NB_HAVE_CBLAS
    openblas_set_num_threads(cfg.threads);
    printf("OpenBLAS: %s (core %s, OPENBLAS_CORETYPE=%s)\n", openblas_get_config(), openblas_get_corename(),
           blas_env ? blas_env : "(unset)");
#else
    (void)blas_env;
    printf("OpenBLAS: not built in\n");
#endif
    printf("nabla SIMD: %s, threads: %d, clock: %s%s\n", nb_cpu_simd_level(), cfg.threads,
           bench_clock == CLOCK_MONOTONIC ? "wall" : "process CPU time",
           cfg.quiet ? ", only repetitions between two calm FMA probes (>= 90% of peak)" : "");
    printf("FMA peak (%s, register resident): %.1f GFLOP/s on 1 thread, %.1f on %d; %% peak below is of\n"
           "%d x the 1-thread figure (%.1f)\n\n", fma_lanes() == 16 ? "AVX-512" : "AVX2", peak1, peak, cfg.threads,
           cfg.threads, cfg.ref);
    static const shape shapes[] = {
        {"square 256", 256, 256, 256, false, false},    {"square 512", 512, 512, 512, false, false},
        {"square 1024", 1024, 1024, 1024, false, false}, {"square 2048", 2048, 2048, 2048, false, false},
        {"fwd X W, B=64", 64, 256, 784, false, false},  {"fwd X W, B=128", 128, 256, 784, false, false},
        {"fwd X W, B=256", 256, 256, 784, false, false}, {"dW = X^T G, B=64", 784, 256, 64, true, false},
        {"dW = X^T G, B=128", 784, 256, 128, true, false}, {"dW = X^T G, B=256", 784, 256, 256, true, false},
        {"dX = G W^T, B=64", 64, 784, 256, false, true}, {"dX = G W^T, B=128", 128, 784, 256, false, true},
        {"dX = G W^T, B=256", 256, 784, 256, false, true},
        /* the CNN's per-image products (tools/models.c; run one per thread over the batch) */
        {"conv1 fwd W cols", 32, 784, 9, false, false},   {"conv1 dW = G cols^T", 32, 9, 784, false, true},
        {"conv2 fwd W cols", 64, 196, 288, false, false}, {"conv2 dW = G cols^T", 64, 288, 196, false, true},
        {"conv2 dcols = W^T G", 288, 196, 64, true, false}, {"fc2 fwd, B=64", 64, 10, 128, false, false},
        /* one MLP step, batch 128: forward X W1^T, H1 W2^T, H2 W3^T; backward dH2 = G3 W3, dW3 = G3^T H2,
         * dH1 = G2 W2, dW2 = G2^T H1, dW1 = G1^T X (no dX: the input wants no gradient) */
        {"step fc1 fwd", 128, 256, 784, false, true},  {"step fc2 fwd", 128, 128, 256, false, true},
        {"step fc3 fwd", 128, 10, 128, false, true},   {"step fc3 dX", 128, 128, 10, false, false},
        {"step fc3 dW", 10, 128, 128, true, false},    {"step fc2 dX", 128, 256, 128, false, false},
        {"step fc2 dW", 128, 256, 128, true, false},   {"step fc1 dW", 256, 784, 128, true, false},
    };
    printf("| shape | M x N x K | nabla GFLOP/s | %% peak | OpenBLAS GFLOP/s | %% peak | nabla / OpenBLAS | reps kept |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|\n");
    double step_n = 0, step_b = 0;
    int step_shapes = 0, step_timed = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        step_shapes += in_step(&shapes[i]);
        if (!strstr(shapes[i].name, filter)) continue;
        timing t = bench_shape(&shapes[i], &cfg);
        if (in_step(&shapes[i]) && t.nabla > 0) {
            step_timed++;
            step_n += t.nabla;
            step_b += t.blas;
        }
    }
    if (step_timed == step_shapes) /* the sum of medians: each product timed hot, apart from the step */
        printf("\nMLP step (batch 128, the eight \"step\" rows): nabla %.3f ms, OpenBLAS %.3f ms; "
               "x 469 steps (one Fashion-MNIST epoch): nabla %.3f s, OpenBLAS %.3f s\n",
               step_n * 1e3, step_b * 1e3, step_n * 469, step_b * 469);
    return 0;
}
