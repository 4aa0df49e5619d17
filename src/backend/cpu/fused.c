/*
 * fused.c — the CPU backend's fused kernels (backend/fused.h): one pass over
 * memory for a chain of elementwise ops and row reductions (column kernels:
 * fused_cols.c, on the same plan and interpreter).  Elementwise
 * kernels, and each stage of a row kernel's elementwise instructions, run as
 * code compiled at run time (jit.h) where a C compiler runs; everything else
 * (and everything without a compiler) on the interpreter below.
 *
 * The domain is walked in tiles of TILE elements.  Every instruction of a
 * tile is one call of the same per-ISA kernel the eager op uses (kernels.h),
 * on (pointer, byte stride) operands: loads are read in place (strided and
 * broadcast operands included), intermediates live in tile buffers that the
 * cache keeps hot, and a value the plan returns is written straight into its
 * output.  So each element is computed exactly as the eager ops compute it,
 * and the kernel reads and writes memory once.
 *
 *  - Elementwise kernels (nred = 0): the domain's axes are coalesced across
 *    all operands (iter.c) and split across the worker pool.
 *  - Row kernels (nred > 0): each row (an index of the outer axes) runs in
 *    stages.  A stage runs its elementwise instructions over the row's
 *    tiles, then its reductions over whole rows kept contiguous in row
 *    buffers — the eager reduction of a contiguous row, so the same bits —
 *    then the per-row instructions that need them.  softmax is three stages
 *    over a row that stays in cache.  Rows are split across the pool.  With
 *    the compiler, a stage is one call per line of its kernel compiled as an
 *    elementwise kernel (the row's ROW values its UNIFORM loads); the
 *    reductions stay the built-in ones.  Short rows (up to TILE / 2
 *    elements) run in groups of TILE / L rows: a stage is one call over the
 *    group, its per-row values expanded along their rows (batch_rows;
 *    softmax over [64, 10] in a quarter of the time a row at a time,
 *    bench/RESULTS.md §29).  Outputs that nothing reads back are stored
 *    past the caches when they outgrow them (stream.c).  Both together:
 *    softmax and layer_norm over [8192, 4096] f32 in 0.87 and 0.82 of the
 *    interpreter's time (bench/RESULTS.md §18).
 *  - UNIFORM values (scalars and ops on them) are computed once per call.
 *
 * Results do not depend on the thread count: every element and every row is
 * computed the same way whichever thread takes it.
 */
#include "../backend.h"
#include "fused_plan.h"
#include "iter.h"
#include "jit.h"
#include "pool.h"
#include "../../ops/op_eval.h"

#include <string.h>

static int dslot(nb_dtype dt) { return dt == NB_F32 ? 0 : 1; }

static bool is_reduce(nb_op op) { return nb__ops[op].kind == NB_KIND_REDUCE; }

/* ---- one instruction on n elements ---- */

/* v as n contiguous elements of es bytes: in place, or copied into buf (broadcast or strided). */
static const char *contiguous(fk_val v, int64_t n, size_t es, char *buf) {
    if (v.s == (int64_t)es) return v.p;
    nb__cpu_stage_move(true, buf, v.p, v.s, n, es);
    return buf;
}

/* The mask kernels (where, comparisons, logical ops) take contiguous operands; `stage` holds
 * four tile buffers for the operands and a strided result. */
static void exec_mask(const fk_plan *P, const nb_finstr *I, int64_t n, fk_val d, const fk_val *a,
                      char (*stage)[BUF_BYTES]) {
    nb_dtype dt0 = nb__fk_dtype(P->k, I->in[0]);
    size_t es0 = nb_dtype_size(dt0), eso = nb_dtype_size(I->dtype);
    int nin = I->op == NB_OP_LOGICAL_NOT ? 1 : I->op == NB_OP_WHERE ? 3 : 2;
    const char *x[3];
    for (int i = 0; i < nin; i++) x[i] = contiguous(a[i], n, I->op == NB_OP_WHERE && i ? eso : es0, stage[i]);
    char *o = d.s == (int64_t)eso ? d.p : stage[3];
    nb__cpu_mask(I->op, n, o, I->dtype, dt0, x, nin);
    if (o != d.p) nb__cpu_stage_move(false, o, d.p, d.s, n, eso); /* a strided result (a ROW value) */
}

void nb__cpu_fk_exec(const fk_plan *P, const nb_finstr *I, int64_t n, fk_val d, const fk_val *a,
                     char (*stage)[BUF_BYTES]) {
    if (I->op == NB_OP_CAST) {
        nb__cpu_convert_row(n, I->dtype, d.p, d.s, nb__fk_dtype(P->k, I->in[0]), a[0].p, a[0].s);
    } else if (I->op == NB_OP_WHERE || nb__op_is_compare(I->op) || nb__op_is_logic(I->op)) {
        exec_mask(P, I, n, d, a, stage);
    } else if (nb__ops[I->op].kind == NB_KIND_UNARY) {
        P->kt->unary[I->op][dslot(I->dtype)](n, d.p, d.s, a[0].p, a[0].s, I->p0, I->p1);
    } else {
        P->kt->binary[I->op][dslot(I->dtype)](n, d.p, d.s, a[0].p, a[0].s, a[1].p, a[1].s);
    }
}

/* ---- the plan: levels, stages, homes ---- */

/* Stages of a row kernel: a FULL instruction runs in the stage after every reduction it
 * depends on; a reduction closes the stage of its input; a ROW instruction runs before the
 * first stage that follows what it needs.  `avail` is the stage from which a value is there. */
