/*
 * test_train.c — layers and containers (N1) and a short end-to-end training
 * run: parameter names and counts, torch's initialization bounds, seeded
 * reproducibility, layer forwards against the functional ops, container
 * errors, and an MLP trained for a few hundred steps on Fashion-MNIST (when
 * installed) and on separable synthetic data, whose held-out accuracy must
 * rise from chance to far above it.
 */
#include "support.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool quick(void) { return getenv("NB_TEST_QUICK") != NULL; }

static nb_module *mlp(int64_t in, int64_t hidden, int64_t out) {
    nb_module *s = nb_nn_sequential();
    assert_non_null(s);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_linear(in, hidden, true)), NB_OK);
    assert_int_equal(nb_sequential_add(s, NULL, nb_nn_relu()), NB_OK);
    assert_int_equal(nb_sequential_add(s, "head", nb_nn_linear(hidden, out, true)), NB_OK);
    return s;
}

static void names_counts_and_init(void **state) {
    (void)state;
    nb_manual_seed(1);
    nb_module *m = mlp(50, 40, 3);
    assert_int_equal(nb_module_param_count(m), 4);
    const char *want[] = {"0.weight", "0.bias", "head.weight", "head.bias"};
    for (int i = 0; i < 4; i++) assert_string_equal(nb_module_param_name(m, i), want[i]);
    assert_null(nb_module_param_name(m, 4));
    nb_scope_begin();
    nb_tensor *w = NBT(nb_module_param_named(m, "0.weight"));
    assert_int_equal(nb_shape(w)[0], 40);
    assert_int_equal(nb_shape(w)[1], 50);
    assert_true(nb_requires_grad(w) && nb_is_leaf(w) && nb_dtype_of(w) == NB_F32);
    /* torch.nn.Linear: U(-1/sqrt(in), 1/sqrt(in)); mean 0, variance bound^2 / 3 */
    double bound = 1 / sqrt(50.0), mean = 0, sq = 0;
    for (int64_t i = 0; i < 2000; i++) {
        double v = nbt_at(w, i);
        assert_true(fabs(v) <= bound);
        mean += v / 2000;
        sq += v * v / 2000;
    }
    assert_true(fabs(mean) < 0.1 * bound);
    assert_true(fabs(sq / (bound * bound / 3) - 1) < 0.1);
    /* the same seed gives the same weights */
    nb_manual_seed(1);
    nb_module *again = mlp(50, 40, 3);
    assert_close(NBT(nb_module_param(again, 2)), NBT(nb_module_param(m, 2)), 0, 0);
    nb_tensor *ps[4];
    assert_int_equal(nb_module_params(m, ps, 4), 4);
    assert_true(ps[0] == w);
    assert_null(nb_module_param_named(m, "1.weight"));
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    assert_non_null(strstr(nb_last_message(), "1.weight"));
    nb_clear_error();
    nb_scope_end();
    nb_module_free(again);
    nb_module_free(m);
}

static void layer_forwards_match_functional_ops(void **state) {
    (void)state;
    nb_manual_seed(2);
    nb_scope_begin();
    nb_conv2d_opts o = {{2, 1}, {1, 1}, {1, 1}, 2};
    nb_module *conv = nb_nn_conv2d(4, 6, 3, 2, o, true);
    assert_non_null(conv);
    nb_tensor *x = NBT(nb_randn(NB_SHAPE(2, 4, 7, 6), NB_F32));
    nb_tensor *w = NBT(nb_module_param_named(conv, "weight"));
    assert_int_equal(nb_shape(w)[1], 2); /* in / groups */
    double bound = 1 / sqrt(2 * 3 * 2.0);
    for (int64_t i = 0; i < nb_numel(w); i++) assert_true(fabs(nbt_at(w, i)) <= bound);
    assert_close(NBT(nb_module_forward(conv, x)), NBT(nb_conv2d(x, w, NBT(nb_module_param_named(conv, "bias")), o)), 0, 0);

    nb_module *ln = nb_nn_layer_norm(NB_SHAPE(7, 6), 1e-5, true);
    assert_close(NBT(nb_module_forward(ln, x)), NBT(nb_layer_norm(x, 2, NULL, NULL, 1e-5)), 1e-6, 1e-6);

    nb_module *emb = nb_nn_embedding(10, 3);
    int64_t iv[] = {4, 0, 9};
    nb_tensor *idx = NBT(nb_from_data(iv, NB_SHAPE(3), NB_I64));
    nb_tensor *e = NBT(nb_module_forward(emb, idx));
    nb_tensor *table = NBT(nb_module_param(emb, 0));
    for (int k = 0; k < 3; k++) assert_true(nbt_at(e, 3 + k) == nbt_at(table, k));

    nb_module *seq = nb_nn_sequential();
    assert_int_equal(nb_sequential_add(seq, NULL, nb_nn_max_pool2d(NB_POOL2D(2, 2))), NB_OK);
    assert_int_equal(nb_sequential_add(seq, NULL, nb_nn_flatten(1, -1)), NB_OK);
    assert_int_equal(nb_sequential_add(seq, NULL, nb_nn_dropout(0.5)), NB_OK);
    nb_module_train(seq, false); /* dropout is the identity in eval mode */
    nb_tensor *y = NBT(nb_module_forward(seq, x));
    assert_close(y, NBT(nb_flatten(NBT(nb_max_pool2d(x, NB_POOL2D(2, 2))), 1, -1)), 0, 0);
    nb_module_train(seq, true); /* in training mode about half the values are zeroed, the rest doubled */
    nb_tensor *yd = NBT(nb_module_forward(seq, x));
    int64_t zeros = 0;
    for (int64_t i = 0; i < nb_numel(y); i++) {
        double a = nbt_at(yd, i), b = nbt_at(y, i);
        if (a == 0) zeros++;
        else assert_true(fabs(a - 2 * b) <= 1e-6 * (1 + fabs(b)));
    }
    assert_true(zeros > nb_numel(y) / 4 && zeros < 3 * nb_numel(y) / 4);
    nb_scope_end();
    nb_module_free(conv);
    nb_module_free(ln);
    nb_module_free(emb);
    nb_module_free(seq);
}

