/* Helper threads for the CPU kernels bound by memory bandwidth (the optimizer
 * update): with pn_math_set_threads(T > 1), pn_cpu_split cuts a task into 4 T
 * parts that the calling thread and T-1 helper threads (started on first use)
 * claim one at a time. Between tasks the helpers sleep on a condition variable;
 * they never spin, so they leave the cores to OpenBLAS's own threads (Debian's is
 * the pthreads build; an OpenMP runtime beside it would busy-wait against it).
 * One core's share of the memory bandwidth is what limits a single thread: adam
 * over fashion_mlp's 1.86M floats took as long without its sqrt and division, and
 * 1.03 ms on one thread against 0.54 ms on two (best of 30, no GEMM before). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"

enum { MAX_THREADS = 16, CHUNKS_PER_THREAD = 4 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake, done;
    int threads;        /* pn_math_set_threads, capped at MAX_THREADS */
    int started;        /* helper threads running */
    long generation;    /* bumped per task */
    bool open;          /* the current task still takes helpers */
    int active;         /* helpers inside the current task */
    pn_cpu_task fn;
    void *ctx;
    int chunks;         /* parts of the current task */
    atomic_int next;    /* the next part to claim */
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .wake = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER,
          .threads = 1};

/* Runs parts of the current task until none is left. */
static void claim_parts(pn_cpu_task fn, void *ctx, int chunks)
{
    for (int part; (part = atomic_fetch_add(&pool.next, 1)) < chunks;) fn(ctx, part, chunks);
}

static void *helper_main(void *arg)
{
    (void)arg;
    long seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.wake, &pool.lock);
        seen = pool.generation;
        if (!pool.open) continue; /* woke after the caller finished alone */
        pool.active++;
        pn_cpu_task fn = pool.fn;
        void *ctx = pool.ctx;
        int chunks = pool.chunks;
        pthread_mutex_unlock(&pool.lock);
        claim_parts(fn, ctx, chunks);
        pthread_mutex_lock(&pool.lock);
        if (--pool.active == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

void pn_cpu_set_parts(int threads)
{
    pthread_mutex_lock(&pool.lock);
    pool.threads = threads < 1 ? 1 : threads > MAX_THREADS ? MAX_THREADS : threads;
    pthread_mutex_unlock(&pool.lock);
}

/* A forked child has none of the parent's helpers (Check forks each test). */
static void forget_helpers_in_child(void)
{
    pthread_mutex_init(&pool.lock, NULL);
    pthread_cond_init(&pool.wake, NULL);
    pthread_cond_init(&pool.done, NULL);
    pool.started = 0;
    pool.active = 0;
    pool.open = false;
}

static void register_fork_handler(void) { pthread_atfork(NULL, NULL, forget_helpers_in_child); }

/* Starts helpers up to threads - 1 (caller holds the lock); returns the threads
 * there are, the caller's included (fewer if one could not start). */
static int ensure_helpers(int threads)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_fork_handler);
    while (pool.started < threads - 1) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &attr, helper_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) break;
        pool.started++;
    }
    return pool.started + 1 < threads ? pool.started + 1 : threads;
}

/* The caller claims parts too, and helpers join when they get a core: right after
 * a GEMM, OpenBLAS's idle threads spin (sched_yield) for a while, and a helper
 * woken then may wait for a core; fixed halves made the caller wait for it
 * (adam over 1.86M floats: 1.1 ms on 2 threads after a GEMM, as on one). */
void pn_cpu_split(pn_cpu_task fn, void *ctx, size_t work)
{
    pthread_mutex_lock(&pool.lock);
    int threads = pool.threads > 1 && work >= PN_CPU_SPLIT_MIN ? ensure_helpers(pool.threads) : 1;
    if (threads == 1) {
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, 0, 1);
        return;
    }
    size_t chunks = (size_t)threads * CHUNKS_PER_THREAD, most = work / (PN_CPU_SPLIT_MIN / 4);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.chunks = (int)(chunks < most ? chunks : most); /* parts of >= 16K floats */
    atomic_store(&pool.next, 0);
    pool.open = true;
    pool.generation++;
    pthread_cond_broadcast(&pool.wake);
    int n = pool.chunks;
    pthread_mutex_unlock(&pool.lock);
    claim_parts(fn, ctx, n);
    pthread_mutex_lock(&pool.lock);
    pool.open = false; /* helpers that wake from now on skip this task */
    while (pool.active > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}

void pn_cpu_split_range(size_t n, int part, int parts, size_t *first, size_t *end)
{
    size_t chunk = (n / (size_t)parts + 15) / 16 * 16; /* whole cache lines of floats */
    size_t a = chunk * (size_t)part, b = a + chunk;
    *first = a < n ? a : n;
    *end = part == parts - 1 || b > n ? n : b;
}
