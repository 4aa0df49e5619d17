/*
 * graph.c — the graph record and tracing: building graphs between
 * nb_graph_begin and nb_graph_end (each begin pushes a trace interpreter on
 * this thread's dispatch stack), inputs / params / constants / outputs, the
 * symbolic tensors that stand for graph values, and the import of values
 * from other graphs (merging).
 */
#include "graph.h"

#include <string.h>

/* ---- the record ---- */

void nb__graph_retain(nb_graph *g) { atomic_fetch_add(&g->refs, 1); }

nb_graph *nb_graph_retain(nb_graph *g) {
    if (g) nb__graph_retain(g);
    return g;
}

void nb_graph_release(nb_graph *g) {
    if (!g || atomic_fetch_sub(&g->refs, 1) != 1) return;
    for (int i = 0; i < g->n; i++) {
        nb__free(g->nodes[i].name);
        nb_release(g->nodes[i].value);
    }
    for (int i = 0; i < g->n_outputs; i++) nb__free(g->output_names[i]);
    nb__free(g->nodes);
    nb__free(g->outputs);
    nb__free(g->output_names);
    nb__free(g->vmap);
    nb__free(g->name);
    nb__free(g);
}

int nb_graph_node_count(const nb_graph *g) { return g ? g->n : -1; }
int nb_graph_output_count(const nb_graph *g) { return g ? g->n_outputs : -1; }

const char *nb_graph_output_name(const nb_graph *g, int i) {
    return g && i >= 0 && i < g->n_outputs ? g->output_names[i] : NULL;
}

/* ---- the value map: which node a concrete tensor stands for (capture is O(1)) ---- */

struct nb__vslot {
    const nb_tensor *t; /* NULL: empty */
    int32_t id;
};

static size_t vslot(const nb_graph *g, const nb_tensor *t) {
    uint64_t h = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15u;
    size_t i = (size_t)(h >> 32) & (size_t)(g->vmap_cap - 1);
    while (g->vmap[i].t && g->vmap[i].t != t) i = (i + 1) & (size_t)(g->vmap_cap - 1);
    return i;
}

static int32_t vmap_find(const nb_graph *g, const nb_tensor *t) {
    if (!g->vmap) return -1;
    const struct nb__vslot *s = &g->vmap[vslot(g, t)];
    return s->t ? s->id : -1;
}

/* Map t to id unless it is mapped already (the first node wins); false on OOM. */
static bool vmap_put(nb_graph *g, const nb_tensor *t, int32_t id) {
    if (2 * (g->vmap_n + 1) > g->vmap_cap) {
        int cap = g->vmap_cap ? 2 * g->vmap_cap : 64;
        struct nb__vslot *old = g->vmap, *v = nb__calloc((size_t)cap, sizeof *v);
        if (!v) return false;
        int ocap = g->vmap_cap;
        g->vmap = v;
        g->vmap_cap = cap;
        for (int i = 0; i < ocap; i++)
            if (old[i].t) g->vmap[vslot(g, old[i].t)] = old[i];
        nb__free(old);
    }
    struct nb__vslot *s = &g->vmap[vslot(g, t)];
    if (!s->t) {
        *s = (struct nb__vslot){t, id};
        g->vmap_n++;
    }
    return true;
}

int32_t nb__graph_append(nb_graph *g, const nb_gnode *nd) {
    nb_gnode *v = g->nodes;
    if (g->n == g->cap) {
        int cap = g->cap ? 2 * g->cap : 32;
        if ((v = nb__realloc(g->nodes, sizeof *v * (size_t)cap))) {
            g->nodes = v;
            g->cap = cap;
        }
    }
    if (!v || ((nd->kind == NB_GNODE_PARAM || nd->kind == NB_GNODE_CONST) && nd->value && !vmap_put(g, nd->value, g->n))) {
        nb__error(NB_ERR_OOM, "graph '%s': out of memory for node %d", g->name, g->n);
        return -1;
    }
    g->nodes[g->n] = *nd;
    g->nodes[g->n].id = g->n;
    g->hash = 0;
    return g->n++;
}

