/*
 * test_gradcheck.c — A4: every differentiable op's derivative against
 * central finite differences in f64.  The test walks the op table: an op
 * whose grad column is RULE or COMPOSITE must have a case below (named by
 * its ops.def name), and an op with neither a case nor the NONE mark fails.
 *
 * Each case applies the op to f64 leaves (values drawn away from kinks and
 * outside the op's singularities), forms L = sum(op(x) · W) with fixed random
 * weights W, and compares dL/dx from nb_backward with
 * (L(x + h e_j) - L(x - h e_j)) / 2h, h = 1e-6, for every element j of every
 * input: |analytic - fd| <= 1e-6 |fd| + 1e-8 (1 + |L|) — the absolute term
 * covers the rounding noise of the difference quotient (~1e-16 |L| / h).
 *
 * Second order (A5): for the cases marked `second` (most of them, among them
 * exp, sin, tanh, mul, div, matmul, sum and softmax), the gradients taken
 * with create_graph define S = Σ_i sum(dL/dx_i · V_i) (V random), a function
 * of x whose gradient — a Hessian-vector product — comes from
 * differentiating the recorded backward pass and is checked against finite
 * differences of S the same way.
 *
 * At kinks, where finite differences cannot decide, PyTorch's conventions
 * (derivatives.yaml) are pinned with derived values: abs/relu at 0, clamp at
 * its bounds, maximum/amax ties and NaN, pow at 0, prod/cumprod with zeros,
 * norm at 0.
 */
#include "support.h"
#include "ops/ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

enum dom {
    D_ANY,   /* standard normal */
    D_AWAY,  /* |x| >= 0.15: away from the kink at 0 (abs, relu, sign, …) */
    D_POS,   /* [0.2, 2.2]: log, sqrt, rsqrt, pow base */
    D_UNIT,  /* [-0.8, 0.8]: tan */
    D_EXACT, /* multiples of 2^-10 in about [-3, 3]: exact in f32 (cast) */
    D_ZEROS, /* normal with every third element exactly 0 (prod, cumprod) */
    D_PROB,  /* [0.05, 0.95]: probabilities */
};

static uint64_t rng = 0x9E3779B97F4A7C15u;
static double uniform(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}
static double normal(void) { return sqrt(-2 * log(1 - uniform())) * cos(6.283185307179586 * uniform()); }

static double draw(int dom, int64_t i) {
    double z = normal();
    switch (dom) {
    case D_AWAY: return (z < 0 ? -1 : 1) * (0.15 + fabs(z));
    case D_POS: return 0.2 + 2 * uniform();
    case D_UNIT: return 1.6 * uniform() - 0.8;
    case D_EXACT: return round(z * 1024) / 1024;
    case D_ZEROS: return i % 3 == 0 ? 0 : z;
    case D_PROB: return 0.05 + 0.9 * uniform();
    default: return z;
    }
}

typedef struct gc_input { int nd; int64_t s[4]; int dom; } gc_input;
typedef nb_tensor *(*gc_fn)(nb_tensor *const *x);
typedef struct gc_case {
    const char *op;    /* the ops.def name it covers */
    const char *label; /* what this variant exercises */
    gc_fn f;
    int n;
    gc_input in[3];
    bool second;       /* also check the second derivative */
    double h;          /* finite-difference step; 0 means 1e-6 */
} gc_case;

static int64_t count(const gc_input *in) {
    int64_t n = 1;
    for (int d = 0; d < in->nd; d++) n *= in->s[d];
    return n;
}

/* A fixed integer tensor (indices, targets). */
static nb_tensor *ints(const int64_t *v, const int64_t *shape, int nd) { return NBT(nb_from_data(v, shape, nd, NB_I64)); }
/* A fixed float tensor with smoothly varying values (deterministic weights inside builders). */
static nb_tensor *ramp(const int64_t *shape, int nd, double lo, double hi) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    return NBT(nb_reshape(nb_linspace(lo, hi, n, NB_F64), shape, nd));
}
static nb_tensor *ramp_like(nb_tensor *t, double lo, double hi) { return ramp(nb_shape(t), nb_ndim(t), lo, hi); }

/* ------------------------------------------------------------------------ */
/* The builders: one op (or a short chain exercising it) on f64 leaves       */
/* ------------------------------------------------------------------------ */

#define GC(fname, expr) \
    static nb_tensor *fname(nb_tensor *const *x) { return (expr); }

/* unary */
GC(f_neg, nb_neg(x[0]))
GC(f_abs, nb_abs(x[0]))
GC(f_sign, nb_mul(nb_sign(x[0]), x[0]))
GC(f_exp, nb_exp(x[0]))
GC(f_expm1, nb_expm1(x[0]))
GC(f_log, nb_log(x[0]))
GC(f_log1p, nb_log1p(x[0]))
GC(f_sqrt, nb_sqrt(x[0]))
GC(f_rsqrt, nb_rsqrt(x[0]))
GC(f_square, nb_square(x[0]))
GC(f_reciprocal, nb_reciprocal(x[0]))
GC(f_sin, nb_sin(x[0]))
GC(f_cos, nb_cos(x[0]))
GC(f_tan, nb_tan(x[0]))
GC(f_tanh, nb_tanh(x[0]))
GC(f_sigmoid, nb_sigmoid(x[0]))
GC(f_relu, nb_relu(x[0]))
GC(f_leaky_relu, nb_leaky_relu(x[0], 0.2))
GC(f_elu, nb_elu(x[0], 1.3))
GC(f_gelu, nb_gelu(x[0]))
GC(f_gelu_tanh, nb_gelu_tanh(x[0]))
GC(f_silu, nb_silu(x[0]))
GC(f_softplus, nb_softplus(x[0], 1.5, 2.0)) /* both branches: linear where 1.5 x > 2 */
GC(f_erf, nb_erf(x[0]))
GC(f_floor, nb_add(nb_floor(x[0]), x[0]))
GC(f_ceil, nb_add(nb_ceil(x[0]), x[0]))
GC(f_round, nb_add(nb_round(x[0]), x[0]))
GC(f_clamp, nb_clamp(x[0], -0.8, 0.9))
GC(f_clamp_open, nb_clamp(x[0], -INFINITY, 0.3))

