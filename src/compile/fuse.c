/*
 * fuse.c — the fusion pass: groups a schedule's elementwise ops (unary,
 * binary, where, casts) and their reductions over trailing axes (rows) or
 * sums over leading axes (columns) into fused kernels (backend/fused.h)
 * that a backend runs in one pass over memory.
 *
 * A group has a domain D and a count nred of reduced axes, D's last ones
 * (a row group) or its first ones (a column group); each of its nodes has
 * D's shape (FULL), D's shape with the reduced axes reduced away, kept as 1
 * or dropped (ROW), or one element (UNIFORM).  A column group is one pass
 * down its columns: no FULL node in it reads a reduction.  Nodes join
 * the groups of their producers greedily in schedule order when the shapes
 * agree and the merged group stays acyclic (no path leaves the group and
 * comes back: the kernel runs as one step).  A value of a group that
 * anything outside it reads (or a graph output) becomes a kernel output;
 * the rest never reach memory (fuse_kernel.c builds each kernel's program).
 * Why a fusible node stayed alone is kept for the compile report.
 */
#include "compile.h"
#include "../backend/fused.h"

#include <string.h>

/* Bounds on a group while it grows, so that every group becomes a kernel: its nodes
 * (NB_FUSE_MAX_MEMBERS) and the values it reads from outside (leaving room among the kernel's
 * NB_FK_MAX_IO operands for its outputs). */
enum { MAX_MEMBERS = NB_FUSE_MAX_MEMBERS, MAX_LOADS = NB_FK_MAX_IO * 2 / 3 };

typedef struct fgrp {
    nb_fdomain d;
    bool uniform; /* every node so far has one element: takes any other group's domain */
    int count;
    int32_t minid, maxid, head, tail; /* member list through next[] */
} fgrp;

typedef struct fuser {
    const nb_graph *g;
    int32_t *parent; /* union-find over node ids; -1: not in a group */
    fgrp *grp;       /* indexed by a group's root */
    int32_t *next;
    uint32_t *mark, epoch;
    int32_t *stack;
    const bool *live;
    uint8_t *why;    /* nb_fuse_miss per node */
} fuser;

static int32_t root(fuser *F, int32_t id) {
    while (F->parent[id] != id) id = F->parent[id] = F->parent[F->parent[id]];
    return id;
}

/* ---- which nodes fuse ---- */

static bool float_dt(nb_dtype dt) { return dt == NB_F32 || dt == NB_F64; }
/* dtypes a fused cast converts from: what the backend's copy converts exactly */
static bool castable(nb_dtype dt) {
    return float_dt(dt) || dt == NB_BOOL || dt == NB_I8 || dt == NB_U8 || dt == NB_I32 || dt == NB_I64;
}

/* The trailing-axis count a REDUCE node reduces (its axes are the last r of its input), or 0. */
static int trailing_axes(const nb_gnode *nd, const nb_meta *in) {
    const nb_attrs *a = &nd->attrs;
    if (a->naxes < 1) return 0;
    bool mask[NB_MAX_DIMS] = {false};
    for (int i = 0; i < a->naxes; i++) mask[a->axes[i]] = true;
    int r = a->naxes;
    for (int d = 0; d < in->ndim; d++)
        if (mask[d] != (d >= in->ndim - r)) return 0;
    return r;
}

/* The leading-axis count a REDUCE node reduces (its axes are the first r of its input, and not
 * all of them: those are trailing), or 0. */
static int leading_axes(const nb_gnode *nd, const nb_meta *in) {
    const nb_attrs *a = &nd->attrs;
    if (a->naxes < 1 || a->naxes >= in->ndim) return 0;
    for (int i = 0; i < a->naxes; i++)
        if (a->axes[i] >= a->naxes) return 0;
    return a->naxes;
}

