/*
 * vjp_attention.c — the derivative rule of the ATTENTION kernel: the usual softmax-attention
 * adjoints (Vaswani et al. 2017; FlashAttention's backward, Dao et al. 2022, §B.2): dV = Pᵀ g,
 * dP = g Vᵀ, dS = P ⊙ (dP − rowsum(dP ⊙ P)), dQ = scale · dS K, dK = scale · dSᵀ Q — the query
 * heads of a key head summed (grouped-query).  In an eager backward pass that records nothing
 * (no create_graph) the tiled ATTENTION_BACKWARD kernel computes them from the forward's row
 * logsumexps without an [Lq, Lk] tensor; elsewhere (graphs, transforms, create_graph: where the
 * gradient must itself be differentiable) they are written with public ops, the probabilities
 * recomputed from q and k.
 */
#include "vjp.h"

static nb_tensor *mT(nb_tensor *t) { return nb_transpose(t, -2, -1); }

nb_status nb__vjp_attention(const nb_node *n, nb_tensor *g, nb_tensor **gin) {
    nb_tensor *q = n->in[0], *k = n->in[1], *v = n->in[2];
    if (!nb__interp_top() && !nb__should_record((nb_tensor *[]){q, k, v, g}, 4)) {
        nb_tensor *o[NB_MAX_OUTS] = {NULL}, *g0 = nb_cast(g, nb_dtype_of(q)); /* lse: n->in[3] */
        nb_attrs a = n->attrs;
        if (!g0 || nb__apply_n(NB_OP_ATTENTION_BACKWARD, (nb_tensor *[]){q, k, v, n->out, g0, n->in[3]}, 6, &a, o) < 0)
            return nb_last_status();
        for (int i = 0; i < 3; i++) gin[i] = nb__own(o[i]);
        return NB_OK;
    }
    const int64_t *qs = nb_shape(q), *ks = nb_shape(k), *vs = nb_shape(v);
    int64_t b = qs[0], hq = qs[1], lq = qs[2], d = qs[3], hkv = ks[1], lk = ks[2], dv = vs[3];
    int64_t rows = nb_dim_mul(hq / hkv, lq); /* the query heads of a key head, side by side */
    double scale = n->attrs.f[0];
    nb_attention_opts o = {.mask = (nb_attn_mask)n->attrs.sub, .window = n->attrs.i[0], .scale = scale};
    nb_tensor *p = nb__attention_probs(q, k, &o);
    if (!p) return nb_last_status();
    nb_tensor *pg = nb_reshape(p, (int64_t[]){b, hkv, rows, lk}, 4), *gg = nb_reshape(g, (int64_t[]){b, hkv, rows, dv}, 4);
    gin[2] = nb_matmul(mT(pg), gg);
    nb_tensor *dp = nb_reshape(nb_matmul(gg, mT(v)), (int64_t[]){b, hq, lq, lk}, 4);
    nb_tensor *ds = nb_mul(p, nb_sub(dp, nb_sum(nb_mul(dp, p), (int[]){-1}, 1, true)));
    nb_tensor *dsg = nb_reshape(ds, (int64_t[]){b, hkv, rows, lk}, 4);
    gin[0] = nb__attention_scaled(nb_reshape(nb_matmul(dsg, k), (int64_t[]){b, hq, lq, d}, 4), q, scale);
    gin[1] = nb__attention_scaled(nb_matmul(mT(dsg), nb_reshape(q, (int64_t[]){b, hkv, rows, d}, 4)), q, scale);
    return NB_OK;
}
