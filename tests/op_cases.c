/*
 * op_cases.c — the op cases of op_cases.h: the input draws, the builders
 * (each applies one op of the table to f64 leaves) and the table.
 */
#include "op_cases.h"
#include "support.h"
#include "ops/ops.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Inputs                                                                   */
/* ------------------------------------------------------------------------ */

static uint64_t rng = 0x9E3779B97F4A7C15u;
double gc_uniform(void) { /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15u);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1p-53;
}
double gc_normal(void) { return sqrt(-2 * log(1 - gc_uniform())) * cos(6.283185307179586 * gc_uniform()); }

double gc_draw(int dom, int64_t i) {
    double z = gc_normal();
    switch (dom) {
    case D_AWAY: return (z < 0 ? -1 : 1) * (0.15 + fabs(z));
    case D_POS: return 0.2 + 2 * gc_uniform();
    case D_UNIT: return 1.6 * gc_uniform() - 0.8;
    case D_EXACT: return round(z * 1024) / 1024;
    case D_ZEROS: return i % 3 == 0 ? 0 : z;
    case D_PROB: return 0.05 + 0.9 * gc_uniform();
    default: return z;
    }
}

int64_t gc_count(const gc_input *in) {
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


/* shared with test_gradcheck (op_cases.h declares them) */
#define GX(fname, expr) \
    nb_tensor *fname(nb_tensor *const *x) { return (expr); }

/* unary */
GC(f_neg, nb_neg(x[0]))
GX(f_abs, nb_abs(x[0]))
GX(f_sign, nb_mul(nb_sign(x[0]), x[0]))
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
GX(f_relu, nb_relu(x[0]))
GX(f_leaky_relu, nb_leaky_relu(x[0], 0.2))
GX(f_elu, nb_elu(x[0], 1.3))
GC(f_gelu, nb_gelu(x[0]))
GC(f_gelu_tanh, nb_gelu_tanh(x[0]))
GC(f_silu, nb_silu(x[0]))
GC(f_softplus, nb_softplus(x[0], 1.5, 2.0)) /* both branches: linear where 1.5 x > 2 */
GC(f_erf, nb_erf(x[0]))
GC(f_floor, nb_add(nb_floor(x[0]), x[0]))
GC(f_ceil, nb_add(nb_ceil(x[0]), x[0]))
GC(f_round, nb_add(nb_round(x[0]), x[0]))
GX(f_clamp, nb_clamp(x[0], -0.8, 0.9))
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
GX(f_prod_all, nb_prod(x[0], NULL, 0, true))
GC(f_prod_2, nb_prod(x[0], A2, 1, false))
GX(f_max_all, nb_max(x[0], NULL, 0, false))
GC(f_max_1k, nb_max(x[0], A1, 1, true))
GC(f_min_02, nb_min(x[0], A02, 2, false))
GC(f_cumsum_1, nb_cumsum(x[0], 1))
GC(f_cumsum_m1, nb_cumsum(x[0], -1))
GC(f_cumprod_1, nb_cumprod(x[0], 1))
GC(f_cumprod_2, nb_cumprod(x[0], 2))
GX(f_cumprod_0, nb_cumprod(x[0], 0))
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
    /* the tape eagerly; inside a trace (the transforms' table walks) the graph's own reverse mode */
    nb_status st = nb__is_symbolic(x[0]) ? nb_graph_grad(l, 1, x, &g) : nb_autograd_grad(l, NULL, x, 1, true, &g);
    return st == NB_OK ? g : NULL;
}

