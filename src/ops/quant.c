/*
 * quant.c — scaled low-precision tensors (O10): the QUANT kind (quantize,
 * dequantize, scaled_matmul: infer from metadata; execute through the
 * backend's quantize / dequantize / scaled_matmul entries) and the public
 * front-ends, which work out the per-tensor and NVFP4 global scales with
 * public ops.  Formats and block scales: src/core/lowp.c.
 */
#include "../backend/backend.h"

#include <string.h>

/* ---- checks shared by the front-ends and the infer rule ---- */

static bool layout_ok(const char *op, int fmt, int layout) {
    if (fmt < 0 || fmt >= NB_SCALED_FORMAT_COUNT) {
        nb__error(NB_ERR_ARG, "%s: unknown format %d", op, fmt);
        return false;
    }
    if (layout < 0 || layout >= NB_SCALE_LAYOUT_COUNT) {
        nb__error(NB_ERR_ARG, "%s: unknown scale layout %d", op, layout);
        return false;
    }
    if (layout == NB_SCALE_MX && nb__lowp_fmts[fmt].fnuz) {
        nb__error(NB_ERR_ARG, "%s: MX scales take the OCP formats, not %s", op, nb__lowp_fmts[fmt].name);
        return false;
    }
    if (layout == NB_SCALE_NVFP4 && fmt != NB_FMT_F4E2M1) {
        nb__error(NB_ERR_ARG, "%s: NVFP4 scales take float4_e2m1fn codes, not %s", op, nb__lowp_fmts[fmt].name);
        return false;
    }
    return true;
}

/* The logical length K of rows of `bytes` packed codes (or of K values when !packed); -1 with
 * NB_ERR_SHAPE when it is symbolic or does not fit the packing and the block. */
static int64_t row_length(const char *op, const char *what, int64_t n, bool packed, int fmt, int layout) {
    int bits = nb__lowp_fmts[fmt].bits, group = bits == 8 ? 1 : bits == 6 ? 4 : 2; /* codes a packing unit holds */
    int64_t unit = packed ? group * bits / 8 : group, k = packed ? n / unit * group : n;
    int64_t blk = nb__lowp_block(layout), need = blk > group ? blk : group;
    if (nb__dim_sym(n)) {
        nb__error(NB_ERR_SHAPE, "%s: the last dim of %s must be concrete", op, what);
        return -1;
    }
    if (n % unit != 0 || k % need != 0) {
        const char *scales = layout == NB_SCALE_MX ? " with MX scales" : layout == NB_SCALE_NVFP4 ? " with NVFP4 scales" : "";
        nb__error(NB_ERR_SHAPE, "%s: the last dim of %s is %lld; %s codes%s need a multiple of %lld %s", op, what,
                  (long long)n, nb__lowp_fmts[fmt].name, scales, (long long)(packed ? need * bits / 8 : need),
                  packed ? "bytes" : "elements");
        return -1;
    }
    return k;
}

static bool is_scalar_f32(const char *op, const char *what, const nb_tensor *t) {
    if (t->dtype != NB_F32 || t->ndim != 0) {
        nb__error(t->dtype != NB_F32 ? NB_ERR_DTYPE : NB_ERR_SHAPE, "%s: %s must be a float32 scalar [], got %s %s", op,
                  what, nb_dtype_name(t->dtype), NB_SHAPE_STR(t));
        return false;
    }
    return true;
}

/* Codes c [..., Kb] (u8) with scales s and the NVFP4 global g of a layout: the logical K, or -1. */
static int64_t codes_fit(const char *op, const char *name, nb_tensor *c, nb_tensor *s, nb_tensor *g, int fmt, int layout) {
    char what[48];
    snprintf(what, sizeof what, "%s codes", name);
    if (c->dtype != NB_U8) {
        nb__error(NB_ERR_DTYPE, "%s: %s must be uint8, got %s", op, what, nb_dtype_name(c->dtype));
        return -1;
    }
    if (c->ndim < 1) {
        nb__error(NB_ERR_SHAPE, "%s: %s must have a last dim, got %s", op, what, NB_SHAPE_STR(c));
        return -1;
    }
    int64_t k = row_length(op, what, c->shape[c->ndim - 1], true, fmt, layout);
    if (k < 0) return -1;
    snprintf(what, sizeof what, "%s scales", name);
    if (layout == NB_SCALE_TENSOR) return is_scalar_f32(op, what, s) ? k : -1;
    if (s->dtype != NB_U8) {
        nb__error(NB_ERR_DTYPE, "%s: %s must be uint8 codes, got %s", op, what, nb_dtype_name(s->dtype));
        return -1;
    }
    int64_t blocks = k / nb__lowp_block(layout);
    bool same = s->ndim == c->ndim && s->shape[s->ndim - 1] == blocks &&
                !memcmp(s->shape, c->shape, sizeof(int64_t) * (size_t)(c->ndim - 1));
    if (!same) {
        int64_t want[NB_MAX_DIMS];
        memcpy(want, c->shape, sizeof(int64_t) * (size_t)c->ndim);
        want[c->ndim - 1] = blocks;
        nb__error(NB_ERR_SHAPE, "%s: %s %s do not fit codes %s (want %s)", op, what, NB_SHAPE_STR(s), NB_SHAPE_STR(c),
                  NB_DIMS_STR(want, c->ndim));
        return -1;
    }
    if (layout == NB_SCALE_NVFP4) {
        snprintf(what, sizeof what, "%s global scale", name);
        if (!g) {
            nb__error(NB_ERR_NULL, "%s: %s is NULL", op, what);
            return -1;
        }
        if (!is_scalar_f32(op, what, g)) return -1;
    }
    return k;
}

