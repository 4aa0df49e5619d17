/*
 * run.c — the executor of compiled plans: binds the named arguments
 * (inputs; params default to their bound tensors) with dtype, rank and
 * symbolic-dim checks, then runs the schedule step by step, freeing each
 * intermediate after its last use.  An op-node step has its symbolic dims
 * in attrs evaluated and infer re-run on the concrete inputs (or both taken
 * from the plan's previous run under the same binding, compile.h), and is
 * executed eagerly without recording; a fused-kernel step is handed to the
 * backend with its loads and fresh outputs viewed in the kernel's domain,
 * or run node by node when the backend cannot take it.
 */
#include "compile.h"
#include "../backend/backend.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The public function a run was called through, for messages (compiled_run or compiled_run_into). */
static _Thread_local const char *OP = "compiled_run";

/* The INPUT or PARAM node of c's graph named name, -1 when none. */
static int32_t find_named(const nb_compiled *c, const char *name) {
    for (int q = 0; q < c->nleaf; q++) {
        const nb_gnode *nd = &c->g->nodes[c->leaf[q]];
        if ((nd->kind == NB_GNODE_INPUT || nd->kind == NB_GNODE_PARAM) && !strcmp(nd->name, name)) return c->leaf[q];
    }
    return -1;
}

static const char *arg_kind(const nb_gnode *nd) { return nd->kind == NB_GNODE_INPUT ? "input" : "param"; }

/* Match the sizes of v with node nd's declared dims: the lone symbols (!derived) or the derived
 * dims (see nb__dim_bind). */
static nb_status bind_dims(const nb_gnode *nd, const nb_tensor *v, bool derived, nb_dim_binding *bind) {
    const nb_meta *m = &nd->out[0];
    for (int d = 0; d < m->ndim; d++) {
        char what[160];
        snprintf(what, sizeof what, "%s: %s '%.60s' axis %d", OP, arg_kind(nd), nd->name, d);
        nb_status st = nb__dim_bind(what, m->shape[d], v->shape[d], derived, bind);
        if (st != NB_OK) return st;
    }
    return NB_OK;
}

/* Check value v against node nd's declared metadata, binding its lone symbolic dims. */
static nb_status bind_value(const nb_compiled *c, const nb_gnode *nd, nb_tensor *v, nb_dim_binding *bind) {
    const char *kind = arg_kind(nd);
    if (!v) return nb__error(NB_ERR_NULL, "%s: %s '%s' is NULL", OP, kind, nd->name);
    if (!nb__check_concrete(OP, v)) return nb_last_status();
    if (!nb__same_device(v->storage->device, c->dev))
        return nb__error(NB_ERR_DEVICE, "%s: %s '%s' is not on the device graph '%s' was compiled for", OP, kind,
                         nd->name, c->g->name);
    const nb_meta *m = &nd->out[0];
    if (v->dtype != m->dtype)
        return nb__error(NB_ERR_DTYPE, "%s: %s '%s' has dtype %s, graph '%s' declares %s", OP, kind, nd->name,
                         nb_dtype_name(v->dtype), c->g->name, nb_dtype_name(m->dtype));
    if (v->ndim != m->ndim)
        return nb__error(NB_ERR_SHAPE, "%s: %s '%s' has rank %d (shape %s), graph '%s' declares rank %d", OP, kind,
                         nd->name, v->ndim, NB_SHAPE_STR(v), c->g->name, m->ndim);
    return bind_dims(nd, v, false, bind);
}

