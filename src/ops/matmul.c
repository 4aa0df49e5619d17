/* matmul.c — NumPy-semantics matmul (1-D promotion, batch broadcasting) over the backend's batched GEMM, and linear. */
#include "../backend/backend.h"

#include <string.h>

/* MATMUL primitive: a [B..., m, k] @ b [B..., k, n], equal batch shapes. */
static nb_tensor *matmul_prim(nb_tensor *a, nb_tensor *b) {
    const nb_backend *be = nb__backend_common("matmul", (nb_tensor *[]){a, b}, 2);
    if (!be) return NULL;
    int nd = a->ndim;
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd - 1] = b->shape[nd - 1];
    nb_tensor *out = nb__tensor_new(shape, nd, a->dtype, a->storage->device);
    if (!out) return NULL;
    if (be->matmul(out, a, b) != NB_OK) {
        nb_release(out);
        return NULL;
    }
    if (nb__should_record((nb_tensor *[]){a, b}, 2)) out = nb__record(out, NB_OP_MATMUL, (nb_tensor *[]){a, b}, 2, NULL);
    return out;
}

nb_tensor *nb_matmul(nb_tensor *a, nb_tensor *b) {
    NB_CHECK_ARG("matmul", a);
    NB_CHECK_ARG("matmul", b);
    if (a->ndim == 0 || b->ndim == 0) {
        nb__error(NB_ERR_SHAPE, "matmul: operands must have rank >= 1, got %s and %s", NB_SHAPE_STR(a), NB_SHAPE_STR(b));
        return NULL;
    }
    if (a->dtype != b->dtype || !nb_dtype_is_float(a->dtype)) {
        nb__error(NB_ERR_DTYPE, "matmul: operands must share one float dtype, got %s and %s",
                  nb_dtype_name(a->dtype), nb_dtype_name(b->dtype));
        return NULL;
    }
    int64_t ka = a->shape[a->ndim - 1], kb = b->shape[b->ndim >= 2 ? b->ndim - 2 : 0];
    if (ka != kb) {
        nb__error(NB_ERR_SHAPE, "matmul: inner dimensions differ: %s @ %s (%lld vs %lld)", NB_SHAPE_STR(a),
                  NB_SHAPE_STR(b), (long long)ka, (long long)kb);
        return NULL;
    }
    int64_t ba[NB_MAX_DIMS], bb[NB_MAX_DIMS], bs[NB_MAX_DIMS];
    int na = a->ndim > 2 ? a->ndim - 2 : 0, nbb = b->ndim > 2 ? b->ndim - 2 : 0;
    memcpy(ba, a->shape, sizeof(int64_t) * (size_t)na);
    memcpy(bb, b->shape, sizeof(int64_t) * (size_t)nbb);
    int nbat = nb__broadcast_shapes("matmul", ba, na, bb, nbb, bs);
    if (nbat < 0) return NULL;
    if (nbat + 2 > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "matmul: result rank exceeds %d", NB_MAX_DIMS);
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    nb_tensor *a2 = a->ndim == 1 ? nb_unsqueeze(a, 0) : a;
    nb_tensor *b2 = b->ndim == 1 ? nb_unsqueeze(b, 1) : b;
    int64_t sa[NB_MAX_DIMS], sb[NB_MAX_DIMS];
    memcpy(sa, bs, sizeof(int64_t) * (size_t)nbat);
    memcpy(sb, bs, sizeof(int64_t) * (size_t)nbat);
    sa[nbat] = a2->shape[a2->ndim - 2];
    sa[nbat + 1] = a2->shape[a2->ndim - 1];
    sb[nbat] = b2->shape[b2->ndim - 2];
    sb[nbat + 1] = b2->shape[b2->ndim - 1];
    nb_tensor *ae = nb_broadcast_to(a2, sa, nbat + 2), *bE = nb_broadcast_to(b2, sb, nbat + 2);
    nb_tensor *r = ae && bE ? nb__own(matmul_prim(ae, bE)) : NULL;
    if (r && a->ndim == 1) r = nb_squeeze(r, -2);
    if (r && b->ndim == 1) r = nb_squeeze(r, -1);
    NB_COMPOSITE_RETURN(r);
}

nb_tensor *nb_linear(nb_tensor *x, nb_tensor *w, nb_tensor *bias) {
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
    nb_tensor *y = nb_matmul(x, nb_t(w));
    if (bias) y = nb_add(y, bias);
    NB_COMPOSITE_RETURN(y);
}