static void plan_stages(fk_plan *P) {
    const nb_fkernel *k = P->k;
    int8_t avail[MAX_VALS] = {0};
    int last = 0;
    for (int j = 0; j < k->ninstr; j++) {
        const nb_finstr *I = &k->instr[j];
        int s = 0;
        for (int i = 0; i < 3; i++)
            if (I->in[i] >= 0 && avail[I->in[i]] > s) s = avail[I->in[i]];
        P->stage[j] = (int8_t)s;
        avail[k->nin + j] = (int8_t)(is_reduce(I->op) ? s + 1 : s);
        if (I->level == NB_FL_FULL || is_reduce(I->op)) last = s > last ? s : last;
    }
    P->nstage = last + 1;
    int n = 0; /* FULL instructions grouped by stage, in program order within one */
    for (int s = 0; s < P->nstage; s++) {
        P->stage_start[s] = (int16_t)n;
        for (int j = 0; j < k->ninstr; j++)
            if (k->instr[j].level == NB_FL_FULL && P->stage[j] == s) P->order[n++] = (int16_t)j;
    }
    P->stage_start[P->nstage] = (int16_t)n;
    n = 0; /* ROW instructions by point: the reductions closing stage s - 1, then those of stage s */
    for (int s = 0; s <= P->nstage; s++) {
        P->row_start[s] = (int16_t)n;
        for (int j = 0; j < k->ninstr; j++)
            if (k->instr[j].level == NB_FL_ROW && P->stage[j] == (is_reduce(k->instr[j].op) ? s - 1 : s))
                P->row_order[n++] = (int16_t)j;
    }
    P->row_start[P->nstage + 1] = (int16_t)n;
}

/* Homes: loads in place, outputs in their tensors, UNIFORM values computed once, ROW values
 * in per-row slots, FULL values read by another stage or reduced in row buffers, the rest
 * in tile buffers reused after their last read (in execution order).  False when the
 * kernel needs more tile buffers than the interpreter has. */
static bool plan_homes(fk_plan *P) {
    const nb_fkernel *k = P->k;
    int16_t last[MAX_VALS]; /* position in execution order of the last FULL read */
    int16_t pos[NB_FK_MAX_INSTR] = {0};
    for (int v = 0; v < P->nval; v++) {
        last[v] = -1;
        P->home[v] = v < k->nin ? H_LOAD : k->instr[v - k->nin].level == NB_FL_UNIFORM ? H_UNI
                     : k->instr[v - k->nin].level == NB_FL_ROW                      ? H_ROWV
                                                                                     : H_SCRATCH;
        P->es[v] = (uint8_t)nb_dtype_size(nb__fk_dtype(k, v));
    }
    for (int o = 0; o < k->nout; o++)
        if (P->home[k->out_val[o]] != H_LOAD && P->home[k->out_val[o]] != H_UNI) {
            P->home[k->out_val[o]] = H_OUT;
            P->hidx[k->out_val[o]] = (int16_t)o;
        }
    for (int q = 0; q < P->stage_start[P->nstage]; q++) pos[P->order[q]] = (int16_t)q;
    for (int j = 0; j < k->ninstr; j++) {
        const nb_finstr *I = &k->instr[j];
        for (int i = 0; i < 3; i++) {
            int v = I->in[i];
            if (v < k->nin || P->home[v] != H_SCRATCH) continue;
            /* a FULL value reduced, or read by another stage, must stay for the whole row */
            if (is_reduce(I->op) || (I->level == NB_FL_FULL && P->stage[j] != P->stage[v - k->nin]))
                P->home[v] = H_ROWBUF;
            else if (pos[j] > last[v]) last[v] = pos[j];
        }
    }
    P->nrowbuf = P->nrowv = P->nscratch = 0;
    int16_t owner[MAX_SCRATCH];
    for (int v = 0; v < P->nval; v++) {
        if (P->home[v] == H_ROWBUF) P->hidx[v] = (int16_t)P->nrowbuf++;
        if (P->home[v] == H_ROWV) P->hidx[v] = (int16_t)P->nrowv++;
    }
    for (int q = 0; q < P->stage_start[P->nstage]; q++) { /* linear scan over execution order */
        int v = k->nin + P->order[q];
        if (P->home[v] != H_SCRATCH) continue;
        int s = 0;
        while (s < P->nscratch && last[owner[s]] >= q) s++; /* a buffer whose value was last read before q */
        if (s == P->nscratch) {
            if (P->nscratch == MAX_SCRATCH) return false;
            P->nscratch++;
        }
        owner[s] = (int16_t)v;
        P->hidx[v] = (int16_t)s;
    }
    return true;
}

fk_val nb__cpu_fk_uniform(const fk_plan *P, int v) {
    return (fk_val){P->home[v] == H_LOAD ? P->base[v] : (char *)P->uni[v], 0};
}

/* Compute the UNIFORM instructions once and write those that are outputs. */
static void run_uniform(fk_plan *P) {
    const nb_fkernel *k = P->k;
    char stage[4][BUF_BYTES];
    for (int j = 0; j < k->ninstr; j++) {
        const nb_finstr *I = &k->instr[j];
        if (I->level != NB_FL_UNIFORM) continue;
        fk_val a[3];
        for (int i = 0; i < 3; i++) a[i] = I->in[i] >= 0 ? nb__cpu_fk_uniform(P, I->in[i]) : (fk_val){0};
        nb__cpu_fk_exec(P, I, 1, (fk_val){(char *)P->uni[k->nin + j], P->es[k->nin + j]}, a, stage);
    }
    for (int o = 0; o < k->nout; o++)
        if (P->home[k->out_val[o]] == H_UNI) memcpy(P->base[k->nin + o], P->uni[k->out_val[o]], P->es[k->out_val[o]]);
}

