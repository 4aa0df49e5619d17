/*
 * attention.c — scaled dot-product attention (O9) with its mask kinds,
 * grouped-query heads, score scale and logit soft-cap, and rotary position
 * embeddings, built from the op table's ops (so they differentiate, trace and
 * batch like any composite).  Semantics follow
 * torch.nn.functional.scaled_dot_product_attention (the causal mask aligned
 * top-left; grouped-query heads as enable_gqa=True) except for rows whose
 * every key is masked: zeros here, NaN in torch's math path.
 */
#include "../backend/backend.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* A scoped rank-0 tensor of value v and dtype dt on like's device. */
static nb_tensor *value_on(const nb_tensor *like, double v, nb_dtype dt) {
    return nb__own(nb__full_on(NULL, 0, v, dt, like->storage->device));
}


/* The keys each query may see, as a bool broadcastable to [B, Hq, Lq, Lk]; NULL for NONE and
 * BIAS (then *bias may be set).  Errors name the op. */
static nb_tensor *allowed(const char *op, nb_tensor *q, const nb_tensor *k, const nb_attention_opts *o,
                          nb_tensor **bias, bool *bad) {
    int64_t b = q->shape[0], lq = q->shape[2], lk = k->shape[2];
    *bias = NULL;
    *bad = false;
    switch (o->mask) {
    case NB_ATTN_MASK_NONE: return NULL;
    case NB_ATTN_MASK_CAUSAL: return nb_le(nb__index_diff(q, lq, lk), 0.0);
    case NB_ATTN_MASK_SLIDING: {
        nb_tensor *d = nb__index_diff(q, lq, lk);
        return nb_logical_and(nb_le(d, 0.0), nb_gt(d, (double)-o->window));
    }
    case NB_ATTN_MASK_KEY_PADDING: {
        nb_tensor *m = o->mask_tensor;
        if (!m || (m->dtype == NB_BOOL ? m->ndim != 2 || m->shape[0] != b || m->shape[1] != lk
                                       : nb_dtype_is_float(m->dtype) || m->ndim != 1 || m->shape[0] != b)) {
            nb__error(NB_ERR_SHAPE, "%s: a key-padding mask is lengths [%lld] (integers) or a bool [%lld, %lld], got %s",
                      op, (long long)b, (long long)b, (long long)lk, m ? NB_SHAPE_STR(m) : "none");
            *bad = true;
            return NULL;
        }
        if (m->dtype == NB_BOOL) return nb_reshape(m, (int64_t[]){b, 1, 1, lk}, 4);
        nb_tensor *pos = nb__positions(q, lk, 0, NB_I64);
        return nb_lt(nb_reshape(pos, (int64_t[]){1, 1, 1, lk}, 4),
                     nb_reshape(nb_cast(m, NB_I64), (int64_t[]){b, 1, 1, 1}, 4));
    }
    case NB_ATTN_MASK_BOOL:
    case NB_ATTN_MASK_BIAS: {
        nb_tensor *m = o->mask_tensor;
        bool want_bool = o->mask == NB_ATTN_MASK_BOOL;
        if (!m || (want_bool ? m->dtype != NB_BOOL : !nb_dtype_is_float(m->dtype))) {
            nb__error(NB_ERR_DTYPE, "%s: the %s mask needs a %s tensor, got %s", op, want_bool ? "bool" : "bias",
                      want_bool ? "bool" : "float", m ? nb_dtype_name(m->dtype) : "none");
            *bad = true;
            return NULL;
        }
        const int64_t full[4] = {b, q->shape[1], lq, lk};
        bool fits = m->ndim <= 4;
        for (int d = 0; fits && d < m->ndim; d++) {
            int64_t md = m->shape[m->ndim - 1 - d], fd = full[3 - d];
            fits = md == 1 || md == fd;
        }
        if (!fits) {
            nb__error(NB_ERR_SHAPE, "%s: the %s mask %s does not broadcast to [B, Hq, Lq, Lk] = %s", op,
                      want_bool ? "bool" : "bias", NB_SHAPE_STR(m), NB_DIMS_STR(full, 4));
            *bad = true;
            return NULL;
        }
        if (o->mask == NB_ATTN_MASK_BIAS) {
            *bias = o->mask_tensor;
            return NULL;
        }
        return m;
    }
    default:
        nb__error(NB_ERR_ARG, "%s: unknown mask kind %d", op, (int)o->mask);
        *bad = true;
        return NULL;
    }
}

