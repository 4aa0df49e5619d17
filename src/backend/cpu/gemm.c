/*
 * gemm.c — the CPU backend's GEMM driver: Goto/BLIS-style cache blocking
 * around the per-ISA register tiles and packing of kern_gemm_template.c,
 * threaded over tiles of C.
 *
 * Loops, outermost first, for one thread's block of C (Goto & van de Geijn,
 * "Anatomy of high-performance matrix multiplication", TOMS 2008, with the
 * roles of A and B swapped because our tiles are row-major):
 *   jc over n by NC
 *   pc over k by kc   kc = k split into equal blocks of at most KC;
 *                     B block (kc x NC) packed, stays in L2
 *   ic over m by MC   A block (MC x kc) packed
 *   ir over MC by mr  A micro-panel (kc x mr) stays in L1
 *   jr over NC by nr  B micro-panels stream from L2 through the tile kernel
 * Threads take disjoint rectangles of C (a grid of whole tiles) and pack
 * their own operands; K is never split, so every C element is the same FMA
 * chain for any thread count (B5).
 *
 * A thin C (n < nr, m > n: a weight gradient with few columns, a classifier
 * layer) is computed as C^T = B^T A^T, its tiles written back transposed, so
 * the wide side fills the nr-wide tiles instead of padding them.  Each
 * element is still fma(a, b, acc) in k order: the same bits either way.
 *
 * An addend (nb_gemm.add: a bias, the c of addmm) is added to each tile
 * right after its last k block is stored, while the tile is in L1, and then
 * relu applied where nb_gemm.relu asks (the activation after a layer).
 */
#include "gemm.h"
#include "kernels.h"
#include "pool.h"

#include <string.h>

/* Cache blocks in elements, per dtype slot (f32, f64): the A micro-panel
 * (KC x mr, 16 KiB) fits a 32 KiB L1d, the B block (KC x NC) a 1 MiB L2.
 * Chosen by sweeping KC 128..512, NC 256..1024, MC 64..256 on Zen 4 (best of
 * 25 runs in CPU time; see bench/RESULTS.md, section 4). */
static const int64_t KC[2] = {512, 256}, MC[2] = {128, 128}, NC[2] = {512, 512};
/* Blocks of at most this many rows read row-major B in place (measured: a
 * gain up to about 384 rows, a loss from 512). */
enum { DIRECT_M = 256 };

enum { TILE_MAX = 2048 }; /* elements of the widest register tile (edge buffer) */

/* The product as computed: g itself, or (thin C) its transpose, whose C(i, j)
 * lies at c[i*crs + j*ccs]. */
typedef struct gemm_plan {
    nb_gemm g;
    int64_t crs, ccs;
} gemm_plan;

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int slot_of(nb_dtype dt) { return dt == NB_F64; }

/* k split into equal blocks of at most KC: fewer ragged C updates. */
static int64_t kc_of(int s, int64_t k) { return ceil_div(k, ceil_div(k, KC[s])); }

static gemm_plan plan_of(const nb_gemm *g) {
    const nb_gemm_kern *kk = &nb__cpu_kernels()->gemm[slot_of(g->dt)];
    if (g->n >= kk->nr || g->m <= g->n) return (gemm_plan){*g, g->ldc, 1};
    nb_gemm t = *g;
    t.m = g->n;
    t.n = g->m;
    t.a = g->b;
    t.ars = g->bcs;
    t.acs = g->brs;
    t.b = g->a;
    t.brs = g->acs;
    t.bcs = g->ars;
    t.ca = g->cb;
    t.cb = g->ca;
    t.adrs = g->adcs;
    t.adcs = g->adrs;
    return (gemm_plan){t, 1, g->ldc};
}

size_t nb__gemm_ws_size(const nb_gemm *g0) {
    gemm_plan pl = plan_of(g0);
    const nb_gemm *g = &pl.g;
    int s = slot_of(g->dt);
    const nb_gemm_kern *kk = &nb__cpu_kernels()->gemm[s];
    int64_t kc = g->k > 0 ? kc_of(s, g->k) : 0;
    int64_t mc = ceil_div(min64(MC[s], g->m), kk->mr) * kk->mr;
    int64_t nc = ceil_div(min64(NC[s], g->n), kk->nr) * kk->nr;
    size_t bytes = (size_t)((mc + nc) * kc) * nb_dtype_size(g->dt);
    return (bytes + 63) & ~(size_t)63;
}

