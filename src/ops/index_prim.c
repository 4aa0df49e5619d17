/*
 * index_prim.c — the indexing and joining primitives with kernels and
 * derivative rules: gather, scatter_add (infer: shapes and index dtype from
 * metadata; execute: the index range check and the kernel), cat, constant pad.
 * (Composites built on them live in index.c.)
 */
#include "../backend/backend.h"

#include <string.h>

nb_status nb__index_error(const char *op, int64_t index, int64_t size) {
    return nb__error(NB_ERR_INDEX, "%s: index %lld out of range [0, %lld)", op, (long long)index, (long long)size);
}

nb_tensor *nb__index_i64(const char *op, nb_tensor *index) {
    if (!nb__check_concrete(op, index)) return NULL;
    nb_tensor *ix = nb__to_dtype(index, NB_I64);
    if (ix && !nb_is_contiguous(ix)) {
        nb_tensor *c = nb__tensor_new(ix->shape, ix->ndim, NB_I64, ix->storage->device);
        if (c && nb__backend_of(ix)->copy(c, ix) != NB_OK) {
            nb_release(c);
            c = NULL;
        }
        nb_release(ix);
        ix = c;
    }
    return ix;
}

nb_tensor *nb__checked_index(const char *op, nb_tensor *index, int64_t size) {
    nb_tensor *ix = nb__index_i64(op, index);
    if (!ix) return NULL;
    const int64_t *p = (const int64_t *)nb__ptr(ix);
    int64_t n = nb__numel(ix);
    /* blocks without an early exit (the loop vectorizes); a block that holds a bad index is searched for
     * the first one, which the message names */
    for (int64_t b = 0; b < n; b += 4096) {
        int64_t e = n - b < 4096 ? n : b + 4096;
        bool bad = false;
        for (int64_t i = b; i < e; i++) bad |= (uint64_t)p[i] >= (uint64_t)size; /* negatives wrap high */
        for (int64_t i = b; bad && i < e; i++)
            if ((uint64_t)p[i] >= (uint64_t)size) {
                nb__index_error(op, p[i], size);
                nb_release(ix);
                return NULL;
            }
    }
    return ix;
}

/* The name errors of a gather / scatter_add carry: attrs->sub is the public op the
 * primitive runs for (a composite such as embedding; 0: the primitive op itself). */
static const char *err_name(nb_op op, const nb_attrs *at) { return nb__ops[at->sub ? at->sub : (int)op].name; }

static bool index_dtype_ok(const char *op, const nb_tensor *index) {
    if (!nb_dtype_is_float(index->dtype) && index->dtype != NB_BOOL) return true;
    nb__error(NB_ERR_DTYPE, "%s: index must have an integer dtype, got %s", op, nb_dtype_name(index->dtype));
    return false;
}

/* Index extent i beyond input extent x.  While tracing, unequal dims of which one is
 * symbolic cannot be compared: they pass here and the run-time infer (concrete) decides. */
static bool dim_exceeds(int64_t i, int64_t x) { return !nb__dim_sym(i) && !nb__dim_sym(x) && i > x; }

/* GATHER: in {x, index}; attrs axes[0] (normalized), sub (the op named in errors). */
static int infer_gather(nb_op op, nb_tensor *const *in, int n, nb_attrs *at, nb_meta *m) {
    (void)n;
    const char *name = err_name(op, at);
    nb_tensor *x = in[0], *index = in[1];
    int a = nb__axis(name, at->axes[0], x->ndim);
    if (a < 0) return -1;
    at->axes[0] = a;
    if (index->ndim != x->ndim) {
        nb__error(NB_ERR_SHAPE, "%s: index %s must have the rank of input %s", name, NB_SHAPE_STR(index), NB_SHAPE_STR(x));
        return -1;
    }
    for (int d = 0; d < x->ndim; d++)
        if (d != a && dim_exceeds(index->shape[d], x->shape[d])) {
            nb__error(NB_ERR_SHAPE, "%s: index %s exceeds input %s at axis %d", name, NB_SHAPE_STR(index),
                      NB_SHAPE_STR(x), d);
            return -1;
        }
    if (!nb__backend_common(name, in, 2) || !index_dtype_ok(name, index)) return -1;
    nb__meta_of(m, index);
    m->dtype = x->dtype;
    m->weak = false;
    return 1;
}

