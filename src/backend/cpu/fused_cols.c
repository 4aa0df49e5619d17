/*
 * fused_cols.c — the CPU backend's column kernels (backend/fused.h, lead):
 * elementwise ops and sums over the domain's leading axes in one pass down
 * its columns, e.g. a bias gradient sum(where(y > 0, g, 0), 0) that also
 * writes the where.
 *
 * The kept positions (the columns) are cut into tiles of up to CT_MAX
 * consecutive columns along the innermost kept axis; the pool takes the
 * tiles.  For one tile: the per-column (ROW) instructions that need no sum
 * run once over the tile; then every row of the leading axes, in order,
 * runs the FULL instructions over the tile's columns: one call of their
 * kernel compiled at run time (jit.h, as a row kernel's stage), or without
 * a compiler one call per instruction of the eager op's per-ISA kernel
 * (fused.c's interpreter); the values summed are
 * added into double accumulators exactly as the eager column sum adds a
 * contiguous [R, K] tensor (cpu_backend.c: groups of four rows pairwise
 * through the same acc kernel, blocks of 64 rows added in order), so the
 * bits are eager's; then the sums are rounded to their dtype and the
 * per-column instructions that read them run over the tile.  FULL values
 * never depend on a sum (the fusion pass keeps such readers out), so one
 * pass suffices.
 */
#include "fused_plan.h"
#include "pool.h"
#include "../../ops/op_eval.h"

#include <string.h>

enum {
    CT_MAX = TILE, /* columns of a tile: 4 KiB of f32 a row (1 KiB rows were 1.5x slower to read) */
    PREFETCH_BYTES = 8192, /* how far ahead of the current row the FULL loads are prefetched */
    GROUP = 4,    /* rows the acc kernel adds pairwise (cpu_backend.c's column sum) */
    BLOCK = 64,   /* rows summed apart before they join the running sum (the same) */
};

/* A call's geometry: R rows (the leading axes, walked in order), K columns (the kept axes, the
 * innermost of them cut into tiles of ct); operand strides in bytes. */
typedef struct fk_cols {
    fk_plan *P;
    int64_t R, K, ct, ntile_line; /* tiles per line of the innermost kept axis */
    int64_t tiles, nblocks;       /* tiles in all; blocks of BLOCK rows (the last may be partial) */
    int nl, nk;
    int64_t lshape[NB_MAX_DIMS], lstr[NB_FK_MAX_IO][NB_MAX_DIMS];
    int64_t kshape[NB_MAX_DIMS], kstr[NB_FK_MAX_IO][NB_MAX_DIMS];
    int nsum;                     /* reductions (their accumulators, in instruction order) */
    int16_t sum_instr[NB_FK_MAX_INSTR];
    size_t chunk_bytes;           /* scratch of one chunk: row buffers, per-column values, sums */
    char *scratch;
    fk_stage *S;                  /* the FULL instructions compiled at run time; NULL: interpreted */
    bool grouped;                 /* S runs once per grows rows (see cols_geometry) */
    int64_t grows;                /* rows of a group: GROUP, or (grouped) a multiple of it dividing BLOCK */
    int64_t nparts, prows;        /* each tile's rows in nparts parts of prows (a multiple of BLOCK) */
    double *blocks;               /* nparts > 1: each tile's block sums, [tile][block][nsum * ct] */
    bool finishing;               /* cols_chunk's second pass (nparts > 1) */
} fk_cols;

/* Axes [d0, d1) of shape coalesced where every operand's strides allow, size-1 axes dropped:
 * into n, sh and st (byte strides per operand). */
static void coalesce(const fk_plan *P, const int64_t *shape, int d0, int d1, const nb_tensor *const *ts, int *n,
                     int64_t *sh, int64_t (*st)[NB_MAX_DIMS]) {
    *n = 0;
    for (int d = d0; d < d1; d++) {
        if (shape[d] == 1) continue;
        bool merge = *n > 0;
        for (int o = 0; o < P->nops && merge; o++)
            merge = st[o][*n - 1] == ts[o]->stride[d] * (int64_t)nb_dtype_size(ts[o]->dtype) * shape[d];
        if (merge) sh[*n - 1] *= shape[d];
        else sh[(*n)++] = shape[d];
        for (int o = 0; o < P->nops; o++) st[o][*n - 1] = ts[o]->stride[d] * (int64_t)nb_dtype_size(ts[o]->dtype);
    }
    if (*n == 0) {
        *n = 1;
        sh[0] = 1;
        for (int o = 0; o < P->nops; o++) st[o][0] = 0;
    }
}