/* One tile of C at c (element strides crs, ccs) with rows x cols valid, by
 * the full or (at most nr/2 columns) the half-width kernel: straight into C
 * when that kernel's tile is whole with contiguous rows, else through a
 * buffer so the kernel still writes its full tile. */
static void tile_at(const nb_gemm_kern *kk, size_t es, int64_t kc, const char *ap, const char *bp, int64_t ldb,
                    char *c, int64_t crs, int64_t ccs, int64_t rows, int64_t cols, bool accumulate) {
    bool half = 2 * cols <= kk->nr; /* a ragged last panel: the half-width tile */
    void (*tile)(int64_t, const void *, const void *, int64_t, void *, int64_t, bool) = half ? kk->tile_half : kk->tile;
    if (rows == kk->mr && cols == (half ? kk->nr / 2 : kk->nr) && ccs == 1) {
        tile(kc, ap, bp, ldb, c, crs, accumulate);
        return;
    }
    _Alignas(64) char buf[TILE_MAX * sizeof(double)];
    memset(buf, 0, (size_t)(kk->mr * kk->nr) * es);
    size_t row_bytes = (size_t)cols * es, buf_ld = (size_t)kk->nr * es;
    int64_t rb = crs * (int64_t)es, cb = ccs * (int64_t)es;
    for (int64_t i = 0; i < rows && accumulate; i++) {
        if (ccs == 1) memcpy(buf + i * buf_ld, c + i * rb, row_bytes);
        else for (int64_t j = 0; j < cols; j++) memcpy(buf + i * buf_ld + j * es, c + i * rb + j * cb, es);
    }
    tile(kc, ap, bp, ldb, buf, kk->nr, accumulate);
    for (int64_t i = 0; i < rows; i++) {
        if (ccs == 1) memcpy(c + i * rb, buf + i * buf_ld, row_bytes);
        else for (int64_t j = 0; j < cols; j++) memcpy(c + i * rb + j * cb, buf + i * buf_ld + j * es, es);
    }
}

/* The epilogue: C(i, j) += add(i, j) over rows x cols of C at c (strides crs, ccs) and of the addend
 * at a (strides ars, acs), in the dtype's own addition (as the elementwise add kernel), in the
 * widest vectors the CPU has (one addition per element: the same bits in every clone). */
#define GEMM_ADD_TILE(NAME, T)                                                                      \
    NB_SIMD_CLONES static void NAME(char *c_, int64_t crs, int64_t ccs, const char *a_, int64_t ars, int64_t acs,   \
                     int64_t rows, int64_t cols) {                                                  \
        for (int64_t i = 0; i < rows; i++) {                                                        \
            T *restrict c = (T *)c_ + i * crs;                                                      \
            const T *restrict a = (const T *)a_ + i * ars;                                          \
            if (ccs == 1 && acs == 0)                                                               \
                for (int64_t j = 0; j < cols; j++) c[j] += a[0];                                    \
            else if (ccs == 1 && acs == 1)                                                          \
                for (int64_t j = 0; j < cols; j++) c[j] += a[j];                                    \
            else                                                                                    \
                for (int64_t j = 0; j < cols; j++) c[j * ccs] += a[j * acs];                        \
        }                                                                                           \
    }
GEMM_ADD_TILE(add_tile_f32, float)
GEMM_ADD_TILE(add_tile_f64, double)
#undef GEMM_ADD_TILE

