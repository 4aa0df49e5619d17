/* access.c — element access (get, set, item), host copies, and the in-place updates (copy_, fill_, add_, mul_scalar_). */
#include "../backend/backend.h"

#include <stdlib.h>
#include <string.h>

/* True when t's elements provably sit at distinct addresses: with the axes of
 * more than one element sorted by |stride|, each stride passes the farthest
 * offset the axes inside it reach.  Conservative: a layout that fails may
 * still be free of overlap (only nb_as_strided builds such layouts). */
static bool distinct_elements(const nb_tensor *t, int *axis) {
    int ax[NB_MAX_DIMS], n = 0;
    if (nb__numel(t) == 0) return true;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] > 1) {
            int k = n++;
            for (; k > 0 && llabs(t->stride[ax[k - 1]]) > llabs(t->stride[d]); k--) ax[k] = ax[k - 1];
            ax[k] = d;
        }
    int64_t reach = 0; /* largest offset spanned by the axes taken so far */
    for (int k = 0; k < n; k++) {
        int64_t st = llabs(t->stride[ax[k]]);
        if (st <= reach) {
            *axis = ax[k];
            return false;
        }
        reach += st * (t->shape[ax[k]] - 1); /* bounded by the storage size (as_strided checks) */
    }
    return true;
}

/* Checks shared by every write into an existing tensor: not NULL, not tracked while
 * recording (PyTorch's leaf rule), and no two elements that may alias one address
 * (a stride-0 axis, or strides that let axes overlap), which would make the result
 * depend on thread scheduling. */
bool nb__writable(const char *op, nb_tensor *t) {
    if (!t) {
        nb__error_set(NB_ERR_NULL, "%s: tensor is NULL", op);
        return false;
    }
    if (!nb__check_concrete(op, t)) return false;
    if (t->requires_grad && nb_grad_enabled()) {
        nb__error_set(NB_ERR_STATE, "%s: in-place update of a tensor that requires grad while recording (use no_grad)", op);
        return false;
    }
    int d;
    if (!distinct_elements(t, &d)) {
        nb__error_set(NB_ERR_ARG, "%s: destination %s with strides %s may have more than one element at one memory location (axis %d, stride %lld); clone it first",
                      op, NB_SHAPE_STR(t), NB_DIMS_STR(t->stride, t->ndim), d, (long long)t->stride[d]);
        return false;
    }
    return true;
}

static bool element_offset(const char *op, const nb_tensor *t, const int64_t *index, int64_t *off) {
    if (!nb__check_concrete(op, t)) return false;
    if (t->ndim && !index) {
        nb__error_set(NB_ERR_NULL, "%s: index is NULL", op);
        return false;
    }
    if (!nb__check_concrete(op, t)) return false;
    *off = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t i = index[d];
        if (i < -t->shape[d] || i >= t->shape[d]) {
            nb__error_set(NB_ERR_INDEX, "%s: index %lld out of range for axis %d of %s", op, (long long)i, d,
                          NB_SHAPE_STR(t));
            return false;
        }
        if (i < 0) i += t->shape[d];
        *off += i * t->stride[d];
    }
    if (!nb__is_host(t->storage->device)) {
        nb__error_set(NB_ERR_DEVICE, "%s: tensor is not in host memory", op);
        return false;
    }
    return true;
}

static nb_status get_impl(const nb_tensor *t, const int64_t *index, double *out) {
    if (!t || !out) return nb__error_set(NB_ERR_NULL, "get: tensor or out is NULL");
    if (!(t = nb__readable("get", t))) return nb_last_status();
    int64_t off;
    if (!element_offset("get", t, index, &off)) return nb_last_status();
    *out = nb__load((char *)t->storage->data + off * (int64_t)nb_dtype_size(t->dtype), t->dtype);
    return NB_OK;
}

