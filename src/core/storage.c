/* storage.c — reference-counted buffers: owned host memory, or borrowed memory with a release callback. */
#include "internal.h"

#include <stdlib.h>

void *nb__alloc(size_t nbytes) {
    size_t n = (nbytes + 63) & ~(size_t)63;
    if (n < nbytes) {
        nb__error(NB_ERR_OVERFLOW, "alloc: %zu bytes overflows size_t", nbytes);
        return NULL;
    }
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p) nb__error(NB_ERR_OOM, "alloc: out of memory allocating %zu bytes", nbytes);
    return p;
}

void nb__free(void *p) { free(p); }

nb_storage *nb__storage_new(size_t nbytes, nb_device dev) {
    if (!nb__is_host(dev)) {
        nb__error(NB_ERR_DEVICE, "storage: device type %d has no host allocator", (int)dev.type);
        return NULL;
    }
    nb_storage *s = malloc(sizeof *s);
    if (!s) {
        nb__error(NB_ERR_OOM, "storage: out of memory");
        return NULL;
    }
    s->data = nb__alloc(nbytes);
    if (!s->data) {
        free(s);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->nbytes = nbytes;
    s->device = dev;
    s->owned = true;
    s->release = NULL;
    s->ctx = NULL;
    return s;
}

void nb__storage_release(nb_storage *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    if (s->owned) nb__free(s->data);
    else if (s->release) s->release(s->ctx, s->release_ptr);
    free(s);
}
