/*
 * test_oom.c — out of memory, after SQLite's malloc fault injection: an
 * allocator (nb_set_allocator) fails the k-th allocation (and, in a second
 * pass, every allocation from the k-th on) for every k a workload makes.  Each
 * run must return NB_ERR_OOM (or succeed, the failed allocation having been
 * optional) and give every block back; a clean run right after must give the
 * results of a run before any fault.  Workloads: one training step of an MLP
 * (Sequential of Linear/ReLU, cross-entropy, backward, Adam), a
 * create_graph double backward, a safetensors load and a safetensors save.
 */
#include "support.h"

#include <glob.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the fault-injecting allocator ---- */

typedef struct fault {
    long calls;     /* allocation requests (nsize > 0) since the run began */
    long fail_at;   /* the first request to refuse; 0: none */
    bool sticky;    /* refuse every request from fail_at on, not just that one */
    long refused;
    long live;      /* blocks handed out and not yet freed */
    size_t bytes;   /* bytes of the live blocks */
    long foreign;   /* requests from another thread than the test's */
    pthread_t owner;
} fault;

static void *fault_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    fault *f = ud;
    if (!pthread_equal(pthread_self(), f->owner)) f->foreign++;
    if (nsize == 0) {
        f->live--;
        f->bytes -= osize;
        free(ptr);
        return NULL;
    }
    f->calls++;
    if (f->fail_at > 0 && (f->calls == f->fail_at || (f->sticky && f->calls > f->fail_at))) {
        f->refused++;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p) {
        f->live += ptr ? 0 : 1;
        f->bytes += nsize - (ptr ? osize : 0);
    }
    return p;
}

static fault F;

static void install(void) {
    memset(&F, 0, sizeof F);
    F.owner = pthread_self();
    assert_int_equal(nb_set_allocator(fault_alloc, &F), NB_OK);
}

static void uninstall(void) { assert_int_equal(nb_set_allocator(NULL, NULL), NB_OK); }

/* ---- workloads: each fills out[0 … *nout) and returns its status ---- */

#define MAXOUT 192
typedef nb_status (*workload)(double *out, int *nout);

static nb_status status_of(const void *p) { return p ? NB_OK : nb_last_status(); }

static void put_f32(double *out, int *nout, nb_tensor *t) {
    const float *v = nb_data_ptr(t);
    for (int64_t i = 0; i < nb_numel(t) && *nout < MAXOUT; i++) out[(*nout)++] = v[i];
}

static void put_f64(double *out, int *nout, nb_tensor *t) {
    const double *v = nb_data_ptr(t);
    for (int64_t i = 0; i < nb_numel(t) && *nout < MAXOUT; i++) out[(*nout)++] = v[i];
}

static nb_status add_layer(nb_module *seq, const char *name, nb_module *layer) {
    return layer ? nb_sequential_add(seq, name, layer) : nb_last_status();
}

/* Sequential(Linear(4, 8), ReLU, Linear(8, 3)) seeded, one Adam step on cross_entropy of 5 samples;
 * out: the loss, then every parameter after the step. */
static nb_status train_step(double *out, int *nout) {
    static const float X[5][4] = {{0.5f, -1, 2, 0}, {1, 1, -0.5f, 0.25f}, {-2, 0.5f, 0, 1},
                                  {0.1f, 0.2f, 0.3f, 0.4f}, {-1, -1, 1, 1}};
    static const int64_t Y[5] = {0, 2, 1, 2, 0};
    *nout = 0;
    nb_manual_seed(1234);
    nb_module *net = nb_nn_sequential();
    nb_optimizer *opt = NULL;
    nb_status st = status_of(net);
    nb_scope_begin();
    if (st == NB_OK) st = add_layer(net, "fc1", nb_nn_linear(4, 8, true));
    if (st == NB_OK) st = add_layer(net, "act", nb_nn_relu());
    if (st == NB_OK) st = add_layer(net, "fc2", nb_nn_linear(8, 3, true));
    nb_tensor *params[4];
    int np = st == NB_OK ? nb_module_params(net, params, 4) : 0;
    if (np < 0) st = nb_last_status();
    if (st == NB_OK) st = status_of(opt = nb_optim_adam(params, np, NB_ADAM_DEFAULTS));
    nb_tensor *loss = NULL;
    if (st == NB_OK) {
        nb_tensor *x = nb_from_data(X, NB_SHAPE(5, 4), NB_F32), *y = nb_from_data(Y, NB_SHAPE(5), NB_I64);
        st = status_of(loss = nb_cross_entropy(nb_module_forward(net, x), y, NB_CROSS_ENTROPY_DEFAULTS));
    }
    if (st == NB_OK) st = nb_backward(loss, NULL, false);
    if (st == NB_OK) st = nb_optim_step(opt);
    if (st == NB_OK) st = nb_item(loss, &out[(*nout)++]);
    for (int i = 0; st == NB_OK && i < np; i++) put_f32(out, nout, params[i]);
    nb_scope_end();
    nb_optim_free(opt);
    nb_module_free(net);
    return st;
}