/* Fill the leaf slots: the named arguments, then defaults (params, constants); missing inputs fail. */
static nb_status bind_args(const nb_compiled *c, int n, const char *const *names, nb_tensor *const *values,
                           nb_tensor **slot, nb_dim_binding *bind) {
    const nb_graph *g = c->g;
    for (int i = 0; i < n; i++) {
        if (!names[i]) return nb__error(NB_ERR_NULL, "%s: name %d is NULL", OP, i);
        int32_t id = find_named(c, names[i]);
        if (id < 0)
            return nb__error(NB_ERR_ARG, "%s: graph '%s' has no input or param named '%s'", OP, g->name, names[i]);
        if (slot[nb__slot((nb_gval){id, 0})])
            return nb__error(NB_ERR_ARG, "%s: argument '%s' given twice", OP, names[i]);
        nb_status st = bind_value(c, &g->nodes[id], values[i], bind);
        if (st != NB_OK) return st;
        slot[nb__slot((nb_gval){id, 0})] = nb_retain(values[i]);
    }
    for (int q = 0; q < c->nleaf; q++) { /* derived dims (2*B, B-5) of the arguments, once every lone symbol is bound */
        int32_t id = c->leaf[q];
        nb_tensor *v = slot[nb__slot((nb_gval){id, 0})];
        nb_status st = v ? bind_dims(&g->nodes[id], v, true, bind) : NB_OK;
        if (st != NB_OK) return st;
    }
    for (int q = 0; q < c->nleaf; q++) {
        int32_t id = c->leaf[q];
        const nb_gnode *nd = &g->nodes[id];
        nb_tensor **s = &slot[nb__slot((nb_gval){id, 0})];
        if (*s) continue;
        if (nd->kind == NB_GNODE_INPUT)
            return nb__error(NB_ERR_ARG, "%s: graph '%s' needs input '%s', which is not given", OP, g->name, nd->name);
        /* a param defaults to the tensor the compiled graph binds it to (an equal graph's plan shares g) */
        *s = nb_retain(c->param_src[id] >= 0 ? c->src->nodes[c->param_src[id]].value : nd->value);
    }
    return NB_OK;
}

/* Symbolic dims inside attrs (sizes, shapes) evaluated under bind. */
static nb_status concrete_attrs(nb_attrs *a, const char *op, const nb_dim_binding *bind) {
    nb_status st = nb__dims_eval(op, a->i, (int)(sizeof a->i / sizeof a->i[0]), bind);
    return st != NB_OK ? st : nb__dims_eval(op, a->shape, (int)(sizeof a->shape / sizeof a->shape[0]), bind);
}

/* Step k's concrete attrs and output metadata into a, meta: computed (symbolic dims evaluated, infer
 * re-run on the inputs in[]), or when `reuse`, those stored by the previous run. */
static nb_status step_meta(const nb_gnode *nd, int32_t id, nb_tensor **in, const nb_dim_binding *bind, bool reuse,
                           nb_attrs *a, nb_meta *meta) {
    if (reuse) return NB_OK;
    const char *name = nb__ops[nd->op].name;
    *a = nd->attrs;
    nb_status st = concrete_attrs(a, name, bind);
    if (st != NB_OK) return st;
    int nout = nb__kinds[nb__ops[nd->op].kind]->infer(nd->op, in, nd->n_in, a, meta);
    if (nout < 0) return nb_last_status();
    if (nout != nd->n_out)
        return nb__error(NB_ERR_STATE, "%s: node %d (%s) gives %d outputs at run time, %d when traced", OP, (int)id,
                         name, nout, nd->n_out);
    return NB_OK;
}

static nb_status run_step(const nb_graph *g, int32_t id, nb_tensor **slot, const nb_dim_binding *bind, bool reuse,
                          nb_attrs *a, nb_meta *meta) {
    const nb_gnode *nd = &g->nodes[id];
    nb_tensor *in[8];
    for (int i = 0; i < nd->n_in; i++) in[i] = nd->in[i].node < 0 ? NULL : slot[nb__slot(nd->in[i])];
    nb_status st = step_meta(nd, id, in, bind, reuse, a, meta);
    if (st != NB_OK) return st;
    nb_tensor *res[NB_MAX_OUTS];
    st = nb__eager_apply(nd->op, in, nd->n_in, a, meta, nd->n_out, res);
    if (st != NB_OK) return st;
    for (int j = 0; j < nd->n_out; j++) slot[nb__slot((nb_gval){id, j})] = res[j];
    return NB_OK;
}