/* ---- elementwise kernels ---- */

static void ew_rows(void *ctx, int64_t n, char *const *ptr, const int64_t *bs) {
    const fk_plan *P = ctx;
    const nb_fkernel *k = P->k;
    _Alignas(64) char scratch[MAX_SCRATCH][BUF_BYTES];
    _Alignas(64) char stage[4][BUF_BYTES];
    fk_val v[MAX_VALS];
    for (int j = 0; j < P->nval; j++)
        if (nb__fk_level(k, j) == NB_FL_UNIFORM) v[j] = nb__cpu_fk_uniform(P, j);
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        int64_t len = n - i0 < TILE ? n - i0 : TILE;
        for (int val = 0; val < P->nval; val++) { /* the loads and outputs at the tile */
            int o = nb__cpu_fk_operand(P, val);
            if (o >= 0 && nb__fk_level(k, val) != NB_FL_UNIFORM) v[val] = (fk_val){ptr[o] + i0 * bs[o], bs[o]};
        }
        nb__cpu_fk_interpret(P, 0, P->stage_start[1], len, v, scratch, stage);
    }
}

/* A kernel compiled at run time (jit.h) and its arguments. */
typedef struct jit_call {
    const fk_plan *P;
    nb_jit_fn fn;
    const double *prm;
    const void *const *uni;
    const bool *stream; /* per operand: an output written with non-temporal stores (stream.c); NULL: none */
} jit_call;

/* The parameters of k's instructions as a generated kernel reads them (jit.h). */
static void jit_params(const nb_fkernel *k, double *prm) {
    for (int j = 0; j < k->ninstr; j++) {
        prm[2 * j] = k->instr[j].p0;
        prm[2 * j + 1] = k->instr[j].p1;
    }
}

/* Element size of operand o of P (a load, then an output). */
static size_t op_es(const fk_plan *P, int o) { return P->es[o < P->k->nin ? o : P->k->out_val[o - P->k->nin]]; }

/* Does a FULL output of n contiguous elements at ptr overlap a FULL load? */
static int shares_memory(const fk_plan *P, int64_t n, char *const *ptr) {
    const nb_fkernel *k = P->k;
    for (int o = k->nin; o < P->nops; o++) {
        if (nb__fk_level(k, k->out_val[o - k->nin]) != NB_FL_FULL) continue;
        for (int j = 0; j < k->nin; j++)
            if (k->in_level[j] == NB_FL_FULL && ptr[j] < ptr[o] + n * (int64_t)op_es(P, o) &&
                ptr[o] < ptr[j] + n * (int64_t)op_es(P, j))
                return 1;
    }
    return 0;
}

/* n elements along the innermost axis in tiles, the loads marked in `staged` gathered into
 * contiguous buffers and the outputs marked scattered from them. */
static void jit_rows_staged(const jit_call *c, int64_t n, char *const *ptr, const int64_t *bs, const bool *staged) {
    const fk_plan *P = c->P;
    const nb_fkernel *k = P->k;
    _Alignas(64) char stage[NB_FK_MAX_IO][BUF_BYTES];
    char *p[NB_FK_MAX_IO];
    for (int64_t i0 = 0; i0 < n; i0 += TILE) {
        int64_t len = n - i0 < TILE ? n - i0 : TILE;
        for (int o = 0; o < P->nops; o++) {
            p[o] = staged[o] ? stage[o] : ptr[o] + i0 * bs[o];
            if (staged[o] && o < k->nin) nb__cpu_stage_move(true, stage[o], ptr[o] + i0 * bs[o], bs[o], len, op_es(P, o));
        }
        c->fn(len, p, c->prm, c->uni, 0, P->may_share && shares_memory(P, len, p));
        for (int o = k->nin; o < P->nops; o++) {
            if (!staged[o]) continue;
            size_t es = op_es(P, o);
            if (c->stream && c->stream[o] && bs[o] == (int64_t)es) nb__cpu_stream_store(ptr[o] + i0 * bs[o], stage[o], (size_t)len * es);
            else nb__cpu_stage_move(false, stage[o], ptr[o] + i0 * bs[o], bs[o], len, es);
        }
    }
}

/* n elements along the innermost axis (the iterator's callback, ctx a jit_call): one call where
 * every FULL operand is contiguous and no output streams, else staged (the generated loop takes
 * contiguous operands only, see jit_source.c; a streamed output is computed into a block, then
 * stored past the caches). */
static void jit_rows(void *ctx, int64_t n, char *const *ptr, const int64_t *bs) {
    const jit_call *c = ctx;
    const fk_plan *P = c->P;
    const nb_fkernel *k = P->k;
    bool staged[NB_FK_MAX_IO], direct = true;
    for (int o = 0; o < P->nops; o++) {
        int v = o < k->nin ? o : k->out_val[o - k->nin];
        staged[o] = nb__fk_level(k, v) == NB_FL_FULL && (bs[o] != (int64_t)op_es(P, o) || (c->stream && c->stream[o]));
        direct &= !staged[o];
    }
    if (direct) c->fn(n, ptr, c->prm, c->uni, 0, P->may_share && shares_memory(P, n, ptr));
    else jit_rows_staged(c, n, ptr, bs, staged);
}

