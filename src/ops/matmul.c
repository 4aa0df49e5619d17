/* matmul.c — NumPy-semantics matmul (1-D promotion, batch broadcasting) over the backend's batched GEMM, addmm (the
 * product plus an addend, added as the backend stores the product), and linear. */
#include "../backend/backend.h"

#include <string.h>

#define DIM_STR(d) nb__dim_str((char[64]){0}, (d))

/* ADDMM's addend c must broadcast to the product's shape m (and share its dtype). */
static int infer_addend(const nb_tensor *a, const nb_tensor *b, const nb_tensor *c, const nb_meta *m) {
    if (c->dtype != m->dtype) {
        nb__error(NB_ERR_DTYPE, "addmm: c must have the operands' dtype %s, got %s", nb_dtype_name(m->dtype),
                  nb_dtype_name(c->dtype));
        return -1;
    }
    bool ok = c->ndim <= m->ndim;
    for (int d = 0; ok && d < c->ndim; d++) {
        int64_t cd = c->shape[c->ndim - 1 - d], md = m->shape[m->ndim - 1 - d];
        ok = cd == md || cd == 1;
    }
    if (!ok) {
        nb__error(NB_ERR_SHAPE, "addmm: c %s does not broadcast to the product's shape %s (a %s @ b %s)",
                  NB_SHAPE_STR(c), NB_DIMS_STR(m->shape, m->ndim), NB_SHAPE_STR(a),
                  NB_SHAPE_STR(b));
        return -1;
    }
    return 1;
}

/* MATMUL: a [A..., m, k] @ b [B..., k, n] -> [broadcast(A, B)..., m, n], of one float dtype.
 * The checks also accept 1-D operands (as NumPy promotes them), so that nb_matmul reports
 * errors on the operands as given before it promotes them; the primitive itself gets
 * rank >= 2.  Dims compare with ==, so equal symbolic dims match.  ADDMM: the same on
 * in[0], in[1] (rank >= 2), and its addend in[2] (infer_addend). */
static int infer_matmul(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)attrs;
    nb_tensor *a = in[0], *b = in[1];
    const char *name = nb__ops[op].name;
    if (op == NB_OP_ADDMM && (a->ndim < 2 || b->ndim < 2)) {
        nb__error(NB_ERR_SHAPE, "addmm: operands must have rank >= 2, got %s and %s", NB_SHAPE_STR(a), NB_SHAPE_STR(b));
        return -1;
    }
    if (a->ndim == 0 || b->ndim == 0) {
        nb__error(NB_ERR_SHAPE, "%s: operands must have rank >= 1, got %s and %s", name, NB_SHAPE_STR(a),
                  NB_SHAPE_STR(b));
        return -1;
    }
    if (a->dtype != b->dtype || !nb_dtype_is_float(a->dtype)) {
        nb__error(NB_ERR_DTYPE, "%s: operands must share one float dtype, got %s and %s", name,
                  nb_dtype_name(a->dtype), nb_dtype_name(b->dtype));
        return -1;
    }
    int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
    if (ka != kb) {
        nb__error(NB_ERR_SHAPE, "%s: inner dimensions differ: %s @ %s (%s vs %s)", name, NB_SHAPE_STR(a),
                  NB_SHAPE_STR(b), DIM_STR(ka), DIM_STR(kb));
        return -1;
    }
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    int nbat = nb__broadcast_shapes(name, a->shape, na, b->shape, nbb, m->shape);
    if (nbat < 0) return -1;
    if (nbat + 2 > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "%s: result rank exceeds %d", name, NB_MAX_DIMS);
        return -1;
    }
    if (!nb__backend_common(name, in, n)) return -1;
    m->ndim = nbat;
    if (a->ndim >= 2) m->shape[m->ndim++] = a->shape[a->ndim - 2];
    if (b->ndim >= 2) m->shape[m->ndim++] = b->shape[b->ndim - 1];
    m->dtype = a->dtype;
    m->weak = false;
    return op == NB_OP_ADDMM ? infer_addend(a, b, in[2], m) : 1;
}

nb_tensor *nb__batch_expand(nb_tensor *t, const int64_t *bat, int nbat) {
    int64_t s[NB_MAX_DIMS];
    memcpy(s, bat, sizeof(int64_t) * (size_t)nbat);
    s[nbat] = t->shape[t->ndim - 2];
    s[nbat + 1] = t->shape[t->ndim - 1];
    if (t->ndim == nbat + 2 && !memcmp(s, t->shape, sizeof(int64_t) * (size_t)t->ndim)) return nb_retain(t);
    return nb__expand_raw(t, s, nbat + 2);
}

/* The product into a fresh result; ADDMM's addend, expanded to the result's shape, and its relu
 * (NB_SUB_RELU) go to the backend's matmul_add, or (a backend without one) are its binary ADD and
 * unary RELU afterwards. */
