/*
 * stream.c — writing large outputs past the caches (non-temporal stores).
 *
 * An ordinary store to a line that is not cached first reads the line from
 * memory (a read for ownership), so a kernel that reads one array and writes
 * another moves three arrays' bytes, where memcpy (glibc's, past its own
 * threshold) moves two.  Measured on the 2-core AVX-512 VM (bench/RESULTS.md
 * §18): y = x·1.5 + 0.5 over 8–256 MiB took 0.70–0.78 of the time with
 * non-temporal stores (AVX-512 `vmovntps`) than with ordinary ones, the next op's
 * read of y included; at 1–4 MiB (within the two cores' L2) ordinary stores
 * won by 1.2–1.6x.  So row kernels (fused.c) compute such outputs into a
 * block that stays in L1 and stream it out when the call's outputs are
 * larger than the L2 caches of the threads that run it.  (Elementwise fused
 * kernels and eager ops measured slower that way on the same VM, where the
 * benchmarks' buffers stay in a large L3: they keep ordinary stores.)  The
 * bytes written are the same either way.
 */
#include "kernels.h"

#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

static _Atomic int64_t stream_min = -1; /* bytes; -1: L2 per core times the thread count */
static _Atomic int64_t l2_bytes;          /* 0 until first asked (sysconf runs cpuid: a VM exit each) */

void nb__cpu_stream_set_min(int64_t bytes) { atomic_store(&stream_min, bytes < 0 ? -1 : bytes); }

bool nb__cpu_stream_worth(int64_t out_bytes) {
    int64_t min = atomic_load(&stream_min);
    if (min < 0) {
#if defined(__SSE2__)
        int64_t l2 = atomic_load(&l2_bytes);
        if (l2 == 0) {
            long b = sysconf(_SC_LEVEL2_CACHE_SIZE);
            l2 = b > 0 ? b : 1 << 20;
            atomic_store(&l2_bytes, l2);
        }
        min = l2 * nb_get_num_threads();
#else
        return false; /* no streaming store: stream_store would be memcpy */
#endif
    }
    return out_bytes > min;
}

#if defined(__SSE2__)
/* dst[0, n) from src with stores of W bytes: ordinary ones up to dst's first W-byte boundary and
 * after its last, non-temporal ones (STORE of a LOAD) between. */
#define STREAM_COPY(W, LOAD, STORE)                                                                     \
    size_t head = (W - ((uintptr_t)dst & (W - 1))) & (W - 1);                                           \
    if (head > n) head = n;                                                                             \
    memcpy(dst, src, head);                                                                             \
    size_t i = head;                                                                                    \
    for (; i + W <= n; i += W) STORE(dst + i, LOAD(src + i));                                           \
    memcpy(dst + i, src + i, n - i)
#define LOAD16(p) _mm_loadu_si128((const __m128i *)(p))
#define STORE16(p, v) _mm_stream_si128((__m128i *)(p), v)
#define LOAD32(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE32(p, v) _mm256_stream_si256((__m256i *)(p), v)
#define LOAD64(p) _mm512_loadu_si512((const void *)(p))
#define STORE64(p, v) _mm512_stream_si512((void *)(p), v)
static void store16(char *dst, const char *src, size_t n) { STREAM_COPY(16, LOAD16, STORE16); }
__attribute__((target("avx"))) static void store32(char *dst, const char *src, size_t n) {
    STREAM_COPY(32, LOAD32, STORE32);
}
__attribute__((target("avx512f"))) static void store64(char *dst, const char *src, size_t n) {
    STREAM_COPY(64, LOAD64, STORE64);
}
#endif

void nb__cpu_stream_store(char *dst, const char *src, size_t n) {
#if defined(__SSE2__)
    /* one store instruction per 64 bytes where the kernels' ISA has them: 16-byte ones cost a
     * compute-bound kernel (gelu) about 10% */
    const nb_cpu_kernels *k = nb__cpu_kernels();
    if (k == &nb__kernels_avx512) store64(dst, src, n);
    else if (k == &nb__kernels_avx2) store32(dst, src, n);
    else store16(dst, src, n);
#else
    memcpy(dst, src, n);
#endif
}

void nb__cpu_stream_fence(void) {
#if defined(__SSE2__)
    _mm_sfence();
#endif
}
