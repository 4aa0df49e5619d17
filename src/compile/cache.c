/*
 * cache.c — nb_graph_compile and this thread's compile cache: an LRU list of
 * plans keyed by the graph's structural hash and equality (structure,
 * attrs, metadata, constants by value, outputs) and the device, with
 * hit / miss / eviction counters; the plans' reference counting.
 */
#include "compile.h"
#include "../backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NB_COMPILE_CACHE_DEFAULT 64

typedef struct cache_entry {
    uint64_t hash;
    uint64_t used; /* tick of the last hit or insert */
    nb_compiled *c;
} cache_entry;

typedef struct compile_cache {
    cache_entry *e;
    size_t n, alloc, capacity; /* capacity 0: the default */
    uint64_t tick, hits, misses, evictions;
} compile_cache;

static _Thread_local compile_cache tl_cache;

static size_t capacity(void) { return tl_cache.capacity ? tl_cache.capacity : NB_COMPILE_CACHE_DEFAULT; }

/* ---- plans ---- */

nb_compiled *nb_compiled_retain(nb_compiled *c) {
    if (c) atomic_fetch_add(&c->refs, 1);
    return c;
}

void nb_compiled_release(nb_compiled *c) {
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1) return;
    nb__schedule_free(&c->s);
    nb__run_cache_free(&c->run);
    nb_graph_release(c->g);
    nb_graph_release(c->src);
    nb__free(c->param_src);
    nb__free(c->leaf);
    nb__free(c);
}

nb_graph *nb_compiled_graph(const nb_compiled *c) { return c ? c->src : NULL; }

/* A plan of src running g (both retained); which node of src each PARAM of g stands for (they
 * keep their names through the passes). */
static nb_compiled *plan_new(nb_graph *src, nb_graph *g, nb_device dev) {
    nb_compiled *c = nb__calloc(1, sizeof *c);
    size_t n = (size_t)(g->n ? g->n : 1);
    if (c && (!(c->param_src = nb__malloc(sizeof(int32_t) * n)) || !(c->leaf = nb__malloc(sizeof(int32_t) * n)))) {
        nb__free(c->param_src);
        nb__free(c);
        c = NULL;
    }
    if (!c) {
        nb__error(NB_ERR_OOM, "graph_compile: out of memory compiling graph '%s'", src->name);
        return NULL;
    }
    atomic_init(&c->refs, 1);
    atomic_init(&c->run.busy, false);
    c->src = nb_graph_retain(src);
    c->g = nb_graph_retain(g);
    c->dev = dev;
    for (int id = 0; id < g->n; id++) {
        c->param_src[id] = -1;
        if (g->nodes[id].kind != NB_GNODE_OP) c->leaf[c->nleaf++] = id;
        if (g->nodes[id].kind != NB_GNODE_PARAM) continue;
        for (int j = 0; j < src->n && c->param_src[id] < 0; j++)
            if (src->nodes[j].kind == NB_GNODE_PARAM && !strcmp(src->nodes[j].name, g->nodes[id].name))
                c->param_src[id] = j;
    }
    return c;
}

/* ---- the cache ---- */

static void drop_entry(size_t i) {
    nb_compiled_release(tl_cache.e[i].c);
    tl_cache.e[i] = tl_cache.e[--tl_cache.n];
}

static void evict_to(size_t cap) {
    while (tl_cache.n > cap) {
        size_t lru = 0;
        for (size_t i = 1; i < tl_cache.n; i++)
            if (tl_cache.e[i].used < tl_cache.e[lru].used) lru = i;
        drop_entry(lru);
        tl_cache.evictions++;
    }
}

/* Insert c (the cache takes a reference); a full cache evicts its least recently used plan. */
static void cache_insert(uint64_t hash, nb_compiled *c) {
    if (tl_cache.n == tl_cache.alloc) {
        size_t na = tl_cache.alloc ? 2 * tl_cache.alloc : 8;
        cache_entry *e = nb__realloc(tl_cache.e, sizeof *e * na);
        if (!e) return; /* not cached: the plan still works */
        tl_cache.e = e;
        tl_cache.alloc = na;
    }
    nb__at_thread_exit(nb_compile_cache_clear); /* a thread's plans go when it exits */
    evict_to(capacity() - 1);
    tl_cache.e[tl_cache.n++] = (cache_entry){hash, ++tl_cache.tick, nb_compiled_retain(c)};
}

