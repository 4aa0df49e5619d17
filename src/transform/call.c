/*
 * call.c — running a Func: nb_func_jit (compile once through the cache) and
 * nb_func_call (inline f's ops into the graph being traced, or compile and
 * run it outside a trace).
 */
#include "transform.h"

#include <string.h>

nb_compiled *nb_func_jit(nb_graph *f) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_compiled *c = nb__func_check("func_jit", f) == NB_OK ? nb_graph_compile(f, f->device) : NULL;
    nb__own_end(&fr, "func_jit", c ? NB_OK : nb_last_status());
    return c;
}

/* Map each input of f to the argument of its name (every input once, no unknown name, the
 * input's dtype and shape — symbolic dims by identity). */
static nb_status bind(const nb_graph *f, int n, const char *const *names, nb_tensor *const *values, nb__replay *r) {
    const char *op = "func_call";
    for (int i = 0; i < n; i++) {
        if (!names[i] || !values[i]) return nb__error(NB_ERR_NULL, "%s: argument %d is NULL", op, i);
        int32_t id = nb__func_find(f, names[i], false);
        if (id < 0) return nb__error(NB_ERR_ARG, "%s: Func '%s' has no input '%s'", op, f->name, names[i]);
        nb_tensor **slot = &r->val[nb__slot((nb_gval){id, 0})];
        if (*slot) return nb__error(NB_ERR_ARG, "%s: input '%s' is given twice", op, names[i]);
        const nb_meta *m = &f->nodes[id].out[0];
        nb_tensor *v = values[i];
        if (v->dtype != m->dtype)
            return nb__error(NB_ERR_DTYPE, "%s: input '%s' of Func '%s' is %s, got %s", op, names[i], f->name,
                             nb_dtype_name(m->dtype), nb_dtype_name(v->dtype));
        if (v->ndim != m->ndim || memcmp(v->shape, m->shape, sizeof(int64_t) * (size_t)m->ndim))
            return nb__error(NB_ERR_SHAPE, "%s: input '%s' of Func '%s' has shape %s, got %s", op, names[i], f->name,
                             NB_DIMS_STR(m->shape, m->ndim), NB_SHAPE_STR(v));
        *slot = v;
    }
    for (int32_t id = 0; id < f->n; id++)
        if (f->nodes[id].kind == NB_GNODE_INPUT && !r->val[nb__slot((nb_gval){id, 0})])
            return nb__error(NB_ERR_ARG, "%s: input '%s' of Func '%s' is missing", op, f->nodes[id].name, f->name);
    return NB_OK;
}

static nb_status inline_call(nb_graph *f, int n, const char *const *names, nb_tensor *const *values, int nout,
                             nb_tensor **outputs) {
    nb__replay r;
    nb_status st = nb__replay_init(&r, f, false, "func_call");
    if (st != NB_OK) return st;
    if ((st = bind(f, n, names, values, &r)) == NB_OK) st = nb__replay_run(&r, NULL, NULL);
    /* each output a reference of its own in the current scope; a constant of f (or an argument)
     * comes back as a symbolic tensor of the graph being traced, never as f's own tensor */
    nb_graph *g = nb__graph_tracing();
    for (int i = 0; st == NB_OK && i < nout; i++) {
        nb_tensor *t = nb__replay_output(&r, i);
        if (!nb__is_symbolic(t)) {
            nb_gval v = nb__graph_value_of(g, t);
            t = v.node >= 0 ? nb__graph_tensor(g, v) : NULL;
        } else
            t = nb_retain(t);
        if (!(outputs[i] = nb__own(t))) st = nb_last_status();
    }
    for (int i = 0; st != NB_OK && i < nout; i++) outputs[i] = NULL;
    nb__replay_free(&r);
    return st;
}

static nb_status call(nb_graph *f, int n, const char *const *names, nb_tensor *const *values, int nout,
                      nb_tensor **outputs) {
    nb_status st = nb__func_check("func_call", f);
    if (st != NB_OK) return st;
    if ((n > 0 && (!names || !values)) || (nout > 0 && !outputs))
        return nb__error(NB_ERR_NULL, "func_call: names, values or outputs is NULL");
    if (n < 0 || nout < 0 || nout > f->n_outputs)
        return nb__error(NB_ERR_ARG, "func_call: %d arguments and %d outputs (Func '%s' has %d outputs)", n, nout,
                         f->name, f->n_outputs);
    if (nb__graph_tracing()) return inline_call(f, n, names, values, nout, outputs);
    nb_compiled *c = nb_func_jit(f);
    if (!c) return nb_last_status();
    st = nb_compiled_run(c, n, names, values, nout, outputs);
    nb_compiled_release(c);
    return st;
}

nb_status nb_func_call(nb_graph *f, int n, const char *const *names, nb_tensor *const *values, int nout,
                       nb_tensor **outputs) {
    NB_OWN_STATUS("func_call", call(f, n, names, values, nout, outputs));
}
