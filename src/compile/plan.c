/*
 * plan.c — memory planning of a compiled run: where each intermediate lives
 * in one arena, worked out once per binding of the symbolic dims.
 *
 *  - Planned values: the results of fused kernels and of elementwise and
 *    matmul steps (each a fresh contiguous buffer), except those a graph
 *    output holds (directly or as the base of a view).  A view (and a copy
 *    that may return its input) aliases its base: the base's buffer lives
 *    until the view's last use.
 *  - Liveness over the schedule: a buffer is live from the step that writes
 *    it to the last step that reads it or a view of it.
 *  - In-place reuse: an output of an elementwise fused kernel takes the
 *    buffer of a load of the same size that dies at that kernel, when the
 *    kernel reads that load for the last time no later than it writes the
 *    output (each element is read before it is overwritten).
 *  - Placement: buffers by decreasing size, each at the lowest-waste gap
 *    among the buffers whose lifetimes overlap it (best fit over lifetimes,
 *    as XLA's heap simulator does), offsets 64-byte aligned.
 *  - The report's numbers: what the ops run one by one would allocate (every
 *    intermediate result), the values the plan keeps in memory, the
 *    liveness lower bound (the most bytes live at once), the arena size.
 */
#include "compile.h"

#include <stdio.h>
#include <string.h>

void nb__mplan_free(nb_mplan *p) {
    nb__free(p->root);
    nb__free(p->offset);
    nb__free(p->buf);
    nb__free(p->start);
    nb__free(p->end);
    nb__free(p->size);
    memset(p, 0, sizeof *p);
}

/* Concrete byte size of value slot s (its graph meta's dims evaluated under bind); -1 on error. */
static int64_t value_bytes(const nb_graph *g, int32_t s, const nb_dim_binding *bind) {
    const nb_meta *m = &g->nodes[s / NB_MAX_OUTS].out[s % NB_MAX_OUTS];
    int64_t n = (int64_t)nb_dtype_size(m->dtype);
    for (int d = 0; d < m->ndim; d++) {
        int64_t v = nb__dim_eval("compiled_run", m->shape[d], bind);
        if (v < 0 || (v && n > INT64_MAX / v)) return -1;
        n *= v;
    }
    return n;
}

/* Does an op-node step of op write its one result into a fresh buffer from nb__meta_new? */
static bool fresh_result(nb_op op) {
    nb_op_kind k = nb__ops[op].kind;
    return k == NB_KIND_UNARY || k == NB_KIND_BINARY || k == NB_KIND_WHERE || k == NB_KIND_MATMUL;
}

/* Do slots a and b hold values of one shape and element size (element i of one at the place of
 * element i of the other: a broadcast load of as many bytes does not count)? */
static bool same_layout(const nb_graph *g, int32_t a, int32_t b) {
    const nb_meta *ma = &g->nodes[a / NB_MAX_OUTS].out[a % NB_MAX_OUTS], *mb = &g->nodes[b / NB_MAX_OUTS].out[b % NB_MAX_OUTS];
    return nb_dtype_size(ma->dtype) == nb_dtype_size(mb->dtype) && ma->ndim == mb->ndim &&
           !memcmp(ma->shape, mb->shape, sizeof(int64_t) * (size_t)ma->ndim);
}

static int32_t find(int32_t *parent, int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
}

/* Place buffers by decreasing size at the best-fitting gap among those live at the same time. */
static void place(nb_mplan *p, int32_t *order, int64_t *placed_off) {
    int nb = p->nbuf;
    for (int i = 1; i < nb; i++) /* insertion sort: sizes descending, then earlier start */
        for (int j = i; j > 0; j--) {
            int32_t a = order[j - 1], b = order[j];
            if (p->size[a] > p->size[b] || (p->size[a] == p->size[b] && p->start[a] <= p->start[b])) break;
            order[j - 1] = b;
            order[j] = a;
        }
    p->arena = 0;
    for (int i = 0; i < nb; i++) {
        int32_t b = order[i];
        int64_t best = -1, best_gap = INT64_MAX, sz = (p->size[b] + 63) & ~(int64_t)63;
        /* candidate offsets: 0 and the end of each placed buffer that overlaps b in time */
        for (int c = -1; c < i; c++) {
            int64_t off = c < 0 ? 0 : placed_off[order[c]] + ((p->size[order[c]] + 63) & ~(int64_t)63);
            if (c >= 0 && (p->end[order[c]] < p->start[b] || p->start[order[c]] > p->end[b])) continue;
            int64_t next = INT64_MAX; /* the nearest overlapping buffer at or above off */
            bool clash = false;
            for (int o = 0; o < i && !clash; o++) {
                int32_t x = order[o];
                if (p->end[x] < p->start[b] || p->start[x] > p->end[b]) continue;
                int64_t xs = placed_off[x], xe = xs + ((p->size[x] + 63) & ~(int64_t)63);
                if (xs < off + sz && off < xe) clash = true;
                else if (xs >= off + sz && xs < next) next = xs;
            }
            if (clash) continue;
            int64_t gap = next == INT64_MAX ? INT64_MAX / 2 : next - off; /* the top of the arena fits anything */
            if (gap < best_gap || (gap == best_gap && off < best)) {
                best = off;
                best_gap = gap;
            }
        }
        placed_off[b] = best;
        if (best + sz > p->arena) p->arena = best + sz;
    }
}