/* binary */
GC(f_add, nb_add(x[0], x[1]))
GC(f_sub, nb_sub(x[0], x[1]))
GC(f_mul, nb_mul(x[0], x[1]))
GC(f_div, nb_div(x[0], x[1]))
GC(f_pow, nb_pow(x[0], x[1]))
GC(f_pow_scalar, nb_pow(x[0], 2.5))
GC(f_scalar_ops, nb_div(nb_sub(nb_mul(nb_add(x[0], 1.5), 2.0), 0.5), 3.0))
GC(f_maximum, nb_maximum(x[0], x[1]))
GC(f_minimum, nb_minimum(x[0], x[1]))
GC(f_atan2, nb_atan2(x[0], x[1]))
GC(f_remainder, nb_remainder(x[0], x[1]))
GC(f_fmod, nb_fmod(x[0], x[1]))
static nb_tensor *f_where(nb_tensor *const *x) {
    static const uint8_t c[] = {1, 0, 1};
    nb_tensor *cond = NBT(nb_from_data(c, NB_SHAPE(3, 1), NB_BOOL));
    return nb_where(cond, x[0], x[1]);
}
static nb_tensor *f_masked_fill(nb_tensor *const *x) {
    static const uint8_t m[] = {0, 1, 1, 0};
    return nb_masked_fill(x[0], NBT(nb_from_data(m, NB_SHAPE(1, 4), NB_BOOL)), 0.5);
}

/* reductions and scans */
static const int A0[] = {0}, A1[] = {1}, A2[] = {2}, AM1[] = {-1}, A02[] = {0, 2};
GC(f_sum_all, nb_sum(x[0], NULL, 0, false))
GC(f_sum_1, nb_sum(x[0], A1, 1, false))
GC(f_sum_02k, nb_sum(x[0], A02, 2, true))
GC(f_sum_sq, nb_square(nb_sum(x[0], A1, 1, false)))
GC(f_prod_1, nb_prod(x[0], A1, 1, false))
GC(f_prod_all, nb_prod(x[0], NULL, 0, true))
GC(f_prod_2, nb_prod(x[0], A2, 1, false))
GC(f_max_all, nb_max(x[0], NULL, 0, false))
GC(f_max_1k, nb_max(x[0], A1, 1, true))
GC(f_min_02, nb_min(x[0], A02, 2, false))
GC(f_cumsum_1, nb_cumsum(x[0], 1))
GC(f_cumsum_m1, nb_cumsum(x[0], -1))
GC(f_cumprod_1, nb_cumprod(x[0], 1))
GC(f_cumprod_2, nb_cumprod(x[0], 2))
GC(f_cumprod_0, nb_cumprod(x[0], 0))
GC(f_mean_1, nb_mean(x[0], A1, 1, false))
GC(f_mean_all, nb_mean(x[0], NULL, 0, true))
GC(f_var_1, nb_var(x[0], A1, 1, 1, false))
GC(f_var_all, nb_var(x[0], NULL, 0, 0, true))
GC(f_std_02, nb_std(x[0], A02, 2, 1, false))
GC(f_logsumexp_1, nb_logsumexp(x[0], A1, 1, false))
GC(f_logsumexp_all, nb_logsumexp(x[0], NULL, 0, true))
GC(f_norm_2, nb_norm(x[0], 2, A1, 1, false))
GC(f_norm_1, nb_norm(x[0], 1, NULL, 0, false))
GC(f_norm_3, nb_norm(x[0], 3, A2, 1, true))
GC(f_norm_inf, nb_norm(x[0], INFINITY, AM1, 1, false))

/* copies and views */
GC(f_cast, nb_cast(x[0], NB_F32))
GC(f_contiguous, nb_square(nb_contiguous(nb_transpose(x[0], 0, 1))))
GC(f_to_device, nb_to_device(nb_exp(nb_to_device(x[0], NB_REF)), NB_CPU))
GC(f_reshape, nb_sin(nb_reshape(x[0], NB_SHAPE(2, 6))))
GC(f_reshape_copy, nb_sin(nb_reshape(nb_transpose(x[0], 0, 1), NB_SHAPE(-1))))
GC(f_permute, nb_square(nb_permute(x[0], NB_AXES(2, 0, 1))))
GC(f_expand, nb_sin(nb_expand(x[0], NB_SHAPE(2, 3, 4))))
GC(f_slice, nb_square(nb_slice(x[0], 1, 1, NB_END, 2)))
GC(f_slice_neg, nb_exp(nb_slice(x[0], 0, -1, NB_END, -2)))
GC(f_flip, nb_mul(nb_flip(x[0], A0, 1), x[0]))
GC(f_select, nb_square(nb_select(x[0], 1, -1)))
GC(f_diagonal, nb_square(nb_diagonal(x[0], 1, 0, 1)))
GC(f_diagonal3, nb_exp(nb_diagonal(x[0], -1, 2, 1)))
/* view_grad appears in a recorded backward pass: d/dx sum(w · slice(x)³) = view_grad(3 w slice(x)²) */
static nb_tensor *f_view_grad(nb_tensor *const *x) {
    nb_tensor *s = NBT(nb_slice(x[0], 1, 1, NB_END, 2)), *g = NULL;
    nb_tensor *l = NBT(nb_sum(nb_mul(nb_mul(nb_square(s), s), ramp_like(s, -1, 2)), NULL, 0, false));
    if (nb_autograd_grad(l, NULL, x, 1, true, &g) != NB_OK) return NULL;
    return g;
}

/* linear algebra */
GC(f_matmul, nb_matmul(x[0], x[1]))
static nb_tensor *f_einsum_mm(nb_tensor *const *x) { return nb_einsum("ij,jk->ik", x, 2); }
static nb_tensor *f_einsum_bmm(nb_tensor *const *x) { return nb_einsum("bij,bjk->bik", x, 2); }
static nb_tensor *f_einsum_dot(nb_tensor *const *x) { return nb_einsum("i,i->", x, 2); }
static nb_tensor *f_einsum_diag(nb_tensor *const *x) { return nb_einsum("ii->i", x, 1); }
static nb_tensor *f_einsum_3(nb_tensor *const *x) { return nb_einsum("...i,ij,j->...", x, 3); }
static nb_tensor *f_einsum_implicit(nb_tensor *const *x) { return nb_einsum("ji,jk", x, 2); }
GC(f_linear, nb_linear(x[0], x[1], x[2]))
GC(f_linear_nobias, nb_linear(x[0], x[1], NULL))

