/*
 * test_dist.c — data-parallel training over MPI (D1).  ctest runs it under
 * `mpirun -np 2` and `-np 3` (and alone, a world of one, where the tests that
 * need ranks skip): collectives against hand-computed values for several
 * dtypes and shapes, typed errors when ranks disagree, the sharding of a
 * global batch, the gradient synchronizer (buckets cut inside a parameter, a
 * parameter without a gradient, buckets started during backward) against an
 * explicit all-reduce, and Fashion-MNIST: W ranks × a share of a global batch
 * of 128 against one process × 128 for 200 Adam steps — equal parameters
 * within the tolerance derived below, test accuracy within 0.2 points.
 * Without MPI in the build every test but the world-of-one ones skips.
 */
#include "support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int W, R; /* world size, rank */

static void need_ranks(void) {
    if (W < 2) {
        fprintf(stderr, "test_dist: a world of one (run under mpirun for this test)\n");
        skip();
    }
}

/* t[i] = rank + i/2 for i < n, in dtype dt, shaped shape[nd]. */
static nb_tensor *ramp(const int64_t *shape, int nd, nb_dtype dt, double rank) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = rank + 0.5 * (double)i;
    nb_tensor *t = NBT(nb_cast(NBT(nb_from_data(v, shape, nd, NB_F64)), dt));
    free(v);
    return NBT(nb_contiguous(t));
}

/* Sum and mean over ranks of rank + i/2 (exact in every dtype for these sizes); broadcast; gather. */
static void collectives_hand_computed(void **state) {
    (void)state;
    const nb_dtype dts[] = {NB_F32, NB_F64, NB_F16, NB_BF16};
    const int64_t shapes[4][2] = {{7, 0}, {3, 5}, {0, 0}, {0, 0}};
    const int nds[4] = {1, 2, 1, 0}; /* [7], [3, 5], [0], [] */
    for (int a = 0; a < 4; a++)
        for (int s = 0; s < 4; s++) {
            int64_t shp[2] = {shapes[s][0], shapes[s][1]};
            if (s == 2) shp[0] = 0;
            nb_tensor *t = ramp(shp, nds[s], dts[a], R), *m = ramp(shp, nds[s], dts[a], R);
            assert_int_equal(nb_dist_all_reduce(t, NB_DIST_SUM), NB_OK);
            assert_int_equal(nb_dist_all_reduce(m, NB_DIST_MEAN), NB_OK);
            for (int64_t i = 0; i < nb_numel(t); i++) {
                double sum = W * (W - 1) / 2.0 + W * 0.5 * (double)i;
                assert_true(nbt_at(t, i) == sum);
                double mean = sum / W, got = nbt_at(m, i);
                double ulp = dts[a] == NB_F64 ? 1e-15 : dts[a] == NB_F32 ? 1e-7 : dts[a] == NB_F16 ? 1e-3 : 8e-3;
                assert_true(fabs(got - mean) <= ulp * fabs(mean));
            }
            nb_tensor *b = ramp(shp, nds[s], dts[a], 10 * R);
            assert_int_equal(nb_dist_broadcast(b, W - 1), NB_OK);
            for (int64_t i = 0; i < nb_numel(b); i++) assert_true(nbt_at(b, i) == 10.0 * (W - 1) + 0.5 * (double)i);
            int64_t gs[3] = {W, shp[0], shp[1]};
            nb_tensor *g = NBT(nb_zeros(gs, nds[s] + 1, dts[a]));
            assert_int_equal(nb_dist_all_gather(ramp(shp, nds[s], dts[a], R), g), NB_OK);
            int64_t n = nb_numel(t);
            for (int r = 0; r < W; r++)
                for (int64_t i = 0; i < n; i++) assert_true(nbt_at(g, r * n + i) == r + 0.5 * (double)i);
        }
}