static void container_errors(void **state) {
    (void)state;
    nb_module *seq = nb_nn_sequential(), *lin = nb_nn_linear(2, 2, false);
    assert_int_equal(nb_sequential_add(seq, "a", lin), NB_OK);
    assert_int_equal(nb_sequential_add(seq, "a", nb_nn_relu()), NB_ERR_ARG); /* taken: the child is freed */
    assert_non_null(strstr(nb_last_message(), "'a'"));
    assert_int_equal(nb_sequential_add(seq, "x.y", nb_nn_relu()), NB_ERR_ARG);
    assert_int_equal(nb_sequential_add(lin, NULL, nb_nn_relu()), NB_ERR_ARG); /* not a container */
    assert_int_equal(nb_sequential_add(seq, NULL, lin), NB_ERR_ARG);          /* already placed */
    nb_module_free(lin);                                                      /* refused: seq owns it */
    assert_int_equal(nb_last_status(), NB_ERR_STATE);
    assert_int_equal(nb_module_param_count(seq), 1);
    assert_null(nb_nn_linear(0, 3, true));
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    assert_null(nb_nn_conv2d(3, 4, 3, 3, (nb_conv2d_opts){{1, 1}, {0, 0}, {1, 1}, 2}, true));
    assert_non_null(strstr(nb_last_message(), "groups"));
    assert_null(nb_nn_dropout(1.5));
    nb_clear_error(); /* forward keeps a pending error, as every op does */
    assert_null(nb_module_forward(NULL, NULL));
    assert_int_equal(nb_last_status(), NB_ERR_NULL);
    nb_clear_error();
    nb_module_free(seq);
}

/* ---- a short training run ---- */

typedef struct dataset {
    nb_tensor *x, *y, *test_x, *test_y;
    int64_t in, classes;
} dataset;

/* The first rows of Fashion-MNIST when installed (standardized pixels); false when it is not. */
static bool fashion_mnist(dataset *d, int64_t ntrain, int64_t ntest) {
    nb_tensor *x, *y, *tx, *ty;
    if (nb_fashion_mnist_load(NULL, true, &x, &y) != NB_OK) return false;
    if (nb_fashion_mnist_load(NULL, false, &tx, &ty) != NB_OK) return false;
    d->x = NBT(nb_narrow(x, 0, 0, ntrain));
    d->y = NBT(nb_narrow(y, 0, 0, ntrain));
    d->test_x = NBT(nb_narrow(tx, 0, 0, ntest));
    d->test_y = NBT(nb_narrow(ty, 0, 0, ntest));
    d->in = 784;
    d->classes = 10;
    return true;
}

/* 40 Gaussian blobs in 20-D with well-separated random centres; blob b has label b mod 10, so every
 * class is four far-apart blobs: separable by an MLP, not linearly, and an untrained net (which
 * gives each blob one arbitrary class) is near chance, 1/10 ± 0.05 over the 40 blobs. */
