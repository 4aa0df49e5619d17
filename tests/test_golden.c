/*
 * test_golden.c — the differential test against PyTorch: replays every case
 * of the tests/golden/ .nbg files (written by gen_golden.py there) with nabla,
 * on the CPU backend and on the reference backend, and compares the forward
 * outputs (values, shapes and dtypes) and the gradients of every float input
 * with torch's.  A golden case without a C entry, a C entry without a golden
 * case, and an input or parameter the C entry ignores all fail the test.
 * The test also walks the op table (ops.def): every op needs golden forward
 * cases, and gradient cases when it is differentiable, unless NO_GOLDEN below
 * names it with the reason.  Zeros in forward outputs are compared with their
 * sign (PyTorch's signed-zero convention).
 * Each case is also replayed traced: the C entry's inputs are symbolic graph
 * inputs, its outputs graph outputs; when the case has gradients, the scalar
 * the eager mode differentiates (sum_k <out_k, seed_k>, seeds as graph
 * inputs) is differentiated in the graph by nb_graph_grad with respect to the
 * inputs that have golden gradients, which become graph outputs too.  The
 * graph is compiled and run on the concrete golden inputs; outputs and
 * gradients are compared like the eager ones, and bitwise with the eager CPU
 * results and the eager tape's gradients (GRAPH_GRAD_DIFFERS names the ops
 * whose graph gradient legitimately runs other kernels, compared tightly).
 * Every case with golden gradients must get its traced gradients (only
 * NOT_TRACED ops, which do not trace at all, are exempt).
 */
#include "golden_reader.h"
#include "support.h"
#include "ops/ops.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NB_GOLDEN_DEFAULT_DIR
#define NB_GOLDEN_DEFAULT_DIR "tests/golden"
#endif

/* Tolerances: |got - want| <= atol + rtol |want| per element. */
#define F64_RTOL 1e-10
#define F64_ATOL 1e-12
#define F32_RTOL 1e-6
#define F32_ATOL 1e-6

enum { MAX_OUT = 16, MAX_LEAVES = 16, MAX_TENSORS = 64, MAX_FILES = 64 };

/* ---- one case being replayed ---------------------------------------------- */

typedef struct gctx {
    const nbg_case *c;
    nb_device dev;               /* inputs are moved here before the op runs */
    bool used[MAX_TENSORS];      /* which golden tensors the C entry read */
    nb_tensor *outs[MAX_OUT];
    int nout;
    nb_tensor *leaves[MAX_LEAVES]; /* host inputs differentiated (grad.NAME exists) */
    const char *leaf_names[MAX_LEAVES];
    int nleaves;
    char problem[512];           /* first mismatch between the C entry and the golden case */
    nb_graph *graph;             /* traced replay: the graph being built (NULL: eager) */
    const char *arg_names[MAX_TENSORS]; /* its inputs: names, concrete run arguments, symbolic tensors */
    nb_tensor *args[MAX_TENSORS], *syms[MAX_TENSORS];
    int nargs;
    nb_tensor *grads[MAX_LEAVES]; /* gradients of the leaves, in their order */
    bool have_grads;              /* grads computed (traced: by the compiled graph) */
} gctx;

static void problem(gctx *g, const char *fmt, const char *arg) {
    if (!g->problem[0]) snprintf(g->problem, sizeof g->problem, fmt, arg);
}

/* The golden tensor "role.name", marked as used; NULL (problem noted unless optional) when absent. */
static const nbg_tensor *lookup(gctx *g, const char *role, const char *name, bool optional) {
    char full[128];
    snprintf(full, sizeof full, "%s.%s", role, name);
    for (int i = 0; i < g->c->ntensors; i++)
        if (!strcmp(g->c->tensors[i].name, full)) {
            g->used[i] = true;
            return &g->c->tensors[i];
        }
    if (!optional) problem(g, "the C entry wants '%s', which the golden case lacks", full);
    return NULL;
}

/* Traced replay: the symbolic graph input `name` standing for golden tensor t (one per
 * name); the concrete tensor is kept (retained past the graph's scope) as the run argument. */
static nb_tensor *traced_input(gctx *g, const nbg_tensor *t, const char *name) {
    for (int i = 0; i < g->nargs; i++)
        if (!strcmp(g->arg_names[i], name)) return g->syms[i];
    nb_tensor *x = nb_retain(nbg_to_tensor(t));
    nb_tensor *s = x ? nb_graph_input(g->graph, name, nb_dtype_of(x), nb_shape(x), nb_ndim(x)) : NULL;
    if (!s) {
        nb_release(x);
        return NULL;
    }
    g->arg_names[g->nargs] = name;
    g->args[g->nargs] = x;
    g->syms[g->nargs++] = s;
    return s;
}

/* Input `name` on the case's device; a tracked host leaf when the case has its gradient.
 * Traced: a symbolic graph input. */
static nb_tensor *input(gctx *g, const char *name, bool optional) {
    const nbg_tensor *t = lookup(g, "in", name, optional);
    if (!t) return NULL;
    nb_tensor *x = g->graph ? traced_input(g, t, t->name + 3) : nbg_to_tensor(t);
    char gname[128];
    snprintf(gname, sizeof gname, "grad.%s", name);
    if (x && nbg_find(g->c, gname) && g->nleaves < MAX_LEAVES) {
        if (!g->graph) assert_int_equal(nb_set_requires_grad(x, true), NB_OK);
        g->leaf_names[g->nleaves] = t->name + 3;
        g->leaves[g->nleaves++] = x; /* traced: the symbolic input the graph gradient is taken for */
    }
    return g->graph ? x : nb_to_device(x, g->dev);
}
static nb_tensor *in(gctx *g, const char *name) { return input(g, name, false); }
static nb_tensor *in_opt(gctx *g, const char *name) { return input(g, name, true); }

/* Inputs op0, op1, … (joins and einsum); returns the count. */
static int in_list(gctx *g, nb_tensor **ts, int max) {
    int n = 0;
    char name[16];
    for (; n < max; n++) {
        snprintf(name, sizeof name, "op%d", n);
        char full[24];
        snprintf(full, sizeof full, "in.%s", name);
        if (!nbg_find(g->c, full)) break;
        ts[n] = in(g, name);
    }
    return n;
}

static double param(gctx *g, const char *name) {
    const nbg_tensor *t = lookup(g, "p", name, false);
    return t && t->numel == 1 ? nbg_at(t, 0) : NAN;
}
static int64_t iparam(gctx *g, const char *name) {
    double v = param(g, name);
    return isnan(v) ? 0 : (int64_t)v;
}

/* Integer list parameter into v (at most max); returns its length, -1 when absent. */
static int list_param(gctx *g, const char *name, int64_t *v, int max, bool optional) {
    const nbg_tensor *t = lookup(g, "p", name, optional);
    if (!t) return -1;
    if (t->numel > max) {
        problem(g, "parameter '%s' is too long", name);
        return -1;
    }
    for (int64_t i = 0; i < t->numel; i++) v[i] = (int64_t)nbg_at(t, i);
    return (int)t->numel;
}

