/* Worker pool behind pn_cpu_parallel: a generation counter announces a job, each
 * worker takes the part numbered by its index, the last to finish wakes the caller. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "math/cpu/cpu_threads.h"

enum { MAX_THREADS = 64, MIN_FLOATS_PER_PART = 1 << 17 };

static struct {
    pthread_mutex_t lock;
    pthread_cond_t start, done;
    int threads;    /* caller included */
    int workers;    /* started so far */
    long generation;
    int parts, pending;
    void (*fn)(void *ctx, int part, int parts);
    void *ctx;
} pool = {.lock = PTHREAD_MUTEX_INITIALIZER,
          .start = PTHREAD_COND_INITIALIZER,
          .done = PTHREAD_COND_INITIALIZER,
          .threads = 1};

static void *worker_main(void *arg)
{
    int part = (int)(intptr_t)arg; /* workers run parts 1, 2, ...; the caller part 0 */
    long seen = 0;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == seen) pthread_cond_wait(&pool.start, &pool.lock);
        seen = pool.generation;
        if (part >= pool.parts) continue;
        void (*fn)(void *, int, int) = pool.fn;
        void *ctx = pool.ctx;
        int parts = pool.parts;
        pthread_mutex_unlock(&pool.lock);
        fn(ctx, part, parts);
        pthread_mutex_lock(&pool.lock);
        if (--pool.pending == 0) pthread_cond_signal(&pool.done);
    }
    return NULL;
}

void pn_cpu_threads_set(int threads)
{
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    pthread_mutex_lock(&pool.lock);
    while (pool.workers < threads - 1) {
        pthread_t t;
        if (pthread_create(&t, NULL, worker_main, (void *)(intptr_t)(pool.workers + 1)) != 0)
            break; /* fewer workers: jobs just use fewer parts */
        pthread_detach(t);
        pool.workers++;
    }
    pool.threads = pool.workers + 1 < threads ? pool.workers + 1 : threads;
    pthread_mutex_unlock(&pool.lock);
}

int pn_cpu_parts_for(size_t n)
{
    size_t parts = n / MIN_FLOATS_PER_PART;
    if (parts < 1) return 1;
    return parts < (size_t)pool.threads ? (int)parts : pool.threads;
}

void pn_cpu_parallel(int parts, void (*fn)(void *ctx, int part, int parts), void *ctx)
{
    if (parts <= 1) {
        fn(ctx, 0, 1);
        return;
    }
    pthread_mutex_lock(&pool.lock);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.parts = parts;
    pool.pending = parts - 1;
    pool.generation++;
    pthread_cond_broadcast(&pool.start);
    pthread_mutex_unlock(&pool.lock);
    fn(ctx, 0, parts);
    pthread_mutex_lock(&pool.lock);
    while (pool.pending > 0) pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
}