static nb_status run_elementwise(fk_plan *P, nb_tensor *const *in, nb_tensor *const *out, int *ran) {
    const nb_fkernel *k = P->k;
    const nb_tensor *ts[NB_FK_MAX_IO];
    for (int j = 0; j < k->nin; j++) ts[j] = in[j];
    for (int o = 0; o < k->nout; o++) ts[k->nin + o] = out[o];
    nb_iter it;
    nb__iter_init(&it, P->nops, ts);
    if (it.numel == 0) return NB_OK;
    nb_jit_fn fn = nb__jit_get(k);
    if (!fn) {
        nb__iter_run(&it, ew_rows, P);
        return NB_OK;
    }
    double prm[2 * NB_FK_MAX_INSTR];
    const void *uni[MAX_VALS];
    jit_params(k, prm);
    for (int v = 0; v < P->nval; v++) uni[v] = nb__fk_level(k, v) == NB_FL_UNIFORM ? nb__cpu_fk_uniform(P, v).p : NULL;
    /* outputs through the caches: streaming them (as row kernels do) made gelu over 64M f32 slower,
     * 43 -> 52 ms (bench/RESULTS.md §18) */
    nb__iter_run(&it, jit_rows, &(jit_call){P, fn, prm, uni, NULL});
    *ran = NB_FK_RAN_COMPILED;
    return NB_OK;
}

/* ---- row kernels ---- */

/* Split the domain's axes into outer (rows) and inner (within a row, coalesced across the
 * operands and the contiguous row order of the row buffers).  False when a reduction would
 * read a load that is not one contiguous run, or a row is longer than MAX_ROW. */
static bool row_geometry(fk_plan *P, const int64_t *shape, int ndim, const nb_tensor *const *ts) {
    const nb_fkernel *k = P->k;
    int nouter = ndim - k->nred;
    P->nouter = nouter;
    P->L = 1;
    for (int d = 0; d < ndim; d++) {
        if (d < nouter) P->oshape[d] = shape[d];
        else P->L *= shape[d];
    }
    if (P->L > MAX_ROW || (int64_t)P->nrowbuf * P->L * 8 > MAX_ROWBUF_BYTES) return false;
    /* inner axes merged where every operand is contiguous across them (the row order is) */
    P->ninner = 0;
    for (int d = nouter; d < ndim; d++) {
        if (shape[d] == 1) continue;
        int n = P->ninner;
        bool merge = n > 0;
        for (int o = 0; o < P->nops && merge; o++)
            merge = P->istr[o][n - 1] == ts[o]->stride[d] * (int64_t)nb_dtype_size(ts[o]->dtype) * shape[d];
        if (merge) P->ishape[n - 1] *= shape[d];
        else P->ishape[P->ninner++] = shape[d];
        for (int o = 0; o < P->nops; o++)
            P->istr[o][P->ninner - 1] = ts[o]->stride[d] * (int64_t)nb_dtype_size(ts[o]->dtype);
    }
    if (P->ninner == 0) {
        P->ninner = 1;
        P->ishape[0] = 1;
        for (int o = 0; o < P->nops; o++) P->istr[o][0] = 0;
    }
    for (int o = 0; o < P->nops; o++)
        for (int d = 0; d < nouter; d++) P->ostr[o][d] = ts[o]->stride[d] * (int64_t)nb_dtype_size(ts[o]->dtype);
    /* a reduced load must be one contiguous run along the row, as the eager reduction reads it */
    for (int j = 0; j < k->ninstr; j++) {
        int v = k->instr[j].in[0];
        if (!is_reduce(k->instr[j].op) || P->L == 1) continue;
        if (nb__fk_level(k, v) != NB_FL_FULL) return false;
        if (v < k->nin && (P->ninner != 1 || P->istr[v][0] != (int64_t)P->es[v])) return false;
    }
    return true;
}

/* Does an instruction of a stage after s, or a reduction, read value v? */
static bool read_after(const fk_plan *P, int v, int s) {
    const nb_fkernel *k = P->k;
    for (int j = 0; j < k->ninstr; j++)
        for (int i = 0; i < 3; i++)
            if (k->instr[j].in[i] == v && (is_reduce(k->instr[j].op) || P->stage[j] > s)) return true;
    return false;
}

bool nb__cpu_fk_stage_kernel(const fk_plan *P, int s, fk_stage *S) {
    const nb_fkernel *k = P->k;
    int16_t map[MAX_VALS];
    for (int v = 0; v < P->nval; v++) map[v] = -1;
    memset(S->stream, 0, sizeof S->stream);
    int nin = 0, nout = 0, q0 = P->stage_start[s], q1 = P->stage_start[s + 1];
    for (int q = q0; q < q1; q++)
        for (int i = 0; i < 3; i++) {
            int v = k->instr[P->order[q]].in[i];
            bool inside = v >= k->nin && k->instr[v - k->nin].level == NB_FL_FULL && P->stage[v - k->nin] == s;
            if (v < 0 || inside || map[v] >= 0) continue;
            if (nin == NB_FK_MAX_IO) return false;
            map[v] = (int16_t)nin;
            S->src[nin] = (int16_t)v;
            S->in_dtype[nin] = nb__fk_dtype(k, v);
            nb_flevel lv = nb__fk_level(k, v);
            S->in_level[nin++] = lv == NB_FL_FULL || (lv == NB_FL_ROW && (k->lead || P->batch > 1)) ? NB_FL_FULL : NB_FL_UNIFORM;
        }
    for (int q = q0; q < q1; q++) {
        int j = P->order[q], val = k->nin + j;
        nb_finstr I = k->instr[j];
        for (int i = 0; i < 3; i++)
            if (I.in[i] >= 0) I.in[i] = map[I.in[i]];
        S->instr[q - q0] = I;
        map[val] = (int16_t)(nin + q - q0);
        if (P->home[val] != H_ROWBUF && P->home[val] != H_OUT) continue;
        if (nin + nout == NB_FK_MAX_IO) return false;
        S->out_val[nout] = map[val];
        S->stream[nin + nout] = P->home[val] == H_OUT && !read_after(P, val, s);
        S->src[nin + nout++] = (int16_t)val;
    }
    S->k = (nb_fkernel){.nin = nin, .ninstr = q1 - q0, .nout = nout, .nred = 0, .in_dtype = S->in_dtype,
                        .in_level = S->in_level, .instr = S->instr, .out_val = S->out_val};
    jit_params(&S->k, S->prm);
    S->sub.k = &S->k;
    S->sub.may_share = false; /* row buffers are the kernel's own; outputs may be loads' memory */
    for (int o = nin; o < nin + nout; o++)
        for (int i = 0; i < nin; i++)
            S->sub.may_share |= P->home[S->src[o]] == H_OUT && S->in_level[i] == NB_FL_FULL &&
                                (S->src[i] < k->nin || P->home[S->src[i]] == H_OUT);
    S->sub.nops = nin + nout;
    S->sub.nval = nin + S->k.ninstr;
    for (int v = 0; v < S->sub.nval; v++) S->sub.es[v] = (uint8_t)nb_dtype_size(nb__fk_dtype(&S->k, v));
    return nout > 0;
}