/* The reduction axes: NULL (all axes) when the case has no p.axes. */
static const int *axes_param(gctx *g, int *buf, int *n) {
    int64_t v[NB_MAX_DIMS];
    *n = list_param(g, "axes", v, NB_MAX_DIMS, true);
    if (*n < 0) {
        *n = 0;
        return NULL;
    }
    for (int i = 0; i < *n; i++) buf[i] = (int)v[i];
    return buf;
}

static void out(gctx *g, nb_tensor *t) {
    if (g->nout < MAX_OUT) g->outs[g->nout++] = t;
}

/* ---- the table: golden key -> how nabla computes it ------------------------ */

typedef struct entry entry;
struct entry {
    const char *key;
    void (*run)(gctx *g, const entry *e);
    nb_tensor *(*unary)(nb_tensor *);
    nb_tensor *(*binary)(nb_tensor *, nb_tensor *);
    nb_tensor *(*scalar_f)(nb_tensor *, double);
    nb_tensor *(*scalar_i)(nb_tensor *, int64_t);
    nb_tensor *(*reduce)(nb_tensor *, const int *, int, bool);
    nb_tensor *(*arg_reduce)(nb_tensor *, int, bool);
    nb_tensor *(*moment)(nb_tensor *, const int *, int, int64_t, bool);
    nb_tensor *(*along)(nb_tensor *, int);
    nb_tensor *(*indexed)(nb_tensor *, int, nb_tensor *);
    nb_tensor *(*join)(nb_tensor *const *, int, int);
    nb_tensor *(*loss)(nb_tensor *, nb_tensor *, nb_reduction);
    nb_tensor *(*tri)(nb_tensor *, int64_t);
};

static void run_unary(gctx *g, const entry *e) { out(g, e->unary(in(g, "x"))); }
static void run_binary(gctx *g, const entry *e) { out(g, e->binary(in(g, "a"), in(g, "b"))); }
static void run_scalar_f(gctx *g, const entry *e) { out(g, e->scalar_f(in(g, "x"), param(g, "s"))); }
static void run_scalar_i(gctx *g, const entry *e) { out(g, e->scalar_i(in(g, "x"), iparam(g, "s"))); }

static void run_reduce(gctx *g, const entry *e) {
    int buf[NB_MAX_DIMS], n;
    const int *axes = axes_param(g, buf, &n);
    out(g, e->reduce(in(g, "x"), axes, n, param(g, "keepdim") != 0));
}
static void run_arg_reduce(gctx *g, const entry *e) {
    out(g, e->arg_reduce(in(g, "x"), (int)iparam(g, "axis"), param(g, "keepdim") != 0));
}
static void run_moment(gctx *g, const entry *e) {
    int buf[NB_MAX_DIMS], n;
    const int *axes = axes_param(g, buf, &n);
    out(g, e->moment(in(g, "x"), axes, n, iparam(g, "correction"), param(g, "keepdim") != 0));
}
static void run_norm(gctx *g, const entry *e) {
    int buf[NB_MAX_DIMS], n;
    const int *axes = axes_param(g, buf, &n);
    out(g, nb_norm(in(g, "x"), param(g, "p"), axes, n, param(g, "keepdim") != 0));
}
static void run_along(gctx *g, const entry *e) { out(g, e->along(in(g, "x"), (int)iparam(g, "axis"))); }

static void run_leaky_relu(gctx *g, const entry *e) { out(g, nb_leaky_relu(in(g, "x"), param(g, "slope"))); }
static void run_elu(gctx *g, const entry *e) { out(g, nb_elu(in(g, "x"), param(g, "alpha"))); }
static void run_softplus(gctx *g, const entry *e) {
    out(g, nb_softplus(in(g, "x"), param(g, "beta"), param(g, "threshold")));
}
static void run_clamp(gctx *g, const entry *e) { out(g, nb_clamp(in(g, "x"), param(g, "lo"), param(g, "hi"))); }
static void run_where(gctx *g, const entry *e) { out(g, nb_where(in(g, "cond"), in(g, "a"), in(g, "b"))); }
static void run_masked_fill(gctx *g, const entry *e) {
    out(g, nb_masked_fill(in(g, "x"), in(g, "mask"), param(g, "value")));
}

static void run_addmm(gctx *g, const entry *e) { out(g, nb_addmm(in(g, "c"), in(g, "a"), in(g, "b"))); }
static void run_linear(gctx *g, const entry *e) { out(g, nb_linear(in(g, "x"), in(g, "w"), in_opt(g, "bias"))); }
static void run_einsum(gctx *g, const entry *e) {
    int64_t chars[64];
    char eq[65] = {0};
    int n = list_param(g, "eq", chars, 64, false);
    for (int i = 0; i < n; i++) eq[i] = (char)chars[i];
    nb_tensor *ops[8];
    int nops = in_list(g, ops, 8);
    out(g, nb_einsum(eq, ops, nops));
}

static void run_layer_norm(gctx *g, const entry *e) {
    out(g, nb_layer_norm(in(g, "x"), (int)iparam(g, "nnorm"), in_opt(g, "w"), in_opt(g, "b"), param(g, "eps")));
}
static void run_rms_norm(gctx *g, const entry *e) {
    out(g, nb_rms_norm(in(g, "x"), (int)iparam(g, "nnorm"), in_opt(g, "w"), param(g, "eps")));
}
static void run_cross_entropy(gctx *g, const entry *e) {
    nb_cross_entropy_opts o = {(nb_reduction)iparam(g, "reduction"), iparam(g, "ignore_index"),
                               param(g, "label_smoothing")};
    out(g, nb_cross_entropy(in(g, "logits"), in(g, "target"), o));
}
static void run_nll_loss(gctx *g, const entry *e) {
    out(g, nb_nll_loss(in(g, "logp"), in(g, "target"), (nb_reduction)iparam(g, "reduction"),
                       iparam(g, "ignore_index")));
}
static void run_loss(gctx *g, const entry *e) {
    out(g, e->loss(in(g, "input"), in(g, "target"), (nb_reduction)iparam(g, "reduction")));
}

static void run_indexed(gctx *g, const entry *e) {
    out(g, e->indexed(in(g, "x"), (int)iparam(g, "axis"), in(g, "index")));
}
static void run_scatter_add(gctx *g, const entry *e) {
    out(g, nb_scatter_add(in(g, "x"), (int)iparam(g, "axis"), in(g, "index"), in(g, "src")));
}
static void run_take_along_axis(gctx *g, const entry *e) {
    out(g, nb_take_along_axis(in(g, "x"), in(g, "index"), (int)iparam(g, "axis")));
}
static void run_one_hot(gctx *g, const entry *e) { out(g, nb_one_hot(in(g, "index"), iparam(g, "num_classes"))); }
static void run_embedding(gctx *g, const entry *e) { out(g, nb_embedding(in(g, "weight"), in(g, "index"))); }
static void run_join(gctx *g, const entry *e) {
    nb_tensor *ts[8];
    int n = in_list(g, ts, 8);
    out(g, e->join(ts, n, (int)iparam(g, "axis")));
}

