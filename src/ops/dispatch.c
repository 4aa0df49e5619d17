/*
 * dispatch.c — the one dispatch point of every primitive op: infer from
 * metadata, then hand the op to the interpreter on top of this thread's
 * stack (none: eager, which executes the kernel and records the tape node).
 */
#include "../backend/backend.h"

#include <string.h>

static _Thread_local nb_interp *tl_top;

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
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
}

nb_tensor *nb__meta_new(const nb_meta *m, nb_device dev) {
    nb_tensor *t = nb__tensor_new(m->shape, m->ndim, m->dtype, dev);
    if (t) t->weak = m->weak;
    return t;
}

nb_status nb__eager_apply(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *meta,
                          int nout, nb_tensor **out) {
    nb_status st = nb__kinds[nb__ops[op].kind]->execute(op, in, n, attrs, meta, nout, out);
    if (st != NB_OK) return st;
    if (nb__ops[op].grad != NB_GRAD_NONE && nb__should_record(in, n)) {
        out[0] = nb__record(out[0], op, in, n, attrs);
        if (!out[0]) {
            for (int i = 1; i < nout; i++) nb_release(out[i]);
            return NB_ERR_OOM;
        }
    }
    return NB_OK;
}

int nb__apply_n(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_tensor **out) {
    const nb_kind_impl *k = nb__kinds[nb__ops[op].kind];
    NB_ASSERT(k && n <= 8);
    nb_meta meta[NB_MAX_OUTS];
    int nout = k->infer(op, in, n, attrs, meta);
    if (nout < 0) return -1;
    nb_interp *it = tl_top;
    for (int i = 0; !it && i < n; i++)
        if (nb__is_symbolic(in[i])) {
            it = nb__lazy_interp ? nb__lazy_interp(in[i]) : NULL;
            if (!it) {
                nb__error(NB_ERR_STATE, "%s: input %d is a symbolic tensor of a graph that is no longer being "
                          "built (trace with nb_graph_begin / nb_graph_build, or run the compiled graph)",
                          nb__ops[op].name, i);
                return -1;
            }
        }
    nb_tensor *res[NB_MAX_OUTS];
    nb_status st = it ? it->apply(it, op, in, n, attrs, meta, nout, res) : nb__eager_apply(op, in, n, attrs, meta, nout, res);
    if (st != NB_OK) return -1;
    memcpy(out, res, sizeof(nb_tensor *) * (size_t)nout);
    return nout;
}

nb_tensor *nb__apply(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs) {
    nb_tensor *out[NB_MAX_OUTS];
    int k = nb__apply_n(op, in, n, attrs, out);
    if (k < 0) return NULL;
    for (int i = 1; i < k; i++) nb_release(out[i]);
    return out[0];
}