/* Disagreeing ranks and bad arguments: a typed error on every rank, never a hang. */
static void collectives_refuse_mismatches(void **state) {
    (void)state;
    nb_tensor *t = NBT(nb_zeros((int64_t[]){R == 0 ? 3 : 4}, 1, NB_F32));
    assert_int_equal(nb_dist_all_reduce(t, NB_DIST_SUM), W > 1 ? NB_ERR_SHAPE : NB_OK);
    if (W > 1) nbt_expect_error(NB_ERR_SHAPE, "the ranks passed tensors of other dtypes or shapes");
    nb_tensor *d = NBT(nb_zeros((int64_t[]){4}, 1, R == 0 ? NB_F32 : NB_F64));
    assert_int_equal(nb_dist_broadcast(d, 0), W > 1 ? NB_ERR_SHAPE : NB_OK);
    if (W > 1) nbt_expect_error(NB_ERR_SHAPE, "dist_broadcast");
    nb_tensor *ok = NBT(nb_zeros((int64_t[]){4}, 1, NB_F32));
    assert_int_equal(nb_dist_broadcast(ok, W), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "root");
    assert_int_equal(nb_dist_all_reduce(NBT(nb_zeros((int64_t[]){4}, 1, NB_I64)), NB_DIST_SUM), NB_ERR_DTYPE);
    nbt_expect_error(NB_ERR_DTYPE, "float tensors only, got int64");
    assert_int_equal(nb_dist_all_reduce(NBT(nb_transpose(NBT(nb_zeros((int64_t[]){2, 3}, 2, NB_F32)), 0, 1)),
                                        NB_DIST_SUM), NB_ERR_STATE);
    nbt_expect_error(NB_ERR_STATE, "not contiguous");
    assert_int_equal(nb_dist_all_reduce(ok, (nb_dist_op)7), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "op 7");
    assert_int_equal(nb_dist_all_gather(ok, NBT(nb_zeros((int64_t[]){W + 1, 4}, 2, NB_F32))), NB_ERR_SHAPE);
    nbt_expect_error(NB_ERR_SHAPE, "must be");
    assert_int_equal(nb_dist_all_reduce(NULL, NB_DIST_SUM), NB_ERR_NULL);
    nbt_expect_error(NB_ERR_NULL, "dist_all_reduce");
    /* the ranks are still in step: a good collective works */
    nb_tensor *one = NBT(nb_ones((int64_t[]){2}, 1, NB_F32));
    assert_int_equal(nb_dist_all_reduce(one, NB_DIST_SUM), NB_OK);
    assert_true(nbt_at(one, 1) == W);
}

/* Arguments refused on one rank only: every rank fails the call (that rank with its own error, the
 * others naming it), and the collectives stay in step — found by a break-it trial, where the
 * refusing rank skipped the collective and the next call of the others paired with it. */
static void one_rank_refusing_fails_everywhere(void **state) {
    (void)state;
    need_ranks();
    nb_tensor *a = NBT(nb_ones((int64_t[]){4}, 1, NB_F32)), *b = NBT(nb_full((int64_t[]){4}, 1, 100, NB_F32));
    nb_tensor *bad[3] = {NULL, NBT(nb_transpose(NBT(nb_zeros((int64_t[]){2, 2}, 2, NB_F32)), 0, 1)),
                         NBT(nb_ones((int64_t[]){4}, 1, NB_I32))};
    const nb_status want[3] = {NB_ERR_NULL, NB_ERR_STATE, NB_ERR_DTYPE};
    for (int k = 0; k < 3; k++) {
        nb_status st = nb_dist_all_reduce(R == 1 ? bad[k] : a, NB_DIST_SUM);
        assert_int_equal(st, R == 1 ? want[k] : NB_ERR_ARG);
        if (R != 1) nbt_expect_error(NB_ERR_ARG, "another rank's arguments were refused");
        else nb_clear_error();
        assert_true(nbt_at(a, 0) == 1); /* untouched */
    }
    assert_int_equal(nb_dist_broadcast(b, R == 1 ? -1 : 0), R == 1 ? NB_ERR_ARG : NB_ERR_ARG);
    nb_clear_error();
    assert_int_equal(nb_dist_all_reduce(b, NB_DIST_SUM), NB_OK); /* in step: only b's values */
    assert_true(nbt_at(b, 3) == 100.0 * W);
    /* DDP: one rank's parameter does not require grad; then buckets of another size on one rank */
    nb_tensor *p = NBT(nb_ones((int64_t[]){3}, 1, NB_F32));
    assert_int_equal(nb_set_requires_grad(p, R != 1), NB_OK);
    assert_null(nb_ddp_new(&p, 1, 0));
    nb_clear_error();
    assert_int_equal(nb_set_requires_grad(p, true), NB_OK);
    assert_null(nb_ddp_new(&p, 1, R == 1 ? 8 : 0));
    nbt_expect_error(NB_ERR_SHAPE, "buckets of");
}