nb_tensor *nb__graph_tensor(nb_graph *g, nb_gval v) {
    const nb_meta *m = nb__gval_meta(g, v);
    nb_storage *s = nb__malloc(sizeof *s);
    if (!s) {
        nb__error(NB_ERR_OOM, "graph '%s': out of memory for a symbolic tensor", g->name);
        return NULL;
    }
    memset(s, 0, sizeof *s);
    atomic_init(&s->refs, 0);
    const nb_tensor *bound = g->nodes[v.node].value; /* a param or constant is where its tensor is */
    s->device = bound ? bound->storage->device : g->device;
    int64_t st[NB_MAX_DIMS] = {0};
    nb_tensor *t = nb__tensor_view_of(s, m->shape, st, m->ndim, 0, m->dtype);
    if (!t) {
        nb__free(s);
        return NULL;
    }
    t->weak = m->weak;
    t->graph = g;
    t->gnode = v.node;
    t->gout = v.out;
    nb__graph_retain(g);
    return t;
}

bool nb__check_concrete(const char *op, const nb_tensor *t) {
    if (!nb__is_symbolic(t)) return true;
    if (t->graph->lazy)
        nb__error(NB_ERR_STATE, "%s: tensor is lazy (node %d of an eval-mode graph); materialize it with "
                  "nb_eval and use the concrete result", op, t->gnode);
    else nb__error(NB_ERR_STATE, "%s: tensor is symbolic (node %d of graph '%s'); it has data only when the "
              "compiled graph runs", op, t->gnode, t->graph->name);
    return false;
}

/* ---- values: own, imported (merge), captured ---- */

static nb_gval bad_val(void) { return (nb_gval){-1, -1}; }

static nb_gval capture(nb_graph *g, nb_tensor *t) {
    /* a tensor bound as a param stands for that param; else one CONST node per captured tensor */
    int32_t id = vmap_find(g, t);
    if (id >= 0) return (nb_gval){id, 0};
    nb_gnode nd = {.kind = NB_GNODE_CONST, .n_out = 1, .value = t};
    nb__meta_of(&nd.out[0], t);
    if (nb__graph_append(g, &nd) < 0) return bad_val();
    nb_retain(t);
    return (nb_gval){g->n - 1, 0};
}

static bool same_meta(const nb_meta *a, const nb_meta *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->shape[i] != b->shape[i]) return false;
    return true;
}

/* The node of g that input / param s of src merges with (an input of the same name, dtype
 * and shape; a param of the same name bound to the same tensor); -1 for none; -2 with
 * NB_ERR_ARG when g has a different input or param of that name. */
static int32_t merge_named(const nb_graph *g, const nb_graph *src, const nb_gnode *s) {
    for (int i = 0; i < g->n; i++) {
        const nb_gnode *d = &g->nodes[i];
        if ((d->kind != NB_GNODE_INPUT && d->kind != NB_GNODE_PARAM) || strcmp(d->name, s->name)) continue;
        if (d->kind == s->kind && d->value == s->value && same_meta(&d->out[0], &s->out[0])) return i;
        const nb_meta *a = &d->out[0], *b = &s->out[0];
        nb__error(NB_ERR_ARG, "graph '%s': %s '%s' (%s%s) clashes with %s '%s' (%s%s) of graph '%s' used in it%s",
                  g->name, d->kind == NB_GNODE_INPUT ? "input" : "param", d->name, nb_dtype_name(a->dtype),
                  NB_DIMS_STR(a->shape, a->ndim), s->kind == NB_GNODE_INPUT ? "input" : "param", s->name,
                  nb_dtype_name(b->dtype), NB_DIMS_STR(b->shape, b->ndim), src->name,
                  d->kind == NB_GNODE_PARAM && s->kind == NB_GNODE_PARAM ? " (bound to another tensor)" : "");
        return -2;
    }
    return -1;
}

