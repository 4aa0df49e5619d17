/*
 * bufcache.c — the caching allocator behind tensor storage and backend
 * scratch buffers.  Fresh memory costs a page fault per 4 KiB on first
 * write, and glibc hands freed blocks of a few hundred KiB and more back to
 * the kernel (munmap, heap trimming), so a training loop that allocates the
 * same shapes every step would fault them all in again every step.  So:
 *
 *  - every request is rounded up to a size class (four per power of two,
 *    64-byte multiples: at most 25 % slack, untouched tail pages are never
 *    faulted in), and a freed block is kept in its class's free list and
 *    handed out again, most recently freed first (warmest);
 *  - blocks of 4 MiB and more are mapped 2 MiB-aligned with
 *    madvise(MADV_HUGEPAGE), one fault per 2 MiB, as NumPy does for arrays
 *    of 4 MB and more; their classes are whole 2 MiB pages;
 *  - the cache is bounded: at most NB_ALLOC_CACHE_MB MiB (environment,
 *    default 256; 0 turns caching off; an invalid value warns and keeps
 *    the default; nb_alloc_cache_set_limit) and
 *    NB_CACHE_MAX_BLOCKS blocks; the least recently freed block goes back
 *    to the system first.  nb_alloc_cache_release() empties it.
 *
 * One mutex guards the lists: a lock/unlock pair is ~20 ns uncontended,
 * against the microseconds of any op on a buffer this size (buffers of
 * 256 bytes and less live inline with their storage record, storage.c, and
 * never come here).  Freed blocks carry their list links inside them.
 * System memory is taken and returned by one pair of functions,
 * system_alloc / system_free.  Under AddressSanitizer nothing is cached and
 * every buffer comes from nb__alloc, so use-after-free stays visible.
 * While a user allocator is installed (nb_set_allocator) the cache is
 * bypassed: every buffer comes from it through nb__alloc.
 */
#include "internal.h"

#include <nabla.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NB_HUGE ((size_t)2 << 20)
#define NB_HUGE_MIN ((size_t)4 << 20) /* classes from here on are huge-page mappings */
#define NB_CACHE_MAX_BLOCKS 2048

size_t nb__env_alloc_cache_bytes(void) {
    const char *env = getenv("NB_ALLOC_CACHE_MB");
    if (!env) return (size_t)256 << 20;
    char *end;
    errno = 0;
    long long mb = strtoll(env, &end, 10);
    if (end != env && !*end && !errno && mb >= 0 && (unsigned long long)mb <= (SIZE_MAX >> 20)) return (size_t)mb << 20;
    fprintf(stderr, "nabla: ignoring NB_ALLOC_CACHE_MB='%s' (expected a number of MiB >= 0); using 256\n", env);
    return (size_t)256 << 20;
}

#ifdef NB_ASAN

void *nb__buf_alloc(size_t nbytes) { return nb__alloc(nbytes); }
void nb__buf_free(void *p, size_t nbytes) {
    (void)nbytes;
    nb__free(p);
}
void nb_alloc_cache_release(void) {}
void nb_alloc_cache_set_limit(size_t bytes) { (void)bytes; }
void nb_alloc_cache_stats(size_t *bytes, size_t *blocks) {
    if (bytes) *bytes = 0;
    if (blocks) *blocks = 0;
}

#else

#define NB_NCLASS 256 /* 4 per power of two up to 2^64 */

/* A cached block: linked into its class's list and into the LRU list. */
typedef struct fblock {
    struct fblock *cprev, *cnext; /* class list, most recently freed at the head */
    struct fblock *lprev, *lnext; /* all blocks, most recently freed at the head */
    size_t size;
    int cls;
} fblock;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static size_t cache_cap; /* bytes */
static size_t cache_bytes, cache_n;
static fblock *cls_head[NB_NCLASS];
static fblock *lru_head, *lru_tail;

static void init(void) { cache_cap = nb__env_alloc_cache_bytes(); }