typedef enum { ORDER, UNUSED, NODATA } ddp_mode;

/* Ranks whose backward finishes the parameters in other orders, leaves one out, or has no data:
 * every bucket (one float each) is reduced by the same kind of call on every rank — the trial hung
 * here when some ranks started a bucket during backward and others in finish. */
static void ddp_ranks_that_differ(void **state) {
    (void)state;
    need_ranks();
    for (int mode = ORDER; mode <= NODATA; mode++) {
        nb_tensor *p[3];
        for (int i = 0; i < 3; i++) {
            p[i] = NBT(nb_full((int64_t[]){1}, 1, 1.0 + i, NB_F32));
            assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
        }
        nb_ddp *d = nb_ddp_new(p, 3, 4);
        assert_non_null(d);
        /* loss = Σ c_i p_i with c_i = rank + i + 1, its terms in rank-dependent orders */
        nb_tensor *terms[3];
        for (int i = 0; i < 3; i++) terms[i] = NBT(nb_mul(p[i], (double)(R + i + 1)));
        nb_tensor *loss = mode == ORDER && R % 2 ? NBT(nb_add(terms[2], NBT(nb_add(terms[1], terms[0]))))
                                                 : NBT(nb_add(terms[0], NBT(nb_add(terms[1], terms[2]))));
        if (mode == UNUSED && R == 1) loss = NBT(nb_add(terms[0], terms[1])); /* p2 unused on rank 1 */
        if (!(mode == NODATA && R == 1)) assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
        assert_int_equal(nb_ddp_finish(d), NB_OK);
        for (int i = 0; i < 3; i++) { /* the mean over ranks of their c_i (0 where absent) */
            double sum = 0;
            for (int r = 0; r < W; r++)
                if (!((mode == NODATA && r == 1) || (mode == UNUSED && r == 1 && i == 2))) sum += r + i + 1;
            assert_true(fabs(nbt_at(NBT(nb_grad(p[i])), 0) - sum / W) <= 1e-6);
        }
        nb_ddp_free(d);
        for (int i = 0; i < 3; i++) nb_zero_grad(p[i]);
    }
}

static void start_a_pass(void *ctx, nb_tensor *leaf) {
    (void)leaf;
    *(nb_status *)ctx = nb_backward(leaf, NULL, false);
    nb_clear_error();
}

/* A second backward before finish, a stale error around finish, a pass started from a hook. */
static void ddp_contract(void **state) {
    (void)state;
    nb_tensor *p = NBT(nb_ones((int64_t[]){2}, 1, NB_F32));
    assert_int_equal(nb_set_requires_grad(p, true), NB_OK);
    nb_ddp *d = nb_ddp_new(&p, 1, 0);
    assert_non_null(d);
    assert_int_equal(nb_backward(NBT(nb_sum(p, NULL, 0, false)), NULL, false), NB_OK);
    assert_int_equal(nb_backward(NBT(nb_sum(p, NULL, 0, false)), NULL, false), NB_ERR_STATE);
    nbt_expect_error(NB_ERR_STATE, "a second backward pass reached parameter 0 before nb_ddp_finish");
    int64_t off, cnt;
    assert_int_equal(nb_dist_shard(-1, &off, &cnt), NB_ERR_ARG); /* a handled error left pending */
    assert_int_equal(nb_ddp_finish(d), NB_OK);
    nbt_expect_error(NB_ERR_ARG, "negative batch"); /* still the pending one */
    nb_ddp_free(d);
    nb_status inner = NB_OK;
    int64_t id = nb_register_post_accumulate_grad_hook(p, start_a_pass, &inner);
    assert_true(id > 0);
    assert_int_equal(nb_backward(NBT(nb_sum(p, NULL, 0, false)), NULL, false), NB_OK);
    assert_int_equal(inner, NB_ERR_STATE);
    assert_int_equal(nb_remove_grad_hook(id), NB_OK);
    assert_int_equal(nb_remove_grad_hook(id), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "no hook with id");
}

