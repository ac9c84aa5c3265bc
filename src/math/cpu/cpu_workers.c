/* Helper threads for the CPU kernels bound by memory bandwidth (the optimizer
 * update): with pn_math_set_threads(T > 1), pn_cpu_split runs part 0 of a task on
 * the calling thread and parts 1..T-1 on T-1 helper threads, started on first use.
 * Between tasks the helpers sleep on a condition variable; they never spin, so they
 * leave the cores to OpenBLAS's own threads (Debian's is the pthreads build; an
 * OpenMP runtime beside it would busy-wait against it). One core's share of the
 * memory bandwidth is what limits a single thread: Adam over fashion_mlp's 1.86M
 * floats took 1.4 ms with or without its sqrt and division. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"

enum { MAX_PARTS = 16 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    int parts;          /* pn_math_set_threads, capped at MAX_PARTS */
    int started;        /* helper threads running */
    long generation;    /* bumped per task; a helper runs each generation once */
    int pending;        /* helpers yet to finish the current task */
    pn_cpu_task fn;
    void *ctx;
    int task_parts;     /* parts of the current task */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER,
          .parts = 1};

static void *helper_main(void *arg)
{
    int part = (int)(intptr_t)arg;
    long seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        if (part >= pool.task_parts) continue; /* a task with fewer parts */
        pn_cpu_task fn = pool.fn;
        void *ctx = pool.ctx;
        int parts = pool.task_parts;
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, part, parts);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

void pn_cpu_set_parts(int threads)
{
    pthread_mutex_lock(&pool.lock);
    pool.parts = threads < 1 ? 1 : threads > MAX_PARTS ? MAX_PARTS : threads;
    pthread_mutex_unlock(&pool.lock);
}

/* A forked child has none of the parent's helpers (Check forks each test). */
static void forget_helpers_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.started = 0;
    pool.pending = 0;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_helpers_in_child); }

/* Starts helpers up to parts - 1 (caller holds the lock); returns the parts that
 * have a thread (fewer if one could not start: the work still gets done). */
static int ensure_helpers(int parts)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    while (pool.started < parts - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, helper_main, (void *)(intptr_t)(pool.started + 1));
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        pool.started++;
    }
    return pool.started + 1 < parts ? pool.started + 1 : parts;
}

void pn_cpu_split(pn_cpu_task fn, void *ctx, size_t work)
{
    pthread_mutex_lock(&pool.lock);
    int parts = pool.parts;
    if (parts > 1 && work >= PN_CPU_SPLIT_MIN) parts = ensure_helpers(parts);
    else parts = 1;
    if (parts == 1) {
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, 0, 1);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.task_parts = parts;
    pool.pending = parts - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, 0, parts);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

void pn_cpu_split_range(size_t n, int part, int parts, size_t *first, size_t *end)
{
    size_t chunk = (n / (size_t)parts + 15) / 16 * 16; /* whole cache lines of floats */
    size_t a = chunk * (size_t)part, b = a + chunk;
    *first = a < n ? a : n;
    *end = part == parts - 1 || b > n ? n : b;
}