/* linear algebra */
GC(f_matmul, nb_matmul(x[0], x[1]))
static nb_tensor *f_einsum_mm(nb_tensor *const *x) { return nb_einsum("ij,jk->ik", x, 2); }
static nb_tensor *f_einsum_bmm(nb_tensor *const *x) { return nb_einsum("bij,bjk->bik", x, 2); }
static nb_tensor *f_einsum_dot(nb_tensor *const *x) { return nb_einsum("i,i->", x, 2); }
static nb_tensor *f_einsum_diag(nb_tensor *const *x) { return nb_einsum("ii->i", x, 1); }
static nb_tensor *f_einsum_3(nb_tensor *const *x) { return nb_einsum("...i,ij,j->...", x, 3); }
static nb_tensor *f_einsum_implicit(nb_tensor *const *x) { return nb_einsum("ji,jk", x, 2); }
GC(f_addmm, nb_addmm(x[2], x[0], x[1]))
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
/* conv2d runs as the CONVOLUTION kernel, eager and traced (a batch of images, padding 1; 1x1 with groups) */
GC(f_convolution, nb_square(nb_conv2d(x[0], x[1], x[2], ((nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1}))))
GC(f_convolution_1x1, nb_square(nb_conv2d(x[0], x[1], NULL, ((nb_conv2d_opts){{1, 1}, {0, 0}, {1, 1}, 2}))))
GC(f_conv1d, nb_conv1d(x[0], x[1], x[2], 1, 1, 2, 1))
/* convolution_backward appears in a recorded (or traced) backward pass: the gradient of
 * sum(g · conv2d(x, w)) with respect to x (its input gradient, linear in w and g) or to w (its
 * weight gradient, linear in x and g), times that leaf (so that every leaf has a gradient), itself
 * differentiated */
static nb_tensor *conv_grad(nb_tensor *const *x, int wrt, nb_conv2d_opts o) {
    nb_tensor *l = NBT(nb_sum(nb_mul(nb_conv2d(x[0], x[1], NULL, o), x[2]), NULL, 0, false)), *g = NULL;
    nb_tensor *leaf[1] = {x[wrt]};
    nb_status st = nb__is_symbolic(x[0]) ? nb_graph_grad(l, 1, leaf, &g) : nb_autograd_grad(l, NULL, leaf, 1, true, &g);
    return st == NB_OK ? nb_mul(g, x[wrt]) : NULL;
}
/* with relu in the convolution's epilogue (a Sequential's Conv2d then ReLU) and a bias: the
 * gradients of sum(sin(y) + y b) for y = relu(conv2d(x, w, b)) by x, w or b take g = cos(y) + b
 * masked by y inside the kernel (db from the kernel too: 3 channels of 20 positions); g reaches b
 * other than through y, so the mask's own derivative shows */
static nb_tensor *conv_relu_grad(nb_tensor *const *x, int wrt) {
    nb_tensor *y = NBT(nb__conv2d_relu(x[0], x[1], x[2], (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1}));
    nb_tensor *yb = NBT(nb_mul(y, nb_reshape(x[2], NB_SHAPE(1, 3, 1, 1))));
    nb_tensor *l = NBT(nb_sum(nb_add(nb_sin(y), yb), NULL, 0, false)), *g = NULL, *leaf[1] = {x[wrt]};
    nb_status st = nb__is_symbolic(x[0]) ? nb_graph_grad(l, 1, leaf, &g) : nb_autograd_grad(l, NULL, leaf, 1, true, &g);
    return st == NB_OK ? nb_mul(g, x[wrt]) : NULL;
}
GC(f_conv_backward_dx_relu, conv_relu_grad(x, 0))
GC(f_conv_backward_dw_relu, conv_relu_grad(x, 1))
GC(f_conv_backward_db_relu, conv_relu_grad(x, 2))
GC(f_conv_backward_dx, conv_grad(x, 0, (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1}))
GC(f_conv_backward_dw, conv_grad(x, 1, (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1}))
GC(f_conv_backward_dx_groups, conv_grad(x, 0, (nb_conv2d_opts){{2, 1}, {0, 0}, {1, 2}, 2}))
GC(f_conv_backward_dw_groups, conv_grad(x, 1, (nb_conv2d_opts){{2, 1}, {0, 0}, {1, 2}, 2}))
GC(f_avg_pool, nb_avg_pool2d(x[0], ((nb_window2d){{2, 2}, {2, 2}, {1, 1}, {1, 1}}), false))
GC(f_avg_pool_incl, nb_avg_pool2d(x[0], ((nb_window2d){{3, 2}, {1, 2}, {1, 0}, {1, 1}}), true))

/* linear algebra (O11): well-conditioned matrices from the leaves — x + 4 I (diagonally
 * dominant enough for 3 x 3 normals), x x^T + I (symmetric positive definite) */