/* NB_FUSE_OK when node nd can be part of a fused kernel, else why not. */
static nb_fuse_miss fusible(const nb_graph *g, const nb_gnode *nd) {
    if (nd->n_out != 1) return NB_FUSE_MISS_KIND;
    const nb_meta *m = &nd->out[0];
    nb_op op = nd->op;
    nb_op_kind kind = nb__ops[op].kind;
    const nb_meta *in0 = nd->n_in ? nb__gval_meta(g, nd->in[0]) : NULL;
    switch (kind) {
    case NB_KIND_UNARY:
        if (op == NB_OP_LOGICAL_NOT) return float_dt(in0->dtype) || in0->dtype == NB_BOOL ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
        return float_dt(m->dtype) && castable(in0->dtype) ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
    case NB_KIND_BINARY: {
        nb_dtype ct = m->compute;
        bool ok = nb__op_is_logic(op) ? float_dt(ct) || ct == NB_BOOL : float_dt(ct);
        for (int i = 0; i < 2; i++) ok = ok && castable(nb__gval_meta(g, nd->in[i])->dtype);
        return ok ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
    }
    case NB_KIND_WHERE: {
        size_t ces = nb_dtype_size(in0->dtype);
        bool ok = float_dt(m->dtype) && (ces == 1 || ces == 2 || ces == 4 || ces == 8);
        for (int i = 1; i < 3; i++) ok = ok && castable(nb__gval_meta(g, nd->in[i])->dtype);
        return ok ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
    }
    case NB_KIND_COPY:
        if (op == NB_OP_TO_DEVICE) return NB_FUSE_MISS_KIND;
        return castable(in0->dtype) && (float_dt(m->dtype) || m->dtype == NB_BOOL) ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
    case NB_KIND_VIEW:
        if (op != NB_OP_DETACH) return NB_FUSE_MISS_KIND;
        return float_dt(m->dtype) || m->dtype == NB_BOOL ? NB_FUSE_OK : NB_FUSE_MISS_DTYPE;
    case NB_KIND_REDUCE:
        if (!float_dt(in0->dtype) || m->dtype != in0->dtype) return NB_FUSE_MISS_DTYPE;
        return trailing_axes(nd, in0) || (op == NB_OP_SUM && leading_axes(nd, in0)) ? NB_FUSE_OK : NB_FUSE_MISS_AXES;
    default: return NB_FUSE_MISS_KIND;
    }
}

/* ---- group domains ---- */

static bool same_dims(const int64_t *a, const int64_t *b, int n) { return !memcmp(a, b, sizeof(int64_t) * (size_t)n); }

/* Is shape s[ns] a ROW shape of domain d[nd] with r inner axes: the outer dims, then r ones
 * (keepdim) or nothing? */
static bool row_shape(const int64_t *s, int ns, const int64_t *d, int nd, int r) {
    if (r < 1 || r > nd || !same_dims(s, d, nd - r)) return false;
    if (ns == nd - r) return true;
    return ns == nd && nb__dims_all_one(s + nd - r, r);
}

/* Is shape s[ns] a ROW shape of domain d[nd] with r leading reduced axes: r ones (keepdim) or
 * nothing, then the kept dims? */
static bool col_shape(const int64_t *s, int ns, const int64_t *d, int nd, int r) {
    return r >= 1 && r < nd && (ns == nd - r || (ns == nd && nb__dims_all_one(s, r))) &&
           same_dims(s + ns - (nd - r), d + r, nd - r);
}

/* Is shape s[ns] a ROW shape of reduced domain d? */
static bool part_shape(const int64_t *s, int ns, const nb_fdomain *d) {
    return d->lead ? col_shape(s, ns, d->dom, d->nd, d->nred) : row_shape(s, ns, d->dom, d->nd, d->nred);
}