/* The shares of a global batch tile it in rank order, as even as can be. */
static void shards_tile_the_batch(void **state) {
    (void)state;
    const int64_t ns[] = {128, 7, 2, 1, 0};
    for (size_t k = 0; k < sizeof ns / sizeof *ns; k++) {
        int64_t off, cnt;
        assert_int_equal(nb_dist_shard(ns[k], &off, &cnt), NB_OK);
        nb_tensor *mine = NBT(nb_from_data((double[]){(double)off, (double)cnt}, (int64_t[]){2}, 1, NB_F64));
        nb_tensor *all = NBT(nb_zeros((int64_t[]){W, 2}, 2, NB_F64));
        assert_int_equal(nb_dist_all_gather(mine, all), NB_OK);
        int64_t next = 0;
        for (int r = 0; r < W; r++) {
            assert_true(nbt_at(all, 2 * r) == (double)next);
            int64_t c = (int64_t)nbt_at(all, 2 * r + 1);
            assert_true(c == ns[k] / W || c == ns[k] / W + 1);
            next += c;
        }
        assert_int_equal(next, ns[k]);
    }
    int64_t o, c;
    assert_int_equal(nb_dist_shard(-1, &o, &c), NB_ERR_ARG);
    nbt_expect_error(NB_ERR_ARG, "negative batch");
}

/* The synchronizer against an explicit mean of autograd_grad's gradients: buckets of 10 floats cut
 * inside p0 and p1; p2 gets no gradient (zeros); buckets start during backward. */
static void ddp_matches_explicit_mean(void **state) {
    (void)state;
    nb_manual_seed(3); /* the same initial values everywhere: the broadcast must not change them */
    nb_tensor *p[3] = {NBT(nb_randn((int64_t[]){5, 3}, 2, NB_F32)), NBT(nb_randn((int64_t[]){7}, 1, NB_F32)),
                       NBT(nb_randn((int64_t[]){4, 4}, 2, NB_F32))};
    nb_tensor *order[3] = {p[2], p[0], p[1]}; /* laid out in reverse: p1, p0, then p2 (no gradient) */
    nb_manual_seed(100 + (uint64_t)R); /* each rank its own data */
    nb_tensor *x = NBT(nb_randn((int64_t[]){6, 5}, 2, NB_F32)), *z = NBT(nb_randn((int64_t[]){6, 7}, 2, NB_F32));
    for (int i = 0; i < 3; i++) assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
    nb_ddp *d = nb_ddp_new(order, 3, 40);
    assert_non_null(d);
    for (int step = 0; step < 2; step++) {
        nb_tensor *h = NBT(nb_tanh(NBT(nb_matmul(x, p[0]))));                        /* [6, 3] */
        nb_tensor *loss = NBT(nb_add(NBT(nb_sum(NBT(nb_mul(h, h)), NULL, 0, false)),
                                     NBT(nb_sum(NBT(nb_mul(z, p[1])), NULL, 0, false))));
        nb_tensor *want[3] = {NULL};
        assert_int_equal(nb_autograd_grad(loss, NULL, p, 2, false, want), NB_OK); /* no hooks here */
        for (int i = 0; i < 2; i++) {
            want[i] = NBT(nb_contiguous(want[i]));
            assert_int_equal(nb_dist_all_reduce(want[i], NB_DIST_MEAN), NB_OK);
        }
        for (int i = 0; i < 3; i++) nb_zero_grad(p[i]);
        assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
        assert_int_equal(nb_ddp_finish(d), NB_OK);
        for (int i = 0; i < 2; i++) /* 2 ranks: a + b either way; 3: MPI's order may differ by an ulp */
            assert_close(NBT(nb_grad(p[i])), want[i], W > 2 ? 1e-6 : 0, W > 2 ? 1e-6 : 0);
        nb_tensor *g2 = NBT(nb_grad(p[2]));
        for (int64_t e = 0; e < 16; e++) assert_true(nbt_at(g2, e) == 0);
    }
    nb_ddp_stats s = nb_ddp_stats_get(d);
    assert_int_equal(s.buckets, (15 + 7 + 16 + 9) / 10); /* 38 floats in buckets of 10 */
    assert_int_equal(s.steps, 2);
    assert_true(s.launched_early >= 2 * 2); /* p1's and p0's two whole buckets a step before finish; p2's wait */
    nb_ddp_free(d);
    /* parameters every rank saw the same: rank 0's */
    nb_tensor *q = NBT(nb_full((int64_t[]){3}, 1, (double)R, NB_F32));
    assert_int_equal(nb_set_requires_grad(q, true), NB_OK);
    nb_ddp *e = nb_ddp_new(&q, 1, 0);
    assert_non_null(e);
    assert_true(nbt_at(q, 2) == 0);
    nb_ddp_free(e);
    /* bad parameters */
    assert_null(nb_ddp_new((nb_tensor *[]){q, q}, 2, 0));
    nbt_expect_error(NB_ERR_ARG, "parameter 1 is parameter 0 again");
    assert_null(nb_ddp_new((nb_tensor *[]){x}, 1, 0));
    nbt_expect_error(NB_ERR_STATE, "requires grad");
}

