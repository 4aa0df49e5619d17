/*
 * linalg.c — small batched linear algebra (O11): the LINALG kind (cholesky,
 * solve_triangular, solve, slogdet: infer from metadata; execute in double
 * through the backend's linalg entry, then the typed error naming the first
 * matrix of the batch without a result) and the ops built from them and from
 * views (tril, triu, diag, diag_embed, trace, det, logdet, inv).  Semantics
 * and names follow torch.linalg.
 */
#include "../backend/backend.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the LINALG kind ---- */

/* a: rank >= 2, square in its last two dims, f32 or f64. */
static bool square_float(const char *op, const nb_tensor *a) {
    if (a->dtype != NB_F32 && a->dtype != NB_F64) {
        nb__error(NB_ERR_DTYPE, "%s: expected a float32 or float64 matrix, got %s", op, nb_dtype_name(a->dtype));
        return false;
    }
    if (a->ndim < 2 || a->shape[a->ndim - 1] != a->shape[a->ndim - 2]) {
        nb__error(NB_ERR_SHAPE, "%s: expected square matrices [..., n, n], got %s", op, NB_SHAPE_STR(a));
        return false;
    }
    return true;
}

/* CHOLESKY, SLOGDET: in {a}; SOLVE, SOLVE_TRIANGULAR: in {a, b}, b [..., n, k] (batch dims
 * broadcast with a's), attrs.sub the triangular flags (NB_LA_*).  SLOGDET has two outputs:
 * log|det| (the differentiable one) and the sign. */
static int infer_linalg(nb_op op, nb_tensor *const *in, int n, nb_attrs *attrs, nb_meta *m) {
    (void)attrs;
    const char *name = nb__ops[op].name;
    nb_tensor *a = in[0];
    if (!square_float(name, a) || !nb__backend_common(name, in, n)) return -1;
    if (!nb__backend_of(a)->linalg) {
        nb__error(NB_ERR_UNSUPPORTED, "%s: backend '%s' has no linear-algebra kernels", name, nb__backend_of(a)->name);
        return -1;
    }
    nb__meta_of(&m[0], a);
    m[0].weak = false;
    if (op == NB_OP_CHOLESKY) return 1;
    if (op == NB_OP_SLOGDET) {
        m[0].ndim -= 2;
        m[1] = m[0];
        return 2;
    }
    nb_tensor *b = in[1];
    if (b->dtype != a->dtype) {
        nb__error(NB_ERR_DTYPE, "%s: A and B must share a dtype, got %s and %s", name, nb_dtype_name(a->dtype),
                  nb_dtype_name(b->dtype));
        return -1;
    }
    if (b->ndim < 2 || b->shape[b->ndim - 2] != a->shape[a->ndim - 1]) {
        nb__error(NB_ERR_SHAPE, "%s: B %s must be [..., n, k] for A %s", name, NB_SHAPE_STR(b), NB_SHAPE_STR(a));
        return -1;
    }
    int nbat = nb__broadcast_shapes(name, a->shape, a->ndim - 2, b->shape, b->ndim - 2, m[0].shape);
    if (nbat < 0) return -1;
    if (nbat + 2 > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "%s: result rank exceeds %d", name, NB_MAX_DIMS);
        return -1;
    }
    m[0].ndim = nbat + 2;
    m[0].shape[nbat] = b->shape[b->ndim - 2];
    m[0].shape[nbat + 1] = b->shape[b->ndim - 1];
    return 1;
}

/* t viewed with the batch dims bat[0..nbat), contiguous and f64: t itself when it is so already,
 * else a copy; NULL with the error. */
static nb_tensor *f64_batch(nb_tensor *t, const int64_t *bat, int nbat) {
    nb_tensor *e = nb__batch_expand(t, bat, nbat);
    if (e && e->dtype == NB_F64 && nb_is_contiguous(e)) return e;
    nb_tensor *c = e ? nb__tensor_new(e->shape, e->ndim, NB_F64, t->storage->device) : NULL;
    if (c && nb__backend_of(t)->copy(c, e) != NB_OK) {
        nb_release(c);
        c = NULL;
    }
    nb_release(e);
    return c;
}

