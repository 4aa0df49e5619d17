/*
 * test_optim.c — optimizers, schedules and clipping (N2) against the update
 * formulas written out here (torch.optim's documented algorithms), closed
 * forms of the schedules, and the global-norm rule of clip_grad_norm_.
 */
#include "support.h"

#include <math.h>
#include <string.h>

#define N 5

static const double P0[N] = {0.5, -1.25, 2.0, 0.0, -0.75};
/* gradients fed at steps 1, 2, 3 */
static const double G[3][N] = {
    {0.1, -0.4, 0.3, 1.5, -0.2},
    {-0.3, 0.2, 0.7, -1.0, 0.05},
    {0.25, 0.1, -0.6, 0.4, 0.9},
};

/* P0 as a parameter of dtype dt. */
static nb_tensor *param_of(nb_dtype dt) {
    nb_tensor *p = NBT(nb_cast(NBT(nb_from_data(P0, NB_SHAPE(N), NB_F64)), dt));
    assert_int_equal(nb_set_requires_grad(p, true), NB_OK);
    return p;
}

static nb_tensor *param64(void) { return param_of(NB_F64); }

/* Give p the gradient G[t] through a backward pass of sum(p * G[t]). */
static void feed_grad(nb_tensor *p, int t) {
    nb_tensor *c = NBT(nb_cast(NBT(nb_from_data(G[t], NB_SHAPE(N), NB_F64)), nb_dtype_of(p)));
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_mul(p, c)), NULL, 0, false)), NULL, false), NB_OK);
}

static void expect_param(nb_tensor *p, const double *want, double tol) {
    for (int i = 0; i < N; i++)
        if (fabs(nbt_at(p, i) - want[i]) > tol) fail_msg("element %d: %.15g, expected %.15g", i, nbt_at(p, i), want[i]);
}

/* Run `steps` optimizer steps on a fresh parameter of dtype dt; returns it. */
static nb_tensor *run_as(nb_dtype dt, nb_optimizer *(*make)(nb_tensor *const *, int, const void *), const void *opts,
                         int steps) {
    nb_tensor *p = param_of(dt);
    nb_optimizer *o = make(&p, 1, opts);
    assert_non_null(o);
    for (int t = 0; t < steps; t++) {
        nb_optim_zero_grad(o);
        feed_grad(p, t);
        assert_int_equal(nb_optim_step(o), NB_OK);
    }
    nb_optim_free(o);
    return p;
}

static nb_tensor *run(nb_optimizer *(*make)(nb_tensor *const *, int, const void *), const void *opts, int steps) {
    return run_as(NB_F64, make, opts, steps);
}

static nb_optimizer *make_sgd(nb_tensor *const *p, int n, const void *o) { return nb_optim_sgd(p, n, *(const nb_sgd_opts *)o); }
static nb_optimizer *make_adam(nb_tensor *const *p, int n, const void *o) { return nb_optim_adam(p, n, *(const nb_adam_opts *)o); }
static nb_optimizer *make_adamw(nb_tensor *const *p, int n, const void *o) { return nb_optim_adamw(p, n, *(const nb_adam_opts *)o); }

/* SGD by hand: torch.optim.SGD's algorithm box. */
static void sgd_by_hand(const nb_sgd_opts *o, int steps, double *p) {
    double b[N];
    memcpy(p, P0, sizeof P0);
    for (int t = 0; t < steps; t++)
        for (int i = 0; i < N; i++) {
            double g = G[t][i] + o->weight_decay * p[i];
            if (o->momentum != 0) {
                b[i] = t == 0 ? g : o->momentum * b[i] + (1 - o->dampening) * g;
                g = o->nesterov ? g + o->momentum * b[i] : b[i];
            }
            p[i] -= o->lr * g;
        }
}

static void sgd_momentum_nesterov_weight_decay(void **state) {
    (void)state;
    nb_scope_begin();
    const nb_sgd_opts cases[] = {
        {0.1, 0, 0, 0, false},
        {0.1, 0.9, 0, 0.01, true},
        {0.05, 0.8, 0.3, 0.1, false},
    };
    for (size_t k = 0; k < 3; k++) {
        double want[N];
        sgd_by_hand(&cases[k], 3, want);
        expect_param(run(make_sgd, &cases[k], 3), want, 1e-14);
    }
    /* one Nesterov step written out: b = g + wd p; p -= lr (g' + mu b) with g' = b */
    nb_sgd_opts o = {0.1, 0.9, 0, 0.01, true};
    double want1[N];
    for (int i = 0; i < N; i++) {
        double g = G[0][i] + 0.01 * P0[i];
        want1[i] = P0[i] - 0.1 * (g + 0.9 * g);
    }
    expect_param(run(make_sgd, &o, 1), want1, 1e-15);
    nb_scope_end();
}