static nb_status exec_matmul(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m,
                             int nout, nb_tensor **out) {
    (void)n;
    (void)nout;
    bool relu = op == NB_OP_ADDMM && attrs && (attrs->sub & NB_SUB_RELU);
    nb_tensor *a = in[0];
    const nb_backend *be = nb__backend_of(a);
    int nbat = m->ndim - 2;
    nb_tensor *ae = nb__batch_expand(a, m->shape, nbat);
    nb_tensor *be_ = ae ? nb__batch_expand(in[1], m->shape, nbat) : NULL;
    nb_tensor *ce = be_ && op == NB_OP_ADDMM ? nb__expand_raw(in[2], m->shape, m->ndim) : NULL;
    nb_tensor *r = be_ && (op != NB_OP_ADDMM || ce) ? nb__meta_new(m, a->storage->device) : NULL;
    nb_status st = r ? NB_OK : nb_last_status();
    if (r && ce && be->matmul_add) st = be->matmul_add(r, ae, be_, ce, relu);
    else if (r) st = be->matmul(r, ae, be_);
    if (st == NB_OK && ce && !be->matmul_add) st = be->binary(NB_OP_ADD, r, r, ce);
    if (st == NB_OK && relu && !be->matmul_add) st = be->unary(NB_OP_RELU, r, r, 0, 0);
    if (st != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    nb_release(ae);
    nb_release(be_);
    nb_release(ce);
    out[0] = r;
    return st;
}

const nb_kind_impl nb__kind_matmul = {infer_matmul, exec_matmul};

nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b) {
    NB_CHECK_ARG("matmul", a);
    NB_CHECK_ARG("matmul", b);
    if (a->ndim >= 2 && b->ndim >= 2) return nb__own(nb__apply(NB_OP_MATMUL, (nb_tensor *[]){a, b}, 2, NULL));
    /* 1-D operands: checked as given, then promoted to [1, k] / [k, 1] and the added axis dropped */
    nb_meta m;
    if (infer_matmul(NB_OP_MATMUL, (nb_tensor *[]){a, b}, 2, NULL, &m) < 0) return NULL;
    NB_COMPOSITE_BEGIN();
    nb_tensor *a2 = a->ndim == 1 ? nb_unsqueeze(a, 0) : a;
    nb_tensor *b2 = b->ndim == 1 ? nb_unsqueeze(b, 1) : b;
    nb_tensor *r = a2 && b2 ? nb__own(nb__apply(NB_OP_MATMUL, (nb_tensor *[]){a2, b2}, 2, NULL)) : NULL;
    if (r && a->ndim == 1) r = nb_squeeze(r, -2);
    if (r && b->ndim == 1) r = nb_squeeze(r, -1);
    NB_COMPOSITE_RETURN(r);
}

nb_tensor *nb__addmm_act(nb_tensor *c, nb_tensor *a, nb_tensor *b, bool relu) {
    NB_CHECK_ARG("addmm", c);
    NB_CHECK_ARG("addmm", a);
    NB_CHECK_ARG("addmm", b);
    nb_attrs at = {.sub = relu ? NB_SUB_RELU : 0};
    return nb__own(nb__apply(NB_OP_ADDMM, (nb_tensor *[]){a, b, c}, 3, &at));
}

nb_tensor *nb_addmm(nb_tensor *c, nb_tensor *a, nb_tensor *b) { return nb__addmm_act(c, a, b, false); }

/* nb_linear, then relu where asked (nb__linear_relu). */
static nb_tensor *linear(nb_tensor *x, nb_tensor *w, nb_tensor *bias, bool relu) {
    NB_CHECK_ARG("linear", x);
    NB_CHECK_ARG("linear", w);
    if (w->ndim != 2) {
        nb__error(NB_ERR_SHAPE, "linear: weight must be [out, in], got %s", NB_SHAPE_STR(w));
        return NULL;
    }
    /* checked here, so that the message names linear and the weight as given, not its transpose */
    if (x->ndim < 1 || x->shape[x->ndim - 1] != w->shape[1]) {
        nb__error(NB_ERR_SHAPE, "linear: x %s must be [..., in] with in = %lld, the weight's [out, in] = %s",
                  NB_SHAPE_STR(x), (long long)w->shape[1], NB_SHAPE_STR(w));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    /* the bias added as the product is stored; a 1-D x (matmul's vector promotion) or a bias of
     * another dtype (promoted, as nb_add does) by a separate add */
    bool fused = bias && x->ndim >= 2 && bias->dtype == x->dtype;
    nb_tensor *y = fused ? nb__addmm_act(bias, x, nb_t(w), relu) : nb_matmul(x, nb_t(w));
    if (bias && !fused) y = nb_add(y, bias);
    if (relu && !fused) y = nb_relu(y);
    NB_COMPOSITE_RETURN(y);
}

nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *bias) { return linear(x, w, bias, false); }

nb_tensor *nb__linear_relu(nb_tensor *x, nb_tensor *w, nb_tensor *bias) { return linear(x, w, bias, true); }