static nb_status exec_gather(nb_op op, nb_tensor *const *in, int n, const nb_attrs *at, const nb_meta *m, int nout,
                             nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *x = in[0];
    int a = at->axes[0];
    nb_tensor *ix = nb__checked_index(err_name(op, at), in[1], x->shape[a]);
    nb_tensor *r = ix ? nb__meta_new(m, x->storage->device) : NULL;
    if (r && nb__backend_of(x)->gather(r, x, a, ix) != NB_OK) {
        nb_release(r);
        r = NULL;
    }
    nb_release(ix);
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_gather = {infer_gather, exec_gather};

nb_tensor *nb__gather(nb_op name_op, nb_tensor *x, int axis, nb_tensor *index) {
    const char *name = nb__ops[name_op].name;
    NB_CHECK_ARG(name, x);
    NB_CHECK_ARG(name, index);
    nb_attrs at = {.naxes = 1, .axes = {axis}, .sub = (int)name_op};
    return nb__apply(NB_OP_GATHER, (nb_tensor *[]){x, index}, 2, &at);
}

nb_tensor *nb_gather(nb_tensor *x, int axis, nb_tensor *index) {
    return nb__own(nb__gather(NB_OP_GATHER, x, axis, index));
}

/* SCATTER_ADD: in {x, index, src}; attrs as GATHER's. */
static int infer_scatter_add(nb_op op, nb_tensor *const *in, int n, nb_attrs *at, nb_meta *m) {
    (void)n;
    const char *name = err_name(op, at);
    nb_tensor *x = in[0], *index = in[1], *src = in[2];
    int a = nb__axis(name, at->axes[0], x->ndim);
    if (a < 0) return -1;
    at->axes[0] = a;
    if (index->ndim != x->ndim || src->ndim != x->ndim) {
        nb__error(NB_ERR_SHAPE, "%s: input %s, index %s and src %s must share a rank", name, NB_SHAPE_STR(x),
                  NB_SHAPE_STR(index), NB_SHAPE_STR(src));
        return -1;
    }
    for (int d = 0; d < x->ndim; d++)
        if (dim_exceeds(index->shape[d], src->shape[d]) || (d != a && dim_exceeds(index->shape[d], x->shape[d]))) {
            nb__error(NB_ERR_SHAPE, "%s: index %s exceeds src %s or input %s at axis %d", name, NB_SHAPE_STR(index),
                      NB_SHAPE_STR(src), NB_SHAPE_STR(x), d);
            return -1;
        }
    if (src->dtype != x->dtype) {
        nb__error(NB_ERR_DTYPE, "%s: src dtype %s differs from input dtype %s", name, nb_dtype_name(src->dtype),
                  nb_dtype_name(x->dtype));
        return -1;
    }
    if (!nb__backend_common(name, in, 3) || !index_dtype_ok(name, index)) return -1;
    nb__meta_of(m, x);
    m->weak = false;
    return 1;
}

static nb_status exec_scatter_add(nb_op op, nb_tensor *const *in, int n, const nb_attrs *at, const nb_meta *m,
                                  int nout, nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_tensor *x = in[0], *index = in[1], *src = in[2];
    const nb_backend *be = nb__backend_of(x);
    int a = at->axes[0];
    nb_tensor *ix = nb__checked_index(err_name(op, at), index, x->shape[a]);
    /* src restricted to index's extent */
    nb_tensor *srcv = ix ? nb__tensor_view_of(src->storage, index->shape, src->stride, src->ndim, src->offset, src->dtype)
                         : NULL;
    nb_tensor *r = srcv ? nb__meta_new(m, x->storage->device) : NULL;
    if (r && (be->copy(r, x) != NB_OK || be->scatter_add(r, a, ix, srcv) != NB_OK)) {
        nb_release(r);
        r = NULL;
    }
    nb_release(srcv);
    nb_release(ix);
    out[0] = r;
    return r ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_scatter_add = {infer_scatter_add, exec_scatter_add};

nb_tensor *nb__scatter_add(nb_op name_op, nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src) {
    const char *name = nb__ops[name_op].name;
    NB_CHECK_ARG(name, x);
    NB_CHECK_ARG(name, index);
    NB_CHECK_ARG(name, src);
    nb_attrs at = {.naxes = 1, .axes = {axis}, .sub = (int)name_op};
    return nb__apply(NB_OP_SCATTER_ADD, (nb_tensor *[]){x, index, src}, 3, &at);
}

nb_tensor *nb_scatter_add(nb_tensor *x, int axis, nb_tensor *index, nb_tensor *src) {
    return nb__own(nb__scatter_add(NB_OP_SCATTER_ADD, x, axis, index, src));
}

/* cat: the inputs agree on every axis but attrs axes[0] (normalized), whose sizes add up
 * (symbolic sizes through nb__dim_add); the dtype is their promotion. */
static int infer_cat(nb_op op, nb_tensor *const *ts, int n, nb_attrs *attrs, nb_meta *m) {
    (void)op;
    const nb_tensor *t0 = ts[0];
    int a = nb__axis("cat", attrs->axes[0], t0->ndim);
    if (a < 0 || !nb__backend_common("cat", ts, n)) return -1;
    nb__meta_of(m, t0);
    m->weak = false;
    m->shape[a] = 0;
    for (int i = 0; i < n; i++) {
        const nb_tensor *t = ts[i];
        bool ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t0->ndim; d++) ok = d == a || t->shape[d] == t0->shape[d];
        if (!ok) {
            nb__error(NB_ERR_SHAPE, "cat: tensor %d has shape %s, incompatible with %s along axis %d", i,
                      NB_SHAPE_STR(t), NB_SHAPE_STR(t0), a);
            return -1;
        }
        if (nb__dim_sym(m->shape[a]) || nb__dim_sym(t->shape[a])) {
            if ((m->shape[a] = nb__dim_add("cat", m->shape[a], t->shape[a])) == -1) return -1;
        } else
            m->shape[a] += t->shape[a];
        m->dtype = nb_promote_types(m->dtype, t->dtype);
    }
    attrs->axes[0] = a;
    return 1;
}

static nb_status exec_cat(nb_op op, nb_tensor *const *ts, int n, const nb_attrs *attrs, const nb_meta *m, int nout,
                          nb_tensor **res) {
    (void)op;
    (void)nout;
    int a = attrs->axes[0];
    const nb_backend *be = nb__backend_of(ts[0]);
    nb_tensor *out = nb__meta_new(m, ts[0]->storage->device);
    if (!out) return nb_last_status();
    int64_t off = 0;
    for (int i = 0; i < n && out; i++) {
        int64_t vs[NB_MAX_DIMS];
        memcpy(vs, m->shape, sizeof vs);
        vs[a] = ts[i]->shape[a];
        nb_tensor *v = nb__tensor_view_of(out->storage, vs, out->stride, out->ndim, off * out->stride[a], m->dtype);
        if (!v || be->copy(v, ts[i]) != NB_OK) {
            nb_release(out);
            out = NULL;
        }
        nb_release(v);
        off += ts[i]->shape[a];
    }
    res[0] = out;
    return out ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_cat = {infer_cat, exec_cat};

/* The dispatch point takes at most NB_CAT_MAX operands: a cat of more is one of eager
 * application (one tape node, as for fewer) or, under an interpreter or with symbolic
 * operands, a cat of cats of at most NB_CAT_MAX each. */
#define NB_CAT_MAX 8

static nb_tensor *cat_many(nb_tensor *const *ts, int n, nb_attrs *at) {
    bool eager = !nb__interp_top();
    for (int i = 0; eager && i < n; i++) eager = !nb__is_symbolic(ts[i]);
    if (eager) {
        nb_meta m;
        nb_tensor *out;
        if (infer_cat(NB_OP_CAT, ts, n, at, &m) < 0 || nb__eager_apply(NB_OP_CAT, ts, n, at, &m, 1, &out) != NB_OK)
            return NULL;
        return nb__own(out);
    }
    nb_tensor *parts[NB_CAT_MAX];
    int k = 0, per = (n + NB_CAT_MAX - 1) / NB_CAT_MAX;
    NB_COMPOSITE_BEGIN();
    for (int i = 0; i < n; i += per, k++)
        if (!(parts[k] = nb_cat(ts + i, n - i < per ? n - i : per, at->axes[0]))) break;
    NB_COMPOSITE_RETURN(k * per >= n ? nb_cat(parts, k, at->axes[0]) : NULL);
}

nb_tensor *nb_cat(nb_tensor *const *ts, int n, int axis) {
    if (!ts) {
        nb__error(NB_ERR_NULL, "cat: the tensor list is NULL");
        return NULL;
    }
    if (n <= 0) {
        nb__error(NB_ERR_ARG, "cat: expected at least one tensor, got %d", n);
        return NULL;
    }
    for (int i = 0; i < n; i++)
        if (!ts[i]) {
            nb__error(NB_ERR_NULL, "cat: tensor %d is NULL", i);
            return NULL;
        }
    nb_attrs at = {.naxes = 1, .axes = {axis}};
    if (n > NB_CAT_MAX) return cat_many(ts, n, &at);
    return nb__own(nb__apply(NB_OP_CAT, ts, n, &at));
}

/* Constant pad (negative pads crop); attrs i[0..ni) the widths in torch order (last axis
 * first), f[0] the value.  Symbolic sizes pad through nb__dim_add. */
static int infer_pad(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)op;
    (void)n;
    nb_tensor *x = in[0];
    int npad = attrs->ni;
    if (!nb__backend_common("pad", &x, 1)) return -1;
    if (npad < 0 || npad % 2 || npad / 2 > x->ndim) {
        nb__error(NB_ERR_ARG, "pad: %d pad widths for a tensor of rank %d (need an even count <= %d)", npad, x->ndim,
                  2 * x->ndim);
        return -1;
    }
    nb__meta_of(m, x);
    m->weak = false;
    for (int k = 0; k < npad / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t l = attrs->i[2 * k], r = attrs->i[2 * k + 1], *s = &m->shape[d];
        if (nb__dim_sym(*s)) {
            if ((*s = nb__dim_add("pad", *s, l)) == -1 || (*s = nb__dim_add("pad", *s, r)) == -1) return -1;
            continue;
        }
        if (__builtin_add_overflow(x->shape[d], l, s) || __builtin_add_overflow(*s, r, s)) {
            nb__error(NB_ERR_OVERFLOW, "pad: padding (%lld, %lld) overflows axis %d of %s", (long long)l, (long long)r,
                      d, NB_SHAPE_STR(x));
            return -1;
        }
        if (*s < 0) {
            nb__error(NB_ERR_ARG, "pad: padding (%lld, %lld) leaves axis %d of %s with negative size", (long long)l,
                      (long long)r, d, NB_SHAPE_STR(x));
            return -1;
        }
    }
    return 1;
}

static nb_status exec_pad(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m, int nout,
                          nb_tensor **res) {
    (void)op;
    (void)n;
    (void)nout;
    nb_tensor *x = in[0];
    int64_t src_lo[NB_MAX_DIMS] = {0}, dst_lo[NB_MAX_DIMS] = {0}, len[NB_MAX_DIMS];
    memcpy(len, x->shape, sizeof len);
    for (int k = 0; k < attrs->ni / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t l = attrs->i[2 * k], r = attrs->i[2 * k + 1];
        src_lo[d] = l < 0 ? -l : 0;
        dst_lo[d] = l > 0 ? l : 0;
        len[d] = x->shape[d] - src_lo[d] - (r < 0 ? -r : 0);
        if (len[d] < 0) len[d] = 0;
    }
    nb_tensor *out = nb__full_on(m->shape, m->ndim, attrs->f[0], x->dtype, x->storage->device);
    if (!out) return nb_last_status();
    int64_t so = x->offset, dof = 0;
    bool any = true;
    for (int d = 0; d < x->ndim; d++) {
        so += src_lo[d] * x->stride[d];
        dof += dst_lo[d] * out->stride[d];
        any = any && len[d] > 0;
    }
    if (any) {
        nb_tensor *sv = nb__tensor_view_of(x->storage, len, x->stride, x->ndim, so, x->dtype);
        nb_tensor *dv = sv ? nb__tensor_view_of(out->storage, len, out->stride, out->ndim, dof, out->dtype) : NULL;
        nb_status st = dv ? nb__backend_of(x)->copy(dv, sv) : NB_ERR_OOM;
        nb_release(sv);
        nb_release(dv);
        if (st != NB_OK) {
            nb_release(out);
            return st;
        }
    }
    res[0] = out;
    return NB_OK;
}

const nb_kind_impl nb__kind_pad = {infer_pad, exec_pad};

nb_tensor *nb__pad_constant(nb_tensor *x, const int64_t *pads, int npad, double value) {
    NB_CHECK_ARG("pad", x);
    if (npad < 0 || npad > 2 * NB_MAX_DIMS || (npad && !pads)) {
        nb__error(NB_ERR_ARG, "pad: %d pad widths for a tensor of rank %d (need an even count <= %d)", npad, x->ndim,
                  2 * x->ndim);
        return NULL;
    }
    nb_attrs at = {.ni = npad, .f = {value}};
    if (npad) memcpy(at.i, pads, sizeof(int64_t) * (size_t)npad);
    return nb__apply(NB_OP_PAD, &x, 1, &at);
}