static fgrp state_of(const nb_graph *g, const nb_gnode *nd) {
    fgrp s = {.count = 1};
    const nb_meta *m = &nd->out[0];
    if (nb__ops[nd->op].kind == NB_KIND_REDUCE) {
        const nb_meta *in = nb__gval_meta(g, nd->in[0]);
        s.d.nd = in->ndim;
        memcpy(s.d.dom, in->shape, sizeof(int64_t) * (size_t)in->ndim);
        s.d.nred = trailing_axes(nd, in);
        if (!s.d.nred) {
            s.d.nred = leading_axes(nd, in);
            s.d.lead = true;
        }
        return s;
    }
    s.d.nd = m->ndim;
    memcpy(s.d.dom, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    s.uniform = nb__dims_all_one(m->shape, m->ndim);
    return s;
}

/* The domain of groups a and b together (into *a), false when they do not fit. */
static bool combine(fgrp *a, const fgrp *b) {
    nb_fdomain *x = &a->d;
    const nb_fdomain *y = &b->d;
    if (b->uniform) return true;
    if (a->uniform) {
        *x = *y;
        a->uniform = false;
        return true;
    }
    if (x->nred == 0 && y->nred > 0) {
        fgrp t = *b;
        if (!combine(&t, a)) return false;
        *x = t.d;
        return true;
    }
    if (x->nred > 0 && y->nred > 0)
        return x->nd == y->nd && x->nred == y->nred && x->lead == y->lead && same_dims(x->dom, y->dom, x->nd);
    if (x->nred > 0) /* b: plain values of one shape, FULL or ROW here */
        return (y->nd == x->nd && same_dims(y->dom, x->dom, x->nd)) || part_shape(y->dom, y->nd, x);
    if (x->nd == y->nd && same_dims(x->dom, y->dom, x->nd)) return true;
    for (int r = 1; r <= x->nd || r <= y->nd; r++) { /* one is a ROW shape of the other: a row group */
        if (row_shape(y->dom, y->nd, x->dom, x->nd, r)) {
            x->nred = r;
            return true;
        }
        if (row_shape(x->dom, x->nd, y->dom, y->nd, r)) {
            *x = *y;
            x->nred = r;
            return true;
        }
    }
    return false;
}

/* ---- acyclicity ---- */

/* The walk of makes_cycle: the op-node inputs of node id that may depend on the set (marked
 * in_set) go on the stack unless seen; returns true when one is in the set. */
static bool visit_inputs(fuser *F, int32_t id, int32_t lo, uint32_t in_set, uint32_t seen, int *sp) {
    const nb_gnode *nd = &F->g->nodes[id];
    bool hit = false;
    for (int i = 0; i < nd->n_in; i++) {
        int32_t p = nd->in[i].node;
        if (F->g->nodes[p].kind != NB_GNODE_OP || F->mark[p] == seen) continue;
        if ((F->parent[p] >= 0 ? F->grp[root(F, p)].maxid : p) < lo) continue; /* precedes the set */
        if (F->mark[p] == in_set) hit = true;
        else F->stack[(*sp)++] = p;
    }
    return hit;
}

/* The earliest node id from which the set (its earliest member lo) can be reached in the
 * contracted graph.  Node ids are a topological order, so a path from the set back to an earlier
 * node must jump back inside a group that has members on both sides of the bound: lower it to
 * such a group's earliest member until no group straddles it.  Steps entirely before the bound
 * depend on nothing in the set. */
static int32_t reach_bound(const fuser *F, int32_t lo, int32_t n) {
    for (bool lowered = true; lowered;) {
        lowered = false;
        for (int32_t r = 0; r < n; r++)
            if (F->parent[r] == r && F->grp[r].minid < lo && F->grp[r].maxid >= lo) {
                lo = F->grp[r].minid;
                lowered = true;
            }
    }
    return lo;
}

/* Would node n and the groups roots[0..k) as one kernel lie on a path that leaves them and
 * comes back?  A backward walk over the contracted graph (a group is one step) from their
 * outside inputs must not reach them; steps before reach_bound are not walked. */
static bool makes_cycle(fuser *F, int32_t n, const int32_t *roots, int k) {
    uint32_t in_set = ++F->epoch, seen = ++F->epoch;
    int32_t lo = n;
    int sp = 0;
    F->mark[n] = in_set;
    for (int i = 0; i < k; i++)
        for (int32_t x = F->grp[roots[i]].head; x >= 0; x = F->next[x]) {
            F->mark[x] = in_set;
            if (x < lo) lo = x;
        }
    lo = reach_bound(F, lo, n);
    visit_inputs(F, n, lo, in_set, seen, &sp); /* the set's own inputs among themselves are fine */
    for (int i = 0; i < k; i++)
        for (int32_t x = F->grp[roots[i]].head; x >= 0; x = F->next[x]) visit_inputs(F, x, lo, in_set, seen, &sp);
    while (sp > 0) {
        int32_t x = F->stack[--sp];
        if (F->mark[x] == seen) continue;
        if (F->parent[x] < 0) {
            F->mark[x] = seen;
            if (visit_inputs(F, x, lo, in_set, seen, &sp)) return true;
            continue;
        }
        int32_t r = root(F, x);
        for (int32_t y = F->grp[r].head; y >= 0; y = F->next[y]) F->mark[y] = seen;
        for (int32_t y = F->grp[r].head; y >= 0; y = F->next[y])
            if (visit_inputs(F, y, lo, in_set, seen, &sp)) return true;
    }
    return false;
}

/* Node n and the members of the groups roots[0..k) into members (at most MAX_MEMBERS + 1 of
 * them, n first), each marked with `mark`; returns how many. */
static int gather_set(fuser *F, int32_t n, const int32_t *roots, int k, uint32_t mark, int32_t *members) {
    int nm = 0;
    members[nm++] = n;
    F->mark[n] = mark;
    for (int i = 0; i < k; i++)
        for (int32_t x = F->grp[roots[i]].head; x >= 0 && nm <= MAX_MEMBERS; x = F->next[x]) {
            members[nm++] = x;
            F->mark[x] = mark;
        }
    return nm;
}

/* ids[0..n) in increasing order: node ids are a topological order. */
static void sort_ids(int32_t *ids, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && ids[j] < ids[j - 1]; j--) {
            int32_t t = ids[j];
            ids[j] = ids[j - 1];
            ids[j - 1] = t;
        }
}

