/*
 * graph.h — the traced graph IR shared by tracing (src/graph), graph grad,
 * the compiler and executor (src/compile) and, later, the transforms:
 * append-only nodes with stable ids, each an op of the same op table as
 * eager code (or an input, param or constant), its attributes, its input
 * values and the metadata of its outputs (static or symbolic dims, dtype).
 */
#ifndef NB_GRAPH_H
#define NB_GRAPH_H

#include "../ops/ops.h"

typedef enum nb_gnode_kind {
    NB_GNODE_INPUT,  /* a named run-time argument: shape (maybe symbolic) and dtype declared */
    NB_GNODE_PARAM,  /* a named tensor bound at build time, re-read at every run (weights) */
    NB_GNODE_CONST,  /* a tensor captured by value (weak C scalars, host data) */
    NB_GNODE_OP,     /* an op of the table applied to earlier values */
    NB_GNODE_KIND_COUNT
} nb_gnode_kind;

/** One value of a graph: output `out` of node `node`. */
typedef struct nb_gval {
    int32_t node, out;
} nb_gval;

typedef struct nb_gnode {
    int32_t id;          /* its index; never reused */
    nb_gnode_kind kind;
    nb_op op;            /* NB_GNODE_OP only */
    nb_attrs attrs;      /* normalized by the op's infer rule; dims may be symbolic */
    int n_in, n_out;
    nb_gval in[8];
    nb_meta out[NB_MAX_OUTS];
    char *name;          /* inputs and params: their name; others: NULL or a label */
    nb_tensor *value;    /* PARAM and CONST: the (retained, concrete) tensor */
} nb_gnode;

struct nb_graph {
    atomic_int refs;
    char *name;
    nb_device device;    /* where it runs by default (the first concrete tensor's, or CPU) */
    nb_gnode *nodes;
    int n, cap;
    nb_gval *outputs;    /* the graph's results, named */
    char **output_names;
    int n_outputs, cap_outputs;
    bool building;       /* between nb_graph_begin and nb_graph_end */
    bool lazy;           /* an eval-mode graph (ops on its tensors extend it outside a trace) */
    uint64_t hash;       /* structural hash, set by nb__graph_hash (0: not computed) */
    struct nb__vslot *vmap; /* open addressing: tensor of a PARAM / CONST node -> its first node */
    int vmap_n, vmap_cap;
};

void nb__graph_retain(nb_graph *g);
/** A new empty graph record (one reference) named name (NULL or "": "graph") running on dev;
 *  NULL with NB_ERR_OOM naming op. */
nb_graph *nb__graph_new(const char *op, const char *name, nb_device dev);
/** Append op (inferred: meta[0..nout)) on in[0..n) to g (inputs of other graphs imported,
 *  concrete ones captured) and write nout new unscoped symbolic tensors of g to out.  The
 *  trace and lazy interpreters' apply.  NB_OK or an error (nothing left in out). */
nb_status nb__graph_apply(nb_graph *g, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                          const nb_meta *meta, int nout, nb_tensor **out);
/** Append a node (copying *nd; its id is assigned).  Returns the id, or -1 (NB_ERR_OOM). */
int32_t nb__graph_append(nb_graph *g, const nb_gnode *nd);
/** A new symbolic tensor for value v of g (retains g). Unscoped. */
nb_tensor *nb__graph_tensor(nb_graph *g, nb_gval v);
/** The slot of value v in a table indexed by value (a run's, a transform's): node * NB_MAX_OUTS + out. */
static inline int32_t nb__slot(nb_gval v) { return v.node * NB_MAX_OUTS + v.out; }
/** Metadata of a value. */
static inline const nb_meta *nb__gval_meta(const nb_graph *g, nb_gval v) { return &g->nodes[v.node].out[v.out]; }
/** The value t stands for in g: its own when t belongs to g, a node imported from t's graph
 *  (with its ancestors) when t is symbolic elsewhere, a CONST node for a concrete t.
 *  {-1, -1} with an error on failure. */
nb_gval nb__graph_value_of(nb_graph *g, nb_tensor *t);
/** The graph whose trace interpreter is on top of this thread's dispatch stack (the
 *  one traced ops go to now), NULL when none is. */
nb_graph *nb__graph_tracing(void);
/** Structural hash of g (ops, attrs, metas, wiring, constants by value, outputs). */
uint64_t nb__graph_hash(nb_graph *g);
/** True when a and b have the same structure and constants (the cache's equality). */
bool nb__graph_equal(const nb_graph *a, const nb_graph *b);
/** Stand-ins of op node nd's inputs for its infer rule: in[i] = &st[i] (storage ss[i]), a
 *  symbolic tensor record carrying the input's stored metadata and device (no allocation; NULL
 *  for an absent input).  ss, st, in: nd->n_in entries. */
void nb__graph_standins(const nb_graph *g, const nb_gnode *nd, nb_storage *ss, nb_tensor *st, nb_tensor **in);
/** Element k (row-major) of the concrete tensor t. */
const char *nb__elem_at(const nb_tensor *t, int64_t k);
/** Verify the IR's invariants; NB_OK or NB_ERR_FORMAT naming the node at fault. */
nb_status nb__graph_verify(const nb_graph *g);

/* ---- DOT text (src/graph/dot.c), shared with the compiled plan's DOT ---- */

/** The DOT statement of node id of g: `nID [label="<what>\n<dtype>[<shape>]…"]`, extra
 *  (NULL: none) appended to the label as one more line. */
void nb__dot_node(nb__text *b, const nb_graph *g, int32_t id, const char *extra);
/** s with '"' and '\' escaped for a DOT label, truncated to fit buf (128 bytes); returns buf. */
const char *nb__dot_escape(char *buf, const char *s);
/** The DOT edges into node id of g. */
void nb__dot_edges(nb__text *b, const nb_graph *g, int32_t id);

#endif /* NB_GRAPH_H */