/* Adam / AdamW by hand (Kingma & Ba 2015, Alg. 1 with torch's eps placement; AdamW decoupled). */
static void adam_by_hand(const nb_adam_opts *o, bool decoupled, int steps, double *p) {
    double m[N] = {0}, v[N] = {0};
    memcpy(p, P0, sizeof P0);
    for (int t = 1; t <= steps; t++)
        for (int i = 0; i < N; i++) {
            double g = G[t - 1][i];
            if (decoupled) p[i] -= o->lr * o->weight_decay * p[i];
            else g += o->weight_decay * p[i];
            m[i] = o->beta1 * m[i] + (1 - o->beta1) * g;
            v[i] = o->beta2 * v[i] + (1 - o->beta2) * g * g;
            double mhat = m[i] / (1 - pow(o->beta1, t)), vhat = v[i] / (1 - pow(o->beta2, t));
            p[i] -= o->lr * mhat / (sqrt(vhat) + o->eps);
        }
}

/* The same steps as the float32 update computes them: every operation in float, coefficients
 * rounded to float, no fused multiply-add (the test is built without FMA; the library's loops are
 * built without contraction, so every clone, AVX-512 included, rounds each operation). */
static void adam_by_hand_f32(const nb_adam_opts *o, bool decoupled, int steps, float *p) {
    float m[N] = {0}, v[N] = {0};
    for (int i = 0; i < N; i++) p[i] = (float)P0[i];
    for (int t = 1; t <= steps; t++) {
        float decay = (float)(decoupled ? 1 - o->lr * o->weight_decay : 1), l2 = (float)(decoupled ? 0 : o->weight_decay);
        float b1 = (float)o->beta1, b2 = (float)o->beta2, c1 = (float)(1 - o->beta1), c2 = (float)(1 - o->beta2);
        float step = (float)(o->lr / (1 - pow(o->beta1, t))), inv_bc2 = (float)(1 / sqrt(1 - pow(o->beta2, t)));
        float eps = (float)o->eps;
        for (int i = 0; i < N; i++) {
            float pi = p[i] * decay, gi = (float)G[t - 1][i] + l2 * pi;
            m[i] = b1 * m[i] + c1 * gi;
            v[i] = b2 * v[i] + c2 * gi * gi;
            p[i] = pi - step * (m[i] / (sqrtf(v[i]) * inv_bc2 + eps));
        }
    }
}

static void adam_and_adamw_steps(void **state) {
    (void)state;
    nb_scope_begin();
    /* first step closed form: m̂ = g, v̂ = g², so p -= lr g / (|g| + eps) */
    nb_adam_opts o = NB_ADAM_DEFAULTS;
    double want[N];
    for (int i = 0; i < N; i++) want[i] = P0[i] - 1e-3 * G[0][i] / (fabs(G[0][i]) + 1e-8);
    expect_param(run(make_adam, &o, 1), want, 1e-15);
    /* three steps with L2 weight decay (Adam) and decoupled decay (AdamW) */
    o = (nb_adam_opts){0.01, 0.8, 0.95, 1e-6, 0.1};
    adam_by_hand(&o, false, 3, want);
    expect_param(run(make_adam, &o, 3), want, 1e-14);
    double want_w[N];
    adam_by_hand(&o, true, 3, want_w);
    expect_param(run(make_adamw, &o, 3), want_w, 1e-14);
    assert_true(fabs(want[0] - want_w[0]) > 1e-6); /* the two decays really differ */
    /* float32 parameters are updated in float (as torch): the same steps to float's accuracy
     * (the parameters move by about 0.03, so a wrong coefficient shows far above 1e-6) */
    nb_tensor *p32[2] = {run_as(NB_F32, make_adam, &o, 3), run_as(NB_F32, make_adamw, &o, 3)};
    expect_param(p32[0], want, 1e-6);
    expect_param(p32[1], want_w, 1e-6);
    /* and bit for bit the float steps (the same bits on every CPU) */
    for (int dec = 0; dec < 2; dec++) {
        float want32[N];
        adam_by_hand_f32(&o, dec, 3, want32);
        for (int i = 0; i < N; i++)
            if ((float)nbt_at(p32[dec], i) != want32[i])
                fail_msg("%s element %d: %.9g, expected %.9g", dec ? "adamw" : "adam", i, nbt_at(p32[dec], i), want32[i]);
    }
    nb_scope_end();
}