/* t viewed with the kernel's domain shape dom[nd]: broadcast along its trailing axes, or
 * (outer) along the domain's outer ones, its own axes then followed by nred size-1 axes. */
static nb_tensor *domain_view(nb_tensor *t, const int64_t *dom, int nd, int nred, bool outer) {
    if (!outer) return nb__expand_raw(t, dom, nd);
    int64_t shape[NB_MAX_DIMS], st[NB_MAX_DIMS];
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->shape[d];
        st[d] = t->stride[d];
    }
    for (int d = t->ndim; d < t->ndim + nred; d++) shape[d] = 1, st[d] = 0;
    nb_tensor *v = nb__tensor_view_of(t->storage, shape, st, t->ndim + nred, t->offset, t->dtype);
    nb_tensor *r = v ? nb__expand_raw(v, dom, nd) : NULL;
    nb_release(v);
    return r;
}

/* One run: its plan, value table, binding, memory plan and arena (NULL: unplanned), and
 * whether fused kernels run node by node (a weak-scalar argument may change dtypes). */
typedef struct run_env {
    const nb_compiled *c;
    nb_tensor **slot;
    const nb_dim_binding *bind;
    const nb_mplan *mem;
    nb_storage *arena;
    bool nofuse;
    uint8_t *ran;                      /* per kernel (nb_fk_ran), when the run cache is in hand */
    int ndirect;                       /* outputs a kernel writes straight into a destination */
    int32_t direct_slot[NB_FK_MAX_IO * 4];
    nb_tensor *direct[NB_FK_MAX_IO * 4];
} run_env;

/* The destination kernel output slot s is written into directly, NULL when none. */
static nb_tensor *direct_dest(const run_env *e, int32_t s) {
    for (int i = 0; i < e->ndirect; i++)
        if (e->direct_slot[i] == s) return e->direct[i];
    return NULL;
}

/* Where value slot s of the run goes: its arena place, or NULL (a buffer of its own). */
static bool planned(const run_env *e, int32_t s) { return e->arena && e->mem->offset[s] >= 0; }

/* Run kernel f with the backend's fused entry: NB_OK with its outputs in their slots,
 * NB_ERR_UNSUPPORTED when the backend cannot take this call (nothing written), or an error. */
static nb_status run_fused(const run_env *e, const nb_fstep *f, int *ran) {
    const nb_compiled *c = e->c;
    const nb_backend *be = nb_backend_for(c->dev);
    if (!be || !be->fused) return NB_ERR_UNSUPPORTED;
    int64_t dom[NB_MAX_DIMS];
    memcpy(dom, f->dom, sizeof(int64_t) * (size_t)f->nd);
    if (nb__dims_eval(OP, dom, f->nd, e->bind) != NB_OK) return nb_last_status();
    nb_tensor *in[NB_FK_MAX_IO] = {0}, *out[NB_FK_MAX_IO] = {0}, *outv[NB_FK_MAX_IO] = {0};
    nb_status st = NB_OK;
    for (int j = 0; j < f->k.nin && st == NB_OK; j++)
        if (!(in[j] = domain_view(e->slot[f->load_slot[j]], dom, f->nd, f->k.nred, f->load_outer[j])))
            st = nb_last_status();
    for (int o = 0; o < f->k.nout && st == NB_OK; o++) {
        nb_meta m = c->g->nodes[f->out_slot[o] / NB_MAX_OUTS].out[0];
        st = nb__dims_eval(OP, m.shape, m.ndim, e->bind);
        nb_tensor *dest = direct_dest(e, f->out_slot[o]);
        if (st == NB_OK && dest) out[o] = nb_retain(dest);
        else if (st == NB_OK && planned(e, f->out_slot[o]))
            nb__meta_redirect(e->arena, (size_t)e->mem->offset[f->out_slot[o]], &m);
        if (st == NB_OK && !out[o] && !(out[o] = nb__meta_new(&m, c->dev))) st = nb_last_status();
        nb__meta_redirect(NULL, 0, NULL);
        if (st == NB_OK && !(outv[o] = domain_view(out[o], dom, f->nd, f->k.nred, f->out_outer[o]))) st = nb_last_status();
    }
    if (st == NB_OK) st = be->fused(&f->k, dom, f->nd, in, outv, ran);
    for (int j = 0; j < f->k.nin; j++) nb_release(in[j]);
    for (int o = 0; o < f->k.nout; o++) {
        nb_release(outv[o]);
        if (st == NB_OK) e->slot[f->out_slot[o]] = out[o];
        else nb_release(out[o]);
    }
    return st;
}

