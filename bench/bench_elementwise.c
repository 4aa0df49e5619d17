/*
 * bench_elementwise.c — effective bandwidth of nabla's f32 elementwise ops on
 * 16M elements (out = a op b, a fresh output per call as the API allocates
 * it) against the memory-copy bandwidth of the machine measured in the same
 * run, plus the cost of first-touching a fresh 64 MB buffer.
 *
 *   bench_elementwise [N]        N elements (default 16M); NB_BENCH_THREADS (2), NB_BENCH_REPS (9)
 *
 * Bandwidth counts the bytes an op must move: a binary op 2 reads + 1
 * write, a unary op 1 read + 1 write, memcpy 1 read + 1 write.
 */
#include "bench_util.h"
#include "nabla.h"

#include <sys/mman.h>

typedef struct ew_case {
    const char *name;
    nb_tensor *(*op)(nb_tensor *a, nb_tensor *b);
    int nin;
} ew_case;

static nb_tensor *op_add(nb_tensor *a, nb_tensor *b) { return nb_add(a, b); }
static nb_tensor *op_mul(nb_tensor *a, nb_tensor *b) { return nb_mul(a, b); }
static nb_tensor *op_add_scalar(nb_tensor *a, nb_tensor *b) { (void)b; return nb_add(a, 1.0); }
static nb_tensor *op_exp(nb_tensor *a, nb_tensor *b) { (void)b; return nb_exp(a); }
static nb_tensor *op_tanh(nb_tensor *a, nb_tensor *b) { (void)b; return nb_tanh(a); }
static nb_tensor *op_sigmoid(nb_tensor *a, nb_tensor *b) { (void)b; return nb_sigmoid(a); }

typedef struct ew_ctx {
    const ew_case *c;
    nb_tensor *a, *b;
} ew_ctx;

static void run_op(void *p) {
    ew_ctx *x = p;
    nb_tensor *r = x->c->op(x->a, x->b);
    if (!r) {
        fprintf(stderr, "op failed: %s\n", nb_last_message());
        exit(1);
    }
    nb_release(r);
}

/* First touch of fresh memory: map, write every byte, unmap. */
typedef struct touch_ctx {
    size_t nbytes;
    char *warm; /* already-faulted buffer for the comparison */
    bool fresh;
} touch_ctx;

static void run_touch(void *p) {
    touch_ctx *t = p;
    if (!t->fresh) {
        memset(t->warm, 1, t->nbytes);
        return;
    }
    char *m = mmap(NULL, t->nbytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) exit(1);
    memset(m, 1, t->nbytes);
    munmap(m, t->nbytes);
}

/* add and exp from 1K to 4M elements, 1 thread vs the configured count:
 * where splitting across the pool starts to pay. */
static void size_sweep(int reps) {
    int threads = nb_get_num_threads();
    printf("\n| n | add 1 thread (us) | add %d threads (us) | exp 1 thread (us) | exp %d threads (us) |\n"
           "|---|---|---|---|---|\n", threads, threads);
    for (int64_t n = 1024; n <= (4 << 20); n *= 4) {
        nb_tensor *a = nb_rand(&n, 1, NB_F32), *b = nb_rand(&n, 1, NB_F32);
        long inner = (long)((1 << 24) / n) + 1;
        printf("| %lld |", (long long)n);
        for (int k = 0; k < 4; k++) {
            nb_set_num_threads(k % 2 ? threads : 1);
            ew_case c = {"", k < 2 ? op_add : op_exp, 2};
            ew_ctx x = {&c, a, b};
            bench_stat s = bench_run(run_op, &x, 3, reps, inner);
            printf(" %.2f |", s.median * 1e6);
        }
        printf("\n");
        nb_release(a);
        nb_release(b);
    }
    nb_set_num_threads(threads);
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 16 << 20;
    int threads = bench_env_int("NB_BENCH_THREADS", 2), reps = bench_env_int("NB_BENCH_REPS", 9);
    nb_set_num_threads(threads);
    size_t bytes = (size_t)n * sizeof(float);
    printf("# bench_elementwise: %lld f32 (%.0f MB per tensor), %d threads, median of %d reps\n",
           (long long)n, bytes / 1e6, threads, reps);
    printf("# cpu: %s, simd: %s\n", bench_cpu_model(), nb_cpu_simd_level());

    printf("| case | ms (median) | min..max | GB/s | vs best copy |\n|---|---|---|---|---|\n");
    double copy_bw = bench_copy_baselines(bytes, threads, reps, 2.0 * (double)bytes);

    char *dst = malloc(bytes);
    memset(dst, 0, bytes);
    touch_ctx tw = {bytes, dst, false}, tf = {bytes, NULL, true};
    bench_stat sw = bench_run(run_touch, &tw, 1, reps, 1), sf = bench_run(run_touch, &tf, 1, reps, 1);
    printf("| memset, touched buffer (1 thread) | %.2f | %.2f..%.2f | %.1f | |\n", sw.median * 1e3,
           sw.min * 1e3, sw.max * 1e3, (double)bytes / sw.median / 1e9);
    printf("| memset, fresh mmap (1 thread, incl. page faults) | %.2f | %.2f..%.2f | %.1f | |\n",
           sf.median * 1e3, sf.min * 1e3, sf.max * 1e3, (double)bytes / sf.median / 1e9);
    free(dst);

    nb_manual_seed(1);
    nb_tensor *a = nb_rand(&n, 1, NB_F32), *b = nb_rand(&n, 1, NB_F32);
    if (!a || !b) {
        fprintf(stderr, "setup failed: %s\n", nb_last_message());
        return 1;
    }
    static const ew_case cases[] = {
        {"add", op_add, 2},   {"mul", op_mul, 2},   {"add scalar", op_add_scalar, 1},
        {"exp", op_exp, 1},   {"tanh", op_tanh, 1}, {"sigmoid", op_sigmoid, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ew_ctx x = {&cases[i], a, b};
        bench_stat s = bench_run(run_op, &x, 2, reps, 1);
        double bw = (double)(cases[i].nin + 1) * (double)bytes / s.median / 1e9;
        printf("| nb %s | %.2f | %.2f..%.2f | %.1f | %.2fx |\n", cases[i].name, s.median * 1e3,
               s.min * 1e3, s.max * 1e3, bw, bw / copy_bw);
    }
    nb_release(a);
    nb_release(b);
    size_sweep(reps);
    return 0;
}