/* How many distinct values node n and the groups roots[0..k) read from outside themselves
 * (counting stops past MAX_LOADS). */
static int outside_values(fuser *F, int32_t n, const int32_t *roots, int k) {
    const nb_graph *g = F->g;
    uint32_t in_set = ++F->epoch;
    int32_t members[MAX_MEMBERS + 1], seen[MAX_LOADS + 1];
    int nm = gather_set(F, n, roots, k, in_set, members), ns = 0;
    for (int m = 0; m < nm && ns <= MAX_LOADS; m++)
        for (int i = 0; i < g->nodes[members[m]].n_in && ns <= MAX_LOADS; i++) {
            nb_gval v = g->nodes[members[m]].in[i];
            if (v.node < 0 || F->mark[v.node] == in_set) continue;
            int32_t sl = nb__slot(v);
            bool dup = false;
            for (int j = 0; j < ns && !dup; j++) dup = seen[j] == sl;
            if (!dup) seen[ns++] = sl;
        }
    return ns;
}

/* Can node n and the groups roots[0..k) (at most MAX_MEMBERS nodes) run as a column group over
 * domain d in one pass down the columns: does no FULL member read a value that a member
 * reduction gives (directly or through per-column members)? */
static bool one_pass(fuser *F, int32_t n, const int32_t *roots, int k, const nb_fdomain *d) {
    const nb_graph *g = F->g;
    uint32_t in_set = ++F->epoch, after = ++F->epoch;
    int32_t members[MAX_MEMBERS + 1];
    int nm = gather_set(F, n, roots, k, in_set, members);
    sort_ids(members, nm);
    for (int i = 0; i < nm; i++) {
        const nb_gnode *nd = &g->nodes[members[i]];
        bool reads = false;
        for (int j = 0; j < nd->n_in; j++) reads |= nd->in[j].node >= 0 && F->mark[nd->in[j].node] == after;
        const nb_meta *m = &nd->out[0];
        bool full = m->ndim == d->nd && same_dims(m->shape, d->dom, m->ndim);
        if (nb__ops[nd->op].kind == NB_KIND_REDUCE) F->mark[members[i]] = after;
        else if (reads && full) return false;
        else if (reads) F->mark[members[i]] = after;
    }
    return true;
}

/* ---- grouping ---- */

/* Join node n with the groups roots[0..k) (n alone when k = 0); false (reason in *why) when
 * their domains disagree, the kernel would be too large, or it would make a cycle. */