/* The geometry of P over shape[ndim]; false when the eager ops would not sum the way this kernel
 * does (one column, a summed value in memory that is not contiguous) or a FULL instruction reads
 * a sum (a plan the fusion pass does not make). */
static bool cols_geometry(fk_cols *C, const int64_t *shape, int ndim, const nb_tensor *const *ts) {
    fk_plan *P = C->P;
    const nb_fkernel *k = P->k;
    if (P->nstage != 1) return false;
    C->R = C->K = 1;
    for (int d = 0; d < ndim; d++) {
        if (d < k->nred) C->R *= shape[d];
        else C->K *= shape[d];
    }
    if (C->K < 2) return false; /* eager sums a single column as a run, not as columns */
    coalesce(P, shape, 0, k->nred, ts, &C->nl, C->lshape, C->lstr);
    coalesce(P, shape, k->nred, ndim, ts, &C->nk, C->kshape, C->kstr);
    C->nsum = 0;
    for (int j = 0; j < k->ninstr; j++) {
        if (nb__ops[k->instr[j].op].kind != NB_KIND_REDUCE) continue;
        int v = k->instr[j].in[0], o = nb__cpu_fk_operand(P, v);
        if (k->instr[j].op != NB_OP_SUM || nb__fk_level(k, v) != NB_FL_FULL) return false;
        if (o >= 0 && !nb_is_contiguous(ts[o])) return false;
        C->sum_instr[C->nsum++] = (int16_t)j;
    }
    /* tiles: one per thread when the call is large enough to share (4 per thread, for balance,
     * made tiles of 16 columns over [4096, 256]: a call per 16 elements of a row, 2.3x the time);
     * a short line (GROUP rows of it fit a tile buffer) is one tile, its rows cut into parts
     * instead where there are fewer tiles than threads (tiles of 32 columns over [16384, 64]
     * took 1.3-2x the time of one tile grouped, on one thread) */
    int64_t line = C->kshape[C->nk - 1], lines = C->K / line, most = (int64_t)nb_get_num_threads();
    int64_t want = C->R * C->K / 16384;
    want = want < 1 ? 1 : want > most ? most : want;
    C->ct = CT_MAX;
    bool short_line = line * GROUP <= TILE;
    while (C->ct > 16 && !(short_line && C->ct / 2 < line) && lines * ((line + C->ct - 1) / C->ct) < want) C->ct /= 2;
    if (C->ct > line) C->ct = line; /* a short line: its own width, not CT_MAX's scratch to clear */
    C->ntile_line = (line + C->ct - 1) / C->ct;
    C->tiles = lines * C->ntile_line;
    C->nblocks = (C->R + BLOCK - 1) / BLOCK;
    C->nparts = C->tiles >= want ? 1 : (want + C->tiles - 1) / C->tiles;
    for (int j = 0; j < k->ninstr && C->nparts > 1; j++) /* every part runs these: none may write an output */
        if (k->instr[j].level == NB_FL_ROW && nb__ops[k->instr[j].op].kind != NB_KIND_REDUCE && P->stage[j] == 0 &&
            nb__cpu_fk_operand(P, k->nin + j) >= 0)
            C->nparts = 1;
    if (C->nparts > C->nblocks) C->nparts = C->nblocks;
    C->prows = (C->nblocks + C->nparts - 1) / C->nparts * BLOCK;
    C->nparts = (C->R + C->prows - 1) / C->prows;
    /* a tile of a whole short line (GROUP of them fit a tile buffer) over one row axis and one kept
     * axis, every FULL load and output running on from row to row: the FULL instructions of GROUP
     * rows in one call (cols_group; with tiles narrower than the line, expanding the loads into
     * rows of the tile cost more than the calls it saves: 0.38 -> 0.75 ms over [2048, 512]) */
    C->grouped = C->nl == 1 && C->nk == 1 && C->ct == line && line * GROUP <= TILE;
    for (int o = 0; o < P->nops && C->grouped; o++) {
        int v = o < k->nin ? o : k->out_val[o - k->nin];
        C->grouped = nb__fk_level(k, v) != NB_FL_FULL || (o >= k->nin && P->home[v] != H_OUT) ||
                     C->lstr[o][0] == line * C->kstr[o][0];
    }
    return true;
}

/* Once C->grouped is settled: rows of a group and the scratch of a chunk.  Grouped, as many rows
 * a call as a tile buffer holds, a power of 2 dividing BLOCK (the acc kernel adds any multiple of
 * GROUP rows as it adds each GROUP of them). */