/* Append a copy of node s of src to g, its inputs already mapped by map[]. */
static int32_t import_node(nb_graph *g, const nb_graph *src, const nb_gnode *s, const int32_t *map) {
    nb_gnode nd = *s;
    for (int i = 0; i < s->n_in; i++)
        if (s->in[i].node >= 0) nd.in[i].node = map[s->in[i].node];
    if (s->kind == NB_GNODE_INPUT || s->kind == NB_GNODE_PARAM) {
        int32_t j = merge_named(g, src, s);
        if (j != -1) return j < 0 ? -1 : j;
    }
    nd.name = s->name ? nb__strdup(s->name) : NULL;
    if (s->name && !nd.name) {
        nb__error(NB_ERR_OOM, "graph '%s': out of memory merging graph '%s'", g->name, src->name);
        return -1;
    }
    if (nb__graph_append(g, &nd) < 0) {
        nb__free(nd.name);
        return -1;
    }
    nb_retain(nd.value);
    return g->n - 1;
}

/* Copy node `id` of `src` and its ancestors into g (an explicit depth-first stack: graphs may be
 * deep); map[] (src->n entries, -1 unset) memoizes.  The new id, or -1 with an error. */
static int32_t import(nb_graph *g, const nb_graph *src, int32_t id, int32_t *map) {
    size_t n = 0, cap = 64;
    int32_t *stack = nb__malloc(sizeof *stack * cap);
    if (!stack) goto oom;
    stack[n++] = id;
    while (n > 0) {
        int32_t top = stack[n - 1];
        if (map[top] >= 0) {
            n--;
            continue;
        }
        const nb_gnode *s = &src->nodes[top];
        if (cap - n < (size_t)s->n_in) {
            int32_t *st = nb__realloc(stack, sizeof *st * (cap *= 2));
            if (!st) goto oom;
            stack = st;
        }
        size_t pushed = n;
        for (int i = 0; i < s->n_in; i++)
            if (s->in[i].node >= 0 && map[s->in[i].node] < 0) stack[n++] = s->in[i].node;
        if (n > pushed) continue;
        n--;
        if ((map[top] = import_node(g, src, s, map)) < 0) {
            nb__free(stack);
            return -1;
        }
    }
    nb__free(stack);
    return map[id];
oom:
    nb__free(stack);
    nb__error(NB_ERR_OOM, "graph '%s': out of memory merging graph '%s'", g->name, src->name);
    return -1;
}

nb_gval nb__graph_value_of(nb_graph *g, nb_tensor *t) {
    if (!nb__is_symbolic(t)) return capture(g, t);
    if (t->graph == g) return (nb_gval){t->gnode, t->gout};
    const nb_graph *src = t->graph;
    int32_t *map = nb__malloc(sizeof *map * (size_t)src->n);
    if (!map) {
        nb__error(NB_ERR_OOM, "graph '%s': out of memory merging graph '%s'", g->name, src->name);
        return bad_val();
    }
    memset(map, 0xff, sizeof *map * (size_t)src->n);
    int32_t id = import(g, src, t->gnode, map);
    nb__free(map);
    return id < 0 ? bad_val() : (nb_gval){id, t->gout};
}

/* ---- the trace interpreter ---- */

typedef struct trace_interp {
    nb_interp base;
    nb_graph *g;
} trace_interp;

nb_status nb__graph_apply(nb_graph *g, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                          const nb_meta *meta, int nout, nb_tensor **out) {
    nb_gnode nd = {.kind = NB_GNODE_OP, .op = op, .n_in = n, .n_out = nout};
    if (attrs) nd.attrs = *attrs;
    for (int i = 0; i < n; i++) {
        if (!in[i]) { /* an absent optional input */
            nd.in[i] = bad_val();
            continue;
        }
        nd.in[i] = nb__graph_value_of(g, in[i]);
        if (nd.in[i].node < 0) return nb_last_status();
    }
    memcpy(nd.out, meta, sizeof(nb_meta) * (size_t)nout);
    int32_t id = nb__graph_append(g, &nd);
    if (id < 0) return NB_ERR_OOM;
    for (int i = 0; i < nout; i++) {
        out[i] = nb__graph_tensor(g, (nb_gval){id, i});
        if (!out[i]) {
            while (i-- > 0) nb_release(out[i]);
            return NB_ERR_OOM;
        }
    }
    return NB_OK;
}

