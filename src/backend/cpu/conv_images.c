/*
 * conv_images.c — the CPU backend's conv2d and its gradients image by image
 * (backend.h conv2d, conv2d_backward).  Each image's unfolded columns
 * [C*KH*KW, L] go to a buffer of the thread's own, which the GEMMs read (and
 * the input gradient's GEMM writes, for the fold) while it is in L2: conv.c's
 * composite instead writes an [N, C*KH*KW, L] tensor to memory and reads it
 * back, 29 MB per pass at the Fashion-MNIST CNN's second layer and batch 128.
 * Every product is the nb__gemm call matmul makes for that batch item
 * (cpu_backend.c), with the same operand strides, and every unfold / fold the
 * window kernel's on that image's planes, so the results are the
 * composite's bit for bit.  Images are split across threads as matmul splits
 * batch items (a single-threaded GEMM each when there are enough of them);
 * otherwise they run in turn with the threads inside each GEMM, whose results
 * do not depend on the split either.  Everything the images need is
 * allocated before they start, on the calling thread (the allocator's
 * contract, nb_set_allocator): buffers, GEMM workspaces, the window passes'
 * tables (f32; f64 goes through the reference window kernels, which
 * allocate nothing, on image views kept on the stack).
 */
#include "../../ops/conv.h"
#include "conv_kernels.h"
#include "gemm.h"
#include "kernels.h"
#include "pool.h"

#include <stdatomic.h>
#include <string.h>

typedef struct conv_ctx {
    const nb_tensor *x, *w, *b, *g; /* g: the output's gradient (backward) */
    const nb_tensor *ymask;          /* backward: g is taken where this (relu's result) is nonzero */
    nb_tensor *y, *dx, *dwi, *db;   /* y (forward) or dx, dwi, db (backward; NULL when not wanted) */
    nb_window2d win;
    int64_t groups, C, H, W, O, K, L; /* K = C/groups*KH*KW per group, L = OH*OW */
    bool pointwise;                  /* 1x1, stride 1, no padding: the columns are the image */
    bool relu;                       /* forward: relu in the GEMMs' epilogue */
    size_t es;
    int threads;                     /* inside each GEMM */
    nb_tensor **cols;                /* per chunk: [1, C*KH*KW, L] */
    nb_cpu_win unfold, fold;         /* f32: the prepared passes (table NULL when unused) */
    char *ws;                        /* per chunk: threads GEMM workspaces */
    double *bsum;                    /* db's partials [N, O]: image n's channel o summed over L */
    char *gm;                        /* with ymask, per chunk: image n's masked g [O, L] */
    size_t ws_size;
    _Atomic int status;              /* the first error of any chunk */
} conv_ctx;

static char *at(const nb_tensor *t, int64_t elems, size_t es) { return (char *)nb__ptr(t) + elems * (int64_t)es; }

/* Image n of t ([N, ...], contiguous) as a [1, ...] record on the stack: never retained, only
 * read by the reference window kernels (so a worker thread allocates nothing). */
static nb_tensor image_view(const nb_tensor *t, int64_t n) {
    nb_tensor v;
    memcpy(&v, t, sizeof v);
    v.shape[0] = 1;
    v.offset += n * t->stride[0];
    return v;
}

/* One window pass over image n: UNFOLD from x's image n into cols, or FOLD from cols into dx's. */
static nb_status window(const conv_ctx *c, nb_op op, int64_t n, nb_tensor *cols) {
    const nb_tensor *img = op == NB_OP_UNFOLD ? c->x : c->dx;
    if (img->dtype == NB_F32) {
        float *p = (float *)at(img, n * c->C * c->H * c->W, c->es), *q = (float *)nb__ptr(cols);
        if (op == NB_OP_UNFOLD) nb__cpu_win_run(&c->unfold, p, q, NULL, c->C);
        else nb__cpu_win_run(&c->fold, q, p, NULL, c->C);
        return NB_OK;
    }
    nb_tensor v = image_view(img, n);
    return op == NB_OP_UNFOLD ? nb__ref_backend.window(op, cols, NULL, &v, &c->win)
                              : nb__ref_backend.window(op, &v, NULL, cols, &c->win);
}

