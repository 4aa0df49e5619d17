/*
 * fuse_kernel.c — the program of one fused kernel (backend/fused.h) from a
 * group the fusion pass (fuse.c) formed: each member node becomes an
 * instruction, with the casts the eager kernel makes on its operands; the
 * values the group reads from outside become loads (aligned with the
 * domain's trailing axes, or with its outer ones for a reduction's result
 * without keepdim), each with its level (UNIFORM, ROW, FULL); the values
 * read outside the group become outputs.
 */
#include "compile.h"

#include <string.h>

/* A kernel under construction: values are loads (0 ..) and instructions, numbered NB_FK_MAX_IO + j
 * until the loads are all known (final_id renumbers them). */
typedef struct kbuild {
    const nb_graph *g;
    const nb_fdomain *G;
    nb_fkernel k;
    int32_t load_slot[NB_FK_MAX_IO], out_slot[NB_FK_MAX_IO];
    bool load_outer[NB_FK_MAX_IO], out_outer[NB_FK_MAX_IO];
    nb_dtype in_dtype[NB_FK_MAX_IO];
    nb_flevel in_level[NB_FK_MAX_IO];
    nb_finstr instr[NB_FK_MAX_INSTR];
    int16_t out_val[NB_FK_MAX_IO];
    int nmember;
    int32_t member[NB_FUSE_MAX_MEMBERS];
    int16_t member_val[NB_FUSE_MAX_MEMBERS];
    bool full; /* a limit was hit */
} kbuild;

/* The level of a load of metadata m in domain G, aligned with its trailing axes or (outer) with
 * its outer ones: one element, constant along the reduced axes, or varying along them. */
static nb_flevel load_level(const nb_fdomain *G, const nb_meta *m, bool outer) {
    if (nb__dims_all_one(m->shape, m->ndim)) return NB_FL_UNIFORM;
    if (G->nred == 0 || outer) return G->nred ? NB_FL_ROW : NB_FL_FULL;
    int d0 = G->lead ? 0 : G->nd - G->nred;
    for (int d = d0; d < d0 + G->nred; d++) {
        int j = d - (G->nd - m->ndim);
        if (j >= 0 && m->shape[j] != 1) return NB_FL_FULL;
    }
    return NB_FL_ROW;
}

static int add_instr(kbuild *b, nb_finstr I) {
    if (b->k.ninstr == NB_FK_MAX_INSTR) {
        b->full = true;
        return 0;
    }
    b->instr[b->k.ninstr] = I;
    return NB_FK_MAX_IO + b->k.ninstr++; /* provisional id: loads are numbered once all are known */
}

/* The kernel value of graph value v as read by a member (outer: aligned with the outer axes). */
static int operand(kbuild *b, nb_gval v, bool outer) {
    int32_t s = nb__slot(v);
    for (int i = 0; i < b->nmember; i++)
        if (nb__slot((nb_gval){b->member[i], 0}) == s) return b->member_val[i];
    const nb_meta *m = nb__gval_meta(b->g, v);
    nb_flevel lv = load_level(b->G, m, outer);
    if (lv == NB_FL_UNIFORM) outer = false;
    for (int j = 0; j < b->k.nin; j++)
        if (b->load_slot[j] == s && b->load_outer[j] == outer) return j;
    if (b->k.nin == NB_FK_MAX_IO) {
        b->full = true;
        return 0;
    }
    int j = b->k.nin++;
    b->load_slot[j] = s;
    b->load_outer[j] = outer;
    b->in_dtype[j] = m->dtype;
    b->in_level[j] = lv;
    return j;
}

static nb_flevel level_of(const kbuild *b, int v) {
    return v < NB_FK_MAX_IO ? b->in_level[v] : b->instr[v - NB_FK_MAX_IO].level;
}
static nb_dtype dtype_of(const kbuild *b, int v) {
    return v < NB_FK_MAX_IO ? b->in_dtype[v] : b->instr[v - NB_FK_MAX_IO].dtype;
}

/* v converted to dt (an existing conversion reused). */
static int as_dtype(kbuild *b, int v, nb_dtype dt) {
    if (dtype_of(b, v) == dt) return v;
    for (int j = 0; j < b->k.ninstr; j++)
        if (b->instr[j].op == NB_OP_CAST && b->instr[j].in[0] == v && b->instr[j].dtype == dt) return NB_FK_MAX_IO + j;
    return add_instr(b, (nb_finstr){.op = NB_OP_CAST, .level = level_of(b, v), .dtype = dt, .in = {(int16_t)v, -1, -1}});
}

/* Member nd's instruction. */
static int member_instr(kbuild *b, const nb_gnode *nd) {
    const nb_meta *m = &nd->out[0];
    bool outer = nb__fdomain_outer_row(b->G, m->shape, m->ndim);
    nb_finstr I = {.op = nd->op, .dtype = m->dtype, .in = {-1, -1, -1}, .p0 = nd->attrs.f[0], .p1 = nd->attrs.f[1]};
    /* a reduction's input has the domain's shape: aligned with its trailing axes */
    int x = operand(b, nd->in[0], outer && nb__ops[nd->op].kind != NB_KIND_REDUCE);
    switch (nb__ops[nd->op].kind) {
    case NB_KIND_UNARY: I.in[0] = (int16_t)(nd->op == NB_OP_LOGICAL_NOT ? x : as_dtype(b, x, m->dtype)); break;
    case NB_KIND_BINARY:
        I.in[0] = (int16_t)as_dtype(b, x, m->compute);
        I.in[1] = (int16_t)as_dtype(b, operand(b, nd->in[1], outer), m->compute);
        break;
    case NB_KIND_WHERE:
        I.in[0] = (int16_t)x;
        I.in[1] = (int16_t)as_dtype(b, operand(b, nd->in[1], outer), m->dtype);
        I.in[2] = (int16_t)as_dtype(b, operand(b, nd->in[2], outer), m->dtype);
        break;
    case NB_KIND_REDUCE: I.in[0] = (int16_t)x; break;
    default: /* cast, contiguous, detach: a conversion (to the same dtype: a copy) */
        I.op = NB_OP_CAST;
        I.in[0] = (int16_t)x;
        break;
    }
    I.level = NB_FL_UNIFORM;
    for (int i = 0; i < 3; i++)
        if (I.in[i] >= 0 && level_of(b, I.in[i]) > I.level) I.level = level_of(b, I.in[i]);
    if (nb__ops[nd->op].kind == NB_KIND_REDUCE) I.level = NB_FL_ROW;
    return add_instr(b, I);
}

