/*
 * bench_window.c — the CNN's sliding-window and activation passes at the
 * Fashion-MNIST CNN's training shapes (`nabla train --model cnn`, batch N):
 * max pooling 2x2 with and without the argmax, its adjoint max_unpool2d,
 * unfold of conv1's and conv2's inputs, fold of conv2's [N, 32, 14, 14]
 * (3x3, padding 1), and ReLU forward and backward (the derivative rule's
 * ops) on conv1's output.
 * Each row is the median (and min) of `reps` calls after 2 warm-up calls,
 * a fresh output per call as in training.  Compare builds by running two
 * binaries back to back (bench/RESULTS.md, section 16).
 *   bench_window [N [reps]]      (defaults 128, 21; NB_BENCH_THREADS, 2)
 */
#include "bench_util.h"

#include <nabla.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct win_case {
    const char *name;
    nb_tensor *(*fn)(nb_tensor *const *in);
    nb_tensor *in[3];
} win_case;

static const nb_window2d POOL = NB_POOL2D(2, 2), CONV = {{3, 3}, {1, 1}, {1, 1}, {1, 1}};

static nb_tensor *pool_idx(nb_tensor *const *in) {
    nb_tensor *idx = NULL, *r = nb_max_pool2d_with_indices(in[0], POOL, &idx);
    nb_release(idx);
    return r;
}
static nb_tensor *pool(nb_tensor *const *in) { return nb_max_pool2d(in[0], POOL); }
static nb_tensor *unpool(nb_tensor *const *in) {
    return nb_max_unpool2d(in[0], in[1], 2 * nb_shape(in[0])[2], 2 * nb_shape(in[0])[3]);
}
static nb_tensor *unfold(nb_tensor *const *in) { return nb_unfold(in[0], CONV); }
static nb_tensor *fold(nb_tensor *const *in) { return nb_fold(in[0], 14, 14, CONV); }
static nb_tensor *relu(nb_tensor *const *in) { return nb_relu(in[0]); }
/* relu's derivative rule (vjp_elementwise.c): g where the result is not 0, else 0, one select with
 * the result itself as the condition (in[0]: relu's output; in[2] is a 0-d zero) */
static nb_tensor *relu_grad(nb_tensor *const *in) { return nb_where(in[0], in[1], in[2]); }

static void run_case(void *p) {
    win_case *c = p;
    nb_tensor *r = c->fn(c->in);
    if (!r) {
        fprintf(stderr, "bench_window: %s: %s\n", c->name, nb_last_message());
        exit(1);
    }
    nb_release(r);
}

int main(int argc, char **argv) {
    int64_t N = argc > 1 ? atoll(argv[1]) : 128;
    int reps = argc > 2 ? atoi(argv[2]) : 21, threads = bench_env_int("NB_BENCH_THREADS", 2);
    if (N < 1 || reps < 1 || reps > BENCH_MAX_REPS) {
        fprintf(stderr, "usage: bench_window [N >= 1 [reps 1..%d]]\n", BENCH_MAX_REPS);
        return 2;
    }
    nb_set_num_threads(threads);
    nb_manual_seed(1);
    nb_tensor *a1 = nb_randn(NB_SHAPE(N, 32, 28, 28), NB_F32), *a2 = nb_randn(NB_SHAPE(N, 64, 14, 14), NB_F32);
    nb_tensor *x1 = nb_randn(NB_SHAPE(N, 1, 28, 28), NB_F32), *x2 = nb_randn(NB_SHAPE(N, 32, 14, 14), NB_F32);
    nb_tensor *i1 = NULL, *i2 = NULL;
    nb_tensor *p1 = nb_max_pool2d_with_indices(a1, POOL, &i1), *p2 = nb_max_pool2d_with_indices(a2, POOL, &i2);
    nb_tensor *cols = nb_unfold(x2, CONV), *g1 = nb_randn(NB_SHAPE(N, 32, 28, 28), NB_F32), *r1 = nb_relu(a1);
    nb_tensor *zero = nb_zeros(NULL, 0, NB_F32);
    if (!x1 || !cols || !p1 || !p2 || !g1 || !r1 || !zero) {
        fprintf(stderr, "bench_window: %s\n", nb_last_message());
        return 1;
    }
    win_case cases[] = {
        {"max_pool2d 2x2 + indices, conv1 [N,32,28,28]", pool_idx, {a1}},
        {"max_pool2d 2x2 + indices, conv2 [N,64,14,14]", pool_idx, {a2}},
        {"max_pool2d 2x2 values, conv1", pool, {a1}},
        {"max_unpool2d (pool1's adjoint)", unpool, {p1, i1}},
        {"max_unpool2d (pool2's adjoint)", unpool, {p2, i2}},
        {"unfold 3x3 pad 1, [N,1,28,28]", unfold, {x1}},
        {"unfold 3x3 pad 1, [N,32,14,14]", unfold, {x2}},
        {"fold 3x3 pad 1 -> [N,32,14,14]", fold, {cols}},
        {"relu, conv1 [N,32,28,28]", relu, {a1}},
        {"relu backward (where on the result)", relu_grad, {r1, g1, zero}},
    };
    printf("CPU: %s; %d threads; N = %lld; median (min) of %d calls\n\n", bench_cpu_model(), threads, (long long)N,
           reps);
    printf("| pass | ms | min ms |\n|---|---:|---:|\n");
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        bench_stat s = bench_run(run_case, &cases[k], 2, reps, 1);
        printf("| %s | %.3f | %.3f |\n", cases[k].name, s.median * 1e3, s.min * 1e3);
    }
    nb_tensor *all[] = {a1, a2, x1, x2, i1, i2, p1, p2, cols, g1, r1, zero};
    for (size_t k = 0; k < sizeof all / sizeof *all; k++) nb_release(all[k]);
    return 0;
}
