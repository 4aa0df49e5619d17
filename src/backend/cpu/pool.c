/*
 * pool.c — a persistent pthread worker pool.  A job is a range function
 * split into ranges that workers claim with an atomic counter; the
 * submitting thread works too, so a job finishes even when no worker ever
 * wakes for it.  Thread count: NB_NUM_THREADS, else the online CPU count;
 * nb_set_num_threads.  nb_shutdown (and an exit handler) joins the workers.
 *
 * Waking a sleeping thread costs ~10 microseconds (more in a VM), longer
 * than an elementwise op on a few hundred thousand elements.  So a worker
 * that runs out of ranges spins on the job generation for an adaptive
 * window of 2-20 us (back-to-back parallel ops follow within it), then
 * sleeps in a futex wait on the generation word itself; the submitter makes
 * the wake system call only when someone sleeps.  A longer spin burns the core
 * through every serial stretch of the caller (a profile of MLP training
 * showed the worker spinning for 20 % of its samples with a 200 us spin).
 *
 * Publication protocol (all atomics sequentially consistent):
 *  - `gen` is even when a job is published, odd while the submitter rewrites
 *    the job fields;
 *  - a worker that sees a new even gen increments `active`, re-reads gen and
 *    only runs if it is unchanged; the submitter makes gen odd, then waits
 *    for `active` to drain before rewriting the fields.  Either the worker
 *    sees the odd gen and backs off, or the submitter sees it active and
 *    waits (store-then-load on both sides).
 *  - sleepers: a worker increments `sleepers` before its last check of gen
 *    and futex-waits only while gen still holds the value it checked; the
 *    submitter stores gen before reading `sleepers`.
 *  - shutdown: `quit` is set, gen advanced by a full job step and everyone
 *    woken; a worker that sees quit exits and is joined.
 */
#include "pool.h"
#include "../../core/internal.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NB_POOL_MAX 256
#define NB_POOL_SPIN_US 20.0    /* longest spin window */
#define NB_POOL_SPIN_MIN_US 2.0 /* shortest: still catches a job submitted right after the last */
#define NB_POOL_SPLIT 4         /* ranges per thread in nb__parallel_for */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int nthreads = 1; /* configured count (caller included); read without the lock */
static int nworkers;            /* started worker threads (under submit_mu) */
static pthread_t workers[NB_POOL_MAX];
static atomic_uint gen;     /* futex word; even: job published; odd: job being rewritten */
static atomic_int active;   /* workers that may be reading the job */
static atomic_int sleepers; /* workers in (or about to enter) the futex wait */
static atomic_bool quit;
static _Thread_local bool in_worker;