static void cols_groups(fk_cols *C) {
    const fk_plan *P = C->P;
    C->grows = GROUP;
    while (C->grouped && C->grows * 2 <= BLOCK && C->grows * 2 * C->ct <= TILE) C->grows *= 2;
    C->chunk_bytes = ((size_t)P->nrowbuf * (size_t)C->grows + (size_t)P->nrowv + 2 * (size_t)C->nsum) * (size_t)C->ct * 8;
}

/* The per-column instructions of the tile that need no sum (after: those that do). */
static void tile_row_instrs(const fk_cols *C, bool after, fk_val *v, int64_t n, char (*stage)[BUF_BYTES]) {
    const fk_plan *P = C->P;
    const nb_fkernel *k = P->k;
    for (int j = 0; j < k->ninstr; j++) {
        const nb_finstr *I = &k->instr[j];
        if (I->level != NB_FL_ROW || nb__ops[I->op].kind == NB_KIND_REDUCE || (P->stage[j] > 0) != after) continue;
        fk_val a[3];
        for (int i = 0; i < 3; i++) a[i] = I->in[i] >= 0 ? v[I->in[i]] : (fk_val){0};
        nb__cpu_fk_exec(P, I, n, v[k->nin + j], a, stage);
    }
}

/* Prefetch the FULL loads' n columns `ahead` rows after the row at offsets roff: a tile's row is
 * one short run (the next a whole row further), too short for the hardware prefetcher to run
 * ahead; with it, a sum of relu(x) * 0.5 over the columns of [8192, 4096] f32 took 12 -> 10 ms
 * (bench/RESULTS.md §19). */
static void prefetch_row(const fk_cols *C, const int64_t *roff, const int64_t *koff, int64_t ahead, int64_t n) {
    const fk_plan *P = C->P;
    for (int o = 0; o < P->k->nin; o++) {
        if (P->k->in_level[o] != NB_FL_FULL) continue;
        const char *p = P->base[o] + roff[o] + ahead * C->lstr[o][0] + koff[o];
        for (int64_t b = 0; b < n * P->es[o]; b += 64) __builtin_prefetch(p + b);
    }
}

/* The FULL instructions of one row of the tile (n columns) in one call of their compiled kernel S:
 * each operand where v says (per-column values along the columns, UNIFORM ones their element). */
static void full_compiled(const fk_stage *S, const fk_val *v, int64_t n) {
    char *ptr[NB_FK_MAX_IO];
    int64_t bs[NB_FK_MAX_IO];
    const void *uni[NB_FK_MAX_IO];
    for (int o = 0; o < S->sub.nops; o++) {
        ptr[o] = v[S->src[o]].p;
        bs[o] = v[S->src[o]].s;
        uni[o] = ptr[o]; /* read for the UNIFORM loads only */
    }
    nb__cpu_fk_stage_run(S, n, ptr, bs, uni, false);
}

/* The FULL instructions of the g rows from the one v points at (a tile of a whole line of n
 * columns) in one call of S: loads and outputs in place, the row buffers' grows rows as they lie,
 * per-column values expanded along the rows. */
static void cols_group(const fk_cols *C, const fk_val *v, int64_t n, int64_t g, char (*scratch)[BUF_BYTES]) {
    fk_val x[NB_FK_MAX_IO];
    for (int o = 0; o < C->S->sub.nops; o++) x[o] = v[C->S->src[o]];
    nb__cpu_fk_stage_rows(C->P, C->S, x, g, n, scratch, 0, false);
}

/* Tile t: its columns' offsets into koff, their per-column values into v (those computed, in
 * rowv's slots); returns its column count. */
static int64_t tile_at(const fk_cols *C, int64_t t, int64_t *koff, fk_val *v, char *rowv) {
    const fk_plan *P = C->P;
    int64_t line = t / C->ntile_line, c0 = t % C->ntile_line * C->ct, len = C->kshape[C->nk - 1];
    for (int o = 0; o < P->nops; o++) koff[o] = c0 * C->kstr[o][C->nk - 1];
    for (int d = C->nk - 2; d >= 0; line /= C->kshape[d--])
        for (int o = 0; o < P->nops; o++) koff[o] += line % C->kshape[d] * C->kstr[o][d];
    for (int val = 0; val < P->nval; val++) {
        if (nb__fk_level(P->k, val) != NB_FL_ROW) continue;
        int o = nb__cpu_fk_operand(P, val);
        v[val] = o >= 0 ? (fk_val){P->base[o] + koff[o], C->kstr[o][C->nk - 1]}
                        : (fk_val){rowv + P->hidx[val] * C->ct * 8, P->es[val]};
    }
    return len - c0 < C->ct ? len - c0 : C->ct;
}

/* The tile's sums (acc) rounded to their dtype as eager stores them, then the per-column
 * instructions that read them. */