/* Params and constants must live on dev (inputs are checked at each run). */
static bool values_on(nb_graph *g, nb_device dev) {
    for (int i = 0; i < g->n; i++) {
        const nb_gnode *nd = &g->nodes[i];
        if (nd->value && !nb__same_device(nd->value->storage->device, dev)) {
            if (nd->name)
                nb__error(NB_ERR_DEVICE, "graph_compile: graph '%s': param '%s' is on another device than the one "
                          "compiled for", g->name, nd->name);
            else /* C scalars are captured on the device of the graph's inputs (the CPU) */
                nb__error(NB_ERR_DEVICE, "graph_compile: graph '%s': constant (node %d%s) is on another device than "
                          "the one compiled for", g->name, i, nd->value->weak ? ", a C scalar" : "");
            return false;
        }
    }
    return true;
}

bool nb__env_fuse(void) { return nb__env_switch("NB_FUSE", "fusing"); }

/* Whether plans fuse: NB_FUSE, read at the first compile. */
static bool fusing(void) {
    static int cached = -1; /* -1: not read yet */
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) __atomic_store_n(&cached, v = nb__env_fuse(), __ATOMIC_RELAXED);
    return v;
}

const char *nb_fusion_mode(void) {
    if (!fusing()) return "off (NB_FUSE=0): compiled plans run op by op";
    const nb_backend *be = nb_backend_for(NB_CPU);
    return be->fused_mode ? be->fused_mode() : "off: the CPU backend does not fuse (compiled plans run op by op)";
}

nb_compiled *nb_graph_compile(nb_graph *g, nb_device dev) {
    const char *op = "graph_compile";
    if (!g) {
        nb__error(NB_ERR_NULL, "%s: graph is NULL", op);
        return NULL;
    }
    if (g->building) {
        nb__error(NB_ERR_STATE, "%s: graph '%s' is still being built (call nb_graph_end first)", op, g->name);
        return NULL;
    }
    if (!nb_backend_for(dev)) return NULL;
    if (nb__graph_verify(g) != NB_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", nb_last_message());
        nb__error_set(NB_ERR_STATE, "%s: graph '%s' is malformed: %s", op, g->name, msg);
        return NULL;
    }
    uint64_t h = nb__graph_hash(g);
    for (size_t i = 0; i < tl_cache.n; i++) {
        cache_entry *e = &tl_cache.e[i];
        if (e->hash != h || !nb__same_device(e->c->dev, dev) || !nb__graph_equal(e->c->src, g)) continue;
        tl_cache.hits++;
        e->used = ++tl_cache.tick;
        if (e->c->src == g) return nb_compiled_retain(e->c);
        /* an equal graph of its own (its params may be other tensors): the same optimized graph
         * and schedule, with g's params as the defaults */
        nb_compiled *c = plan_new(g, e->c->g, dev);
        if (c && nb__schedule_copy(&c->s, &e->c->s, e->c->g->n) != NB_OK) {
            nb_compiled_release(c);
            return NULL;
        }
        if (c) c->passes = e->c->passes;
        return c;
    }
    tl_cache.misses++;
    if (!values_on(g, dev)) return NULL;
    nb_graph *opt = NULL;
    nb_pass_stats ps;
    if (nb__graph_optimize(g, &opt, NULL, &ps) != NB_OK) return NULL;
    nb_compiled *c = plan_new(g, opt, dev);
    nb_graph_release(opt);
    if (!c) return NULL;
    c->passes = ps;
    const nb_backend *be = nb_backend_for(dev);
    if (nb__schedule_build(c->g, be->fused && fusing(), &c->s) != NB_OK) {
        nb_compiled_release(c);
        return NULL;
    }
    cache_insert(h, c);
    return c;
}

nb_compile_cache_stats nb_compile_cache_stats_get(void) {
    return (nb_compile_cache_stats){tl_cache.hits, tl_cache.misses, tl_cache.evictions, tl_cache.n, capacity()};
}

void nb_compile_cache_clear(void) {
    while (tl_cache.n) drop_entry(tl_cache.n - 1);
    nb__free(tl_cache.e);
    tl_cache.e = NULL;
    tl_cache.alloc = 0;
    tl_cache.tick = tl_cache.hits = tl_cache.misses = tl_cache.evictions = 0;
}

nb_status nb_compile_cache_set_capacity(size_t cap) {
    if (cap == 0) return nb__error_set(NB_ERR_ARG, "compile_cache_set_capacity: capacity must be >= 1, got 0");
    tl_cache.capacity = cap;
    evict_to(cap);
    return NB_OK;
}
