/* test_runtime.c — the caching allocator (reuse, bounds, release, no fresh pages in a steady
 * training loop), the worker pool's shutdown, and validation of NB_NUM_THREADS, NB_SIMD and
 * NB_ALLOC_CACHE_MB. */
#include "support.h"

#include "backend/cpu/jit.h"
#include "backend/cpu/kernels.h"
#include "backend/cpu/pool.h"
#include "compile/compile.h"
#include "core/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static nb_tensor *buf(int64_t nbytes) { return NBT(nb_empty(NB_SHAPE(nbytes), NB_U8)); }

static size_t cached_bytes(void) {
    size_t b;
    nb_alloc_cache_stats(&b, NULL);
    return b;
}

static size_t cached_blocks(void) {
    size_t n;
    nb_alloc_cache_stats(NULL, &n);
    return n;
}

#ifndef NB_ASAN

/* A freed buffer serves the next request of its size class, most recently freed first. */
static void cache_reuses_by_size_class(void **state) {
    (void)state;
    nb_alloc_cache_release();
    assert_int_equal(cached_bytes(), 0);
    nb_tensor *a = buf(1000000), *b = buf(1000000);
    void *pa = nb_data_ptr(a), *pb = nb_data_ptr(b);
    nb_release(a);
    nb_release(b);
    assert_int_equal(cached_blocks(), 2);
    assert_true(cached_bytes() >= 2000000 && cached_bytes() <= 2500000); /* classes: at most 25 % slack */
    nb_tensor *c = buf(990000); /* same class as 1000000 */
    assert_ptr_equal(nb_data_ptr(c), pb);
    nb_tensor *d = buf(1000000);
    assert_ptr_equal(nb_data_ptr(d), pa);
    assert_int_equal(cached_blocks(), 0);
    nb_release(c);
    nb_release(d);
    nb_alloc_cache_release();
    assert_int_equal(cached_bytes(), 0);
    assert_int_equal(cached_blocks(), 0);
}

/* The byte limit keeps the most recently freed blocks; a block above the limit is not kept. */
static void cache_byte_limit_evicts_oldest(void **state) {
    (void)state;
    nb_alloc_cache_release();
    nb_alloc_cache_set_limit((size_t)3 << 20);
    nb_tensor *t[4];
    void *p[4];
    for (int i = 0; i < 4; i++) {
        t[i] = buf((int64_t)1 << 20);
        p[i] = nb_data_ptr(t[i]);
    }
    for (int i = 0; i < 4; i++) nb_release(t[i]);
    assert_int_equal(cached_blocks(), 3);
    assert_int_equal(cached_bytes(), (size_t)3 << 20);
    for (int i = 3; i >= 1; i--) { /* p[0], the oldest, went back to the system */
        t[i] = buf((int64_t)1 << 20);
        assert_ptr_equal(nb_data_ptr(t[i]), p[i]);
    }
    nb_tensor *big = buf((int64_t)4 << 20);
    nb_release(big);
    assert_int_equal(cached_blocks(), 0);
    for (int i = 1; i < 4; i++) nb_release(t[i]);
    nb_alloc_cache_set_limit((size_t)1 << 20); /* lowering the limit releases what is above it */
    assert_int_equal(cached_blocks(), 1);
    nb_alloc_cache_set_limit(0);
    assert_int_equal(cached_blocks(), 0);
    nb_release(buf(100000));
    assert_int_equal(cached_blocks(), 0); /* limit 0: caching off */
    nb_alloc_cache_set_limit((size_t)256 << 20);
}

/* At most 2048 blocks are kept, whatever their total size. */
static void cache_block_limit(void **state) {
    (void)state;
    nb_alloc_cache_release();
    enum { N = 2100 };
    nb_tensor **t = malloc(N * sizeof *t);
    for (int i = 0; i < N; i++) t[i] = buf(1000);
    for (int i = 0; i < N; i++) nb_release(t[i]);
    free(t);
    assert_int_equal(cached_blocks(), 2048);
    nb_alloc_cache_release();
    assert_int_equal(cached_blocks(), 0);
}

static long minor_faults(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_minflt;
}

/* One training step of a deep elementwise chain: 24 tracked intermediates (12 layers of mul + tanh) of
 * each of two sizes (1.2 MB and 4.4 MB) stay alive until the backward pass,
 * more buffers than glibc keeps around or a 16-slot cache would hold. */