/* indexing and joining */
static nb_tensor *f_gather(nb_tensor *const *x) {
    static const int64_t ix[] = {0, 2, 2, 1, 3, 0, 1, 1, 0, 3, 2, 2};
    return nb_gather(x[0], 1, ints(ix, NB_SHAPE(3, 4)));
}
static nb_tensor *f_gather_small(nb_tensor *const *x) {
    static const int64_t ix[] = {2, 0, 1, 2, 2, 2};
    return nb_gather(x[0], 0, ints(ix, NB_SHAPE(2, 3)));
}
static nb_tensor *f_scatter_add(nb_tensor *const *x) { /* index [3, 2] narrower than src [3, 3] */
    static const int64_t ix[] = {1, 1, 0, 3, 2, 0};
    return nb_scatter_add(x[0], 1, ints(ix, NB_SHAPE(3, 2)), x[1]);
}
static nb_tensor *f_scatter_add_sq(nb_tensor *const *x) {
    static const int64_t ix[] = {0, 2, 2, 1, 0, 0, 1, 2};
    return nb_square(nb_scatter_add(nb_square(x[0]), 0, ints(ix, NB_SHAPE(2, 4)), nb_exp(x[1])));
}
GC(f_cat, nb_cat((nb_tensor *[]){x[0], nb_exp(x[1]), x[2]}, 3, 1))
GC(f_pad_const, nb_square(nb_pad(x[0], NB_SHAPE(1, 2, 0, 1), NB_PAD_CONSTANT, 0.5)))
GC(f_pad_crop, nb_exp(nb_pad(x[0], NB_SHAPE(-1, 1, 1, -1), NB_PAD_CONSTANT, 0.0)))
GC(f_pad_reflect, nb_square(nb_pad(x[0], NB_SHAPE(2, 1, 1, 2), NB_PAD_REFLECT, 0.0)))
static nb_tensor *f_index_select(nb_tensor *const *x) {
    static const int64_t ix[] = {0, 2, 2, 3, 1};
    return nb_square(nb_index_select(x[0], 0, ints(ix, NB_SHAPE(5))));
}
static nb_tensor *f_take_along_axis(nb_tensor *const *x) {
    static const int64_t ix[] = {3, 1};
    return nb_exp(nb_take_along_axis(x[0], ints(ix, NB_SHAPE(1, 2)), 1));
}
static nb_tensor *f_embedding(nb_tensor *const *x) {
    static const int64_t ix[] = {4, 0, 4, 2, 1, 4};
    return nb_square(nb_embedding(x[0], ints(ix, NB_SHAPE(2, 3))));
}
GC(f_stack, nb_stack((nb_tensor *[]){x[0], nb_square(x[1])}, 2, 1))
static nb_tensor *f_split(nb_tensor *const *x) {
    nb_tensor *p[3];
    if (nb_split(x[0], 2, 0, p, 3) != 3) return NULL;
    return nb_cat((nb_tensor *[]){nb_exp(p[0]), nb_sin(p[1]), p[2]}, 3, 0);
}
static nb_tensor *f_chunk(nb_tensor *const *x) {
    nb_tensor *p[2];
    if (nb_chunk(x[0], 2, 1, p, 2) != 2) return NULL;
    return nb_cat((nb_tensor *[]){nb_square(p[0]), p[1]}, 2, 1);
}

/* neural-network functions and losses */
GC(f_softmax, nb_softmax(x[0], -1))
GC(f_softmax0, nb_softmax(x[0], 0))
GC(f_log_softmax, nb_log_softmax(x[0], 1))
GC(f_layer_norm, nb_layer_norm(x[0], 1, x[1], x[2], 1e-5))
GC(f_layer_norm2, nb_layer_norm(x[0], 2, NULL, NULL, 1e-5))
GC(f_rms_norm, nb_rms_norm(x[0], 1, x[1], 1e-6))
GC(f_rms_norm2, nb_rms_norm(x[0], 2, NULL, 1e-6))
GC(f_dropout, nb_dropout(x[0], 0.0, true))
GC(f_dropout_eval, nb_dropout(x[0], 0.5, false))
static const int64_t TARGET[] = {1, 4, 0};
static const int64_t TARGET_IGN[] = {2, -100, 3};
static nb_tensor *f_cross_entropy(nb_tensor *const *x) {
    return nb_cross_entropy(x[0], ints(TARGET, NB_SHAPE(3)), NB_CROSS_ENTROPY_DEFAULTS);
}
static nb_tensor *f_cross_entropy_ls(nb_tensor *const *x) {
    nb_cross_entropy_opts o = {NB_REDUCE_SUM, -100, 0.1};
    return nb_cross_entropy(x[0], ints(TARGET_IGN, NB_SHAPE(3)), o);
}
static nb_tensor *f_cross_entropy_prob(nb_tensor *const *x) {
    nb_cross_entropy_opts o = {NB_REDUCE_NONE, -100, 0.2};
    return nb_cross_entropy(x[0], x[1], o);
}
GC(f_nll_mean, nb_nll_loss(x[0], ints(TARGET_IGN, NB_SHAPE(3)), NB_REDUCE_MEAN, -100))
GC(f_nll_sum, nb_nll_loss(x[0], ints(TARGET, NB_SHAPE(3)), NB_REDUCE_SUM, -100))
GC(f_nll_none, nb_nll_loss(x[0], ints(TARGET, NB_SHAPE(3)), NB_REDUCE_NONE, 4))
GC(f_mse_mean, nb_mse_loss(x[0], x[1], NB_REDUCE_MEAN))
GC(f_mse_none, nb_mse_loss(x[0], x[1], NB_REDUCE_NONE))
GC(f_bce_mean, nb_bce_with_logits(x[0], x[1], NB_REDUCE_MEAN))
GC(f_bce_sum, nb_bce_with_logits(x[0], x[1], NB_REDUCE_SUM))

/* convolution and pooling */
static const nb_window2d WIN_UNFOLD = {{2, 3}, {1, 2}, {1, 0}, {1, 1}};
static const nb_window2d WIN_DIL = {{2, 2}, {1, 1}, {1, 1}, {2, 1}};
GC(f_unfold, nb_unfold(x[0], WIN_UNFOLD))
GC(f_unfold_dil, nb_square(nb_unfold(x[0], WIN_DIL)))
GC(f_fold, nb_fold(x[0], 4, 4, ((nb_window2d){{2, 2}, {1, 1}, {0, 0}, {1, 1}})))
GC(f_max_pool, nb_max_pool2d(x[0], NB_POOL2D(2, 2)))
GC(f_max_pool_pad, nb_max_pool2d(x[0], ((nb_window2d){{3, 2}, {2, 1}, {1, 1}, {1, 1}})))
static nb_tensor *f_max_unpool(nb_tensor *const *x) {
    nb_tensor *ix = NULL; /* argmax positions of a fixed image: not differentiated */
    nb_tensor *y = nb_max_pool2d_with_indices(ramp(NB_SHAPE(1, 2, 4, 4), 1, -1), NB_POOL2D(2, 2), &ix);
    if (!y) return NULL;
    return nb_square(nb_max_unpool2d(x[0], ix, 4, 4));
}
static nb_tensor *f_conv2d(nb_tensor *const *x) {
    nb_conv2d_opts o = {{2, 1}, {1, 1}, {1, 1}, 1};
    return nb_conv2d(x[0], x[1], x[2], o);
}
static nb_tensor *f_conv2d_groups(nb_tensor *const *x) {
    nb_conv2d_opts o = {{1, 1}, {0, 1}, {1, 2}, 2};
    return nb_square(nb_conv2d(x[0], x[1], NULL, o));
}
GC(f_conv1d, nb_conv1d(x[0], x[1], x[2], 1, 1, 2, 1))
GC(f_avg_pool, nb_avg_pool2d(x[0], ((nb_window2d){{2, 2}, {2, 2}, {1, 1}, {1, 1}}), false))
GC(f_avg_pool_incl, nb_avg_pool2d(x[0], ((nb_window2d){{3, 2}, {1, 2}, {1, 0}, {1, 1}}), true))