/* The columns of image n: in place for a pointwise convolution, else unfolded into cols. */
static nb_status columns(const conv_ctx *c, int64_t n, nb_tensor *cols, const char **p) {
    if (c->pointwise) {
        *p = at(c->x, n * c->C * c->L, c->es);
        return NB_OK;
    }
    *p = nb__ptr(cols);
    return window(c, NB_OP_UNFOLD, n, cols);
}

/* The product C[m x n] = A B of matmul's batch item, A(i, p) = a[i*ars + p*acs], B(p, j) = b[p*brs + j*bcs]. */
static void product(const conv_ctx *c, int64_t m, int64_t n, int64_t k, const char *a, int64_t ars, int64_t acs,
                    const char *b, int64_t brs, int64_t bcs, char *out, int64_t ldc, const char *add, char *ws) {
    nb_gemm g = {.dt = c->x->dtype, .m = m, .n = n, .k = k, .a = a, .ars = ars, .acs = acs, .b = b, .brs = brs,
                 .bcs = bcs, .c = out, .ldc = ldc, .add = add, .adrs = 1, .adcs = 0, .relu = c->relu};
    nb__gemm(&g, ws, c->threads);
}

/* y[n, q] = w[q] cols[q] (+ b[q]) for each group q. */
static nb_status forward_image(const conv_ctx *c, int64_t n, nb_tensor *cols, char *ws) {
    const char *cp;
    nb_status st = columns(c, n, cols, &cp);
    int64_t og = c->O / c->groups;
    for (int64_t q = 0; q < c->groups && st == NB_OK; q++)
        product(c, og, c->L, c->K, at(c->w, q * og * c->K, c->es), c->K, 1, cp + q * c->K * c->L * (int64_t)c->es, c->L,
                1, at(c->y, (n * c->O + q * og) * c->L, c->es), c->L, c->b ? at(c->b, q * og, c->es) : NULL, ws);
    return st;
}

/* out[i] = y[i] != 0 ? g[i] : 0 for i < n: WHERE with a float condition (NaN counts as nonzero). */
#define CONV_MASK(NAME, T)                                                                                 \
    NB_SIMD_CLONES static void NAME(char *out_, const char *g_, const char *y_, int64_t n) {              \
        T *restrict out = (T *)out_;                                                                       \
        const T *restrict g = (const T *)g_, *restrict y = (const T *)y_;                                  \
        for (int64_t i = 0; i < n; i++) out[i] = y[i] != 0 ? g[i] : (T)0;                                  \
    }
CONV_MASK(mask_f32, float)
CONV_MASK(mask_f64, double)
#undef CONV_MASK

/* dwi[n, q] = g[n, q] cols[q]ᵀ; dx[n] = fold of w[q]ᵀ g[n, q] (written straight into dx[n] when
 * pointwise, else into cols, then folded); db's partials of image n, read while its g is in cache
 * (the reduction's sum of one contiguous run, nb__cpu_reduce_contig).  With ymask, g[n] is first
 * masked into gm (the chunk's buffer), so relu's derivative costs no pass of its own. */