/* y = sum(tanh(x) x²); g = dy/dx with create_graph; z = sum(g²); out: g, then dz/dx. */
static const double XG[3] = {0.5, -1.25, 2.0};
static nb_status double_backward(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_tensor *x = nb_from_data(XG, NB_SHAPE(3), NB_F64), *g = NULL;
    nb_status st = x ? nb_set_requires_grad(x, true) : nb_last_status();
    nb_tensor *y = st == NB_OK ? nb_sum(nb_mul(nb_tanh(x), nb_mul(x, x)), NULL, 0, false) : NULL;
    if (st == NB_OK) st = status_of(y);
    if (st == NB_OK) st = nb_autograd_grad(y, NULL, &x, 1, true, &g);
    nb_tensor *z = st == NB_OK ? nb_sum(nb_mul(g, g), NULL, 0, false) : NULL;
    if (st == NB_OK) st = status_of(z);
    if (st == NB_OK) st = nb_backward(z, NULL, false);
    nb_tensor *gx = st == NB_OK ? nb_grad(x) : NULL;
    if (st == NB_OK) st = status_of(gx);
    if (st == NB_OK) {
        put_f64(out, nout, g);
        put_f64(out, nout, gx);
    }
    nb_scope_end();
    return st;
}

/* The file the load workload reads: three tensors of three dtypes. */
static char ST_PATH[64];
static const float SA[6] = {1.5f, -2, 0.25f, 8, -0.125f, 3};
static const int64_t SB[4] = {7, -9, 1LL << 40, 0};
static const double SC[4] = {3.141592653589793, -0.0, 1e-300, 2.5};
static const char *const ST_NAMES[3] = {"layer.a", "layer.b", "c"};

static void write_file(void) {
    snprintf(ST_PATH, sizeof ST_PATH, "/tmp/nb_test_oom_%ld.safetensors", (long)getpid());
    nb_scope_begin();
    nb_tensor *ts[3] = {NBT(nb_from_data(SA, NB_SHAPE(2, 3), NB_F32)), NBT(nb_from_data(SB, NB_SHAPE(4), NB_I64)),
                        NBT(nb_from_data(SC, NB_SHAPE(2, 2), NB_F64))};
    assert_int_equal(nb_safetensors_save(ST_PATH, ST_NAMES, ts, 3), NB_OK);
    nb_scope_end();
}

/* out: every element of the three tensors, in name order, as double. */
static nb_status st_load(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_safetensors *h = nb_safetensors_open(ST_PATH);
    nb_status st = status_of(h);
    nb_tensor *t[3] = {0};
    for (int i = 0; i < 3 && st == NB_OK; i++) st = status_of(t[i] = nb_safetensors_get(h, ST_NAMES[i]));
    nb_safetensors_close(h); /* the tensors keep the mapping */
    if (st == NB_OK) {
        put_f32(out, nout, t[0]);
        const int64_t *b = nb_data_ptr(t[1]);
        for (int i = 0; i < 4; i++) out[(*nout)++] = (double)b[i];
        put_f64(out, nout, t[2]);
    }
    nb_scope_end();
    return st;
}

/* Save the three tensors to ST_SAVED (absent before); out: 1 when the file is byte for byte the one
 * write_file made.  On failure neither the file nor a temporary one may be left. */