static nb_status set_impl(nb_tensor *t, const int64_t *index, double value) {
    if (!nb__writable("set", t)) return nb_last_status();
    int64_t off;
    if (!element_offset("set", t, index, &off)) return nb_last_status();
    nb__store((char *)t->storage->data + off * (int64_t)nb_dtype_size(t->dtype), t->dtype, value);
    return NB_OK;
}

static nb_status item_impl(const nb_tensor *t, double *out) {
    if (!t || !out) return nb__error_set(NB_ERR_NULL, "item: tensor or out is NULL");
    if (!(t = nb__readable("item", t))) return nb_last_status();
    if (nb__numel(t) != 1)
        return nb__error_set(NB_ERR_SHAPE, "item: tensor of shape %s has %lld elements, not 1", NB_SHAPE_STR(t),
                             (long long)nb__numel(t));
    int64_t zero[NB_MAX_DIMS] = {0};
    return get_impl(t, zero, out);
}

static nb_status host_copy(const char *op, const nb_tensor *t, void *buf, size_t nbytes, bool to_host) {
    if (!t || (!buf && nbytes)) return nb__error_set(NB_ERR_NULL, "%s: tensor or buffer is NULL", op);
    if (to_host && !(t = nb__readable(op, t))) return nb_last_status();
    size_t need = (size_t)nb__numel(t) * nb_dtype_size(t->dtype);
    if (nbytes != need)
        return nb__error_set(NB_ERR_ARG, "%s: buffer holds %zu bytes, tensor %s of %s needs %zu", op, nbytes,
                             NB_SHAPE_STR(t), nb_dtype_name(t->dtype), need);
    if (!need) return NB_OK;
    if (nb_is_contiguous(t)) {
        if (to_host) memcpy(buf, nb__ptr(t), need);
        else memcpy(nb__ptr(t), buf, need);
        return NB_OK;
    }
    const nb_backend *be = nb__backend_of(t);
    if (!be) return nb_last_status();
    /* a contiguous view of the caller's buffer; its stack storage record
     * starts at 2 references so releasing the view never frees it */
    nb_storage s = {.data = buf, .nbytes = need, .device = t->storage->device};
    atomic_init(&s.refs, 2);
    int64_t st[NB_MAX_DIMS];
    nb__contiguous_strides(t->shape, t->ndim, st);
    nb_tensor *w = nb__tensor_view_of(&s, t->shape, st, t->ndim, 0, t->dtype);
    if (!w) return nb_last_status();
    nb_status rc = to_host ? be->copy(w, t) : be->copy((nb_tensor *)t, w);
    nb_release(w);
    return rc;
}

static nb_status copy_to_host_impl(const nb_tensor *t, void *dst, size_t nbytes) {
    return host_copy("copy_to_host", t, dst, nbytes, true);
}
static nb_status copy_from_host_impl(nb_tensor *t, const void *src, size_t nbytes) {
    if (!nb__writable("copy_from_host", t)) return nb_last_status();
    return host_copy("copy_from_host", t, (void *)src, nbytes, false);
}

/* ---- in-place updates ---- */

static nb_status copy_impl(nb_tensor *dst, nb_tensor *src) {
    if (!nb__writable("copy_", dst)) return nb_last_status();
    if (!src) return nb__error_set(NB_ERR_NULL, "copy_: src is NULL");
    if (!(src = (nb_tensor *)nb__readable("copy_", src))) return nb_last_status();
    const nb_backend *be = nb__backend_common("copy_", (nb_tensor *[]){dst, src}, 2);
    if (!be) return nb_last_status();
    int64_t shape[NB_MAX_DIMS];
    int nd = nb__broadcast_shapes("copy_", dst->shape, dst->ndim, src->shape, src->ndim, shape);
    if (nd < 0) return nb_last_status();
    bool same = nd == dst->ndim;
    for (int d = 0; same && d < nd; d++) same = shape[d] == dst->shape[d];
    if (!same)
        return nb__error_set(NB_ERR_SHAPE, "copy_: source %s does not broadcast to destination %s",
                             NB_SHAPE_STR(src), NB_SHAPE_STR(dst));
    /* copy via a temporary when src overlaps dst's storage, so reads see old values */
    nb_tensor *s = nb_shares_storage(dst, src) ? nb__scope_take(nb_clone(src)) : nb_retain(src);
    if (!s) return nb_last_status();
    nb_tensor *e = nb__expand_raw(s, dst->shape, dst->ndim);
    nb_status st = e ? be->copy(dst, e) : nb_last_status();
    nb_release(e);
    nb_release(s);
    return st;
}

