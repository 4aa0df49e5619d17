/*
 * pass_simplify.c — exact algebraic simplifications (the list and the
 * reasoning are in passes.h): identities of one-element constants (x*1,
 * x/1, x-(+0), x+(-0), x**1), neg of neg, no-op casts, views and where,
 * chains of reshapes or permutes collapsed into one, a matmul's only
 * reader adding to it folded into addmm, and an addmm's or a
 * convolution's only reader applying relu (through one reshape too)
 * folded into the op's epilogue (NB_SUB_RELU).  Each rule gives the
 * same bits, dtype, shape and weak flag, and keeps the layout a reduction
 * downstream would see (see "Layout" in passes.h).
 */
#include "rewrite.h"

#include <string.h>

typedef struct simplify_ctx {
    bool *layout_free; /* g node -> no reduction-like op reads it (through views) and it is no output */
    int *readers;      /* g node -> reads of its values by nodes and outputs */
} simplify_ctx;

/* readers[id] for every node of g: how many node inputs and graph outputs read one of its values. */
static void count_readers(const nb_graph *g, int *readers) {
    for (int id = 0; id < g->n; id++) readers[id] = 0;
    for (int id = 0; id < g->n; id++)
        for (int i = 0; i < g->nodes[id].n_in; i++)
            if (g->nodes[id].in[i].node >= 0) readers[g->nodes[id].in[i].node]++;
    for (int i = 0; i < g->n_outputs; i++) readers[g->outputs[i].node]++;
}

/* Kinds whose result may depend on the strides of their input (beyond its elements): float
 * reductions pick their summation order from them; scatter_add and the window ops accumulate
 * (conservatively counted); as_strided reads the storage itself. */
static bool layout_sensitive(const nb_gnode *nd) {
    nb_op_kind k = nb__ops[nd->op].kind;
    return k == NB_KIND_REDUCE || k == NB_KIND_SCATTER_ADD || k == NB_KIND_WINDOW || nd->op == NB_OP_AS_STRIDED;
}

/* layout_free[id] for every node of g: a view passes its input's layout on to its result, so a
 * view's input is layout-free only when the view's result is; ids descend, so every reader of a
 * node is decided before the node itself. */
static void find_layout_free(const nb_graph *g, bool *lf) {
    for (int id = 0; id < g->n; id++) lf[id] = true;
    for (int i = 0; i < g->n_outputs; i++) lf[g->outputs[i].node] = false;
    for (int id = g->n - 1; id >= 0; id--) {
        const nb_gnode *nd = &g->nodes[id];
        if (nd->kind != NB_GNODE_OP) continue;
        bool passes = nb__ops[nd->op].kind == NB_KIND_VIEW && !lf[id];
        if (!passes && !layout_sensitive(nd)) continue;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node >= 0) lf[nd->in[i].node] = false;
    }
}

/* True when t's strides are exactly the row-major ones of its shape. */
static bool row_major(const nb_tensor *t) {
    int64_t st[NB_MAX_DIMS];
    nb__contiguous_strides(t->shape, t->ndim, st);
    return !memcmp(st, t->stride, sizeof(int64_t) * (size_t)t->ndim);
}

/* Whether value v of the new graph is a fresh row-major tensor whenever the graph runs: the result
 * of an elementwise op, a copy or a matmul (each allocates its output with nb__meta_new), a reshape
 * or detach of one (views with the same row-major strides), or a row-major constant. */
static bool dense(const nb_rw *rw, nb_gval v) {
    for (;;) {
        const nb_gnode *n = nb__rw_node(rw, v);
        if (n->kind == NB_GNODE_CONST) return row_major(n->value);
        if (n->kind != NB_GNODE_OP) return false; /* an argument: any layout */
        switch (nb__ops[n->op].kind) {
        case NB_KIND_UNARY:
        case NB_KIND_BINARY:
        case NB_KIND_WHERE:
        case NB_KIND_COPY:
        case NB_KIND_MATMUL: return true;
        default: break;
        }
        if (n->op != NB_OP_RESHAPE && n->op != NB_OP_DETACH) return false;
        v = n->in[0];
    }
}