/* Pieces of split/chunk become the case's outputs; a failure becomes one NULL output. */
static void pieces_out(gctx *g, nb_tensor **ps, int n) {
    if (n < 0) out(g, NULL);
    for (int i = 0; i < n && i < MAX_OUT; i++) out(g, ps[i]);
}
static void run_split(gctx *g, const entry *e) {
    nb_tensor *ps[MAX_OUT];
    nb_tensor *x = in(g, "x");
    pieces_out(g, ps, nb_split(x, iparam(g, "split_size"), (int)iparam(g, "axis"), ps, MAX_OUT));
}
static void run_chunk(gctx *g, const entry *e) {
    nb_tensor *ps[MAX_OUT];
    nb_tensor *x = in(g, "x");
    pieces_out(g, ps, nb_chunk(x, (int)iparam(g, "chunks"), (int)iparam(g, "axis"), ps, MAX_OUT));
}
/* ---- layout (T5) and convolution (O8) ---- */

/* An integer list parameter of at most NB_MAX_DIMS entries as int64 (n set to its length). */
static void dims_param(gctx *g, const char *name, int64_t *buf, int *n) {
    *n = list_param(g, name, buf, NB_MAX_DIMS, false);
    if (*n < 0) *n = 0;
}
static void run_reshape(gctx *g, const entry *e) {
    int64_t s[NB_MAX_DIMS];
    int n;
    nb_tensor *x = in(g, "x");
    dims_param(g, "shape", s, &n);
    out(g, nb_reshape(x, s, n));
}
static void run_expand(gctx *g, const entry *e) {
    int64_t s[NB_MAX_DIMS];
    int n;
    nb_tensor *x = in(g, "x");
    dims_param(g, "shape", s, &n);
    out(g, nb_expand(x, s, n));
}
/* x permuted by p.perm; a contiguous copy of that view for the contiguous cases. */
static void run_permute(gctx *g, const entry *e) {
    int64_t v[NB_MAX_DIMS];
    int perm[NB_MAX_DIMS], n;
    dims_param(g, "perm", v, &n);
    for (int i = 0; i < n; i++) perm[i] = (int)v[i];
    nb_tensor *y = nb_permute(in(g, "x"), perm, n);
    out(g, e->unary ? e->unary(y) : y);
}
static void run_slice(gctx *g, const entry *e) {
    out(g, nb_slice(in(g, "x"), (int)iparam(g, "axis"), iparam(g, "start"), iparam(g, "stop"), iparam(g, "step")));
}
static void run_select(gctx *g, const entry *e) {
    out(g, nb_select(in(g, "x"), (int)iparam(g, "axis"), iparam(g, "index")));
}
static void run_tri(gctx *g, const entry *e) { out(g, e->tri(in(g, "x"), iparam(g, "k"))); }
static void run_diag(gctx *g, const entry *e) {
    (void)e;
    out(g, nb_diag(in(g, "x"), iparam(g, "k")));
}
static void run_diag_embed(gctx *g, const entry *e) {
    (void)e;
    out(g, nb_diag_embed(in(g, "x"), iparam(g, "offset"), (int)iparam(g, "dim1"), (int)iparam(g, "dim2")));
}
static void run_cholesky(gctx *g, const entry *e) {
    (void)e;
    out(g, nb_cholesky(in(g, "a"), iparam(g, "upper") != 0));
}
static void run_solve_triangular(gctx *g, const entry *e) {
    (void)e;
    nb_tensor *a = in(g, "a"), *b = in(g, "b");
    out(g, nb_solve_triangular(a, b, iparam(g, "upper") != 0, iparam(g, "transpose") != 0, iparam(g, "unit") != 0));
}
/* torch.linalg.slogdet's (sign, logabsdet), or logabsdet alone (the differentiable one) */
static void run_slogdet(gctx *g, const entry *e) {
    (void)e;
    nb_tensor *s = NULL, *l = NULL;
    bool both = iparam(g, "both") != 0;
    if (nb_slogdet(in(g, "a"), &s, &l) != NB_OK) s = l = NULL;
    if (both) out(g, s);
    out(g, l);
}
static void run_attention(gctx *g, const entry *e) {
    (void)e;
    nb_tensor *q = in(g, "q"), *k = in(g, "k"), *v = in(g, "v"), *m = in_opt(g, "m");
    nb_attention_opts o = {.mask = (nb_attn_mask)iparam(g, "mask"), .window = iparam(g, "window"),
                           .mask_tensor = m, .scale = param(g, "scale"), .softcap = param(g, "softcap")};
    out(g, nb_scaled_dot_product_attention(q, k, v, o));
}
/* O10: the outputs of nb_quantize in order (codes, scales, the NVFP4 global scale) */
static void run_quantize(gctx *g, const entry *e) {
    (void)e;
    nb_quantized q;
    if (nb_quantize(in(g, "x"), (nb_scaled_format)iparam(g, "format"), (nb_scale_layout)iparam(g, "layout"), &q) != NB_OK)
        return;
    out(g, q.codes);
    out(g, q.scales);
    if (q.global_scale) out(g, q.global_scale);
}
/* A low-precision operand from the inputs named prefix codes / scales / global. */
static nb_quantized quantized_in(gctx *g, const char *prefix, const char *format) {
    char n[3][32];
    snprintf(n[0], sizeof n[0], "%scodes", prefix);
    snprintf(n[1], sizeof n[1], "%sscales", prefix);
    snprintf(n[2], sizeof n[2], "%sglobal", prefix);
    return (nb_quantized){in(g, n[0]), in(g, n[1]), in_opt(g, n[2]), (nb_scaled_format)iparam(g, format),
                          (nb_scale_layout)iparam(g, "layout")};
}
static void run_dequantize(gctx *g, const entry *e) {
    (void)e;
    nb_quantized q = quantized_in(g, "", "format");
    out(g, nb_dequantize(&q, NB_F32));
}
static void run_scaled_matmul(gctx *g, const entry *e) {
    (void)e;
    nb_quantized a = quantized_in(g, "a_", "format_a"), b = quantized_in(g, "b_", "format_b");
    out(g, nb_scaled_matmul(&a, &b, NB_F32));
}
static void run_rotary(gctx *g, const entry *e) {
    (void)e;
    out(g, nb_rotary_embedding(in(g, "x"), iparam(g, "offset"), param(g, "base"), iparam(g, "interleaved") != 0));
}
static void run_diagonal(gctx *g, const entry *e) {
    out(g, nb_diagonal(in(g, "x"), iparam(g, "offset"), (int)iparam(g, "a"), (int)iparam(g, "b")));
}
static void run_as_strided(gctx *g, const entry *e) {
    int64_t s[NB_MAX_DIMS], st[NB_MAX_DIMS];
    int n, ns;
    nb_tensor *x = in(g, "x");
    dims_param(g, "shape", s, &n);
    dims_param(g, "strides", st, &ns);
    out(g, ns == n ? nb_as_strided(x, s, st, n, iparam(g, "offset")) : NULL);
}
static void run_cast(gctx *g, const entry *e) { out(g, nb_cast(in(g, "x"), (nb_dtype)iparam(g, "dtype"))); }

