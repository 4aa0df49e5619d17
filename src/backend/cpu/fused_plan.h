/*
 * fused_plan.h — the CPU backend's plan of one fused-kernel call, shared by
 * its two walks of the domain: elementwise and row kernels (fused.c) and
 * column kernels (fused_cols.c).  Internal to src/backend/cpu.
 */
#ifndef NB_CPU_FUSED_PLAN_H
#define NB_CPU_FUSED_PLAN_H

#include "../fused.h"
#include "jit.h"
#include "kernels.h"

enum {
    TILE = 1024,                  /* elements per tile */
    MAX_VALS = NB_FK_MAX_IO + NB_FK_MAX_INSTR,
    MAX_SCRATCH = 16,             /* tile buffers live at once */
    MAX_ROW = 65536,              /* longest row a row kernel takes: eager sums longer ones in chunks */
    MAX_ROWBUF_BYTES = 1 << 22,   /* row buffers of one thread */
    /* one tile buffer: TILE elements of up to 8 bytes, plus a cache line so that consecutive
     * buffers do not sit a multiple of 4 KiB apart (a load from one and a store to another at
     * the same offset would then alias in the store buffer: a measured 2-3x slowdown) */
    BUF_BYTES = TILE * 8 + 64,
};

/** Where a value lives while the kernel runs: a load in place, a UNIFORM value computed once, a
 *  per-row (per-column) slot, its output, a row buffer (values reduced or read by a later stage;
 *  a column kernel's: four rows of a tile), a tile buffer. */
typedef enum fk_home { H_LOAD, H_UNI, H_ROWV, H_OUT, H_ROWBUF, H_SCRATCH } fk_home;

/** A value of the current tile (or row): its first element and byte stride. */
typedef struct fk_val {
    char *p;
    int64_t s;
} fk_val;

typedef struct fk_stage fk_stage;

/** The plan of one call: the kernel's values' homes and stages (from its program), its operands'
 *  base pointers, and the geometry of a row kernel; a column kernel keeps its own (fused_cols.c). */
typedef struct fk_plan {
    const nb_fkernel *k;
    const nb_cpu_kernels *kt;
    int nval, nstage, nscratch, nrowbuf, nrowv;
    uint8_t home[MAX_VALS];
    int16_t hidx[MAX_VALS];              /* output, row buffer, row value or scratch index */
    uint8_t es[MAX_VALS];                /* element size */
    int8_t stage[NB_FK_MAX_INSTR];       /* FULL / reduce: its stage; ROW: the stage it runs before */
    int16_t order[NB_FK_MAX_INSTR];      /* FULL instructions, stage by stage */
    int16_t stage_start[NB_FK_MAX_INSTR + 1];
    int16_t row_order[NB_FK_MAX_INSTR];  /* row kernels: ROW instructions by the point they run at */
    int16_t row_start[NB_FK_MAX_INSTR + 2]; /* point s (before stage s; nstage: after the last) */
    _Alignas(8) unsigned char uni[MAX_VALS][8];
    /* geometry: operands are the loads, then the outputs */
    int nops;
    char *base[NB_FK_MAX_IO];
    int64_t L;                           /* row length (row kernels) */
    int nouter, ninner;
    int64_t oshape[NB_MAX_DIMS], ostr[NB_FK_MAX_IO][NB_MAX_DIMS];
    int64_t ishape[NB_MAX_DIMS], istr[NB_FK_MAX_IO][NB_MAX_DIMS]; /* coalesced inner axes, byte strides */
    char *rowbuf;                        /* per chunk: nrowbuf buffers of L elements of 8 bytes */
    fk_stage *stages;                    /* row kernels: per stage, its compiled form (NULL: interpreted) */
    bool streams;                        /* row kernels: the stages' outputs marked in stream go past the caches */
    int64_t batch;                       /* row kernels: rows run together (1: one by one), see run_rows */
    bool may_share;                      /* can an output share memory with a load (else no check per call)? */
} fk_plan;

/** Stage s of a row or column kernel as an elementwise kernel (nred = 0) that jit.h compiles: the
 *  stage's FULL instructions in program order; as loads, the values they read from outside the
 *  stage — FULL ones (the kernel's loads, earlier stages' row buffers and outputs) along the line,
 *  ROW ones as UNIFORM loads in a row kernel (the current row's element) and along the line in a
 *  column kernel (the columns' elements), UNIFORM ones as UNIFORM loads; as outputs, the stage's
 *  values that reductions or later stages read (row buffers) or that the kernel returns. */