static const nb_backend *backend_for(const char *op, nb_tensor *const *in, int n) {
    const nb_backend *be = nb__backend_common(op, in, n);
    if (be && !be->quantize) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: backend '%s' has no low-precision kernels", op, be->name);
        return NULL;
    }
    return be;
}

/* ---- the QUANT kind ----
 * QUANTIZE:      in {x (f32 [..., K])} for MX, {x, scale} for TENSOR, {x, global} for NVFP4;
 *                out {codes, block scales (MX, NVFP4)}.  attrs.sub the format, i[0] the layout.
 * DEQUANTIZE:    in {codes, scales[, global]}; out [..., K] of dtype i[1].
 * SCALED_MATMUL: in {a codes, a scales, b codes, b scales[, a global, b global]}; out [..., M, N]
 *                of dtype i[2]; sub a's format, i[1] b's. */

static int infer_quant(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    const char *name = nb__ops[op].name;
    int layout = (int)a->i[0];
    if (!layout_ok(name, a->sub, layout) || (op == NB_OP_SCALED_MATMUL && !layout_ok(name, (int)a->i[1], layout)) ||
        !backend_for(name, in, n))
        return -1;
    int want_in = op == NB_OP_QUANTIZE ? (layout == NB_SCALE_MX ? 1 : 2)
                  : op == NB_OP_DEQUANTIZE ? (layout == NB_SCALE_NVFP4 ? 3 : 2)
                                          : (layout == NB_SCALE_NVFP4 ? 6 : 4);
    NB_ASSERT(n == want_in);
    if (op == NB_OP_QUANTIZE) {
        nb_tensor *x = in[0];
        if (x->dtype != NB_F32 || x->ndim < 1) {
            nb__error(NB_ERR_SHAPE, "%s: x must be float32 [..., K], got %s %s", name, nb_dtype_name(x->dtype),
                      NB_SHAPE_STR(x));
            return -1;
        }
        int64_t k = row_length(name, "x", x->shape[x->ndim - 1], false, a->sub, layout);
        if (k < 0 || (n > 1 && !is_scalar_f32(name, "the scale", in[1]))) return -1;
        nb__meta_of(&m[0], x);
        m[0].weak = false;
        m[0].dtype = NB_U8;
        m[0].shape[x->ndim - 1] = nb__lowp_row_bytes(nb__lowp_fmts[a->sub].bits, k);
        if (layout == NB_SCALE_TENSOR) return 1;
        m[1] = m[0];
        m[1].shape[x->ndim - 1] = k / nb__lowp_block(layout);
        return 2;
    }
    nb_dtype dt = (nb_dtype)a->i[op == NB_OP_DEQUANTIZE ? 1 : 2];
    if (!nb_dtype_is_float(dt)) {
        nb__error(NB_ERR_DTYPE, "%s: the result dtype must be float, got %s", name, nb_dtype_name(dt));
        return -1;
    }
    if (op == NB_OP_DEQUANTIZE) {
        int64_t k = codes_fit(name, "the", in[0], in[1], n > 2 ? in[2] : NULL, a->sub, layout);
        if (k < 0) return -1;
        nb__meta_of(&m[0], in[0]);
        m[0].weak = false;
        m[0].dtype = dt;
        m[0].shape[in[0]->ndim - 1] = k;
        return 1;
    }
    nb_tensor *ac = in[0], *bc = in[2];
    int64_t ka = codes_fit(name, "a's", ac, in[1], n > 4 ? in[4] : NULL, a->sub, layout);
    int64_t kb = ka < 0 ? -1 : codes_fit(name, "b's", bc, in[3], n > 4 ? in[5] : NULL, (int)a->i[1], layout);
    if (kb < 0) return -1;
    if (ac->ndim < 2 || bc->ndim != 2) {
        nb__error(NB_ERR_SHAPE, "%s: a's codes must be [..., M, K'] and b's [N, K'], got %s and %s", name,
                  NB_SHAPE_STR(ac), NB_SHAPE_STR(bc));
        return -1;
    }
    if (ka != kb) {
        nb__error(NB_ERR_SHAPE, "%s: a [..., M, K] and b [N, K] of one K, got K = %lld from a's codes %s and %lld "
                  "from b's codes %s", name, (long long)ka, NB_SHAPE_STR(ac), (long long)kb, NB_SHAPE_STR(bc));
        return -1;
    }
    nb__meta_of(&m[0], ac);
    m[0].weak = false;
    m[0].dtype = dt;
    m[0].shape[ac->ndim - 1] = bc->shape[0];
    return 1;
}