static char ST_SAVED[80];
static nb_status st_save(double *out, int *nout) {
    *nout = 0;
    unlink(ST_SAVED);
    nb_scope_begin();
    nb_tensor *ts[3] = {nb_from_data(SA, NB_SHAPE(2, 3), NB_F32), nb_from_data(SB, NB_SHAPE(4), NB_I64),
                        nb_from_data(SC, NB_SHAPE(2, 2), NB_F64)};
    nb_status st = status_of(ts[0] && ts[1] && ts[2] ? ts : NULL);
    if (st == NB_OK) st = nb_safetensors_save(ST_SAVED, ST_NAMES, ts, 3);
    nb_scope_end();
    char pattern[96];
    snprintf(pattern, sizeof pattern, "%s*", ST_SAVED);
    glob_t g;
    int found = glob(pattern, 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
    if (found) globfree(&g);
    if (st != NB_OK) {
        if (found) fail_msg("a failed save left %d files at %s", found, pattern);
        return st;
    }
    assert_int_equal(found, 1);
    FILE *a = fopen(ST_PATH, "rb"), *b = fopen(ST_SAVED, "rb");
    assert_non_null(a);
    assert_non_null(b);
    int ca, cb;
    do {
        ca = fgetc(a);
        cb = fgetc(b);
    } while (ca == cb && ca != EOF);
    fclose(a);
    fclose(b);
    out[(*nout)++] = ca == cb;
    return st;
}

/* Eval mode: relu(a * b + c) of two lazy tensors (two graphs merged) and a concrete one, read twice
 * (the second read from the cached value), then the expression over other data (a compile-cache
 * hit) and an op on the value read; the cache is cleared at the end so that it holds no block.
 * out: the three results. */
static const double LA[4] = {0.5, -1, 2, -3}, LB[4] = {2, 3, -0.25, -1}, LC[4] = {1, 1, -1, 0.5};
static nb_status lazy_eval(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_tensor *a = nb_from_data(LA, NB_SHAPE(4), NB_F64), *b = nb_from_data(LB, NB_SHAPE(4), NB_F64);
    nb_tensor *c = nb_from_data(LC, NB_SHAPE(4), NB_F64);
    nb_tensor *r = nb_relu(nb_add(nb_mul(nb_lazy(a), nb_lazy(b)), c));
    nb_tensor *r2 = nb_relu(nb_add(nb_mul(nb_lazy(b), nb_lazy(c)), a));
    nb_status st = status_of(r && r2 ? r : NULL);
    if (st == NB_OK) st = nb_copy_to_host(r, out, 4 * sizeof *out);
    if (st == NB_OK) st = nb_copy_to_host(r, out + 4, 4 * sizeof *out);
    if (st == NB_OK) st = nb_copy_to_host(r2, out + 8, 4 * sizeof *out);
    nb_tensor *r3 = st == NB_OK ? nb_sub(r, 0.5) : NULL; /* on a value read: a new graph */
    if (st == NB_OK) st = status_of(r3);
    if (st == NB_OK) st = nb_copy_to_host(r3, out + 12, 4 * sizeof *out);
    if (st == NB_OK) *nout = 16;
    nb_scope_end();
    nb_compile_cache_clear();
    return st;
}

/* A compiled plan with fused kernels and a memory plan: w = w - 0.1 * softmax(x @ w) written back
 * into w (nb_compiled_run_into), the row sums of exp(x @ w) and a constant (a copy of it, after a
 * fresh output that a failure must hand back to the scope) returned, run twice (the second run
 * reuses the plan and its arena), the report read; the cache cleared at the end.  Static shapes
 * (nb_dim would keep its table).  out: the sums of both runs, w after them, the constant twice. */
static const double CX[2][3] = {{0.5, -1, 2}, {1.5, 0.25, -0.75}};

/* The step's trace (nb_graph_build_with keeps its error): ctx is the weight tensor. */
static nb_status trace_step(nb_graph *g, void *ctx, void *meta) {
    (void)meta;
    nb_tensor *x = nb_graph_input(g, "x", NB_F64, NB_SHAPE(2, 3)), *p = nb_graph_param(g, "w", ctx);
    nb_tensor *h = nb_matmul(x, p);
    nb_tensor *nw = nb_sub(p, nb_mul(nb_sum(nb_softmax(h, -1), NB_AXES(0), false), 0.1));
    nb_tensor *o1 = nb_add(nb_mul(nw, 1.0), nb_zeros_like(p)), *o2 = nb_sum(nb_exp(h), NB_AXES(-1), false);
    nb_status st = status_of(o1 && o2 ? o1 : NULL); /* an op's failure, not graph_output's NULL argument */
    if (st == NB_OK) st = nb_graph_output(g, "w", o1);
    if (st == NB_OK) st = nb_graph_output(g, "s", o2);
    nb_tensor *k = st == NB_OK ? nb_from_data(CX, NB_SHAPE(2, 3), NB_F64) : NULL; /* a constant output */
    if (st == NB_OK) st = status_of(k);
    if (st == NB_OK) st = nb_graph_output(g, "c", k);
    return st;
}

static nb_status compiled_step(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_tensor *w = nb_from_data((double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9}, NB_SHAPE(3, 3), NB_F64);
    nb_tensor *xv = nb_from_data(CX, NB_SHAPE(2, 3), NB_F64);
    nb_graph *g = w && xv ? nb_graph_build_with("step", trace_step, w, NULL) : NULL;
    nb_compiled *c = g ? nb_graph_compile(g, NB_CPU) : NULL;
    nb_status st = status_of(c);
    for (int r = 0; r < 2 && st == NB_OK; r++) {
        nb_tensor *o[3] = {w, NULL, NULL};
        st = nb_compiled_run_into(c, 1, (const char *[]){"x"}, &xv, 3, o);
        if (st == NB_OK) st = nb_copy_to_host(o[1], out + 2 * r, 2 * sizeof *out);
        if (st == NB_OK) st = nb_copy_to_host(o[2], out + 13 + 6 * r, 6 * sizeof *out);
    }
    if (st == NB_OK) st = nb_copy_to_host(w, out + 4, 9 * sizeof *out);
    char *rep = st == NB_OK ? nb_compiled_report(c) : NULL;
    if (st == NB_OK) st = status_of(rep);
    nb_free_string(rep);
    if (st == NB_OK) *nout = 25;
    nb_compiled_release(c);
    nb_graph_release(g);
    nb_scope_end();
    nb_compile_cache_clear();
    return st;
}

/* The function transforms of f(x [2, 3]; W [3, 3] a param) = sum(tanh(x @ W)), each jitted and run
 * (the cache cleared at the end): out: grad_W (9), vmap(f) over the rows of x (2), jacrev of f by x
 * (6), the jvp's value and its tangent along ones (2). */
static nb_tensor *tw_value;

static nb_status trace_f(nb_graph *g, void *ctx, void *meta) {
    (void)meta;
    const int64_t *shape = ctx; /* [2, 3] or [3] */
    nb_tensor *x = nb_graph_input(g, "x", NB_F64, shape + (shape[0] == 3), shape[0] == 3 ? 1 : 2);
    nb_tensor *w = nb_graph_param(g, "W", tw_value);
    nb_tensor *y = nb_sum(nb_tanh(nb_matmul(x, w)), NULL, 0, false);
    nb_status st = status_of(y);
    return st == NB_OK ? nb_graph_output(g, "out", y) : st;
}

/* Run transform t of f (NULL: f itself) with x (and tangent when given); its outputs into out. */
static nb_status run_transformed(nb_graph *t, nb_tensor *x, nb_tensor *tangent, double *out, int *nout) {
    nb_compiled *c = t ? nb_func_jit(t) : NULL;
    nb_status st = t ? status_of(c) : nb_last_status();
    nb_tensor *res[2] = {NULL, NULL};
    int k = tangent ? 2 : 1;
    if (st == NB_OK) st = nb_compiled_run(c, k, (const char *[]){"x", "tangent_x"}, (nb_tensor *[]){x, tangent},
                                          nb_graph_output_count(t), res);
    for (int i = 0; st == NB_OK && i < nb_graph_output_count(t); i++) put_f64(out, nout, res[i]);
    nb_compiled_release(c);
    nb_graph_release(t);
    return st;
}

static nb_status transforms(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    tw_value = nb_from_data((double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9}, NB_SHAPE(3, 3), NB_F64);
    nb_tensor *xv = nb_from_data(CX, NB_SHAPE(2, 3), NB_F64), *ones = nb_ones(NB_SHAPE(2, 3), NB_F64);
    int64_t full[3] = {2, 3, 3}, row[3] = {3, 3, 0};
    nb_graph *f = tw_value && xv && ones ? nb_graph_build_with("f", trace_f, full, NULL) : NULL;
    nb_graph *f1 = f ? nb_graph_build_with("row", trace_f, row, NULL) : NULL;
    nb_status st = status_of(f1);
    const char *x[] = {"x"};
    if (st == NB_OK) st = run_transformed(nb_func_grad(f, 1, (const char *[]){"W"}), xv, NULL, out, nout);
    if (st == NB_OK) st = run_transformed(nb_func_vmap(f1, 1, x, (int[]){0}, 2, NULL), xv, NULL, out, nout);
    if (st == NB_OK) st = run_transformed(nb_func_jacrev(f, 1, x), xv, NULL, out, nout);
    if (st == NB_OK) st = run_transformed(nb_func_jvp(f, 1, x), xv, ones, out, nout);
    nb_graph_release(f1);
    nb_graph_release(f);
    nb_scope_end();
    nb_compile_cache_clear();
    return st;
}

/* Small linear algebra with its gradients: A = X X^T + I (X a leaf), out: cholesky(A), solve(A, b),
 * log|det A| and d(sum of all three)/dX. */
static nb_status linalg(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_tensor *x = nb_from_data((double[]){1, 0.5, -0.25, 0.3, 2, 0.1, -0.4, 0.2, 1.5}, NB_SHAPE(3, 3), NB_F64);
    nb_status st = status_of(x);
    if (st == NB_OK) st = nb_set_requires_grad(x, true);
    nb_tensor *a = st == NB_OK ? nb_add(nb_matmul(x, nb_transpose(x, 0, 1)), nb_eye(3, 3, NB_F64)) : NULL;
    nb_tensor *l = nb_cholesky(a, false), *y = nb_solve(a, nb_ones(NB_SHAPE(3), NB_F64)), *s = NULL, *d = NULL;
    if (st == NB_OK) st = status_of(l && y ? a : NULL);
    if (st == NB_OK) st = nb_slogdet(a, &s, &d);
    nb_tensor *total = st == NB_OK ? nb_add(nb_add(nb_sum(l, NULL, 0, false), nb_sum(y, NULL, 0, false)), d) : NULL;
    if (st == NB_OK) st = status_of(total);
    if (st == NB_OK) st = nb_backward(total, NULL, false);
    nb_tensor *g = st == NB_OK ? nb_grad(x) : NULL;
    if (st == NB_OK) st = status_of(g);
    if (st == NB_OK) {
        put_f64(out, nout, l);
        put_f64(out, nout, y);
        put_f64(out, nout, d);
        put_f64(out, nout, g);
    }
    nb_scope_end();
    return st;
}

/* Low-precision ops: quantize (MX-FP8 and NVFP4), dequantize and scaled_matmul through the
 * GEMM's decoding packs; out the dequantized values and the product. */
static nb_status lowp(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_manual_seed(5);
    nb_tensor *a = nb_randn(NB_SHAPE(3, 32), NB_F32), *b = nb_randn(NB_SHAPE(2, 32), NB_F32);
    nb_status st = status_of(a && b ? a : NULL);
    nb_quantized qa, qb, qn;
    if (st == NB_OK) st = nb_quantize(a, NB_FMT_F8E4M3FN, NB_SCALE_MX, &qa);
    if (st == NB_OK) st = nb_quantize(b, NB_FMT_F8E5M2, NB_SCALE_MX, &qb);
    if (st == NB_OK) st = nb_quantize(b, NB_FMT_F4E2M1, NB_SCALE_NVFP4, &qn);
    if (st == NB_OK) { /* row 0 as broadcast views: the op makes them dense first */
        qn.codes = nb_expand(nb_narrow(qn.codes, 0, 0, 1), NB_SHAPE(2, 16));
        qn.scales = nb_expand(nb_narrow(qn.scales, 0, 0, 1), NB_SHAPE(2, 2));
    }
    nb_tensor *d = st == NB_OK ? nb_dequantize(&qn, NB_F64) : NULL;
    nb_tensor *y = st == NB_OK ? nb_scaled_matmul(&qa, &qb, NB_F64) : NULL;
    if (st == NB_OK) st = status_of(d && y ? y : NULL);
    if (st == NB_OK) {
        put_f64(out, nout, d);
        put_f64(out, nout, y);
    }
    nb_scope_end();
    return st;
}

/* Attention through its tiled kernel (causal, grouped-query) and its rule: out, the output and
 * d(sum)/dq. */
static nb_status attention(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_manual_seed(21);
    nb_tensor *q = nb_randn(NB_SHAPE(1, 2, 5, 3), NB_F64), *k = nb_randn(NB_SHAPE(1, 1, 4, 3), NB_F64);
    nb_tensor *v = nb_randn(NB_SHAPE(1, 1, 4, 2), NB_F64);
    nb_status st = status_of(q && k ? v : NULL);
    if (st == NB_OK) st = nb_set_requires_grad(q, true);
    nb_tensor *y = st == NB_OK ? nb_scaled_dot_product_attention(q, k, v, (nb_attention_opts){.mask = NB_ATTN_MASK_CAUSAL})
                               : NULL;
    nb_tensor *total = st == NB_OK && y ? nb_sum(y, NULL, 0, false) : NULL;
    if (st == NB_OK) st = status_of(total);
    if (st == NB_OK) st = nb_backward(total, NULL, false);
    nb_tensor *g = st == NB_OK ? nb_grad(q) : NULL;
    if (st == NB_OK) st = status_of(g);
    if (st == NB_OK) {
        put_f64(out, nout, y);
        put_f64(out, nout, g);
    }
    nb_scope_end();
    return st;
}

/* conv2d's eager kernels (CONVOLUTION and its backward: per-thread column buffers, GEMM
 * workspaces, per-image views) */
/* sum(relu(conv2d(x [B, 2, 3, 3], w, b))^2), w and b (ctx) as params. */
static nb_status trace_conv(nb_graph *g, void *ctx, void *meta) {
    (void)meta;
    nb_tensor *const *wb = ctx;
    nb_tensor *x = nb_graph_input(g, "x", NB_F64, NB_SHAPE(nb_dim("B"), 2, 3, 3));
    nb_tensor *w = nb_graph_param(g, "w", wb[0]), *b = nb_graph_param(g, "b", wb[1]);
    nb_tensor *y = x && w && b ? nb_relu(nb_conv2d(x, w, b, (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1})) : NULL;
    nb_tensor *l = y ? nb_sum(nb_square(y), NULL, 0, false) : NULL;
    return l ? nb_graph_output(g, "out", l) : nb_last_status();
}

static nb_status conv(double *out, int *nout) {
    *nout = 0;
    nb_scope_begin();
    nb_manual_seed(23);
    nb_tensor *x = nb_randn(NB_SHAPE(2, 2, 3, 3), NB_F64), *w = nb_randn(NB_SHAPE(2, 2, 3, 3), NB_F64);
    nb_tensor *b = nb_randn(NB_SHAPE(2), NB_F64);
    nb_status st = status_of(x && w ? b : NULL);
    for (int i = 0; i < 3 && st == NB_OK; i++) st = nb_set_requires_grad(i == 0 ? x : i == 1 ? w : b, true);
    nb_tensor *y = st == NB_OK ? nb_conv2d(x, w, b, (nb_conv2d_opts){{1, 1}, {1, 1}, {1, 1}, 1}) : NULL;
    nb_tensor *total = st == NB_OK && y ? nb_sum(nb_square(y), NULL, 0, false) : NULL;
    if (st == NB_OK) st = status_of(total);
    if (st == NB_OK) st = nb_backward(total, NULL, false);
    nb_tensor *g[3] = {NULL};
    for (int i = 0; i < 3 && st == NB_OK; i++) st = status_of(g[i] = nb_grad(i == 0 ? x : i == 1 ? w : b));
    if (st == NB_OK) {
        put_f64(out, nout, y);
        for (int i = 0; i < 3; i++) put_f64(out, nout, g[i]);
    }
    /* traced with a symbolic batch (the kernels as graph nodes), its Hessian-vector product
     * vmapped over two examples */
    nb_graph *f = NULL, *h = NULL, *v = NULL;
    if (st == NB_OK) st = status_of(f = nb_graph_build_with("conv", trace_conv, (nb_tensor *[]){w, b}, NULL));
    const char *names[2] = {"x", "tangent_x"};
    if (st == NB_OK) st = status_of(h = nb_func_hvp(f, 1, names));
    if (st == NB_OK) st = status_of(v = nb_func_vmap(h, 2, names, (int[]){0, 0}, 2, NULL));
    nb_tensor *xs = st == NB_OK ? nb_randn(NB_SHAPE(2, 2, 2, 3, 3), NB_F64) : NULL, *res = NULL;
    nb_tensor *ts = xs ? nb_randn(NB_SHAPE(2, 2, 2, 3, 3), NB_F64) : NULL;
    if (st == NB_OK) st = status_of(ts);
    if (st == NB_OK) st = nb_func_call(v, 2, names, (nb_tensor *[]){xs, ts}, 1, &res);
    if (st == NB_OK) put_f64(out, nout, res);
    nb_graph_release(v);
    nb_graph_release(h);
    nb_graph_release(f);
    nb_scope_end();
    nb_compile_cache_clear();
    return st;
}

/* ---- the fault loop ---- */

static void expect_same(const double *got, int ngot, const double *want, int nwant, const char *what, long k) {
    if (ngot != nwant) fail_msg("%s, k = %ld: %d results, expected %d", what, k, ngot, nwant);
    for (int i = 0; i < ngot; i++)
        if (memcmp(&got[i], &want[i], sizeof got[i]) != 0)
            fail_msg("%s, k = %ld: result %d is %.17g, expected %.17g", what, k, i, got[i], want[i]);
}

/* One run with the current fault settings: no leak, no foreign thread, recording back on. */
static nb_status run_once(workload w, double *out, int *nout) {
    F.calls = F.refused = 0;
    nb_clear_error();
    nb_status st = w(out, nout);
    if (F.live != 0 || F.bytes != 0) fail_msg("%ld blocks (%zu bytes) leaked", F.live, F.bytes);
    assert_int_equal(F.foreign, 0);
    assert_true(nb_grad_enabled());
    return st;
}

/* The reference results (checked against oracle by the caller) and the allocation count of w. */
static long clean_run(workload w, double *ref, int *nref) {
    F.fail_at = 0;
    nb_status st = run_once(w, ref, nref);
    if (st != NB_OK) fail_msg("clean run: %s: %s", nb_status_name(st), nb_last_message());
    return F.calls;
}

static void fault_loop(workload w, const char *what, const double *ref, int nref, long total, bool sticky) {
    long failed = 0, survived = 0;
    for (long k = 1; k <= total; k++) {
        double got[MAXOUT];
        int ngot = 0;
        F.fail_at = k;
        F.sticky = sticky;
        nb_status st = run_once(w, got, &ngot);
        assert_true(F.refused > 0);
        if (st == NB_OK) { /* the refused allocation was optional */
            survived++;
            expect_same(got, ngot, ref, nref, what, k);
        } else {
            failed++;
            if (st != NB_ERR_OOM || nb_last_status() != NB_ERR_OOM || !strstr(nb_last_message(), "out of memory"))
                fail_msg("%s, k = %ld%s: returned %s, pending %s: %s", what, k, sticky ? " (sticky)" : "",
                         nb_status_name(st), nb_status_name(nb_last_status()), nb_last_message());
        }
        F.fail_at = 0; /* no state left behind: a clean run gives the reference again */
        st = run_once(w, got, &ngot);
        if (st != NB_OK) fail_msg("%s, clean run after k = %ld: %s: %s", what, k, nb_status_name(st), nb_last_message());
        expect_same(got, ngot, ref, nref, what, k);
    }
    print_message("%s%s: %ld allocations, %ld runs failed with NB_ERR_OOM, %ld survived\n", what,
                  sticky ? " (sticky)" : "", total, failed, survived);
    assert_true(failed > 0);
}

static void every_fault(workload w, const char *what, const double *ref, int nref, long total) {
    fault_loop(w, what, ref, nref, total, false);
    fault_loop(w, what, ref, nref, total, true);
}

static void oom_train_step(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(train_step, ref, &nref);
    assert_int_equal(nref, 1 + 8 * 4 + 8 + 3 * 8 + 3);
    assert_true(isfinite(ref[0]) && ref[0] > 0);
    every_fault(train_step, "train step", ref, nref, total);
    uninstall();
}

static void oom_double_backward(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(double_backward, ref, &nref);
    assert_int_equal(nref, 6);
    for (int i = 0; i < 3; i++) { /* closed forms: g = s x² + 2x t, dz/dx = 2 g (4x s + 2t - 2x² s t), s = sech² */
        double x = XG[i], t = tanh(x), s = 1 - t * t, g = s * x * x + 2 * x * t;
        assert_true(fabs(ref[i] - g) <= 1e-12 * (1 + fabs(g)));
        double dz = 2 * g * (4 * x * s + 2 * t - 2 * x * x * s * t);
        assert_true(fabs(ref[3 + i] - dz) <= 1e-12 * (1 + fabs(dz)));
    }
    every_fault(double_backward, "create_graph backward", ref, nref, total);
    uninstall();
}

static void oom_lazy_eval(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(lazy_eval, ref, &nref);
    double want[16];
    for (int i = 0; i < 4; i++) {
        want[i] = want[4 + i] = fmax(LA[i] * LB[i] + LC[i], 0);
        want[8 + i] = fmax(LB[i] * LC[i] + LA[i], 0);
        want[12 + i] = want[i] - 0.5;
    }
    expect_same(ref, nref, want, 16, "lazy eval", 0);
    every_fault(lazy_eval, "lazy eval", ref, nref, total);
    uninstall();
}

static void oom_compiled_step(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(compiled_step, ref, &nref);
    /* the oracle: the same steps eagerly */
    double want[25];
    nb_scope_begin();
    nb_tensor *w = nb_from_data((double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9}, NB_SHAPE(3, 3), NB_F64);
    nb_tensor *xv = nb_from_data(CX, NB_SHAPE(2, 3), NB_F64);
    for (int r = 0; r < 2; r++) {
        nb_tensor *h = nb_matmul(xv, w);
        assert_int_equal(nb_copy_to_host(nb_sum(nb_exp(h), NB_AXES(-1), false), want + 2 * r, 2 * sizeof(double)), NB_OK);
        w = nb_sub(w, nb_mul(nb_sum(nb_softmax(h, -1), NB_AXES(0), false), 0.1));
    }
    assert_int_equal(nb_copy_to_host(w, want + 4, 9 * sizeof(double)), NB_OK);
    nb_scope_end();
    memcpy(want + 13, CX, sizeof CX);
    memcpy(want + 19, CX, sizeof CX);
    expect_same(ref, nref, want, 25, "compiled step", 0);
    every_fault(compiled_step, "compiled step", ref, nref, total);
    uninstall();
}

static void oom_transforms(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(transforms, ref, &nref);
    /* the oracle: the eager tape on the same data (the jvp's tangent: the sum of d f / d x) */
    double want[19];
    nb_scope_begin();
    nb_tensor *w = nb_from_data((double[]){0.1, -0.2, 0.3, 0.4, -0.5, 0.6, 0.7, 0.8, -0.9}, NB_SHAPE(3, 3), NB_F64);
    nb_tensor *xv = nb_from_data(CX, NB_SHAPE(2, 3), NB_F64);
    nb_set_requires_grad(w, true);
    nb_set_requires_grad(xv, true);
    nb_tensor *h = nb_tanh(nb_matmul(xv, w)), *f = nb_sum(h, NULL, 0, false);
    assert_int_equal(nb_backward(f, NULL, false), NB_OK);
    assert_int_equal(nb_copy_to_host(nb_grad(w), want, 9 * sizeof(double)), NB_OK);
    assert_int_equal(nb_copy_to_host(nb_sum(nb_detach(h), NB_AXES(-1), false), want + 9, 2 * sizeof(double)), NB_OK);
    assert_int_equal(nb_copy_to_host(nb_grad(xv), want + 11, 6 * sizeof(double)), NB_OK);
    assert_int_equal(nb_item(f, &want[17]), NB_OK);
    assert_int_equal(nb_item(nb_sum(nb_grad(xv), NULL, 0, false), &want[18]), NB_OK);
    nb_scope_end();
    assert_true(fabs(ref[18] - want[18]) <= 1e-15 * fabs(want[18])); /* another summation order */
    want[18] = ref[18];
    expect_same(ref, nref, want, 19, "transforms", 0);
    every_fault(transforms, "transforms", ref, nref, total);
    uninstall();
}

/* The fault sweep of workload w, whose clean run gives nwant results (its own oracle: the run
 * before any fault). */
static void faults_of(workload w, const char *what, int nwant) {
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(w, ref, &nref);
    assert_int_equal(nref, nwant);
    every_fault(w, what, ref, nref, total);
    uninstall();
}

static void oom_linalg(void **state) {
    (void)state;
    faults_of(linalg, "linalg", 9 + 3 + 1 + 9);
}

static void oom_attention(void **state) {
    (void)state;
    faults_of(attention, "attention", 20 + 30);
}

static void oom_conv(void **state) {
    (void)state;
    double warm[MAXOUT];
    int nwarm = 0;
    assert_int_equal(conv(warm, &nwarm), NB_OK); /* interns the graph's symbolic dims, which live for the process */
    faults_of(conv, "conv", 36 + 36 + 36 + 2 + 72);
}

static void oom_lowp(void **state) {
    (void)state;
    install();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(lowp, ref, &nref);
    assert_int_equal(nref, 2 * 32 + 3 * 2);
    for (int i = 0; i < 32; i++) assert_true(ref[i] == ref[32 + i]); /* both rows the first's */
    every_fault(lowp, "lowp", ref, nref, total);
    uninstall();
}

static void oom_safetensors_load(void **state) {
    (void)state;
    install();
    write_file();
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(st_load, ref, &nref);
    double want[14];
    for (int i = 0; i < 6; i++) want[i] = SA[i];
    for (int i = 0; i < 4; i++) want[6 + i] = (double)SB[i];
    for (int i = 0; i < 4; i++) want[10 + i] = SC[i];
    expect_same(ref, nref, want, 14, "safetensors load", 0);
    every_fault(st_load, "safetensors load", ref, nref, total);
    unlink(ST_PATH);
    uninstall();
}

static void oom_safetensors_save(void **state) {
    (void)state;
    install();
    write_file();
    snprintf(ST_SAVED, sizeof ST_SAVED, "%s.copy", ST_PATH);
    double ref[MAXOUT];
    int nref = 0;
    long total = clean_run(st_save, ref, &nref);
    expect_same(ref, nref, (double[]){1}, 1, "safetensors save", 0);
    every_fault(st_save, "safetensors save", ref, nref, total);
    unlink(ST_SAVED);
    unlink(ST_PATH);
    uninstall();
}

/* An optimizer step that runs out of memory updates no parameter: a retry gives the clean step's result. */
static const double OP[2][3] = {{0.5, -1, 2}, {3, 0.25, -4}}, OG[2][3] = {{0.1, -0.2, 0.3}, {-1, 2, 0.5}};

static nb_optimizer *optim_fixture(nb_tensor **p) {
    for (int i = 0; i < 2; i++) {
        p[i] = NBT(nb_from_data(OP[i], NB_SHAPE(3), NB_F64));
        assert_int_equal(nb_set_requires_grad(p[i], true), NB_OK);
        nb_scope_begin();
        nb_tensor *loss = NBT(nb_sum(NBT(nb_mul(p[i], NBT(nb_from_data(OG[i], NB_SHAPE(3), NB_F64)))), NULL, 0, false));
        assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
        nb_scope_end();
    }
    nb_optimizer *o = nb_optim_adam(p, 2, NB_ADAM_DEFAULTS);
    assert_non_null(o);
    return o;
}

static void expect_params(nb_tensor **p, const double (*want)[3], const char *what, long k) {
    double got[6];
    int n = 0;
    for (int i = 0; i < 2; i++) put_f64(got, &n, p[i]);
    expect_same(got, n, &want[0][0], 6, what, k);
}

static void optim_step_all_or_nothing(void **state) {
    (void)state;
    install();
    nb_tensor *p[2];
    nb_optimizer *o = optim_fixture(p);
    assert_int_equal(nb_optim_step(o), NB_OK);
    double after[2][3];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++) after[i][j] = nbt_at(p[i], j);
    nb_optim_free(o);
    nb_release(p[0]);
    nb_release(p[1]);
    long failed = 0;
    for (long k = 1;; k++) {
        o = optim_fixture(p);
        F.calls = F.refused = 0;
        F.fail_at = k;
        nb_clear_error();
        nb_status st = nb_optim_step(o);
        F.fail_at = 0;
        if (st != NB_OK) {
            failed++;
            assert_int_equal(st, NB_ERR_OOM);
            expect_params(p, OP, "failed optimizer step", k);
            assert_int_equal(nb_optim_step(o), NB_OK);
        }
        expect_params(p, after, "optimizer step", k);
        nb_optim_free(o);
        nb_release(p[0]);
        nb_release(p[1]);
        if (!F.refused) break; /* k went past the step's allocations */
    }
    assert_true(failed > 0);
    assert_int_equal(F.live, 0);
    uninstall();
}

