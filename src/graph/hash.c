/*
 * hash.c — structural identity of graphs for the compile cache: a hash and
 * an equality over the same fields (node kinds, ops, attrs field by field,
 * wiring, output metadata, input / param names and metadata, constants by
 * the bytes of their elements, and the named outputs).  Param values are
 * not part of it: they are read at every run.
 */
#include "graph.h"

#include <string.h>

#define FNV_PRIME 0x100000001b3ULL

static void mix(uint64_t *h, const void *p, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ c[i]) * FNV_PRIME;
}
static void mix_i64(uint64_t *h, int64_t v) { mix(h, &v, sizeof v); }
static void mix_str(uint64_t *h, const char *s) {
    if (s) mix(h, s, strlen(s) + 1);
    else mix_i64(h, -1);
}

const char *nb__elem_at(const nb_tensor *t, int64_t k) {
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (k % t->shape[d]) * t->stride[d];
        k /= t->shape[d];
    }
    return (const char *)t->storage->data + off * (int64_t)nb_dtype_size(t->dtype);
}

static void mix_value(uint64_t *h, const nb_tensor *t) {
    size_t es = nb_dtype_size(t->dtype);
    for (int64_t k = 0, n = nb__numel(t); k < n; k++) mix(h, nb__elem_at(t, k), es);
}

static bool value_equal(const nb_tensor *a, const nb_tensor *b) {
    if (a == b) return true;
    size_t es = nb_dtype_size(a->dtype);
    for (int64_t k = 0, n = nb__numel(a); k < n; k++)
        if (memcmp(nb__elem_at(a, k), nb__elem_at(b, k), es)) return false;
    return true;
}

static void mix_attrs(uint64_t *h, const nb_attrs *a) {
    mix(h, a->f, sizeof a->f);
    mix(h, a->i, sizeof a->i);
    mix(h, a->axes, sizeof a->axes);
    mix(h, a->shape, sizeof a->shape);
    int s[5] = {a->ni, a->naxes, a->keepdim, a->sub, a->shape_ndim};
    mix(h, s, sizeof s);
}

static bool attrs_equal(const nb_attrs *a, const nb_attrs *b) {
    return !memcmp(a->f, b->f, sizeof a->f) && !memcmp(a->i, b->i, sizeof a->i) &&
           !memcmp(a->axes, b->axes, sizeof a->axes) && !memcmp(a->shape, b->shape, sizeof a->shape) &&
           a->ni == b->ni && a->naxes == b->naxes && a->keepdim == b->keepdim && a->sub == b->sub &&
           a->shape_ndim == b->shape_ndim;
}

static void mix_meta(uint64_t *h, const nb_meta *m) {
    int s[3] = {(int)m->dtype, m->ndim, m->weak};
    mix(h, s, sizeof s);
    mix(h, m->shape, sizeof(int64_t) * (size_t)m->ndim);
}

static bool meta_equal(const nb_meta *a, const nb_meta *b) {
    return a->dtype == b->dtype && a->ndim == b->ndim && a->weak == b->weak &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

static void mix_node(uint64_t *h, const nb_gnode *nd) {
    int s[4] = {(int)nd->kind, nd->kind == NB_GNODE_OP ? (int)nd->op : -1, nd->n_in, nd->n_out};
    mix(h, s, sizeof s);
    if (nd->kind == NB_GNODE_OP) mix_attrs(h, &nd->attrs);
    mix(h, nd->in, sizeof(nb_gval) * (size_t)nd->n_in);
    for (int j = 0; j < nd->n_out; j++) mix_meta(h, &nd->out[j]);
    if (nd->kind == NB_GNODE_INPUT || nd->kind == NB_GNODE_PARAM) mix_str(h, nd->name);
    if (nd->kind == NB_GNODE_CONST) mix_value(h, nd->value);
}

static bool node_equal(const nb_gnode *a, const nb_gnode *b) {
    if (a->kind != b->kind || a->n_in != b->n_in || a->n_out != b->n_out) return false;
    if (a->kind == NB_GNODE_OP && (a->op != b->op || !attrs_equal(&a->attrs, &b->attrs))) return false;
    if (memcmp(a->in, b->in, sizeof(nb_gval) * (size_t)a->n_in)) return false;
    for (int j = 0; j < a->n_out; j++)
        if (!meta_equal(&a->out[j], &b->out[j])) return false;
    if ((a->kind == NB_GNODE_INPUT || a->kind == NB_GNODE_PARAM) && strcmp(a->name, b->name)) return false;
    return a->kind != NB_GNODE_CONST || value_equal(a->value, b->value);
}

uint64_t nb__graph_hash(nb_graph *g) {
    if (g->hash) return g->hash;
    uint64_t h = 0xcbf29ce484222325ULL;
    mix_i64(&h, g->n);
    for (int i = 0; i < g->n; i++) mix_node(&h, &g->nodes[i]);
    mix_i64(&h, g->n_outputs);
    for (int i = 0; i < g->n_outputs; i++) {
        mix(&h, &g->outputs[i], sizeof g->outputs[i]);
        mix_str(&h, g->output_names[i]);
    }
    g->hash = h ? h : 1; /* 0 means "not computed" */
    return g->hash;
}

bool nb__graph_equal(const nb_graph *a, const nb_graph *b) {
    if (a == b) return true;
    if (a->n != b->n || a->n_outputs != b->n_outputs || (a->hash && b->hash && a->hash != b->hash)) return false;
    for (int i = 0; i < a->n_outputs; i++)
        if (a->outputs[i].node != b->outputs[i].node || a->outputs[i].out != b->outputs[i].out ||
            strcmp(a->output_names[i], b->output_names[i]))
            return false;
    for (int i = 0; i < a->n; i++)
        if (!node_equal(&a->nodes[i], &b->nodes[i])) return false;
    return true;
}