static void tile_finish(const fk_cols *C, fk_val *v, int64_t n, const double *acc, char (*stage)[BUF_BYTES]) {
    const nb_fkernel *k = C->P->k;
    for (int i = 0; i < C->nsum; i++) {
        int val = k->nin + C->sum_instr[i];
        for (int64_t e = 0; e < n; e++) nb__store(v[val].p + e * v[val].s, k->instr[C->sum_instr[i]].dtype, acc[i * C->ct + e]);
    }
    tile_row_instrs(C, true, v, n, stage);
}

/* Items [lo, hi) (chunk `chunk`: its own scratch): item i is part i % nparts of the rows of tile
 * i / nparts.  One part: the tile, finished.  Several: each part's block sums into C->blocks; then
 * (C->finishing, items = tiles) each tile's blocks added in order, as one part adds them, and the
 * tile finished. */
static void cols_chunk(void *ctx, int64_t lo, int64_t hi, int chunk) {
    const fk_cols *C = ctx;
    const fk_plan *P = C->P;
    const nb_fkernel *k = P->k;
    const nb_cpu_kernels *kt = P->kt;
    _Alignas(64) char scratch[MAX_SCRATCH][BUF_BYTES];
    _Alignas(64) char stage[4][BUF_BYTES];
    int64_t ct = C->ct, slot = ct * 8, nacc = C->nsum * ct; /* slot: one column's worth of 8-byte elements */
    int64_t ahead = PREFETCH_BYTES / (ct * 4) + 1;          /* rows ahead of the current one to prefetch */
    int64_t nblocks = C->nblocks;
    char *rowbuf = C->scratch + (size_t)chunk * C->chunk_bytes;
    char *rowv = rowbuf + (size_t)P->nrowbuf * (size_t)C->grows * (size_t)slot;
    double *acc = (double *)(rowv + (size_t)P->nrowv * (size_t)slot), *blk = acc + nacc;
    fk_val v[MAX_VALS];
    for (int j = 0; j < P->nval; j++)
        if (nb__fk_level(k, j) == NB_FL_UNIFORM) v[j] = nb__cpu_fk_uniform(P, j);
    for (int64_t it = lo; it < hi; it++) {
        int64_t t = C->finishing ? it : it / C->nparts, koff[NB_FK_MAX_IO], roff[NB_FK_MAX_IO] = {0}, idx[NB_MAX_DIMS] = {0};
        int64_t n = tile_at(C, t, koff, v, rowv);
        tile_row_instrs(C, false, v, n, stage);
        memset(acc, 0, sizeof(double) * (size_t)(2 * nacc));
        if (C->finishing) {
            for (int64_t b = 0; b < nblocks; b++)
                for (int64_t e = 0; e < nacc; e++) acc[e] += C->blocks[(t * nblocks + b) * nacc + e];
            tile_finish(C, v, n, acc, stage);
            continue;
        }
        int64_t r0 = it % C->nparts * C->prows, r1 = r0 + C->prows < C->R ? r0 + C->prows : C->R;
        for (int64_t d = C->nl - 1, rem = r0; d >= 0; d--) { /* the part's first row */
            idx[d] = rem % C->lshape[d];
            rem /= C->lshape[d];
            for (int o = 0; o < P->nops; o++) roff[o] += idx[d] * C->lstr[o][d];
        }
        bool by_group = C->S && C->grouped; /* an iteration a group of rows (one row axis), else a row */
        for (int64_t r = r0, m; r < r1; r += m) {
            int64_t g = r % C->grows; /* 0 by groups: parts start at whole blocks, grows divides BLOCK */
            m = !by_group ? 1 : r1 - r < C->grows ? r1 - r : C->grows;
            for (int val = 0; val < P->nval; val++) { /* FULL values in memory at the row */
                if (nb__fk_level(k, val) != NB_FL_FULL) continue;
                int o = nb__cpu_fk_operand(P, val);
                if (o >= 0) v[val] = (fk_val){P->base[o] + roff[o] + koff[o], C->kstr[o][C->nk - 1]};
                else if (P->home[val] == H_ROWBUF) /* grows rows of ct elements */
                    v[val] = (fk_val){rowbuf + P->hidx[val] * C->grows * slot + g * ct * P->es[val], P->es[val]};
            }
            /* (by groups, the loads run on from row to row: the m rows ahead are one run) */
            if (C->nl == 1 && r + ahead < C->R) prefetch_row(C, roff, koff, ahead, n * m);
            if (by_group) cols_group(C, v, n, m, scratch);
            else if (C->S) full_compiled(C->S, v, n);
            else nb__cpu_fk_interpret(P, 0, P->stage_start[1], n, v, scratch, stage);
            int64_t last = r + m - 1, gl = last % C->grows; /* the iteration's last row, its place in its group */
            if (gl == C->grows - 1 || last == r1 - 1) /* a group of rows into each sum's block */
                for (int i = 0; i < C->nsum; i++) {
                    int x = k->instr[C->sum_instr[i]].in[0], o = nb__cpu_fk_operand(P, x);
                    const char *src = o >= 0 ? P->base[o] + koff[o] + (last - gl) * C->K * P->es[x]
                                             : rowbuf + P->hidx[x] * C->grows * slot;
                    int64_t ld = o >= 0 ? C->K : ct;
                    if (P->es[x] == 4) kt->acc_f32(n, gl + 1, ld, blk + i * ct, (const float *)src);
                    else kt->acc_f64(n, gl + 1, ld, blk + i * ct, (const double *)src);
                }
            if ((last + 1) % BLOCK == 0 || last == r1 - 1) { /* a block into the running sums, or kept */
                double *to = C->nparts > 1 ? C->blocks + (t * nblocks + last / BLOCK) * nacc : acc;
                for (int64_t e = 0; e < nacc; e++) {
                    to[e] = C->nparts > 1 ? blk[e] : to[e] + blk[e];
                    blk[e] = 0;
                }
            }
            if (m > 1) { /* by groups: one row axis */
                for (int o = 0; o < P->nops; o++) roff[o] += m * C->lstr[o][0];
                idx[0] += m;
            } else
                for (int d = C->nl - 1; d >= 0; d--) { /* the next row */
                    for (int o = 0; o < P->nops; o++) roff[o] += C->lstr[o][d];
                    if (++idx[d] < C->lshape[d]) break;
                    for (int o = 0; o < P->nops; o++) roff[o] -= C->lshape[d] * C->lstr[o][d];
                    idx[d] = 0;
                }
        }
        if (C->nparts == 1) tile_finish(C, v, n, acc, stage);
    }
}