nb_status nb__mplan_build(const nb_compiled *c, const nb_dim_binding *bind, nb_mplan *p) {
    const nb_graph *g = c->g;
    const nb_schedule *s = &c->s;
    int nslots = g->n * NB_MAX_OUTS;
    size_t ns = (size_t)(nslots ? nslots : 1);
    memset(p, 0, sizeof *p);
    p->offset = nb__malloc(sizeof(int64_t) * ns);
    p->buf = nb__malloc(sizeof(int32_t) * ns);
    p->start = nb__malloc(sizeof(int32_t) * ns);
    p->end = nb__malloc(sizeof(int32_t) * ns);
    p->size = nb__malloc(sizeof(int64_t) * ns);
    int32_t *root = p->root = nb__malloc(sizeof(int32_t) * ns), *parent = nb__malloc(sizeof(int32_t) * ns);
    int32_t *order = nb__malloc(sizeof(int32_t) * ns);
    bool *planned = nb__calloc(ns, sizeof(bool)), *escapes = nb__calloc(ns, sizeof(bool));
    nb_status st = NB_OK;
    if (!p->offset || !p->buf || !p->start || !p->end || !p->size || !root || !parent || !order ||
        !planned || !escapes) {
        st = nb__error(NB_ERR_OOM, "compiled_run: out of memory planning graph '%s'", g->name);
        goto done;
    }
    for (int i = 0; i < nslots; i++) {
        root[i] = parent[i] = i;
        p->offset[i] = -1;
        p->start[i] = INT32_MAX;
        p->end[i] = -1;
    }
    /* which values get a buffer, and which values alias another's */
    for (int k = 0; k < s->n; k++) {
        const nb_fstep *f = nb__step_kernel(s, k);
        if (f) {
            for (int o = 0; o < f->k.nout; o++) planned[f->out_slot[o]] = true;
            continue;
        }
        const nb_gnode *nd = &g->nodes[s->node[k]];
        int32_t out = nb__slot((nb_gval){nd->id, 0});
        if (nd->n_out == 1 && fresh_result(nd->op)) planned[out] = true;
        else if (nb__op_aliases_input(nd->op) && nd->n_in > 0 && nd->in[0].node >= 0) root[out] = root[nb__slot(nd->in[0])];
    }
    for (int i = 0; i < g->n_outputs; i++) escapes[root[nb__slot(g->outputs[i])]] = true;
    /* lifetimes of the buffers (roots): written at their step, alive through the last read of
     * any value aliasing them */
    for (int k = 0; k < s->n; k++) {
#define READ(slot) if (k > p->end[root[slot]]) p->end[root[slot]] = k
#define WRITE(slot) if (k < p->start[slot]) p->start[slot] = k
        NB_STEP_VALUES(g, s, k, READ, WRITE);
#undef READ
#undef WRITE
    }
    /* what running the ops one by one would allocate: every fresh result that is no output */
    p->unfused = 0;
    for (int k = 0; k < s->n; k++) {
        const nb_fstep *f = nb__step_kernel(s, k);
        for (int i = 0; i < (f ? f->nmember : 1); i++) {
            int32_t id = f ? f->member[i] : s->node[k];
            int32_t sl = nb__slot((nb_gval){id, 0});
            if (nb__op_aliases_input(g->nodes[id].op) || escapes[root[sl]]) continue;
            for (int j = 0; j < g->nodes[id].n_out; j++) {
                int64_t b = value_bytes(g, sl + j, bind);
                p->unfused += b > 0 ? b : 0;
            }
        }
    }
    for (int i = 0; i < nslots; i++) {
        planned[i] = planned[i] && !escapes[i] && root[i] == i;
        if (planned[i] && p->end[i] < p->start[i]) p->end[i] = p->start[i]; /* written, never read */
        if (planned[i] && (p->size[i] = value_bytes(g, i, bind)) < 0) {
            st = nb__error(NB_ERR_OVERFLOW, "compiled_run: a value of graph '%s' overflows", g->name);
            goto done;
        }
    }
    /* in place: an elementwise kernel's output takes a same-sized load buffer dying there */
    for (int k = 0; k < s->n; k++) {
        const nb_fstep *f = nb__step_kernel(s, k);
        if (!f || f->k.nred) continue;
        bool taken[NB_FK_MAX_IO] = {false};
        for (int o = 0; o < f->k.nout; o++) {
            int32_t os = f->out_slot[o];
            if (!planned[os]) continue;
            int w = f->k.out_val[o] - f->k.nin; /* the instruction writing it */
            for (int j = 0; j < f->k.nin; j++) {
                int32_t ls = f->load_slot[j];
                if (taken[j] || !planned[ls] || p->end[ls] != k || f->k.in_level[j] != NB_FL_FULL ||
                    f->load_outer[j] || !same_layout(g, ls, os) || nb__fk_last_reader(&f->k, j) > w)
                    continue;
                bool viewed = false; /* another load reading the same buffer (a view of it) */
                for (int j2 = 0; j2 < f->k.nin; j2++) viewed |= j2 != j && root[f->load_slot[j2]] == ls;
                if (viewed) continue;
                int32_t a = find(parent, ls);
                parent[os] = a; /* one buffer from the load's write to the output's last read */
                taken[j] = true;
                break;
            }
        }
    }
    /* buffers: the planned roots merged in place */
    p->nbuf = 0;
    int32_t *bufof = order; /* the slot -> buffer map, until order is needed for placement */
    for (int i = 0; i < nslots; i++) {
        if (!planned[i]) continue;
        int32_t r = find(parent, i);
        if (r == i) bufof[i] = p->nbuf++;
    }
    int64_t *bsize = nb__calloc((size_t)(p->nbuf ? p->nbuf : 1), sizeof(int64_t));
    int32_t *bstart = nb__malloc(sizeof(int32_t) * (size_t)(p->nbuf ? p->nbuf : 1));
    int32_t *bend = nb__malloc(sizeof(int32_t) * (size_t)(p->nbuf ? p->nbuf : 1));
    if (!bsize || !bstart || !bend) {
        nb__free(bsize);
        nb__free(bstart);
        nb__free(bend);
        st = nb__error(NB_ERR_OOM, "compiled_run: out of memory planning graph '%s'", g->name);
        goto done;
    }
    for (int b = 0; b < p->nbuf; b++) bstart[b] = INT32_MAX, bend[b] = -1;
    p->intermediates = 0;
    for (int i = 0; i < nslots; i++) {
        if (!planned[i]) continue;
        int32_t b = bufof[find(parent, i)];
        p->buf[i] = b; /* slot -> buffer (p->buf doubles as the map from here on) */
        p->intermediates += p->size[i];
        if (p->size[i] > bsize[b]) bsize[b] = p->size[i];
        if (p->start[i] < bstart[b]) bstart[b] = p->start[i];
        if (p->end[i] > bend[b]) bend[b] = p->end[i];
    }
    /* the liveness bound: the most bytes live at one step */
    p->live_peak = 0;
    for (int k = 0; k < s->n; k++) {
        int64_t live = 0;
        for (int b = 0; b < p->nbuf; b++) live += bstart[b] <= k && k <= bend[b] ? bsize[b] : 0;
        if (live > p->live_peak) p->live_peak = live;
    }
    nb_mplan bp = {.nbuf = p->nbuf, .size = bsize, .start = bstart, .end = bend};
    for (int b = 0; b < p->nbuf; b++) order[b] = b;
    int64_t *boff = nb__malloc(sizeof(int64_t) * (size_t)(p->nbuf ? p->nbuf : 1));
    if (!boff) {
        st = nb__error(NB_ERR_OOM, "compiled_run: out of memory planning graph '%s'", g->name);
    } else {
        place(&bp, order, boff);
        p->arena = bp.arena;
        for (int i = 0; i < nslots; i++)
            if (planned[i]) p->offset[i] = boff[p->buf[i]];
    }
    nb__free(boff);
    nb__free(bsize);
    nb__free(bstart);
    nb__free(bend);
done:
    nb__free(parent);
    nb__free(order);
    nb__free(planned);
    nb__free(escapes);
    if (st != NB_OK) nb__mplan_free(p);
    return st;
}

bool nb__mplan_check(const nb_mplan *p, int nslots, char *why, size_t n) {
    for (int a = 0; a < nslots; a++) {
        if (p->offset[a] < 0) continue;
        if (p->offset[a] % 64 || p->offset[a] + p->size[a] > p->arena) {
            snprintf(why, n, "value slot %d at %lld (+%lld) is misaligned or outside the %lld-byte arena", a,
                     (long long)p->offset[a], (long long)p->size[a], (long long)p->arena);
            return false;
        }
        for (int b = a + 1; b < nslots; b++) {
            if (p->offset[b] < 0 || p->buf[a] == p->buf[b]) continue; /* in place: one buffer by design */
            bool at_once = p->start[a] <= p->end[b] && p->start[b] <= p->end[a];
            bool overlap = p->offset[a] < p->offset[b] + p->size[b] && p->offset[b] < p->offset[a] + p->size[a];
            if (at_once && overlap && p->size[a] && p->size[b]) {
                snprintf(why, n, "value slots %d (steps %d..%d) and %d (steps %d..%d) overlap in the arena", a,
                         p->start[a], p->end[a], b, p->start[b], p->end[b]);
                return false;
            }
        }
    }
    return true;
}