/* The row description of an operand: format, layout, K (from the codes' last dim), and its
 * global scale read from g (TENSOR, NVFP4). */
static nb_lowp_row row_of(int fmt, int layout, int64_t k, const nb_tensor *g) {
    return (nb_lowp_row){fmt, layout, k, g ? *(const float *)nb__ptr(g) : 1.0f};
}

static int64_t rows_of(const nb_tensor *t) {
    int64_t r = 1;
    for (int d = 0; d < t->ndim - 1; d++) r *= t->shape[d];
    return r;
}

static nb_status exec_quant(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                            nb_tensor **out) {
    const nb_backend *be = nb__backend_of(in[0]);
    nb_device dev = in[0]->storage->device;
    int layout = (int)a->i[0];
    nb_tensor *t[6] = {NULL}, *f32 = NULL; /* dense inputs; a float32 result before its dtype */
    nb_status st = NB_OK;
    for (int j = 0; j < nout; j++) out[j] = NULL;
    for (int i = 0; i < n && st == NB_OK; i++)
        if (!(t[i] = nb__dense(in[i]))) st = nb_last_status();
    for (int j = 0; j < nout && st == NB_OK; j++)
        if (!(out[j] = nb__meta_new(&m[j], dev))) st = nb_last_status();
    nb_meta mf = m[0];
    mf.dtype = NB_F32;
    if (st == NB_OK && op != NB_OP_QUANTIZE && m[0].dtype != NB_F32 && !(f32 = nb__meta_new(&mf, dev)))
        st = nb_last_status();
    nb_tensor *res = f32 ? f32 : out[0];
    if (st == NB_OK && op == NB_OP_QUANTIZE) {
        nb_lowp_row r = row_of(a->sub, layout, in[0]->shape[in[0]->ndim - 1], n > 1 ? t[1] : NULL);
        st = be->quantize(&r, rows_of(t[0]), t[0], out[0], nout > 1 ? out[1] : NULL);
    } else if (st == NB_OK && op == NB_OP_DEQUANTIZE) {
        bool tensor = layout == NB_SCALE_TENSOR;
        nb_lowp_row r = row_of(a->sub, layout, m[0].shape[m[0].ndim - 1], tensor ? t[1] : n > 2 ? t[2] : NULL);
        st = be->dequantize(&r, rows_of(t[0]), t[0], tensor ? NULL : t[1], res);
    } else if (st == NB_OK) {
        bool tensor = layout == NB_SCALE_TENSOR, nv = layout == NB_SCALE_NVFP4;
        int64_t k = (int64_t)(in[0]->shape[in[0]->ndim - 1] * 8 / nb__lowp_fmts[a->sub].bits);
        nb_lowp_row ra = row_of(a->sub, layout, k, tensor ? t[1] : nv ? t[4] : NULL);
        nb_lowp_row rb = row_of((int)a->i[1], layout, k, tensor ? t[3] : nv ? t[5] : NULL);
        st = be->scaled_matmul(&ra, rows_of(t[0]), t[0], tensor ? NULL : t[1], &rb, t[2]->shape[0], t[2],
                               tensor ? NULL : t[3], res);
    }
    if (st == NB_OK && f32) st = be->copy(out[0], f32);
    for (int i = 0; i < n; i++) nb_release(t[i]);
    nb_release(f32);
    if (st != NB_OK)
        for (int j = 0; j < nout; j++) {
            nb_release(out[j]);
            out[j] = NULL;
        }
    return st;
}

const nb_kind_impl nb__kind_quant = {infer_quant, exec_quant};

/* ---- the front-ends ---- */

