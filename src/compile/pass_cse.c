/*
 * pass_cse.c — common-subexpression elimination (passes.h): an open-
 * addressing hash table of the new graph's nodes, keyed by what a node
 * computes (op, attrs field by field, inputs already merged, output
 * metadata; for constants dtype, shape, weak flag, device, layout and
 * bytes).  A node equal to one already in the new graph is replaced by it;
 * inputs, params and random draws are never merged.  Siblings merge too:
 * CONVOLUTION_BACKWARD nodes of one output each (dx, dwi, db: what
 * differentiation makes, vjp_conv.c) that read the same values with the
 * same geometry become one node with all their outputs, the pass over the
 * images that eager training makes (each output's bits do not depend on
 * which others are computed with it).
 */
#include "rewrite.h"

#include <string.h>

typedef struct cse_ctx {
    int32_t *table;   /* new-graph node ids, -1 for an empty slot; cap slots (a power of two) */
    uint64_t *hash;   /* the hash of the node in each slot */
    size_t cap;
    int32_t *first;   /* g node -> the first of its siblings (itself when it has none), -1: no sibling kind */
    int32_t *merged;  /* g node (a first sibling) -> the new graph's node holding every sibling's output */
} cse_ctx;

/* ---- hashing ---- */

/* Hash mixing: one 64-bit word, a byte string, a metadata record, an attrs record field by field. */
static uint64_t mix(uint64_t h, uint64_t v) {
    h = (h ^ v) * 0x9e3779b97f4a7c15u;
    return h ^ (h >> 29);
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) h = (h ^ c[i]) * 0x100000001b3u; /* FNV-1a step */
    return mix(h, n);
}

static uint64_t mix_meta(uint64_t h, const nb_meta *m) {
    h = mix(h, (uint64_t)m->dtype);
    h = mix(h, (uint64_t)m->ndim);
    h = mix(h, m->weak);
    for (int d = 0; d < m->ndim; d++) h = mix(h, (uint64_t)m->shape[d]);
    return h;
}

static uint64_t mix_attrs(uint64_t h, const nb_attrs *a) {
    for (size_t k = 0; k < sizeof a->f / sizeof a->f[0]; k++) {
        uint64_t bits;
        memcpy(&bits, &a->f[k], sizeof bits);
        h = mix(h, bits);
    }
    for (size_t k = 0; k < sizeof a->i / sizeof a->i[0]; k++) h = mix(h, (uint64_t)a->i[k]);
    for (size_t k = 0; k < sizeof a->axes / sizeof a->axes[0]; k++) h = mix(h, (uint64_t)a->axes[k]);
    for (size_t k = 0; k < sizeof a->shape / sizeof a->shape[0]; k++) h = mix(h, (uint64_t)a->shape[k]);
    h = mix(h, (uint64_t)a->ni);
    h = mix(h, (uint64_t)a->naxes);
    h = mix(h, a->keepdim);
    h = mix(h, (uint64_t)a->sub);
    return mix(h, (uint64_t)a->shape_ndim);
}

/* Field by field: the record has padding, which memcmp of the whole would compare. */
static bool attrs_equal(const nb_attrs *a, const nb_attrs *b) {
    return !memcmp(a->f, b->f, sizeof a->f) && !memcmp(a->i, b->i, sizeof a->i) &&
           !memcmp(a->axes, b->axes, sizeof a->axes) && !memcmp(a->shape, b->shape, sizeof a->shape) &&
           a->ni == b->ni && a->naxes == b->naxes && a->keepdim == b->keepdim && a->sub == b->sub &&
           a->shape_ndim == b->shape_ndim;
}