/* The compiled form of each stage of P that has elementwise instructions, into P->stages (left
 * NULL, everything interpreted, without a compiler or memory), and whether their streamable
 * outputs, over all `rows` rows, are worth streaming.  True when every such stage has one. */
static bool compile_stages(fk_plan *P, int64_t rows) {
    if (!nb__jit_on()) return false;
    P->stages = nb__malloc((size_t)P->nstage * sizeof *P->stages);
    if (!P->stages) return false;
    bool all = true;
    int64_t out_bytes = 0;
    for (int s = 0; s < P->nstage; s++) {
        fk_stage *S = &P->stages[s];
        S->fn = NULL;
        if (P->stage_start[s] == P->stage_start[s + 1]) continue;
        S->fn = nb__cpu_fk_stage_kernel(P, s, S) ? nb__jit_get(&S->k) : NULL;
        all &= S->fn != NULL;
        for (int o = S->k.nin; S->fn && o < S->sub.nops; o++)
            out_bytes += S->stream[o] ? rows * P->L * (int64_t)op_es(&S->sub, o) : 0;
    }
    P->streams = nb__cpu_stream_worth(out_bytes);
    return all;
}

/* Row buffer h of a chunk's buffers at rowbuf: batch rows of L 8-byte slots (then, at h = nrowbuf,
 * the ROW values' slots). */
static char *rowbuf_at(const fk_plan *P, char *rowbuf, int h) { return rowbuf + (size_t)h * (size_t)(P->batch * P->L) * 8; }

/* FULL value val (a load, an output or a row buffer) at the tile that starts t0 elements into the
 * current line (operand offsets loff, row position f). */
static fk_val full_val(const fk_plan *P, int val, const int64_t *loff, int64_t t0, int64_t f, char *rowbuf) {
    int last = P->ninner - 1, o = nb__cpu_fk_operand(P, val);
    if (o >= 0) return (fk_val){P->base[o] + loff[o] + t0 * P->istr[o][last], P->istr[o][last]};
    return (fk_val){rowbuf_at(P, rowbuf, P->hidx[val]) + f * P->es[val], P->es[val]};
}

/* Point the FULL loads and the persistent FULL values (outputs, row buffers) at that tile. */
static void tile_vals(const fk_plan *P, fk_val *v, const int64_t *loff, int64_t t0, int64_t f, char *rowbuf) {
    for (int val = 0; val < P->nval; val++)
        if (nb__fk_level(P->k, val) == NB_FL_FULL && (P->home[val] == H_LOAD || P->home[val] == H_OUT || P->home[val] == H_ROWBUF))
            v[val] = full_val(P, val, loff, t0, f, rowbuf);
}

/* One line of stage S (starting at row position f0, operand offsets loff) in one call of its
 * compiled kernel: FULL operands at the line, ROW and UNIFORM ones as the row's elements. */
static void compiled_line(const fk_plan *P, const fk_stage *S, const fk_val *v, const int64_t *loff, int64_t f0,
                          int64_t len_line, char *rowbuf) {
    char *ptr[NB_FK_MAX_IO];
    int64_t bs[NB_FK_MAX_IO];
    const void *uni[NB_FK_MAX_IO];
    for (int o = 0; o < S->sub.nops; o++) {
        fk_val x = o >= S->k.nin || S->in_level[o] == NB_FL_FULL ? full_val(P, S->src[o], loff, 0, f0, rowbuf) : v[S->src[o]];
        ptr[o] = x.p;
        bs[o] = x.s;
        uni[o] = x.p; /* read for the UNIFORM loads only */
    }
    nb__cpu_fk_stage_run(S, len_line, ptr, bs, uni, P->streams);
}

void nb__cpu_fk_stage_run(const fk_stage *S, int64_t n, char *const *ptr, const int64_t *bs, const void *const *uni,
                          bool stream) {
    jit_rows(&(jit_call){&S->sub, S->fn, S->prm, uni, stream ? S->stream : NULL}, n, ptr, bs);
}

void nb__cpu_fk_interpret(const fk_plan *P, int q0, int q1, int64_t n, fk_val *v, char (*scratch)[BUF_BYTES],
                          char (*stage)[BUF_BYTES]) {
    const nb_fkernel *k = P->k;
    for (int q = q0; q < q1; q++) {
        int j = P->order[q], val = k->nin + j;
        const nb_finstr *I = &k->instr[j];
        fk_val d = P->home[val] == H_SCRATCH ? (fk_val){scratch[P->hidx[val]], P->es[val]} : v[val];
        fk_val a[3];
        for (int i = 0; i < 3; i++) a[i] = I->in[i] >= 0 ? v[I->in[i]] : (fk_val){0};
        nb__cpu_fk_exec(P, I, n, d, a, stage);
        v[val] = d;
    }
}