/* ---- Fashion-MNIST: W ranks against one process ---- */

enum { STEPS = 200, BATCH = 128 };

/* The 784-256-128-10 ReLU MLP of `nabla train` as six tensors of dtype dt (torch's Linear init from
 * nabla's generator, seed 11, rounded from float32): the same start for every run. */
static void mlp_init(nb_tensor **p, nb_dtype dt) {
    nb_manual_seed(11);
    const int64_t in[3] = {784, 256, 128}, out[3] = {256, 128, 10};
    for (int l = 0; l < 3; l++) {
        double bound = 1 / sqrt((double)in[l]);
        p[2 * l] = NBT(nb_cast(NBT(nb_sub(NBT(nb_mul(NBT(nb_rand((int64_t[]){out[l], in[l]}, 2, NB_F32)), 2 * bound)), bound)), dt));
        p[2 * l + 1] = NBT(nb_cast(NBT(nb_sub(NBT(nb_mul(NBT(nb_rand((int64_t[]){out[l]}, 1, NB_F32)), 2 * bound)), bound)), dt));
    }
    for (int i = 0; i < 6; i++) {
        p[i] = nb_retain(p[i]); /* past the caller's scope */
        assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
    }
}

static nb_tensor *mlp(nb_tensor *const *p, nb_tensor *x) {
    nb_tensor *h = NBT(nb_relu(NBT(nb_linear(NBT(nb_cast(x, nb_dtype_of(p[0]))), p[0], p[1]))));
    h = NBT(nb_relu(NBT(nb_linear(h, p[2], p[3]))));
    return NBT(nb_linear(h, p[4], p[5]));
}

/* How one model is trained: alone on whole batches, alone on the W shares of each batch one after
 * the other (each share's loss weighted cnt / BATCH, the gradients summed in rank order: DDP's
 * arithmetic on one process), or as this rank's share with DDP. */
typedef enum { ALONE, SHARES, RANKS } how;

typedef struct trained {
    nb_tensor *p[6];
    double acc;
} trained;

static void train(nb_tensor **params, how h, bool sgd, nb_tensor *x, nb_tensor *y, nb_tensor *perm) {
    nb_optimizer *opt = sgd ? nb_optim_sgd(params, 6, (nb_sgd_opts){0.05, 0.9, 0, 0, false})
                            : nb_optim_adam(params, 6, (nb_adam_opts){2e-3, 0.9, 0.999, 1e-8, 0});
    assert_non_null(opt);
    nb_ddp *d = h == RANKS ? nb_ddp_new(params, 6, 256 << 10) : NULL; /* buckets of 256 KiB: 4 for f32 */
    assert_true(h != RANKS || d);
    for (int s = 0; s < STEPS; s++) {
        int parts = h == SHARES ? W : 1;
        for (int r = 0; r < parts; r++) {
            nb_scope_begin();
            int64_t off = 0, cnt = BATCH; /* nb_dist_shard's split, for share r */
            if (h == RANKS) assert_int_equal(nb_dist_shard(BATCH, &off, &cnt), NB_OK);
            if (h == SHARES) {
                cnt = BATCH / W + (r < BATCH % W);
                off = r * (BATCH / W) + (r < BATCH % W ? r : BATCH % W);
            }
            nb_tensor *xb = NBT(nb_take_rows(x, perm, (int64_t)s * BATCH + off, cnt));
            nb_tensor *yb = NBT(nb_take_rows(y, perm, (int64_t)s * BATCH + off, cnt));
            nb_tensor *loss = NBT(nb_cross_entropy(mlp(params, xb), yb, NB_CROSS_ENTROPY_DEFAULTS));
            if (h == RANKS) loss = NBT(nb_mul(loss, (double)cnt * W / BATCH)); /* the share's weight; DDP divides by W */
            if (h == SHARES) loss = NBT(nb_mul(loss, (double)cnt / BATCH));
            assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
            nb_scope_end();
        }
        if (d) assert_int_equal(nb_ddp_finish(d), NB_OK);
        assert_int_equal(nb_optim_step(opt), NB_OK);
        nb_optim_zero_grad(opt);
    }
    if (d && R == 0)
        printf("test_dist: %lld of %lld buckets started during backward\n", (long long)nb_ddp_stats_get(d).launched_early,
               (long long)nb_ddp_stats_get(d).buckets * STEPS);
    nb_ddp_free(d);
    nb_optim_free(opt);
}