/* ------------------------------------------------------------------------ */
/* The table                                                                */
/* ------------------------------------------------------------------------ */

#define IN(nd, dom, ...) {nd, {__VA_ARGS__}, dom}
#define M34 IN(2, D_ANY, 3, 4)
#define M234 IN(3, D_ANY, 2, 3, 4)
#define U(op, f, dom, second) {op, "[3,4]", f, 1, {IN(2, dom, 3, 4)}, second, 0}

static const gc_case CASES[] = {
    /* unary */
    U("neg", f_neg, D_ANY, true), U("abs", f_abs, D_AWAY, true), U("sign", f_sign, D_AWAY, true),
    U("exp", f_exp, D_ANY, true), U("expm1", f_expm1, D_ANY, true), U("log", f_log, D_POS, true),
    U("log1p", f_log1p, D_POS, true), U("sqrt", f_sqrt, D_POS, true), U("rsqrt", f_rsqrt, D_POS, true),
    U("square", f_square, D_ANY, true), U("reciprocal", f_reciprocal, D_AWAY, true), U("sin", f_sin, D_ANY, true),
    U("cos", f_cos, D_ANY, true), U("tan", f_tan, D_UNIT, true), U("tanh", f_tanh, D_ANY, true),
    U("sigmoid", f_sigmoid, D_ANY, true), U("relu", f_relu, D_AWAY, true), U("leaky_relu", f_leaky_relu, D_AWAY, true),
    U("elu", f_elu, D_AWAY, true), U("gelu", f_gelu, D_ANY, true), U("gelu_tanh", f_gelu_tanh, D_ANY, true),
    U("silu", f_silu, D_ANY, true), U("softplus", f_softplus, D_ANY, true), U("erf", f_erf, D_ANY, true),
    U("floor", f_floor, D_ANY, true), U("ceil", f_ceil, D_ANY, true), U("round", f_round, D_ANY, true),
    U("clamp", f_clamp, D_ANY, true), U("clamp", f_clamp_open, D_ANY, false),
    /* binary: same shape, and broadcasting [2,1,4] against [3,1] */
    {"add", "[3,4]+[3,4]", f_add, 2, {M34, M34}, true, 0},
    {"add", "[2,1,4]+[3,1]", f_add, 2, {IN(3, D_ANY, 2, 1, 4), IN(2, D_ANY, 3, 1)}, false, 0},
    {"sub", "[3,4]-[4]", f_sub, 2, {M34, IN(1, D_ANY, 4)}, true, 0},
    {"mul", "[3,4]*[3,4]", f_mul, 2, {M34, M34}, true, 0},
    {"mul", "[2,1,4]*[3,1]", f_mul, 2, {IN(3, D_ANY, 2, 1, 4), IN(2, D_ANY, 3, 1)}, true, 0},
    {"div", "[3,4]/[3,4]", f_div, 2, {M34, IN(2, D_AWAY, 3, 4)}, true, 0},
    {"div", "[3,1]/[2,1,4]", f_div, 2, {IN(2, D_ANY, 3, 1), IN(3, D_AWAY, 2, 1, 4)}, true, 0},
    {"div", "scalar forms", f_scalar_ops, 1, {M34}, false, 0},
    {"pow", "[3,4]^[3,4]", f_pow, 2, {IN(2, D_POS, 3, 4), M34}, true, 0},
    {"pow", "[3,4]^[4]", f_pow, 2, {IN(2, D_POS, 3, 4), IN(1, D_ANY, 4)}, false, 0},
    {"pow", "x^2.5", f_pow_scalar, 1, {IN(2, D_POS, 3, 4)}, true, 0},
    {"maximum", "[3,4],[3,4]", f_maximum, 2, {M34, M34}, true, 0},
    {"maximum", "[2,1,4],[3,1]", f_maximum, 2, {IN(3, D_ANY, 2, 1, 4), IN(2, D_ANY, 3, 1)}, false, 0},
    {"minimum", "[3,4],[4]", f_minimum, 2, {M34, IN(1, D_ANY, 4)}, true, 0},
    {"atan2", "[3,4],[3,4]", f_atan2, 2, {IN(2, D_AWAY, 3, 4), IN(2, D_AWAY, 3, 4)}, true, 0},
    {"remainder", "[3,4],[3,4]", f_remainder, 2, {M34, IN(2, D_POS, 3, 4)}, true, 0},
    {"remainder", "[3,4],[4] negative divisor", f_remainder, 2, {M34, IN(1, D_AWAY, 4)}, false, 0},
    {"fmod", "[3,4],[3,4]", f_fmod, 2, {M34, IN(2, D_POS, 3, 4)}, true, 0},
    {"fmod", "[3,4],[4] negative divisor", f_fmod, 2, {M34, IN(1, D_AWAY, 4)}, false, 0},
    {"where", "cond [3,1], [3,4], [4]", f_where, 2, {M34, IN(1, D_ANY, 4)}, true, 0},
    {"masked_fill", "mask [1,4]", f_masked_fill, 1, {M34}, false, 0},
    /* reductions and scans */
    {"sum", "all", f_sum_all, 1, {M234}, false, 0},
    {"sum", "axis 1", f_sum_1, 1, {M234}, false, 0},
    {"sum", "axes 0,2 keepdim", f_sum_02k, 1, {M234}, false, 0},
    {"sum", "rank 0", f_sum_all, 1, {IN(0, D_ANY, 0)}, false, 0},
    {"sum", "square of sum", f_sum_sq, 1, {M234}, true, 0},
    {"prod", "axis 1", f_prod_1, 1, {M234}, true, 0},
    {"prod", "all keepdim", f_prod_all, 1, {IN(2, D_ANY, 2, 3)}, true, 0},
    {"prod", "axis 2 with zeros", f_prod_2, 1, {IN(3, D_ZEROS, 2, 3, 4)}, true, 0},
    {"max", "all", f_max_all, 1, {M234}, true, 0},
    {"max", "axis 1 keepdim", f_max_1k, 1, {M234}, false, 0},
    {"min", "axes 0,2", f_min_02, 1, {M234}, true, 0},
    {"cumsum", "axis 1", f_cumsum_1, 1, {M234}, false, 0},
    {"cumsum", "axis -1", f_cumsum_m1, 1, {M34}, false, 0},
    {"cumprod", "axis 1", f_cumprod_1, 1, {M234}, true, 0},
    {"cumprod", "axis 2 with zeros", f_cumprod_2, 1, {IN(3, D_ZEROS, 2, 3, 4)}, true, 0},
    {"cumprod", "rank 0", f_cumprod_0, 1, {IN(0, D_ANY, 0)}, true, 0},
    {"mean", "axis 1", f_mean_1, 1, {M234}, false, 0},
    {"mean", "all keepdim", f_mean_all, 1, {M34}, false, 0},
    {"var", "axis 1", f_var_1, 1, {M234}, true, 0},
    {"var", "all, correction 0, keepdim", f_var_all, 1, {M34}, true, 0},
    {"std", "axes 0,2", f_std_02, 1, {M234}, true, 0},
    {"logsumexp", "axis 1", f_logsumexp_1, 1, {M234}, true, 0},
    {"logsumexp", "all keepdim", f_logsumexp_all, 1, {M34}, true, 0},
    {"norm", "p=2 axis 1", f_norm_2, 1, {M234}, true, 0},
    {"norm", "p=1 all", f_norm_1, 1, {IN(2, D_AWAY, 3, 4)}, false, 0},
    {"norm", "p=3 axis 2 keepdim", f_norm_3, 1, {IN(3, D_AWAY, 2, 3, 4)}, true, 0},
    {"norm", "p=inf axis -1", f_norm_inf, 1, {M234}, false, 0},
    /* copies and views */
    {"cast", "f64 -> f32", f_cast, 1, {IN(2, D_EXACT, 3, 4)}, false, 0x1p-10},
    {"contiguous", "of a transpose", f_contiguous, 1, {M34}, true, 0},
    {"to_device", "cpu -> ref -> cpu", f_to_device, 1, {M34}, true, 0},
    {"reshape", "view", f_reshape, 1, {M34}, true, 0},
    {"reshape", "copy of a transpose", f_reshape_copy, 1, {M34}, false, 0},
    {"permute", "2,0,1", f_permute, 1, {M234}, true, 0},
    {"expand", "[3,1] -> [2,3,4]", f_expand, 1, {IN(2, D_ANY, 3, 1)}, true, 0},
    {"slice", "step 2", f_slice, 1, {IN(2, D_ANY, 3, 5)}, true, 0},
    {"slice", "negative step", f_slice_neg, 1, {IN(2, D_ANY, 5, 2)}, true, 0},
    {"slice", "flip", f_flip, 1, {M34}, true, 0},
    {"select", "axis 1, -1", f_select, 1, {M34}, true, 0},
    {"diagonal", "offset 1", f_diagonal, 1, {M34}, true, 0},
    {"diagonal", "offset -1 of axes 2,1", f_diagonal3, 1, {M234}, true, 0},
    {"view_grad", "gradient of a slice", f_view_grad, 1, {IN(2, D_ANY, 3, 5)}, true, 0},
    /* linear algebra */
    {"matmul", "[3,4]@[4,5]", f_matmul, 2, {M34, IN(2, D_ANY, 4, 5)}, true, 0},
    {"matmul", "[4]@[4,5]", f_matmul, 2, {IN(1, D_ANY, 4), IN(2, D_ANY, 4, 5)}, true, 0},
    {"matmul", "[3,4]@[4]", f_matmul, 2, {M34, IN(1, D_ANY, 4)}, false, 0},
    {"matmul", "[4]@[4]", f_matmul, 2, {IN(1, D_ANY, 4), IN(1, D_ANY, 4)}, true, 0},
    {"matmul", "[2,1,3,4]@[3,4,2]", f_matmul, 2, {IN(4, D_ANY, 2, 1, 3, 4), IN(3, D_ANY, 3, 4, 2)}, true, 0},
    {"linear", "bias", f_linear, 3, {M234, IN(2, D_ANY, 5, 4), IN(1, D_ANY, 5)}, true, 0},
    {"linear", "no bias", f_linear_nobias, 2, {IN(1, D_ANY, 4), IN(2, D_ANY, 5, 4)}, false, 0},
    {"einsum", "ij,jk->ik", f_einsum_mm, 2, {M34, IN(2, D_ANY, 4, 2)}, true, 0},
    {"einsum", "bij,bjk->bik", f_einsum_bmm, 2, {M234, IN(3, D_ANY, 2, 4, 2)}, false, 0},
    {"einsum", "i,i->", f_einsum_dot, 2, {IN(1, D_ANY, 4), IN(1, D_ANY, 4)}, true, 0},
    {"einsum", "ii->i", f_einsum_diag, 1, {IN(2, D_ANY, 3, 3)}, false, 0},
    {"einsum", "...i,ij,j->...", f_einsum_3, 3, {M234, IN(2, D_ANY, 4, 3), IN(1, D_ANY, 3)}, true, 0},
    {"einsum", "ji,jk (implicit)", f_einsum_implicit, 2, {M34, IN(2, D_ANY, 3, 2)}, false, 0},
    /* indexing and joining */
    {"gather", "axis 1, repeated indices", f_gather, 1, {M34}, true, 0},
    {"gather", "index smaller than input", f_gather_small, 1, {M34}, false, 0},
    {"scatter_add", "index narrower than src", f_scatter_add, 2, {IN(2, D_ANY, 3, 4), IN(2, D_ANY, 3, 3)}, false, 0},
    {"scatter_add", "axis 0, nonlinear", f_scatter_add_sq, 2, {M34, IN(2, D_ANY, 2, 4)}, true, 0},
    {"cat", "axis 1", f_cat, 3, {IN(3, D_ANY, 2, 1, 4), M234, IN(3, D_ANY, 2, 2, 4)}, true, 0},
    {"pad", "constant", f_pad_const, 1, {M34}, true, 0},
    {"pad", "negative widths crop", f_pad_crop, 1, {M34}, true, 0},
    {"pad", "reflect", f_pad_reflect, 1, {M34}, true, 0},
    {"index_select", "repeated rows", f_index_select, 1, {IN(2, D_ANY, 4, 3)}, true, 0},
    {"take_along_axis", "broadcast index", f_take_along_axis, 1, {M34}, true, 0},
    {"embedding", "repeated rows", f_embedding, 1, {IN(2, D_ANY, 5, 3)}, true, 0},
    {"stack", "axis 1", f_stack, 2, {IN(2, D_ANY, 2, 3), IN(2, D_ANY, 2, 3)}, true, 0},
    {"split", "size 2 of 5", f_split, 1, {IN(2, D_ANY, 5, 3)}, true, 0},
    {"chunk", "2 chunks of 5", f_chunk, 1, {IN(2, D_ANY, 3, 5)}, true, 0},
    /* neural-network functions and losses */
    {"softmax", "axis -1", f_softmax, 1, {M34}, true, 0},
    {"softmax", "axis 0", f_softmax0, 1, {M234}, false, 0},
    {"log_softmax", "axis 1", f_log_softmax, 1, {M234}, true, 0},
    {"layer_norm", "last axis, affine", f_layer_norm, 3, {M234, IN(1, D_ANY, 4), IN(1, D_ANY, 4)}, true, 0},
    {"layer_norm", "last two axes", f_layer_norm2, 1, {M234}, false, 0},
    {"rms_norm", "last axis, weight", f_rms_norm, 2, {M234, IN(1, D_ANY, 4)}, true, 0},
    {"rms_norm", "last two axes", f_rms_norm2, 1, {M234}, false, 0},
    {"dropout", "p = 0", f_dropout, 1, {M34}, false, 0},
    {"dropout", "eval", f_dropout_eval, 1, {M34}, false, 0},
    {"cross_entropy", "class indices", f_cross_entropy, 1, {IN(2, D_ANY, 3, 5)}, true, 0},
    {"cross_entropy", "ignore_index, smoothing, sum", f_cross_entropy_ls, 1, {IN(2, D_ANY, 3, 5)}, true, 0},
    {"cross_entropy", "probabilities, smoothing", f_cross_entropy_prob, 2, {IN(2, D_ANY, 3, 5), IN(2, D_PROB, 3, 5)}, true, 0},
    {"nll_loss", "mean, ignore_index", f_nll_mean, 1, {IN(2, D_ANY, 3, 5)}, false, 0},
    {"nll_loss", "sum", f_nll_sum, 1, {IN(2, D_ANY, 3, 5)}, false, 0},
    {"nll_loss", "none, ignore_index 4", f_nll_none, 1, {IN(2, D_ANY, 3, 5)}, false, 0},
    {"mse_loss", "mean", f_mse_mean, 2, {M34, M34}, true, 0},
    {"mse_loss", "none", f_mse_none, 2, {M34, M34}, false, 0},
    {"bce_with_logits", "mean", f_bce_mean, 2, {M34, IN(2, D_PROB, 3, 4)}, true, 0},
    {"bce_with_logits", "sum", f_bce_sum, 2, {M34, IN(2, D_PROB, 3, 4)}, false, 0},
    /* convolution and pooling */
    {"unfold", "stride, padding", f_unfold, 1, {IN(4, D_ANY, 1, 2, 4, 5)}, false, 0},
    {"unfold", "dilation", f_unfold_dil, 1, {IN(4, D_ANY, 2, 1, 4, 4)}, true, 0},
    {"fold", "overlapping 2x2", f_fold, 1, {IN(3, D_ANY, 1, 8, 9)}, false, 0},
    {"max_pool2d", "2x2", f_max_pool, 1, {IN(4, D_ANY, 1, 2, 4, 4)}, true, 0},
    {"max_pool2d", "3x2 stride 2,1 padding", f_max_pool_pad, 1, {IN(4, D_ANY, 2, 1, 5, 4)}, false, 0},
    {"max_unpool2d", "2x2", f_max_unpool, 1, {IN(4, D_ANY, 1, 2, 2, 2)}, true, 0},
    {"conv2d", "stride, padding, bias", f_conv2d, 3, {IN(4, D_ANY, 1, 2, 5, 4), IN(4, D_ANY, 3, 2, 3, 2), IN(1, D_ANY, 3)}, true, 0},
    {"conv2d", "groups, dilation", f_conv2d_groups, 2, {IN(4, D_ANY, 1, 4, 4, 5), IN(4, D_ANY, 2, 2, 2, 2)}, false, 0},
    {"conv1d", "dilation, bias", f_conv1d, 3, {IN(3, D_ANY, 2, 2, 7), IN(3, D_ANY, 3, 2, 3), IN(1, D_ANY, 3)}, true, 0},
    {"avg_pool2d", "padding excluded", f_avg_pool, 1, {IN(4, D_ANY, 1, 2, 4, 5)}, false, 0},
    {"avg_pool2d", "padding included", f_avg_pool_incl, 1, {IN(4, D_ANY, 1, 1, 4, 4)}, false, 0},
};
#define NCASES (sizeof CASES / sizeof CASES[0])

