/*
 * compile.h — the compiled plan shared by the compiler (schedule.c), the
 * compile cache (cache.c), the executor (run.c) and its DOT (dot_plan.c):
 * the graph it came from, its device, the schedule, and what its last run
 * leaves for the next.
 */
#ifndef NB_COMPILE_H
#define NB_COMPILE_H

#include "../graph/graph.h"
#include "../backend/fused.h"
#include "passes.h"

#include <string.h>

/** Why a node of a fusible kind runs alone (the compile report's missed fusions). */
typedef enum nb_fuse_miss {
    NB_FUSE_OK,          /* fused, or not of a fusible kind */
    NB_FUSE_MISS_KIND,   /* its op kind never fuses (matmul, gather, views, …) */
    NB_FUSE_MISS_DTYPE,  /* a dtype the fused kernels do not compute (integers, halves) */
    NB_FUSE_MISS_AXES,   /* a reduction over axes neither trailing nor leading, or a max / min / prod
                            over leading ones */
    NB_FUSE_MISS_SHAPE,  /* its shape fits none of its producers' kernels */
    NB_FUSE_MISS_CYCLE,  /* joining would put a kernel on both sides of another step */
    NB_FUSE_MISS_LIMIT,  /* the kernel would exceed its operand or instruction limits */
    NB_FUSE_MISS_ALONE,  /* no fusible producer or consumer */
    NB_FUSE_MISS_PASS,   /* reads a column reduction's result along the reduced axes (a second pass) */
    NB_FUSE_MISS_COUNT
} nb_fuse_miss;

/** One fused kernel of a plan (fuse.c): its program and how it binds to the graph's values. */
typedef struct nb_fstep {
    nb_fkernel k;             /* the program (its arrays owned) */
    int nd;                   /* the domain: dims may be symbolic (evaluated when it runs) */
    int64_t dom[NB_MAX_DIMS];
    int32_t *load_slot;       /* per load: the value (nb__slot) it reads */
    int32_t *out_slot;        /* per output: the value it computes */
    bool *load_outer;         /* aligned with the domain's outer axes (a reduction's result */
    bool *out_outer;          /*   without keepdim) instead of its trailing ones */
    int32_t *member;          /* the op nodes it computes, in id order (run one by one when the */
    int nmember;              /*   backend cannot run the kernel) */
} nb_fstep;

void nb__fstep_free(nb_fstep *f);

/** Are the n dims all a concrete 1 (a value of one element wherever it is broadcast)? */
static inline bool nb__dims_all_one(const int64_t *s, int n) {
    for (int d = 0; d < n; d++)
        if (s[d] != 1) return false;
    return true;
}

/** The most op nodes in one fused kernel: each gives an instruction and at most two casts, within
 *  NB_FK_MAX_INSTR. */
#define NB_FUSE_MAX_MEMBERS (NB_FK_MAX_INSTR / 3)

/** A fusion group's domain: nd dims (symbolic ones allowed), nred of them reduced: the last ones
 *  (rows), or with lead the first ones (columns). */
typedef struct nb_fdomain {
    int64_t dom[NB_MAX_DIMS];
    int nd, nred;
    bool lead;
} nb_fdomain;
/** Is s[ns] the ROW shape of row domain d without its reduced axes (a row reduction's result
 *  without keepdim, which lines up with the outer axes)?  A column reduction's result keeps its
 *  trailing axes, so it lines up as broadcasting does. */
static inline bool nb__fdomain_outer_row(const nb_fdomain *d, const int64_t *s, int ns) {
    return d->nred > 0 && !d->lead && ns == d->nd - d->nred && !memcmp(s, d->dom, sizeof(int64_t) * (size_t)ns);
}
/** The kernel of the fusion group members[0..n) (op nodes of g, in id order) over domain d into
 *  *f; ext[slot]: the value is read outside the group (it becomes an output).  NB_OK,
 *  NB_ERR_UNSUPPORTED (no error set: over the kernel's limits; its nodes then run alone),
 *  NB_ERR_OOM. */
nb_status nb__fkernel_build(const nb_graph *g, const int32_t *members, int n, const nb_fdomain *d, const bool *ext,
                            nb_fstep *f);

/**
 * The fusion pass over the op nodes of g marked live: fused kernels into *kernels (*nk of
 * them, nb__malloc'd, NULL when none), kernel_of[id] = the kernel node id belongs to or -1,
 * miss[id] = why a node of a fusible kind was left alone (nb_fuse_miss).  NB_OK or NB_ERR_OOM.
 */
nb_status nb__fuse(const nb_graph *g, const bool *live, nb_fstep **kernels, int *nk, int32_t *kernel_of,
                   uint8_t *miss);

/**
 * What a run executes: steps in a topological order, each an op node or a fused kernel, and
 * after each step the value slots whose last use it was (graph outputs are never among them).
 */
typedef struct nb_schedule {
    int n;             /* steps */
    int32_t *node;     /* step k: an op node id, or -1 - f for fused kernel f */
    int *free_start;   /* slots freed after step k: free_slot[free_start[k] .. free_start[k + 1]) */
    int32_t *free_slot;
    int nfused;
    nb_fstep *fused;
    int nops;          /* op nodes the plan computes (dead ones dropped) */
    uint8_t *miss;     /* per graph node: nb_fuse_miss */
} nb_schedule;

/** The fused kernel of step k, NULL for an op-node step. */
static inline const nb_fstep *nb__step_kernel(const nb_schedule *s, int k) {
    return s->node[k] < 0 ? &s->fused[-1 - s->node[k]] : NULL;
}

