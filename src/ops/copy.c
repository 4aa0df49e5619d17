/* copy.c — copies that change dtype, layout or device: cast, contiguous, clone, to_device. */
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

static nb_tensor *recorded(nb_tensor *out, nb_op op, nb_tensor *in) {
    if (out && nb__should_record(&in, 1)) return nb__record(out, op, &in, 1, NULL);
    return out;
}

nb_tensor *nb_cast(nb_tensor *t, nb_dtype dt) {
    NB_CHECK_ARG("cast", t);
    if (dt < 0 || dt >= NB_DTYPE_COUNT) {
        nb__error(NB_ERR_DTYPE, "cast: invalid dtype %d", (int)dt);
        return NULL;
    }
    if (t->dtype == dt) return nb__own(nb_retain(t));
    nb_tensor *out = copy_to(t, dt, t->storage->device);
    if (out && nb_dtype_is_float(dt) && nb_dtype_is_float(t->dtype)) out = recorded(out, NB_OP_CAST, t);
    return nb__own(out);
}

nb_tensor *nb_contiguous(nb_tensor *t) {
    NB_CHECK_ARG("contiguous", t);
    if (nb_is_contiguous(t)) return nb__own(nb_retain(t));
    return nb__own(recorded(copy_to(t, t->dtype, t->storage->device), NB_OP_CONTIGUOUS, t));
}

nb_tensor *nb_clone(nb_tensor *t) {
    NB_CHECK_ARG("clone", t);
    return nb__own(recorded(copy_to(t, t->dtype, t->storage->device), NB_OP_CONTIGUOUS, t));
}

nb_tensor *nb_to_device(nb_tensor *t, nb_device dev) {
    NB_CHECK_ARG("to_device", t);
    if (dev.type < 0 || dev.type >= NB_DEVICE_TYPE_COUNT) {
        nb__error(NB_ERR_DEVICE, "to_device: unknown device type %d", (int)dev.type);
        return NULL;
    }
    if (nb__same_device(t->storage->device, dev)) return nb__own(nb_retain(t));
    if (!nb__is_host(dev) || !nb__is_host(t->storage->device)) {
        nb__error(NB_ERR_UNSUPPORTED, "to_device: moves to or from device type %d are not built in",
                  (int)(nb__is_host(dev) ? t->storage->device.type : dev.type));
        return NULL;
    }
    nb_tensor *out = copy_to(t, t->dtype, dev);
    nb_attrs a = {.sub = t->storage->device.type, .ni = 1, .i = {t->storage->device.index}};
    if (out && nb__should_record(&t, 1)) out = nb__record(out, NB_OP_TO_DEVICE, &t, 1, &a);
    return nb__own(out);
}