static nb_status fill_impl(nb_tensor *t, double value) {
    if (!nb__writable("fill_", t)) return nb_last_status();
    nb_tensor *v = nb__weak_scalar(value, t->storage->device);
    if (!v) return nb_last_status();
    nb_status st = copy_impl(t, v);
    nb_release(v);
    return st;
}

/* t = r (r already shaped like t), converting to t's dtype. */
static nb_status apply_inplace(nb_tensor *t, nb_tensor *r) {
    return r ? nb__backend_of(t)->copy(t, r) : nb_last_status();
}

static nb_status add_impl(nb_tensor *t, nb_tensor *src, double alpha) {
    if (!nb__writable("add_", t)) return nb_last_status();
    if (!src) return nb__error_set(NB_ERR_NULL, "add_: src is NULL");
    if (!(src = (nb_tensor *)nb__readable("add_", src))) return nb_last_status();
    nb_no_grad_begin();
    nb_scope_begin();
    nb_tensor *r = nb_add(t, alpha == 1 ? src : nb_mul(src, alpha));
    nb_status st = NB_OK;
    if (r && !nb__same_shape(r, t))
        st = nb__error_set(NB_ERR_SHAPE, "add_: src %s does not broadcast to %s", NB_SHAPE_STR(src), NB_SHAPE_STR(t));
    else st = apply_inplace(t, r);
    nb_scope_end();
    nb_no_grad_end();
    return st;
}

static nb_status mul_scalar_impl(nb_tensor *t, double s) {
    if (!nb__writable("mul_scalar_", t)) return nb_last_status();
    nb_no_grad_begin();
    nb_scope_begin();
    nb_status st = apply_inplace(t, nb_mul(t, s));
    nb_scope_end();
    nb_no_grad_end();
    return st;
}

/* ---- the public entry points: each reports its own status (NB_OWN_STATUS) ---- */
nb_status nb_get(const nb_tensor *t, const int64_t *index, double *out) {
    NB_OWN_STATUS("get", get_impl(t, index, out));
}
nb_status nb_set(nb_tensor *t, const int64_t *index, double value) {
    NB_OWN_STATUS("set", set_impl(t, index, value));
}
nb_status nb_item(const nb_tensor *t, double *out) {
    NB_OWN_STATUS("item", item_impl(t, out));
}
nb_status nb_copy_to_host(const nb_tensor *t, void *dst, size_t nbytes) {
    NB_OWN_STATUS("copy_to_host", copy_to_host_impl(t, dst, nbytes));
}
nb_status nb_copy_from_host(nb_tensor *t, const void *src, size_t nbytes) {
    NB_OWN_STATUS("copy_from_host", copy_from_host_impl(t, src, nbytes));
}
nb_status nb_copy_(nb_tensor *dst, nb_tensor *src) {
    NB_OWN_STATUS("copy_", copy_impl(dst, src));
}
nb_status nb_fill_(nb_tensor *t, double value) {
    NB_OWN_STATUS("fill_", fill_impl(t, value));
}
nb_status nb_add_(nb_tensor *t, nb_tensor *src, double alpha) {
    NB_OWN_STATUS("add_", add_impl(t, src, alpha));
}
nb_status nb_mul_scalar_(nb_tensor *t, double s) {
    NB_OWN_STATUS("mul_scalar_", mul_scalar_impl(t, s));
}
