/*
 * registry.c — maps device kinds to backends.  CPU and REF are resolved from
 * static tables at lookup time, so they are available with no constructor
 * or link-order tricks; other devices register at run time.
 */
#include "backend.h"

#include <stdatomic.h>

static _Atomic(const nb_backend *) registered[NB_DEVICE_TYPE_COUNT];

nb_status nb_backend_register(nb_device_type type, const nb_backend *be) {
    if (!be) return nb__error_set(NB_ERR_NULL, "backend_register: backend is NULL");
    if (type < 0 || type >= NB_DEVICE_TYPE_COUNT)
        return nb__error_set(NB_ERR_DEVICE, "backend_register: unknown device type %d", (int)type);
    atomic_store(&registered[type], be);
    return NB_OK;
}

const nb_backend *nb_backend_for(nb_device dev) {
    if (dev.type < 0 || dev.type >= NB_DEVICE_TYPE_COUNT) {
        nb__error(NB_ERR_DEVICE, "backend_for: unknown device type %d", (int)dev.type);
        return NULL;
    }
    if ((dev.type == NB_DEVICE_CPU || dev.type == NB_DEVICE_REF) && dev.index != 0) {
        nb__error(NB_ERR_DEVICE, "backend_for: host device %s:%d does not exist (index must be 0)",
                  dev.type == NB_DEVICE_CPU ? "cpu" : "ref", dev.index);
        return NULL;
    }
    const nb_backend *be = atomic_load(&registered[dev.type]);
    if (be) return be;
    if (dev.type == NB_DEVICE_CPU) return &nb__cpu_backend;
    if (dev.type == NB_DEVICE_REF) return &nb__ref_backend;
    nb__error(NB_ERR_DEVICE, "backend_for: no backend registered for device type %d", (int)dev.type);
    return NULL;
}

const char *nb_backend_name(const nb_backend *be) { return be ? be->name : "(null)"; }

const nb_backend *nb__backend_of(const nb_tensor *t) { return nb_backend_for(t->storage->device); }