/* C(i, j) = C(i, j) < 0 ? 0 : C(i, j) over rows x cols of C at c: the RELU op's expression. */
#define GEMM_RELU_TILE(NAME, T)                                                                     \
    NB_SIMD_CLONES static void NAME(char *c_, int64_t crs, int64_t ccs, int64_t rows, int64_t cols) { \
        for (int64_t i = 0; i < rows; i++) {                                                        \
            T *restrict c = (T *)c_ + i * crs;                                                      \
            if (ccs == 1)                                                                           \
                for (int64_t j = 0; j < cols; j++) c[j] = c[j] < 0 ? (T)0 : c[j];                   \
            else                                                                                    \
                for (int64_t j = 0; j < cols; j++) c[j * ccs] = c[j * ccs] < 0 ? (T)0 : c[j * ccs]; \
        }                                                                                           \
    }
GEMM_RELU_TILE(relu_tile_f32, float)
GEMM_RELU_TILE(relu_tile_f64, double)
#undef GEMM_RELU_TILE

/* The epilogue of C's tile at row i, column j of the product (c: its first element): the addend,
 * then relu. */
static void epilogue_tile(const nb_gemm *g, int64_t i, int64_t j, char *c, int64_t crs, int64_t ccs, int64_t rows,
                          int64_t cols) {
    const char *a = g->add ? (const char *)g->add + (i * g->adrs + j * g->adcs) * (int64_t)nb_dtype_size(g->dt) : NULL;
    if (a && g->dt == NB_F32) add_tile_f32(c, crs, ccs, a, g->adrs, g->adcs, rows, cols);
    else if (a) add_tile_f64(c, crs, ccs, a, g->adrs, g->adcs, rows, cols);
    if (g->relu && g->dt == NB_F32) relu_tile_f32(c, crs, ccs, rows, cols);
    else if (g->relu) relu_tile_f64(c, crs, ccs, rows, cols);
}

/* C[i0:i1, j0:j1] on the calling thread, packing into ws.  When B's rows are
 * contiguous and the block has at most DIRECT_M rows, the tiles read whole
 * nr-column panels of B in place: too few A panels would reuse a packed copy
 * to pay for it.  A ragged last panel is still packed (zero-padded). */
static void gemm_block(const gemm_plan *pl, int64_t i0, int64_t i1, int64_t j0, int64_t j1, char *ws) {
    const nb_gemm *g = &pl->g;
    int s = slot_of(g->dt);
    const nb_gemm_kern *kk = &nb__cpu_kernels()->gemm[s];
    int64_t es = (int64_t)nb_dtype_size(g->dt), kcb = kc_of(s, g->k);
    bool direct = !g->cb && g->bcs == 1 && i1 - i0 <= DIRECT_M;
    char *bpack = ws, *apack = ws + ceil_div(min64(NC[s], g->n), kk->nr) * kk->nr * kcb * es;
    for (int64_t jc = j0; jc < j1; jc += NC[s]) {
        int64_t nc = min64(NC[s], j1 - jc), nd = direct ? nc - nc % kk->nr : 0; /* nd: read in place */
        for (int64_t pc = 0; pc < g->k; pc += kcb) {
            int64_t kc = min64(kcb, g->k - pc);
            const char *bsrc = g->cb ? NULL : (const char *)g->b + (pc * g->brs + jc * g->bcs) * es;
            if (g->cb)
                nb__gemm_pack_codes(g->cb, (float *)bpack, jc, nc, pc, kc, kk->nr);
            else if (nd < nc)
                kk->pack_b(bpack + nd * kc * es, bsrc + nd * g->bcs * es, g->bcs, g->brs, nc - nd, kc);
            bool epilogue = (g->add || g->relu) && pc + kc == g->k;
            for (int64_t ic = i0; ic < i1; ic += MC[s]) {
                int64_t mc = min64(MC[s], i1 - ic);
                if (g->ca)
                    nb__gemm_pack_codes(g->ca, (float *)apack, ic, mc, pc, kc, kk->mr);
                else
                    kk->pack_a(apack, (const char *)g->a + (ic * g->ars + pc * g->acs) * es, g->ars, g->acs, mc, kc);
                for (int64_t ir = 0; ir < mc; ir += kk->mr)
                    for (int64_t jr = 0; jr < nc; jr += kk->nr) {
                        char *ct = (char *)g->c + ((ic + ir) * pl->crs + (jc + jr) * pl->ccs) * es;
                        int64_t rows = min64(kk->mr, mc - ir), cols = min64(kk->nr, nc - jr);
                        tile_at(kk, (size_t)es, kc, apack + ir * kc * es, jr < nd ? bsrc + jr * es : bpack + jr * kc * es,
                                jr < nd ? g->brs : kk->nr, ct, pl->crs, pl->ccs, rows, cols, pc > 0);
                        if (epilogue) epilogue_tile(g, ic + ir, jc + jr, ct, pl->crs, pl->ccs, rows, cols);
                    }
            }
        }
    }
}