/* ------------------------------------------------------------------------ */
/* The check                                                                */
/* ------------------------------------------------------------------------ */

typedef struct gc_run {
    const gc_case *c;
    double *v[3];      /* current input values (perturbed in place) */
    nb_tensor *w;      /* weights of L */
    nb_tensor *dir[3]; /* directions V_i of S (second order) */
    int order;
} gc_run;

/* Fresh tracked leaves holding the current values. */
static void leaves(const gc_run *r, nb_tensor **x) {
    for (int i = 0; i < r->c->n; i++) {
        x[i] = NBT(nb_from_data(r->v[i], r->c->in[i].s, r->c->in[i].nd, NB_F64));
        assert_int_equal(nb_set_requires_grad(x[i], true), NB_OK);
    }
}

/* The checked scalar: order 1 L(x) = sum(f(x)·W); order 2 S(x) = Σ_i sum(∂L/∂x_i · V_i). */
static nb_tensor *objective(const gc_run *r, nb_tensor **x) {
    leaves(r, x);
    nb_tensor *y = NBT(r->c->f(x));
    nb_tensor *l = NBT(nb_sum(nb_mul(y, r->w), NULL, 0, false));
    if (r->order == 1) return l;
    nb_tensor *g[3];
    if (nb_autograd_grad(l, NULL, x, r->c->n, true, g) != NB_OK) fail_msg("%s", nb_last_message());
    nb_tensor *s = NULL;
    for (int i = 0; i < r->c->n; i++) {
        nb_tensor *t = NBT(nb_sum(nb_mul(g[i], r->dir[i]), NULL, 0, false));
        s = s ? NBT(nb_add(s, t)) : t;
    }
    return s;
}