/* Two-element list parameter `name` into v. */
static void pair_param(gctx *g, const char *name, int64_t v[2]) {
    int64_t b[NB_MAX_DIMS] = {0};
    if (list_param(g, name, b, NB_MAX_DIMS, false) != 2) problem(g, "parameter '%s' is not a pair", name);
    v[0] = b[0];
    v[1] = b[1];
}
static nb_window2d window_param(gctx *g) {
    nb_window2d w;
    pair_param(g, "kernel", w.kernel);
    pair_param(g, "stride", w.stride);
    pair_param(g, "padding", w.padding);
    pair_param(g, "dilation", w.dilation);
    return w;
}
static void run_conv2d(gctx *g, const entry *e) {
    nb_conv2d_opts o = {.groups = iparam(g, "groups")};
    pair_param(g, "stride", o.stride);
    pair_param(g, "padding", o.padding);
    pair_param(g, "dilation", o.dilation);
    out(g, nb_conv2d(in(g, "x"), in(g, "w"), in_opt(g, "bias"), o));
}
static void run_conv1d(gctx *g, const entry *e) {
    nb_tensor *x = in(g, "x"), *w = in(g, "w"), *b = in_opt(g, "bias");
    out(g, nb_conv1d(x, w, b, iparam(g, "stride"), iparam(g, "padding"), iparam(g, "dilation"), iparam(g, "groups")));
}
static void run_unfold(gctx *g, const entry *e) { out(g, nb_unfold(in(g, "x"), window_param(g))); }
static void run_fold(gctx *g, const entry *e) {
    nb_tensor *c = in(g, "cols");
    out(g, nb_fold(c, iparam(g, "out_h"), iparam(g, "out_w"), window_param(g)));
}
static void run_max_pool2d(gctx *g, const entry *e) { out(g, nb_max_pool2d(in(g, "x"), window_param(g))); }
static void run_avg_pool2d(gctx *g, const entry *e) {
    nb_tensor *x = in(g, "x");
    out(g, nb_avg_pool2d(x, window_param(g), param(g, "count_include_pad") != 0));
}
static void run_max_unpool2d(gctx *g, const entry *e) {
    nb_tensor *x = in(g, "x"), *idx = in(g, "indices");
    out(g, nb_max_unpool2d(x, idx, iparam(g, "out_h"), iparam(g, "out_w")));
}

static void run_pad(gctx *g, const entry *e) {
    int64_t pads[2 * NB_MAX_DIMS];
    int n = list_param(g, "pads", pads, 2 * NB_MAX_DIMS, false);
    out(g, nb_pad(in(g, "x"), pads, n < 0 ? 0 : n, (nb_pad_mode)iparam(g, "mode"), param(g, "value")));
}