/* Stage s of one row: its FULL instructions over the row's lines, compiled or in tiles. */
static void row_stage(const fk_plan *P, int s, fk_val *v, const int64_t *ooff, char *rowbuf, char (*scratch)[BUF_BYTES],
                      char (*stage)[BUF_BYTES]) {
    int q0 = P->stage_start[s], q1 = P->stage_start[s + 1], last = P->ninner - 1;
    if (q0 == q1) return;
    int64_t len_line = P->ishape[last], lidx[NB_MAX_DIMS] = {0};
    const fk_stage *S = P->stages && P->stages[s].fn ? &P->stages[s] : NULL;
    for (int64_t f0 = 0; f0 < P->L; f0 += len_line) {
        int64_t loff[NB_FK_MAX_IO];
        for (int o = 0; o < P->nops; o++) {
            loff[o] = ooff[o];
            for (int d = 0; d < last; d++) loff[o] += lidx[d] * P->istr[o][d];
        }
        if (S) compiled_line(P, S, v, loff, f0, len_line, rowbuf);
        else for (int64_t t0 = 0; t0 < len_line; t0 += TILE) {
            int64_t len = len_line - t0 < TILE ? len_line - t0 : TILE;
            tile_vals(P, v, loff, t0, f0 + t0, rowbuf);
            nb__cpu_fk_interpret(P, q0, q1, len, v, scratch, stage);
        }
        for (int d = last - 1; d >= 0 && ++lidx[d] == P->ishape[d]; d--) lidx[d] = 0;
    }
}

/* Byte step from one row to the next of operand o (its last outer axis), 0 when there is one row. */
static int64_t row_step(const fk_plan *P, int o) { return P->nouter ? P->ostr[o][P->nouter - 1] : 0; }

/* The ROW instructions that run before stage s (s = nstage: after the last), and the
 * reductions closing stage s - 1, for the g rows from the one at offsets ooff (ROW values in v:
 * the first row's element and the step to the next). */
static void row_scalars(const fk_plan *P, int s, fk_val *v, const int64_t *ooff, char *rowbuf, char (*stage)[BUF_BYTES],
                        int64_t g) {
    const nb_fkernel *k = P->k;
    for (int q = P->row_start[s]; q < P->row_start[s + 1]; q++) {
        int j = P->row_order[q], val = k->nin + j;
        const nb_finstr *I = &k->instr[j];
        fk_val d = v[val];
        if (is_reduce(I->op)) {
            int x = I->in[0], h = P->hidx[x];
            /* a ROW or UNIFORM input has the domain's shape only when rows have one element */
            fk_val row = nb__fk_level(k, x) != NB_FL_FULL ? v[x]
                         : P->home[x] == H_ROWBUF ? (fk_val){rowbuf_at(P, rowbuf, h), P->L * P->es[x]}
                         : P->home[x] == H_OUT    ? (fk_val){P->base[k->nin + h] + ooff[k->nin + h], row_step(P, k->nin + h)}
                                                  : (fk_val){P->base[x] + ooff[x], row_step(P, x)};
            nb__cpu_reduce_rows(I->op, nb__fk_dtype(k, x), P->L, g, row.p, row.s, d.p, d.s, I->dtype);
        } else {
            fk_val a[3];
            for (int i = 0; i < 3; i++) a[i] = I->in[i] >= 0 ? v[I->in[i]] : (fk_val){0};
            nb__cpu_fk_exec(P, I, g, d, a, stage);
        }
    }
}

/* Three loops, so that the common two vectorize: a value broadcast along its row (is 0, the
 * ROW values), a row that runs on (is es: one copy a row), and any other step; built for each
 * instruction set (the fills are stores: AVX stores halve their count). */
#define EXPAND_ROWS(T)                                                                                   \
    NB_SIMD_CLONES static void expand_rows_##T(T *restrict dst, const char *src, int64_t rs, int64_t is, \
                                               int64_t g, int64_t L) {                                   \
        for (int64_t r = 0; r < g; r++) {                                                                \
            T *d = dst + r * L, e;                                                                       \
            if (is == 0) {                                                                               \
                memcpy(&e, src + r * rs, sizeof e);                                                      \
                for (int64_t i = 0; i < L; i++) d[i] = e;                                                \
            } else if (is == (int64_t)sizeof e) {                                                        \
                memcpy(d, src + r * rs, (size_t)L * sizeof e);                                           \
            } else                                                                                       \
                for (int64_t i = 0; i < L; i++) {                                                        \
                    memcpy(&e, src + r * rs + i * is, sizeof e);                                         \
                    d[i] = e;                                                                            \
                }                                                                                        \
        }                                                                                                \
    }
EXPAND_ROWS(uint8_t)
EXPAND_ROWS(uint16_t)
EXPAND_ROWS(uint32_t)
EXPAND_ROWS(uint64_t)
#undef EXPAND_ROWS
char *nb__cpu_fk_expand_rows(char *dst, const char *src, int64_t rs, int64_t is, int64_t g, int64_t L, size_t es) {
    if (es == 4) expand_rows_uint32_t((uint32_t *)dst, src, rs, is, g, L);
    else if (es == 8) expand_rows_uint64_t((uint64_t *)dst, src, rs, is, g, L);
    else if (es == 2) expand_rows_uint16_t((uint16_t *)dst, src, rs, is, g, L);
    else expand_rows_uint8_t((uint8_t *)dst, src, rs, is, g, L);
    return dst;
}