/* Size class of a request: its index, and the block size in *size (0 on overflow). */
static int size_class(size_t nbytes, size_t *size) {
    if (nbytes <= 64) {
        *size = 64;
        return 0;
    }
    int e = 63 - __builtin_clzll((unsigned long long)(nbytes - 1)); /* 2^e < nbytes <= 2^(e+1) */
    size_t lo = (size_t)1 << e, step = e >= 8 ? lo >> 2 : 64;
    size_t s = (nbytes + step - 1) & ~(step - 1);
    if (s >= NB_HUGE_MIN) s = (s + NB_HUGE - 1) & ~(NB_HUGE - 1);
    *size = s < nbytes ? 0 : s;
    return e * 4 + (int)((s - lo + step - 1) / step) - 1;
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

/* The only two places that take memory from the system and give it back. */
static void *system_alloc(size_t size) { return size >= NB_HUGE_MIN ? map_aligned(size) : aligned_alloc(64, size); }
static void system_free(void *p, size_t size) {
    if (size >= NB_HUGE_MIN) munmap(p, size);
    else free(p);
}

/* Unlink b from both lists (mu held). */
static void unlink_block(fblock *b) {
    if (b->cprev) b->cprev->cnext = b->cnext;
    else cls_head[b->cls] = b->cnext;
    if (b->cnext) b->cnext->cprev = b->cprev;
    if (b->lprev) b->lprev->lnext = b->lnext;
    else lru_head = b->lnext;
    if (b->lnext) b->lnext->lprev = b->lprev;
    else lru_tail = b->lprev;
    cache_bytes -= b->size;
    cache_n--;
}

/* Unlink least recently freed blocks until a block of `need` bytes (0: none)
 * fits under `cap` bytes and the block bound; returns them chained through
 * cnext, to be freed unlocked (mu held). */
static fblock *evict_for(size_t need, size_t cap) {
    fblock *out = NULL;
    size_t max_n = NB_CACHE_MAX_BLOCKS - (need ? 1 : 0);
    while (lru_tail && (cache_n > max_n || cache_bytes + need > cap)) {
        fblock *b = lru_tail;
        unlink_block(b);
        b->cnext = out;
        out = b;
    }
    return out;
}

static void free_chain(fblock *b) {
    while (b) {
        fblock *next = b->cnext;
        system_free(b, b->size);
        b = next;
    }
}

void *nb__buf_alloc(size_t nbytes) {
    if (nb__allocator_custom()) return nb__alloc(nbytes); /* the user's allocator serves every buffer */
    pthread_once(&once, init);
    size_t size;
    int cls = size_class(nbytes, &size);
    if (!size) {
        nb__error(NB_ERR_OVERFLOW, "alloc: %zu bytes overflows size_t", nbytes);
        return NULL;
    }
    pthread_mutex_lock(&mu);
    fblock *b = cls_head[cls];
    if (b) unlink_block(b);
    pthread_mutex_unlock(&mu);
    if (b) return b;
    void *p = system_alloc(size);
    if (!p) { /* give the cache back and try once more */
        nb_alloc_cache_release();
        p = system_alloc(size);
    }
    if (!p) nb__error(NB_ERR_OOM, "alloc: out of memory allocating %zu bytes", nbytes);
    return p;
}

void nb__buf_free(void *p, size_t nbytes) {
    if (!p) return;
    if (nb__allocator_custom()) { /* nb_set_allocator: no buffer is live across a change */
        nb__free(p);
        return;
    }
    pthread_once(&once, init);
    size_t size;
    int cls = size_class(nbytes, &size);
    fblock *b = p;
    pthread_mutex_lock(&mu);
    if (size > cache_cap) {
        pthread_mutex_unlock(&mu);
        system_free(p, size);
        return;
    }
    b->size = size;
    b->cls = cls;
    fblock *evicted = evict_for(size, cache_cap);
    b->cprev = b->lprev = NULL;
    b->cnext = cls_head[cls];
    if (b->cnext) b->cnext->cprev = b;
    cls_head[cls] = b;
    b->lnext = lru_head;
    if (lru_head) lru_head->lprev = b;
    else lru_tail = b;
    lru_head = b;
    cache_bytes += size;
    cache_n++;
    pthread_mutex_unlock(&mu);
    free_chain(evicted);
}

void nb_alloc_cache_set_limit(size_t bytes) {
    pthread_once(&once, init);
    pthread_mutex_lock(&mu);
    cache_cap = bytes;
    fblock *evicted = evict_for(0, cache_cap);
    pthread_mutex_unlock(&mu);
    free_chain(evicted);
}

void nb_alloc_cache_release(void) {
    pthread_once(&once, init);
    pthread_mutex_lock(&mu);
    fblock *evicted = evict_for(0, 0);
    pthread_mutex_unlock(&mu);
    free_chain(evicted);
}

void nb_alloc_cache_stats(size_t *bytes, size_t *blocks) {
    pthread_mutex_lock(&mu);
    if (bytes) *bytes = cache_bytes;
    if (blocks) *blocks = cache_n;
    pthread_mutex_unlock(&mu);
}

#endif