/* Renumber provisional instruction ids (NB_FK_MAX_IO + j) to nin + j. */
static int16_t final_id(const kbuild *b, int v) { return (int16_t)(v < NB_FK_MAX_IO ? v : v - NB_FK_MAX_IO + b->k.nin); }

static nb_status emit_kernel(kbuild *b, const bool *ext, nb_fstep *f) {
    for (int j = 0; j < b->k.ninstr; j++)
        for (int i = 0; i < 3; i++)
            if (b->instr[j].in[i] >= 0) b->instr[j].in[i] = final_id(b, b->instr[j].in[i]);
    memset(f, 0, sizeof *f);
    f->k.nin = b->k.nin;
    f->k.ninstr = b->k.ninstr;
    f->k.nred = b->G->nred;
    f->k.lead = b->G->lead;
    f->nd = b->G->nd;
    memcpy(f->dom, b->G->dom, sizeof f->dom);
    for (int i = 0; i < b->nmember; i++) {
        int32_t s = nb__slot((nb_gval){b->member[i], 0});
        if (!ext[s]) continue;
        const nb_meta *m = &b->g->nodes[b->member[i]].out[0];
        if (f->k.nout + f->k.nin == NB_FK_MAX_IO) return NB_ERR_UNSUPPORTED;
        int o = f->k.nout++;
        b->out_val[o] = final_id(b, b->member_val[i]);
        b->out_slot[o] = s;
        b->out_outer[o] = nb__fdomain_outer_row(b->G, m->shape, m->ndim);
    }
    size_t ni = (size_t)f->k.nin, no = (size_t)f->k.nout, nm = (size_t)b->nmember;
    f->k.in_dtype = nb__malloc(sizeof(nb_dtype) * (ni + 1));
    f->k.in_level = nb__malloc(sizeof(nb_flevel) * (ni + 1));
    f->k.instr = nb__malloc(sizeof(nb_finstr) * (size_t)(f->k.ninstr + 1));
    f->k.out_val = nb__malloc(sizeof(int16_t) * (no + 1));
    f->load_slot = nb__malloc(sizeof(int32_t) * (ni + 1));
    f->out_slot = nb__malloc(sizeof(int32_t) * (no + 1));
    f->load_outer = nb__malloc(sizeof(bool) * (ni + 1));
    f->out_outer = nb__malloc(sizeof(bool) * (no + 1));
    f->member = nb__malloc(sizeof(int32_t) * nm);
    f->nmember = b->nmember;
    if (!f->k.in_dtype || !f->k.in_level || !f->k.instr || !f->k.out_val || !f->load_slot || !f->out_slot ||
        !f->load_outer || !f->out_outer || !f->member) {
        nb__fstep_free(f);
        return nb__error(NB_ERR_OOM, "graph_compile: out of memory for a fused kernel");
    }
    memcpy(f->k.in_dtype, b->in_dtype, sizeof(nb_dtype) * ni);
    memcpy(f->k.in_level, b->in_level, sizeof(nb_flevel) * ni);
    memcpy(f->k.instr, b->instr, sizeof(nb_finstr) * (size_t)f->k.ninstr);
    memcpy(f->k.out_val, b->out_val, sizeof(int16_t) * no);
    memcpy(f->load_slot, b->load_slot, sizeof(int32_t) * ni);
    memcpy(f->out_slot, b->out_slot, sizeof(int32_t) * no);
    memcpy(f->load_outer, b->load_outer, sizeof(bool) * ni);
    memcpy(f->out_outer, b->out_outer, sizeof(bool) * no);
    memcpy(f->member, b->member, sizeof(int32_t) * nm);
    return NB_OK;
}

nb_status nb__fkernel_build(const nb_graph *g, const int32_t *members, int n, const nb_fdomain *d, const bool *ext,
                           nb_fstep *f) {
    kbuild b = {.g = g, .G = d, .nmember = n};
    memcpy(b.member, members, sizeof(int32_t) * (size_t)n);
    /* in id order, a member's inputs among the members are computed before it */
    for (int i = 0; i < b.nmember && !b.full; i++) b.member_val[i] = (int16_t)member_instr(&b, &g->nodes[b.member[i]]);
    if (b.full) return NB_ERR_UNSUPPORTED;
    return emit_kernel(&b, ext, f);
}

void nb__fstep_free(nb_fstep *f) {
    nb__free(f->k.in_dtype);
    nb__free(f->k.in_level);
    nb__free(f->k.instr);
    nb__free(f->k.out_val);
    nb__free(f->load_slot);
    nb__free(f->out_slot);
    nb__free(f->load_outer);
    nb__free(f->out_outer);
    nb__free(f->member);
    memset(f, 0, sizeof *f);
}