/* The hash of what nd computes (the fields node_equal compares). */
static uint64_t node_hash(const nb_gnode *nd) {
    uint64_t h = mix(0x243f6a8885a308d3u, (uint64_t)nd->kind);
    for (int j = 0; j < nd->n_out; j++) h = mix_meta(h, &nd->out[j]);
    if (nd->kind == NB_GNODE_CONST) {
        const nb_tensor *t = nd->value;
        h = mix(h, (uint64_t)t->storage->device.type);
        h = mix(h, (uint64_t)t->storage->device.index);
        size_t es = nb_dtype_size(t->dtype);
        for (int64_t k = 0, n = nb__numel(t); k < n; k++) h = mix_bytes(h, nb__elem_at(t, k), es);
        return h;
    }
    h = mix(h, (uint64_t)nd->op);
    h = mix(h, (uint64_t)nd->n_in);
    for (int i = 0; i < nd->n_in; i++) h = mix(h, ((uint64_t)(uint32_t)nd->in[i].node << 32) | (uint32_t)nd->in[i].out);
    return mix_attrs(h, &nd->attrs);
}

/* Two constants a later node cannot tell apart: the same elements, device and layout (the
 * strides of axes longer than 1: a layout can decide a reduction's order, passes.h). */
static bool const_equal(const nb_tensor *a, const nb_tensor *b) {
    if (a == b) return true;
    if (!nb__same_device(a->storage->device, b->storage->device)) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 && a->stride[d] != b->stride[d]) return false;
    size_t es = nb_dtype_size(a->dtype);
    for (int64_t k = 0, n = nb__numel(a); k < n; k++)
        if (memcmp(nb__elem_at(a, k), nb__elem_at(b, k), es)) return false;
    return true;
}

/* Whether the new-graph node e computes what nd (inputs mapped) computes. */
static bool node_equal(const nb_gnode *e, const nb_gnode *nd) {
    if (e->kind != nd->kind || e->n_out != nd->n_out) return false;
    for (int j = 0; j < nd->n_out; j++)
        if (!nb__meta_equal(&e->out[j], &nd->out[j])) return false;
    if (nd->kind == NB_GNODE_CONST) return const_equal(e->value, nd->value);
    if (e->op != nd->op || e->n_in != nd->n_in || !attrs_equal(&e->attrs, &nd->attrs)) return false;
    for (int i = 0; i < nd->n_in; i++)
        if (e->in[i].node != nd->in[i].node || e->in[i].out != nd->in[i].out) return false;
    return true;
}

/* Nodes CSE may merge: constants and pure ops (every kind but RANDOM, which draws afresh). */
static bool mergeable(const nb_gnode *nd) {
    if (nd->kind == NB_GNODE_CONST) return true;
    return nd->kind == NB_GNODE_OP && nb__ops[nd->op].kind != NB_KIND_RANDOM;
}

/* ---- siblings ---- */

/* The output bit of a one-output CONVOLUTION_BACKWARD (sub bits 0-2: dx, dwi, db), else 0. */
static int sibling_bit(const nb_gnode *nd) {
    if (nd->kind != NB_GNODE_OP || nd->op != NB_OP_CONVOLUTION_BACKWARD) return 0;
    int bits = nd->attrs.sub & 7;
    return bits && !(bits & (bits - 1)) ? bits : 0;
}

/* Siblings: one output bit each, different ones, the same inputs, and attrs equal but for those bits. */
static bool siblings(const nb_gnode *a, const nb_gnode *b) {
    if (!sibling_bit(a) || !sibling_bit(b) || sibling_bit(a) == sibling_bit(b) || a->n_in != b->n_in) return false;
    for (int i = 0; i < a->n_in; i++)
        if (a->in[i].node != b->in[i].node || a->in[i].out != b->in[i].out) return false;
    nb_attrs x = a->attrs, y = b->attrs;
    x.sub &= ~7;
    y.sub &= ~7;
    return attrs_equal(&x, &y);
}

/* first[id] for every node of g (the graphs hold a few such nodes per convolution: a quadratic
 * search among them). */
static void find_siblings(const nb_graph *g, int32_t *first) {
    for (int32_t id = 0; id < g->n; id++) {
        first[id] = sibling_bit(&g->nodes[id]) ? id : -1;
        for (int32_t j = 0; j < id && first[id] == id; j++)
            if (first[j] == j && siblings(&g->nodes[j], &g->nodes[id])) first[id] = j;
    }
}

/* Node id (inputs mapped in nd) of g with siblings: the first appends their merged node, outputs
 * in bit order; each stands for its output of it.  *done when id has siblings. */