static nb_status backward_image(const conv_ctx *c, int64_t n, nb_tensor *cols, char *ws, char *gm) {
    const char *cp = NULL, *gn = at(c->g, n * c->O * c->L, c->es);
    if (c->ymask) {
        const char *yn = at(c->ymask, n * c->O * c->L, c->es);
        if (c->x->dtype == NB_F32) mask_f32(gm, gn, yn, c->O * c->L);
        else mask_f64(gm, gn, yn, c->O * c->L);
        gn = gm;
    }
    for (int64_t o = 0; c->bsum && o < c->O; o++)
        c->bsum[n * c->O + o] = nb__cpu_reduce_contig(NB_OP_SUM, c->x->dtype, c->L, gn + o * c->L * (int64_t)c->es);
    nb_status st = c->dwi ? columns(c, n, cols, &cp) : NB_OK;
    int64_t og = c->O / c->groups;
    for (int64_t q = 0; q < c->groups && c->dwi && st == NB_OK; q++)
        product(c, og, c->K, c->L, gn + q * og * c->L * (int64_t)c->es, c->L, 1,
                cp + q * c->K * c->L * (int64_t)c->es, 1, c->L, at(c->dwi, (n * c->groups + q) * og * c->K, c->es), c->K,
                NULL, ws);
    if (!c->dx || st != NB_OK) return st;
    char *dcols = c->pointwise ? at(c->dx, n * c->C * c->L, c->es) : nb__ptr(cols);
    for (int64_t q = 0; q < c->groups; q++)
        product(c, c->K, c->L, og, at(c->w, q * og * c->K, c->es), 1, c->K, gn + q * og * c->L * (int64_t)c->es,
                c->L, 1, dcols + q * c->K * c->L * (int64_t)c->es, c->L, NULL, ws);
    return c->pointwise ? NB_OK : window(c, NB_OP_FOLD, n, cols);
}

/* Images [lo, hi) with chunk `chunk`'s buffers; the first error stops them. */
static void images(void *p, int64_t lo, int64_t hi, int chunk) {
    conv_ctx *c = p;
    char *ws = c->ws + (size_t)chunk * (size_t)c->threads * c->ws_size;
    char *gm = c->gm ? c->gm + (size_t)chunk * (size_t)(c->O * c->L) * c->es : NULL;
    for (int64_t n = lo; n < hi && atomic_load(&c->status) == NB_OK; n++) {
        nb_status st = c->y ? forward_image(c, n, c->cols[chunk], ws) : backward_image(c, n, c->cols[chunk], ws, gm);
        int ok = NB_OK;
        if (st != NB_OK) atomic_compare_exchange_strong(&c->status, &ok, (int)st);
    }
}

/* db[o] = the images' partials added in order, in double, rounded once: what the reduction over
 * axes (0, 2, 3) of g computes where nb__conv_db_in_kernel (a run of L per image and channel, the
 * runs combined in order: cpu_backend.c reduce_runs); the caller asks for db only there. */
static void bias_sums(const conv_ctx *c, int64_t N) {
    for (int64_t o = 0; o < c->O; o++) {
        double acc = 0;
        for (int64_t n = 0; n < N; n++) acc += c->bsum[n * c->O + o];
        nb__store(at(c->db, o, c->es), c->db->dtype, acc);
    }
}