typedef struct part_ctx {
    const gemm_plan *pl;
    const nb_gemm *g; /* &pl->g */
    char *ws;
    size_t ws_stride;
    int tm, tn;            /* thread grid over (m, n) */
    int64_t pm, pn, mr, nr; /* tile counts and sizes */
} part_ctx;

static void gemm_part(void *p, int64_t lo, int64_t hi, int tid) {
    (void)tid; /* the chunk index r picks the workspace slot */
    const part_ctx *c = p;
    for (int64_t r = lo; r < hi; r++) {
        int64_t ti = r / c->tn, tj = r % c->tn;
        int64_t i0 = ti * c->pm / c->tm * c->mr, i1 = min64(c->g->m, (ti + 1) * c->pm / c->tm * c->mr);
        int64_t j0 = tj * c->pn / c->tn * c->nr, j1 = min64(c->g->n, (tj + 1) * c->pn / c->tn * c->nr);
        gemm_block(c->pl, i0, i1, j0, j1, c->ws + (size_t)r * c->ws_stride);
    }
}

/* Thread grid tm x tn <= threads minimizing the slowest thread's estimated
 * cycles: its tiles' FMAs (16 lanes a cycle), its packing (0.4 cycles an
 * element, measured; each thread packs all the A rows and B columns of its
 * rectangle, so a split re-packs the other operand), and a fixed cost for
 * waking the pool. */
static void choose_grid(part_ctx *c, int threads) {
    const nb_gemm *g = c->g;
    double best = 0;
    c->tm = c->tn = 1;
    for (int tm = 1; tm <= threads && tm <= c->pm; tm++)
        for (int tn = 1; tm * tn <= threads && tn <= c->pn; tn++) {
            double rows = (double)ceil_div(c->pm, tm) * (double)c->mr;
            double cols = (double)ceil_div(c->pn, tn) * (double)c->nr;
            double cost = rows * cols * (double)g->k / 16 + 0.4 * (rows + cols) * (double)g->k +
                          (tm * tn > 1 ? 20000.0 : 0.0);
            if (best == 0 || cost < best) {
                best = cost;
                c->tm = tm;
                c->tn = tn;
            }
        }
}

void nb__gemm(const nb_gemm *g0, void *ws, int threads) {
    size_t es = nb_dtype_size(g0->dt);
    if (g0->m == 0 || g0->n == 0) return;
    if (g0->k == 0) { /* zeros, plus the epilogue */
        for (int64_t i = 0; i < g0->m; i++) memset((char *)g0->c + i * g0->ldc * (int64_t)es, 0, (size_t)g0->n * es);
        epilogue_tile(g0, 0, 0, g0->c, g0->ldc, 1, g0->m, g0->n);
        return;
    }
    gemm_plan pl = plan_of(g0);
    const nb_gemm *g = &pl.g;
    const nb_gemm_kern *kk = &nb__cpu_kernels()->gemm[slot_of(g->dt)];
    NB_ASSERT(kk->mr * kk->nr <= TILE_MAX);
    part_ctx c = {.pl = &pl, .g = g, .ws = ws, .ws_stride = nb__gemm_ws_size(g0), .mr = kk->mr, .nr = kk->nr,
                  .pm = ceil_div(g->m, kk->mr), .pn = ceil_div(g->n, kk->nr)};
    choose_grid(&c, threads < 1 ? 1 : threads);
    nb__parallel_chunks(c.tm * c.tn, c.tm * c.tn, gemm_part, &c);
}
