/*
 * fused.h — the fused-kernel program: what the compiler's fusion pass
 * (src/compile/fuse.c) hands a backend that can run several elementwise ops
 * and reductions as one pass over memory (the CPU backend's tiled
 * interpreter, src/backend/cpu/fused.c and fused_cols.c).
 *
 * A kernel computes over a domain shape D.  Its values are numbered: the
 * loads first (0 .. nin-1, tensors given at run time), then one value per
 * instruction (nin + j).  Each value has a level:
 *   UNIFORM  one element for the whole domain (scalars, and ops on them);
 *   ROW      one element per row: nred of D's axes (the reduced axes) are
 *            reduced away, the others index the rows.  In a row kernel the
 *            reduced axes are D's last nred (the inner axes); in a column
 *            kernel (lead) its first nred, and a "row" is then a column;
 *   FULL     one element per position of D.
 * An instruction's level is the highest of its operands', except a
 * reduction (SUM, MAX, MIN, PROD over the reduced axes of a FULL value;
 * a column kernel's reductions are SUMs), which is ROW.  Every instruction
 * computes exactly what the eager op would (the same per-ISA kernels, the
 * same conversions, a reduction in the same order as the eager reduction of
 * a contiguous tensor), so a fused plan gives the same bits as running its
 * ops one by one.
 */
#ifndef NB_FUSED_H
#define NB_FUSED_H

#include "../ops/ops.h"

/** Limits of one kernel: operands (loads + outputs), instructions. */
enum { NB_FK_MAX_IO = 24, NB_FK_MAX_INSTR = 96 };

typedef enum nb_flevel { NB_FL_UNIFORM, NB_FL_ROW, NB_FL_FULL, NB_FL_COUNT } nb_flevel;

/**
 * One instruction.  op is a UNARY, BINARY or WHERE op of the table (its
 * operands already of the dtype the eager kernel computes in: the compute
 * dtype of a binary op, the result dtype of a float unary op, the result
 * dtype for where's two values; any condition dtype), NB_OP_CAST (convert
 * in[0] to dtype, as nb_cast), or a REDUCE op (SUM, MAX, MIN, PROD of the
 * FULL value in[0] over the inner axes).  Results are f32, f64 or bool.
 */
typedef struct nb_finstr {
    nb_op op;
    nb_flevel level;
    nb_dtype dtype;   /* the result's */
    int16_t in[3];    /* operand values; -1 where absent */
    double p0, p1;    /* unary parameters (leaky_relu's slope, clamp's bounds, …) */
} nb_finstr;

typedef struct nb_fkernel {
    int nin, ninstr, nout;
    int nred;                /* reduced axes of the domain; 0: no reductions, no ROW values */
    bool lead;               /* the reduced axes are the domain's first nred (a column kernel: its
                                FULL values depend on no reduction), not its last */
    nb_dtype *in_dtype;      /* per load */
    nb_flevel *in_level;     /* per load: UNIFORM loads have one element, ROW loads are constant
                                along the inner axes */
    nb_finstr *instr;
    int16_t *out_val;        /* the value each output receives */
} nb_fkernel;

/** How a backend ran a fused kernel (the report's per-kernel line). */
typedef enum nb_fk_ran {
    NB_FK_RAN_OPS,         /* declined: the executor ran its ops one by one */
    NB_FK_RAN_INTERPRETED, /* an interpreter of built-in kernels */
    NB_FK_RAN_COMPILED,    /* machine code compiled for it at run time (a row kernel: for each of
                              its elementwise stages; its reductions are the built-in ones) */
    NB_FK_RAN_COUNT
} nb_fk_ran;

/** The value id of instruction j of k. */
static inline int nb__fk_instr_val(const nb_fkernel *k, int j) { return k->nin + j; }
/** Level of value v of k. */
static inline nb_flevel nb__fk_level(const nb_fkernel *k, int v) {
    return v < k->nin ? k->in_level[v] : k->instr[v - k->nin].level;
}
/** dtype of value v of k. */
static inline nb_dtype nb__fk_dtype(const nb_fkernel *k, int v) {
    return v < k->nin ? k->in_dtype[v] : k->instr[v - k->nin].dtype;
}
/** The last instruction of k (program order) that reads value v, -1 when none. */
static inline int nb__fk_last_reader(const nb_fkernel *k, int v) {
    int last = -1;
    for (int q = 0; q < k->ninstr; q++)
        for (int i = 0; i < 3; i++)
            if (k->instr[q].in[i] == v) last = q;
    return last;
}

#endif /* NB_FUSED_H */
