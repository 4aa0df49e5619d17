/*
 * lazy.c — eval mode: lazy tensors standing for concrete data, the lazy
 * interpreter that appends the ops applied to them to their graph (merging
 * the graphs of different lazy inputs), and materialization: the pending
 * expression alone, as a fresh graph compiled through this thread's compile
 * cache and run, its value cached on the lazy tensor's record.
 *
 * Each op extends in place the graph of its first lazy input (not read
 * before) that is its graph's newest node and an op (a chain), and starts a
 * new graph otherwise (on nb_lazy's leaves, a branch off an older value,
 * every input read before): node ids are append-only, so a node appended to
 * a graph other lazy tensors share leaves their values unchanged, a chain of
 * n ops costs O(n), not the O(n^2) of copying a graph per op, and a
 * long-lived lazy tensor's graph does not grow with the ops applied to it.
 * Lazy inputs of other graphs are imported (their ancestors copied),
 * concrete ones captured as constants, and so is the value of a lazy input
 * read before: a loop that reads its lazy state at every step computes each
 * step once, not its whole history again, and the graphs of earlier steps
 * go with their tensors.
 */
#include "graph.h"

#include <stdio.h>
#include <string.h>

static bool is_lazy(const nb_tensor *t) { return nb__is_symbolic(t) && t->graph->lazy; }

static nb_status lazy_apply(nb_interp *self, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                            const nb_meta *meta, int nout, nb_tensor **out) {
    (void)self;
    nb_graph *g = NULL;
    nb_tensor *use[8];
    for (int i = 0; i < n; i++) {
        if (nb__is_symbolic(in[i]) && !in[i]->graph->lazy)
            return nb__error(NB_ERR_STATE, "%s: input %d is a symbolic tensor of graph '%s', which is not being "
                             "built, mixed with lazy tensors", nb__ops[op].name, i, in[i]->graph->name);
        nb_tensor *v = is_lazy(in[i]) ? atomic_load(&in[i]->lazy_value) : NULL;
        use[i] = v ? v : in[i]; /* a value read before is captured, not computed again */
        if (!g && is_lazy(use[i]) && use[i]->gnode == use[i]->graph->n - 1 &&
            use[i]->graph->nodes[use[i]->gnode].kind == NB_GNODE_OP)
            g = use[i]->graph; /* the end of a chain of ops */
    }
    if (!nb__backend_common(nb__ops[op].name, in, n)) return nb_last_status();
    nb_graph *fresh = NULL; /* no chain to extend: a new graph, so old ones can go */
    if (!g) {
        for (int i = 0; !fresh && i < n; i++)
            if (in[i] && !(fresh = nb__graph_new(nb__ops[op].name, "lazy", in[i]->storage->device))) return NB_ERR_OOM;
        fresh->lazy = true;
        g = fresh;
    }
    nb_status st = nb__graph_apply(g, op, use, n, attrs, meta, nout, out);
    nb_graph_release(fresh); /* the results hold it */
    return st;
}

static nb_interp lazy_interp = {.name = "lazy", .apply = lazy_apply};

static nb_interp *lazy_interp_of(nb_tensor *t) { return t->graph->lazy ? &lazy_interp : NULL; }

nb_interp *(*nb__lazy_interp)(nb_tensor *t) = lazy_interp_of;

bool nb_is_lazy(const nb_tensor *t) { return is_lazy(t); }

nb_tensor *nb_lazy(nb_tensor *t) {
    NB_CHECK_ARG("lazy", t);
    if (is_lazy(t)) return nb__own(nb_retain(t));
    if (!nb__check_concrete("lazy", t)) return NULL;
    if (nb__tracked(t)) {
        nb__error(NB_ERR_STATE, "lazy: the tensor requires grad; lazy ops are not recorded on the tape (pass "
                  "nb_detach(t))");
        return NULL;
    }
    nb_graph *g = nb__graph_new("lazy", "lazy", t->storage->device);
    if (!g) return NULL;
    g->lazy = true;
    nb_gval v = nb__graph_value_of(g, t);
    nb_tensor *r = v.node < 0 ? NULL : nb__graph_tensor(g, v);
    nb_graph_release(g);
    return nb__own(r);
}

