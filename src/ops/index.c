/*
 * index.c — indexing and joining ops composed from the primitives in
 * index_prim.c and the views: index_select, take_along_axis, embedding,
 * one_hot, stack, split, chunk, and pad (constant and reflect).
 */
#include "../backend/backend.h"

#include <stdlib.h>
#include <string.h>

/* index_select with errors reported under `op` (index_select itself, embedding). Scoped. */
static nb_tensor *index_select_as(nb_op name_op, nb_tensor *x, int axis, nb_tensor *index) {
    const char *op = nb__ops[name_op].name;
    NB_CHECK_ARG(op, x);
    NB_CHECK_ARG(op, index);
    int a = nb__axis(op, axis, x->ndim);
    if (a < 0) return NULL;
    if (index->ndim > 1) {
        nb__error(NB_ERR_SHAPE, "%s: index must be 1-D, got %s", op, NB_SHAPE_STR(index));
        return NULL;
    }
    /* gather with the index laid along `axis` and broadcast (stride 0) elsewhere */
    int64_t len = index->ndim ? index->shape[0] : 1; /* a dim, symbolic while tracing */
    int64_t ishape[NB_MAX_DIMS], oshape[NB_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        ishape[d] = d == a ? len : 1;
        oshape[d] = d == a ? len : x->shape[d];
    }
    NB_COMPOSITE_BEGIN();
    nb_tensor *ix = nb_broadcast_to(nb_reshape(index, ishape, x->ndim), oshape, x->ndim);
    NB_COMPOSITE_RETURN(nb__own(nb__gather(name_op, x, a, ix)));
}

nb_tensor *nb_index_select(nb_tensor *x, int axis, nb_tensor *index) {
    return index_select_as(NB_OP_INDEX_SELECT, x, axis, index);
}

nb_tensor *nb_take_along_axis(nb_tensor *x, nb_tensor *index, int axis) {
    NB_CHECK_ARG("take_along_axis", x);
    NB_CHECK_ARG("take_along_axis", index);
    int a = nb__axis("take_along_axis", axis, x->ndim);
    if (a < 0) return NULL;
    if (index->ndim != x->ndim) {
        nb__error(NB_ERR_SHAPE, "take_along_axis: index %s must have the rank of input %s", NB_SHAPE_STR(index),
                  NB_SHAPE_STR(x));
        return NULL;
    }
    /* broadcast every axis but `axis` between x and index */
    int64_t xs[NB_MAX_DIMS], is[NB_MAX_DIMS], b[NB_MAX_DIMS];
    memcpy(xs, x->shape, sizeof xs);
    memcpy(is, index->shape, sizeof is);
    xs[a] = is[a] = 1;
    if (nb__broadcast_shapes("take_along_axis", xs, x->ndim, is, x->ndim, b) < 0) return NULL;
    int64_t xt[NB_MAX_DIMS], it[NB_MAX_DIMS];
    memcpy(xt, b, sizeof xt);
    memcpy(it, b, sizeof it);
    xt[a] = x->shape[a];
    it[a] = index->shape[a];
    NB_COMPOSITE_BEGIN();
    NB_COMPOSITE_RETURN(nb__own(nb__gather(NB_OP_TAKE_ALONG_AXIS, nb_broadcast_to(x, xt, x->ndim), a,
                                           nb_broadcast_to(index, it, x->ndim))));
}

nb_tensor *nb_embedding(nb_tensor *weight, nb_tensor *index) {
    NB_CHECK_ARG("embedding", weight);
    NB_CHECK_ARG("embedding", index);
    if (weight->ndim != 2 || index->ndim + 1 > NB_MAX_DIMS) {
        nb__error(NB_ERR_SHAPE, "embedding: weight must be [V, D] (got %s) and index rank < %d", NB_SHAPE_STR(weight),
                  NB_MAX_DIMS);
        return NULL;
    }
    int64_t shape[NB_MAX_DIMS];
    memcpy(shape, index->shape, sizeof(int64_t) * (size_t)index->ndim);
    shape[index->ndim] = weight->shape[1];
    NB_COMPOSITE_BEGIN();
    nb_tensor *flat = nb_reshape(index, (int64_t[]){-1}, 1);
    NB_COMPOSITE_RETURN(nb_reshape(index_select_as(NB_OP_EMBEDDING, weight, 0, flat), shape, index->ndim + 1));
}