static nb_status trace_apply(nb_interp *self, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                             const nb_meta *meta, int nout, nb_tensor **out) {
    return nb__graph_apply(((trace_interp *)self)->g, op, in, n, attrs, meta, nout, out);
}

/* ---- building ---- */

typedef struct build_frame {
    trace_interp it;          /* it.g: the frame's own reference, dropped when the trace ends */
    struct build_frame *up;
    int scope_guard;          /* the scope guard to restore at the end */
} build_frame;

static _Thread_local build_frame *tl_builds;

/* End the innermost trace: close its scope (and any left open in it), pop its interpreter,
 * mark its graph built and drop the frame's reference. */
static void end_innermost(void) {
    build_frame *f = tl_builds;
    nb__scope_unguard(f->scope_guard);
    nb__interp_pop(&f->it.base);
    tl_builds = f->up;
    f->it.g->building = false;
    nb_graph_release(f->it.g);
    nb__free(f);
}

/* A thread that exits with traces open ends them (their graphs go with their last references). */
static void builds_at_exit(void) {
    while (tl_builds) end_innermost();
}

static bool is_open(const nb_graph *g) {
    for (build_frame *f = tl_builds; f; f = f->up)
        if (f->it.g == g) return true;
    return false;
}

nb_graph *nb__graph_tracing(void) {
    return tl_builds && nb__interp_top() == &tl_builds->it.base ? tl_builds->it.g : NULL;
}

static bool is_building(const char *op, nb_graph *g) {
    if (!g) {
        nb__error(NB_ERR_NULL, "%s: graph is NULL", op);
        return false;
    }
    if (!g->building) {
        nb__error(NB_ERR_STATE, "%s: graph '%s' is not being built (nb_graph_begin ... nb_graph_end)", op, g->name);
        return false;
    }
    return true;
}