/* Op node id: run_step with its result in its arena place when planned. */
static nb_status run_node(const run_env *e, int32_t id, bool reuse, nb_attrs *a, nb_meta *meta) {
    int32_t s = nb__slot((nb_gval){id, 0});
    if (!planned(e, s)) return run_step(e->c->g, id, e->slot, e->bind, reuse, a, meta);
    /* the graph's meta with dims evaluated: what the step's infer gives */
    nb_meta m = e->c->g->nodes[id].out[0];
    if (nb__dims_eval(OP, m.shape, m.ndim, e->bind) != NB_OK) return nb_last_status();
    nb__meta_redirect(e->arena, (size_t)e->mem->offset[s], &m);
    nb_status st = run_step(e->c->g, id, e->slot, e->bind, reuse, a, meta);
    nb__meta_redirect(NULL, 0, NULL);
    return st;
}

/* Kernel f: fused, or (the backend cannot, or nofuse) its nodes one by one, whose values
 * other than the kernel's outputs are then dropped. */
static nb_status run_kernel(const run_env *e, const nb_fstep *f) {
    int ran = NB_FK_RAN_OPS;
    nb_status st = e->nofuse ? NB_ERR_UNSUPPORTED : run_fused(e, f, &ran);
    if (e->ran) e->ran[f - e->c->s.fused] = (uint8_t)(st == NB_OK ? ran : NB_FK_RAN_OPS);
    if (st != NB_ERR_UNSUPPORTED) return st;
    st = NB_OK;
    for (int i = 0; i < f->nmember && st == NB_OK; i++) {
        nb_attrs a;
        nb_meta meta[NB_MAX_OUTS];
        st = run_step(e->c->g, f->member[i], e->slot, e->bind, false, &a, meta);
    }
    for (int i = 0; i < f->nmember; i++) {
        int32_t s = nb__slot((nb_gval){f->member[i], 0});
        bool out = false;
        for (int o = 0; o < f->k.nout; o++) out |= f->out_slot[o] == s;
        if (!out || st != NB_OK) {
            nb_release(e->slot[s]);
            e->slot[s] = NULL;
        }
    }
    return st;
}

/* Ops reached from inside kernels run eagerly even while a graph is being built on this thread. */
static nb_status eager_interp_apply(nb_interp *self, nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs,
                                    const nb_meta *meta, int nout, nb_tensor **out) {
    (void)self;
    return nb__eager_apply(op, in, n, attrs, meta, nout, out);
}

/* Run the schedule; with `rc` (the plan's cache in hand) its attrs and metas are reused when `reuse`,
 * else stored. */
static nb_status run_schedule(const run_env *e, nb_run_cache *rc, bool reuse) {
    nb_interp eager = {.name = "compiled", .apply = eager_interp_apply};
    nb__interp_push(&eager);
    nb_no_grad_begin();
    nb_status st = NB_OK;
    const nb_schedule *s = &e->c->s;
    for (int k = 0; k < s->n && st == NB_OK; k++) {
        nb_attrs a;
        nb_meta meta[NB_MAX_OUTS];
        const nb_fstep *f = nb__step_kernel(s, k);
        st = f ? run_kernel(e, f)
               : run_node(e, s->node[k], reuse, rc ? &rc->attrs[k] : &a, rc ? &rc->meta[k * NB_MAX_OUTS] : meta);
        for (int fr = s->free_start[k]; st == NB_OK && fr < s->free_start[k + 1]; fr++) {
            nb_release(e->slot[s->free_slot[fr]]);
            e->slot[s->free_slot[fr]] = NULL;
        }
    }
    nb_no_grad_end();
    nb__interp_pop(&eager);
    return st;
}