/** Call READ(slot) for each value step `step` of schedule sched (of graph g) reads, WRITE(slot)
 *  for each value it writes (nb__slot indices): a fused kernel's loads and outputs, or an op
 *  node's operands and results. */
#define NB_STEP_VALUES(g, sched, step, READ, WRITE)                                         \
    do {                                                                                   \
        const nb_fstep *f_ = nb__step_kernel(sched, step);                                 \
        if (f_) {                                                                          \
            for (int j_ = 0; j_ < f_->k.nin; j_++) READ(f_->load_slot[j_]);                \
            for (int j_ = 0; j_ < f_->k.nout; j_++) WRITE(f_->out_slot[j_]);               \
        } else {                                                                           \
            const nb_gnode *nd_ = &(g)->nodes[(sched)->node[step]];                        \
            for (int j_ = 0; j_ < nd_->n_in; j_++)                                         \
                if (nd_->in[j_].node >= 0) READ(nb__slot(nd_->in[j_]));                   \
            for (int j_ = 0; j_ < nd_->n_out; j_++) WRITE(nb__slot((nb_gval){nd_->id, j_})); \
        }                                                                                  \
    } while (0)

/**
 * THE compiler seam: the schedule of g (verified): dead-code elimination, fusion into kernels
 * when `fuse` (the device's backend runs fused kernels), a topological order of the steps,
 * liveness.  NB_OK, or NB_ERR_OOM (s left empty).
 */
nb_status nb__schedule_build(const nb_graph *g, bool fuse, nb_schedule *s);
/** NB_FUSE=0 compiles plans without fusion (each op its own step: for comparisons); unset or 1
 *  fuses; another value warns on stderr and fuses.  Read by the first compile (cache.c);
 *  exposed for tests. */
bool nb__env_fuse(void);
/** A deep copy of src into dst (NB_ERR_OOM: dst left empty). */
nb_status nb__schedule_copy(nb_schedule *dst, const nb_schedule *src, int gn);
void nb__schedule_free(nb_schedule *s);

/**
 * A memory plan (plan.c): where the intermediates of a run under one binding live in one
 * arena.  Per value slot: offset (-1: not planned, it gets a buffer of its own), and for
 * planned ones the buffer it shares (values computed in place share one), its size and the
 * steps it is live (start .. end).
 */
typedef struct nb_mplan {
    int nbuf;
    int64_t *offset;
    int32_t *buf, *start, *end;
    int32_t *root;         /* per slot: the value whose storage it shares (views, copies), itself
                              else; end[root] is the last step reading the root or any alias */
    int64_t *size;
    int64_t arena;         /* bytes of the arena */
    int64_t unfused;       /* every intermediate op result (no view, no output): op by op's bytes */
    int64_t intermediates; /* the planned values' bytes added up */
    int64_t live_peak;     /* the most bytes live at one step: the arena's lower bound */
} nb_mplan;

/** The memory plan of c's schedule with the symbolic dims bound by bind.  NB_OK, NB_ERR_OOM,
 *  NB_ERR_OVERFLOW. */
nb_status nb__mplan_build(const nb_compiled *c, const nb_dim_binding *bind, nb_mplan *p);
void nb__mplan_free(nb_mplan *p);
/** True when no two planned values live at the same step overlap in the arena, every one is
 *  64-byte aligned and inside it; else false with the first clash described in why. */
bool nb__mplan_check(const nb_mplan *p, int nslots, char *why, size_t n);

/**
 * What a run needs besides the plan, kept in the plan for the next run: the
 * value table (all NULL between runs) and, after a run that succeeded, each
 * step's concrete attrs and output metadata under that run's dim binding.
 * A run whose binding is the same (and no argument is a weak scalar) takes
 * them as they are instead of evaluating dims and re-running infer: every
 * value's shape and dtype follows from the arguments', so they would come
 * out the same.  One run at a time uses it (`busy`); a run that finds it busy
 * (another thread on a shared plan, or a plan run from inside its own run)
 * gets a value table of its own and caches nothing.
 */
typedef struct nb_run_cache {
    atomic_bool busy;
    bool valid;         /* attrs / meta hold the steps of the run under bind */
    nb_dim_binding bind;
    nb_tensor **slot;   /* nb__slot-indexed values */
    nb_attrs *attrs;    /* per step */
    nb_meta *meta;      /* per step, NB_MAX_OUTS each */
    nb_mplan mem;       /* the memory plan under bind (valid with the rest) */
    uint8_t *ran;       /* per fused kernel: how the last run ran it (nb_fk_ran) */
    nb_storage *arena;  /* its arena, kept between runs */
} nb_run_cache;

/** Free c's arrays (a run cache not in use). */
void nb__run_cache_free(nb_run_cache *c);

struct nb_compiled {
    atomic_int refs;
    nb_graph *src;     /* the graph compiled (retained): its params are the defaults */
    nb_graph *g;       /* what runs: src optimized (passes.h; retained, may be shared by the plans
                          of graphs equal to src) */
    int32_t *param_src; /* per node of g: the node of src a PARAM stands for, else -1 */
    int32_t *leaf;      /* g's INPUT, PARAM and CONST nodes, in order (what a run binds and checks) */
    int nleaf;
    nb_pass_stats passes;
    nb_device dev;
    nb_schedule s;
    nb_run_cache run;
};

#endif /* NB_COMPILE_H */