static nb_tensor *shifted(nb_tensor *x) {
    int64_t n = nb_shape(x)[nb_ndim(x) - 1];
    return nb_add(x, nb_mul(NBT(nb_eye(n, n, NB_F64)), 4.0));
}
static nb_tensor *spd_of(nb_tensor *x) {
    int64_t n = nb_shape(x)[nb_ndim(x) - 1];
    return nb_add(nb_matmul(x, nb_transpose(x, -2, -1)), NBT(nb_eye(n, n, NB_F64)));
}
GC(f_tril, nb_tril(x[0], 0))
GC(f_triu_k, nb_triu(x[0], -1))
GC(f_diag_vec, nb_diag(x[0], 1))
GC(f_diag_mat, nb_diag(x[0], -1))
GC(f_diag_embed, nb_diag_embed(x[0], -1, 0, 2))
GC(f_trace, nb_trace(x[0]))
GC(f_cholesky, nb_cholesky(spd_of(x[0]), false))
GC(f_cholesky_upper, nb_cholesky(spd_of(x[0]), true))
GC(f_solve, nb_solve(shifted(x[0]), x[1]))
GC(f_solve_vec, nb_solve(shifted(x[0]), x[1]))
GC(f_tri_lower, nb_solve_triangular(shifted(x[0]), x[1], false, false, false))
GC(f_tri_upper_t, nb_solve_triangular(shifted(x[0]), x[1], true, true, false))
GC(f_tri_unit, nb_solve_triangular(x[0], x[1], false, true, true))
static nb_tensor *f_slogdet(nb_tensor *const *x) {
    nb_tensor *s = NULL, *l = NULL;
    return nb_slogdet(shifted(x[0]), &s, &l) == NB_OK ? nb_mul(l, s) : NULL;
}
GC(f_det, nb_det(shifted(x[0])))
GC(f_logdet, nb_logdet(spd_of(x[0])))
GC(f_inv, nb_inv(shifted(x[0])))

/* attention (O9) */
#define ATTN(...) ((nb_attention_opts){__VA_ARGS__})
GC(f_sdpa, nb_scaled_dot_product_attention(x[0], x[1], x[2], ATTN(.mask = NB_ATTN_MASK_NONE)))
GC(f_sdpa_gqa_causal, nb_scaled_dot_product_attention(x[0], x[1], x[2], ATTN(.mask = NB_ATTN_MASK_CAUSAL)))
GC(f_sdpa_sliding_cap, nb_scaled_dot_product_attention(x[0], x[1], x[2],
                                                       ATTN(.mask = NB_ATTN_MASK_SLIDING, .window = 2, .softcap = 1.2)))
static nb_tensor *f_sdpa_padding(nb_tensor *const *x) {
    nb_tensor *len = ints((int64_t[]){3, 1}, NB_SHAPE(2));
    return nb_scaled_dot_product_attention(x[0], x[1], x[2], ATTN(.mask = NB_ATTN_MASK_KEY_PADDING, .mask_tensor = len));
}
GC(f_sdpa_bias, nb_scaled_dot_product_attention(x[0], x[1], x[2],
                                                ATTN(.mask = NB_ATTN_MASK_BIAS, .mask_tensor = ramp(NB_SHAPE(3, 4), -1, 1),
                                                     .scale = 0.7)))
GC(f_sdpa_sliding, nb_scaled_dot_product_attention(x[0], x[1], x[2], ATTN(.mask = NB_ATTN_MASK_SLIDING, .window = 2)))
GC(f_rotary, nb_rotary_embedding(x[0], 3, 100.0, false))
GC(f_rotary_inter, nb_rotary_embedding(x[0], 0, 10000.0, true))

/* ------------------------------------------------------------------------ */
/* The table                                                                */
/* ------------------------------------------------------------------------ */

#define IN(nd, dom, ...) {nd, {__VA_ARGS__}, dom}
#define M34 IN(2, D_ANY, 3, 4)
#define M234 IN(3, D_ANY, 2, 3, 4)
#define U(op, f, dom, second) {op, "[3,4]", f, 1, {IN(2, dom, 3, 4)}, second, 0}