static bool try_join(fuser *F, int32_t n, const int32_t *roots, int k, uint8_t *why) {
    const nb_gnode *nd = &F->g->nodes[n];
    fgrp st = state_of(F->g, nd), own = st;
    int count = 1;
    int32_t minid = n;
    for (int i = 0; i < k; i++) {
        const fgrp *G = &F->grp[roots[i]];
        if (!combine(&st, G)) {
            *why = NB_FUSE_MISS_SHAPE;
            return false;
        }
        count += G->count;
        if (G->minid < minid) minid = G->minid;
    }
    /* a reduction's input is FULL and its axes are the group's reduced axes */
    bool reduce = nb__ops[nd->op].kind == NB_KIND_REDUCE;
    if (reduce && (st.d.nd != own.d.nd || st.d.nred != own.d.nred || st.d.lead != own.d.lead ||
                   !same_dims(st.d.dom, own.d.dom, st.d.nd))) {
        *why = NB_FUSE_MISS_SHAPE;
        return false;
    }
    const nb_meta *m = &nd->out[0];
    /* a ROW value without its reduced axes ([B] of a [B, C] domain) lines up with the outer axes
     * only among values of its own shape: broadcast against a larger one it aligns with the
     * trailing axes instead, so such a consumer stays out */
    if (!reduce && !nb__fdomain_outer_row(&st.d, m->shape, m->ndim))
        for (int i = 0; i < nd->n_in; i++) {
            int32_t p = nd->in[i].node;
            if (F->g->nodes[p].kind != NB_GNODE_OP || F->parent[p] < 0) continue;
            bool member = false; /* of the merged groups (others' values are loads, aligned by shape) */
            for (int j = 0; j < k; j++) member |= root(F, p) == roots[j];
            const nb_meta *pm = &F->g->nodes[p].out[0];
            if (!member) continue;
            if (nb__fdomain_outer_row(&st.d, pm->shape, pm->ndim)) {
                *why = NB_FUSE_MISS_SHAPE;
                return false;
            }
        }
    if (count > MAX_MEMBERS || outside_values(F, n, roots, k) > MAX_LOADS) {
        *why = NB_FUSE_MISS_LIMIT;
        return false;
    }
    if (st.d.lead && !one_pass(F, n, roots, k, &st.d)) {
        *why = NB_FUSE_MISS_PASS;
        return false;
    }
    if (k > 0 && makes_cycle(F, n, roots, k)) {
        *why = NB_FUSE_MISS_CYCLE;
        return false;
    }
    int32_t r = k ? roots[0] : n;
    st.count = count;
    st.minid = minid;
    st.maxid = n; /* nodes join in id order */
    st.head = k ? F->grp[r].head : n;
    st.tail = k ? F->grp[r].tail : n;
    for (int i = 1; i < k; i++) { /* concatenate the member lists */
        F->next[st.tail] = F->grp[roots[i]].head;
        st.tail = F->grp[roots[i]].tail;
        F->parent[roots[i]] = r;
    }
    if (k) {
        F->next[st.tail] = n;
        st.tail = n;
    }
    F->next[n] = -1;
    F->parent[n] = r;
    F->grp[r] = st;
    return true;
}

static void group_node(fuser *F, int32_t n) {
    const nb_gnode *nd = &F->g->nodes[n];
    int32_t roots[8];
    int k = 0;
    for (int i = 0; i < nd->n_in; i++) {
        int32_t p = nd->in[i].node;
        if (F->g->nodes[p].kind != NB_GNODE_OP || F->parent[p] < 0) continue;
        int32_t r = root(F, p);
        bool dup = false;
        for (int j = 0; j < k; j++) dup |= roots[j] == r;
        if (!dup) roots[k++] = r;
    }
    for (int i = 1; i < k; i++) /* largest group first */
        for (int j = i; j > 0 && F->grp[roots[j]].count > F->grp[roots[j - 1]].count; j--) {
            int32_t t = roots[j];
            roots[j] = roots[j - 1];
            roots[j - 1] = t;
        }
    uint8_t why = NB_FUSE_MISS_ALONE;
    if (k && try_join(F, n, roots, k, &why)) return;
    for (int i = 0; k > 1 && i < k; i++)
        if (try_join(F, n, roots + i, 1, &why)) return;
    try_join(F, n, NULL, 0, &why);
    F->why[n] = why;
}

