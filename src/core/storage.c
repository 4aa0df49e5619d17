/* storage.c — reference-counted buffers: owned host memory, or borrowed memory with a release callback. */
#include "internal.h"

/* Buffers of at most NB_INLINE_MAX bytes share one malloc block with their
 * record (data 64-byte aligned inside it): one allocation for a small
 * tensor's storage instead of two, and no aligned_alloc (not under ASan,
 * where the alignment slack would hide small overflows).  Larger buffers
 * come from the caching allocator (bufcache.c: size classes, reuse). */
#ifdef NB_ASAN
#define NB_INLINE_MAX ((size_t)0)
#else
#define NB_INLINE_MAX ((size_t)256)
#endif

nb_storage *nb__storage_new(size_t nbytes, nb_device dev) {
    if (!nb__is_host(dev)) {
        nb__error(NB_ERR_DEVICE, "storage: device type %d has no host allocator", (int)dev.type);
        return NULL;
    }
    bool inl = nbytes <= NB_INLINE_MAX;
    nb_storage *s = nb__malloc(inl ? sizeof *s + 63 + nbytes : sizeof *s);
    if (!s) {
        nb__error(NB_ERR_OOM, "storage: out of memory for the record of a %zu-byte buffer", nbytes);
        return NULL;
    }
    if (inl) s->data = (void *)(((uintptr_t)(s + 1) + 63) & ~(uintptr_t)63);
    else s->data = nb__buf_alloc(nbytes);
    if (!s->data) {
        nb__free(s);
        return NULL;
    }
    atomic_init(&s->refs, 1);
    s->nbytes = nbytes;
    s->device = dev;
    s->owned = !inl; /* inline data goes with the record */
    s->release = NULL;
    s->ctx = NULL;
    return s;
}

void nb__storage_release(nb_storage *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    if (s->owned) nb__buf_free(s->data, s->nbytes);
    else if (s->release) s->release(s->ctx, s->release_ptr);
    nb__free(s);
}