static void float32_parameters_and_skipped_ones(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *p = NBT(nb_cast(NBT(nb_from_data(P0, NB_SHAPE(N), NB_F64)), NB_F32));
    nb_tensor *q = NBT(nb_ones(NB_SHAPE(3), NB_F32)); /* never gets a gradient */
    assert_int_equal(nb_set_requires_grad(p, true), NB_OK);
    assert_int_equal(nb_set_requires_grad(q, true), NB_OK);
    nb_optimizer *o = nb_optim_adamw((nb_tensor *[]){p, q}, 2, NB_ADAMW_DEFAULTS);
    assert_non_null(o);
    nb_tensor *c = NBT(nb_cast(NBT(nb_from_data(G[0], NB_SHAPE(N), NB_F64)), NB_F32));
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_mul(p, c)), NULL, 0, false)), NULL, false), NB_OK);
    assert_int_equal(nb_optim_step(o), NB_OK);
    nb_adam_opts w = NB_ADAMW_DEFAULTS;
    for (int i = 0; i < N; i++) {
        double p0 = (float)P0[i], g = (float)G[0][i];
        double want = p0 * (1 - w.lr * w.weight_decay) - w.lr * g / (fabs(g) + w.eps);
        assert_true(fabs(nbt_at(p, i) - want) <= 1e-6 * (1 + fabs(want)));
    }
    for (int i = 0; i < 3; i++) assert_true(nbt_at(q, i) == 1.0);
    nb_optim_zero_grad(o);
    assert_null(nb_grad(p));
    assert_true(nb_optim_lr(o) == w.lr);
    nb_optim_set_lr(o, 0.5);
    assert_true(nb_optim_lr(o) == 0.5);
    nb_optim_free(o);
    nb_scope_end();
}

static void optimizer_bad_input(void **state) {
    (void)state;
    nb_scope_begin();
    nb_tensor *p = param64();
    assert_null(nb_optim_sgd(&p, 1, (nb_sgd_opts){0.1, 0, 0, 0, true}));
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    assert_non_null(strstr(nb_last_message(), "Nesterov"));
    assert_null(nb_optim_sgd(&p, 1, NB_SGD_DEFAULTS(-1)));
    assert_non_null(strstr(nb_last_message(), "learning rate -1"));
    assert_null(nb_optim_adam(&p, 1, (nb_adam_opts){1e-3, 1.0, 0.999, 1e-8, 0}));
    assert_non_null(strstr(nb_last_message(), "beta1 1"));
    assert_null(nb_optim_adam((nb_tensor *[]){p, NULL}, 2, NB_ADAM_DEFAULTS));
    assert_int_equal(nb_last_status(), NB_ERR_NULL);
    nb_tensor *strided = NBT(nb_slice(NBT(nb_zeros(NB_SHAPE(6), NB_F32)), 0, 0, NB_END, 2));
    assert_null(nb_optim_sgd(&strided, 1, NB_SGD_DEFAULTS(0.1)));
    assert_int_equal(nb_last_status(), NB_ERR_DEVICE);
    assert_int_equal(nb_optim_step(NULL), NB_ERR_NULL);
    nb_clear_error();
    nb_scope_end();
}

static void schedules(void **state) {
    (void)state;
    /* StepLR: lr * gamma^floor(t / step) */
    assert_true(nb_lr_step(0.1, 0, 3, 0.5) == 0.1);
    assert_true(nb_lr_step(0.1, 2, 3, 0.5) == 0.1);
    assert_true(fabs(nb_lr_step(0.1, 3, 3, 0.5) - 0.05) < 1e-17);
    assert_true(fabs(nb_lr_step(0.1, 7, 3, 0.5) - 0.025) < 1e-17);
    /* cosine: base at 0, midpoint halfway, eta_min at t_max, back up after (periodic like torch) */
    assert_true(fabs(nb_lr_cosine(1.0, 0, 10, 0.1) - 1.0) < 1e-15);
    assert_true(fabs(nb_lr_cosine(1.0, 5, 10, 0.1) - 0.55) < 1e-15);
    assert_true(fabs(nb_lr_cosine(1.0, 10, 10, 0.1) - 0.1) < 1e-15);
    assert_true(fabs(nb_lr_cosine(1.0, 15, 10, 0.1) - 0.55) < 1e-15);
    double quarter = 0.1 + 0.9 * (1 + cos(M_PI / 4)) / 2;
    assert_true(fabs(nb_lr_cosine(1.0, 2, 8, 0.1) - quarter) < 1e-15);
    /* LinearLR warm-up from start_factor to 1 over `warmup` steps, flat after */
    assert_true(fabs(nb_lr_warmup(0.2, 0, 4, 0.25) - 0.05) < 1e-16);
    assert_true(fabs(nb_lr_warmup(0.2, 2, 4, 0.25) - 0.125) < 1e-16);
    assert_true(nb_lr_warmup(0.2, 4, 4, 0.25) == 0.2 && nb_lr_warmup(0.2, 9, 4, 0.25) == 0.2);
    /* bad arguments */
    assert_true(isnan(nb_lr_step(0.1, 1, 0, 0.5)));
    assert_int_equal(nb_last_status(), NB_ERR_ARG);
    assert_true(isnan(nb_lr_cosine(0.1, 1, 0, 0)));
    assert_true(isnan(nb_lr_warmup(0.1, 1, 4, 0)));
    assert_non_null(strstr(nb_last_message(), "start_factor 0"));
    nb_clear_error();
}

