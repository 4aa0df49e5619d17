/*
 * thread_exit.c — per-thread clean-up at thread exit: a layer that keeps
 * thread-local state (open traces, the compile cache) registers a function
 * once per thread, and one pthread key's destructor runs them when the
 * thread exits, most recently registered first.
 */
#include "internal.h"

#include <pthread.h>

enum { NB_EXIT_FNS = 4 };

static _Thread_local struct {
    void (*fn[NB_EXIT_FNS])(void);
    int n;
} tl_exit;
static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;

static void run_exit_fns(void *p) {
    (void)p;
    while (tl_exit.n > 0) tl_exit.fn[--tl_exit.n]();
}

static void make_key(void) { pthread_key_create(&exit_key, run_exit_fns); }

void nb__at_thread_exit(void (*fn)(void)) {
    for (int i = 0; i < tl_exit.n; i++)
        if (tl_exit.fn[i] == fn) return;
    NB_ASSERT(tl_exit.n < NB_EXIT_FNS); /* a fixed set of library layers registers */
    pthread_once(&exit_once, make_key);
    tl_exit.fn[tl_exit.n++] = fn;
    pthread_setspecific(exit_key, &tl_exit); /* non-NULL: the destructor runs at exit */
}