nb_tensor *nb_lazy_on(nb_tensor *t, nb_device dev) {
    NB_CHECK_ARG("lazy_on", t);
    if (!nb__check_concrete("lazy_on", t)) return NULL;
    nb_scope_begin();
    nb_tensor *c = nb_to_device(t, dev);
    nb_tensor *r = c ? nb__scope_take(nb_lazy(c)) : NULL;
    nb_scope_end();
    return nb__own(r);
}

/*
 * The value of lazy t: a fresh graph whose one output is t (t's ancestors
 * imported, so the cache key is this expression, not its graph's history);
 * each captured tensor but the weak C scalars becomes a run-time input, so
 * the same expression over other data of the same shapes hits the compile
 * cache.  Unscoped result.
 */
static nb_tensor *materialize(nb_tensor *t) {
    nb_graph *g = nb__graph_new("eval", "lazy", t->graph->device);
    if (!g) return NULL;
    g->building = true; /* open for its one output; no trace runs, nothing is dispatched */
    nb_status st = nb_graph_output(g, "out", t);
    g->building = false;
    nb_tensor **args = st == NB_OK ? nb__calloc((size_t)g->n, sizeof *args) : NULL;
    const char **names = args ? nb__calloc((size_t)g->n, sizeof *names) : NULL;
    if (st == NB_OK && !names) nb__error(NB_ERR_OOM, "eval: out of memory");
    int k = 0;
    for (int i = 0; names && i < g->n; i++) {
        nb_gnode *nd = &g->nodes[i];
        if (nd->kind != NB_GNODE_CONST || nd->value->weak) continue;
        char nm[24];
        snprintf(nm, sizeof nm, "c%d", k);
        if (!(nd->name = nb__strdup(nm))) {
            nb__error(NB_ERR_OOM, "eval: out of memory");
            nb__free(names);
            names = NULL;
            break;
        }
        nd->kind = NB_GNODE_INPUT;
        names[k] = nd->name;
        args[k++] = nd->value; /* the node's reference moves to args */
        nd->value = NULL;
    }
    g->hash = 0;
    nb_compiled *c = names ? nb_graph_compile(g, g->device) : NULL;
    nb_tensor *r = NULL;
    if (c) {
        nb_scope_begin();
        nb_tensor *o = NULL;
        if (nb_compiled_run(c, k, names, args, 1, &o) == NB_OK) r = nb__scope_take(o);
        nb_scope_end();
    }
    nb_compiled_release(c);
    for (int i = 0; args && i < k; i++) nb_release(args[i]);
    nb__free(names);
    nb__free(args);
    nb_graph_release(g);
    return r;
}

const nb_tensor *nb__readable(const char *op, const nb_tensor *t) {
    if (!nb__is_symbolic(t)) return t;
    if (!t->graph->lazy) {
        nb__check_concrete(op, t);
        return NULL;
    }
    nb_tensor *lt = (nb_tensor *)t; /* the cache is set once, atomically */
    nb_tensor *v = atomic_load(&lt->lazy_value);
    if (v) return v;
    if (!(v = materialize(lt))) return NULL;
    nb_tensor *none = NULL;
    if (!atomic_compare_exchange_strong(&lt->lazy_value, &none, v)) { /* another thread was first */
        nb_release(v);
        v = none;
    }
    return v;
}

nb_tensor *nb_eval(nb_tensor *t) {
    NB_CHECK_ARG("eval", t);
    const nb_tensor *v = nb__readable("eval", t);
    return v ? nb__own(nb_retain((nb_tensor *)v)) : NULL;
}
