/*
 * elementwise.c — front-ends of the unary, binary and where ops: dtype rules
 * and promotion (weak C scalars included), broadcasting, dispatch to the
 * backend, and tape recording.
 */
#include "../backend/backend.h"

#include <string.h>

static inline nb_dtype unary_dtype(nb_op op, nb_dtype dt) {
    switch (nb__ops[op].dtype_rule) {
    case NB_DT_FLOAT: return nb__float_of(dt);
    case NB_DT_BOOL: return NB_BOOL;
    default: return dt;
    }
}

nb_dtype nb__unary_dtype(nb_op op, nb_dtype dt) { return unary_dtype(op, dt); }

static int infer_unary(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)n;
    (void)attrs;
    if (!nb__backend_common(nb__ops[op].name, in, 1)) return -1;
    nb__meta_of(m, in[0]);
    m->dtype = unary_dtype(op, in[0]->dtype);
    m->weak = false;
    return 1;
}

static nb_status exec_unary(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m, int nout,
                            nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *x = in[0];
    const nb_backend *be = nb__backend_of(x);
    nb_tensor *xc = m->dtype == NB_BOOL ? nb_retain(x) : nb__to_dtype(x, m->dtype);
    nb_tensor *r = xc ? nb__meta_new(m, x->storage->device) : NULL;
    if (r && be->unary(op, r, xc, attrs ? attrs->f[0] : 0, attrs ? attrs->f[1] : 0) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    nb_release(xc);
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_unary = {infer_unary, exec_unary};

nb_tensor *nb__unary(nb_op op, nb_tensor *x, double p0, double p1) {
    NB_CHECK_ARG(nb__ops[op].name, x);
    uint64_t b0, b1; /* both +0.0 (the bits, so -0.0 and NaN are parameters): no attrs, no memset */
    memcpy(&b0, &p0, sizeof b0);
    memcpy(&b1, &p1, sizeof b1);
    if ((b0 | b1) == 0) return nb__apply(op, &x, 1, NULL);
    nb_attrs a = {.f = {p0, p1}};
    return nb__apply(op, &x, 1, &a);
}

static int category(nb_dtype d) { return d == NB_BOOL ? 0 : nb_dtype_is_float(d) ? 2 : 1; }

/* `lo` (a lower tier) changes `hi` only when it is of a higher category. */
static nb_dtype combine_tiers(nb_dtype hi, nb_dtype lo) {
    return category(lo) > category(hi) ? nb_promote_types(hi, lo) : hi;
}

/* Result dtype of two operands as torch.result_type: operands fall in three
 * tiers — tensors with dimensions, rank-0 tensors, weak C scalars (a float
 * scalar counts as f32, an int as i64) — promoted within each tier; a lower
 * tier only lifts the category of the higher ones. */
static nb_dtype promote(const nb_tensor *a, const nb_tensor *b) {
    nb_dtype tier[3] = {NB_BOOL, NB_BOOL, NB_BOOL}; /* read only where have[] is set */
    bool have[3] = {false, false, false};
    const nb_tensor *ops[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        const nb_tensor *t = ops[i];
        int k = t->weak ? 2 : t->ndim == 0 ? 1 : 0;
        /* a C float counts as f32, but two C numbers combine in double, like Python numbers */
        nb_dtype d = t->weak && !(a->weak && b->weak) && nb_dtype_is_float(t->dtype) ? NB_F32 : t->dtype;
        tier[k] = have[k] ? nb_promote_types(tier[k], d) : d;
        have[k] = true;
    }
    int k = 2;
    while (!have[k]) k--;
    nb_dtype r = tier[k];
    while (k-- > 0)
        if (have[k]) r = combine_tiers(tier[k], r);
    return r;
}

nb_tensor *nb__expand_raw(nb_tensor *t, const int64_t *shape, int ndim) {
    int64_t st[NB_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        st[i] = (j < 0 || (t->shape[j] == 1 && shape[i] != 1)) ? 0 : t->stride[j];
    }
    return nb__tensor_view_of(t->storage, shape, st, ndim, t->offset, t->dtype);
}

/* The operands of an elementwise kernel: ts[i] converted to dts[i] (NB_DTYPE_COUNT keeps
 * its dtype) and viewed with the output's shape (stride 0 on broadcast axes).  A tensor
 * that already has both is passed through.  All or nothing: false leaves no references. */
static bool kernel_operands(nb_tensor **out, nb_tensor *const *ts, const nb_dtype *dts, int n,
                            const int64_t *shape, int nd) {
    for (int i = 0; i < n; i++) {
        nb_dtype dt = dts[i] == NB_DTYPE_COUNT ? ts[i]->dtype : dts[i];
        nb_tensor *c = nb__to_dtype(ts[i], dt);
        bool same = c && c->ndim == nd && !memcmp(c->shape, shape, sizeof(int64_t) * (size_t)nd);
        out[i] = same ? nb_retain(c) : c ? nb__expand_raw(c, shape, nd) : NULL;
        nb_release(c);
        if (!out[i]) {
            while (i-- > 0) nb_release(out[i]);
            return false;
        }
    }
    return true;
}

static void release_all(nb_tensor **ts, int n) {
    for (int i = 0; i < n; i++) nb_release(ts[i]);
}

static nb_dtype binary_compute_dtype(nb_op op, const nb_tensor *a, const nb_tensor *b) {
    nb_dtype ct = promote(a, b);
    return nb__ops[op].dtype_rule == NB_DT_FPROMOTE ? nb__float_of(ct) : ct;
}

static int infer_binary(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)n;
    (void)attrs;
    const char *name = nb__ops[op].name;
    nb_tensor *a = in[0], *b = in[1];
    if (!nb__backend_common(name, in, 2)) return -1;
    m->ndim = nb__broadcast_shapes(name, a->shape, a->ndim, b->shape, b->ndim, m->shape);
    if (m->ndim < 0) return -1;
    nb_dtype ct = binary_compute_dtype(op, a, b);
    m->compute = ct;
    m->dtype = nb__ops[op].dtype_rule == NB_DT_BOOL ? NB_BOOL : ct;
    m->weak = a->weak && b->weak; /* still a C number (e.g. b - 1 in the pow rule) */
    return 1;
}

static nb_status exec_binary(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m, int nout,
                             nb_tensor **out) {
    (void)n;
    (void)attrs;
    (void)nout;
    nb_tensor *a = in[0];
    nb_dtype ct = m->compute;
    nb_tensor *k[2];
    if (!kernel_operands(k, in, (nb_dtype[]){ct, ct}, 2, m->shape, m->ndim)) return nb_last_status();
    nb_tensor *r = nb__meta_new(m, a->storage->device);
    if (r && nb__backend_of(a)->binary(op, r, k[0], k[1]) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    release_all(k, 2);
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_binary = {infer_binary, exec_binary};

nb_tensor *nb__binary(nb_op op, nb_tensor *a, nb_tensor *b) {
    const char *name = nb__ops[op].name;
    NB_CHECK_ARG(name, a);
    NB_CHECK_ARG(name, b);
    return nb__apply(op, (nb_tensor *[]){a, b}, 2, NULL);
}

/* ---- public unary ops ---- */
#define NB_UNARY_DEF(E, name) \
    nb_tensor *nb_##name(nb_tensor *x) { return nb__own(nb__unary(NB_OP_##E, x, 0, 0)); }
NB_UNARY_DEF(NEG, neg) NB_UNARY_DEF(ABS, abs) NB_UNARY_DEF(SIGN, sign) NB_UNARY_DEF(EXP, exp)
NB_UNARY_DEF(EXPM1, expm1) NB_UNARY_DEF(LOG, log) NB_UNARY_DEF(LOG1P, log1p)
NB_UNARY_DEF(SQRT, sqrt) NB_UNARY_DEF(RSQRT, rsqrt) NB_UNARY_DEF(SQUARE, square)
NB_UNARY_DEF(RECIPROCAL, reciprocal) NB_UNARY_DEF(SIN, sin) NB_UNARY_DEF(COS, cos)
NB_UNARY_DEF(TAN, tan) NB_UNARY_DEF(TANH, tanh) NB_UNARY_DEF(SIGMOID, sigmoid)
NB_UNARY_DEF(RELU, relu) NB_UNARY_DEF(SILU, silu) NB_UNARY_DEF(ERF, erf)
NB_UNARY_DEF(FLOOR, floor) NB_UNARY_DEF(CEIL, ceil) NB_UNARY_DEF(ROUND, round)
NB_UNARY_DEF(LOGICAL_NOT, logical_not) NB_UNARY_DEF(GELU, gelu) NB_UNARY_DEF(GELU_TANH, gelu_tanh)
#undef NB_UNARY_DEF

nb_tensor *nb_leaky_relu(nb_tensor *x, double slope) { return nb__own(nb__unary(NB_OP_LEAKY_RELU, x, slope, 0)); }
nb_tensor *nb_elu(nb_tensor *x, double alpha) { return nb__own(nb__unary(NB_OP_ELU, x, alpha, 0)); }
nb_tensor *nb_softplus(nb_tensor *x, double beta, double threshold) {
    if (x && !(beta != 0)) {
        nb__error(NB_ERR_ARG, "softplus: beta must be nonzero, got %g", beta);
        return NULL;
    }
    return nb__own(nb__unary(NB_OP_SOFTPLUS, x, beta, threshold));
}
nb_tensor *nb_clamp(nb_tensor *x, double lo, double hi) {
    if (x && (lo != lo || hi != hi)) {
        nb__error(NB_ERR_ARG, "clamp: bounds must not be NaN (lo=%g, hi=%g)", lo, hi);
        return NULL;
    }
    return nb__own(nb__unary(NB_OP_CLAMP, x, lo, hi));
}

/* ---- public binary ops: tensor, float-scalar and int-scalar forms ---- */
/* a (op) the C number f, or the C integer i when is_int (kept exact, never through double) */
static nb_tensor *with_scalar(nb_op op, nb_tensor *a, double f, bool is_int, int64_t i) {
    NB_CHECK_ARG(nb__ops[op].name, a);
    nb_tensor *s = is_int ? nb__weak_int(i, a->storage->device) : nb__weak_scalar(f, a->storage->device);
    nb_tensor *r = s ? nb__binary(op, a, s) : NULL;
    nb_release(s);
    return nb__own(r);
}

#define NB_BINARY_DEF(E, name)                                                                  \
    nb_tensor *nb_##name##_t(nb_tensor *a, nb_tensor *b) { return nb__own(nb__binary(NB_OP_##E, a, b)); } \
    nb_tensor *nb_##name##_sf(nb_tensor *a, double b) { return with_scalar(NB_OP_##E, a, b, false, 0); } \
    nb_tensor *nb_##name##_si(nb_tensor *a, int64_t b) { return with_scalar(NB_OP_##E, a, 0, true, b); }
NB_BINARY_DEF(ADD, add) NB_BINARY_DEF(SUB, sub) NB_BINARY_DEF(MUL, mul) NB_BINARY_DEF(DIV, div)
NB_BINARY_DEF(POW, pow) NB_BINARY_DEF(MAXIMUM, maximum) NB_BINARY_DEF(MINIMUM, minimum)
NB_BINARY_DEF(ATAN2, atan2) NB_BINARY_DEF(REMAINDER, remainder) NB_BINARY_DEF(EQ, eq)
NB_BINARY_DEF(NE, ne) NB_BINARY_DEF(LT, lt) NB_BINARY_DEF(LE, le) NB_BINARY_DEF(GT, gt)
NB_BINARY_DEF(GE, ge) NB_BINARY_DEF(LOGICAL_AND, logical_and) NB_BINARY_DEF(LOGICAL_OR, logical_or)
NB_BINARY_DEF(LOGICAL_XOR, logical_xor) NB_BINARY_DEF(FMOD, fmod)
#undef NB_BINARY_DEF

/* ---- where / masked_fill ---- */
static int infer_where(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)op;
    (void)n;
    (void)attrs;
    nb_tensor *c = in[0], *a = in[1], *b = in[2];
    if (!nb__backend_common("where", in, 3)) return -1;
    int64_t s1[NB_MAX_DIMS];
    int n1 = nb__broadcast_shapes("where", c->shape, c->ndim, a->shape, a->ndim, s1);
    if (n1 < 0) return -1;
    m->ndim = nb__broadcast_shapes("where", s1, n1, b->shape, b->ndim, m->shape);
    if (m->ndim < 0) return -1;
    m->dtype = promote(a, b);
    m->weak = false;
    return 1;
}

static nb_status exec_where(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m, int nout,
                            nb_tensor **out) {
    (void)op;
    (void)n;
    (void)attrs;
    (void)nout;
    nb_tensor *k[3];
    if (!kernel_operands(k, in, (nb_dtype[]){NB_DTYPE_COUNT, m->dtype, m->dtype}, 3, m->shape, m->ndim))
        return nb_last_status();
    nb_tensor *r = nb__meta_new(m, in[1]->storage->device);
    if (r && nb__backend_of(in[1])->where(r, k[0], k[1], k[2]) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    release_all(k, 3);
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_where = {infer_where, exec_where};

nb_tensor *nb__where(nb_tensor *c, nb_tensor *a, nb_tensor *b) {
    NB_CHECK_ARG("where", c);
    NB_CHECK_ARG("where", a);
    NB_CHECK_ARG("where", b);
    return nb__apply(NB_OP_WHERE, (nb_tensor *[]){c, a, b}, 3, NULL);
}

nb_tensor *nb_where(nb_tensor *c, nb_tensor *a, nb_tensor *b) { return nb__own(nb__where(c, a, b)); }

nb_tensor *nb_masked_fill(nb_tensor *x, nb_tensor *mask, double value) {
    NB_CHECK_ARG("masked_fill", x);
    NB_CHECK_ARG("masked_fill", mask);
    int64_t shape[NB_MAX_DIMS];
    int nd = nb__broadcast_shapes("masked_fill", x->shape, x->ndim, mask->shape, mask->ndim, shape);
    if (nd < 0) return NULL;
    if (nd != x->ndim || memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nd) != 0) {
        nb__error(NB_ERR_SHAPE, "masked_fill: mask %s does not broadcast to input %s",
                  NB_SHAPE_STR(mask), NB_SHAPE_STR(x));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    /* value converted into x's dtype as nb_full does (float to integer saturates) */
    nb_tensor *v = nb__own(nb__full_on(NULL, 0, value, x->dtype, x->storage->device));
    NB_COMPOSITE_RETURN(nb_where(mask, v, x));
}