nb_status nb__fuse(const nb_graph *g, const bool *live, nb_fstep **kernels, int *nk, int32_t *kernel_of,
                   uint8_t *miss) {
    size_t n = (size_t)(g->n ? g->n : 1);
    fuser F = {.g = g, .live = live, .why = miss};
    F.parent = nb__malloc(sizeof(int32_t) * n);
    F.grp = nb__malloc(sizeof(fgrp) * n);
    F.next = nb__malloc(sizeof(int32_t) * n);
    F.mark = nb__calloc(n, sizeof(uint32_t));
    F.stack = nb__malloc(sizeof(int32_t) * 8 * n);
    bool *ext = nb__calloc(n * NB_MAX_OUTS, sizeof(bool));
    nb_status st = NB_OK;
    *kernels = NULL;
    *nk = 0;
    if (!F.parent || !F.grp || !F.next || !F.mark || !F.stack || !ext) {
        st = nb__error(NB_ERR_OOM, "graph_compile: out of memory fusing graph '%s'", g->name);
        goto done;
    }
    for (int id = 0; id < g->n; id++) {
        F.parent[id] = -1;
        kernel_of[id] = -1;
        miss[id] = NB_FUSE_OK;
    }
    for (int id = 0; id < g->n; id++) {
        if (!live[id] || g->nodes[id].kind != NB_GNODE_OP) continue;
        nb_fuse_miss why = fusible(g, &g->nodes[id]);
        if (why == NB_FUSE_OK) group_node(&F, id);
        else miss[id] = (uint8_t)why;
    }
    /* kernel outputs: values read outside their group, and the graph's outputs */
    for (int id = 0; id < g->n; id++) {
        if (!live[id] || g->nodes[id].kind != NB_GNODE_OP) continue;
        for (int i = 0; i < g->nodes[id].n_in; i++) {
            int32_t p = g->nodes[id].in[i].node;
            if (g->nodes[p].kind == NB_GNODE_OP && F.parent[p] >= 0 && (F.parent[id] < 0 || root(&F, id) != root(&F, p)))
                ext[nb__slot(g->nodes[id].in[i])] = true;
        }
    }
    for (int i = 0; i < g->n_outputs; i++) ext[nb__slot(g->outputs[i])] = true;
    int ngroups = 0;
    for (int id = 0; id < g->n; id++) ngroups += F.parent[id] == id && F.grp[id].count > 1;
    if (ngroups && !(*kernels = nb__calloc((size_t)ngroups, sizeof(nb_fstep)))) {
        st = nb__error(NB_ERR_OOM, "graph_compile: out of memory fusing graph '%s'", g->name);
        goto done;
    }
    for (int id = 0; id < g->n && st == NB_OK; id++) {
        if (F.parent[id] != id || F.grp[id].count < 2) continue;
        int32_t members[MAX_MEMBERS];
        int nm = 0;
        for (int32_t x = F.grp[id].head; x >= 0; x = F.next[x]) members[nm++] = x;
        sort_ids(members, nm); /* lists concatenate out of order */
        st = nb__fkernel_build(g, members, nm, &F.grp[id].d, ext, &(*kernels)[*nk]);
        for (int32_t x = F.grp[id].head; x >= 0; x = F.next[x]) {
            if (st == NB_OK) kernel_of[x] = *nk;
            miss[x] = (uint8_t)(st == NB_OK ? NB_FUSE_OK : NB_FUSE_MISS_LIMIT);
        }
        if (st == NB_OK) ++*nk;
        else if (st == NB_ERR_UNSUPPORTED) st = NB_OK;
    }
    if (st != NB_OK) {
        for (int i = 0; i < *nk; i++) nb__fstep_free(&(*kernels)[i]);
        nb__free(*kernels);
        *kernels = NULL;
        *nk = 0;
    }
done:
    nb__free(F.parent);
    nb__free(F.grp);
    nb__free(F.next);
    nb__free(F.mark);
    nb__free(F.stack);
    nb__free(ext);
    return st;
}