bool nb__attention_opts_ok(const char *op, const nb_attention_opts *o) {
    if ((unsigned)o->mask >= NB_ATTN_MASK_COUNT) {
        nb__error(NB_ERR_ARG, "%s: unknown mask kind %d", op, (int)o->mask);
        return false;
    }
    if (o->mask == NB_ATTN_MASK_SLIDING && o->window < 1) {
        nb__error(NB_ERR_ARG, "%s: a sliding window of %lld keys (at least 1)", op, (long long)o->window);
        return false;
    }
    if (o->softcap < 0 || isnan(o->softcap) || isnan(o->scale) || isinf(o->scale)) {
        nb__error(NB_ERR_ARG, "%s: soft-cap %g and scale %g must be numbers, the cap >= 0 and the scale finite", op,
                  o->softcap, o->scale);
        return false;
    }
    return true;
}

static bool check(const char *op, const nb_tensor *q, const nb_tensor *k, const nb_tensor *v) {
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4) {
        nb__error(NB_ERR_SHAPE, "%s: q, k, v must be [B, H, L, D], got %s, %s, %s", op, NB_SHAPE_STR(q), NB_SHAPE_STR(k),
                  NB_SHAPE_STR(v));
        return false;
    }
    if (!nb_dtype_is_float(q->dtype) || k->dtype != q->dtype || v->dtype != q->dtype) {
        nb__error(NB_ERR_DTYPE, "%s: q, k, v must share one float dtype, got %s, %s, %s", op, nb_dtype_name(q->dtype),
                  nb_dtype_name(k->dtype), nb_dtype_name(v->dtype));
        return false;
    }
    bool heads = !nb__dim_sym(q->shape[1]) && !nb__dim_sym(k->shape[1]) && k->shape[1] > 0 &&
                 q->shape[1] % k->shape[1] == 0;
    if (q->shape[0] != k->shape[0] || k->shape[0] != v->shape[0] || k->shape[1] != v->shape[1] ||
        k->shape[2] != v->shape[2] || q->shape[3] != k->shape[3] || !heads) {
        nb__error(NB_ERR_SHAPE, "%s: q %s, k %s, v %s must be [B, Hq, Lq, D], [B, Hkv, Lk, D], [B, Hkv, Lk, Dv] with "
                  "Hq a multiple of Hkv", op, NB_SHAPE_STR(q), NB_SHAPE_STR(k), NB_SHAPE_STR(v));
        return false;
    }
    return true;
}

nb_tensor *nb__attention_scaled(nb_tensor *x, nb_tensor *q, double scale) {
    if (scale != 0) return nb_mul(x, scale);
    int64_t d = q->shape[3];
    if (!nb__dim_sym(d)) return nb_mul(x, 1.0 / sqrt((double)d));
    return nb_mul(x, nb_rsqrt(nb__numel_of(q, (int[]){3}, 1))); /* a symbolic D: counted when it runs */
}

nb_tensor *nb__attention_probs(nb_tensor *q, nb_tensor *k, const nb_attention_opts *o) {
    const char *op = "scaled_dot_product_attention";
    int64_t b = q->shape[0], hq = q->shape[1], lq = q->shape[2], d = q->shape[3];
    int64_t hkv = k->shape[1], g = hq / hkv, lk = k->shape[2];
    nb_tensor *bias;
    bool bad;
    nb_tensor *keep = allowed(op, q, k, o, &bias, &bad);
    if (bad) return NULL;
    /* the g query heads of a key head side by side: scores [B, Hkv, g Lq, Lk] in one matmul, no
     * copy of k per query head; the scale applied to q (Lq·D products rather than Lq·Lk scores) */
    nb_tensor *qs = nb__attention_scaled(q, q, o->scale);
    nb_tensor *qg = nb_reshape(qs, (int64_t[]){b, hkv, nb__dim_mul(op, g, lq), d}, 4);
    nb_tensor *s = nb_reshape(nb_matmul(qg, nb_transpose(k, -2, -1)), (int64_t[]){b, hq, lq, lk}, 4);
    /* Gemma 2's cap; one beyond the dtype's range (inf included) caps nothing */
    double top = q->dtype == NB_F64 ? DBL_MAX : FLT_MAX;
    if (o->softcap > 0 && o->softcap <= top) s = nb_mul(nb_tanh(nb_div(s, o->softcap)), o->softcap);
    if (bias) s = nb_add(s, nb_cast(bias, q->dtype));
    if (keep) s = nb_where(keep, s, value_on(q, -INFINITY, q->dtype));
    if (o->mask == NB_ATTN_MASK_NONE || o->mask == NB_ATTN_MASK_CAUSAL || lk == 0)
        return nb_softmax(s, -1); /* every query keeps a key (causal: the first), or none has any: no guard */
    /* a row with every key masked: zeros (its softmax would be 0/0) */
    nb_tensor *zero = value_on(q, 0, q->dtype), *empty = nb_eq(nb_max(s, (int[]){-1}, 1, true), -INFINITY);
    return nb_where(empty, zero, nb_softmax(nb_where(empty, zero, s), -1));
}