static trained run(how h, bool sgd, nb_dtype dt, nb_tensor *x, nb_tensor *y, nb_tensor *perm, nb_tensor *tx, nb_tensor *ty) {
    trained t;
    mlp_init(t.p, dt);
    train(t.p, h, sgd, x, y, perm);
    nb_scope_begin();
    nb_no_grad_begin();
    nb_tensor *hits = NBT(nb_sum(NBT(nb_eq(NBT(nb_argmax(mlp(t.p, tx), 1, false)), ty)), NULL, 0, false));
    nb_no_grad_end();
    t.acc = nbt_at(hits, 0) / (double)nb_shape(ty)[0];
    nb_scope_end();
    return t;
}

static void trained_free(trained *t) {
    for (int i = 0; i < 6; i++) nb_release(t->p[i]);
}

/* The largest |a - b| over the parameters, and the norm of the difference over the norm of a. */
static void compare(const trained *a, const trained *b, double *worst, double *rel) {
    double dn = 0, pn = 0;
    *worst = 0;
    for (int i = 0; i < 6; i++)
        for (int64_t e = 0; e < nb_numel(a->p[i]); e++) {
            double u = nbt_at(a->p[i], e), v = nbt_at(b->p[i], e);
            *worst = fmax(*worst, fabs(u - v));
            dn += (u - v) * (u - v);
            pn += u * u;
        }
    *rel = sqrt(dn / pn);
}

/*
 * W ranks against one process, 200 steps of global batch 128 (the test), and the
 * tolerance.  The runs differ only in the order of the sums behind the mean gradient (each rank
 * sums its share, then the shares are added, against one sum of 128): a few ulps of each gradient.
 * That stays at the rounding level for a while (float32, measured: max |Δp| 2e-7 after 100 SGD
 * steps, 3.6e-6 after 110 Adam steps), until a ReLU input lands on the other side of 0 for some
 * example in one run and not the other, which changes that gradient by O(1); from there the runs
 * part as any two trainings from nearby points do, by ~10x every 10-20 steps (float32 at step 200:
 * SGD max |Δp| 1.8e-5 with 2 ranks but 1.4e-2 with 3; Adam 3e-2).  A parameter-wise tolerance
 * for float32 would be a statement about when that happens, not about nabla.  So:
 *  - float64 (the same model and data, rounding 1e-16: no ReLU flips): max |Δp| <= 1e-10 after 200
 *    steps of SGD and of Adam.  Rounding alone bounds it near 200 steps x 1e-16 of the parameters
 *    (~1e-16 absolute) for SGD, more for Adam, which divides near-zero gradients by their own
 *    size (measured: SGD 5.6e-16, Adam 2.2e-14 with 3 ranks) — 1e-10 is 5000x that, while a
 *    wrong share, weight or bucket is an error of 1e-3 or more after one step;
 *  - float32, Adam: test accuracy within 0.2 points of one process, and exactness where the order
 *    is the same: one process summing the W shares' gradients in rank order equals the W-rank run
 *    bit for bit for W = 2 (a + b = b + a); for W = 3 MPI may associate the three terms
 *    otherwise, which is then the chaos above;
 *  - every rank holds the same parameters, bit for bit.
 */