nb_graph *nb__graph_new(const char *op, const char *name, nb_device dev) {
    nb_graph *g = nb__calloc(1, sizeof *g);
    char *nm = g ? nb__strdup(name && *name ? name : "graph") : NULL;
    if (!nm) {
        nb__free(g);
        nb__error(NB_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    atomic_init(&g->refs, 1);
    g->name = nm;
    g->device = dev;
    return g;
}

nb_graph *nb_graph_begin(const char *name) {
    nb_graph *g = nb__graph_new("graph_begin", name, NB_CPU);
    build_frame *f = g ? nb__calloc(1, sizeof *f) : NULL;
    if (!f) {
        if (g) nb__error(NB_ERR_OOM, "graph_begin: out of memory");
        nb_graph_release(g);
        return NULL;
    }
    g->building = true;
    f->it.base.name = "trace";
    f->it.base.apply = trace_apply;
    f->it.g = nb_graph_retain(g);
    f->up = tl_builds;
    tl_builds = f;
    nb__at_thread_exit(builds_at_exit);
    nb__interp_push(&f->it.base);
    f->scope_guard = nb__scope_guard();
    return g;
}

nb_status nb_graph_end(nb_graph *g) {
    if (!g) return nb__error_set(NB_ERR_NULL, "graph_end: graph is NULL");
    if (!tl_builds || tl_builds->it.g != g)
        return nb__error_set(NB_ERR_STATE, "graph_end: graph '%s' is not the innermost graph being built on this thread",
                             g->name);
    nb_graph_retain(g); /* the frame's reference may be the last */
    end_innermost();
    nb_status st = g->n_outputs ? NB_OK
                                : nb__error_set(NB_ERR_STATE, "graph_end: graph '%s' has no output (nb_graph_output)",
                                                g->name);
    nb_graph_release(g);
    return st;
}

/* After a build's fn: end the traces fn left open above g's (NB_ERR_STATE naming the first)
 * and g's own; fn's own error (st) wins over any of these. */
static nb_status build_end(const char *op, nb_graph *g, nb_status st) {
    if (!is_open(g)) {
        if (st == NB_OK) st = nb__error_set(NB_ERR_STATE, "%s: fn ended graph '%s'", op, g->name);
        return st;
    }
    while (tl_builds->it.g != g) {
        if (st == NB_OK)
            st = nb__error_set(NB_ERR_STATE, "%s: fn left graph '%s' open inside graph '%s' (nb_graph_begin without "
                               "nb_graph_end); ended it", op, tl_builds->it.g->name, g->name);
        end_innermost();
    }
    if (st != NB_OK) {
        end_innermost();
        return st;
    }
    return nb_graph_end(g);
}

static bool name_ok(const char *op, nb_graph *g, const char *name) {
    if (!name || !*name) {
        nb__error(NB_ERR_ARG, "%s: name must be a non-empty string", op);
        return false;
    }
    for (int i = 0; i < g->n; i++)
        if ((g->nodes[i].kind == NB_GNODE_INPUT || g->nodes[i].kind == NB_GNODE_PARAM) && !strcmp(g->nodes[i].name, name)) {
            nb__error(NB_ERR_ARG, "%s: graph '%s' already has an input or param named '%s'", op, g->name, name);
            return false;
        }
    return true;
}

static nb_tensor *add_named(const char *op, nb_graph *g, nb_gnode *nd, const char *name) {
    nd->name = nb__strdup(name);
    if (!nd->name || nb__graph_append(g, nd) < 0) {
        nb__free(nd->name);
        nb__error(NB_ERR_OOM, "%s: out of memory", op);
        return NULL;
    }
    nb_retain(nd->value);
    return nb__own(nb__graph_tensor(g, (nb_gval){g->n - 1, 0}));
}

nb_tensor *nb_graph_input(nb_graph *g, const char *name, nb_dtype dt, const int64_t *shape, int ndim) {
    const char *op = "graph_input";
    if (!is_building(op, g) || !name_ok(op, g, name)) return NULL;
    if ((unsigned)dt >= NB_DTYPE_COUNT) {
        nb__error(NB_ERR_DTYPE, "%s: '%s': invalid dtype %d", op, name, (int)dt);
        return NULL;
    }
    if (ndim < 0 || ndim > NB_MAX_DIMS || (ndim && !shape)) {
        nb__error(NB_ERR_ARG, "%s: '%s': rank %d outside [0, %d] or NULL shape", op, name, ndim, NB_MAX_DIMS);
        return NULL;
    }
    nb_gnode nd = {.kind = NB_GNODE_INPUT, .n_out = 1};
    nd.out[0].dtype = dt;
    nd.out[0].ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0 && !nb__dim_sym(shape[i])) {
            nb__error(NB_ERR_ARG, "%s: '%s': negative size %lld at axis %d", op, name, (long long)shape[i], i);
            return NULL;
        }
        nd.out[0].shape[i] = shape[i];
    }
    int64_t fixed[NB_MAX_DIMS]; /* the concrete part must make a valid tensor */
    for (int i = 0; i < ndim; i++) fixed[i] = nb__dim_sym(shape[i]) ? 1 : shape[i];
    if (nb__numel_checked(op, fixed, ndim) < 0) return NULL;
    return add_named(op, g, &nd, name);
}

nb_tensor *nb_graph_param(nb_graph *g, const char *name, nb_tensor *value) {
    const char *op = "graph_param";
    NB_CHECK_ARG(op, value);
    if (!is_building(op, g) || !name_ok(op, g, name) || !nb__check_concrete(op, value)) return NULL;
    nb_gnode nd = {.kind = NB_GNODE_PARAM, .n_out = 1, .value = value};
    nb__meta_of(&nd.out[0], value);
    nd.out[0].weak = false;
    return add_named(op, g, &nd, name);
}