nb_tensor *nb_one_hot(nb_tensor *index, int64_t num_classes) {
    NB_CHECK_ARG("one_hot", index);
    if (num_classes <= 0 || index->ndim + 1 > NB_MAX_DIMS) {
        nb__error(NB_ERR_ARG, "one_hot: num_classes must be positive (got %lld)", (long long)num_classes);
        return NULL;
    }
    /* ones scattered along a new last axis of zeros: the index checks (integer dtype; values in
     * [0, num_classes), at run time when traced) are scatter_add's, reported as one_hot's */
    int nd = index->ndim;
    int64_t shape[NB_MAX_DIMS], ones_shape[NB_MAX_DIMS];
    memcpy(shape, index->shape, sizeof(int64_t) * (size_t)nd);
    memcpy(ones_shape, index->shape, sizeof(int64_t) * (size_t)nd);
    shape[nd] = num_classes;
    ones_shape[nd] = 1;
    nb_device dev = index->storage->device;
    NB_COMPOSITE_BEGIN();
    nb_tensor *zeros = nb_broadcast_to(nb__own(nb__full_on(NULL, 0, 0, NB_I64, dev)), shape, nd + 1);
    nb_tensor *ones = nb_broadcast_to(nb__own(nb__full_on(NULL, 0, 1, NB_I64, dev)), ones_shape, nd + 1);
    nb_tensor *ix = nb_unsqueeze(index, -1);
    nb_tensor *r = zeros && ones && ix ? nb__own(nb__scatter_add(NB_OP_ONE_HOT, zeros, nd, ix, ones)) : NULL;
    NB_COMPOSITE_RETURN(r);
}

nb_tensor *nb_stack(nb_tensor *const *ts, int n, int axis) {
    if (!ts) {
        nb__error(NB_ERR_NULL, "stack: the tensor list is NULL");
        return NULL;
    }
    if (n <= 0) {
        nb__error(NB_ERR_ARG, "stack: expected at least one tensor, got %d", n);
        return NULL;
    }
    NB_CHECK_ARG("stack", ts[0]);
    nb_tensor *us_small[16], **us = n <= 16 ? us_small : nb__malloc(sizeof *us * (size_t)n);
    if (!us) {
        nb__error(NB_ERR_OOM, "stack: out of memory");
        return NULL;
    }
    NB_COMPOSITE_BEGIN();
    int a = axis < 0 ? axis + ts[0]->ndim + 1 : axis;
    bool ok = true; /* judged locally: an unrelated earlier error may still be pending */
    for (int i = 0; i < n && ok; i++) {
        if (ts[i] && !nb__same_shape(ts[i], ts[0])) {
            nb__error(NB_ERR_SHAPE, "stack: tensor %d has shape %s, tensor 0 has %s", i, NB_SHAPE_STR(ts[i]),
                      NB_SHAPE_STR(ts[0]));
            ok = false;
        }
        us[i] = ok ? nb_unsqueeze(ts[i], a) : NULL;
        ok = us[i] != NULL;
    }
    nb_tensor *r = ok ? nb_cat(us, n, a) : NULL;
    if (us != us_small) nb__free(us);
    NB_COMPOSITE_RETURN(r);
}

/* Pieces of `sizes[i]` along axis, written as new references; returns count or -1. */
static int split_sizes(nb_tensor *x, int a, int64_t step, int64_t count, nb_tensor **out, int max_out) {
    int k = 0;
    for (int64_t off = 0, i = 0; i < count; i++, off += step) {
        int64_t len = x->shape[a] - off < step ? x->shape[a] - off : step;
        if (k < max_out && out) {
            out[k] = nb_narrow(x, a, off, len);
            if (!out[k]) {
                for (int j = 0; j < k; j++) nb_release(nb__scope_take(out[j]));
                return -1;
            }
        }
        k++;
    }
    return k;
}

