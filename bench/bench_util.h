/*
 * bench_util.h — timing helpers shared by the nabla benchmarks: a monotonic
 * clock, the median of repeated timings after warm-up, and the memory-copy
 * baseline (plain memcpy split over T POSIX threads) that bandwidth ratios
 * are quoted against.  Header-only: each bench_*.c is one executable.
 */
#ifndef NB_BENCH_UTIL_H
#define NB_BENCH_UTIL_H

#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Wall-clock seconds; with NB_BENCH_CLOCK=cpu the calling thread's CPU
 * time instead (for single-threaded overhead numbers on a loaded machine:
 * time spent descheduled is not counted). */
static inline double bench_now(void) {
    static int clock_id = -1;
    if (clock_id < 0) {
        const char *v = getenv("NB_BENCH_CLOCK");
        clock_id = v && !strcmp(v, "cpu") ? CLOCK_THREAD_CPUTIME_ID : CLOCK_MONOTONIC;
    }
    struct timespec ts;
    clock_gettime(clock_id, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/** Timing summary of one benchmark: seconds per call. */
typedef struct bench_stat {
    double median, min, max;
} bench_stat;

#define BENCH_MAX_REPS 64

/**
 * Time fn(ctx) `reps` times after `warmup` untimed calls; each timed sample
 * runs fn `inner` times and is divided by inner (for sub-microsecond ops).
 */
static inline bench_stat bench_run(void (*fn)(void *), void *ctx, int warmup, int reps, long inner) {
    double t[BENCH_MAX_REPS];
    if (reps > BENCH_MAX_REPS) reps = BENCH_MAX_REPS;
    for (int i = 0; i < warmup; i++) fn(ctx);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (long i = 0; i < inner; i++) fn(ctx);
        t[r] = (bench_now() - t0) / (double)inner;
    }
    qsort(t, (size_t)reps, sizeof t[0], bench_cmp_double);
    return (bench_stat){t[reps / 2], t[0], t[reps - 1]};
}

/* ---- the copy baseline: memcpy split into T contiguous parts ---- */

typedef struct bench_copy_part {
    char *dst;
    const char *src;
    size_t n, piece;
} bench_copy_part;

static inline void *bench_copy_part_run(void *p) {
    bench_copy_part *c = p;
    for (size_t i = 0; i < c->n; i += c->piece)
        memcpy(c->dst + i, c->src + i, c->n - i < c->piece ? c->n - i : c->piece);
    return NULL;
}

typedef struct bench_copy {
    char *dst;
    const char *src;
    size_t nbytes;
    int threads;
    size_t piece; /* bytes per memcpy call; 0 = one call per thread */
} bench_copy;

/**
 * memcpy(dst, src, nbytes) with the range split over `threads` threads (the
 * caller is one).  One call per thread lets glibc pick non-temporal stores
 * for large sizes; pieces of 256 KiB keep it on ordinary stores.
 */
static inline void bench_copy_run(void *p) {
    bench_copy *c = p;
    enum { MAXT = 16 };
    pthread_t th[MAXT];
    bench_copy_part part[MAXT];
    int t = c->threads < 1 ? 1 : c->threads > MAXT ? MAXT : c->threads;
    size_t chunk = (c->nbytes / (size_t)t + 63) & ~(size_t)63;
    for (int i = 0; i < t; i++) {
        size_t lo = chunk * (size_t)i < c->nbytes ? chunk * (size_t)i : c->nbytes;
        size_t hi = lo + chunk < c->nbytes ? lo + chunk : c->nbytes;
        part[i] = (bench_copy_part){c->dst + lo, c->src + lo, hi - lo, c->piece ? c->piece : hi - lo + 1};
    }
    for (int i = 1; i < t; i++) pthread_create(&th[i], NULL, bench_copy_part_run, &part[i]);
    bench_copy_part_run(&part[0]);
    for (int i = 1; i < t; i++) pthread_join(th[i], NULL);
}

/** CPU model name from /proc/cpuinfo (static buffer). */
static inline const char *bench_cpu_model(void) {
    static char name[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            char *c = strchr(line, ':');
            if (c) {
                snprintf(name, sizeof name, "%s", c + 2);
                name[strcspn(name, "\n")] = 0;
            }
            break;
        }
    }
    if (f) fclose(f);
    return name;
}

/**
 * Time the copy baselines of nbytes (1..threads threads; whole-range memcpy
 * and 256 KiB pieces), print one table row each with `bytes_per_copy`
 * bytes counted per copy (2 nbytes for read + write, nbytes for read only),
 * and return the best rate in GB/s: the baseline ratios are quoted against.
 */
static inline double bench_copy_baselines(size_t nbytes, int threads, int reps, double bytes_per_copy) {
    char *src = malloc(nbytes), *dst = malloc(nbytes);
    memset(src, 1, nbytes);
    memset(dst, 0, nbytes);
    double best = 0;
    for (int piece = 0; piece < 2; piece++)
        for (int t = 1; t <= threads; t++) {
            bench_copy cc = {dst, src, nbytes, t, piece ? (size_t)256 << 10 : 0};
            bench_stat s = bench_run(bench_copy_run, &cc, 2, reps, 1);
            double bw = bytes_per_copy / s.median / 1e9;
            if (bw > best) best = bw;
            printf("| memcpy%s, %d thread%s | %.2f | %.2f..%.2f | %.1f | |\n", piece ? " in 256 KiB pieces" : "",
                   t, t > 1 ? "s" : "", s.median * 1e3, s.min * 1e3, s.max * 1e3, bw);
        }
    free(src);
    free(dst);
    return best;
}

static inline int bench_env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v ? atoi(v) : dflt;
}

#endif