#define E(k, fn, ...) {.key = k, .run = fn, __VA_ARGS__},
#define UNARY(n) E(#n, run_unary, .unary = nb_##n)
#define BINARY(n)                                                       \
    E(#n, run_binary, .binary = nb_##n##_t)                             \
    E(#n "_sf", run_scalar_f, .scalar_f = nb_##n##_sf)                  \
    E(#n "_si", run_scalar_i, .scalar_i = nb_##n##_si)
#define REDUCE(n) E(#n, run_reduce, .reduce = nb_##n)

static const entry TABLE[] = {
    /* O1 */
    UNARY(neg) UNARY(abs) UNARY(sign) UNARY(exp) UNARY(expm1) UNARY(log) UNARY(log1p) UNARY(sqrt)
    UNARY(rsqrt) UNARY(square) UNARY(reciprocal) UNARY(sin) UNARY(cos) UNARY(tan) UNARY(tanh)
    UNARY(sigmoid) UNARY(relu) UNARY(silu) UNARY(erf) UNARY(floor) UNARY(ceil) UNARY(round)
    UNARY(logical_not) UNARY(gelu) UNARY(gelu_tanh)
    E("leaky_relu", run_leaky_relu) E("elu", run_elu) E("softplus", run_softplus) E("clamp", run_clamp)
    /* O2, O3 */
    BINARY(add) BINARY(sub) BINARY(mul) BINARY(div) BINARY(pow) BINARY(maximum) BINARY(minimum)
    BINARY(atan2) BINARY(remainder) BINARY(eq) BINARY(ne) BINARY(lt) BINARY(le) BINARY(gt) BINARY(ge)
    BINARY(logical_and) BINARY(logical_or) BINARY(logical_xor) BINARY(fmod)
    E("where", run_where)
    /* O4 */
    REDUCE(sum) REDUCE(mean) REDUCE(prod) REDUCE(max) REDUCE(min) REDUCE(logsumexp)
    E("argmax", run_arg_reduce, .arg_reduce = nb_argmax) E("argmin", run_arg_reduce, .arg_reduce = nb_argmin)
    E("var", run_moment, .moment = nb_var) E("std", run_moment, .moment = nb_std)
    E("norm", run_norm) E("cumsum", run_along, .along = nb_cumsum) E("cumprod", run_along, .along = nb_cumprod)
    /* O5 */
    E("matmul", run_binary, .binary = nb_matmul) E("addmm", run_addmm) E("linear", run_linear) E("einsum", run_einsum)
    /* O6 */
    E("softmax", run_along, .along = nb_softmax) E("log_softmax", run_along, .along = nb_log_softmax)
    E("layer_norm", run_layer_norm) E("rms_norm", run_rms_norm) E("cross_entropy", run_cross_entropy)
    E("nll_loss", run_nll_loss) E("mse_loss", run_loss, .loss = nb_mse_loss)
    E("bce_with_logits", run_loss, .loss = nb_bce_with_logits)
    /* O7 */
    E("index_select", run_indexed, .indexed = nb_index_select) E("gather", run_indexed, .indexed = nb_gather)
    E("scatter_add", run_scatter_add) E("take_along_axis", run_take_along_axis) E("one_hot", run_one_hot)
    E("embedding", run_embedding) E("masked_fill", run_masked_fill) E("cat", run_join, .join = nb_cat)
    E("stack", run_join, .join = nb_stack) E("split", run_split) E("chunk", run_chunk) E("pad", run_pad)
    /* O8 */
    E("conv2d", run_conv2d) E("conv1d", run_conv1d) E("unfold", run_unfold) E("fold", run_fold)
    E("max_pool2d", run_max_pool2d) E("avg_pool2d", run_avg_pool2d) E("max_unpool2d", run_max_unpool2d)
    /* T5 */
    E("reshape", run_reshape) E("expand", run_expand) E("permute", run_permute)
    E("contiguous", run_permute, .unary = nb_contiguous) E("slice", run_slice) E("select", run_select)
    E("diagonal", run_diagonal) E("as_strided", run_as_strided) E("cast", run_cast)
    /* O11 */
    E("tril", run_tri, .tri = nb_tril) E("triu", run_tri, .tri = nb_triu) E("diag", run_diag)
    E("diag_embed", run_diag_embed) E("trace", run_unary, .unary = nb_trace) E("cholesky", run_cholesky)
    E("solve_triangular", run_solve_triangular) E("solve", run_binary, .binary = nb_solve)
    E("slogdet", run_slogdet) E("det", run_unary, .unary = nb_det) E("logdet", run_unary, .unary = nb_logdet)
    E("inv", run_unary, .unary = nb_inv)
    /* O9 */
    E("scaled_dot_product_attention", run_attention) E("rotary_embedding", run_rotary)
    /* O10 */
    E("quantize", run_quantize) E("dequantize", run_dequantize) E("scaled_matmul", run_scaled_matmul)
};
enum { NENTRIES = sizeof TABLE / sizeof TABLE[0] };

/* ---- comparison ------------------------------------------------------------ */

typedef struct stats {
    int cases, failures;
    double worst[2];         /* worst error ratio seen for f32 and f64 (1.0 = at tolerance) */
    char worst_at[2][96];    /* the case where it was seen */
    const char *current;     /* the case being compared */
    double f32_atol;         /* its float32 absolute tolerance (F32_ATOL unless it has tol.atol) */
} stats;

/* "[2, 3]" into buf (192 bytes). */
static const char *shape_str(char *buf, const int64_t *shape, int ndim) {
    int n = snprintf(buf, 192, "[");
    for (int d = 0; d < ndim && n < 160; d++)
        n += snprintf(buf + n, 192 - (size_t)n, d ? ", %lld" : "%lld", (long long)shape[d]);
    snprintf(buf + n, 192 - (size_t)n, "]");
    return buf;
}

/* got's values as a malloc'd row-major array of doubles (NULL with a nabla error). */
static double *host_values(nb_tensor *got) {
    nb_tensor *d = nb_contiguous(nb_cast(nb_detach(got), NB_F64));
    if (!d) return NULL;
    int64_t n = nb_numel(d);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (v && nb_copy_to_host(d, v, sizeof(double) * (size_t)n) != NB_OK) {
        free(v);
        v = NULL;
    }
    return v;
}

/* Compare one tensor; returns NULL when it matches, else a reason written into why.  With
 * signed_zero a float zero must also have torch's sign (forward outputs; gradients of zero
 * carry no convention). */
static const char *compare(nb_tensor *got, const nbg_tensor *want, bool signed_zero, stats *st, char *why,
                           size_t len) {
    if (!got) {
        snprintf(why, len, "nabla failed: %s: %s", nb_status_name(nb_last_status()), nb_last_message());
        return why;
    }
    if (nb_dtype_of(got) != want->dtype) {
        snprintf(why, len, "dtype %s, torch gives %s", nb_dtype_name(nb_dtype_of(got)), nb_dtype_name(want->dtype));
        return why;
    }
    bool same = nb_ndim(got) == want->ndim;
    for (int d = 0; same && d < want->ndim; d++) same = nb_shape(got)[d] == want->shape[d];
    if (!same) {
        char gs[192], ws[192];
        snprintf(why, len, "shape %s, torch gives %s", shape_str(gs, nb_shape(got), nb_ndim(got)),
                 shape_str(ws, want->shape, want->ndim));
        return why;
    }
    double *v = host_values(got);
    if (!v) {
        snprintf(why, len, "reading the result failed: %s", nb_last_message());
        return why;
    }
    bool is64 = want->dtype == NB_F64, isf = is64 || want->dtype == NB_F32;
    double rtol = is64 ? F64_RTOL : isf ? F32_RTOL : 0, atol = is64 ? F64_ATOL : isf ? st->f32_atol : 0;
    const char *bad = NULL;
    for (int64_t i = 0; i < want->numel && !bad; i++) {
        double a = v[i], b = nbg_at(want, i);
        bool ok = isnan(b) ? isnan(a) : isinf(b) ? a == b : fabs(a - b) <= atol + rtol * fabs(b);
        ok = ok && !(signed_zero && isf && b == 0 && a == 0 && signbit(a) != signbit(b));
        if (!ok) {
            snprintf(why, len, "element %lld: nabla %.17g, torch %.17g", (long long)i, a, b);
            bad = why;
        } else if (isf && isfinite(b)) {
            double r = fabs(a - b) / (atol + rtol * fabs(b));
            if (r > st->worst[is64]) {
                st->worst[is64] = r;
                snprintf(st->worst_at[is64], sizeof st->worst_at[is64], "%s", st->current);
            }
        }
    }
    free(v);
    return bad;
}

/* d(sum_k <out_k, seed_k>)/d(leaves) into grads; NB_OK or the failing status. */
static nb_status gradients(gctx *g, nb_tensor **grads) {
    char name[16];
    nb_tensor *seeds[MAX_OUT];
    for (int k = 0; k < g->nout; k++) {
        snprintf(name, sizeof name, "%d", k);
        const nbg_tensor *s = lookup(g, "seed", name, false);
        seeds[k] = s ? nb_to_device(nbg_to_tensor(s), g->dev) : NULL;
        if (!s) return NB_ERR_ARG;
    }
    if (g->nout == 1) return nb_autograd_grad(g->outs[0], seeds[0], g->leaves, g->nleaves, false, grads);
    nb_tensor *total = NULL;
    for (int k = 0; k < g->nout; k++) {
        nb_tensor *part = nb_sum(nb_mul(g->outs[k], seeds[k]), NULL, 0, false);
        total = total ? nb_add(total, part) : part;
    }
    return nb_autograd_grad(total, NULL, g->leaves, g->nleaves, false, grads);
}

static int count_role(const nbg_case *c, const char *prefix) {
    int n = 0;
    for (int i = 0; i < c->ntensors; i++) n += !strncmp(c->tensors[i].name, prefix, strlen(prefix));
    return n;
}

/* Compare outputs and (with grads) gradients of a case that ran; returns the first failure or NULL. */
static const char *check_case(gctx *g, bool with_grads, stats *st, char *why, size_t len) {
    const nbg_tensor *tol = lookup(g, "tol", "atol", true);
    st->f32_atol = tol ? nbg_at(tol, 0) : F32_ATOL;
    int nwant = count_role(g->c, "out.");
    if (g->nout != nwant) {
        snprintf(why, len, "%d outputs, torch gives %d", g->nout, nwant);
        return why;
    }
    char name[16];
    for (int k = 0; k < g->nout; k++) {
        snprintf(name, sizeof name, "%d", k);
        const nbg_tensor *w = lookup(g, "out", name, false);
        const char *r = w ? compare(g->outs[k], w, true, st, why, len) : "missing output";
        if (r) return r;
    }
    if (!with_grads) return NULL;
    if (g->nleaves != count_role(g->c, "grad.")) {
        snprintf(why, len, "%d differentiated inputs, the golden case has %d gradients", g->nleaves,
                 count_role(g->c, "grad."));
        return why;
    }
    if (!g->nleaves) return NULL;
    if (!g->have_grads && gradients(g, g->grads) != NB_OK) {
        snprintf(why, len, "backward failed: %s", nb_last_message());
        return why;
    }
    g->have_grads = true;
    for (int i = 0; i < g->nleaves; i++) {
        const nbg_tensor *w = lookup(g, "grad", g->leaf_names[i], false);
        const char *r = w ? compare(g->grads[i], w, false, st, why, len) : "missing gradient";
        if (r) {
            size_t used = strlen(why);
            snprintf(why + used, len - used, " (gradient of %s)", g->leaf_names[i]);
            return why;
        }
    }
    return NULL;
}

/* A golden tensor the C entry did not read (outputs, gradients and, forward only, seeds aside). */
static void check_all_used(gctx *g, bool grads) {
    for (int i = 0; i < g->c->ntensors && !g->problem[0]; i++) {
        const char *nm = g->c->tensors[i].name;
        if (!g->used[i] && strncmp(nm, "out.", 4) && strncmp(nm, "grad.", 5) && (grads || strncmp(nm, "seed.", 5)))
            problem(g, "golden tensor '%s' is not used by the C entry", nm);
    }
}

static void run_case(const nbg_case *c, const entry *e, nb_device dev, stats *st) {
    gctx g = {.c = c, .dev = dev};
    char why[640] = {0};
    const char *fail_reason = NULL;
    if (c->ntensors > MAX_TENSORS) {
        fail_reason = "too many tensors";
    } else {
        st->current = c->name;
        nb_clear_error();
        nb_scope_begin();
        e->run(&g, e);
        fail_reason = check_case(&g, true, st, why, sizeof why);
        if (!fail_reason) check_all_used(&g, true);
        if (g.problem[0]) fail_reason = g.problem;
        nb_scope_end();
    }
    st->cases++;
    if (fail_reason) {
        st->failures++;
        fprintf(stderr, "FAIL %s [%s]: %s\n", c->name, dev.type == NB_DEVICE_REF ? "ref" : "cpu", fail_reason);
    }
}

/* Graph gradients compared with the eager tape's to a tight tolerance instead of bitwise,
 * each with the reason its graph form runs other kernels (ops differentiated through
 * these inherit it: the key is the golden entry). */
static const struct {
    const char *op, *why;
} GRAPH_GRAD_DIFFERS[] = {
    {"cumprod", "traced, the rule cannot count zeros in data and takes the O(L^2) pairs form wherever the axis is "
                "static (vjp_reduce.c); the tape without create_graph takes the O(L) form (divisions, masked zeros)"},
    {"scaled_dot_product_attention", "the tape without create_graph runs the tiled attention_backward kernel (tiles of "
                                     "queries and keys, float sums in its own order); traced, the rule is written with "
                                     "public ops (vjp_attention.c)"},
};

static bool graph_grad_differs(const char *key) {
    for (size_t k = 0; k < sizeof GRAPH_GRAD_DIFFERS / sizeof GRAPH_GRAD_DIFFERS[0]; k++)
        if (!strcmp(GRAPH_GRAD_DIFFERS[k].op, key)) return true;
    return false;
}

/* The tight tolerance of GRAPH_GRAD_DIFFERS, relative to the largest magnitude of the eager
 * gradient: the rounding of another evaluation order, tens of ulps at most (the cumprod
 * cases differ by under 5). */
#define GRAPH_F64_RTOL 1e-14
#define GRAPH_F32_RTOL 1e-5

/* Why tensor got differs from want (NULL: it does not): bitwise, or with rtol > 0 within
 * rtol * max|want| per element. */
static const char *tensor_diff(nb_tensor *got, nb_tensor *want, double rtol) {
    bool same = got && want && nb_dtype_of(got) == nb_dtype_of(want) && nb_ndim(got) == nb_ndim(want);
    for (int d = 0; same && d < nb_ndim(got); d++) same = nb_shape(got)[d] == nb_shape(want)[d];
    if (!same) return "dtype or shape";
    if (rtol > 0) {
        double *a = host_values(got), *b = host_values(want), scale = 0;
        for (int64_t i = 0; a && b && i < nb_numel(want); i++) scale = fmax(scale, fabs(b[i]));
        for (int64_t i = 0; a && b && same && i < nb_numel(want); i++)
            same = isnan(b[i]) ? isnan(a[i]) : isinf(b[i]) ? a[i] == b[i] : fabs(a[i] - b[i]) <= rtol * scale;
        same = same && a && b;
        free(a);
        free(b);
        return same ? NULL : "values beyond the tight tolerance";
    }
    size_t nbytes = (size_t)nb_numel(want) * nb_dtype_size(nb_dtype_of(want));
    char *a = malloc(nbytes + 1), *b = malloc(nbytes + 1);
    same = a && b && nb_copy_to_host(got, a, nbytes) == NB_OK && nb_copy_to_host(want, b, nbytes) == NB_OK &&
           !memcmp(a, b, nbytes);
    free(a);
    free(b);
    return same ? NULL : "bits";
}

/* Why the traced outputs differ bitwise from the eager CPU ones, or the traced gradients
 * from the eager tape's (bitwise, or tightly for GRAPH_GRAD_DIFFERS); NULL: they do not. */
static const char *eager_diff(const gctx *g, const gctx *eager, const char *key, char *why, size_t len) {
    for (int k = 0; k < g->nout && k < eager->nout; k++) {
        const char *r = tensor_diff(g->outs[k], eager->outs[k], 0);
        if (r) {
            snprintf(why, len, "traced output %d differs from the eager CPU result (%s)", k, r);
            return why;
        }
    }
    if (!g->have_grads) return NULL;
    if (!eager->have_grads || eager->nleaves != g->nleaves) {
        snprintf(why, len, "the eager tape's gradients failed: %s", nb_last_message());
        return why;
    }
    bool tight = graph_grad_differs(key);
    for (int i = 0; i < g->nleaves; i++) {
        bool f64 = nb_dtype_of(eager->grads[i]) == NB_F64;
        const char *r = tensor_diff(g->grads[i], eager->grads[i], !tight ? 0 : f64 ? GRAPH_F64_RTOL : GRAPH_F32_RTOL);
        if (r) {
            snprintf(why, len, "graph gradient of %s differs from the eager tape's (%s)", g->leaf_names[i], r);
            return why;
        }
    }
    return NULL;
}

/* Traced, after the forward outputs: the scalar the eager mode differentiates (gradients()),
 * sum_k sum(out_k * seed_k) with the seeds as graph inputs "seed.K" — for one output the
 * tape seeds out_0 with seed_0 directly, and d/d out_0 of sum(out_0 * seed_0) is
 * ones * seed_0, the same bits — differentiated by nb_graph_grad with respect to the
 * leaves; the gradients become graph outputs "grad.NAME" after the forward ones. */
static nb_status trace_gradients(gctx *g) {
    nb_tensor *total = NULL;
    char name[16];
    for (int k = 0; k < g->nout; k++) {
        snprintf(name, sizeof name, "%d", k);
        const nbg_tensor *s = lookup(g, "seed", name, false);
        nb_tensor *seed = s ? traced_input(g, s, s->name) : NULL;
        if (!seed) return s ? nb_last_status() : NB_ERR_ARG;
        nb_tensor *part = nb_sum(nb_mul(g->outs[k], seed), NULL, 0, false);
        total = total ? nb_add(total, part) : part;
    }
    nb_status st = total ? nb_graph_grad(total, g->nleaves, g->leaves, g->grads) : nb_last_status();
    for (int i = 0; i < g->nleaves && st == NB_OK; i++) {
        char gname[128];
        snprintf(gname, sizeof gname, "grad.%s", g->leaf_names[i]);
        st = nb_graph_output(g->graph, gname, g->grads[i]);
    }
    return st;
}

/* Trace the C entry into a graph (golden inputs as graph inputs) with the gradients of the
 * case's leaves (trace_gradients), compile it, run it on the golden inputs; NULL on success
 * with the results in g->outs and g->grads, else the reason. */
static const char *trace_compile_run(gctx *g, const entry *e, char *why, size_t len) {
    g->graph = nb_graph_begin(g->c->name);
    if (!g->graph) return "graph_begin failed";
    e->run(g, e);
    nb_status st = NB_OK;
    for (int k = 0; k < g->nout && st == NB_OK; k++) {
        char name[16];
        snprintf(name, sizeof name, "%d", k);
        st = g->outs[k] ? nb_graph_output(g->graph, name, g->outs[k]) : nb_last_status();
    }
    if (st != NB_OK) /* the tracing error, before graph_end's own */
        snprintf(why, len, "tracing failed: %s: %s", nb_status_name(nb_last_status()), nb_last_message());
    bool grads = st == NB_OK && g->nleaves > 0;
    if (grads && (st = trace_gradients(g)) != NB_OK)
        snprintf(why, len, "graph grad failed: %s: %s", nb_status_name(nb_last_status()), nb_last_message());
    nb_status se = nb_graph_end(g->graph);
    const char *stage = st != NB_OK ? "tracing" : se != NB_OK ? "graph_end" : "compiling";
    nb_compiled *cp = st == NB_OK && se == NB_OK ? nb_graph_compile(g->graph, NB_CPU) : NULL;
    nb_tensor *res[MAX_OUT + MAX_LEAVES] = {0};
    int nres = g->nout + (grads ? g->nleaves : 0);
    if (cp) {
        stage = "running";
        st = nb_compiled_run(cp, g->nargs, g->arg_names, g->args, nres, res);
    }
    nb_compiled_release(cp);
    nb_graph_release(g->graph);
    g->graph = NULL;
    for (int i = 0; i < g->nargs; i++) nb_release(g->args[i]);
    if (!cp || st != NB_OK) {
        g->nout = 0;
        if (strcmp(stage, "tracing"))
            snprintf(why, len, "%s failed: %s: %s", stage, nb_status_name(nb_last_status()), nb_last_message());
        return why;
    }
    memcpy(g->outs, res, sizeof(nb_tensor *) * (size_t)g->nout);
    memcpy(g->grads, res + g->nout, sizeof(nb_tensor *) * (size_t)(nres - g->nout));
    g->have_grads = grads;
    return NULL;
}

/* Ops that do not trace, each with the reason: their traced replay must fail with
 * NB_ERR_UNSUPPORTED naming the op (so the list cannot hide a regression). */
static const struct {
    const char *op, *why;
} NOT_TRACED[] = {
    {"as_strided", "it views the input's storage, which a graph value does not have"},
};

static bool not_traced(const char *key) {
    for (size_t k = 0; k < sizeof NOT_TRACED / sizeof NOT_TRACED[0]; k++)
        if (!strcmp(NOT_TRACED[k].op, key)) return true;
    return false;
}

/* The traced replay of a case on the CPU: outputs and gradients against the goldens as in
 * the eager mode, and against the eager CPU results and tape gradients (eager_diff).
 * Returns whether the case's golden gradients were checked traced. */
static bool run_case_traced(const nbg_case *c, const entry *e, stats *st) {
    gctx g = {.c = c, .dev = NB_CPU}, eager = {.c = c, .dev = NB_CPU};
    char why[640] = {0};
    const char *fail_reason = NULL;
    if (c->ntensors > MAX_TENSORS) {
        fail_reason = "too many tensors";
    } else {
        st->current = c->name;
        nb_clear_error();
        nb_scope_begin();
        e->run(&eager, e);
        eager.have_grads = eager.nleaves > 0 && gradients(&eager, eager.grads) == NB_OK;
        fail_reason = trace_compile_run(&g, e, why, sizeof why);
        if (not_traced(e->key)) {
            bool refused = fail_reason && strstr(why, "NB_ERR_UNSUPPORTED") && strstr(why, e->key);
            fail_reason = refused ? NULL : "an op listed in NOT_TRACED did not fail with NB_ERR_UNSUPPORTED";
            g.problem[0] = 0;
            g.nout = 0;
        } else if (!fail_reason && count_role(c, "grad.") && !g.have_grads) {
            fail_reason = "the case has golden gradients but the traced replay took none";
        }
        if (!fail_reason && g.nout) fail_reason = check_case(&g, g.have_grads, st, why, sizeof why);
        if (!fail_reason && eager.nout == g.nout) fail_reason = eager_diff(&g, &eager, e->key, why, sizeof why);
        if (!fail_reason) check_all_used(&g, g.have_grads);
        if (g.problem[0]) fail_reason = g.problem;
        nb_scope_end();
    }
    st->cases++;
    if (fail_reason) {
        st->failures++;
        fprintf(stderr, "FAIL %s [traced]: %s\n", c->name, fail_reason);
    }
    return !fail_reason && g.have_grads;
}

/* The entry of case c; counts the hit, and the gradient hit when c has a grad.* tensor. */
static const entry *find_entry(const nbg_case *c, int *hits, int *grad_hits) {
    size_t klen = strcspn(c->name, "/");
    for (int i = 0; i < NENTRIES; i++)
        if (strlen(TABLE[i].key) == klen && !strncmp(TABLE[i].key, c->name, klen)) {
            hits[i]++;
            grad_hits[i] += count_role(c, "grad.") > 0;
            return &TABLE[i];
        }
    return NULL;
}

/* Ops of ops.def without golden cases, each with the reason.  Nothing else may be missing. */
static const struct {
    const char *op, *why;
} NO_GOLDEN[] = {
    {"view_grad", "internal adjoint of a view (no torch op); reached by every view's golden gradient"},
    {"to_device", "moves between nabla's CPU and reference devices, which torch lacks; every case runs on both"},
    {"dropout", "its mask comes from nabla's generator, not torch's; test_nn_ops checks its statistics"},
    {"detach", "stop-gradient view (torch.Tensor.detach has no values of its own); test_graph_grad checks it stops gradients"},
    {"numel", "internal element count of symbolic dims (no torch op); test_dispatch_reduce checks it"},
    {"rand", "draws come from nabla's generator, not torch's; test_tensor checks them"},
    {"randn", "draws come from nabla's generator, not torch's; test_tensor checks them"},
    {"bernoulli", "draws come from nabla's generator, not torch's; test_nn_ops checks dropout's statistics"},
    {"attention", "the kernel scaled_dot_product_attention runs for its unmasked, causal and sliding-window cases, "
                  "whose golden cases reach it"},
    {"attention_backward", "the kernel of attention's eager gradient: the golden gradients of those cases reach it"},
    {"convolution", "the kernel conv2d runs eagerly (f32, f64 on the CPU): conv2d's golden cases reach it, and their "
                    "traced replays (the composite) must match it bitwise"},
    {"convolution_backward", "the kernel of convolution's eager gradient: conv2d's golden gradients reach it"},
};
enum { NNO_GOLDEN = sizeof NO_GOLDEN / sizeof NO_GOLDEN[0] };

static const char *no_golden_reason(const char *op) {
    for (int k = 0; k < NNO_GOLDEN; k++)
        if (!strcmp(NO_GOLDEN[k].op, op)) return NO_GOLDEN[k].why;
    return NULL;
}

/* Walk the op table: every op has forward golden cases (and gradient cases, checked eagerly
 * and traced, when it is differentiable) or a NO_GOLDEN reason, and NO_GOLDEN names only real
 * ops without cases.  Returns the number of problems. */
static int check_op_coverage(const int *hits, const int *grad_hits, const int *traced_grad_hits) {
    int bad = 0;
    for (int op = 0; op < nb_op_count(); op++) {
        const char *name = nb_op_name(op), *why = no_golden_reason(name);
        int fwd = 0, grad = 0, traced_grad = 0;
        for (int i = 0; i < NENTRIES; i++)
            if (!strcmp(TABLE[i].key, name)) fwd += hits[i], grad += grad_hits[i], traced_grad += traced_grad_hits[i];
        bool needs_grad = nb__ops[op].grad != NB_GRAD_NONE;
        if (why && fwd) {
            fprintf(stderr, "FAIL op '%s' has golden cases but is listed in NO_GOLDEN (%s)\n", name, why);
            bad++;
        } else if (!why && !fwd) {
            fprintf(stderr, "FAIL op '%s' of ops.def has no golden case (add one to gen_golden.py or to NO_GOLDEN)\n",
                    name);
            bad++;
        } else if (!why && needs_grad && !grad) {
            fprintf(stderr, "FAIL op '%s' is differentiable but no golden case checks its gradient\n", name);
            bad++;
        } else if (!why && needs_grad && !not_traced(name) && !traced_grad) {
            fprintf(stderr, "FAIL op '%s' is differentiable but no golden case checks its graph gradient\n", name);
            bad++;
        }
    }
    for (int k = 0; k < NNO_GOLDEN; k++) {
        bool known = false;
        for (int op = 0; op < nb_op_count() && !known; op++) known = !strcmp(nb_op_name(op), NO_GOLDEN[k].op);
        if (!known) {
            fprintf(stderr, "FAIL NO_GOLDEN names '%s', which is not in ops.def\n", NO_GOLDEN[k].op);
            bad++;
        }
    }
    return bad;
}

/* ---- the golden folder ----------------------------------------------------- */

static const char *golden_dir(void) {
    const char *d = getenv("NB_GOLDEN_DIR");
    return d && *d ? d : NB_GOLDEN_DEFAULT_DIR;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted paths of the *.nbg files (malloc'd); returns the count. */
static int list_golden(char **paths, int max) {
    DIR *dir = opendir(golden_dir());
    if (!dir) return 0;
    int n = 0;
    for (struct dirent *de; (de = readdir(dir)) && n < max;) {
        size_t l = strlen(de->d_name);
        if (l < 5 || strcmp(de->d_name + l - 4, ".nbg")) continue;
        size_t sz = strlen(golden_dir()) + l + 2;
        paths[n] = malloc(sz);
        snprintf(paths[n++], sz, "%s/%s", golden_dir(), de->d_name);
    }
    closedir(dir);
    qsort(paths, (size_t)n, sizeof *paths, cmp_str);
    return n;
}

static void golden_cases_match_torch(void **state) {
    (void)state;
    char *paths[MAX_FILES];
    int nfiles = list_golden(paths, MAX_FILES);
    if (!nfiles) fprintf(stderr, "no *.nbg files in %s (set NB_GOLDEN_DIR)\n", golden_dir());
    assert_true(nfiles > 0);
    stats st = {0};
    int hits[NENTRIES] = {0}, grad_hits[NENTRIES] = {0}, traced_grad_hits[NENTRIES] = {0}, missing = 0;
    for (int f = 0; f < nfiles; f++) {
        nbg_file gf;
        char err[256];
        if (nbg_load(paths[f], &gf, err, sizeof err)) {
            fprintf(stderr, "FAIL %s: %s\n", paths[f], err);
            st.failures++;
        }
        for (int i = 0; i < gf.ncases; i++) {
            const entry *e = find_entry(&gf.cases[i], hits, grad_hits);
            if (!e) {
                fprintf(stderr, "FAIL %s: golden case without a C entry\n", gf.cases[i].name);
                missing++;
                continue;
            }
            run_case(&gf.cases[i], e, NB_CPU, &st);
            run_case(&gf.cases[i], e, NB_REF, &st);
            traced_grad_hits[e - TABLE] += run_case_traced(&gf.cases[i], e, &st);
        }
        nbg_free(&gf);
        free(paths[f]);
    }
    for (int i = 0; i < NENTRIES; i++) {
        if (!hits[i]) {
            fprintf(stderr, "FAIL C entry '%s' has no golden case\n", TABLE[i].key);
            missing++;
        }
        if (traced_grad_hits[i] != (not_traced(TABLE[i].key) ? 0 : grad_hits[i])) {
            fprintf(stderr, "FAIL C entry '%s': %d of its %d gradient cases checked traced\n", TABLE[i].key,
                    traced_grad_hits[i], grad_hits[i]);
            missing++;
        }
    }
    missing += check_op_coverage(hits, grad_hits, traced_grad_hits);
    int ntraced_grads = 0;
    for (int i = 0; i < NENTRIES; i++) ntraced_grads += traced_grad_hits[i];
    printf("golden: %d files, %d case runs (%d with graph gradients), %d failures, %d unmatched\n", nfiles, st.cases,
           ntraced_grads, st.failures, missing);
    printf("golden: worst error/tolerance f32 %.3g (%s), f64 %.3g (%s)\n", st.worst[0], st.worst_at[0], st.worst[1],
           st.worst_at[1]);
    assert_int_equal(st.failures, 0);
    assert_int_equal(missing, 0);
}

/* The whole file at path (malloc'd) and its size; NULL when unreadable. */
static unsigned char *read_all(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    unsigned char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n > 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    *size = n > 0 ? (size_t)n : 0;
    return buf;
}

/* The reader rejects truncations and a bad magic without crashing or leaking. */
static void reader_rejects_damage(void **state) {
    (void)state;
    char *paths[MAX_FILES];
    int nfiles = list_golden(paths, MAX_FILES);
    assert_true(nfiles > 0);
    size_t size = 0;
    unsigned char *buf = read_all(paths[0], &size);
    for (int i = 0; i < nfiles; i++) free(paths[i]);
    assert_non_null(buf);
    nbg_file gf;
    char err[256];
    assert_int_equal(nbg_parse(buf, size, &gf, err, sizeof err), 0);
    assert_true(gf.ncases > 0);
    nbg_free(&gf);
    for (size_t cut = 0; cut < size; cut += 1 + cut / 64) { /* every prefix up to 64 bytes, then sparser */
        assert_int_equal(nbg_parse(buf, cut, &gf, err, sizeof err), -1);
        assert_true(err[0] != '\0');
        assert_int_equal(gf.ncases, 0);
    }
    buf[0] = 'X';
    assert_int_equal(nbg_parse(buf, size, &gf, err, sizeof err), -1);
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_cases_match_torch),
        cmocka_unit_test(reader_rejects_damage),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
