/*
 * bench_dist.c — data-parallel training's communication (D1), under mpirun:
 *  1. all-reduce bandwidth: nb_dist_all_reduce of a float32 buffer of the MLP's 235,146 parameters
 *     and of 64 MiB, and nb_ddp_finish reducing the MLP's gradients in its buckets, each against
 *     the MPI library's own MPI_Allreduce (MPI_IN_PLACE, MPI_SUM) of a plain buffer of the same
 *     size, interleaved; bus bandwidth = 2 (N-1)/N · bytes / time (the ring all-reduce's traffic);
 *  2. overlap: the MLP's forward + backward on a batch share alone (T_fb), the DDP finish of a step
 *     whose buckets all start in it (T_ar: the communication by itself), and forward + backward +
 *     finish with the buckets started during backward (T_ddp): the fraction of the communication
 *     hidden behind backward is (T_fb + T_ar - T_ddp) / T_ar.
 * Medians of `reps` repetitions after a warm-up.  Usage (rank 0 prints Markdown):
 *   mpirun -np 2 bench_dist [reps [threads [batch [bucket_kib]]]]
 * (defaults 21, 1, 128: the global batch, 0: nb_ddp's default bucket size)
 */
#include "bench_util.h"
#include "nabla.h"

#ifdef NB_HAVE_MPI
#include <mpi.h>

enum { MLP_PARAMS = 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10 };

static double median_of(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, bench_cmp_double);
    return t[n / 2];
}