nb_tensor *nb_graph_constant(nb_graph *g, nb_tensor *value) {
    const char *op = "graph_constant";
    NB_CHECK_ARG(op, value);
    if (!is_building(op, g) || !nb__check_concrete(op, value)) return NULL;
    nb_gval v = capture(g, value);
    return v.node < 0 ? NULL : nb__own(nb__graph_tensor(g, v));
}

nb_tensor *nb_graph_scalar(nb_graph *g, double value, nb_dtype dt) {
    if (!is_building("graph_scalar", g)) return NULL;
    nb_tensor *s = nb__full_on(NULL, 0, value, dt, g->device);
    if (!s) return NULL;
    nb_tensor *r = nb_graph_constant(g, s);
    nb_release(s);
    return r;
}

nb_status nb_graph_output(nb_graph *g, const char *name, nb_tensor *t) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    const char *op = "graph_output";
    nb_status st = NB_OK;
    if (!t) st = nb__error(NB_ERR_NULL, "%s: tensor is NULL", op);
    else if (!is_building(op, g)) st = nb_last_status();
    else if (!name || !*name) st = nb__error(NB_ERR_ARG, "%s: name must be a non-empty string", op);
    for (int i = 0; st == NB_OK && i < g->n_outputs; i++)
        if (!strcmp(g->output_names[i], name))
            st = nb__error(NB_ERR_ARG, "%s: graph '%s' already has an output named '%s'", op, g->name, name);
    if (st == NB_OK && g->n_outputs == g->cap_outputs) {
        int cap = g->cap_outputs ? 2 * g->cap_outputs : 4;
        nb_gval *o = nb__realloc(g->outputs, sizeof *o * (size_t)cap);
        if (o) g->outputs = o;
        char **nm = o ? nb__realloc(g->output_names, sizeof *nm * (size_t)cap) : NULL;
        if (nm) g->output_names = nm;
        if (!nm) st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
        else g->cap_outputs = cap;
    }
    char *nm = st == NB_OK ? nb__strdup(name) : NULL;
    if (st == NB_OK && !nm) st = nb__error(NB_ERR_OOM, "%s: out of memory", op);
    nb_gval v = st == NB_OK ? nb__graph_value_of(g, t) : bad_val();
    if (st == NB_OK && v.node < 0) st = nb_last_status();
    if (st == NB_OK) {
        g->outputs[g->n_outputs] = v;
        g->output_names[g->n_outputs++] = nm;
        g->hash = 0;
    } else
        nb__free(nm);
    return nb__own_end(&fr, op, st);
}

nb_graph *nb_graph_build(const char *name, nb_graph_fn fn, void *ctx) {
    if (!fn) {
        nb__error_set(NB_ERR_NULL, "graph_build: fn is NULL");
        return NULL;
    }
    nb_graph *g = nb_graph_begin(name);
    if (!g) return NULL;
    nb_tensor *out = fn(g, ctx);
    nb_status st = NB_OK;
    if (!out) {
        st = nb_last_status();
        if (st == NB_OK) st = nb__error(NB_ERR_STATE, "graph_build: '%s': fn returned NULL", g->name);
    } else if (is_open(g)) /* else build_end reports it */
        st = nb_graph_output(g, "out", out);
    if (build_end("graph_build", g, st) != NB_OK) {
        nb_graph_release(g);
        return NULL;
    }
    return g;
}

nb_graph *nb_graph_build_with(const char *name, nb_graph_fn_with fn, void *ctx, void *meta) {
    if (!fn) {
        nb__error_set(NB_ERR_NULL, "graph_build_with: fn is NULL");
        return NULL;
    }
    nb_graph *g = nb_graph_begin(name);
    if (!g) return NULL;
    nb_status st = fn(g, ctx, meta);
    if (build_end("graph_build_with", g, st) != NB_OK) {
        nb_graph_release(g);
        return NULL;
    }
    return g;
}