/* ---- the ATTENTION kind: attrs.sub the mask (NONE, CAUSAL, SLIDING), i[0] the window, f[0] the
 * scale (0: 1/sqrt(D), worked out when it runs, so a symbolic D works).
 * ATTENTION:          in {q, k, v}; out {the attention [B, Hq, Lq, Dv], the logsumexp of each
 *                     query's scaled scores [B, Hq, Lq] (-inf for a query without keys)}.
 * ATTENTION_BACKWARD: in {q, k, v, out, dout, lse}; out {dq, dk, dv}. ---- */

static int infer_attention(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    const char *name = nb__ops[op].name;
    nb_tensor *q = in[0], *k = in[1], *v = in[2];
    if (!check(name, q, k, v) || !nb__backend_common(name, in, 3)) return -1;
    if (q->dtype != NB_F32 && q->dtype != NB_F64) {
        nb__error(NB_ERR_DTYPE, "%s: float32 or float64, got %s", name, nb_dtype_name(q->dtype));
        return -1;
    }
    if (op == NB_OP_ATTENTION_BACKWARD) { /* out and dout [B, Hq, Lq, Dv], lse [B, Hq, Lq] */
        int64_t ws[4] = {q->shape[0], q->shape[1], q->shape[2], v->shape[3]};
        for (int i = 3; i < 6; i++) {
            bool ok = in[i]->dtype == q->dtype && in[i]->ndim == (i == 5 ? 3 : 4) &&
                      !memcmp(in[i]->shape, ws, sizeof(int64_t) * (size_t)in[i]->ndim);
            if (!ok) {
                nb__error(NB_ERR_SHAPE, "%s: input %d %s %s does not fit q %s and v %s", name, i,
                          nb_dtype_name(in[i]->dtype), NB_SHAPE_STR(in[i]), NB_SHAPE_STR(q), NB_SHAPE_STR(v));
                return -1;
            }
        }
    }
    if (!nb__backend_of(q)->attention) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: backend '%s' has no attention kernel", name, nb__backend_of(q)->name);
        return -1;
    }
    if (a->sub != NB_ATTN_MASK_NONE && a->sub != NB_ATTN_MASK_CAUSAL &&
        (a->sub != NB_ATTN_MASK_SLIDING || a->i[0] < 1)) {
        nb__error(NB_ERR_ARG, "%s: mask %d (window %lld): none, causal or a sliding window", name, a->sub,
                  (long long)a->i[0]);
        return -1;
    }
    if (op == NB_OP_ATTENTION_BACKWARD) {
        for (int i = 0; i < 3; i++) {
            nb__meta_of(&m[i], in[i]);
            m[i].weak = false;
        }
        return 3;
    }
    nb__meta_of(&m[0], q);
    m[0].shape[3] = v->shape[3];
    m[0].weak = false;
    m[1] = m[0];
    m[1].ndim = 3;
    return 2;
}

static nb_status exec_attention(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m,
                                int nout, nb_tensor **out) {
    const nb_backend *be = nb__backend_of(in[0]);
    nb_tensor *t[6], *r[3];
    nb_status st = nb__exec_begin(in, n, m, nout, t, r);
    double scale = a->f[0] != 0 ? a->f[0] : 1.0 / sqrt((double)in[0]->shape[3]);
    if (st == NB_OK && op == NB_OP_ATTENTION)
        st = be->attention(r[0], r[1], t[0], t[1], t[2], a->sub, a->i[0], scale);
    else if (st == NB_OK)
        st = be->attention_backward(r[0], r[1], r[2], (const nb_tensor *const *)t, a->sub, a->i[0], scale);
    return nb__exec_end(st, t, n, r, nout, out);
}

const nb_kind_impl nb__kind_attention = {infer_attention, exec_attention};