/* The typed error of matrix i of the batch bat[0..nbat) (a's shape in the message). */
static nb_status no_result(nb_op op, int64_t i, int64_t info, const int64_t *bat, int nbat, const nb_tensor *a) {
    char where[192] = "";
    if (nbat > 0) {
        int64_t idx[NB_MAX_DIMS], r = i;
        for (int d = nbat - 1; d >= 0; d--) {
            idx[d] = r % bat[d];
            r /= bat[d];
        }
        snprintf(where, sizeof where, " %s of the batch %s", NB_DIMS_STR(idx, nbat), NB_DIMS_STR(bat, nbat));
    }
    const char *name = nb__ops[op].name;
    if (op == NB_OP_CHOLESKY)
        return nb__error(NB_ERR_ARG, "%s: matrix%s (input %s) is not positive definite: its leading minor of "
                         "order %lld is not positive", name, where, NB_SHAPE_STR(a), (long long)info);
    return nb__error(NB_ERR_ARG, "%s: matrix%s (A %s) is singular: %s %lld is zero", name, where, NB_SHAPE_STR(a),
                     op == NB_OP_SOLVE ? "the pivot of column" : "the diagonal element", (long long)info - 1);
}

static nb_status exec_linalg(nb_op op, nb_tensor *const *in, int n, const nb_attrs *attrs, const nb_meta *m,
                             int nout, nb_tensor **out) {
    nb_tensor *a = in[0];
    const nb_backend *be = nb__backend_of(a);
    nb_device dev = a->storage->device;
    /* the batch: the result's leading dims (SLOGDET: all of them) */
    int nbat = op == NB_OP_SLOGDET ? m[0].ndim : m[0].ndim - 2;
    const int64_t *bat = m[0].shape;
    int64_t batch = 1;
    for (int d = 0; d < nbat; d++) batch *= bat[d];
    nb_tensor *t[5] = {f64_batch(a, bat, nbat), NULL, NULL, NULL, NULL}; /* a, b, out, out2, info */
    nb_status st = t[0] ? NB_OK : nb_last_status();
    if (st == NB_OK && n > 1 && !(t[1] = f64_batch(in[1], bat, nbat))) st = nb_last_status();
    for (int j = 0; st == NB_OK && j < nout; j++)
        if (!(t[2 + j] = nb__tensor_new(m[j].shape, m[j].ndim, NB_F64, dev))) st = nb_last_status();
    if (st == NB_OK && !(t[4] = nb__tensor_new(&batch, 1, NB_I64, dev))) st = nb_last_status();
    if (st == NB_OK) st = be->linalg(op, attrs->sub, t[0], t[1], t[2], t[3], t[4]);
    const int64_t *info = st == NB_OK ? (const int64_t *)nb__ptr(t[4]) : NULL;
    for (int64_t i = 0; info && i < batch; i++)
        if (info[i]) {
            st = no_result(op, i, info[i], bat, nbat, a);
            break;
        }
    for (int j = 0; j < nout; j++) {
        out[j] = st == NB_OK ? nb__meta_new(&m[j], dev) : NULL;
        if (st == NB_OK && (!out[j] || be->copy(out[j], t[2 + j]) != NB_OK)) st = nb_last_status();
    }
    if (st != NB_OK)
        for (int j = 0; j < nout; j++) {
            nb_release(out[j]);
            out[j] = NULL;
        }
    for (int j = 0; j < 5; j++) nb_release(t[j]);
    return st;
}

const nb_kind_impl nb__kind_linalg = {infer_linalg, exec_linalg};

/* ---- the primitives' front-ends ---- */