static void train_step(nb_tensor *small, nb_tensor *big) {
    nb_scope_begin();
    nb_tensor *loss = NULL;
    nb_tensor *x[2] = {small, big};
    for (int i = 0; i < 2; i++) {
        nb_tensor *h = x[i];
        for (int k = 0; k < 12; k++) h = nb_tanh(nb_mul(h, 1.01));
        nb_tensor *s = nb_sum(h, NULL, 0, false);
        loss = loss ? nb_add(loss, s) : s;
    }
    assert_int_equal(nb_backward(loss, NULL, false), NB_OK);
    assert_non_null(nb_grad(small)); /* owned by the scope */
    assert_non_null(nb_grad(big));
    nb_zero_grad(small);
    nb_zero_grad(big);
    nb_scope_end();
}

/* After warm-up, steps that allocate the same shapes touch no fresh pages. */
static void steady_training_touches_no_fresh_pages(void **state) {
    (void)state;
    nb_manual_seed(3);
    nb_tensor *small = NBT(nb_randn(NB_SHAPE(300000), NB_F32)), *big = NBT(nb_randn(NB_SHAPE(1100000), NB_F32));
    assert_int_equal(nb_set_requires_grad(small, true), NB_OK);
    assert_int_equal(nb_set_requires_grad(big, true), NB_OK);
    for (int i = 0; i < 2; i++) train_step(small, big);
    long f0 = minor_faults();
    for (int i = 0; i < 3; i++) train_step(small, big);
    long faults = minor_faults() - f0; /* before the cache: 63,000 (glibc returns the blocks every step) */
    assert_true(faults <= 8);          /* a stray fault or two (stack, libc internals) is not the loop's */
    nb_release(small);
    nb_release(big);
}

#else

/* Under AddressSanitizer nothing is cached, so use-after-free stays visible. */
static void cache_is_off_under_asan(void **state) {
    (void)state;
    nb_release(buf(1000000));
    assert_int_equal(cached_bytes(), 0);
    assert_int_equal(cached_blocks(), 0);
}

#endif

/* nb_shutdown joins the workers and drops this thread's cached plans; the next parallel op starts
 * the workers again with the same results, and a plan still held keeps running. */
static void shutdown_then_restart(void **state) {
    (void)state;
    int saved = nb_get_num_threads();
    nb_set_num_threads(2);
    nb_tensor *a = NBT(nb_arange(0, 1 << 20, 1, NB_F32));
    nb_graph *g = nb_graph_begin("double");
    nb_tensor *x = NBT(nb_graph_input(g, "x", NB_F32, NB_SHAPE(1 << 20)));
    assert_int_equal(nb_graph_output(g, "y", nb_add(x, x)), NB_OK);
    assert_int_equal(nb_graph_end(g), NB_OK);
    for (int round = 0; round < 3; round++) {
        nb_tensor *s = NBT(nb_add(a, a));
        const float *v = nb_data_ptr(s);
        assert_true(v[0] == 0.0f && v[12345] == 24690.0f && v[(1 << 20) - 1] == 2.0f * (float)((1 << 20) - 1));
        nb_compiled *c = nb_graph_compile(g, NB_CPU);
        assert_non_null(c);
        assert_int_equal(nb_compile_cache_stats_get().entries, 1);
        nb_shutdown();
        assert_int_equal(nb_compile_cache_stats_get().entries, 0);
        nb_tensor *y;
        assert_int_equal(nb_compiled_run(c, 1, (const char *[]){"x"}, &a, 1, &y), NB_OK);
        assert_int_equal(memcmp(nb_data_ptr(y), v, (size_t)4 << 20), 0);
        nb_release(y);
        nb_release(s);
        nb_compiled_release(c);
        nb_shutdown();
        assert_int_equal(cached_bytes(), 0);
    }
    nb_graph_release(g);
    nb_shutdown(); /* twice in a row is fine */
    nb_release(a);
    nb_set_num_threads(saved);
}