/* rc's arena for its memory plan: the one kept from the last run when it is big enough and
 * nothing holds it any more, else a new one.  NULL (no error kept) when memory is short: the run
 * then allocates each value on its own. */
static nb_storage *arena_for(nb_run_cache *rc, nb_device dev) {
    size_t need = (size_t)rc->mem.arena;
    if (rc->arena && (rc->arena->nbytes < need || atomic_load(&rc->arena->refs) != 1)) {
        nb__storage_release(rc->arena);
        rc->arena = NULL;
    }
    if (!rc->arena && need) {
        nb__error_frame fr;
        nb__own_begin(&fr);
        rc->arena = nb__storage_new(need, dev);
        nb__own_end(&fr, OP, NB_OK); /* a missing arena only costs the plan */
    }
    return rc->arena;
}

void nb__run_cache_free(nb_run_cache *rc) {
    nb__mplan_free(&rc->mem);
    nb__free(rc->ran);
    rc->ran = NULL;
    if (rc->arena) nb__storage_release(rc->arena);
    rc->arena = NULL;
    nb__free(rc->slot);
    nb__free(rc->attrs);
    nb__free(rc->meta);
    rc->slot = NULL;
    rc->attrs = NULL;
    rc->meta = NULL;
    rc->valid = false;
}

/* c's run cache, taken for this run (its arrays allocated at the first); NULL when another run holds
 * it or memory is short (the run then goes without). */
static nb_run_cache *take_run_cache(nb_compiled *c, size_t nslots) {
    nb_run_cache *rc = &c->run;
    if (atomic_exchange(&rc->busy, true)) return NULL;
    if (!rc->slot) {
        size_t n = (size_t)(c->s.n ? c->s.n : 1);
        rc->slot = nb__calloc(nslots ? nslots : 1, sizeof *rc->slot);
        rc->attrs = nb__malloc(sizeof *rc->attrs * n);
        rc->meta = nb__malloc(sizeof *rc->meta * n * NB_MAX_OUTS);
        rc->ran = nb__calloc((size_t)c->s.nfused + 1, sizeof *rc->ran);
        if (!rc->slot || !rc->attrs || !rc->meta || !rc->ran) {
            nb__run_cache_free(rc);
            atomic_store(&rc->busy, false);
            return NULL;
        }
    }
    return rc;
}

/* The same symbols bound to the same sizes (in any order). */
static bool same_binding(const nb_dim_binding *a, const nb_dim_binding *b) {
    if (a->n != b->n) return false;
    for (int i = 0; i < a->n; i++) {
        int j = 0;
        while (j < b->n && b->sym[j] != a->sym[i]) j++;
        if (j == b->n || b->val[j] != a->val[i]) return false;
    }
    return true;
}

/* The step of c's schedule that computes value slot s in a fused kernel (its kernel in *f, the
 * output's index in *o), -1 when no kernel does. */
static int kernel_step_of(const nb_compiled *c, int32_t s, const nb_fstep **f, int *o) {
    for (int k = 0; k < c->s.n; k++) {
        const nb_fstep *fk = nb__step_kernel(&c->s, k);
        for (int j = 0; fk && j < fk->k.nout; j++)
            if (fk->out_slot[j] == s) {
                *f = fk;
                *o = j;
                return k;
            }
    }
    return -1;
}

