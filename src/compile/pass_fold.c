/*
 * pass_fold.c — constant folding (passes.h): an op whose inputs are all
 * constants is computed while optimizing, by the same eager step the
 * executor runs (infer on the concrete inputs, nb__eager_apply under
 * no-grad), and replaced by constant nodes holding its results.  Bounded in
 * size; a failing op (a data error such as an index out of range) is left
 * for the run to report, with the thread's error state untouched.
 */
#include "rewrite.h"

#include <string.h>

static const char *PASS = "optimize_fold";

/* Ops reached from inside kernels run eagerly even while a graph is being traced on this thread
 * (as in the executor). */
static nb_status eager_apply(nb_interp *self, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                             const nb_meta *meta, int nout, nb_tensor **out) {
    (void)self;
    return nb__eager_apply(op, in, n, attrs, meta, nout, out);
}

/* True when an integer or shape attribute holds a symbolic dim (known only when the graph runs). */
static bool symbolic_attrs(const nb_attrs *a) {
    for (size_t j = 0; j < sizeof a->i / sizeof a->i[0]; j++)
        if (nb__dim_sym(a->i[j])) return true;
    for (size_t j = 0; j < sizeof a->shape / sizeof a->shape[0]; j++)
        if (nb__dim_sym(a->shape[j])) return true;
    return false;
}

/* The concrete inputs of nd when it may be folded (see passes.h), into in[]; false otherwise. */
static bool foldable(const nb_rw *rw, int32_t id, const nb_gnode *nd, nb_tensor **in) {
    if (nd->kind != NB_GNODE_OP || nb__ops[nd->op].kind == NB_KIND_RANDOM || nd->op == NB_OP_TO_DEVICE ||
        rw->out_alias[id] || symbolic_attrs(&nd->attrs))
        return false;
    int64_t largest = 0;
    for (int i = 0; i < nd->n_in; i++) {
        in[i] = NULL;
        if (nd->in[i].node < 0) continue; /* an absent optional input */
        const nb_gnode *src = nb__rw_node(rw, nd->in[i]);
        if (src->kind != NB_GNODE_CONST) return false;
        in[i] = src->value;
        int64_t n = nb__numel(src->value);
        if (n > largest) largest = n;
    }
    for (int j = 0; j < nd->n_out; j++) {
        int64_t n = nb__meta_numel(&nd->out[j]);
        if (n < 0 || n > NB_FOLD_MAX_ELEMS || n > largest) return false;
    }
    return true;
}

/* Run nd on the concrete in[] into res[] (nd->n_out new references).  NB_OK; NB_ERR_OOM (set) when
 * memory ran out; any other status: not folded, the thread's error state as it was before. */
static nb_status compute(const nb_rw *rw, int32_t id, const nb_gnode *nd, nb_tensor *const *in, nb_tensor **res) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    unsigned long failures = nb__alloc_failures();
    nb_attrs a = nd->attrs;
    nb_meta meta[NB_MAX_OUTS];
    memset(meta, 0, sizeof meta);
    nb_status st = NB_ERR_STATE;
    int nout = nb__kinds[nb__ops[nd->op].kind]->infer(nd->op, in, nd->n_in, &a, meta);
    if (nout == nd->n_out) {
        nb_interp eager = {.name = "fold", .apply = eager_apply};
        nb__interp_push(&eager);
        nb_no_grad_begin();
        st = nb__eager_apply(nd->op, in, nd->n_in, &a, meta, nout, res);
        nb_no_grad_end();
        nb__interp_pop(&eager);
    }
    for (int j = 0; st == NB_OK && j < nout; j++) { /* a constant must carry its node's metadata exactly */
        nb_meta m;
        nb__meta_of(&m, res[j]);
        if (!nb__meta_equal(&m, &nd->out[j])) {
            for (int k = 0; k < nout; k++) nb_release(res[k]);
            st = NB_ERR_STATE;
        }
    }
    if (st == NB_OK) return nb__own_end(&fr, PASS, NB_OK);
    if (st == NB_ERR_OOM || nb__alloc_failures() != failures) {
        nb__error_set(NB_ERR_OOM, "%s: out of memory folding node %d (%s) of graph '%s'", PASS, (int)id,
                      nb__ops[nd->op].name, rw->src->name);
        return nb__own_end(&fr, PASS, NB_ERR_OOM);
    }
    nb__own_end(&fr, PASS, NB_OK); /* the op's own error is the run's to report: dropped here */
    return st;
}

/* The pass's visit: a foldable node computed now is replaced by one constant node per output; any
 * other node (or one whose computation fails) is kept. */
static nb_status fold_visit(nb_rw *rw, int32_t id, nb_gnode *nd) {
    nb_tensor *in[8], *res[NB_MAX_OUTS];
    if (!foldable(rw, id, nd, in)) return nb__rw_keep(rw, id, nd);
    nb_status st = compute(rw, id, nd, in, res);
    if (st == NB_ERR_OOM) return st;
    if (st != NB_OK) return nb__rw_keep(rw, id, nd);
    for (int j = 0; j < nd->n_out && st == NB_OK; j++) {
        nb_gnode c = {.kind = NB_GNODE_CONST, .n_out = 1, .value = res[j]};
        nb__meta_of(&c.out[0], res[j]);
        int32_t cid = nb__rw_append(rw, &c, -1);
        if (cid < 0) st = NB_ERR_OOM;
        else nb__rw_forward(rw, id, j, (nb_gval){cid, 0});
    }
    for (int j = 0; j < nd->n_out; j++) nb_release(res[j]); /* the graph holds its own references */
    if (st == NB_OK) rw->st->folded++;
    return st;
}

nb_status nb__pass_fold(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    return nb__rw_run(PASS, g, fold_visit, NULL, out, origin, st);
}