static double value_at(const gc_run *r) {
    nb_scope_begin();
    nb_tensor *x[3];
    double v = 0;
    assert_int_equal(nb_item(objective(r, x), &v), NB_OK);
    nb_scope_end();
    return v;
}

static nb_tensor *random_like(const int64_t *shape, int nd) {
    int64_t n = 1;
    for (int d = 0; d < nd; d++) n *= shape[d];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    assert_non_null(v);
    for (int64_t i = 0; i < n; i++) v[i] = normal();
    nb_tensor *t = NBT(nb_from_data(v, shape, nd, NB_F64));
    free(v);
    return t;
}

static void check(const gc_case *c, int order) {
    nb_scope_begin();
    gc_run r = {.c = c, .order = order};
    for (int i = 0; i < c->n; i++) {
        r.v[i] = malloc(sizeof(double) * (size_t)(count(&c->in[i]) + 1));
        assert_non_null(r.v[i]);
        for (int64_t j = 0; j < count(&c->in[i]); j++) r.v[i][j] = draw(c->in[i].dom, j);
        r.dir[i] = random_like(c->in[i].s, c->in[i].nd);
    }
    nb_tensor *x[3];
    leaves(&r, x);
    nb_tensor *y = NBT(c->f(x)); /* for the shape of W */
    r.w = random_like(nb_shape(y), nb_ndim(y));
    /* analytic: the gradient accumulated into fresh leaves by nb_backward */
    nb_tensor *obj = objective(&r, x);
    double at = 0;
    assert_int_equal(nb_item(obj, &at), NB_OK);
    bool tracked = nb_requires_grad(obj); /* S need not depend on x (a linear op) */
    if (tracked) assert_int_equal(nb_backward(obj, NULL, false), NB_OK);
    const double h = c->h > 0 ? c->h : 1e-6, atol = 1e-8 * (1 + fabs(at));
    int bad = 0;
    for (int i = 0; i < c->n && !bad; i++) {
        nb_tensor *g = tracked ? nb_grad(x[i]) : NULL;
        for (int64_t j = 0; j < count(&c->in[i]) && !bad; j++) {
            double a = g ? nbt_at(g, j) : 0, v0 = r.v[i][j];
            r.v[i][j] = v0 + h;
            double lp = value_at(&r);
            r.v[i][j] = v0 - h;
            double lm = value_at(&r);
            r.v[i][j] = v0;
            double fd = (lp - lm) / (2 * h);
            if (!(fabs(a - fd) <= 1e-6 * fabs(fd) + atol)) {
                fprintf(stderr, "%s (%s), order %d: d/dx%d[%lld]: analytic %.12g vs finite difference %.12g\n", c->op,
                        c->label, order, i, (long long)j, a, fd);
                bad = 1;
            }
        }
    }
    for (int i = 0; i < c->n; i++) free(r.v[i]);
    nb_scope_end();
    if (bad) fail();
}