static nb_status merge_sibling(nb_rw *rw, int32_t id, const nb_gnode *nd, bool *done) {
    cse_ctx *c = rw->ctx;
    int32_t f = c->first[id];
    int bits = 0;
    const nb_gnode *by_bit[8] = {NULL};
    for (int32_t j = f; f >= 0 && j < rw->src->n; j++)
        if (c->first[j] == f) {
            bits |= sibling_bit(&rw->src->nodes[j]);
            by_bit[sibling_bit(&rw->src->nodes[j])] = &rw->src->nodes[j];
        }
    if (f < 0 || bits == sibling_bit(nd)) return NB_OK; /* no sibling */
    *done = true;
    if (id == f) {
        nb_gnode m = *nd;
        m.attrs.sub = (nd->attrs.sub & ~7) | bits;
        m.n_out = 0;
        for (int bit = 1; bit <= 4; bit <<= 1)
            if (bits & bit) m.out[m.n_out++] = by_bit[bit]->out[0];
        if ((c->merged[f] = nb__rw_append(rw, &m, id)) < 0) return nb_last_status();
    } else
        rw->st->cse++;
    int k = 0; /* the outputs of the bits below id's */
    for (int bit = 1; bit < sibling_bit(nd); bit <<= 1) k += (bits & bit) != 0;
    nb__rw_forward(rw, id, 0, (nb_gval){c->merged[f], k});
    return NB_OK;
}

/* The pass's visit: a mergeable node equal to one in the table stands for it (unless both hold
 * storage of graph outputs: distinct outputs stay distinct tensors); any other node is kept, and a
 * mergeable one entered in the table. */
static nb_status cse_visit(nb_rw *rw, int32_t id, nb_gnode *nd) {
    cse_ctx *c = rw->ctx;
    size_t slot = 0;
    uint64_t h = 0;
    bool done = false;
    nb_status ms = merge_sibling(rw, id, nd, &done);
    if (ms != NB_OK || done) return ms;
    if (mergeable(nd)) {
        h = node_hash(nd);
        for (slot = (size_t)h & (c->cap - 1); c->table[slot] >= 0; slot = (slot + 1) & (c->cap - 1)) {
            int32_t e = c->table[slot];
            if (c->hash[slot] != h || !node_equal(&rw->dst->nodes[e], nd)) continue;
            if (rw->out_alias[id] && rw->dst_alias[e]) break; /* two outputs' storage: keep nd */
            for (int j = 0; j < nd->n_out; j++) nb__rw_forward(rw, id, j, (nb_gval){e, j});
            rw->st->cse++;
            return NB_OK;
        }
    }
    nb_status st = nb__rw_keep(rw, id, nd);
    if (st != NB_OK) return st;
    int32_t nid = rw->dst->n - 1;
    if (mergeable(nd) && c->table[slot] < 0) {
        c->table[slot] = nid;
        c->hash[slot] = h;
    }
    return NB_OK;
}

nb_status nb__pass_cse(const nb_graph *g, nb_graph **out, int32_t **origin, nb_pass_stats *st) {
    const char *pass = "optimize_cse";
    if (!g) return nb__rw_run(pass, g, cse_visit, NULL, out, origin, st); /* reports the NULL */
    cse_ctx c = {.cap = 16};
    while (c.cap < 2 * (size_t)g->n) c.cap *= 2; /* load <= 1/2: at most g->n entries */
    c.table = nb__malloc(sizeof *c.table * c.cap);
    c.hash = nb__malloc(sizeof *c.hash * c.cap);
    c.first = nb__malloc(sizeof *c.first * (size_t)(g->n + 1));
    c.merged = nb__malloc(sizeof *c.merged * (size_t)(g->n + 1));
    nb_status s;
    if (!c.table || !c.hash || !c.first || !c.merged) s = nb__rw_oom(pass, g, out, origin, st);
    else {
        memset(c.table, 0xff, sizeof *c.table * c.cap);
        find_siblings(g, c.first);
        s = nb__rw_run(pass, g, cse_visit, &c, out, origin, st);
    }
    nb__free(c.table);
    nb__free(c.hash);
    nb__free(c.first);
    nb__free(c.merged);
    return s;
}