static void clip_grad_norm(void **state) {
    (void)state;
    nb_scope_begin();
    /* gradients (3, 4) and (12): global 2-norm 13, inf-norm 12 */
    double av[] = {1, 1}, bv[] = {1};
    nb_tensor *a = NBT(nb_from_data(av, NB_SHAPE(2), NB_F64)), *b = NBT(nb_from_data(bv, NB_SHAPE(1), NB_F64));
    nb_tensor *unused = param64();
    nb_tensor *ps[] = {a, b, unused};
    assert_int_equal(nb_set_requires_grad(a, true), NB_OK);
    assert_int_equal(nb_set_requires_grad(b, true), NB_OK);
    double ga[] = {3, 4}, gb[] = {12};
    nb_tensor *loss = NBT(nb_add(NBT(nb_sum(NBT(nb_mul(a, NBT(nb_from_data(ga, NB_SHAPE(2), NB_F64)))), NULL, 0, false)),
                                 NBT(nb_sum(NBT(nb_mul(b, gb[0])), NULL, 0, false))));
    assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
    double total = 0;
    assert_int_equal(nb_clip_grad_norm_(ps, 3, 100, 2, &total), NB_OK); /* below the bound: unchanged */
    assert_true(fabs(total - 13) < 1e-12);
    assert_true(nbt_at(NBT(nb_grad(a)), 0) == 3);
    assert_int_equal(nb_clip_grad_norm_(ps, 3, 6.5, 2, &total), NB_OK);
    double k = 6.5 / (13 + 1e-6);
    assert_true(fabs(nbt_at(NBT(nb_grad(a)), 1) - 4 * k) < 1e-12 && fabs(nbt_at(NBT(nb_grad(b)), 0) - 12 * k) < 1e-12);
    assert_int_equal(nb_clip_grad_norm_(ps, 3, 1, INFINITY, &total), NB_OK);
    assert_true(fabs(total - 12 * k) < 1e-12);
    assert_true(fabs(nbt_at(NBT(nb_grad(b)), 0) - 12 * k / (12 * k + 1e-6)) < 1e-12);
    /* one gradient tensor shared by two leaves (y = x1 + x2) is scaled once for each */
    nb_tensor *x1 = param64(), *x2 = param64();
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(nb_add(x1, x2)), NULL, 0, false)), NULL, false), NB_OK);
    assert_int_equal(nb_clip_grad_norm_((nb_tensor *[]){x1, x2}, 2, 1, 2, &total), NB_OK);
    assert_true(fabs(total - sqrt(2.0 * N)) < 1e-12);
    double want = 1 / (sqrt(2.0 * N) + 1e-6);
    assert_true(fabs(nbt_at(NBT(nb_grad(x1)), 0) - want) < 1e-12 && fabs(nbt_at(NBT(nb_grad(x2)), 0) - want) < 1e-12);
    assert_int_equal(nb_clip_grad_norm_(ps, 3, -1, 2, NULL), NB_ERR_ARG);
    nb_clear_error();
    nb_scope_end();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sgd_momentum_nesterov_weight_decay),
        cmocka_unit_test(adam_and_adamw_steps),
        cmocka_unit_test(float32_parameters_and_skipped_ones),
        cmocka_unit_test(optimizer_bad_input),
        cmocka_unit_test(schedules),
        cmocka_unit_test(clip_grad_norm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