/* Does FULL operand o step from row to row as one run of its elements (a flat walk of g rows)? */
static bool row_linear(const fk_plan *P, int o) { return row_step(P, o) == P->L * P->istr[o][0]; }

void nb__cpu_fk_stage_rows(const fk_plan *P, const fk_stage *S, fk_val *x, int64_t g, int64_t n,
                           char (*scratch)[BUF_BYTES], int nexp, bool stream) {
    char *ptr[NB_FK_MAX_IO];
    int64_t bs[NB_FK_MAX_IO];
    const void *uni[NB_FK_MAX_IO];
    for (int o = 0; o < S->sub.nops; o++) {
        int src = S->src[o];
        size_t es = P->es[src];
        if (o < S->k.nin && S->in_level[o] != NB_FL_FULL) x[o].s = 0; /* UNIFORM */
        else if (nb__fk_level(P->k, src) == NB_FL_ROW) /* a row's element, or (lead) a column's */
            x[o] = (fk_val){nb__cpu_fk_expand_rows(scratch[nexp++], x[o].p, P->k->lead ? 0 : x[o].s, P->k->lead ? x[o].s : 0,
                                                   g, n, es), (int64_t)es};
        ptr[o] = x[o].p;
        bs[o] = x[o].s;
        uni[o] = x[o].p; /* read for the UNIFORM loads only */
    }
    nb__cpu_fk_stage_run(S, g * n, ptr, bs, uni, stream);
}

/* Stage s (compiled, batched: see run_rows) of the g rows from the one at offsets ooff in one call
 * over their g L elements: loads and outputs that run on from row to row in place, row buffers
 * as batch rows, ROW values and other loads expanded into tile buffers of g L elements. */
static void group_stage(const fk_plan *P, int s, const fk_val *v, const int64_t *ooff, char *rowbuf,
                        char (*scratch)[BUF_BYTES], int64_t g) {
    const fk_stage *S = &P->stages[s];
    fk_val x[NB_FK_MAX_IO];
    int nexp = 0;
    for (int o = 0; o < S->sub.nops; o++) {
        int src = S->src[o], op = nb__cpu_fk_operand(P, src);
        int64_t es = P->es[src];
        if (nb__fk_level(P->k, src) != NB_FL_FULL) /* UNIFORM and ROW values: nb__cpu_fk_stage_rows */
            x[o] = v[src];
        else if (op < 0)
            x[o] = (fk_val){rowbuf_at(P, rowbuf, P->hidx[src]), es};
        else if (row_linear(P, op))
            x[o] = (fk_val){P->base[op] + ooff[op], P->istr[op][0]};
        else /* a load broadcast along the rows, or strided between them */
            x[o] = (fk_val){nb__cpu_fk_expand_rows(scratch[nexp++], P->base[op] + ooff[op], row_step(P, op), P->istr[op][0],
                                                   g, P->L, (size_t)es), es};
    }
    nb__cpu_fk_stage_rows(P, S, x, g, P->L, scratch, nexp, P->streams);
}

/* Bytes of one chunk's buffers: row buffers (batch rows of L 8-byte slots each), then ROW values
 * (batch 8-byte slots each). */
static size_t chunk_bytes(const fk_plan *P) {
    return ((size_t)P->nrowbuf * (size_t)P->L + (size_t)P->nrowv) * (size_t)P->batch * 8;
}

/* Rows [lo, hi) (chunk `chunk`: its own row buffers), one by one or (batch > 1) in groups of up to
 * batch rows along the last outer axis. */
static void row_chunk(void *ctx, int64_t lo, int64_t hi, int chunk) {
    const fk_plan *P = ctx;
    const nb_fkernel *k = P->k;
    _Alignas(64) char scratch[MAX_SCRATCH][BUF_BYTES];
    _Alignas(64) char stage[4][BUF_BYTES];
    char *rowbuf = P->rowbuf ? P->rowbuf + (size_t)chunk * chunk_bytes(P) : NULL; /* NULL: no buffers */
    char *rowv = rowbuf ? rowbuf_at(P, rowbuf, P->nrowbuf) : NULL;
    fk_val v[MAX_VALS];
    for (int j = 0; j < P->nval; j++)
        if (nb__fk_level(k, j) == NB_FL_UNIFORM) v[j] = nb__cpu_fk_uniform(P, j);
    int64_t idx[NB_MAX_DIMS] = {0};
    for (int64_t d = P->nouter - 1, rem = lo; d >= 0; d--) {
        idx[d] = rem % P->oshape[d];
        rem /= P->oshape[d];
    }
    for (int64_t r = lo, g; r < hi; r += g) {
        g = P->batch;
        if (g > hi - r) g = hi - r;
        if (P->nouter && g > P->oshape[P->nouter - 1] - idx[P->nouter - 1]) g = P->oshape[P->nouter - 1] - idx[P->nouter - 1];
        int64_t ooff[NB_FK_MAX_IO];
        for (int o = 0; o < P->nops; o++) {
            ooff[o] = 0;
            for (int d = 0; d < P->nouter; d++) ooff[o] += idx[d] * P->ostr[o][d];
        }
        /* ROW values: one element a row, the step to the next row's when batched (one by one, the
         * interpreter reads them as broadcast operands: step 0) */
        bool b = P->batch > 1;
        for (int j = 0; j < k->nin; j++)
            if (k->in_level[j] == NB_FL_ROW) v[j] = (fk_val){P->base[j] + ooff[j], b ? row_step(P, j) : 0};
        for (int j = 0; j < k->ninstr; j++) {
            int val = k->nin + j, h = P->hidx[val];
            if (k->instr[j].level != NB_FL_ROW) continue;
            v[val] = P->home[val] == H_OUT ? (fk_val){P->base[k->nin + h] + ooff[k->nin + h], b ? row_step(P, k->nin + h) : 0}
                                           : (fk_val){rowv + (size_t)h * (size_t)P->batch * 8, b ? P->es[val] : 0};
        }
        for (int s = 0; s <= P->nstage; s++) {
            row_scalars(P, s, v, ooff, rowbuf, stage, g);
            if (s == P->nstage || P->stage_start[s] == P->stage_start[s + 1]) continue;
            if (P->batch > 1) group_stage(P, s, v, ooff, rowbuf, scratch, g);
            else row_stage(P, s, v, ooff, rowbuf, scratch, stage);
        }
        if (P->nouter) idx[P->nouter - 1] += g - 1;
        for (int d = P->nouter - 1; d >= 0 && ++idx[d] == P->oshape[d]; d--) idx[d] = 0;
    }
    if (P->streams) nb__cpu_stream_fence();
}