const gc_case CASES[] = {
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
    {"addmm", "[3,4]@[4,5] + [5]", f_addmm, 3, {M34, IN(2, D_ANY, 4, 5), IN(1, D_ANY, 5)}, true, 0},
    {"addmm", "[2,3,4]@[4,5] + [3,1]", f_addmm, 3, {M234, IN(2, D_ANY, 4, 5), IN(2, D_ANY, 3, 1)}, true, 0},
    {"addmm", "[3,4]@[2,4,5] + [2,3,5]", f_addmm, 3, {M34, IN(3, D_ANY, 2, 4, 5), IN(3, D_ANY, 2, 3, 5)}, false, 0},
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
    {"convolution", "eager kernel: 3 images, padding 1, bias", f_convolution, 3, {IN(4, D_ANY, 3, 2, 4, 3), IN(4, D_ANY, 2, 2, 3, 3), IN(1, D_ANY, 2)}, true, 0},
    {"convolution", "eager kernel: 1x1, 2 groups", f_convolution_1x1, 2, {IN(4, D_ANY, 2, 4, 2, 3), IN(4, D_ANY, 4, 2, 1, 1)}, true, 0},
    {"conv2d", "groups, dilation", f_conv2d_groups, 2, {IN(4, D_ANY, 1, 4, 4, 5), IN(4, D_ANY, 2, 2, 2, 2)}, false, 0},
    {"convolution_backward", "dx, padding 1", f_conv_backward_dx, 3, {IN(4, D_ANY, 2, 2, 4, 3), IN(4, D_ANY, 3, 2, 2, 2), IN(4, D_ANY, 2, 3, 5, 4)}, true, 0},
    {"convolution_backward", "dwi, padding 1", f_conv_backward_dw, 3, {IN(4, D_ANY, 2, 2, 4, 3), IN(4, D_ANY, 3, 2, 2, 2), IN(4, D_ANY, 2, 3, 5, 4)}, true, 0},
    {"convolution_backward", "dx, relu fused", f_conv_backward_dx_relu, 3, {IN(4, D_ANY, 2, 2, 4, 3), IN(4, D_ANY, 3, 2, 2, 2), IN(1, D_ANY, 3)}, true, 0},
    {"convolution_backward", "dwi, relu fused", f_conv_backward_dw_relu, 3, {IN(4, D_ANY, 2, 2, 4, 3), IN(4, D_ANY, 3, 2, 2, 2), IN(1, D_ANY, 3)}, true, 0},
    {"convolution_backward", "db, relu fused", f_conv_backward_db_relu, 3, {IN(4, D_ANY, 2, 2, 4, 3), IN(4, D_ANY, 3, 2, 2, 2), IN(1, D_ANY, 3)}, true, 0},
    {"convolution_backward", "dx, 2 groups, stride, dilation", f_conv_backward_dx_groups, 3, {IN(4, D_ANY, 2, 4, 5, 4), IN(4, D_ANY, 4, 2, 2, 2), IN(4, D_ANY, 2, 4, 2, 2)}, false, 0},
    {"convolution_backward", "dwi, 2 groups, stride, dilation", f_conv_backward_dw_groups, 3, {IN(4, D_ANY, 2, 4, 5, 4), IN(4, D_ANY, 4, 2, 2, 2), IN(4, D_ANY, 2, 4, 2, 2)}, false, 0},
    {"conv1d", "dilation, bias", f_conv1d, 3, {IN(3, D_ANY, 2, 2, 7), IN(3, D_ANY, 3, 2, 3), IN(1, D_ANY, 3)}, true, 0},
    {"avg_pool2d", "padding excluded", f_avg_pool, 1, {IN(4, D_ANY, 1, 2, 4, 5)}, false, 0},
    {"avg_pool2d", "padding included", f_avg_pool_incl, 1, {IN(4, D_ANY, 1, 1, 4, 4)}, false, 0},
    /* linear algebra */
    {"tril", "k 0", f_tril, 1, {M234}, true, 0},
    {"triu", "k -1", f_triu_k, 1, {M34}, true, 0},
    {"diag", "vector, k 1", f_diag_vec, 1, {IN(1, D_ANY, 3)}, true, 0},
    {"diag", "matrix, k -1", f_diag_mat, 1, {M34}, true, 0},
    {"diag_embed", "offset -1, dims 0, 2", f_diag_embed, 1, {IN(2, D_ANY, 2, 3)}, true, 0},
    {"trace", "batched", f_trace, 1, {M234}, true, 0},
    {"cholesky", "x x^T + I", f_cholesky, 1, {IN(2, D_ANY, 3, 3)}, true, 0},
    {"cholesky", "upper, batched", f_cholesky_upper, 1, {IN(3, D_ANY, 2, 3, 3)}, false, 0},
    {"solve", "[3,3] B [3,2]", f_solve, 2, {IN(2, D_ANY, 3, 3), IN(2, D_ANY, 3, 2)}, true, 0},
    {"solve", "batch broadcast, vector B", f_solve_vec, 2, {IN(3, D_ANY, 2, 3, 3), IN(1, D_ANY, 3)}, false, 0},
    {"solve_triangular", "lower", f_tri_lower, 2, {IN(2, D_ANY, 3, 3), IN(2, D_ANY, 3, 2)}, true, 0},
    {"solve_triangular", "upper, transposed, batched", f_tri_upper_t, 2, {IN(3, D_ANY, 2, 3, 3), IN(2, D_ANY, 3, 2)}, false, 0},
    {"solve_triangular", "unit diagonal", f_tri_unit, 2, {IN(2, D_ANY, 3, 3), IN(2, D_ANY, 3, 1)}, false, 0},
    {"slogdet", "sign * log|det|", f_slogdet, 1, {IN(3, D_ANY, 2, 3, 3)}, true, 0},
    {"det", "x + 4 I", f_det, 1, {IN(2, D_ANY, 3, 3)}, true, 0},
    {"logdet", "x x^T + I", f_logdet, 1, {IN(2, D_ANY, 3, 3)}, true, 0},
    {"inv", "batched", f_inv, 1, {IN(3, D_ANY, 2, 3, 3)}, true, 0},
    /* attention */
    {"scaled_dot_product_attention", "no mask", f_sdpa, 3,
     {IN(4, D_ANY, 1, 2, 3, 4), IN(4, D_ANY, 1, 2, 4, 4), IN(4, D_ANY, 1, 2, 4, 2)}, true, 0},
    {"scaled_dot_product_attention", "causal, 4 query heads on 2", f_sdpa_gqa_causal, 3,
     {IN(4, D_ANY, 1, 4, 3, 2), IN(4, D_ANY, 1, 2, 3, 2), IN(4, D_ANY, 1, 2, 3, 2)}, true, 0},
    {"scaled_dot_product_attention", "sliding window 2, soft-cap", f_sdpa_sliding_cap, 3,
     {IN(4, D_ANY, 1, 1, 4, 3), IN(4, D_ANY, 1, 1, 4, 3), IN(4, D_ANY, 1, 1, 4, 2)}, false, 0},
    {"scaled_dot_product_attention", "key lengths", f_sdpa_padding, 3,
     {IN(4, D_ANY, 2, 1, 2, 3), IN(4, D_ANY, 2, 1, 3, 3), IN(4, D_ANY, 2, 1, 3, 2)}, false, 0},
    {"scaled_dot_product_attention", "bias, scale", f_sdpa_bias, 3,
     {IN(4, D_ANY, 1, 2, 3, 2), IN(4, D_ANY, 1, 2, 4, 2), IN(4, D_ANY, 1, 2, 4, 2)}, false, 0},
    {"attention", "kernel, GQA, causal, Lq > Lk", f_sdpa_gqa_causal, 3,
     {IN(4, D_ANY, 2, 4, 5, 3), IN(4, D_ANY, 2, 2, 3, 3), IN(4, D_ANY, 2, 2, 3, 2)}, true, 0},
    {"attention", "kernel, sliding window 2", f_sdpa_sliding, 3,
     {IN(4, D_ANY, 1, 2, 5, 4), IN(4, D_ANY, 1, 2, 5, 4), IN(4, D_ANY, 1, 2, 5, 3)}, true, 0},
    {"rotary_embedding", "halves", f_rotary, 1, {IN(3, D_ANY, 2, 3, 4)}, true, 0},
    {"rotary_embedding", "interleaved", f_rotary_inter, 1, {IN(2, D_ANY, 5, 6)}, false, 0},
};
const size_t NCASES = sizeof CASES / sizeof CASES[0];
