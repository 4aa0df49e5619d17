/*
 * bench_elementwise.c — effective bandwidth of nabla's f32 elementwise ops on
 * 16M elements (out = a op b, a fresh output per call as the API allocates
 * it) against the memory-copy bandwidth of the machine measured in the same
 * run, plus the cost of first-touching a fresh 64 MB buffer.
 *
 *   bench_elementwise [N]        N elements (default 16M); NB_BENCH_THREADS (2), NB_BENCH_REPS (9)
 *   NB_BENCH_FILTER=where        only the nb cases whose name contains the text (no size sweep)
 *
 * Bandwidth counts the bytes an op must move: a binary op 2 reads + 1
 * write, a unary op 1 read + 1 write, memcpy 1 read + 1 write; the mask
 * cases (where, comparisons, logical ops) count each operand's own bytes
 * (a bool is 1 byte, a broadcast scalar 0).  Inputs are uniform in [0, 1),
 * except the cases marked [-4, 4) (activations and periodic functions,
 * whose both sides matter).
 */
#include "bench_util.h"
#include "nabla.h"

#include <sys/mman.h>

typedef struct ew_case {
    const char *name;
    nb_tensor *(*op)(nb_tensor *a, nb_tensor *b);
    int nin;
    bool signed_in; /* a from [-4, 4) instead of [0, 1): both sides of an activation */
} ew_case;

static nb_tensor *op_add(nb_tensor *a, nb_tensor *b) { return nb_add(a, b); }
static nb_tensor *op_mul(nb_tensor *a, nb_tensor *b) { return nb_mul(a, b); }
static nb_tensor *op_add_scalar(nb_tensor *a, nb_tensor *b) { (void)b; return nb_add(a, 1.0); }
static nb_tensor *op_exp(nb_tensor *a, nb_tensor *b) { (void)b; return nb_exp(a); }
static nb_tensor *op_tanh(nb_tensor *a, nb_tensor *b) { (void)b; return nb_tanh(a); }
static nb_tensor *op_sigmoid(nb_tensor *a, nb_tensor *b) { (void)b; return nb_sigmoid(a); }
static nb_tensor *op_expm1(nb_tensor *a, nb_tensor *b) { (void)b; return nb_expm1(a); }
static nb_tensor *op_log(nb_tensor *a, nb_tensor *b) { (void)b; return nb_log(a); }
static nb_tensor *op_log1p(nb_tensor *a, nb_tensor *b) { (void)b; return nb_log1p(a); }
static nb_tensor *op_erf(nb_tensor *a, nb_tensor *b) { (void)b; return nb_erf(a); }
static nb_tensor *op_gelu(nb_tensor *a, nb_tensor *b) { (void)b; return nb_gelu(a); }
static nb_tensor *op_gelu_tanh(nb_tensor *a, nb_tensor *b) { (void)b; return nb_gelu_tanh(a); }
static nb_tensor *op_silu(nb_tensor *a, nb_tensor *b) { (void)b; return nb_silu(a); }
static nb_tensor *op_softplus(nb_tensor *a, nb_tensor *b) { (void)b; return nb_softplus(a, 1.0, 20.0); }
static nb_tensor *op_elu(nb_tensor *a, nb_tensor *b) { (void)b; return nb_elu(a, 1.0); }
static nb_tensor *op_sin(nb_tensor *a, nb_tensor *b) { (void)b; return nb_sin(a); }
static nb_tensor *op_cos(nb_tensor *a, nb_tensor *b) { (void)b; return nb_cos(a); }
static nb_tensor *op_tan(nb_tensor *a, nb_tensor *b) { (void)b; return nb_tan(a); }

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

/* Is the case named `name` selected by NB_BENCH_FILTER (a substring; all when unset)? */
static bool selected(const char *name) {
    const char *f = getenv("NB_BENCH_FILTER");
    return !f || strstr(name, f) != NULL;
}

/* ---- mask ops: where / comparisons / logical, contiguous, broadcast and strided ---- */

typedef struct mask_env {
    nb_tensor *x, *g, *m, *m2, *zero, *xt, *gt, *mt; /* x, g f32 [n]; m, m2 bool [n]; *t: [s, s] transposed */
} mask_env;
static mask_env menv;

static nb_tensor *op_relu_bwd(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_where(menv.m, menv.g, menv.zero); }
static nb_tensor *op_where3(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_where(menv.m, menv.g, menv.x); }
static nb_tensor *op_where_fcond(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_where(menv.x, menv.g, menv.zero); }
static nb_tensor *op_where_t(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_where(menv.mt, menv.gt, menv.xt); }
static nb_tensor *op_masked_fill(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_masked_fill(menv.g, menv.m, 0.0); }
static nb_tensor *op_gt_scalar(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_gt(menv.x, 0.5); }
static nb_tensor *op_lt(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_lt(menv.x, menv.g); }
static nb_tensor *op_lt_t(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_lt(menv.xt, menv.gt); }
static nb_tensor *op_and(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_logical_and(menv.m, menv.m2); }
static nb_tensor *op_not(nb_tensor *a, nb_tensor *b) { (void)a; (void)b; return nb_logical_not(menv.m); }

