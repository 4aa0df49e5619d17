/*
 * bench_faults.c — minor page faults and time per training step after
 * warm-up: the Fashion-MNIST MLP (784-256-128-10) and CNN of `nabla train`
 * (tools/models.c), Adam, one scope per step, as the tool trains them.
 * The first BENCH_WARM steps warm the caches; the next steps are measured
 * with getrusage(RUSAGE_SELF).ru_minflt around each step.
 *   bench_faults [STEPS]       (default 200 measured steps per model/batch)
 * Environment: NB_BENCH_THREADS (2), NB_BENCH_MODELS ("mlp cnn"),
 * NB_BENCH_BATCHES ("64 128"); data from NB_FASHION_MNIST_DIR.
 */
#include "bench_util.h"

#include <nabla.h>
#include <sys/resource.h>

#define BENCH_WARM 50

static long minflt(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

static bool add(nb_module *seq, const char *name, nb_module *child) {
    return child && nb_sequential_add(seq, name, child) == NB_OK;
}

static nb_module *model_new(bool cnn) {
    nb_module *s = nb_nn_sequential();
    nb_conv2d_opts same = {{1, 1}, {1, 1}, {1, 1}, 1};
    bool ok = cnn ? add(s, "conv1", nb_nn_conv2d(1, 32, 3, 3, same, true)) && add(s, NULL, nb_nn_relu()) &&
                        add(s, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))) &&
                        add(s, "conv2", nb_nn_conv2d(32, 64, 3, 3, same, true)) && add(s, NULL, nb_nn_relu()) &&
                        add(s, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))) && add(s, NULL, nb_nn_flatten(1, -1)) &&
                        add(s, "fc1", nb_nn_linear(64 * 7 * 7, 128, true)) && add(s, NULL, nb_nn_relu()) &&
                        add(s, "fc2", nb_nn_linear(128, 10, true))
                  : add(s, "fc1", nb_nn_linear(784, 256, true)) && add(s, NULL, nb_nn_relu()) &&
                        add(s, "fc2", nb_nn_linear(256, 128, true)) && add(s, NULL, nb_nn_relu()) &&
                        add(s, "fc3", nb_nn_linear(128, 10, true));
    if (!ok) {
        fprintf(stderr, "bench_faults: building the model: %s\n", nb_last_message());
        exit(1);
    }
    return s;
}

/* One Adam step on rows [s, s + batch) of perm (as tools/cmd_train.c's train_step). */
static void step(nb_module *net, nb_optimizer *opt, bool cnn, nb_tensor *x, nb_tensor *y, nb_tensor *perm, int64_t s,
                 int64_t batch) {
    nb_scope_begin();
    nb_tensor *xb = nb_mul(nb_sub(nb_take_rows(x, perm, s, batch), 0.2860), 1 / 0.3530);
    if (cnn) xb = nb_reshape(xb, NB_SHAPE(-1, 1, 28, 28));
    nb_tensor *loss = nb_cross_entropy(nb_module_forward(net, xb), nb_take_rows(y, perm, s, batch),
                                       NB_CROSS_ENTROPY_DEFAULTS);
    double lv;
    if (!loss || nb_item(loss, &lv) != NB_OK || nb_backward(loss, NULL, false) != NB_OK || nb_optim_step(opt) != NB_OK) {
        fprintf(stderr, "bench_faults: training step: %s\n", nb_last_message());
        exit(1);
    }
    nb_optim_zero_grad(opt);
    nb_scope_end();
}

static void run(bool cnn, int64_t batch, int steps, nb_tensor *x, nb_tensor *y) {
    nb_manual_seed(1);
    nb_module *net = model_new(cnn);
    nb_tensor *params[16];
    int np = nb_module_params(net, params, 16);
    nb_optimizer *opt = nb_optim_adam(params, np, (nb_adam_opts){2e-3, 0.9, 0.999, 1e-8, 0});
    int64_t n = nb_size(x, 0), per_epoch = n / batch;
    nb_tensor *perm = nb_randperm(n);
    int64_t k = 0;
    for (int i = 0; i < BENCH_WARM; i++, k = (k + 1) % per_epoch) step(net, opt, cnn, x, y, perm, k * batch, batch);
    long faults = 0, worst = 0;
    double t0 = bench_now();
    for (int i = 0; i < steps; i++, k = (k + 1) % per_epoch) {
        long f0 = minflt();
        step(net, opt, cnn, x, y, perm, k * batch, batch);
        long f = minflt() - f0;
        faults += f;
        if (f > worst) worst = f;
    }
    double dt = bench_now() - t0;
    printf("| %s | %lld | %d | %.2f | %ld | %.3f | %.2f |\n", cnn ? "cnn" : "mlp", (long long)batch, steps,
           (double)faults / steps, worst, 1e3 * dt / steps, dt / steps * (double)per_epoch);
    nb_release(perm);
    nb_optim_free(opt);
    nb_module_free(net);
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    const char *th = getenv("NB_BENCH_THREADS"), *models = getenv("NB_BENCH_MODELS"),
               *batches = getenv("NB_BENCH_BATCHES");
    nb_set_num_threads(th ? atoi(th) : 2);
    nb_tensor *x, *y;
    if (nb_fashion_mnist_load(NB_FASHION_MNIST_DIR, true, &x, &y) != NB_OK) {
        fprintf(stderr, "bench_faults: %s\n", nb_last_message());
        return 1;
    }
    printf("| model | batch | steps | minor faults/step | worst step | ms/step | epoch s (est.) |\n"
           "|---|---|---|---|---|---|---|\n");
    const char *ms[] = {"mlp", "cnn"};
    for (int m = 0; m < 2; m++) {
        if (models && !strstr(models, ms[m])) continue;
        char buf[64];
        snprintf(buf, sizeof buf, "%s", batches ? batches : "64 128");
        for (char *tok = strtok(buf, " "); tok; tok = strtok(NULL, " ")) run(m == 1, atoll(tok), steps, x, y);
    }
    nb_release(x);
    nb_release(y);
    nb_shutdown();
    return 0;
}
