/*
 * schedule.c — the compiler proper: from a verified graph to the schedule a
 * run executes.  Dead-code elimination, fusion of elementwise chains and
 * row reductions into kernels (fuse.c), a topological order of the steps
 * (op nodes and kernels; among the ready ones, the earliest in the graph
 * first), and the liveness of every value so the executor frees
 * intermediates right after their last use.
 */
#include "compile.h"

#include <string.h>

void nb__schedule_free(nb_schedule *s) {
    for (int i = 0; i < s->nfused; i++) nb__fstep_free(&s->fused[i]);
    nb__free(s->fused);
    nb__free(s->node);
    nb__free(s->free_start);
    nb__free(s->free_slot);
    nb__free(s->miss);
    memset(s, 0, sizeof *s);
}

static nb_status alloc_schedule(nb_schedule *s, int n, int nfree, int gn) {
    s->n = n;
    s->node = nb__malloc(sizeof *s->node * (size_t)(n ? n : 1));
    s->free_start = nb__malloc(sizeof *s->free_start * (size_t)(n + 1));
    s->free_slot = nb__malloc(sizeof *s->free_slot * (size_t)(nfree ? nfree : 1));
    s->miss = nb__calloc((size_t)(gn ? gn : 1), 1);
    if (s->node && s->free_start && s->free_slot && s->miss) return NB_OK;
    nb__schedule_free(s);
    return nb__error(NB_ERR_OOM, "graph_compile: out of memory for a schedule of %d steps", n);
}

/* A deep copy of kernel src into dst; false on OOM (dst freed). */
static bool fstep_copy(nb_fstep *dst, const nb_fstep *src) {
    *dst = *src;
    size_t ni = (size_t)src->k.nin, no = (size_t)src->k.nout;
#define DUP(field, count)                                                                   \
    dst->field = nb__malloc(sizeof *src->field * ((count) + 1));                           \
    if (dst->field) memcpy(dst->field, src->field, sizeof *src->field * (count));
    dst->k.in_dtype = NULL, dst->k.in_level = NULL, dst->k.instr = NULL, dst->k.out_val = NULL;
    dst->load_slot = NULL, dst->out_slot = NULL, dst->load_outer = NULL, dst->out_outer = NULL, dst->member = NULL;
    DUP(k.in_dtype, ni) DUP(k.in_level, ni) DUP(k.instr, (size_t)src->k.ninstr) DUP(k.out_val, no)
    DUP(load_slot, ni) DUP(out_slot, no) DUP(load_outer, ni) DUP(out_outer, no) DUP(member, (size_t)src->nmember)
#undef DUP
    if (dst->k.in_dtype && dst->k.in_level && dst->k.instr && dst->k.out_val && dst->load_slot && dst->out_slot &&
        dst->load_outer && dst->out_outer && dst->member)
        return true;
    nb__fstep_free(dst);
    return false;
}

nb_status nb__schedule_copy(nb_schedule *dst, const nb_schedule *src, int gn) {
    int nfree = src->free_start[src->n];
    if (alloc_schedule(dst, src->n, nfree, gn) != NB_OK) return NB_ERR_OOM;
    memcpy(dst->node, src->node, sizeof *dst->node * (size_t)src->n);
    memcpy(dst->free_start, src->free_start, sizeof *dst->free_start * (size_t)(src->n + 1));
    memcpy(dst->free_slot, src->free_slot, sizeof *dst->free_slot * (size_t)nfree);
    memcpy(dst->miss, src->miss, (size_t)(gn ? gn : 1));
    dst->nops = src->nops;
    if (src->nfused) {
        dst->fused = nb__calloc((size_t)src->nfused, sizeof *dst->fused);
        for (int i = 0; dst->fused && i < src->nfused; i++) {
            if (!fstep_copy(&dst->fused[i], &src->fused[i])) break;
            dst->nfused = i + 1;
        }
        if (dst->nfused != src->nfused) {
            nb__schedule_free(dst);
            return nb__error(NB_ERR_OOM, "graph_compile: out of memory copying a schedule");
        }
    }
    return NB_OK;
}

/* ---- the order of the steps ---- */