/* Run fn with stderr redirected to a temporary file; returns what it wrote (static buffer). */
static const char *stderr_of(void (*fn)(void *), void *arg) {
    static char out[512];
    fflush(stderr);
    FILE *tmp = tmpfile();
    assert_non_null(tmp);
    int saved = dup(2);
    dup2(fileno(tmp), 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(tmp);
    size_t n = fread(out, 1, sizeof out - 1, tmp);
    out[n] = 0;
    fclose(tmp);
    return out;
}

static void env_threads(void *res) { *(int *)res = nb__env_num_threads(); }
static void env_simd(void *res) { *(const char **)res = nb__cpu_kernels_choose()->isa; }

/* NB_NUM_THREADS must be an integer in [1, 256]; anything else warns and uses the CPU count. */
static void num_threads_env_is_validated(void **state) {
    (void)state;
    int cpus = (int)sysconf(_SC_NPROCESSORS_ONLN), n = 0;
    const char *bad[] = {"abc", "0", "-5", "4x", "", "100000"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("NB_NUM_THREADS", bad[i], 1);
        const char *err = stderr_of(env_threads, &n);
        assert_int_equal(n, cpus);
        char want[64];
        snprintf(want, sizeof want, "NB_NUM_THREADS='%s'", bad[i]);
        assert_non_null(strstr(err, want));
    }
    setenv("NB_NUM_THREADS", "3", 1);
    assert_string_equal(stderr_of(env_threads, &n), "");
    assert_int_equal(n, 3);
    unsetenv("NB_NUM_THREADS");
    assert_string_equal(stderr_of(env_threads, &n), "");
    assert_int_equal(n, cpus);
}

/* NB_SIMD must be scalar, avx2 or avx512; anything else warns and keeps the CPU's best level. */
static void simd_env_is_validated(void **state) {
    (void)state;
    const char *best, *got;
    unsetenv("NB_SIMD");
    assert_string_equal(stderr_of(env_simd, &best), "");
    setenv("NB_SIMD", "bogus", 1);
    const char *err = stderr_of(env_simd, &got);
    assert_string_equal(got, best);
    assert_non_null(strstr(err, "NB_SIMD='bogus'"));
    setenv("NB_SIMD", "scalar", 1);
    assert_string_equal(stderr_of(env_simd, &got), "");
    assert_string_equal(got, "scalar");
    setenv("NB_SIMD", "avx512", 1);
    assert_string_equal(stderr_of(env_simd, &got), "");
    assert_string_equal(got, best);
    unsetenv("NB_SIMD");
}

static void env_fuse(void *res) { *(bool *)res = nb__env_fuse(); }
static void env_jit(void *res) { *(bool *)res = nb__jit_env(); }

/* The on/off switch `name` read by `read`: unset and 1 are on, 0 is off, anything else warns
 * (naming the variable and its value) and is on. */
static void check_switch(const char *name, void (*read)(void *)) {
    bool on = false;
    char want[64];
    snprintf(want, sizeof want, "%s='yes'", name);
    unsetenv(name);
    assert_string_equal(stderr_of(read, &on), "");
    assert_true(on);
    setenv(name, "0", 1);
    assert_string_equal(stderr_of(read, &on), "");
    assert_false(on);
    setenv(name, "yes", 1);
    assert_non_null(strstr(stderr_of(read, &on), want));
    assert_true(on);
    unsetenv(name);
}

/* NB_FUSE (fusion) and NB_JIT (kernels compiled at run time) must be 0 or 1. */
static void switch_envs_are_validated(void **state) {
    (void)state;
    check_switch("NB_FUSE", env_fuse);
    check_switch("NB_JIT", env_jit);
}

static void env_cache(void *res) { *(size_t *)res = nb__env_alloc_cache_bytes(); }

/* NB_ALLOC_CACHE_MB must be a number of MiB >= 0; anything else warns and keeps the default 256. */
static void cache_env_is_validated(void **state) {
    (void)state;
    size_t b = 0;
    const char *bad[] = {"abc", "-1", "12MB", ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        setenv("NB_ALLOC_CACHE_MB", bad[i], 1);
        const char *err = stderr_of(env_cache, &b);
        assert_int_equal(b, (size_t)256 << 20);
        char want[64];
        snprintf(want, sizeof want, "NB_ALLOC_CACHE_MB='%s'", bad[i]);
        assert_non_null(strstr(err, want));
    }
    setenv("NB_ALLOC_CACHE_MB", "0", 1);
    assert_string_equal(stderr_of(env_cache, &b), "");
    assert_int_equal(b, 0);
    setenv("NB_ALLOC_CACHE_MB", "64", 1);
    assert_string_equal(stderr_of(env_cache, &b), "");
    assert_int_equal(b, (size_t)64 << 20);
    unsetenv("NB_ALLOC_CACHE_MB");
    assert_string_equal(stderr_of(env_cache, &b), "");
    assert_int_equal(b, (size_t)256 << 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#ifndef NB_ASAN
        cmocka_unit_test(cache_reuses_by_size_class),
        cmocka_unit_test(cache_byte_limit_evicts_oldest),
        cmocka_unit_test(cache_block_limit),
        cmocka_unit_test(steady_training_touches_no_fresh_pages),
#else
        cmocka_unit_test(cache_is_off_under_asan),
#endif
        cmocka_unit_test(shutdown_then_restart),
        cmocka_unit_test(num_threads_env_is_validated),
        cmocka_unit_test(simd_env_is_validated),
        cmocka_unit_test(cache_env_is_validated),
        cmocka_unit_test(switch_envs_are_validated),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