struct fk_stage {
    nb_fkernel k;
    nb_dtype in_dtype[NB_FK_MAX_IO];
    nb_flevel in_level[NB_FK_MAX_IO];
    nb_finstr instr[NB_FK_MAX_INSTR];
    int16_t out_val[NB_FK_MAX_IO];
    int16_t src[NB_FK_MAX_IO];     /* the row kernel's value of each operand (loads, then outputs) */
    bool stream[NB_FK_MAX_IO];     /* outputs that nothing in the kernel reads back: streamable */
    double prm[2 * NB_FK_MAX_INSTR];
    fk_plan sub;                   /* k, nops, nval and es: what jit_rows reads */
    nb_jit_fn fn;                  /* NULL: the stage is interpreted */
};

/** S as stage s of P (its kernel, not yet compiled: nb__jit_get(&S->k)); false when it has more
 *  operands than a kernel takes or none to write (fused.c). */
bool nb__cpu_fk_stage_kernel(const fk_plan *P, int s, fk_stage *S);

/** One line of n elements of compiled stage S: its operands (the loads, then the outputs) at ptr with
 *  byte strides bs, the UNIFORM loads' elements at uni; with stream, the outputs S marks go past the
 *  caches (stream.c) (fused.c). */
void nb__cpu_fk_stage_run(const fk_stage *S, int64_t n, char *const *ptr, const int64_t *bs, const void *const *uni,
                          bool stream);

/** The FULL instructions order[q0 .. q1) of P on n elements by the interpreter: one
 *  nb__cpu_fk_exec each, into their homes (v: the values' places, updated; tile buffers in
 *  scratch) (fused.c). */
void nb__cpu_fk_interpret(const fk_plan *P, int q0, int q1, int64_t n, fk_val *v, char (*scratch)[BUF_BYTES],
                          char (*stage)[BUF_BYTES]);

/** The operand (a load, or an output: nin + its index) FULL value v of P is kept in, else -1 (a
 *  row or tile buffer). */
static inline int nb__cpu_fk_operand(const fk_plan *P, int v) {
    return v < P->k->nin ? v : P->home[v] == H_OUT ? P->k->nin + P->hidx[v] : -1;
}

/** Instruction I on n elements into d from operands a (UNIFORM ones of stride 0), by the eager
 *  op's per-ISA kernel; `stage` holds four tile buffers for the mask kernels' operands (fused.c). */
void nb__cpu_fk_exec(const fk_plan *P, const nb_finstr *I, int64_t n, fk_val d, const fk_val *a,
                     char (*stage)[BUF_BYTES]);

/** g rows of L es-byte elements into dst, contiguous: row r's element i from src + r rs + i is
 *  (is 0: a per-row value repeated along its row; rs 0: one row repeated); returns dst (fused.c). */
char *nb__cpu_fk_expand_rows(char *dst, const char *src, int64_t rs, int64_t is, int64_t g, int64_t L, size_t es);

/** One call of compiled stage S (of row or column kernel P) over g rows of n elements: operand o
 *  where x[o] says — FULL ones at their first row's first element, running on from row to row;
 *  ROW values (a row kernel's: one element a row, x[o].s apart; a column kernel's: one a column
 *  along the row, x[o].s apart) expanded along the rows into scratch[nexp..];
 *  UNIFORM loads their element (x is overwritten) (fused.c). */
void nb__cpu_fk_stage_rows(const fk_plan *P, const fk_stage *S, fk_val *x, int64_t g, int64_t n,
                           char (*scratch)[BUF_BYTES], int nexp, bool stream);

/** The value of UNIFORM value v of P (a load's first element, or computed by run_uniform). */
fk_val nb__cpu_fk_uniform(const fk_plan *P, int v);

/** Run column kernel P (lead: its reduced axes lead the domain shape[ndim]) over the operands ts
 *  (the loads, then the outputs, viewed with the domain's shape): NB_OK (*ran: how),
 *  NB_ERR_UNSUPPORTED when it cannot take this call (nothing written), NB_ERR_OOM (fused_cols.c). */
nb_status nb__cpu_fused_cols(fk_plan *P, const int64_t *shape, int ndim, const nb_tensor *const *ts, int *ran);

#endif
