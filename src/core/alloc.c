/*
 * alloc.c — the one door to the heap: the allocator hook (nb_set_allocator,
 * modelled on Lua's lua_Alloc) and the internal wrappers every heap
 * allocation of the library goes through (nb__malloc, nb__calloc,
 * nb__realloc, nb__strdup, nb__free; nb__alloc for 64-byte aligned buffers).
 *
 * Each block starts with a 16-byte header: the size obtained from the
 * allocator function and the distance from that block to the pointer handed
 * out.  So nb__free needs no size (and can serve as jansson's free function)
 * while the allocator function still gets the `osize` its contract
 * promises, and an aligned block is just a plain one with a longer lead.
 * A live-block count lets nb_set_allocator refuse while memory from the
 * current function is still out.
 */
#include "internal.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

typedef struct hdr {
    size_t size; /* bytes obtained from the allocator function */
    size_t lead; /* user pointer - block start */
} hdr;
#define HDR sizeof(hdr)
_Static_assert(sizeof(hdr) == 16, "the header keeps max_align_t alignment");

static void *default_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
    (void)ud, (void)osize;
    if (nsize == 0) {
        free(ptr);
        return NULL;
    }
    return ptr ? realloc(ptr, nsize) : malloc(nsize); /* malloc: no realloc detour for new blocks */
}

static nb_alloc_fn g_fn = default_alloc;
static void *g_ud;
static atomic_long g_live; /* blocks obtained from g_fn and not yet freed */
static _Thread_local unsigned long tl_failures; /* requests g_fn refused on this thread */
static json_malloc_t json_saved_malloc;
static json_free_t json_saved_free;

/* A block of `total` bytes (> HDR) whose user part starts `lead` bytes in, aligned to `align`. */
static void *block_new(size_t total, size_t align) {
    char *base = g_fn(g_ud, NULL, 0, total);
    if (!base) {
        tl_failures++;
        return NULL;
    }
    atomic_fetch_add_explicit(&g_live, 1, memory_order_relaxed);
    char *p = (char *)(((uintptr_t)base + HDR + align - 1) & ~(uintptr_t)(align - 1));
    ((hdr *)p)[-1] = (hdr){total, (size_t)(p - base)};
    return p;
}

void *nb__malloc(size_t n) { return n > SIZE_MAX - HDR ? NULL : block_new(n + HDR, 1); }

void *nb__calloc(size_t count, size_t size) {
    size_t n;
    if (__builtin_mul_overflow(count, size, &n)) return NULL;
    void *p = nb__malloc(n);
    if (p) memset(p, 0, n);
    return p;
}

void *nb__realloc(void *p, size_t n) {
    if (!p) return nb__malloc(n);
    hdr h = ((hdr *)p)[-1];
    NB_ASSERT(h.lead == HDR); /* aligned blocks (nb__alloc) are never resized */
    if (n > SIZE_MAX - HDR) return NULL;
    char *base = g_fn(g_ud, (char *)p - HDR, h.size, n + HDR);
    if (!base) { /* the old block is untouched */
        tl_failures++;
        return NULL;
    }
    ((hdr *)base)->size = n + HDR;
    return base + HDR;
}

char *nb__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = nb__malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

void nb__free(void *p) {
    if (!p) return;
    hdr h = ((hdr *)p)[-1];
    atomic_fetch_sub_explicit(&g_live, 1, memory_order_relaxed);
    g_fn(g_ud, (char *)p - h.lead, h.size, 0);
}

void *nb__alloc(size_t nbytes) {
    if (nbytes > SIZE_MAX - HDR - 127) {
        nb__error(NB_ERR_OVERFLOW, "alloc: %zu bytes overflows size_t", nbytes);
        return NULL;
    }
    size_t n = (nbytes + 63) & ~(size_t)63; /* whole 64-byte lines, as aligned_alloc gave */
    void *p = block_new(n + HDR + 63, 64);
    if (!p) nb__error(NB_ERR_OOM, "alloc: out of memory allocating %zu bytes", nbytes);
    return p;
}

unsigned long nb__alloc_failures(void) { return tl_failures; }

bool nb__allocator_custom(void) { return g_fn != default_alloc; }

/* jansson keeps one process-wide pair of functions: point it at ours while a
 * custom allocator is installed, give it back its own otherwise. */
static void *json_alloc(size_t n) { return nb__malloc(n); }

nb_status nb_set_allocator(nb_alloc_fn fn, void *ud) {
    long live = atomic_load(&g_live);
    if (live != 0)
        return nb__error_set(NB_ERR_STATE, "set_allocator: %ld blocks from the current allocator are still live "
                                           "(tensors, modules, optimizers, safetensors handles or open scopes)",
                             live);
    bool was_custom = nb__allocator_custom();
    g_fn = fn ? fn : default_alloc;
    g_ud = fn ? ud : NULL;
    if (nb__allocator_custom() && !was_custom) {
        json_get_alloc_funcs(&json_saved_malloc, &json_saved_free);
        json_set_alloc_funcs(json_alloc, nb__free);
    } else if (!nb__allocator_custom() && was_custom) {
        json_set_alloc_funcs(json_saved_malloc, json_saved_free);
    }
    return NB_OK;
}

nb_alloc_fn nb_get_allocator(void **ud) {
    if (ud) *ud = g_ud;
    return g_fn;
}