static void test_first_order(void **state) { check(*state, 1); }
static void test_second_order(void **state) { check(*state, 2); }

/* Every op with a derivative (RULE or COMPOSITE) has a case; the rest are marked NONE. */
static void test_every_differentiable_op_has_a_case(void **state) {
    (void)state;
    int missing = 0;
    for (int op = 0; op < NB_OP_COUNT; op++) {
        if (nb__ops[op].grad == NB_GRAD_NONE) continue;
        bool found = false;
        for (size_t k = 0; k < NCASES && !found; k++) found = !strcmp(CASES[k].op, nb__ops[op].name);
        if (!found) {
            fprintf(stderr, "op '%s' is differentiable (%s) but has no gradcheck case; add one or mark it NONE\n",
                    nb__ops[op].name, nb__ops[op].grad == NB_GRAD_RULE ? "RULE" : "COMPOSITE");
            missing++;
        }
        if ((nb__ops[op].grad == NB_GRAD_RULE) != (nb__ops[op].vjp != NULL)) {
            fprintf(stderr, "op '%s': RULE mark and VJP pointer disagree\n", nb__ops[op].name);
            missing++;
        }
    }
    for (size_t k = 0; k < NCASES; k++) { /* and every case names a real op */
        bool known = false;
        for (int op = 0; op < NB_OP_COUNT && !known; op++) known = !strcmp(CASES[k].op, nb__ops[op].name);
        if (!known) {
            fprintf(stderr, "gradcheck case '%s' names no op in ops.def\n", CASES[k].op);
            missing++;
        }
    }
    assert_int_equal(missing, 0);
}

/* ------------------------------------------------------------------------ */
/* Kinks and singular points: PyTorch's conventions (derivatives.yaml),      */
/* where finite differences cannot decide                                   */
/* ------------------------------------------------------------------------ */

/* d sum(f(x)) / dx at the n values v must equal want. */
static void expect_grad(const char *what, gc_fn f, const double *v, int64_t n, const double *want) {
    nb_scope_begin();
    nb_tensor *x = NBT(nb_from_data(v, &n, 1, NB_F64));
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    assert_int_equal(nb_backward(NBT(nb_sum(NBT(f(&x)), NULL, 0, false)), NULL, false), NB_OK);
    nb_tensor *g = NBT(nb_grad(x));
    for (int64_t i = 0; i < n; i++)
        if (!(nbt_at(g, i) == want[i] || (isnan(want[i]) && isnan(nbt_at(g, i))))) {
            fprintf(stderr, "%s: d/dx[%lld] = %g, expected %g\n", what, (long long)i, nbt_at(g, i), want[i]);
            fail();
        }
    nb_scope_end();
}

/* The Hessian of sum(f(x)) at the n values v (row i: the gradient of dL/dx_i, taken
 * through the create_graph pass) must equal want (n x n, row-major). */
static void expect_hessian(const char *what, gc_fn f, const double *v, int64_t n, const double *want) {
    nb_scope_begin();
    nb_tensor *x = NBT(nb_from_data(v, &n, 1, NB_F64)), *g = NULL;
    assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
    nb_tensor *l = NBT(nb_sum(NBT(f(&x)), NULL, 0, false));
    assert_int_equal(nb_autograd_grad(l, NULL, &x, 1, true, &g), NB_OK);
    for (int64_t i = 0; i < n; i++) {
        nb_tensor *h = NULL;
        assert_int_equal(nb_autograd_grad(NBT(nb_select(g, 0, i)), NULL, &x, 1, false, &h), NB_OK);
        for (int64_t j = 0; j < n; j++)
            if (!(nbt_at(h, j) == want[i * n + j])) {
                fprintf(stderr, "%s: d2L/dx%lld dx%lld = %g, expected %g\n", what, (long long)i, (long long)j,
                        nbt_at(h, j), want[i * n + j]);
                fail();
            }
    }
    nb_scope_end();
}