/* The value of a one-element constant as double (integers exactly in i64 through *iv), or false. */
static bool scalar_const(const nb_rw *rw, nb_gval v, double *fv, int64_t *iv, nb_dtype *dt) {
    if (v.node < 0) return false;
    const nb_gnode *n = nb__rw_node(rw, v);
    if (n->kind != NB_GNODE_CONST || nb__numel(n->value) != 1) return false;
    const nb_tensor *t = n->value;
    *dt = t->dtype;
    *fv = nb__load(nb__ptr(t), t->dtype);
    *iv = nb_dtype_is_float(t->dtype) ? 0 : nb__load_i64(nb__ptr(t), t->dtype);
    return true;
}

static bool is_one(const nb_rw *rw, nb_gval v) {
    double f;
    int64_t i;
    nb_dtype dt;
    if (!scalar_const(rw, v, &f, &i, &dt)) return false;
    return nb_dtype_is_float(dt) ? f == 1.0 : i == 1;
}

/* 0 when v is no zero constant; -1 for a float -0; +1 for +0 or an integer / bool zero (which
 * converts to +0). */
static int zero_sign(const nb_rw *rw, nb_gval v) {
    double f;
    int64_t i;
    nb_dtype dt;
    if (!scalar_const(rw, v, &f, &i, &dt)) return 0;
    if (!nb_dtype_is_float(dt)) return i == 0 ? 1 : 0;
    return f != 0.0 ? 0 : __builtin_signbit(f) ? -1 : 1;
}

/* Result dtypes where the arithmetic identities hold bit for bit (f16 / bf16 arithmetic goes
 * through a conversion that may change a NaN's payload). */
static bool exact_arith(nb_dtype dt) { return dt != NB_F16 && dt != NB_BF16; }

enum { ANY_LAYOUT = 0, SAME_LAYOUT = 1 };

/* Whether x's storage (x, and through view ops what it views) is a constant's or an output's. */
static bool held(const nb_rw *rw, nb_gval x) {
    for (;;) {
        const nb_gnode *n = nb__rw_node(rw, x);
        if (rw->dst_alias[x.node] || n->kind == NB_GNODE_CONST) return true;
        if (n->kind != NB_GNODE_OP || nb__ops[n->op].kind != NB_KIND_VIEW) return false;
        x = n->in[0];
    }
}

/* Let node id (nd, one output) stand for value x of the new graph when x has nd's metadata; when
 * an output holds id's storage, x's storage is no constant's nor another output's (passes.h,
 * Outputs); and (with SAME_LAYOUT, for ops whose result is a fresh row-major tensor) x has that
 * layout or nothing depends on it.  True when done. */
static bool replace(nb_rw *rw, int32_t id, const nb_gnode *nd, nb_gval x, int layout) {
    const simplify_ctx *c = rw->ctx;
    if (nd->n_out != 1 || x.node < 0) return false;
    const nb_gnode *xn = nb__rw_node(rw, x);
    if (!nb__meta_equal(&xn->out[x.out], &nd->out[0])) return false;
    if (rw->out_alias[id] && held(rw, x)) return false;
    if (layout == SAME_LAYOUT && !c->layout_free[id] && !dense(rw, x)) return false;
    nb__rw_forward(rw, id, 0, x);
    rw->st->simplified++;
    return true;
}

/* The op node holding value v of the new graph, NULL when v is no op of that kind. */
static const nb_gnode *op_node(const nb_rw *rw, nb_gval v, nb_op op) {
    const nb_gnode *n = nb__rw_node(rw, v);
    return n->kind == NB_GNODE_OP && n->op == op ? n : NULL;
}

/* True for the permutation 0, 1, ..., naxes - 1. */
static bool identity_perm(const nb_attrs *a) {
    for (int i = 0; i < a->naxes; i++)
        if (a->axes[i] != i) return false;
    return true;
}

/* A rewritten copy r of node id (its op on other inputs or attrs) in place of nd: nothing when it
 * does not re-infer to nd's metadata; else it is x itself when `x_same` (r would be a no-op on
 * its input x), or it is appended.  *done: whether the node was handled. */
static nb_status rewrite(nb_rw *rw, int32_t id, const nb_gnode *nd, nb_gnode *r, bool x_same, int layout, bool *done) {
    *done = false;
    bool ok;
    nb_status st = nb__rw_infers(rw->dst, r, &ok);
    if (st != NB_OK || !ok) return st;
    if (x_same && replace(rw, id, nd, r->in[0], layout)) {
        *done = true;
        return NB_OK;
    }
    if (layout == SAME_LAYOUT && !((const simplify_ctx *)rw->ctx)->layout_free[id] && !dense(rw, r->in[0]))
        return NB_OK;
    st = nb__rw_keep(rw, id, r);
    if (st == NB_OK) {
        rw->st->simplified++;
        *done = true;
    }
    return st;
}