/* Do two host tensors' elements share any bytes (their strided extents intersect)? */
static bool overlaps(const nb_tensor *a, const nb_tensor *b) {
    uintptr_t sa = (uintptr_t)a->storage->data, sb = (uintptr_t)b->storage->data; /* elements lie in storage */
    if (sa + a->storage->nbytes <= sb || sb + b->storage->nbytes <= sa) return false;
    if (a->storage->data != b->storage->data && a->storage != b->storage) {
        int64_t alo, ahi, blo, bhi;
        if (!nb__numel(a) || !nb__numel(b)) return false;
        if (!nb__strided_extent(a->shape, a->stride, a->ndim, &alo, &ahi) ||
            !nb__strided_extent(b->shape, b->stride, b->ndim, &blo, &bhi))
            return true;
        const char *pa = nb__ptr(a), *pb = nb__ptr(b);
        size_t ea = nb_dtype_size(a->dtype), eb = nb_dtype_size(b->dtype);
        return pa + alo * (int64_t)ea < pb + (bhi + 1) * (int64_t)eb && pb + blo * (int64_t)eb < pa + (ahi + 1) * (int64_t)ea;
    }
    return nb__numel(a) && nb__numel(b);
}

/* The leaf (input, param or constant node) whose storage value v of g shares through views and
 * copies that may return their input, -1 when v is computed afresh. */
static int32_t leaf_of(const nb_graph *g, nb_gval v) {
    for (;;) {
        const nb_gnode *nd = &g->nodes[v.node];
        if (nd->kind != NB_GNODE_OP) return v.node;
        if (!nb__op_aliases_input(nd->op) || nd->in[0].node < 0) return -1;
        v = nd->in[0];
    }
}

/* Can output i (value slot s) go straight into dest?  When a kernel computes it, dest is
 * contiguous, no other output is an argument (or a view of one) in dest's memory (it is read
 * after the steps), and no argument in dest's memory is read after that kernel — or, read in it,
 * only as an elementwise load laid out as dest and read for the last time no later than the
 * output is written (each element read before it is overwritten). */
static bool can_write_direct(const run_env *e, int i, int32_t s, const nb_tensor *dest) {
    const nb_compiled *c = e->c;
    const nb_graph *g = c->g;
    const nb_fstep *f;
    int o, k;
    if (!e->mem || !nb_is_contiguous(dest) || (k = kernel_step_of(c, s, &f, &o)) < 0) return false;
    for (int j = 0; j < g->n_outputs; j++) {
        int32_t l = leaf_of(g, g->outputs[j]);
        if (j != i && l >= 0 && overlaps(e->slot[nb__slot((nb_gval){l, 0})], dest)) return false;
    }
    int w = f->k.out_val[o] - f->k.nin; /* the instruction writing it */
    for (int q = 0; q < c->nleaf; q++) {
        int32_t l = nb__slot((nb_gval){c->leaf[q], 0});
        const nb_tensor *a = e->slot[l];
        if (!a || !overlaps(a, dest) || e->mem->end[l] < k) continue;
        if (e->mem->end[l] > k || f->k.nred) return false;
        bool same_layout = a->storage == dest->storage && a->offset == dest->offset && a->ndim == dest->ndim &&
                           !memcmp(a->shape, dest->shape, sizeof(int64_t) * (size_t)a->ndim) &&
                           !memcmp(a->stride, dest->stride, sizeof(int64_t) * (size_t)a->ndim);
        for (int j = 0; j < f->k.nin; j++) {
            if (e->mem->root[f->load_slot[j]] != l) continue;
            if (f->load_slot[j] != l || !same_layout || f->k.in_level[j] != NB_FL_FULL || f->load_outer[j]) return false;
            if (nb__fk_last_reader(&f->k, j) > w) return false;
        }
    }
    return true;
}

/* The destinations of run_into: each of output i's dtype and shape (as bound) on c's device,
 * writable (nb__writable: no two elements at one address, not tracked while recording), in no
 * constant's memory, none sharing memory with another. */
