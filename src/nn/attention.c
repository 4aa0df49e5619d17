/*
 * attention.c — the multi-head attention layer (N1): q, k, v and output
 * projections as Linear children around nb_scaled_dot_product_attention,
 * with grouped-query heads and the layer's own mask kind.
 */
#include "nn_internal.h"

/* x [B, L, H·D] -> [B, H, L, D] */
static nb_tensor *heads_first(nb_tensor *x, int64_t h) {
    if (!x) return NULL; /* the projection's error stands */
    const int64_t *s = nb_shape(x);
    return nb_permute(nb_reshape(x, (int64_t[]){s[0], s[1], h, s[2] / h}, 4), (int[]){0, 2, 1, 3}, 4);
}

static nb_tensor *mha_forward(nb_module *m, nb_tensor *x) {
    if (nb_ndim(x) != 3) {
        nb__error(NB_ERR_SHAPE, "MultiheadAttention: expected x [B, L, E], got %s", NB_SHAPE_STR(x));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    nb_tensor *q = heads_first(nb_module_forward(m->child[0], x), m->cfg.attn.heads);
    nb_tensor *k = heads_first(nb_module_forward(m->child[1], x), m->cfg.attn.kv_heads);
    nb_tensor *v = heads_first(nb_module_forward(m->child[2], x), m->cfg.attn.kv_heads);
    nb_tensor *y = q && k && v ? nb_scaled_dot_product_attention(q, k, v, m->cfg.attn.opts) : NULL;
    nb_tensor *merged = y ? nb_flatten(nb_permute(y, (int[]){0, 2, 1, 3}, 4), 2, 3) : NULL; /* [B, L, E] */
    NB_COMPOSITE_RETURN(merged ? nb_module_forward(m->child[3], merged) : NULL);
}

nb_module *nb_nn_multi_head_attention(int64_t embed_dim, int64_t heads, int64_t kv_heads, nb_attention_opts opts,
                                      bool bias) {
    const char *kind = "MultiheadAttention";
    if (embed_dim < 1 || heads < 1 || kv_heads < 1 || embed_dim % heads || heads % kv_heads) {
        nb__error_set(NB_ERR_ARG, "%s: %lld heads must divide embed_dim %lld and be a multiple of %lld key/value "
                      "heads (all >= 1)", kind, (long long)heads, (long long)embed_dim, (long long)kv_heads);
        return NULL;
    }
    nb__error_frame fr;
    nb__own_begin(&fr);
    if (!nb__attention_opts_ok(kind, &opts)) { /* a constructor: its own error, not a pending one */
        nb__own_end(&fr, kind, nb_last_status());
        return NULL;
    }
    nb__own_end(&fr, kind, NB_OK);
    if (opts.mask == NB_ATTN_MASK_KEY_PADDING || opts.mask == NB_ATTN_MASK_BOOL || opts.mask == NB_ATTN_MASK_BIAS) {
        nb__error_set(NB_ERR_ARG, "%s: a layer's mask is none, causal or sliding (it holds no mask tensor)", kind);
        return NULL;
    }
    nb_module *m = nb__module_new(kind, mha_forward);
    if (!m) return NULL;
    m->cfg.attn.heads = heads;
    m->cfg.attn.kv_heads = kv_heads;
    m->cfg.attn.opts = opts;
    int64_t kv = embed_dim / heads * kv_heads;
    const char *names[4] = {"q_proj", "k_proj", "v_proj", "out_proj"};
    const int64_t outs[4] = {embed_dim, kv, kv, embed_dim};
    for (int i = 0; i < 4; i++) {
        nb_module *lin = nb_nn_linear(embed_dim, outs[i], bias);
        if (!lin || nb__module_add_child(m, names[i], lin) != NB_OK) {
            nb_module_free(lin);
            nb_module_free(m);
            return NULL;
        }
    }
    return m;
}
