/*
 * fuse.c — the fusion pass: groups a schedule's elementwise ops (unary,
 * binary, where, casts) and their reductions over trailing axes into fused
 * kernels (backend/fused.h) that a backend runs in one pass over memory.
 *
 * A group has a domain D and a count nred of inner (reduced) axes; each of
 * its nodes has D's shape (FULL), D's shape with the inner axes reduced
 * away, kept as 1 or dropped (ROW), or one element (UNIFORM).  Nodes join
 * the groups of their producers greedily in schedule order when the shapes
 * agree and the merged group stays acyclic (no path leaves the group and
 * comes back: the kernel runs as one step).  A value of a group that
 * anything outside it reads (or a graph output) becomes a kernel output;
 * the rest never reach memory.  Why a fusible node stayed alone is kept for
 * the compile report.
 */
#include "compile.h"
#include "../backend/fused.h"

#include <string.h>

/* Bounds on a group while it grows: its nodes (each gives an instruction and perhaps two casts,
 * within NB_FK_MAX_INSTR) and the values it reads from outside (leaving room among the kernel's
 * NB_FK_MAX_IO operands for its outputs), so that every group becomes a kernel. */
enum { MAX_MEMBERS = NB_FK_MAX_INSTR / 3, MAX_LOADS = NB_FK_MAX_IO * 2 / 3 };