static nb_status check_dests(const nb_compiled *c, nb_tensor *const *dest, int nout, const nb_dim_binding *bind) {
    const nb_graph *g = c->g;
    for (int i = 0; i < nout; i++) {
        nb_tensor *d = dest[i];
        if (!d) continue;
        const char *name = g->output_names[i];
        if (!nb__writable(OP, d)) return nb_last_status();
        if (!nb__same_device(d->storage->device, c->dev))
            return nb__error(NB_ERR_DEVICE, "%s: destination of output '%s' is on another device", OP, name);
        nb_meta m = g->nodes[g->outputs[i].node].out[g->outputs[i].out];
        if (nb__dims_eval(OP, m.shape, m.ndim, bind) != NB_OK) return nb_last_status();
        if (d->dtype != m.dtype)
            return nb__error(NB_ERR_DTYPE, "%s: destination of output '%s' has dtype %s, the output %s", OP, name,
                             nb_dtype_name(d->dtype), nb_dtype_name(m.dtype));
        if (d->ndim != m.ndim || memcmp(d->shape, m.shape, sizeof(int64_t) * (size_t)m.ndim))
            return nb__error(NB_ERR_SHAPE, "%s: destination of output '%s' has shape %s, the output %s", OP, name,
                             NB_SHAPE_STR(d), NB_DIMS_STR(m.shape, m.ndim));
        for (int q = 0; q < c->nleaf; q++) {
            int32_t id = c->leaf[q];
            if (g->nodes[id].kind == NB_GNODE_CONST && overlaps(g->nodes[id].value, d))
                return nb__error(NB_ERR_ARG, "%s: destination of output '%s' is in the memory of a constant of graph "
                                 "'%s' (node %d): writing it would change later runs", OP, name, g->name, id);
        }
        for (int j = 0; j < i; j++)
            if (dest[j] && overlaps(dest[j], d))
                return nb__error(NB_ERR_ARG, "%s: destinations of outputs '%s' and '%s' share memory", OP,
                                 g->output_names[j], name);
    }
    return NB_OK;
}

/* After the steps: each destination not written directly gets its value.  Values in a
 * destination's memory (an argument, or a view of one, that another destination overwrites:
 * w_new into w while w itself is an output) are copied apart first, so every destination
 * receives, and every output returned instead (dest[i] NULL) holds, what the graph computed
 * from the arguments as they were. */
static nb_status fill_dests(const nb_graph *g, nb_tensor **slot, nb_tensor *const *dest, int nout) {
    nb_status st = NB_OK;
    nb_tensor *src[NB_FK_MAX_IO * 4] = {0};
    nb_no_grad_begin();
    for (int i = 0; st == NB_OK && i < nout; i++) {
        nb_tensor **v = &slot[nb__slot(g->outputs[i])];
        if (*v == dest[i]) continue;
        bool hit = false;
        for (int j = 0; j < nout && !hit; j++) hit = dest[j] && overlaps(*v, dest[j]);
        nb_tensor *t = hit ? nb__scope_take(nb_clone(*v)) : nb_retain(*v);
        if (!t) {
            st = nb_last_status();
        } else if (dest[i]) {
            src[i] = t;
        } else { /* returned: the slot holds the copy (or its value again) */
            nb_release(*v);
            *v = t;
        }
    }
    for (int i = 0; st == NB_OK && i < nout; i++)
        if (src[i]) st = nb_copy_(dest[i], src[i]);
    for (int i = 0; i < nout; i++) nb_release(src[i]);
    nb_no_grad_end();
    return st;
}

