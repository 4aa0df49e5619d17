/*
 * pool.c — a persistent pthread worker pool.  A job is a range function
 * split into ranges that workers claim with an atomic counter; the
 * submitting thread works too.  Thread count: NB_NUM_THREADS, else the
 * online CPU count; nb_set_num_threads.
 *
 * Waking a sleeping thread costs tens of microseconds (more in a VM), longer
 * than a whole elementwise op on a few hundred thousand elements.  So an
 * idle worker spins on the job generation while any thread still works on
 * the current job and for NB_POOL_SPIN_US after, and only then sleeps on a
 * condition variable; the submitter signals the condition only when someone
 * sleeps.  Between back-to-back ops workers stay awake.
 *
 * Publication protocol (all atomics sequentially consistent):
 *  - `gen` is even when a job is published, odd while the submitter rewrites
 *    the job fields;
 *  - a worker that sees a new even gen increments `active`, re-reads gen and
 *    only runs if it is unchanged; the submitter makes gen odd, then waits
 *    for `active` to drain before rewriting the fields.  Either the worker
 *    sees the odd gen and backs off, or the submitter sees it active and
 *    waits (store-then-load on both sides).
 *  - sleepers: a worker increments `sleepers` (under mu) before its last
 *    check of gen; the submitter stores gen before reading `sleepers`, and
 *    broadcasts under mu when it is nonzero.
 */
#include "pool.h"
#include "../../core/internal.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define NB_POOL_MAX 256
#define NB_POOL_SPIN_US 200

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static atomic_int nthreads = 1; /* configured count (caller included); read without the lock */
static int nworkers;     /* started worker threads */
static atomic_ulong gen; /* even: job published; odd: job being rewritten */
static atomic_int active;   /* workers that may be reading the job */
static atomic_int sleepers; /* workers blocked (or about to block) on `wake` */
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

static void run_ranges(void) {
    for (;;) {
        long r = atomic_fetch_add(&job.next, 1);
        if (r >= job.nranges) break;
        job.fn(job.ctx, job.n * r / job.nranges, job.n * (r + 1) / job.nranges, (int)r);
        atomic_fetch_sub(&job.remaining, 1);
    }
}

/* Wait until gen differs from `seen` and is even; returns it.  Spins while
 * another thread still works on the current job (the next one usually
 * follows at once) and for NB_POOL_SPIN_US after, then sleeps. */
static unsigned long wait_for_job(unsigned long seen) {
    double idle_since = 0;
    for (unsigned spins = 0;; spins++) {
        unsigned long g = atomic_load(&gen);
        if (g != seen && !(g & 1)) return g;
        /* after a short pure spin, yield: with more runnable threads than
         * cores a spinning worker would steal the submitter's time slice */
        if (spins < 4096) cpu_relax();
        else sched_yield();
        if ((spins & 255) != 255) continue;
        double t = now_us();
        if (idle_since == 0 || atomic_load(&job.remaining) > 0) idle_since = t;
        else if (t - idle_since > NB_POOL_SPIN_US) break;
    }
    pthread_mutex_lock(&mu);
    atomic_fetch_add(&sleepers, 1);
    unsigned long g;
    while ((g = atomic_load(&gen)) == seen || (g & 1)) pthread_cond_wait(&wake, &mu);
    atomic_fetch_sub(&sleepers, 1);
    pthread_mutex_unlock(&mu);
    return g;
}

static void *worker(void *arg) {
    (void)arg;
    in_worker = true;
    unsigned long seen = 0;
    for (;;) {
        unsigned long g = wait_for_job(seen);
        atomic_fetch_add(&active, 1);
        if (atomic_load(&gen) == g) { /* the job is still the one we saw: run it */
            run_ranges();
            seen = g;
        }
        atomic_fetch_sub(&active, 1);
    }
    return NULL;
}

static void init(void) {
    const char *env = getenv("NB_NUM_THREADS");
    long n = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    nthreads = n < 1 ? 1 : n > NB_POOL_MAX ? NB_POOL_MAX : (int)n;
}

static void ensure_workers(int want) {
    while (nworkers < want) {
        pthread_t th;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &at, worker, NULL);
        pthread_attr_destroy(&at);
        if (rc != 0) break; /* run with fewer workers; results do not depend on it */
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

static void submit(int64_t n, int64_t nranges, nb_range_fn fn, void *ctx) {
    pthread_mutex_lock(&submit_mu);
    ensure_workers(nthreads - 1);
    unsigned long g = atomic_load(&gen);
    atomic_store(&gen, g + 1); /* odd: the job is being rewritten */
    unsigned spins = 0;
    while (atomic_load(&active) > 0) backoff(&spins); /* stragglers of the last job */
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.nranges = nranges;
    atomic_store(&job.next, 0);
    atomic_store(&job.remaining, nranges);
    atomic_store(&gen, g + 2);
    if (atomic_load(&sleepers) > 0) {
        pthread_mutex_lock(&mu);
        pthread_cond_broadcast(&wake);
        pthread_mutex_unlock(&mu);
    }
    bool was = in_worker;
    in_worker = true; /* nested parallel calls from fn run inline */
    run_ranges();
    in_worker = was;
    spins = 0;
    while (atomic_load(&job.remaining) > 0) backoff(&spins);
    pthread_mutex_unlock(&submit_mu);
}

void nb__parallel_for(int64_t n, int64_t grain, nb_range_fn fn, void *ctx) {
    if (n <= 0) return;
    int t = nb_get_num_threads();
    if (grain < 1) grain = 1;
    int64_t parts = n / grain;
    if (parts > t) parts = t;
    if (parts < 2 || in_worker) {
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
