/*
 * compile.h — the compiled plan shared by the compiler (schedule.c), the
 * compile cache (cache.c), the executor (run.c) and its DOT (dot_plan.c):
 * the graph it came from, its device, and the schedule.
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

struct nb_compiled {
    atomic_int refs;
    nb_graph *g;       /* retained */
    nb_device dev;
    nb_schedule s;
};

#endif /* NB_COMPILE_H */
