/*
 * bufcache.c — large host buffers (>= NB_LARGE_MIN bytes) for tensor
 * storage.  Fresh anonymous memory costs a page fault per 4 KiB on first
 * write, which for a 64 MB tensor takes several times longer than the op
 * that fills it.  So large buffers are (1) mapped 2 MiB-aligned with
 * madvise(MADV_HUGEPAGE), one fault per 2 MiB, as NumPy does for arrays of
 * 4 MB and more, and (2) kept after release in a small cache of recently
 * freed blocks, handed out again to a request of the same size class, so a
 * loop that allocates the same shapes every step touches no fresh pages.
 *
 * The cache holds at most NB_CACHE_SLOTS blocks and NB_ALLOC_CACHE_MB MiB
 * (environment, default 256; 0 disables it); the least recently freed block
 * is unmapped first.  Under AddressSanitizer large buffers come from the
 * ordinary allocator and are never cached, so use-after-free stays visible.
 * While a user allocator is installed (nb_set_allocator) they come from it.
 */
#include "internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NB_HUGE ((size_t)2 << 20)
#define NB_CACHE_SLOTS 16

#ifdef NB_ASAN

void *nb__large_alloc(size_t nbytes) { return nb__alloc(nbytes); }
void nb__large_free(void *p, size_t nbytes) {
    (void)nbytes;
    nb__free(p);
}

#else

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static size_t cache_cap; /* bytes */
static size_t cache_bytes;
static int cache_n;
static struct {
    void *p;
    size_t size; /* mapped bytes (the size class) */
} cache[NB_CACHE_SLOTS]; /* oldest first */

static void init(void) {
    const char *env = getenv("NB_ALLOC_CACHE_MB");
    long mb = env ? strtol(env, NULL, 10) : 256;
    cache_cap = mb > 0 ? (size_t)mb << 20 : 0;
}

/* Mapped size of a request: whole 2 MiB pages (0 on overflow). */
static size_t size_class(size_t nbytes) {
    size_t n = (nbytes + NB_HUGE - 1) & ~(NB_HUGE - 1);
    return n < nbytes ? 0 : n;
}

/* A fresh 2 MiB-aligned mapping of `size` bytes, huge-page backed where the kernel allows. */
static void *map_aligned(size_t size) {
    size_t span = size + NB_HUGE;
    if (span < size) return NULL;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    char *a = (char *)(((uintptr_t)p + NB_HUGE - 1) & ~(uintptr_t)(NB_HUGE - 1));
    if (a > p) munmap(p, (size_t)(a - p));
    if (p + span > a + size) munmap(a + size, (size_t)(p + span - (a + size)));
#ifdef MADV_HUGEPAGE
    madvise(a, size, MADV_HUGEPAGE);
#endif
    return a;
}

static void cache_remove(int i) {
    cache_bytes -= cache[i].size;
    for (int j = i + 1; j < cache_n; j++) cache[j - 1] = cache[j];
    cache_n--;
}

void *nb__large_alloc(size_t nbytes) {
    if (nb__allocator_custom()) return nb__alloc(nbytes); /* the user's allocator serves every buffer */
    pthread_once(&once, init);
    size_t size = size_class(nbytes);
    if (!size) {
        nb__error(NB_ERR_OVERFLOW, "alloc: %zu bytes overflows size_t", nbytes);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    for (int i = cache_n - 1; i >= 0; i--) { /* most recently freed first: warmest */
        if (cache[i].size == size) {
            void *p = cache[i].p;
            cache_remove(i);
            pthread_mutex_unlock(&mu);
            return p;
        }
    }
    pthread_mutex_unlock(&mu);
    void *p = map_aligned(size);
    if (!p) nb__error(NB_ERR_OOM, "alloc: out of memory allocating %zu bytes", nbytes);
    return p;
}

void nb__large_free(void *p, size_t nbytes) {
    if (!p) return;
    if (nb__allocator_custom()) { /* nb_set_allocator: no buffer is live across a change */
        nb__free(p);
        return;
    }
    size_t size = size_class(nbytes);
    pthread_once(&once, init);
    void *evict[NB_CACHE_SLOTS + 1];
    size_t evict_size[NB_CACHE_SLOTS + 1];
    int ne = 0;
    pthread_mutex_lock(&mu);
    if (size <= cache_cap) {
        while (cache_n > 0 && (cache_n == NB_CACHE_SLOTS || cache_bytes + size > cache_cap)) {
            evict[ne] = cache[0].p;
            evict_size[ne++] = cache[0].size;
            cache_remove(0);
        }
        cache[cache_n].p = p;
        cache[cache_n++].size = size;
        cache_bytes += size;
    } else {
        evict[ne] = p;
        evict_size[ne++] = size;
    }
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < ne; i++) munmap(evict[i], evict_size[i]);
}

#endif