nb_tensor *nb_scaled_dot_product_attention(nb_tensor *q, nb_tensor *k, nb_tensor *v, nb_attention_opts o) {
    const char *op = "scaled_dot_product_attention";
    NB_CHECK_ARG(op, q);
    NB_CHECK_ARG(op, k);
    NB_CHECK_ARG(op, v);
    if (!check(op, q, k, v) || !nb__attention_opts_ok(op, &o)) return NULL;
    double top = q->dtype == NB_F64 ? DBL_MAX : FLT_MAX;
    bool capped = o.softcap > 0 && o.softcap <= top;
    if ((q->dtype == NB_F32 || q->dtype == NB_F64) && !capped && nb__backend_of(q)->attention &&
        (o.mask == NB_ATTN_MASK_NONE || o.mask == NB_ATTN_MASK_CAUSAL || o.mask == NB_ATTN_MASK_SLIDING)) {
        nb_attrs a = {.sub = (int)o.mask, .i = {o.window}, .ni = 1, .f = {o.scale}}; /* 0: 1/sqrt(D) at run time */
        return nb__own(nb__apply(NB_OP_ATTENTION, (nb_tensor *[]){q, k, v}, 3, &a));
    }
    int64_t b = q->shape[0], hq = q->shape[1], lq = q->shape[2];
    int64_t hkv = k->shape[1], g = hq / hkv, lk = k->shape[2], dv = v->shape[3];
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(q);
    nb_tensor *p = nb__attention_probs(q, nb_cast(k, q->dtype), &o);
    if (!p) {
        nb_scope_end();
        return NULL;
    }
    nb_tensor *y = nb_matmul(nb_reshape(p, (int64_t[]){b, hkv, nb__dim_mul(op, g, lq), lk}, 4), nb_cast(v, q->dtype));
    NB_OPMATH_RETURN(nb_reshape(y, (int64_t[]){b, hq, lq, dv}, 4));
}

nb_tensor *nb_rotary_embedding(nb_tensor *x, int64_t offset, double base, bool interleaved) {
    const char *op = "rotary_embedding";
    NB_CHECK_ARG(op, x);
    if (x->ndim < 2 || !nb_dtype_is_float(x->dtype) || nb__dim_sym(x->shape[x->ndim - 1]) ||
        x->shape[x->ndim - 1] % 2) {
        nb__error(NB_ERR_SHAPE, "%s: x must be float [..., L, D] with an even concrete D, got %s %s", op,
                  nb_dtype_name(x->dtype), NB_SHAPE_STR(x));
        return NULL;
    }
    if (!(base > 1)) {
        nb__error(NB_ERR_ARG, "%s: base %g must be > 1", op, base);
        return NULL;
    }
    int nd = x->ndim;
    int64_t l = x->shape[nd - 2], d = x->shape[nd - 1], half = d / 2;
    NB_COMPOSITE_BEGIN();
    NB_OPMATH(x);
    /* angle[p, i] = (offset + p) · base^(-2i / D) (Su et al., "RoFormer", 2021, eq. 15) */
    double *freq = nb__malloc(sizeof(double) * (size_t)(half ? half : 1));
    if (!freq) {
        nb__error(NB_ERR_OOM, "%s: out of memory", op);
        nb_scope_end();
        return NULL;
    }
    for (int64_t i = 0; i < half; i++) freq[i] = pow(base, -2.0 * (double)i / (double)d);
    nb_tensor *f = nb_from_data(freq, &half, 1, NB_F64);
    nb__free(freq);
    f = nb_to_device(f, x->storage->device);
    nb_tensor *pos = nb__positions(x, l, (double)offset, NB_F64);
    nb_tensor *ang = nb_mul(nb_unsqueeze(pos, 1), nb_unsqueeze(f, 0)); /* [L, D/2] */
    nb_tensor *c = nb_cast(nb_cos(ang), x->dtype), *s = nb_cast(nb_sin(ang), x->dtype);
    nb_tensor *x1, *x2;
    if (interleaved) { /* pairs (x[2i], x[2i+1]): GPT-J, the paper's layout */
        int64_t shape[NB_MAX_DIMS + 1];
        for (int k = 0; k < nd - 1; k++) shape[k] = x->shape[k];
        shape[nd - 1] = half;
        shape[nd] = 2;
        nb_tensor *pairs = nb_reshape(x, shape, nd + 1);
        x1 = nb_select(pairs, -1, 0);
        x2 = nb_select(pairs, -1, 1);
    } else { /* halves: GPT-NeoX, Llama */
        x1 = nb_slice(x, -1, 0, half, 1);
        x2 = nb_slice(x, -1, half, d, 1);
    }
    nb_tensor *r1 = nb_sub(nb_mul(x1, c), nb_mul(x2, s)), *r2 = nb_add(nb_mul(x2, c), nb_mul(x1, s));
    nb_tensor *y = interleaved ? nb_flatten(nb_stack((nb_tensor *[]){r1, r2}, 2, -1), -2, -1)
                               : nb_cat((nb_tensor *[]){r1, r2}, 2, -1);
    NB_OPMATH_RETURN(y);
}