nb_status nb__cpu_fused_cols(fk_plan *P, const int64_t *shape, int ndim, const nb_tensor *const *ts, int *ran) {
    fk_cols C = {.P = P};
    if (!cols_geometry(&C, shape, ndim, ts)) return NB_ERR_UNSUPPORTED;
    int64_t tiles = C.tiles, items = tiles * C.nparts, chunks = C.R * C.K / 16384;
    int64_t most = 4 * (int64_t)nb_get_num_threads();
    chunks = chunks < 1 ? 1 : chunks > most ? most : chunks > items ? items : chunks;
    /* the FULL instructions compiled at run time, where a compiler runs */
    C.S = nb__jit_on() && P->stage_start[1] > 0 ? nb__malloc(sizeof *C.S) : NULL;
    if (C.S && !(nb__cpu_fk_stage_kernel(P, 0, C.S) && (C.S->fn = nb__jit_get(&C.S->k)))) {
        nb__free(C.S);
        C.S = NULL;
    }
    for (int o = 0, nexp = 0; C.S && C.grouped && o < C.S->k.nin; o++) { /* at most MAX_SCRATCH expanded */
        nexp += C.S->in_level[o] == NB_FL_FULL && nb__fk_level(P->k, C.S->src[o]) == NB_FL_ROW;
        C.grouped = nexp <= MAX_SCRATCH;
    }
    cols_groups(&C);
    size_t bytes = (size_t)chunks * C.chunk_bytes;
    size_t block_bytes = C.nparts > 1 ? (size_t)(tiles * C.nblocks * C.nsum * C.ct) * sizeof(double) : 0;
    C.scratch = nb__buf_alloc(bytes);
    C.blocks = block_bytes ? nb__buf_alloc(block_bytes) : NULL;
    if (!C.scratch || (block_bytes && !C.blocks)) {
        if (C.scratch) nb__buf_free(C.scratch, bytes);
        if (C.blocks) nb__buf_free(C.blocks, block_bytes);
        nb__free(C.S);
        return NB_ERR_OOM;
    }
    nb__parallel_chunks(items, chunks, cols_chunk, &C);
    if (C.nparts > 1) { /* each tile's blocks in order, then its per-column instructions */
        C.finishing = true;
        nb__parallel_chunks(tiles, chunks < tiles ? chunks : tiles, cols_chunk, &C);
    }
    nb__buf_free(C.scratch, bytes);
    if (C.blocks) nb__buf_free(C.blocks, block_bytes);
    *ran = C.S ? NB_FK_RAN_COMPILED : NB_FK_RAN_INTERPRETED;
    nb__free(C.S);
    return NB_OK;
}