/* The contract of nb_set_allocator: refused while blocks are live; every buffer, large ones too,
 * comes from the function, 64-byte aligned, on the calling thread only; NULL restores the default. */
static void allocator_contract(void **state) {
    (void)state;
    void *ud = &ud;
    nb_alloc_fn def = nb_get_allocator(&ud);
    assert_non_null(def);
    assert_null(ud);
    install();
    void *got_ud = NULL;
    assert_ptr_equal(nb_get_allocator(&got_ud), fault_alloc);
    assert_ptr_equal(got_ud, &F);
    nb_tensor *small = NBT(nb_zeros(NB_SHAPE(3, 5), NB_F32));
    nb_tensor *big = NBT(nb_zeros(NB_SHAPE(5, 1 << 18), NB_F32)); /* 5 MiB: the huge-page path otherwise */
    assert_true(F.bytes >= (size_t)5 << 20);
    assert_int_equal((uintptr_t)nb_data_ptr(small) % 64, 0);
    assert_int_equal((uintptr_t)nb_data_ptr(big) % 64, 0);
    assert_int_equal(nb_set_allocator(NULL, NULL), NB_ERR_STATE);
    assert_non_null(strstr(nb_last_message(), "set_allocator"));
    assert_ptr_equal(nb_get_allocator(NULL), fault_alloc); /* unchanged */
    nb_release(small);
    nb_release(big);
    assert_int_equal(F.live, 0);
    int threads = nb_get_num_threads(); /* the CPU workers never allocate: fn sees only this thread */
    nb_set_num_threads(4);
    nb_scope_begin();
    nb_tensor *a = NBT(nb_ones(NB_SHAPE(256, 256), NB_F32));
    double v = 0;
    assert_int_equal(nb_item(nb_sum(nb_relu(nb_matmul(a, a)), NULL, 0, false), &v), NB_OK);
    assert_true(v == 256.0 * 256 * 256);
    nb_scope_end();
    nb_set_num_threads(threads);
    assert_int_equal(F.foreign, 0);
    nb_scope_begin(); /* an open scope holds memory too (once it owns a result) */
    NBT(nb_zeros(NB_SHAPE(2), NB_F32));
    assert_int_equal(nb_set_allocator(NULL, NULL), NB_ERR_STATE);
    nb_scope_end();
    uninstall();
    assert_ptr_equal(nb_get_allocator(&ud), def);
    assert_null(ud);
    nb_clear_error();
}