static struct {
    nb_range_fn fn;
    void *ctx;
    int64_t n, nranges;
    atomic_long next, remaining;
} job;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void futex_wait(atomic_uint *word, unsigned val) {
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(atomic_uint *word) {
    syscall(SYS_futex, (unsigned *)word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

static void run_ranges(void) {
    for (;;) {
        long r = atomic_fetch_add(&job.next, 1);
        if (r >= job.nranges) break;
        job.fn(job.ctx, job.n * r / job.nranges, job.n * (r + 1) / job.nranges, (int)r);
        atomic_fetch_sub(&job.remaining, 1);
    }
}

static bool is_new(unsigned g, unsigned seen) { return g != seen && !(g & 1); }

/* Wait until gen differs from `seen` and is even; returns it.  Spins for
 * up to *spin_us (yielding after a short pure spin: with more runnable
 * threads than cores a spinning worker would steal the submitter's time
 * slice), then sleeps on the futex.  The window adapts to the gaps between
 * jobs: it halves (down to NB_POOL_SPIN_MIN_US) each time it expires idle and
 * grows by a quarter (up to NB_POOL_SPIN_US) each time a job arrives in it,
 * so a caller with long serial stretches does not keep a core spinning while
 * back-to-back ops still find the worker awake. */
static unsigned wait_for_job(unsigned seen, double *spin_us) {
    double t0 = now_us();
    for (unsigned spins = 1;; spins++) {
        unsigned g = atomic_load(&gen);
        if (is_new(g, seen)) {
            *spin_us = *spin_us * 1.25 > NB_POOL_SPIN_US ? NB_POOL_SPIN_US : *spin_us * 1.25;
            return g;
        }
        if (spins < 2048) cpu_relax();
        else sched_yield();
        if ((spins & 15) == 0 && now_us() - t0 > *spin_us) break;
    }
    *spin_us = *spin_us / 2 < NB_POOL_SPIN_MIN_US ? NB_POOL_SPIN_MIN_US : *spin_us / 2;
    atomic_fetch_add(&sleepers, 1);
    unsigned g;
    while (!is_new(g = atomic_load(&gen), seen)) futex_wait(&gen, g);
    atomic_fetch_sub(&sleepers, 1);
    return g;
}

static void *worker(void *arg) {
    (void)arg;
    in_worker = true;
    unsigned seen = atomic_load(&gen);
    double spin_us = NB_POOL_SPIN_US;
    while (!atomic_load(&quit)) {
        unsigned g = wait_for_job(seen, &spin_us);
        atomic_fetch_add(&active, 1);
        if (atomic_load(&gen) == g && !atomic_load(&quit)) { /* the job is still the one we saw: run it */
            run_ranges();
            seen = g;
        }
        atomic_fetch_sub(&active, 1);
    }
    return NULL;
}

int nb__env_num_threads(void) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 1) cpus = 1;
    if (cpus > NB_POOL_MAX) cpus = NB_POOL_MAX;
    const char *env = getenv("NB_NUM_THREADS");
    if (!env) return (int)cpus;
    char *end;
    errno = 0;
    long n = strtol(env, &end, 10);
    if (end != env && !*end && !errno && n >= 1 && n <= NB_POOL_MAX) return (int)n;
    fprintf(stderr, "nabla: ignoring NB_NUM_THREADS='%s' (expected an integer in [1, %d]); using %ld threads\n", env,
            NB_POOL_MAX, cpus);
    return (int)cpus;
}

/* In a fork()ed child only the forking thread exists. */
static void forget_workers(void) {
    nworkers = 0;
    atomic_store(&active, 0);
    atomic_store(&sleepers, 0);
}

static void stop_workers(void);

/* At exit, stop idle workers (skipped when another thread is submitting). */
static void stop_at_exit(void) {
    if (pthread_mutex_trylock(&submit_mu) != 0) return;
    pthread_mutex_unlock(&submit_mu);
    stop_workers();
}

static void init(void) {
    nthreads = nb__env_num_threads();
    pthread_atfork(NULL, NULL, forget_workers);
    atexit(stop_at_exit);
}

static void ensure_workers(int want) {
    while (nworkers < want) {
        if (pthread_create(&workers[nworkers], NULL, worker, NULL) != 0)
            break; /* run with fewer workers; results do not depend on it */
        nworkers++;
    }
}

int nb_get_num_threads(void) {
    pthread_once(&once, init);
    return nthreads;
}

void nb_set_num_threads(int n) {
    pthread_once(&once, init);
    pthread_mutex_lock(&submit_mu);
    nthreads = n < 1 ? 1 : n > NB_POOL_MAX ? NB_POOL_MAX : n;
    pthread_mutex_unlock(&submit_mu);
}

/* Spin briefly, then yield the CPU (the thread we wait for may need it). */
static void backoff(unsigned *spins) {
    if (++*spins < 4096) cpu_relax();
    else sched_yield();
}

/* Make gen odd and wait until no worker reads the job fields (submit_mu held); returns the old gen. */
static unsigned begin_rewrite(void) {
    unsigned g = atomic_load(&gen);
    atomic_store(&gen, g + 1);
    unsigned spins = 0;
    while (atomic_load(&active) > 0) backoff(&spins); /* stragglers of the last job */
    return g;
}

/* Publish gen g + 2 and wake the sleepers (submit_mu held). */
static void publish(unsigned g) {
    atomic_store(&gen, g + 2);
    if (atomic_load(&sleepers) > 0) futex_wake_all(&gen);
}

static void submit(int64_t n, int64_t nranges, nb_range_fn fn, void *ctx) {
    pthread_mutex_lock(&submit_mu);
    ensure_workers(nthreads - 1);
    unsigned g = begin_rewrite();
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.nranges = nranges;
    atomic_store(&job.next, 0);
    atomic_store(&job.remaining, nranges);
    publish(g);
    bool was = in_worker;
    in_worker = true; /* nested parallel calls from fn run inline */
    run_ranges();
    in_worker = was;
    unsigned spins = 0;
    while (atomic_load(&job.remaining) > 0) backoff(&spins);
    pthread_mutex_unlock(&submit_mu);
}

/* Join every worker; the next submit starts them again. */
static void stop_workers(void) {
    pthread_mutex_lock(&submit_mu);
    if (nworkers > 0) {
        atomic_store(&quit, true);
        unsigned g = begin_rewrite();
        job.nranges = 0; /* a worker that slips in finds nothing to run */
        atomic_store(&job.next, 0);
        publish(g);
        for (int i = 0; i < nworkers; i++) pthread_join(workers[i], NULL);
        nworkers = 0;
        atomic_store(&quit, false);
    }
    pthread_mutex_unlock(&submit_mu);
}

void nb_shutdown(void) {
    nb_compile_cache_clear(); /* this thread's plans (main's: its exit runs no thread-exit hook) */
    pthread_once(&once, init);
    stop_workers();
    nb_alloc_cache_release();
}

void nb__parallel_for(int64_t n, int64_t grain, nb_range_fn fn, void *ctx) {
    if (n <= 0) return;
    int t = nb_get_num_threads();
    if (grain < 1) grain = 1;
    /* up to NB_POOL_SPLIT ranges a thread: a worker that wakes late claims fewer, and the
     * caller and the workers finish together instead of the caller waiting on the last one */
    int64_t parts = n / grain;
    if (parts > (int64_t)t * NB_POOL_SPLIT) parts = (int64_t)t * NB_POOL_SPLIT;
    if (t < 2 || parts < 2 || in_worker) {
        fn(ctx, 0, n, 0);
        return;
    }
    submit(n, parts, fn, ctx);
}

void nb__parallel_chunks(int64_t n, int64_t nchunks, nb_range_fn fn, void *ctx) {
    if (n <= 0 || nchunks <= 0) return;
    if (nchunks > n) nchunks = n;
    if (nchunks == 1 || nb_get_num_threads() == 1 || in_worker) {
        for (int64_t r = 0; r < nchunks; r++) fn(ctx, n * r / nchunks, n * (r + 1) / nchunks, (int)r);
        return;
    }
    submit(n, nchunks, fn, ctx);
}