/* nb_dist_all_reduce vs MPI_Allreduce on n floats: their medians in seconds. */
static void allreduce_pair(int64_t n, int reps, double *nb, double *mpi) {
    nb_scope_begin();
    nb_tensor *t = nb_ones((int64_t[]){n}, 1, NB_F32);
    float *raw = calloc((size_t)n, sizeof(float));
    double a[BENCH_MAX_REPS], b[BENCH_MAX_REPS];
    for (int r = -1; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        nb_dist_all_reduce(t, NB_DIST_SUM);
        double t1 = bench_now();
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = bench_now();
        MPI_Allreduce(MPI_IN_PLACE, raw, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t3 = bench_now();
        if (r >= 0) {
            a[r] = t1 - t0;
            b[r] = t3 - t2;
        }
    }
    *nb = median_of(a, reps);
    *mpi = median_of(b, reps);
    free(raw);
    nb_scope_end();
}

static nb_module *mlp(void) {
    nb_module *s = nb_nn_sequential();
    nb_sequential_add(s, "fc1", nb_nn_linear(784, 256, true));
    nb_sequential_add(s, NULL, nb_nn_relu());
    nb_sequential_add(s, "fc2", nb_nn_linear(256, 128, true));
    nb_sequential_add(s, NULL, nb_nn_relu());
    nb_sequential_add(s, "fc3", nb_nn_linear(128, 10, true));
    return s;
}

/* One forward + backward of the MLP on x, y. */
static void fwd_bwd(nb_module *m, nb_tensor *x, nb_tensor *y) {
    nb_scope_begin();
    nb_backward(nb_cross_entropy(nb_module_forward(m, x), y, NB_CROSS_ENTROPY_DEFAULTS), NULL, false);
    nb_scope_end();
}

int main(int argc, char **argv) {
    if (nb_dist_init(&argc, &argv) != NB_OK) {
        fprintf(stderr, "bench_dist: %s\n", nb_last_message());
        return 1;
    }
    int reps = argc > 1 ? atoi(argv[1]) : 21, threads = argc > 2 ? atoi(argv[2]) : 1;
    int64_t batch = argc > 3 ? atoll(argv[3]) : 128;
    size_t bucket = argc > 4 ? (size_t)atoll(argv[4]) << 10 : 0;
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    nb_set_num_threads(threads);
    int w = nb_dist_world_size(), rank = nb_dist_rank();
    double bus = 2.0 * (w - 1) / w;
    if (rank == 0)
        printf("%d ranks x %d threads, %s, medians of %d\n\n| buffer | nabla ms | MPI_Allreduce ms | nabla bus GB/s | "
               "MPI bus GB/s | nabla / MPI bandwidth |\n|---|---|---|---|---|---|\n",
               w, threads, nb_dist_library_version(), reps);
    const int64_t sizes[2] = {MLP_PARAMS, 16 << 20};
    const char *names[2] = {"MLP gradients, 235,146 f32, one all-reduce", "64 MiB f32"};
    for (int k = 0; k < 2; k++) {
        double a, b, bytes = 4.0 * (double)sizes[k];
        allreduce_pair(sizes[k], reps, &a, &b);
        if (rank == 0)
            printf("| %s | %.3f | %.3f | %.2f | %.2f | %.2f |\n", names[k], a * 1e3, b * 1e3, bus * bytes / a * 1e-9,
                   bus * bytes / b * 1e-9, b / a);
    }
    /* the MLP with DDP: its gradient buffer in buckets, and the overlap */
    nb_manual_seed(1);
    nb_module *m = mlp();
    nb_tensor *p[6];
    nb_module_params(m, p, 6);
    nb_ddp *d = nb_ddp_new(p, 6, bucket);
    int64_t off, cnt;
    nb_dist_shard(batch, &off, &cnt);
    nb_scope_begin();
    nb_tensor *x = nb_rand((int64_t[]){cnt, 784}, 2, NB_F32);
    nb_tensor *y = nb_cast(nb_mul(nb_rand((int64_t[]){cnt}, 1, NB_F32), 9.99), NB_I64);
    double tfb[BENCH_MAX_REPS], tar[BENCH_MAX_REPS], tddp[BENCH_MAX_REPS], raw[BENCH_MAX_REPS];
    float *plain = calloc(MLP_PARAMS, sizeof(float));
    for (int r = -1; r < reps; r++) {
        nb_ddp_free(d); /* forward + backward alone: no hooks */
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        fwd_bwd(m, x, y);
        double t1 = bench_now();
        for (int i = 0; i < 6; i++) nb_zero_grad(p[i]);
        d = nb_ddp_new(p, 6, bucket);
        MPI_Barrier(MPI_COMM_WORLD);
        double t2 = bench_now();
        nb_ddp_finish(d); /* every bucket starts here: the communication alone */
        double t3 = bench_now();
        MPI_Barrier(MPI_COMM_WORLD);
        double t4 = bench_now();
        fwd_bwd(m, x, y);
        nb_ddp_finish(d);
        double t5 = bench_now();
        for (int i = 0; i < 6; i++) nb_zero_grad(p[i]);
        MPI_Barrier(MPI_COMM_WORLD);
        double t6 = bench_now();
        MPI_Allreduce(MPI_IN_PLACE, plain, MLP_PARAMS, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        double t7 = bench_now();
        if (r >= 0) {
            tfb[r] = t1 - t0;
            tar[r] = t3 - t2;
            tddp[r] = t5 - t4;
            raw[r] = t7 - t6;
        }
    }
    nb_ddp_stats s = nb_ddp_stats_get(d);
    double fb = median_of(tfb, reps), ar = median_of(tar, reps), dd = median_of(tddp, reps), rw = median_of(raw, reps);
    if (rank == 0) {
        double bytes = 4.0 * MLP_PARAMS;
        printf("| MLP gradients in nb_ddp_finish (%d buckets, all started in finish) | %.3f | %.3f | %.2f | %.2f | %.2f |\n",
               s.buckets, ar * 1e3, rw * 1e3, bus * bytes / ar * 1e-9, bus * bytes / rw * 1e-9, rw / ar);
        printf("\nMLP step on %lld of %lld rows a rank: forward + backward %.3f ms, communication alone %.3f ms, "
               "forward + backward + finish with DDP %.3f ms: %.0f%% of the communication hidden behind backward\n",
               (long long)cnt, (long long)batch, fb * 1e3, ar * 1e3, dd * 1e3, 100 * (fb + ar - dd) / ar);
    }
    free(plain);
    nb_scope_end();
    nb_ddp_free(d);
    nb_module_free(m);
    nb_dist_finalize();
    return 0;
}
#else
int main(void) {
    fprintf(stderr, "bench_dist: this build has no MPI\n");
    return 1;
}
#endif