/* Run c over the N images of x: per-chunk buffers, images split over threads as matmul splits a batch. */
static nb_status run(conv_ctx *c) {
    const nb_tensor *x = c->x, *w = c->w;
    int64_t N = x->shape[0], KH = w->shape[2], KW = w->shape[3];
    c->es = nb_dtype_size(x->dtype);
    c->C = x->shape[1];
    c->H = x->shape[2];
    c->W = x->shape[3];
    c->O = w->shape[0];
    c->K = w->shape[1] * KH * KW;
    c->L = nb__window_out(c->H, KH, c->win.stride[0], c->win.padding[0], c->win.dilation[0]) *
           nb__window_out(c->W, KW, c->win.stride[1], c->win.padding[1], c->win.dilation[1]);
    c->pointwise = nb__window_pointwise(&c->win);
    if (N == 0 && c->db) memset(nb__ptr(c->db), 0, (size_t)c->O * c->es); /* sums of nothing */
    if (N == 0) return NB_OK;
    if (c->O == 0) { /* y and dwi are empty; dx is the fold of empty products: zeros */
        if (c->dx) memset(nb__ptr(c->dx), 0, (size_t)nb__numel(c->dx) * c->es);
        return NB_OK;
    }
    int threads = nb_get_num_threads();
    bool over_images = nb__gemm_over_items(N, threads);
    int chunks = over_images ? threads : 1;
    c->threads = over_images ? 1 : threads;
    int64_t og = c->O / c->groups;
    nb_gemm sizes[3] = {{.dt = x->dtype, .m = og, .n = c->L, .k = c->K},
                        {.dt = x->dtype, .m = og, .n = c->K, .k = c->L},
                        {.dt = x->dtype, .m = c->K, .n = c->L, .k = og}};
    c->ws_size = 0;
    for (int i = 0; i < 3; i++) {
        size_t s = nb__gemm_ws_size(&sizes[i]);
        c->ws_size = s > c->ws_size ? s : c->ws_size;
    }
    size_t ws_bytes = (size_t)chunks * (size_t)c->threads * c->ws_size + 1;
    nb_tensor *cols[256] = {NULL};
    c->cols = cols;
    c->ws = nb__buf_alloc(ws_bytes); /* recycled: no fresh pages per call */
    size_t bsum_bytes = c->db ? sizeof(double) * (size_t)(N * c->O) : 0;
    if (c->db) c->bsum = nb__buf_alloc(bsum_bytes);
    size_t gm_bytes = c->ymask ? (size_t)chunks * (size_t)(c->O * c->L) * c->es : 0;
    if (c->ymask) c->gm = nb__buf_alloc(gm_bytes);
    nb_status st = c->ws && (c->bsum || !c->db) && (c->gm || !c->ymask) ? NB_OK : NB_ERR_OOM;
    for (int k = 0; k < chunks && st == NB_OK && !c->pointwise; k++)
        if (!(cols[k] = nb__tensor_new((int64_t[]){1, c->C * KH * KW, c->L}, 3, x->dtype, x->storage->device)))
            st = NB_ERR_OOM;
    bool f32 = x->dtype == NB_F32 && !c->pointwise;
    if (st == NB_OK && f32 && (c->y || c->dwi)) st = nb__cpu_win_prepare(&c->unfold, NB_OP_UNFOLD, c->H, c->W, NULL, &c->win, false);
    if (st == NB_OK && f32 && c->dx) st = nb__cpu_win_prepare(&c->fold, NB_OP_FOLD, c->H, c->W, NULL, &c->win, false);
    atomic_store(&c->status, NB_OK);
    if (st == NB_OK) nb__parallel_chunks(N, chunks, images, c);
    if (st == NB_OK) st = (nb_status)atomic_load(&c->status);
    if (st == NB_OK && c->db) bias_sums(c, N);
    if (c->bsum) nb__buf_free(c->bsum, bsum_bytes);
    if (c->gm) nb__buf_free(c->gm, gm_bytes);
    nb__cpu_win_release(&c->unfold);
    nb__cpu_win_release(&c->fold);
    for (int k = 0; k < chunks; k++) nb_release(cols[k]);
    if (c->ws) nb__buf_free(c->ws, ws_bytes);
    return st;
}

nb_status nb__cpu_conv2d(nb_tensor *y, const nb_tensor *x, const nb_tensor *w, const nb_tensor *b,
                         const nb_window2d *win, int64_t groups, bool relu) {
    conv_ctx c = {.x = x, .w = w, .b = b, .y = y, .win = *win, .groups = groups, .relu = relu};
    return run(&c);
}

nb_status nb__cpu_conv2d_backward(nb_tensor *dx, nb_tensor *dwi, nb_tensor *db, const nb_tensor *x, const nb_tensor *w,
                                  const nb_tensor *g, const nb_tensor *y, const nb_window2d *win, int64_t groups) {
    conv_ctx c = {.x = x, .w = w, .g = g, .ymask = y, .dx = dx, .dwi = dwi, .db = db, .win = *win, .groups = groups};
    return run(&c);
}
