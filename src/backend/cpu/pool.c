/*
 * pool.c — a persistent pthread worker pool.  Workers sleep on a condition
 * variable between jobs; a job is a range function split into ranges that
 * workers claim with an atomic counter; the submitting thread works too.
 * Thread count: NB_NUM_THREADS, else the online CPU count; nb_set_num_threads.
 */
#include "pool.h"
#include "../../core/internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#define NB_POOL_MAX 256

static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t submit_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static int nthreads = 1; /* configured count (caller included) */
static int nworkers;     /* started worker threads */
static uint64_t generation;
static int active; /* workers inside run_ranges; job fields change only at 0 */
static _Thread_local bool in_worker;

static struct {
    nb_range_fn fn;
    void *ctx;
    int64_t n, nranges;
    bool fixed; /* fixed chunks: tid = range index */
    atomic_long next, remaining;
} job;

static void run_ranges(void) {
    for (;;) {
        long r = atomic_fetch_add(&job.next, 1);
        if (r >= job.nranges) break;
        int64_t lo = job.n * r / job.nranges, hi = job.n * (r + 1) / job.nranges;
        job.fn(job.ctx, lo, hi, (int)r);
        if (atomic_fetch_sub(&job.remaining, 1) == 1) {
            pthread_mutex_lock(&mu);
            pthread_cond_broadcast(&done_cv);
            pthread_mutex_unlock(&mu);
        }
    }
}

static void *worker(void *arg) {
    (void)arg;
    in_worker = true;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&mu);
        while (generation == seen) pthread_cond_wait(&wake, &mu);
        seen = generation;
        active++;
        pthread_mutex_unlock(&mu);
        run_ranges();
        pthread_mutex_lock(&mu);
        if (--active == 0) pthread_cond_broadcast(&done_cv);
        pthread_mutex_unlock(&mu);
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

static void submit(int64_t n, int64_t nranges, nb_range_fn fn, void *ctx) {
    pthread_mutex_lock(&submit_mu);
    ensure_workers(nthreads - 1);
    pthread_mutex_lock(&mu);
    while (active > 0) pthread_cond_wait(&done_cv, &mu); /* stragglers of the last job */
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.nranges = nranges;
    atomic_store(&job.next, 0);
    atomic_store(&job.remaining, nranges);
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    bool was = in_worker;
    in_worker = true; /* nested parallel calls from fn run inline */
    run_ranges();
    in_worker = was;
    pthread_mutex_lock(&mu);
    while (atomic_load(&job.remaining) > 0) pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
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