static void training_matches_one_process(void **state) {
    (void)state;
    need_ranks();
    nb_tensor *x, *y, *tx, *ty;
    if (nb_fashion_mnist_load(NULL, true, &x, &y) != NB_OK || nb_fashion_mnist_load(NULL, false, &tx, &ty) != NB_OK) {
        fprintf(stderr, "test_dist: Fashion-MNIST not installed (%s)\n", nb_last_message());
        nb_clear_error();
        skip();
    }
    nb_manual_seed(7);
    nb_tensor *perm = NBT(nb_randperm(nb_shape(x)[0]));
    const struct { nb_dtype dt; bool sgd; } runs[] = {{NB_F64, true}, {NB_F64, false}, {NB_F32, false}};
    for (int k = 0; k < 3; k++) {
        nb_dtype dt = runs[k].dt;
        trained alone = run(ALONE, runs[k].sgd, dt, x, y, perm, tx, ty), ranks = run(RANKS, runs[k].sgd, dt, x, y, perm, tx, ty);
        double worst, rel;
        compare(&alone, &ranks, &worst, &rel);
        if (R == 0)
            printf("test_dist: %s %s, %d ranks x %d steps vs one process: max |dp| %.3g, ||dp||/||p|| %.3g, test "
                   "accuracy %.4f vs %.4f\n", nb_dtype_name(dt), runs[k].sgd ? "SGD" : "Adam", W, STEPS, worst, rel,
                   ranks.acc, alone.acc);
        assert_true(fabs(alone.acc - ranks.acc) <= 0.002);
        if (dt == NB_F64) assert_true(worst <= 1e-10);
        if (dt == NB_F32) {
            trained shares = run(SHARES, runs[k].sgd, dt, x, y, perm, tx, ty);
            compare(&shares, &ranks, &worst, &rel);
            if (R == 0) printf("test_dist: float32 Adam, %d shares on one process vs %d ranks: max |dp| %.3g\n", W, W, worst);
            if (W == 2) assert_true(worst == 0);
            trained_free(&shares);
        }
        for (int i = 0; i < 6; i++) { /* every rank holds the same parameters, bit for bit */
            size_t es = nb_dtype_size(dt);
            nb_tensor *c = NBT(nb_reshape(NBT(nb_contiguous(NBT(nb_detach(ranks.p[i])))), (int64_t[]){-1}, 1));
            nb_tensor *g = NBT(nb_zeros((int64_t[]){W, nb_numel(c)}, 2, dt));
            assert_int_equal(nb_dist_all_gather(c, g), NB_OK);
            for (int r = 1; r < W; r++)
                assert_int_equal(memcmp((char *)nb_data_ptr(g) + (size_t)(r * nb_numel(c)) * es, nb_data_ptr(g),
                                        es * (size_t)nb_numel(c)), 0);
        }
        trained_free(&alone);
        trained_free(&ranks);
    }
}

int main(int argc, char **argv) {
    /* nabla's heap, counted: LeakSanitizer cannot tell Open MPI's unloaded plugins' blocks from a
     * leak, so under mpirun it is off and this count checks that nabla's own blocks all come back */
    if (nb_set_allocator(nbt_counting_alloc, NULL) != NB_OK) return 1;
    if (nb_dist_available() && nb_dist_init(&argc, &argv) != NB_OK) {
        fprintf(stderr, "test_dist: %s\n", nb_last_message());
        return 1;
    }
    W = nb_dist_world_size();
    R = nb_dist_rank();
    nb_set_num_threads(1); /* the ranks share the CPUs */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(collectives_hand_computed, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(collectives_refuse_mismatches, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(one_rank_refusing_fails_everywhere, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(shards_tile_the_batch, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(ddp_ranks_that_differ, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(ddp_contract, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(ddp_matches_explicit_mean, nbt_setup, nbt_teardown),
        cmocka_unit_test_setup_teardown(training_matches_one_process, nbt_setup, nbt_teardown),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    nb_dist_finalize();
    if (nbt_live_blocks != 0 || nb_set_allocator(NULL, NULL) != NB_OK) {
        fprintf(stderr, "test_dist: rank %d: %ld of nabla's heap blocks were never freed\n", R, nbt_live_blocks);
        return 1;
    }
    return rc;
}