#define SYN_BLOBS 40
#define SYN_CLASSES 10
static void synthetic(dataset *d, int64_t ntrain, int64_t ntest) {
    nb_tensor *centres = NBT(nb_mul(NBT(nb_randn(NB_SHAPE(SYN_BLOBS, 20), NB_F32)), 3.0));
    nb_tensor *parts[2][2];
    for (int k = 0; k < 2; k++) {
        int64_t n = k ? ntest : ntrain;
        nb_tensor *blob = NBT(nb_remainder(NBT(nb_arange(0, (double)n, 1, NB_I64)), (int64_t)SYN_BLOBS));
        nb_tensor *mean = NBT(nb_index_select(centres, 0, blob));
        parts[k][0] = NBT(nb_add(mean, NBT(nb_randn(NB_SHAPE(n, 20), NB_F32))));
        parts[k][1] = NBT(nb_remainder(blob, (int64_t)SYN_CLASSES));
    }
    *d = (dataset){parts[0][0], parts[0][1], parts[1][0], parts[1][1], 20, SYN_CLASSES};
}

static double accuracy(nb_module *m, nb_tensor *x, nb_tensor *y) {
    nb_no_grad_begin();
    nb_tensor *hits = NBT(nb_sum(NBT(nb_eq(NBT(nb_argmax(NBT(nb_module_forward(m, x)), 1, false)), y)), NULL, 0, false));
    nb_no_grad_end();
    return nbt_at(hits, 0) / (double)nb_numel(y);
}

/* Chance level of labels y: the share of the most frequent class (what a constant guess scores). */
static double chance(nb_tensor *y, int64_t classes) {
    int64_t count[16] = {0}, best = 0;
    assert_true(classes <= 16);
    for (int64_t i = 0; i < nb_numel(y); i++) {
        int64_t c = (int64_t)nbt_at(y, i);
        assert_true(c >= 0 && c < classes);
        if (++count[c] > best) best = count[c];
    }
    return (double)best / (double)nb_numel(y);
}

/* Train an MLP for a few hundred Adam steps; held-out accuracy must go from near chance to `want`. */
static void train_and_check(const char *what, dataset *d, double want) {
    nb_module *m = mlp(d->in, 64, d->classes);
    int n = nb_module_param_count(m);
    nb_tensor *ps[4];
    assert_int_equal(nb_module_params(m, ps, 4), n);
    nb_optimizer *opt = nb_optim_adam(ps, n, (nb_adam_opts){2e-3, 0.9, 0.999, 1e-8, 0});
    assert_non_null(opt);
    double base = chance(d->test_y, d->classes), before = accuracy(m, d->test_x, d->test_y);
    int steps = quick() ? 120 : 300, batch = 64;
    int64_t rows = nb_size(d->x, 0);
    nb_tensor *perm = NBT(nb_randperm(rows));
    for (int s = 0; s < steps; s++) {
        nb_scope_begin(); /* everything a step creates dies here: no growth over the run */
        int64_t start = (int64_t)s * batch % rows;
        nb_tensor *x = NBT(nb_take_rows(d->x, perm, start, batch)), *y = NBT(nb_take_rows(d->y, perm, start, batch));
        nb_tensor *loss = NBT(nb_cross_entropy(NBT(nb_module_forward(m, x)), y, NB_CROSS_ENTROPY_DEFAULTS));
        assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
        assert_int_equal(nb_clip_grad_norm_(ps, n, 5.0, 2, NULL), NB_OK);
        nb_optim_set_lr(opt, nb_lr_cosine(2e-3, s, steps, 0));
        assert_int_equal(nb_optim_step(opt), NB_OK);
        nb_optim_zero_grad(opt);
        nb_scope_end();
    }
    double after = accuracy(m, d->test_x, d->test_y);
    print_message("%s data: chance %.3f; held-out accuracy %.3f before, %.3f after %d steps\n", what, base, before,
                  after, steps);
    assert_true(before < base + 0.25); /* an untrained net is near chance on both data sets */
    assert_true(after > want);
    nb_optim_free(opt);
    nb_module_free(m);
}

/* The real data set, which the test command installs (Debian's dataset-fashion-mnist); skipped without it. */
static void mlp_learns_fashion_mnist(void **state) {
    (void)state;
    nb_manual_seed(3);
    nb_scope_begin();
    dataset d;
    if (!fashion_mnist(&d, 8192, 2000)) {
        print_message("skipped: %s\n", nb_last_message());
        nb_clear_error();
        nb_scope_end();
        skip();
    }
    train_and_check("Fashion-MNIST", &d, quick() ? 0.70 : 0.76);
    nb_scope_end();
}

/* The synthetic stand-in, always run, so the training loop is tested without the data set too. */
static void mlp_learns_synthetic(void **state) {
    (void)state;
    nb_manual_seed(3);
    nb_scope_begin();
    dataset d;
    synthetic(&d, 8192, 2000);
    train_and_check("synthetic", &d, 0.9);
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_counts_and_init),
        cmocka_unit_test(layer_forwards_match_functional_ops),
        cmocka_unit_test(container_errors),
        cmocka_unit_test(mlp_learns_fashion_mnist),
        cmocka_unit_test(mlp_learns_synthetic),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