typedef struct fgrp {
    int64_t dom[NB_MAX_DIMS];
    int nd, nred;
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
static bool static_one(const int64_t *s, int nd) {
    for (int d = 0; d < nd; d++)
        if (s[d] != 1) return false;
    return true;
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
        bool logic = op == NB_OP_LOGICAL_AND || op == NB_OP_LOGICAL_OR || op == NB_OP_LOGICAL_XOR;
        bool ok = logic ? float_dt(ct) || ct == NB_BOOL : float_dt(ct);
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
        return trailing_axes(nd, in0) ? NB_FUSE_OK : NB_FUSE_MISS_AXES;
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
    return ns == nd && static_one(s + nd - r, r);
}

/* Is s[ns] the ROW shape of group G without the reduced axes (its outer dims only)? */
static bool outer_row(const fgrp *G, const int64_t *s, int ns) {
    return G->nred > 0 && ns == G->nd - G->nred && same_dims(s, G->dom, ns);
}

static fgrp state_of(const nb_graph *g, const nb_gnode *nd) {
    fgrp s = {.count = 1};
    const nb_meta *m = &nd->out[0];
    if (nb__ops[nd->op].kind == NB_KIND_REDUCE) {
        const nb_meta *in = nb__gval_meta(g, nd->in[0]);
        s.nd = in->ndim;
        memcpy(s.dom, in->shape, sizeof(int64_t) * (size_t)in->ndim);
        s.nred = trailing_axes(nd, in);
        return s;
    }
    s.nd = m->ndim;
    memcpy(s.dom, m->shape, sizeof(int64_t) * (size_t)m->ndim);
    s.uniform = static_one(m->shape, m->ndim);
    return s;
}

/* The domain of groups a and b together (into *a), false when they do not fit. */
static bool combine(fgrp *a, const fgrp *b) {
    if (b->uniform) return true;
    if (a->uniform) {
        *a = (fgrp){.count = a->count, .nd = b->nd, .nred = b->nred};
        memcpy(a->dom, b->dom, sizeof a->dom);
        return true;
    }
    if (a->nred == 0 && b->nred > 0) {
        fgrp t = *b;
        bool ok = combine(&t, a);
        if (ok) *a = (fgrp){.count = a->count, .nd = t.nd, .nred = t.nred, .uniform = false};
        if (ok) memcpy(a->dom, t.dom, sizeof a->dom);
        return ok;
    }
    if (a->nred > 0 && b->nred > 0) return a->nd == b->nd && a->nred == b->nred && same_dims(a->dom, b->dom, a->nd);
    if (a->nred > 0) /* b: plain values of one shape, FULL or ROW here */
        return (b->nd == a->nd && same_dims(b->dom, a->dom, a->nd)) || row_shape(b->dom, b->nd, a->dom, a->nd, a->nred);
    if (a->nd == b->nd && same_dims(a->dom, b->dom, a->nd)) return true;
    for (int r = 1; r <= a->nd || r <= b->nd; r++) { /* one is a ROW shape of the other: a row group */
        if (row_shape(b->dom, b->nd, a->dom, a->nd, r)) {
            a->nred = r;
            return true;
        }
        if (row_shape(a->dom, a->nd, b->dom, b->nd, r)) {
            int c = a->count;
            *a = *b;
            a->count = c;
            a->nred = r;
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

/* Would node n and the groups roots[0..k) as one kernel lie on a path that leaves them and
 * comes back?  A backward walk over the contracted graph (a group is one step) from their
 * outside inputs must not reach them; a step whose nodes all precede the earliest member
 * depends on none. */
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

/* How many distinct values node n and the groups roots[0..k) read from outside themselves
 * (counting stops past MAX_LOADS). */
static int outside_values(fuser *F, int32_t n, const int32_t *roots, int k) {
    const nb_graph *g = F->g;
    uint32_t in_set = ++F->epoch;
    int32_t members[MAX_MEMBERS + 1], nm = 0, seen[MAX_LOADS + 1];
    members[nm++] = n;
    F->mark[n] = in_set;
    for (int i = 0; i < k; i++)
        for (int32_t x = F->grp[roots[i]].head; x >= 0 && nm <= MAX_MEMBERS; x = F->next[x]) {
            members[nm++] = x;
            F->mark[x] = in_set;
        }
    int ns = 0;
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
    /* a reduction's input is FULL and its axes are the group's inner axes */
    if (nb__ops[nd->op].kind == NB_KIND_REDUCE &&
        (st.nd != own.nd || st.nred != own.nred || !same_dims(st.dom, own.dom, st.nd))) {
        *why = NB_FUSE_MISS_SHAPE;
        return false;
    }
    /* a ROW value without its reduced axes ([B] of a [B, C] domain) lines up with the outer axes
     * only among values of its own shape: broadcast against a larger one it aligns with the
     * trailing axes instead, so such a consumer stays out */
    const nb_meta *m = &nd->out[0];
    if (nb__ops[nd->op].kind != NB_KIND_REDUCE && !outer_row(&st, m->shape, m->ndim))
        for (int i = 0; i < nd->n_in; i++) {
            int32_t p = nd->in[i].node;
            if (F->g->nodes[p].kind != NB_GNODE_OP || F->parent[p] < 0) continue;
            bool member = false; /* of the merged groups (others' values are loads, aligned by shape) */
            for (int j = 0; j < k; j++) member |= root(F, p) == roots[j];
            const nb_meta *pm = &F->g->nodes[p].out[0];
            if (!member) continue;
            if (outer_row(&st, pm->shape, pm->ndim)) {
                *why = NB_FUSE_MISS_SHAPE;
                return false;
            }
        }
    if (count > MAX_MEMBERS || outside_values(F, n, roots, k) > MAX_LOADS) {
        *why = NB_FUSE_MISS_LIMIT;
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

/* ---- kernels ---- */

typedef struct kbuild {
    const nb_graph *g;
    const fgrp *G;
    nb_fkernel k;
    int32_t load_slot[NB_FK_MAX_IO], out_slot[NB_FK_MAX_IO];
    bool load_outer[NB_FK_MAX_IO], out_outer[NB_FK_MAX_IO];
    nb_dtype in_dtype[NB_FK_MAX_IO];
    nb_flevel in_level[NB_FK_MAX_IO];
    nb_finstr instr[NB_FK_MAX_INSTR];
    int16_t out_val[NB_FK_MAX_IO];
    int nmember;
    int32_t member[MAX_MEMBERS];
    int16_t member_val[MAX_MEMBERS];
    bool full; /* a limit was hit */
} kbuild;

/* Is a value of shape s[ns] the group's ROW value without keepdim (aligned with the outer axes)? */

static nb_flevel load_level(const fgrp *G, const nb_meta *m, bool outer) {
    if (static_one(m->shape, m->ndim)) return NB_FL_UNIFORM;
    if (G->nred == 0 || outer) return G->nred ? NB_FL_ROW : NB_FL_FULL;
    for (int d = G->nd - G->nred; d < G->nd; d++) {
        int j = d - (G->nd - m->ndim);
        if (j >= 0 && m->shape[j] != 1) return NB_FL_FULL;
    }
    return NB_FL_ROW;
}

static int add_instr(kbuild *b, nb_finstr I) {
    if (b->k.ninstr == NB_FK_MAX_INSTR) {
        b->full = true;
        return 0;
    }
    b->instr[b->k.ninstr] = I;
    return NB_FK_MAX_IO + b->k.ninstr++; /* provisional id: loads are numbered once all are known */
}

/* The kernel value of graph value v as read by a member (outer: aligned with the outer axes). */
static int operand(kbuild *b, nb_gval v, bool outer) {
    int32_t s = nb__slot(v);
    for (int i = 0; i < b->nmember; i++)
        if (nb__slot((nb_gval){b->member[i], 0}) == s) return b->member_val[i];
    const nb_meta *m = nb__gval_meta(b->g, v);
    nb_flevel lv = load_level(b->G, m, outer);
    if (lv == NB_FL_UNIFORM) outer = false;
    for (int j = 0; j < b->k.nin; j++)
        if (b->load_slot[j] == s && b->load_outer[j] == outer) return j;
    if (b->k.nin == NB_FK_MAX_IO) {
        b->full = true;
        return 0;
    }
    int j = b->k.nin++;
    b->load_slot[j] = s;
    b->load_outer[j] = outer;
    b->in_dtype[j] = m->dtype;
    b->in_level[j] = lv;
    return j;
}

static nb_flevel level_of(const kbuild *b, int v) {
    return v < NB_FK_MAX_IO ? b->in_level[v] : b->instr[v - NB_FK_MAX_IO].level;
}
static nb_dtype dtype_of(const kbuild *b, int v) {
    return v < NB_FK_MAX_IO ? b->in_dtype[v] : b->instr[v - NB_FK_MAX_IO].dtype;
}

/* v converted to dt (an existing conversion reused). */
static int as_dtype(kbuild *b, int v, nb_dtype dt) {
    if (dtype_of(b, v) == dt) return v;
    for (int j = 0; j < b->k.ninstr; j++)
        if (b->instr[j].op == NB_OP_CAST && b->instr[j].in[0] == v && b->instr[j].dtype == dt) return NB_FK_MAX_IO + j;
    return add_instr(b, (nb_finstr){.op = NB_OP_CAST, .level = level_of(b, v), .dtype = dt, .in = {(int16_t)v, -1, -1}});
}

/* Member nd's instruction. */
static int member_instr(kbuild *b, const nb_gnode *nd) {
    const nb_meta *m = &nd->out[0];
    bool outer = outer_row(b->G, m->shape, m->ndim);
    nb_finstr I = {.op = nd->op, .dtype = m->dtype, .in = {-1, -1, -1}, .p0 = nd->attrs.f[0], .p1 = nd->attrs.f[1]};
    /* a reduction's input has the domain's shape: aligned with its trailing axes */
    int x = operand(b, nd->in[0], outer && nb__ops[nd->op].kind != NB_KIND_REDUCE);
    switch (nb__ops[nd->op].kind) {
    case NB_KIND_UNARY: I.in[0] = (int16_t)(nd->op == NB_OP_LOGICAL_NOT ? x : as_dtype(b, x, m->dtype)); break;
    case NB_KIND_BINARY:
        I.in[0] = (int16_t)as_dtype(b, x, m->compute);
        I.in[1] = (int16_t)as_dtype(b, operand(b, nd->in[1], outer), m->compute);
        break;
    case NB_KIND_WHERE:
        I.in[0] = (int16_t)x;
        I.in[1] = (int16_t)as_dtype(b, operand(b, nd->in[1], outer), m->dtype);
        I.in[2] = (int16_t)as_dtype(b, operand(b, nd->in[2], outer), m->dtype);
        break;
    case NB_KIND_REDUCE: I.in[0] = (int16_t)x; break;
    default: /* cast, contiguous, detach: a conversion (to the same dtype: a copy) */
        I.op = NB_OP_CAST;
        I.in[0] = (int16_t)x;
        break;
    }
    I.level = NB_FL_UNIFORM;
    for (int i = 0; i < 3; i++)
        if (I.in[i] >= 0 && level_of(b, I.in[i]) > I.level) I.level = level_of(b, I.in[i]);
    if (nb__ops[nd->op].kind == NB_KIND_REDUCE) I.level = NB_FL_ROW;
    return add_instr(b, I);
}

/* Renumber provisional instruction ids (NB_FK_MAX_IO + j) to nin + j. */
static int16_t final_id(const kbuild *b, int v) { return (int16_t)(v < NB_FK_MAX_IO ? v : v - NB_FK_MAX_IO + b->k.nin); }

static nb_status emit_kernel(kbuild *b, const bool *ext, nb_fstep *f) {
    for (int j = 0; j < b->k.ninstr; j++)
        for (int i = 0; i < 3; i++)
            if (b->instr[j].in[i] >= 0) b->instr[j].in[i] = final_id(b, b->instr[j].in[i]);
    memset(f, 0, sizeof *f);
    f->k.nin = b->k.nin;
    f->k.ninstr = b->k.ninstr;
    f->k.nred = b->G->nred;
    f->nd = b->G->nd;
    memcpy(f->dom, b->G->dom, sizeof f->dom);
    for (int i = 0; i < b->nmember; i++) {
        int32_t s = nb__slot((nb_gval){b->member[i], 0});
        if (!ext[s]) continue;
        const nb_meta *m = &b->g->nodes[b->member[i]].out[0];
        if (f->k.nout + f->k.nin == NB_FK_MAX_IO) return NB_ERR_UNSUPPORTED;
        int o = f->k.nout++;
        b->out_val[o] = final_id(b, b->member_val[i]);
        b->out_slot[o] = s;
        b->out_outer[o] = outer_row(b->G, m->shape, m->ndim);
    }
    size_t ni = (size_t)f->k.nin, no = (size_t)f->k.nout, nm = (size_t)b->nmember;
    f->k.in_dtype = nb__malloc(sizeof(nb_dtype) * (ni + 1));
    f->k.in_level = nb__malloc(sizeof(nb_flevel) * (ni + 1));
    f->k.instr = nb__malloc(sizeof(nb_finstr) * (size_t)(f->k.ninstr + 1));
    f->k.out_val = nb__malloc(sizeof(int16_t) * (no + 1));
    f->load_slot = nb__malloc(sizeof(int32_t) * (ni + 1));
    f->out_slot = nb__malloc(sizeof(int32_t) * (no + 1));
    f->load_outer = nb__malloc(sizeof(bool) * (ni + 1));
    f->out_outer = nb__malloc(sizeof(bool) * (no + 1));
    f->member = nb__malloc(sizeof(int32_t) * nm);
    f->nmember = b->nmember;
    if (!f->k.in_dtype || !f->k.in_level || !f->k.instr || !f->k.out_val || !f->load_slot || !f->out_slot ||
        !f->load_outer || !f->out_outer || !f->member) {
        nb__fstep_free(f);
        return nb__error(NB_ERR_OOM, "graph_compile: out of memory for a fused kernel");
    }
    memcpy(f->k.in_dtype, b->in_dtype, sizeof(nb_dtype) * ni);
    memcpy(f->k.in_level, b->in_level, sizeof(nb_flevel) * ni);
    memcpy(f->k.instr, b->instr, sizeof(nb_finstr) * (size_t)f->k.ninstr);
    memcpy(f->k.out_val, b->out_val, sizeof(int16_t) * no);
    memcpy(f->load_slot, b->load_slot, sizeof(int32_t) * ni);
    memcpy(f->out_slot, b->out_slot, sizeof(int32_t) * no);
    memcpy(f->load_outer, b->load_outer, sizeof(bool) * ni);
    memcpy(f->out_outer, b->out_outer, sizeof(bool) * no);
    memcpy(f->member, b->member, sizeof(int32_t) * nm);
    return NB_OK;
}

/* The kernel of the group rooted at r (members in id order) into *f: NB_OK, NB_ERR_UNSUPPORTED
 * when it exceeds the kernel limits (its nodes then run one by one), NB_ERR_OOM. */
static nb_status build_kernel(fuser *F, int32_t r, const bool *ext, nb_fstep *f) {
    kbuild b = {.g = F->g, .G = &F->grp[r]};
    for (int32_t x = F->grp[r].head; x >= 0; x = F->next[x]) b.member[b.nmember++] = x;
    for (int i = 1; i < b.nmember; i++) /* id order (lists concatenate out of order) */
        for (int j = i; j > 0 && b.member[j] < b.member[j - 1]; j--) {
            int32_t t = b.member[j];
            b.member[j] = b.member[j - 1];
            b.member[j - 1] = t;
        }
    /* in id order, a member's inputs among the members are computed before it */
    for (int i = 0; i < b.nmember && !b.full; i++) b.member_val[i] = (int16_t)member_instr(&b, &F->g->nodes[b.member[i]]);
    if (b.full) return NB_ERR_UNSUPPORTED;
    return emit_kernel(&b, ext, f);
}

void nb__fstep_free(nb_fstep *f) {
    nb__free(f->k.in_dtype);
    nb__free(f->k.in_level);
    nb__free(f->k.instr);
    nb__free(f->k.out_val);
    nb__free(f->load_slot);
    nb__free(f->out_slot);
    nb__free(f->load_outer);
    nb__free(f->out_outer);
    nb__free(f->member);
    memset(f, 0, sizeof *f);
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
        st = build_kernel(&F, id, ext, &(*kernels)[*nk]);
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
