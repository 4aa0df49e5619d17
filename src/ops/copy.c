/* copy.c — copies that change dtype, layout or device (the COPY kind): cast, contiguous, clone, to_device. */
#include "../backend/backend.h"

const nb_backend *nb__backend_common(const char *op, nb_tensor *const *ts, int n) {
    nb_device d = {NB_DEVICE_TYPE_COUNT, -1};
    for (int i = 0; i < n; i++) {
        if (!ts[i]) continue;
        if (d.type == NB_DEVICE_TYPE_COUNT) d = ts[i]->storage->device;
        else if (!nb__same_device(d, ts[i]->storage->device)) {
            nb__error(NB_ERR_DEVICE, "%s: operands on different devices (type %d:%d and %d:%d)", op,
                      (int)d.type, d.index, (int)ts[i]->storage->device.type, ts[i]->storage->device.index);
            return NULL;
        }
    }
    return nb_backend_for(d);
}

/* Unrecorded copy of t into a fresh contiguous tensor of dtype dt on dev. */
static nb_tensor *copy_to(nb_tensor *t, nb_dtype dt, nb_device dev) {
    nb_tensor *out = nb__tensor_new(t->shape, t->ndim, dt, dev);
    if (!out) return NULL;
    /* host devices share one address space: the destination's backend copies */
    const nb_backend *be = nb_backend_for(nb__is_host(t->storage->device) ? dev : t->storage->device);
    if (!be || be->copy(out, t) != NB_OK) {
        nb_release(out);
        return NULL;
    }
    return out;
}

nb_tensor *nb__to_dtype(nb_tensor *t, nb_dtype dt) {
    if (t->dtype == dt) return nb_retain(t);
    return copy_to(t, dt, t->storage->device);
}

/* COPY: cast (attrs.sub the target dtype), contiguous, to_device (attrs.sub, attrs.i[0]: the
 * target device's type and index).  Execute always copies: the no-copy shortcuts (same dtype,
 * already contiguous, same device) are taken by the front-ends below, before dispatch. */
static int infer_copy(nb_op op, nb_tensor *const *in, int n, nb_attrs *a, nb_meta *m) {
    (void)n;
    nb_tensor *t = in[0];
    nb__meta_of(m, t);
    m->weak = false;
    if (op == NB_OP_CAST) {
        if (a->sub < 0 || a->sub >= NB_DTYPE_COUNT) {
            nb__error(NB_ERR_DTYPE, "cast: invalid dtype %d", a->sub);
            return -1;
        }
        m->dtype = (nb_dtype)a->sub;
    } else if (op == NB_OP_TO_DEVICE) {
        nb_device dev = {(nb_device_type)a->sub, (int)a->i[0]};
        if (dev.type < 0 || dev.type >= NB_DEVICE_TYPE_COUNT) {
            nb__error(NB_ERR_DEVICE, "to_device: unknown device type %d", (int)dev.type);
            return -1;
        }
        if (!nb__is_host(dev) || !nb__is_host(t->storage->device)) {
            nb__error(NB_ERR_UNSUPPORTED, "to_device: moves to or from device type %d are not built in",
                      (int)(nb__is_host(dev) ? t->storage->device.type : dev.type));
            return -1;
        }
    }
    return 1;
}

static nb_status exec_copy(nb_op op, nb_tensor *const *in, int n, const nb_attrs *a, const nb_meta *m, int nout,
                           nb_tensor **out) {
    (void)n;
    (void)nout;
    nb_device dev = op == NB_OP_TO_DEVICE ? (nb_device){(nb_device_type)a->sub, (int)a->i[0]} : in[0]->storage->device;
    out[0] = copy_to(in[0], m->dtype, dev);
    return out[0] ? NB_OK : nb_last_status();
}

const nb_kind_impl nb__kind_copy = {infer_copy, exec_copy};

nb_tensor *nb_cast(nb_tensor *t, nb_dtype dt) {
    NB_CHECK_ARG("cast", t);
    if (t->dtype == dt) return nb__own(nb_retain(t));
    nb_attrs a = {.sub = (int)dt};
    return nb__own(nb__apply(NB_OP_CAST, &t, 1, &a));
}

nb_tensor *nb_contiguous(nb_tensor *t) {
    NB_CHECK_ARG("contiguous", t);
    if (!nb__is_symbolic(t) && nb_is_contiguous(t)) return nb__own(nb_retain(t));
    return nb__own(nb__apply(NB_OP_CONTIGUOUS, &t, 1, NULL));
}

nb_tensor *nb_clone(nb_tensor *t) {
    NB_CHECK_ARG("clone", t);
    return nb__own(nb__apply(NB_OP_CONTIGUOUS, &t, 1, NULL));
}

nb_tensor *nb_to_device(nb_tensor *t, nb_device dev) {
    NB_CHECK_ARG("to_device", t);
    if (nb__same_device(t->storage->device, dev)) return nb__own(nb_retain(t));
    nb_attrs a = {.sub = (int)dev.type, .ni = 1, .i = {dev.index}};
    return nb__own(nb__apply(NB_OP_TO_DEVICE, &t, 1, &a));
}
