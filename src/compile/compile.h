/*
 * compile.h — the compiled plan shared by the compiler (schedule.c), the
 * compile cache (cache.c), the executor (run.c) and its DOT (dot_plan.c):
 * the graph it came from, its device, the schedule, and what its last run
 * leaves for the next.
 */
#ifndef NB_COMPILE_H
#define NB_COMPILE_H

#include "../graph/graph.h"

/** The slot of value v in a run's value table. */
static inline int32_t nb__slot(nb_gval v) { return v.node * NB_MAX_OUTS + v.out; }

/**
 * What a run executes: the op nodes in order (op by op, every node the
 * outputs do not reach dropped), and after each step the value slots whose
 * last use it was (graph outputs are never among them).
 */
typedef struct nb_schedule {
    int n;             /* steps */
    int32_t *node;     /* node id of step k */
    int *free_start;   /* slots freed after step k: free_slot[free_start[k] .. free_start[k + 1]) */
    int32_t *free_slot;
} nb_schedule;

/**
 * THE compiler seam: the schedule of g (verified).  Today: dead-code
 * elimination, topological (id) order, liveness; fusion and memory
 * planning go here.  NB_OK, or NB_ERR_OOM (s left empty).
 */
nb_status nb__schedule_build(const nb_graph *g, nb_schedule *s);
/** A deep copy of src into dst (NB_ERR_OOM: dst left empty). */
nb_status nb__schedule_copy(nb_schedule *dst, const nb_schedule *src);
void nb__schedule_free(nb_schedule *s);

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
} nb_run_cache;

/** Free c's arrays (a run cache not in use). */
void nb__run_cache_free(nb_run_cache *c);

struct nb_compiled {
    atomic_int refs;
    nb_graph *g;       /* retained */
    nb_device dev;
    nb_schedule s;
    nb_run_cache run;
};

#endif /* NB_COMPILE_H */