static nb_status run_impl(nb_compiled *c, int n, const char *const *names, nb_tensor *const *values, int nout,
                          nb_tensor **outputs, bool into) {
    if (!c) return nb__error(NB_ERR_NULL, "%s: compiled plan is NULL", OP);
    const nb_graph *g = c->g;
    if (n < 0 || nout < 0 || nout > g->n_outputs)
        return nb__error(NB_ERR_ARG, "%s: %d arguments and %d outputs asked (graph '%s' has %d outputs)", OP, n, nout,
                         g->name, g->n_outputs);
    if ((n && (!names || !values)) || (nout && !outputs))
        return nb__error(NB_ERR_NULL, "%s: names, values or outputs is NULL", OP);
    size_t nslots = (size_t)g->n * NB_MAX_OUTS;
    nb_run_cache *rc = take_run_cache(c, nslots);
    nb_tensor **slot = rc ? rc->slot : nb__calloc(nslots ? nslots : 1, sizeof *slot);
    if (!slot) return nb__error(NB_ERR_OOM, "%s: out of memory running graph '%s'", OP, g->name);
    nb_dim_binding bind = {0};
    nb_status st = bind_args(c, n, names, values, slot, &bind);
    nb_tensor *dest[NB_FK_MAX_IO * 4] = {0}; /* run_into's destinations (a copy: outputs is overwritten) */
    int ndest = into ? nout : 0;
    if (ndest > (int)(sizeof dest / sizeof dest[0]))
        st = nb__error(NB_ERR_ARG, "%s: at most %d outputs go into destinations, %d asked", OP,
                       (int)(sizeof dest / sizeof dest[0]), nout);
    for (int i = 0; st == NB_OK && i < ndest; i++) dest[i] = outputs[i];
    if (ndest && st == NB_OK) st = check_dests(c, dest, ndest, &bind);
    if (st == NB_OK) {
        bool weak = false; /* a weak scalar argument may promote otherwise: no reuse */
        for (int i = 0; i < n; i++) weak |= values[i]->weak;
        bool reuse = rc && rc->valid && !weak && same_binding(&rc->bind, &bind);
        if (rc && !reuse) { /* overwritten from here on */
            rc->valid = false;
            nb__mplan_free(&rc->mem);
            if (!weak) st = nb__mplan_build(c, &bind, &rc->mem);
        }
        run_env e = {.c = c, .slot = slot, .bind = &bind, .nofuse = weak};
        if (rc && !weak && st == NB_OK) {
            e.mem = &rc->mem;
            e.arena = arena_for(rc, c->dev);
            e.ran = rc->ran;
        }
        for (int i = 0; st == NB_OK && i < ndest; i++) {
            int32_t os = nb__slot(g->outputs[i]);
            if (dest[i] && !direct_dest(&e, os) && can_write_direct(&e, i, os, dest[i])) {
                e.direct_slot[e.ndirect] = os;
                e.direct[e.ndirect++] = dest[i];
            }
        }
        if (st == NB_OK) st = run_schedule(&e, rc, reuse);
        if (st == NB_OK && ndest) st = fill_dests(g, slot, dest, ndest);
        if (rc && st == NB_OK && !weak) {
            rc->valid = true;
            rc->bind = bind;
        }
    }
    /* outputs: new references, a copy where the value is a constant's memory (writing into the
     * result must not change the plan's constant) */
    for (int i = 0; st == NB_OK && i < nout; i++) {
        if (i < ndest && dest[i]) continue;
        int32_t l = leaf_of(g, g->outputs[i]);
        nb_tensor *v = slot[nb__slot(g->outputs[i])];
        outputs[i] = l >= 0 && g->nodes[l].kind == NB_GNODE_CONST ? nb_clone(v) : nb__own(nb_retain(v));
        if (!outputs[i]) {
            st = nb_last_status();
            while (i-- > 0) /* scope-registered: taken back out before the release */
                if (!(i < ndest && dest[i])) nb_release(nb__scope_take(outputs[i]));
        }
    }
    for (size_t i = 0; i < nslots; i++) {
        nb_release(slot[i]);
        slot[i] = NULL;
    }
    if (rc) atomic_store(&rc->busy, false);
    else nb__free(slot);
    return st;
}

nb_status nb_compiled_run(nb_compiled *c, int n, const char *const *names, nb_tensor *const *values, int nout,
                          nb_tensor **outputs) {
    OP = "compiled_run";
    NB_OWN_STATUS(OP, run_impl(c, n, names, values, nout, outputs, false));
}

nb_status nb_compiled_run_into(nb_compiled *c, int n, const char *const *names, nb_tensor *const *values, int nout,
                               nb_tensor **outputs) {
    OP = "compiled_run_into";
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_status st = nb__own_end(&fr, OP, run_impl(c, n, names, values, nout, outputs, true));
    OP = "compiled_run";
    return st;
}