/* Rows run batch at a time (batch > 1) when they are short (L <= TILE / 2: the calls and per-row
 * steps of a stage a row cost more than the row's work, even at 512 elements, where 2 rows a group
 * took 0.93 of the time; TILE / L rows make a tile), one line each, every stage is
 * compiled, every output runs on from row to row, and a stage expands at most MAX_SCRATCH operands
 * (its ROW values, its loads that do not run on).  Each element, row value and reduction is
 * computed as one by one, so the bits do not change. */
static bool batch_rows(fk_plan *P, int64_t rows) {
    const nb_fkernel *k = P->k;
    if (!nb__jit_on() || rows < 2 || P->nouter == 0 || P->ninner != 1 || P->L > TILE / 2) return false;
    for (int o = 0; o < k->nout; o++)
        if (nb__fk_level(k, k->out_val[o]) == NB_FL_FULL && P->home[k->out_val[o]] == H_OUT && !row_linear(P, k->nin + o))
            return false;
    P->batch = TILE / P->L;
    bool ok = compile_stages(P, rows);
    for (int s = 0; ok && s < P->nstage; s++) {
        const fk_stage *S = &P->stages[s];
        int nexp = 0;
        for (int o = 0; S->fn && o < S->k.nin; o++) {
            int src = S->src[o], op = nb__cpu_fk_operand(P, src);
            nexp += S->in_level[o] == NB_FL_FULL && (nb__fk_level(k, src) == NB_FL_ROW || (op >= 0 && !row_linear(P, op)));
        }
        ok = nexp <= MAX_SCRATCH;
    }
    if (!ok) {
        nb__free(P->stages);
        P->stages = NULL;
        P->batch = 1;
    }
    return ok;
}

static nb_status run_rows(fk_plan *P, int *ran) {
    int64_t rows = 1;
    for (int d = 0; d < P->nouter; d++) rows *= P->oshape[d];
    if (rows == 0) return NB_OK;
    P->stages = NULL;
    P->streams = false;
    P->batch = 1;
    if (batch_rows(P, rows) || compile_stages(P, rows)) *ran = NB_FK_RAN_COMPILED;
    int64_t chunks = rows * P->L / 16384;
    int64_t most = 4 * (int64_t)nb_get_num_threads();
    chunks = chunks < 1 ? 1 : chunks > most ? most : chunks;
    if (chunks > rows) chunks = rows;
    size_t bytes = (size_t)chunks * chunk_bytes(P);
    P->rowbuf = bytes ? nb__buf_alloc(bytes) : NULL;
    if (!bytes || P->rowbuf) nb__parallel_chunks(rows, chunks, row_chunk, P);
    if (P->rowbuf) nb__buf_free(P->rowbuf, bytes);
    nb__free(P->stages);
    return bytes && !P->rowbuf ? NB_ERR_OOM : NB_OK;
}

nb_status nb__cpu_fused(const nb_fkernel *k, const int64_t *shape, int ndim, nb_tensor *const *in, nb_tensor *const *out,
                        int *ran) {
    fk_plan P;
    P.k = k;
    P.kt = nb__cpu_kernels();
    P.nval = k->nin + k->ninstr;
    P.nops = k->nin + k->nout;
    P.rowbuf = NULL;
    P.batch = 1;
    P.may_share = true;
    const nb_tensor *ts[NB_FK_MAX_IO];
    for (int j = 0; j < k->nin; j++) ts[j] = in[j];
    for (int o = 0; o < k->nout; o++) ts[k->nin + o] = out[o];
    for (int o = 0; o < P.nops; o++) P.base[o] = nb__ptr(ts[o]);
    plan_stages(&P);
    if (!plan_homes(&P)) return NB_ERR_UNSUPPORTED;
    bool empty = false;
    for (int d = 0; d < ndim; d++) empty |= shape[d] == 0;
    if (k->nred > 0 && empty) return NB_ERR_UNSUPPORTED; /* empty rows or none: the eager ops' rules */
    if (k->nred > 0 && !k->lead && !row_geometry(&P, shape, ndim, ts)) return NB_ERR_UNSUPPORTED;
    run_uniform(&P);
    *ran = NB_FK_RAN_INTERPRETED;
    if (k->lead) return nb__cpu_fused_cols(&P, shape, ndim, ts, ran);
    return k->nred == 0 ? run_elementwise(&P, in, out, ran) : run_rows(&P, ran);
}
