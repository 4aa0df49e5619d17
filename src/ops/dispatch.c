/*
 * dispatch.c — the one dispatch point of every primitive op: infer from
 * metadata, then hand the op to the interpreter on top of this thread's
 * stack (none: eager, which executes the kernel and records the tape node).
 */
#include "../backend/backend.h"

#include <string.h>

static _Thread_local nb_interp *tl_top __attribute__((tls_model("initial-exec")));

void nb__interp_push(nb_interp *it) {
    it->below = tl_top;
    tl_top = it;
}

void nb__interp_pop(nb_interp *it) {
    NB_ASSERT(tl_top == it);
    tl_top = it->below;
    it->below = NULL;
}

nb_interp *nb__interp_top(void) { return tl_top; }

void nb__meta_of(nb_meta *m, const nb_tensor *t) {
    m->dtype = t->dtype;
    m->ndim = t->ndim;
    m->weak = t->weak;
    memcpy(m->shape, t->shape, sizeof m->shape); /* the whole array: a fixed-size copy, no call */
}

/* The place the next result of a matching meta goes (nb__meta_redirect); s NULL: none. */
static _Thread_local struct {
    nb_storage *s;
    size_t off;
    const nb_meta *m;
} tl_dest __attribute__((tls_model("initial-exec")));

void nb__meta_redirect(nb_storage *s, size_t byte_offset, const nb_meta *m) {
    tl_dest.s = s;
    tl_dest.off = byte_offset;
    tl_dest.m = m;
}

nb_status nb__exec_begin(nb_tensor *const *in, int n, const nb_meta *m, int nout, nb_tensor **t, nb_tensor **r) {
    nb_status st = NB_OK;
    for (int i = 0; i < n; i++) {
        t[i] = st == NB_OK && in[i] ? nb__dense(in[i]) : NULL;
        if (st == NB_OK && in[i] && !t[i]) st = nb_last_status();
    }
    for (int j = 0; j < nout; j++) r[j] = NULL;
    for (int j = 0; j < nout && st == NB_OK; j++)
        if (!(r[j] = nb__meta_new(&m[j], in[0]->storage->device))) st = nb_last_status();
    return st;
}

nb_status nb__exec_end(nb_status st, nb_tensor **t, int n, nb_tensor **r, int nout, nb_tensor **out) {
    for (int i = 0; i < n; i++) nb_release(t[i]);
    for (int j = 0; j < nout; j++) {
        if (st != NB_OK) nb_release(r[j]);
        out[j] = st == NB_OK ? r[j] : NULL;
    }
    return st;
}

nb_tensor *nb__meta_new(const nb_meta *m, nb_device dev) {
    if (__builtin_expect(tl_dest.s != NULL, 0) && m->dtype == tl_dest.m->dtype && m->ndim == tl_dest.m->ndim &&
        !memcmp(m->shape, tl_dest.m->shape, sizeof(int64_t) * (size_t)m->ndim)) {
        int64_t st[NB_MAX_DIMS];
        nb__contiguous_strides(m->shape, m->ndim, st);
        nb_tensor *t = nb__tensor_view_of(tl_dest.s, m->shape, st, m->ndim,
                                          (int64_t)(tl_dest.off / nb_dtype_size(m->dtype)), m->dtype);
        tl_dest.s = NULL;
        if (t) t->weak = m->weak;
        return t;
    }
    nb_tensor *t = nb__tensor_new(m->shape, m->ndim, m->dtype, dev);
    if (t) t->weak = m->weak;
    return t;
}

/* Whether an eager application is recorded on the tape: a differentiable op, recording on, an
 * input tracked; only float results carry gradients (a cast to an integer dtype is not recorded).
 * Untracked inputs (the common case) are seen inline, without calls. */
static inline bool nb__records(nb_op op, nb_tensor *const *in, int n, const nb_meta *meta) {
    if (nb__ops[op].grad == NB_GRAD_NONE) return false;
    bool tracked = false;
    for (int i = 0; i < n; i++) tracked |= nb__tracked(in[i]);
    return tracked && nb__should_record(in, n) && nb_dtype_is_float(meta[0].dtype);
}

/* Execute, then record on the tape (see nb__eager_apply); inline into the dispatch below. */
static inline nb_status eager(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *meta, int nout,
                              nb_tensor **out) {
    nb_status st = nb__kinds[nb__ops[op].kind]->execute(op, in, n, attrs, meta, nout, out);
    if (st != NB_OK) return st;
    if (nb__records(op, in, n, meta)) {
        /* the node's inputs: in, then the other outputs (untracked), which the rule may read
         * (max_pool2d's indices) */
        nb_tensor *rin[8 + NB_MAX_OUTS];
        memcpy(rin, in, sizeof(nb_tensor *) * (size_t)n);
        memcpy(rin + n, out + 1, sizeof(nb_tensor *) * (size_t)(nout - 1));
        out[0] = nb__record(out[0], op, rin, n + nout - 1, attrs);
        if (!out[0]) {
            for (int i = 1; i < nout; i++) nb_release(out[i]);
            return NB_ERR_OOM;
        }
    }
    return NB_OK;
}

nb_status nb__eager_apply(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *meta,
                          int nout, nb_tensor **out) {
    return eager(op, in, n, attrs, meta, nout, out);
}

/* The interpreter for these inputs: the top of the stack, else (eval mode) a lazy graph's;
 * NULL for eager.  `*bad` when a symbolic input has no interpreter (an error is set). */
static nb_interp *interp_for(nb_op op, nb_tensor *const *in, int n, bool *bad) {
    nb_interp *it = tl_top;
    *bad = false;
    for (int i = 0; !it && i < n; i++)
        if (nb__is_symbolic(in[i])) {
            it = nb__lazy_interp ? nb__lazy_interp(in[i]) : NULL;
            if (!it) {
                nb__error(NB_ERR_STATE, "%s: input %d is a symbolic tensor of a graph that is no longer being "
                          "built (trace with nb_graph_begin / nb_graph_build, or run the compiled graph)",
                          nb__ops[op].name, i);
                *bad = true;
            }
        }
    return it;
}

/* The dispatch itself: infer, then the interpreter or eager.  Every kind but COMPOSITE has
 * both steps (a missing one fails to link), so k is checked only for NULL; n bounds the
 * tape node's inputs.  Returns nout, or -1 (error set, nothing left in out). */
static inline int dispatch(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_tensor **out) {
    const nb_kind_impl *k = nb__kinds[nb__ops[op].kind];
    NB_ASSERT(k && n <= 8);
    nb_meta meta[NB_MAX_OUTS];
    int nout = k->infer(op, in, n, attrs, meta);
    if (nout < 0) return -1;
    bool bad;
    nb_interp *it = interp_for(op, in, n, &bad);
    if (bad) return -1;
    nb_status st = it ? it->apply(it, op, in, n, attrs, meta, nout, out) : eager(op, in, n, attrs, meta, nout, out);
    return st == NB_OK ? nout : -1;
}

int nb__apply_n(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_tensor **out) {
    return dispatch(op, in, n, attrs, out);
}

nb_tensor *nb__apply(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs) {
    nb_tensor *out[NB_MAX_OUTS];
    int nout = dispatch(op, in, n, attrs, out);
    if (nout < 0) return NULL;
    for (int i = 1; i < nout; i++) nb_release(out[i]);
    return out[0];
}