nb_tensor *nb_cholesky(nb_tensor *a, bool upper) {
    NB_CHECK_ARG("cholesky", a);
    nb_tensor *l = nb__own(nb__apply(NB_OP_CHOLESKY, &a, 1, &(nb_attrs){0}));
    return upper && l ? nb_transpose(l, -2, -1) : l; /* U = L^T */
}

nb_tensor *nb_solve_triangular(nb_tensor *a, nb_tensor *b, bool upper, bool transpose, bool unitriangular) {
    NB_CHECK_ARG("solve_triangular", a);
    NB_CHECK_ARG("solve_triangular", b);
    nb_attrs at = {.sub = (upper ? NB_LA_UPPER : 0) | (transpose ? NB_LA_TRANS : 0) | (unitriangular ? NB_LA_UNIT : 0)};
    return nb__own(nb__apply(NB_OP_SOLVE_TRIANGULAR, (nb_tensor *[]){a, b}, 2, &at));
}

/* torch.linalg.solve's rule for a vector right-hand side: b [n], or b [..., n] with A's batch. */
static bool vector_rhs(const nb_tensor *a, const nb_tensor *b) {
    if (b->ndim == 1) return true;
    return a->ndim >= 2 && b->ndim == a->ndim - 1 && !memcmp(b->shape, a->shape, sizeof(int64_t) * (size_t)b->ndim);
}

nb_tensor *nb_solve(nb_tensor *a, nb_tensor *b) {
    NB_CHECK_ARG("solve", a);
    NB_CHECK_ARG("solve", b);
    if (!vector_rhs(a, b)) return nb__own(nb__apply(NB_OP_SOLVE, (nb_tensor *[]){a, b}, 2, &(nb_attrs){0}));
    NB_COMPOSITE_BEGIN();
    nb_tensor *col = nb_unsqueeze(b, -1);
    nb_tensor *x = col ? nb__own(nb__apply(NB_OP_SOLVE, (nb_tensor *[]){a, col}, 2, &(nb_attrs){0})) : NULL;
    NB_COMPOSITE_RETURN(nb_squeeze(x, -1));
}

nb_status nb_slogdet(nb_tensor *a, nb_tensor **sign, nb_tensor **logabsdet) {
    nb__error_frame fr;
    nb__own_begin(&fr);
    nb_status st = a && sign && logabsdet ? NB_OK : nb__error(NB_ERR_NULL, "slogdet: argument is NULL");
    nb_tensor *o[NB_MAX_OUTS] = {NULL, NULL};
    if (st == NB_OK && nb__apply_n(NB_OP_SLOGDET, &a, 1, &(nb_attrs){0}, o) < 0) st = nb_last_status();
    if (st == NB_OK) {
        *logabsdet = nb__own(o[0]);
        *sign = nb__own(o[1]);
    }
    return nb__own_end(&fr, "slogdet", st);
}

/* ---- built from them ---- */