/* Whether value v of the new graph stands for a src node with exactly one reader. */
static bool read_once(const nb_rw *rw, nb_gval v) {
    int32_t from = v.node >= 0 ? rw->origin[v.node] : -1;
    return from >= 0 && ((const simplify_ctx *)rw->ctx)->readers[from] == 1;
}

/* matmul(a, b) + c or c + matmul(a, b) as addmm(c, a, b) (the CPU backend adds c in the GEMM's
 * epilogue; either way round(a @ b) + c, the same bits as float addition commutes), when the add
 * reads the product's only use, c has the product's dtype and the sum the product's metadata
 * (c broadcasts to the product, not the product to c).  The matmul is left unread for dce. */
static nb_status add_into_matmul(nb_rw *rw, int32_t id, const nb_gnode *nd, bool *done) {
    for (int side = 0; side < 2 && !*done; side++) {
        nb_gval p = nd->in[side], addend = nd->in[1 - side];
        const nb_gnode *pn = p.node >= 0 ? op_node(rw, p, NB_OP_MATMUL) : NULL;
        if (!pn || !read_once(rw, p) || addend.node < 0) continue;
        const nb_meta *cm = &nb__rw_node(rw, addend)->out[addend.out];
        if (cm->dtype != pn->out[0].dtype || !nb__meta_equal(&pn->out[0], &nd->out[0])) continue;
        nb_gnode r = *pn;
        r.op = NB_OP_ADDMM;
        r.n_in = 3;
        r.in[2] = addend;
        nb_status st = rewrite(rw, id, nd, &r, false, ANY_LAYOUT, done);
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

/* relu(addmm(c, a, b)) or relu(convolution(x, w, b)) as that op with NB_SUB_RELU (relu in the
 * GEMM's epilogue; the same bits, as the op applies RELU's own expression to each sum), and
 * relu(reshape(addmm)) — conv2d's composite — or relu(reshape(convolution)) — conv1d's — as
 * reshape(the op with NB_SUB_RELU), when the relu is the only reader of each.  The old op (and
 * reshape) are left unread for dce. */
static nb_status relu_into_epilogue(nb_rw *rw, int32_t id, const nb_gnode *nd, bool *done) {
    nb_gval v = nd->in[0];
    const nb_gnode *view = op_node(rw, v, NB_OP_RESHAPE);
    if (view && !read_once(rw, v)) return NB_OK;
    nb_gval p = view ? view->in[0] : v;
    const nb_gnode *pn = op_node(rw, p, NB_OP_ADDMM);
    if (!pn) pn = op_node(rw, p, NB_OP_CONVOLUTION);
    if (!pn || (pn->attrs.sub & NB_SUB_RELU) || !read_once(rw, p)) return NB_OK;
    nb_gnode r = *pn;
    r.attrs.sub |= NB_SUB_RELU;
    if (!view) return rewrite(rw, id, nd, &r, false, ANY_LAYOUT, done);
    int32_t fused = nb__rw_append(rw, &r, rw->origin[p.node]); /* stands for the addmm, relu'd */
    if (fused < 0) return nb_last_status();
    nb_gnode rv = *view;
    rv.in[0] = (nb_gval){fused, 0};
    return rewrite(rw, id, nd, &rv, false, ANY_LAYOUT, done);
}

/* The pass's visit: the first rule that applies to node id replaces it (or appends its rewritten
 * form); otherwise the node is kept as it is. */
static nb_status simplify_visit(nb_rw *rw, int32_t id, nb_gnode *nd) {
    if (nd->kind != NB_GNODE_OP) return nb__rw_keep(rw, id, nd);
    nb_gval a = nd->in[0], b = nd->n_in > 1 ? nd->in[1] : (nb_gval){-1, -1};
    nb_dtype dt = nd->out[0].dtype;
    bool fl = nb_dtype_is_float(dt), done = false;
    nb_status st = NB_OK;
    switch (nd->op) {
    case NB_OP_MUL:
        done = exact_arith(dt) && ((is_one(rw, b) && replace(rw, id, nd, a, SAME_LAYOUT)) ||
                                   (is_one(rw, a) && replace(rw, id, nd, b, SAME_LAYOUT)));
        break;
    case NB_OP_DIV: done = exact_arith(dt) && is_one(rw, b) && replace(rw, id, nd, a, SAME_LAYOUT); break;
    case NB_OP_SUB: { /* x - (+0); on integers any zero */
        int z = zero_sign(rw, b);
        done = exact_arith(dt) && (fl ? z > 0 : z != 0) && replace(rw, id, nd, a, SAME_LAYOUT);
        break;
    }
    case NB_OP_ADD: { /* x + (-0), (-0) + x; on integers any zero (x + 0 is not x at -0: passes.h) */
        int zb = zero_sign(rw, b), za = zero_sign(rw, a);
        done = exact_arith(dt) && (((fl ? zb < 0 : zb != 0) && replace(rw, id, nd, a, SAME_LAYOUT)) ||
                                   ((fl ? za < 0 : za != 0) && replace(rw, id, nd, b, SAME_LAYOUT)));
        if (!done) st = add_into_matmul(rw, id, nd, &done);
        break;
    }
    case NB_OP_POW: done = (dt == NB_F32 || dt == NB_F64) && is_one(rw, b) && replace(rw, id, nd, a, SAME_LAYOUT); break;
    case NB_OP_NEG: {
        const nb_gnode *inner = op_node(rw, a, NB_OP_NEG);
        done = exact_arith(dt) && inner && replace(rw, id, nd, inner->in[0], SAME_LAYOUT);
        break;
    }
    case NB_OP_CAST: done = replace(rw, id, nd, a, SAME_LAYOUT); break; /* metadata equal: the same dtype */
    case NB_OP_RELU: st = relu_into_epilogue(rw, id, nd, &done); break;
    case NB_OP_DETACH: done = replace(rw, id, nd, a, ANY_LAYOUT); break;
    case NB_OP_EXPAND: done = replace(rw, id, nd, a, ANY_LAYOUT); break; /* the same shape: the same strides */
    case NB_OP_WHERE:
        done = nd->in[1].node == nd->in[2].node && nd->in[1].out == nd->in[2].out &&
               replace(rw, id, nd, nd->in[1], SAME_LAYOUT);
        break;
    case NB_OP_RESHAPE: {
        const nb_gnode *inner = op_node(rw, a, NB_OP_RESHAPE);
        if (inner) { /* reshape(reshape(x, s1), s2) = reshape(x, s2) */
            nb_gnode r = *nd;
            r.in[0] = inner->in[0];
            const nb_meta *xm = &nb__rw_node(rw, r.in[0])->out[r.in[0].out];
            st = rewrite(rw, id, nd, &r, nb__meta_equal(xm, &nd->out[0]), SAME_LAYOUT, &done);
        } else
            done = replace(rw, id, nd, a, SAME_LAYOUT); /* to x's own shape */
        break;
    }
    case NB_OP_PERMUTE: {
        const nb_gnode *inner = op_node(rw, a, NB_OP_PERMUTE);
        if (inner) { /* permute(permute(x, p), q) = permute(x, p[q[i]]) */
            nb_gnode r = *nd;
            r.in[0] = inner->in[0];
            for (int i = 0; i < nd->attrs.naxes; i++) r.attrs.axes[i] = inner->attrs.axes[nd->attrs.axes[i]];
            st = rewrite(rw, id, nd, &r, identity_perm(&r.attrs), ANY_LAYOUT, &done);
        } else
            done = identity_perm(&nd->attrs) && replace(rw, id, nd, a, ANY_LAYOUT);
        break;
    }
    default: break; /* CONTIGUOUS included: a copy must stay a copy */
    }
    if (st != NB_OK || done) return st;
    return nb__rw_keep(rw, id, nd);
}

nb_status nb__pass_simplify(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    const char *pass = "optimize_simplify";
    if (!g) return nb__rw_run(pass, g, simplify_visit, NULL, out, origin, st); /* reports the NULL */
    simplify_ctx c = {.layout_free = nb__malloc(sizeof(bool) * (size_t)(g->n ? g->n : 1)),
                      .readers = nb__malloc(sizeof(int) * (size_t)(g->n ? g->n : 1))};
    if (!c.layout_free || !c.readers) {
        nb__free(c.layout_free);
        nb__free(c.readers);
        return nb__rw_oom(pass, g, out, origin, st);
    }
    find_layout_free(g, c.layout_free);
    count_readers(g, c.readers);
    nb_status s = nb__rw_run(pass, g, simplify_visit, &c, out, origin, st);
    nb__free(c.layout_free);
    nb__free(c.readers);
    return s;
}
