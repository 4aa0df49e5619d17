/* dispatch.c — run-time choice of the CPU kernel table (AVX-512, AVX2, scalar); NB_SIMD caps it. */
#include "kernels.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nb_cpu_kernels *chosen;

const nb_cpu_kernels *nb__cpu_kernels_choose(void) {
    const char *force = getenv("NB_SIMD"); /* "scalar", "avx2" or "avx512": cap the level */
    __builtin_cpu_init();
    bool has512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    bool has2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const nb_cpu_kernels *best = has512 ? &nb__kernels_avx512 : has2 ? &nb__kernels_avx2 : &nb__kernels_scalar;
    if (!force || !strcmp(force, "avx512")) return best;
    if (!strcmp(force, "scalar")) return &nb__kernels_scalar;
    if (!strcmp(force, "avx2")) return has2 ? &nb__kernels_avx2 : &nb__kernels_scalar;
    fprintf(stderr, "nabla: ignoring NB_SIMD='%s' (expected scalar, avx2 or avx512); using %s\n", force, best->isa);
    return best;
}

const nb_cpu_kernels *nb__cpu_kernels(void) {
    const nb_cpu_kernels *k = __atomic_load_n(&chosen, __ATOMIC_ACQUIRE);
    if (!k) {
        k = nb__cpu_kernels_choose();
        __atomic_store_n(&chosen, k, __ATOMIC_RELEASE);
    }
    return k;
}

const char *nb_cpu_simd_level(void) { return nb__cpu_kernels()->isa; }