static nb_tensor *triangle(const char *op, nb_tensor *x, int64_t k, bool lower) {
    NB_CHECK_ARG(op, x);
    if (x->ndim < 2) {
        nb__error(NB_ERR_SHAPE, "%s: expected [..., n, m], got %s", op, NB_SHAPE_STR(x));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    nb_tensor *b = nb__index_diff(x, x->shape[x->ndim - 2], x->shape[x->ndim - 1]), *keep = lower ? nb_le(b, (double)k) : nb_ge(b, (double)k);
    NB_COMPOSITE_RETURN(nb_where(keep, x, nb_zeros_like(x)));
}

nb_tensor *nb_tril(nb_tensor *x, int64_t k) { return triangle("tril", x, k, true); }
nb_tensor *nb_triu(nb_tensor *x, int64_t k) { return triangle("triu", x, k, false); }

nb_tensor *nb_diag_embed(nb_tensor *x, int64_t offset, int dim1, int dim2) {
    NB_CHECK_ARG("diag_embed", x);
    int nd = x->ndim + 1;
    int d1 = nb__axis("diag_embed", dim1, nd), d2 = d1 < 0 ? -1 : nb__axis("diag_embed", dim2, nd);
    if (d2 < 0) return NULL;
    if (d1 == d2) {
        nb__error(NB_ERR_AXIS, "diag_embed: dim1 and dim2 are both %d", d1);
        return NULL;
    }
    if (x->ndim < 1 || nd > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "diag_embed: expected rank 1 to %d, got %s", NB_MAX_DIMS - 1, NB_SHAPE_STR(x));
        return NULL;
    }
    /* the base: x's leading dims in order, the two matrix dims of size n + |offset| at d1, d2;
     * its diagonal view (offset, d1, d2) has x's shape, and the adjoint of that view places x */
    if (offset == INT64_MIN) {
        nb__error(NB_ERR_OVERFLOW, "diag_embed: offset %lld overflows", (long long)offset);
        return NULL;
    }
    int64_t size = nb__dim_add("diag_embed", x->shape[x->ndim - 1], offset < 0 ? -offset : offset);
    if (size == -1) return NULL;
    int64_t base[NB_MAX_DIMS];
    for (int d = 0, k = 0; d < nd; d++) base[d] = d == d1 || d == d2 ? size : x->shape[k++];
    nb_attrs va = {.ni = 3, .i = {offset, d1, d2}};
    return nb__own(nb__view_grad(x, NB_OP_DIAGONAL, &va, base, nd));
}

nb_tensor *nb_diag(nb_tensor *x, int64_t offset) {
    NB_CHECK_ARG("diag", x);
    if (x->ndim == 1) return nb_diag_embed(x, offset, 0, 1);
    if (x->ndim == 2) return nb_diagonal(x, offset, 0, 1);
    nb__error(NB_ERR_SHAPE, "diag: expected a vector or a matrix, got %s", NB_SHAPE_STR(x));
    return NULL;
}

nb_tensor *nb_trace(nb_tensor *x) {
    NB_CHECK_ARG("trace", x);
    if (x->ndim < 2) {
        nb__error(NB_ERR_SHAPE, "trace: expected [..., n, m], got %s", NB_SHAPE_STR(x));
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    NB_COMPOSITE_RETURN(nb_sum(nb_diagonal(x, 0, -2, -1), (int[]){-1}, 1, false));
}

/* det (sign · exp(log|det|)) or logdet (log|det|, -inf for a singular and NaN for a negative
 * determinant, as torch) from slogdet. */
static nb_tensor *from_slogdet(nb_tensor *a, bool log) {
    nb_tensor *s, *l;
    NB_COMPOSITE_BEGIN();
    if (nb_slogdet(a, &s, &l) != NB_OK) {
        nb_scope_end();
        return NULL;
    }
    if (!log) NB_COMPOSITE_RETURN(nb_mul(s, nb_exp(l)));
    /* NaN (and no gradient, as torch) for a negative determinant; log(0) = -inf for a singular one */
    nb_tensor *nan = nb__own(nb__full_on(NULL, 0, NAN, l->dtype, l->storage->device));
    NB_COMPOSITE_RETURN(nb_where(nb_lt(s, 0.0), nan, nb_add(l, nb_log(nb_abs(s)))));
}

nb_tensor *nb_det(nb_tensor *a) { return from_slogdet(a, false); }
nb_tensor *nb_logdet(nb_tensor *a) { return from_slogdet(a, true); }

nb_tensor *nb__eye_like(nb_tensor *a) {
    return nb_diag_embed(nb_ones_like(nb_diagonal(a, 0, -2, -1)), 0, -2, -1);
}

nb_tensor *nb_inv(nb_tensor *a) {
    NB_CHECK_ARG("inv", a);
    if (!square_float("inv", a)) return NULL;
    NB_COMPOSITE_BEGIN();
    NB_COMPOSITE_RETURN(nb_solve(a, nb__eye_like(a)));
}
