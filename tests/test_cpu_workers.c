/* The CPU backend's helper threads (math/cpu/cpu_workers.c): a split task's parts
 * run once each, on the caller and the helpers, over ranges that tile the work;
 * the optimizer update split over threads gives the bits of one thread. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "math/cpu/cpu_kernels.h"
#include "math/ops.h"
#include "testutil.h"

/* What the parts of a split task saw. */
typedef struct split_probe {
    size_t n;
    int parts, runs;
    bool elsewhere;         /* a part ran on another thread than the caller */
    pthread_t caller;
    unsigned char *covered; /* [n]: times each index was in a part's range */
    pthread_mutex_t lock;
} split_probe;

static void probe_part(void *ctx, int part, int parts)
{
    split_probe *p = ctx;
    size_t a, b;
    pn_cpu_split_range(p->n, part, parts, &a, &b);
    /* part 0 waits until another part has run (at most 60 s, so a loaded machine only
     * slows the test): whichever thread holds part 0, another thread ran one */
    for (int ms = 0; part == 0 && parts > 1 && ms < 60000; ms++) {
        pthread_mutex_lock(&p->lock);
        int others = p->runs;
        pthread_mutex_unlock(&p->lock);
        if (others > 0) break;
        struct timespec pause = {0, 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    pthread_mutex_lock(&p->lock);
    for (size_t k = a; k < b; k++) p->covered[k]++;
    p->parts = parts;
    p->runs++;
    p->elsewhere |= !pthread_equal(pthread_self(), p->caller);
    pthread_mutex_unlock(&p->lock);
}

/* With T threads, a big task's parts (4 T) each run once, some on the helpers,
 * and their ranges tile [0, n) in whole 64-byte lines; a small task runs here as
 * one part. */
START_TEST(threads_split_big_work)
{
    size_t n = 3 * PN_CPU_SPLIT_MIN + 37;
    split_probe p = {.n = n, .covered = calloc(n, 1), .caller = pthread_self()};
    pthread_mutex_init(&p.lock, NULL);
    pn_math_set_threads(3);
    pn_cpu_split(probe_part, &p, n);
    ck_assert_int_ge(p.parts, 3);
    ck_assert_int_eq(p.runs, p.parts);
    ck_assert(p.elsewhere);
    for (size_t k = 0; k < n; k++) ck_assert_int_eq(p.covered[k], 1);
    for (int part = 0; part < p.parts; part++) {
        size_t a, b;
        pn_cpu_split_range(n, part, p.parts, &a, &b);
        ck_assert_uint_eq(a % 16, 0);
    }
    memset(p.covered, 0, n);
    p.runs = 0, p.elsewhere = false;
    pn_cpu_split(probe_part, &p, PN_CPU_SPLIT_MIN - 1); /* small: one part, here */
    ck_assert_int_eq(p.parts, 1);
    ck_assert_int_eq(p.runs, 1);
    ck_assert(!p.elsewhere);
    for (size_t k = 0; k < n; k++) ck_assert_int_eq(p.covered[k], 1);
    pn_math_set_threads(1);
    pthread_mutex_destroy(&p.lock);
    free(p.covered);
}
END_TEST

/* An adam update of a big parameter on 2 threads gives the bits of 1 thread. */
START_TEST(threaded_update_matches_one_thread)
{
    int n = 2 * PN_CPU_SPLIT_MIN + 21;
    pn_matrix w[2], g[2], m[2], v[2];
    pn_update_hparams hp = {.rule = PN_UPDATE_ADAM, .lr = 0.01f, .beta1 = 0.9f, .beta2 = 0.999f,
                            .eps = 1e-8f, .weight_decay = 0.1f, .grad_scale = 0.5f,
                            .bias1 = 0.1f, .bias2 = 0.001f};
    for (int t = 0; t < 2; t++) {
        w[t] = tu_alloc(1, n, 0), g[t] = tu_alloc(1, n, 0);
        m[t] = tu_alloc(1, n, 0), v[t] = tu_alloc(1, n, 0);
        for (int k = 0; k < n; k++) {
            w[t].data[k] = (float)(0.3 * sin(1.7 * k + 0.4));
            g[t].data[k] = (float)(0.2 * cos(0.8 * k) + 0.01);
            m[t].data[k] = 0.01f * (float)(k % 7);
            v[t].data[k] = 0.001f * (float)(k % 5);
        }
        pn_math_set_threads(t + 1);
        ck_assert_int_eq(pn_optimizer_update(&hp, &w[t], &g[t], &m[t], &v[t]), 0);
    }
    pn_math_set_threads(1);
    ck_assert_mem_eq(w[0].data, w[1].data, (size_t)n * sizeof(float));
    ck_assert_mem_eq(m[0].data, m[1].data, (size_t)n * sizeof(float));
    ck_assert_mem_eq(v[0].data, v[1].data, (size_t)n * sizeof(float));
    for (int k = 0; k < n; k++) ck_assert_float_eq(g[1].data[k], 0.0f);
    ck_assert_float_ne(w[1].data[n - 1], (float)(0.3 * sin(1.7 * (n - 1) + 0.4))); /* the tail moved */
    for (int t = 0; t < 2; t++) tu_free(&w[t]), tu_free(&g[t]), tu_free(&m[t]), tu_free(&v[t]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("cpu workers");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, threads_split_big_work);
    tcase_add_test(tc, threaded_update_matches_one_thread);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