static bool quantized_ok(const char *op, const char *name, const nb_quantized *q) {
    if (!q || !q->codes || !q->scales) {
        nb__error(NB_ERR_NULL, "%s: %s%s is NULL", op, name, !q ? "" : !q->codes ? " codes" : " scales");
        return false;
    }
    if (q->layout == NB_SCALE_NVFP4 && !q->global_scale) {
        nb__error(NB_ERR_NULL, "%s: %s global scale is NULL (NVFP4)", op, name);
        return false;
    }
    if (q->layout != NB_SCALE_NVFP4 && q->global_scale) {
        nb__error(NB_ERR_ARG, "%s: %s has a global scale, which only NVFP4 scales take", op, name);
        return false;
    }
    return layout_ok(op, q->format, q->layout);
}

nb_status nb_quantize(nb_tensor *x, nb_scaled_format f, nb_scale_layout layout, nb_quantized *out) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    const char *op = "quantize";
    if (out) memset(out, 0, sizeof *out);
    nb_status st = x && out ? NB_OK : nb__error(NB_ERR_NULL, "%s: argument '%s' is NULL", op, x ? "out" : "x");
    if (st == NB_OK && !nb_dtype_is_float(x->dtype))
        st = nb__error(NB_ERR_DTYPE, "%s: x must be float, got %s", op, nb_dtype_name(x->dtype));
    if (st == NB_OK && x->ndim < 1) st = nb__error(NB_ERR_SHAPE, "%s: x must be [..., K], got a scalar", op);
    if (st == NB_OK && !layout_ok(op, f, layout)) st = nb_last_status();
    nb_tensor *o[NB_MAX_OUTS] = {NULL, NULL}, *g = NULL;
    if (st == NB_OK) {
        nb_scope_begin();
        nb_tensor *xf = nb_cast(nb_detach(x), NB_F32); /* codes and scales carry no gradient */
        if (layout != NB_SCALE_MX) { /* amax / max(format) (TENSOR) or amax / (448 * 6) (NVFP4), at least 2^-126 */
            double top = layout == NB_SCALE_TENSOR ? nb_scaled_format_max(f) : 448.0 * 6.0;
            bool empty = !nb__dims_any_sym(x->shape, x->ndim) && nb_numel(x) == 0; /* no amax: the least scale */
            nb_tensor *amax = empty ? nb_sum(nb_abs(xf), NULL, 0, false) : nb_max(nb_abs(xf), NULL, 0, false); /* 0 */
            g = nb__scope_take(nb_maximum(nb_div(amax, top), 0x1p-126));
        }
        nb_attrs at = {.sub = f, .i = {layout}};
        if (xf && (layout == NB_SCALE_MX || g))
            nb__apply_n(NB_OP_QUANTIZE, (nb_tensor *[]){xf, g}, layout == NB_SCALE_MX ? 1 : 2, &at, o);
        nb_scope_end();
        if (!o[0]) st = nb_last_status();
    }
    if (st == NB_OK) {
        *out = (nb_quantized){.codes = nb__own(o[0]), .scales = nb__own(layout == NB_SCALE_TENSOR ? g : o[1]),
                              .global_scale = layout == NB_SCALE_NVFP4 ? nb__own(g) : NULL, .format = f,
                              .layout = layout};
    } else {
        nb_release(g);
    }
    return nb__own_end(&fr, op, st);
}

nb_tensor *nb_dequantize(const nb_quantized *q, nb_dtype dt) {
    const char *op = "dequantize";
    if (!quantized_ok(op, "q", q)) return NULL;
    nb_attrs at = {.sub = q->format, .i = {q->layout, dt}};
    nb_tensor *in[3] = {q->codes, q->scales, q->global_scale};
    return nb__own(nb__apply(NB_OP_DEQUANTIZE, in, q->layout == NB_SCALE_NVFP4 ? 3 : 2, &at));
}

nb_tensor *nb_scaled_matmul(const nb_quantized *a, const nb_quantized *b, nb_dtype out_dtype) {
    const char *op = "scaled_matmul";
    if (!quantized_ok(op, "a", a) || !quantized_ok(op, "b", b)) return NULL;
    if (a->layout != b->layout) {
        nb__error(NB_ERR_ARG, "%s: a and b must share a scale layout, got %d and %d", op, (int)a->layout,
                  (int)b->layout);
        return NULL;
    }
    nb_attrs at = {.sub = a->format, .i = {a->layout, b->format, out_dtype}};
    nb_tensor *in[6] = {a->codes, a->scales, b->codes, b->scales, a->global_scale, b->global_scale};
    return nb__own(nb__apply(NB_OP_SCALED_MATMUL, in, a->layout == NB_SCALE_NVFP4 ? 6 : 4, &at));
}