/* sum(cumprod([a, b, c])) = a + ab + abc: gradient [1 + b + bc, a + ac, ab] and
 * Hessian [[0, 1 + c, b], [1 + c, 0, a], [b, a, 0]], exact for any zeros. */
static void expect_cumprod3(const double *v) {
    double a = v[0], b = v[1], c = v[2];
    expect_grad("cumprod", f_cumprod_0, v, 3, (double[]){1 + b + b * c, a + a * c, a * b});
    expect_hessian("cumprod", f_cumprod_0, v, 3, (double[]){0, 1 + c, b, 1 + c, 0, a, b, a, 0});
}

static void test_cumprod_zeros(void **state) {
    (void)state;
    /* sum(cumprod([a, b])) = a + ab at [0, 3]: gradient [4, 0], Hessian [[0, 1], [1, 0]] */
    expect_grad("cumprod [0, 3]", f_cumprod_0, (double[]){0, 3}, 2, (double[]){4, 0});
    expect_hessian("cumprod [0, 3]", f_cumprod_0, (double[]){0, 3}, 2, (double[]){0, 1, 1, 0});
    const double cases[][3] = {{2, 0, 3}, {0, 2, 3}, {2, 3, 0}, {0, 0, 3}, {2, 0, 0}, {0, 3, 0}, {0, 0, 0}, {2, -3, 5}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) expect_cumprod3(cases[k]);
    /* prod is built on cumprod: prod([a, b, c]) has Hessian [[0, c, b], [c, 0, a], [b, a, 0]] */
    expect_hessian("prod [0, 0, 3]", f_prod_all, (double[]){0, 0, 3}, 3, (double[]){0, 3, 0, 3, 0, 0, 0, 0, 0});
    expect_hessian("prod [2, 0, 3]", f_prod_all, (double[]){2, 0, 3}, 3, (double[]){0, 3, 0, 3, 0, 2, 0, 2, 0});
}

GC(k_max_self, nb_maximum(x[0], nb_mul(x[0], 1.0)))       /* a tie everywhere: 1/2 + 1/2 */
GC(k_max_one, nb_maximum(x[0], NBT(nb_ones_like(x[0])))) /* vs 1: ties at 1, NaN to both */
GC(k_min_one, nb_minimum(NBT(nb_ones_like(x[0])), x[0]))
GC(k_pow0, nb_pow(x[0], 0.0))
GC(k_pow_base0, nb_pow(NBT(nb_zeros_like(x[0])), x[0])) /* d/db 0^b */
GC(k_norm2, nb_norm(x[0], 2, NULL, 0, false))
GC(k_cube_norm, nb_norm(x[0], 3, NULL, 0, false))

static void test_kink_conventions(void **state) {
    (void)state;
    const double z3[] = {0, 0, 0}, k[] = {-1, 0, 1}, ties[] = {1, 3, 3}, nan_in[] = {1, NAN, 2};
    expect_grad("abs at 0", f_abs, k, 3, (double[]){-1, 0, 1});
    expect_grad("relu at 0", f_relu, k, 3, (double[]){0, 0, 1});
    expect_grad("leaky_relu at 0", f_leaky_relu, k, 3, (double[]){0.2, 0.2, 1});
    expect_grad("elu at 0", f_elu, k, 3, (double[]){1.3 * exp(-1.0), 1.3, 1});
    /* torch 2.x with scalar bounds: no gradient at a bound (torch 1.13 passed it) */
    expect_grad("clamp at its bounds", f_clamp, (double[]){-0.8, 0.9, 2, 0.5}, 4, (double[]){0, 0, 0, 1});
    expect_grad("sign", f_sign, k, 3, (double[]){-1, 0, 1}); /* d(sign(x) x) = sign(x) + 0 */
    expect_grad("maximum of a tie", k_max_self, k, 3, (double[]){1, 1, 1});
    expect_grad("maximum(x, 1)", k_max_one, (double[]){0, 1, 2, NAN}, 4, (double[]){0, 0.5, 1, 1});
    expect_grad("minimum(1, x)", k_min_one, (double[]){0, 1, 2, NAN}, 4, (double[]){1, 0.5, 0, 1});
    expect_grad("amax ties", f_max_all, ties, 3, (double[]){0, 0.5, 0.5});
    expect_grad("amax with NaN", f_max_all, nan_in, 3, (double[]){0, 1, 0});
    expect_grad("pow(x, 0) at 0", k_pow0, z3, 3, z3);
    expect_grad("pow(0, b), b >= 0", k_pow_base0, (double[]){0, 1, 2.5}, 3, z3);
    expect_grad("prod with one zero", f_prod_all, (double[]){2, 0, 3}, 3, (double[]){0, 6, 0});
    expect_grad("prod with two zeros", f_prod_all, (double[]){0, 0, 3}, 3, z3);
    /* sum(cumprod([a, b, c])) = a + ab + abc: gradient [1 + b + bc, a + ac, ab] */
    expect_grad("cumprod with a zero", f_cumprod_0, (double[]){2, 0, 3}, 3, (double[]){1, 8, 0});
    expect_grad("2-norm at 0", k_norm2, z3, 3, z3);
    expect_grad("3-norm at 0", k_cube_norm, z3, 3, z3);
}

/* Each test starts without a pending error from an earlier one. */
static int clear_error(void **state) {
    (void)state;
    nb_clear_error();
    return 0;
}

int main(void) {
    enum { MAXT = 2 * NCASES + 3 };
    static struct CMUnitTest tests[MAXT];
    static char names[MAXT][96];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest){"kink conventions", test_kink_conventions, clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"cumprod and prod with zeros, first and second order", test_cumprod_zeros,
                                     clear_error, NULL, NULL};
    tests[n++] = (struct CMUnitTest){"every differentiable op has a case", test_every_differentiable_op_has_a_case,
                                     clear_error, NULL, NULL};
    for (int order = 1; order <= 2; order++)
        for (size_t k = 0; k < NCASES; k++) {
            if (order == 2 && !CASES[k].second) continue;
            snprintf(names[n], sizeof names[n], "%s %s%s", CASES[k].op, CASES[k].label, order == 2 ? " (2nd order)" : "");
            tests[n] = (struct CMUnitTest){names[n], order == 1 ? test_first_order : test_second_order, NULL, NULL,
                                           (void *)&CASES[k]};
            n++;
        }
    return _cmocka_run_group_tests("gradcheck", tests, n, NULL, NULL);
}