int nb_split(nb_tensor *x, int64_t split_size, int axis, nb_tensor **out, int max_out) {
    if (!x) {
        nb__error(NB_ERR_NULL, "split: x is NULL");
        return -1;
    }
    int a = nb__axis("split", axis, x->ndim);
    if (a < 0) return -1;
    if (split_size <= 0) {
        nb__error(NB_ERR_ARG, "split: split_size must be positive, got %lld", (long long)split_size);
        return -1;
    }
    int64_t count = x->shape[a] == 0 ? 1 : (x->shape[a] + split_size - 1) / split_size;
    return split_sizes(x, a, split_size, count, out, max_out);
}

int nb_chunk(nb_tensor *x, int chunks, int axis, nb_tensor **out, int max_out) {
    if (!x) {
        nb__error(NB_ERR_NULL, "chunk: x is NULL");
        return -1;
    }
    int a = nb__axis("chunk", axis, x->ndim);
    if (a < 0) return -1;
    if (chunks <= 0) {
        nb__error(NB_ERR_ARG, "chunk: chunks must be positive, got %d", chunks);
        return -1;
    }
    if (x->shape[a] == 0) return split_sizes(x, a, 0, chunks, out, max_out); /* torch: `chunks` empty pieces */
    int64_t step = (x->shape[a] + chunks - 1) / chunks;
    return split_sizes(x, a, step, (x->shape[a] + step - 1) / step, out, max_out);
}

/* Reflect pad along one axis: indices l..1, 0..n-1, n-2..n-1-r (no edge repeat). */
static nb_tensor *reflect_axis(nb_tensor *x, int d, int64_t l, int64_t r) {
    int64_t n = x->shape[d], m = n + l + r;
    nb_tensor *ix = nb__tensor_new(&m, 1, NB_I64, x->storage->device);
    if (!ix) return NULL;
    int64_t *p = (int64_t *)nb__ptr(ix);
    for (int64_t i = 0; i < m; i++) {
        int64_t j = i - l;
        if (j < 0) j = -j;
        if (j >= n) j = 2 * (n - 1) - j;
        p[i] = j;
    }
    return nb_index_select(x, d, nb__own(ix));
}

nb_tensor *nb_pad(nb_tensor *x, const int64_t *pads, int npad, nb_pad_mode mode, double value) {
    NB_CHECK_ARG("pad", x);
    if (npad < 0 || npad % 2 || npad / 2 > x->ndim || (npad && !pads)) {
        nb__error(NB_ERR_ARG, "pad: %d pad widths for a tensor of rank %d (need an even count <= %d)", npad, x->ndim,
                  2 * x->ndim);
        return NULL;
    }
    if (mode == NB_PAD_CONSTANT) return nb__own(nb__pad_constant(x, pads, npad, value));
    if (mode != NB_PAD_REFLECT) {
        nb__error(NB_ERR_ARG, "pad: unknown mode %d", (int)mode);
        return NULL;
    }
    for (int k = 0; k < npad / 2; k++) {
        int d = x->ndim - 1 - k;
        int64_t l = pads[2 * k], r = pads[2 * k + 1];
        if (l < 0 || r < 0 || l >= x->shape[d] || r >= x->shape[d]) {
            nb__error(NB_ERR_ARG, "pad: reflect widths (%lld, %lld) must be in [0, %lld) for axis %d of %s",
                      (long long)l, (long long)r, (long long)x->shape[d], d, NB_SHAPE_STR(x));
            return NULL;
        }
    }
    NB_COMPOSITE_BEGIN();
    nb_tensor *r = x;
    for (int k = 0; k < npad / 2 && r; k++) r = reflect_axis(r, r->ndim - 1 - k, pads[2 * k], pads[2 * k + 1]);
    NB_COMPOSITE_RETURN(r);
}