/* A failed scope_begin: results inside fail with NB_ERR_OOM until its scope_end, then all is normal. */
static void lost_scope(void **state) {
    (void)state;
    install();
    nb_clear_error();
    F.fail_at = F.calls + 1; /* the scope stack itself */
    nb_scope_begin();
    F.fail_at = 0;
    assert_int_equal(nb_last_status(), NB_ERR_OOM);
    assert_null(nb_zeros(NB_SHAPE(2), NB_F32));
    nb_scope_begin(); /* nested inside the lost one: lost too */
    assert_null(nb_zeros(NB_SHAPE(2), NB_F32));
    nb_scope_end();
    nb_scope_end();
    assert_int_equal(F.live, 0);
    nb_clear_error();
    nb_tensor *t = NBT(nb_zeros(NB_SHAPE(2), NB_F32));
    nb_release(t);
    assert_int_equal(F.live, 0);
    uninstall();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocator_contract),   cmocka_unit_test(lost_scope),
        cmocka_unit_test(oom_train_step),       cmocka_unit_test(oom_double_backward),
        cmocka_unit_test(oom_safetensors_load), cmocka_unit_test(oom_safetensors_save),
        cmocka_unit_test(oom_lazy_eval),        cmocka_unit_test(oom_compiled_step),        cmocka_unit_test(oom_transforms),        cmocka_unit_test(oom_linalg),        cmocka_unit_test(oom_attention),        cmocka_unit_test(oom_conv),        cmocka_unit_test(oom_lowp),        cmocka_unit_test(optim_step_all_or_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