typedef struct order_ctx {
    const nb_graph *g;
    int nitem;
    int32_t *item_of;  /* op node -> its step item: kernel f, or nk + its index among lone nodes */
    int32_t *key;      /* item -> its earliest node id (the heap's order) */
    int32_t *heap;
    int nheap;
} order_ctx;

static void heap_push(order_ctx *o, int32_t item) {
    int i = o->nheap++;
    while (i > 0 && o->key[o->heap[(i - 1) / 2]] > o->key[item]) {
        o->heap[i] = o->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    o->heap[i] = item;
}

static int32_t heap_pop(order_ctx *o) {
    int32_t top = o->heap[0], last = o->heap[--o->nheap];
    int i = 0;
    for (;;) {
        int c = 2 * i + 1;
        if (c >= o->nheap) break;
        if (c + 1 < o->nheap && o->key[o->heap[c + 1]] < o->key[o->heap[c]]) c++;
        if (o->key[o->heap[c]] >= o->key[last]) break;
        o->heap[i] = o->heap[c];
        i = c;
    }
    o->heap[i] = last;
    return top;
}

/* Steps in a topological order of the items (Kahn's algorithm over the edges between them,
 * the earliest ready item first) into step[] (item ids).  Edges: each node's input from an
 * op node of another item. */
static nb_status order_items(order_ctx *o, const bool *live, int32_t *step) {
    const nb_graph *g = o->g;
    int ni = o->nitem;
    int *indeg = nb__calloc((size_t)ni + 1, sizeof(int)), *start = nb__calloc((size_t)ni + 2, sizeof(int));
    int32_t *adj = NULL;
    o->heap = nb__malloc(sizeof(int32_t) * ((size_t)ni + 1));
    int nedge = 0;
    for (int pass = 0; pass < 2 && indeg && start && o->heap; pass++) {
        if (pass == 1) { /* counts -> offsets, then fill */
            for (int i = 0; i < ni; i++) start[i + 1] += start[i];
            if (!(adj = nb__malloc(sizeof(int32_t) * (size_t)(nedge + 1)))) break;
        }
        for (int id = 0; id < g->n; id++) {
            if (!live[id] || g->nodes[id].kind != NB_GNODE_OP) continue;
            int32_t to = o->item_of[id];
            for (int i = 0; i < g->nodes[id].n_in; i++) {
                int32_t p = g->nodes[id].in[i].node;
                if (g->nodes[p].kind != NB_GNODE_OP || o->item_of[p] == to) continue;
                if (pass == 0) {
                    start[o->item_of[p] + 1]++;
                    indeg[to]++;
                    nedge++;
                } else {
                    adj[start[o->item_of[p]]++] = to;
                }
            }
        }
    }
    nb_status st = NB_OK;
    if (!indeg || !start || !o->heap || !adj) {
        st = nb__error(NB_ERR_OOM, "graph_compile: out of memory ordering graph '%s'", g->name);
    } else {
        for (int i = ni; i > 0; i--) start[i] = start[i - 1]; /* fill advanced each start: shift back */
        start[0] = 0;
        for (int i = 0; i < ni; i++)
            if (indeg[i] == 0) heap_push(o, i);
        int k = 0;
        while (o->nheap > 0) {
            int32_t it = heap_pop(o);
            step[k++] = it;
            for (int e = start[it]; e < start[it + 1]; e++)
                if (--indeg[adj[e]] == 0) heap_push(o, adj[e]);
        }
        NB_ASSERT(k == ni); /* fusion keeps the item graph acyclic */
    }
    nb__free(indeg);
    nb__free(start);
    nb__free(adj);
    nb__free(o->heap);
    return st;
}

/* ---- liveness ---- */

/* free_start / free_slot of s (its steps set): each slot freed after the step of its last
 * use (its producer's when unused); graph outputs never. */
static nb_status liveness(const nb_graph *g, nb_schedule *s) {
    int nslots = g->n * NB_MAX_OUTS;
    int *last = nb__malloc(sizeof *last * (size_t)(nslots ? nslots : 1));
    if (!last) return nb__error(NB_ERR_OOM, "graph_compile: out of memory scheduling graph '%s'", g->name);
    for (int i = 0; i < nslots; i++) last[i] = -1;
    for (int k = 0; k < s->n; k++) {
#define MARK(slot) last[slot] = k
        NB_STEP_VALUES(g, s, k, MARK, MARK);
#undef MARK
    }
    for (int i = 0; i < g->n_outputs; i++) last[nb__slot(g->outputs[i])] = -1; /* returned, never freed early */
    int nfree = 0;
    for (int i = 0; i < nslots; i++) nfree += last[i] >= 0;
    s->free_start = nb__calloc((size_t)s->n + 1, sizeof *s->free_start);
    s->free_slot = nb__malloc(sizeof *s->free_slot * (size_t)(nfree ? nfree : 1));
    if (!s->free_start || !s->free_slot) {
        nb__free(last);
        return nb__error(NB_ERR_OOM, "graph_compile: out of memory scheduling graph '%s'", g->name);
    }
    /* slots bucketed by step (a counting sort): counts, prefix sums, then fill, advancing
     * free_start[k] to the end of bucket k and shifting it back afterwards */
    for (int i = 0; i < nslots; i++)
        if (last[i] >= 0) s->free_start[last[i] + 1]++;
    for (int k = 0; k < s->n; k++) s->free_start[k + 1] += s->free_start[k];
    for (int i = 0; i < nslots; i++)
        if (last[i] >= 0) s->free_slot[s->free_start[last[i]]++] = i;
    for (int k = s->n; k > 0; k--) s->free_start[k] = s->free_start[k - 1];
    s->free_start[0] = 0;
    nb__free(last);
    return NB_OK;
}

nb_status nb__schedule_build(const nb_graph *g, bool fuse, nb_schedule *s) {
    memset(s, 0, sizeof *s);
    size_t gn = (size_t)(g->n ? g->n : 1);
    bool *live = nb__calloc(gn, sizeof *live);
    int32_t *kernel_of = nb__malloc(sizeof(int32_t) * gn), *item_of = nb__malloc(sizeof(int32_t) * gn);
    int32_t *key = nb__malloc(sizeof(int32_t) * gn), *step = nb__malloc(sizeof(int32_t) * gn);
    s->miss = nb__calloc(gn, 1);
    nb_status st = NB_OK;
    if (!live || !kernel_of || !item_of || !key || !step || !s->miss) {
        st = nb__error(NB_ERR_OOM, "graph_compile: out of memory scheduling graph '%s'", g->name);
        goto done;
    }
    /* dead-code elimination: what the outputs reach, walking ids downwards */
    for (int i = 0; i < g->n_outputs; i++) live[g->outputs[i].node] = true;
    for (int id = g->n - 1; id >= 0; id--) {
        const nb_gnode *nd = &g->nodes[id];
        if (!live[id] || nd->kind != NB_GNODE_OP) continue;
        s->nops++;
        for (int i = 0; i < nd->n_in; i++)
            if (nd->in[i].node >= 0) live[nd->in[i].node] = true;
    }
    for (int id = 0; id < g->n; id++) kernel_of[id] = -1;
    if (fuse && (st = nb__fuse(g, live, &s->fused, &s->nfused, kernel_of, s->miss)) != NB_OK) goto done;
    /* items: the kernels, then each op node outside them */
    order_ctx o = {.g = g, .nitem = s->nfused, .item_of = item_of, .key = key};
    for (int f = 0; f < s->nfused; f++) key[f] = s->fused[f].member[0];
    for (int id = 0; id < g->n; id++) {
        if (!live[id] || g->nodes[id].kind != NB_GNODE_OP) continue;
        if (kernel_of[id] >= 0) {
            item_of[id] = kernel_of[id];
        } else {
            item_of[id] = o.nitem;
            key[o.nitem++] = id;
        }
    }
    if ((st = order_items(&o, live, step)) != NB_OK) goto done;
    s->n = o.nitem;
    if (!(s->node = nb__malloc(sizeof(int32_t) * (size_t)(s->n ? s->n : 1)))) {
        st = nb__error(NB_ERR_OOM, "graph_compile: out of memory scheduling graph '%s'", g->name);
        goto done;
    }
    for (int k = 0; k < s->n; k++) s->node[k] = step[k] < s->nfused ? -1 - step[k] : key[step[k]];
    st = liveness(g, s);
done:
    if (st != NB_OK) nb__schedule_free(s);
    nb__free(live);
    nb__free(kernel_of);
    nb__free(item_of);
    nb__free(key);
    nb__free(step);
    return st;
}