typedef struct mask_case {
    const char *name;
    nb_tensor *(*op)(nb_tensor *, nb_tensor *);
    int bytes; /* bytes moved per element */
} mask_case;

static void mask_cases(int64_t n, int reps, double copy_bw) {
    int64_t side = 1;
    while ((side + 1) * (side + 1) <= n) side++;
    menv.x = nb_rand(&n, 1, NB_F32);
    menv.g = nb_rand(&n, 1, NB_F32);
    menv.m = nb_gt(menv.x, 0.5);
    menv.m2 = nb_lt(menv.g, 0.3);
    menv.zero = nb_scalar(0.0, NB_F32);
    int64_t sq[2] = {side, side};
    nb_tensor *x2 = nb_rand(sq, 2, NB_F32), *g2 = nb_rand(sq, 2, NB_F32), *m2d = nb_gt(x2, 0.5);
    menv.xt = nb_transpose(x2, 0, 1);
    menv.gt = nb_transpose(g2, 0, 1);
    menv.mt = nb_transpose(m2d, 0, 1);
    static const mask_case cases[] = {
        {"where(bool, x, 0) (ReLU backward)", op_relu_bwd, 1 + 4 + 4},
        {"where(bool, x, y)", op_where3, 1 + 4 + 4 + 4},
        {"where(f32, x, 0)", op_where_fcond, 4 + 4 + 4},
        {"masked_fill(x, bool, 0)", op_masked_fill, 1 + 4 + 4},
        {"gt(x, 0.5) -> bool", op_gt_scalar, 4 + 1},
        {"lt(x, y) -> bool", op_lt, 4 + 4 + 1},
        {"logical_and(bool, bool)", op_and, 1 + 1 + 1},
        {"logical_not(bool)", op_not, 1 + 1},
        {"where(bool^T, x^T, y^T) (transposed)", op_where_t, 1 + 4 + 4 + 4},
        {"lt(x^T, y^T) (transposed)", op_lt_t, 4 + 4 + 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!selected(cases[i].name)) continue;
        ew_case c = {cases[i].name, cases[i].op, 0, false};
        ew_ctx x = {&c, NULL, NULL};
        bool t = strstr(cases[i].name, "^T") != NULL;
        bench_stat s = bench_run(run_op, &x, 2, reps, 1);
        double bw = (double)cases[i].bytes * (double)(t ? side * side : n) / s.median / 1e9;
        printf("| nb %s | %.2f | %.2f..%.2f | %.1f | %.2fx |\n", cases[i].name, s.median * 1e3, s.min * 1e3,
               s.max * 1e3, bw, bw / copy_bw);
    }
    nb_release(x2);
    nb_release(g2);
    nb_release(m2d);
    nb_tensor **all = (nb_tensor **)&menv;
    for (size_t i = 0; i < sizeof menv / sizeof(nb_tensor *); i++) nb_release(all[i]);
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
            ew_case c = {"", k < 2 ? op_add : op_exp, 2, false};
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
    nb_tensor *b8 = nb_mul(b, 8.0), *sa = nb_sub(b8, 4.0); /* uniform in [-4, 4) */
    nb_release(b8);
    if (!a || !b || !sa) {
        fprintf(stderr, "setup failed: %s\n", nb_last_message());
        return 1;
    }
    static const ew_case cases[] = {
        {"add", op_add, 2, false},
        {"mul", op_mul, 2, false},
        {"add scalar", op_add_scalar, 1, false},
        {"exp", op_exp, 1, false},
        {"tanh", op_tanh, 1, false},
        {"sigmoid", op_sigmoid, 1, false},
        {"expm1 [-4, 4)", op_expm1, 1, true},
        {"log", op_log, 1, false},
        {"log1p", op_log1p, 1, false},
        {"erf [-4, 4)", op_erf, 1, true},
        {"gelu [-4, 4)", op_gelu, 1, true},
        {"gelu_tanh [-4, 4)", op_gelu_tanh, 1, true},
        {"silu [-4, 4)", op_silu, 1, true},
        {"softplus(beta 1, threshold 20) [-4, 4)", op_softplus, 1, true},
        {"elu(alpha 1) [-4, 4)", op_elu, 1, true},
        {"sin [-4, 4)", op_sin, 1, true},
        {"cos [-4, 4)", op_cos, 1, true},
        {"tan [-4, 4)", op_tan, 1, true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!selected(cases[i].name)) continue;
        ew_ctx x = {&cases[i], cases[i].signed_in ? sa : a, b};
        bench_stat s = bench_run(run_op, &x, 2, reps, 1);
        double bw = (double)(cases[i].nin + 1) * (double)bytes / s.median / 1e9;
        printf("| nb %s | %.2f | %.2f..%.2f | %.1f | %.2fx |\n", cases[i].name, s.median * 1e3,
               s.min * 1e3, s.max * 1e3, bw, bw / copy_bw);
    }
    nb_release(a);
    nb_release(b);
    nb_release(sa);
    mask_cases(n, reps, copy_bw);
    if (!getenv("NB_BENCH_FILTER")) size_sweep(reps);
    return 0;
}
