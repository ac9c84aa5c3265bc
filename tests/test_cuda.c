/* The CUDA backend against the CPU backend: GEMM in every transpose combination,
 * fill on strided views, the device pool, a kernel's bad id reported as the CPU
 * reports it, a refused allocation not reported by the next launch (every other
 * slot: tests/test_backend_ops.c), all through the CUDA module's loader. Skips (exit
 * 77) in a build without CUDA or without a GPU; fails when the build made a module
 * that does not load. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/buffer.h"
#include "math/cuda_module.h"
#include "math/ops.h"
#include "testutil.h"

enum { SKIP = 77 };

/* Copies a dense host matrix into a fresh device buffer and returns its view. */
static pn_matrix to_device(pn_buffer *buf, const pn_matrix *host)
{
    size_t bytes = (size_t)host->rows * host->ld * sizeof(float);
    ck_assert_int_eq(pn_buffer_acquire(buf, pn_device_cuda(0), bytes), 0);
    ck_assert_int_eq(pn_buffer_write(buf, 0, host->data, bytes), 0);
    pn_matrix m = *host;
    m.data = buf->data;
    m.device = buf->device;
    return m;
}

static void from_device(const pn_buffer *buf, pn_matrix *host)
{
    ck_assert_int_eq(pn_buffer_read(buf, 0, host->data,
                                    (size_t)host->rows * host->ld * sizeof(float)),
                     0);
}

START_TEST(gemm_matches_cpu)
{
    pn_rng rng;
    pn_rng_init(&rng, 11, 0);
    int m = 37, n = 19, k = 23;
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        pn_matrix a = ta ? tu_alloc(k, m, 2) : tu_alloc(m, k, 2);
        pn_matrix b = tb ? tu_alloc(n, k, 1) : tu_alloc(k, n, 1);
        pn_matrix c = tu_alloc(m, n, 3), c_gpu = tu_alloc(m, n, 3);
        tu_fill_uniform(&a, &rng, 1.0f);
        tu_fill_uniform(&b, &rng, 1.0f);
        tu_fill_uniform(&c, &rng, 1.0f);
        memcpy(c_gpu.data, c.data, (size_t)m * c.ld * sizeof(float));
        pn_buffer ba = {0}, bb = {0}, bc = {0};
        pn_matrix da = to_device(&ba, &a), db = to_device(&bb, &b), dc = to_device(&bc, &c_gpu);
        ck_assert_int_eq(pn_gemm(ta, tb, 0.5f, &a, &b, 1.0f, &c), 0);
        ck_assert_int_eq(pn_gemm(ta, tb, 0.5f, &da, &db, 1.0f, &dc), 0);
        from_device(&bc, &c_gpu);
        double *want = malloc(sizeof(double) * (size_t)(m * n));
        for (int i = 0; i < m; i++)
            for (int j = 0; j < n; j++) want[i * n + j] = c.data[(size_t)i * c.ld + j];
        tu_assert_matrix_near(&c_gpu, want, 1e-4, 1e-5, "cuda gemm");
        free(want);
        pn_buffer_release(&ba), pn_buffer_release(&bb), pn_buffer_release(&bc);
        tu_free(&a), tu_free(&b), tu_free(&c), tu_free(&c_gpu);
    }
}
END_TEST

START_TEST(fill_respects_strides_and_pool_reuses)
{
    pn_matrix host = tu_alloc(5, 3, 2);
    pn_buffer buf = {0};
    pn_matrix dev = to_device(&buf, &host);
    ck_assert_int_eq(pn_fill(&dev, 2.5f), 0);
    from_device(&buf, &host);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 5; j++)
            ck_assert_float_eq(host.data[i * 5 + j], j < 3 ? 2.5f : 0.0f);
    pn_pool_stats before, after;
    pn_buffer_release(&buf);
    pn_pool_stats_get(pn_device_cuda(0), &before);
    ck_assert_int_eq(pn_buffer_acquire(&buf, pn_device_cuda(0), 100), 0);
    pn_pool_stats_get(pn_device_cuda(0), &after);
    ck_assert_uint_eq(after.system_allocs, before.system_allocs);
    pn_buffer_release(&buf);
    tu_free(&host);
}
END_TEST

/* A bad id found by a kernel comes back as the CPU's error, the lowest bad row named,
 * and the fault record is clear again for the next op. */
START_TEST(bad_ids_are_reported_like_the_cpu)
{
    pn_matrix table = tu_alloc(4, 3, 3), out = tu_alloc(5, 3, 3);
    int ids[5] = {0, 3, 7, -1, 2};
    pn_buffer bt = {0}, bo = {0}, bi = {0};
    pn_matrix dt = to_device(&bt, &table), dout = to_device(&bo, &out);
    ck_assert_int_eq(pn_buffer_acquire(&bi, pn_device_cuda(0), sizeof ids), 0);
    ck_assert_int_eq(pn_buffer_write(&bi, 0, ids, sizeof ids), 0);
    ck_assert_int_eq(pn_gather_rows(&table, ids, &out), PN_ERR_INVALID);
    char cpu_message[256];
    snprintf(cpu_message, sizeof cpu_message, "%s", pn_error_message());
    ck_assert_int_eq(pn_gather_rows(&dt, bi.data, &dout), PN_ERR_INVALID);
    ck_assert_str_eq(pn_error_message(), cpu_message);
    ids[2] = 1, ids[3] = 1;
    ck_assert_int_eq(pn_buffer_write(&bi, 0, ids, sizeof ids), 0);
    ck_assert_int_eq(pn_gather_rows(&dt, bi.data, &dout), PN_OK);
    pn_buffer_release(&bt), pn_buffer_release(&bo), pn_buffer_release(&bi);
    tu_free(&table), tu_free(&out);
}
END_TEST

/* A failure the backend tolerates is not the next launch's: an allocation larger than
 * the device refused (the pool says so), then a kernel runs and reports success. The
 * runtime keeps a failed call's error as its last error until it is read, so without
 * the backend taking it off (pn_cuda_forget) the fill's launch check reported "out of
 * memory". The same for the "not ready" of an event query, whose poll is the NCCL
 * transport's (tests/test_cuda_transport.sh runs it). */
START_TEST(a_tolerated_failure_is_not_the_next_launchs)
{
    pn_buffer huge = {0}, buf = {0};
    ck_assert_int_eq(pn_buffer_acquire(&huge, pn_device_cuda(0), (size_t)1 << 46), PN_ERR_NOMEM);
    ck_assert_int_eq(pn_buffer_acquire(&buf, pn_device_cuda(0), 64 * sizeof(float)), PN_OK);
    pn_matrix m = pn_matrix_on(&buf, 8, 8);
    ck_assert_msg(pn_fill(&m, 1.5f) == PN_OK, "fill after a refused allocation: %s",
                  pn_error_message());
    float host[64];
    ck_assert_int_eq(pn_matrix_read(&m, host), PN_OK);
    ck_assert_float_eq(host[63], 1.5f);
    pn_buffer_release(&buf);
}
END_TEST

int main(void)
{
    const pn_cuda_module *m;
    if (!pn_cuda_module_built()) {
        puts("SKIP: built without CUDA");
        return SKIP;
    }
    if (pn_cuda_module_get(&m) < 0) {
        printf("FAIL: %s\n", pn_error_message());
        return 1;
    }
    if (m->device_count() == 0) {
        puts("SKIP: no CUDA device visible");
        return SKIP;
    }
    Suite *s = suite_create("cuda");
    TCase *tc = tcase_create("backend");
    tcase_add_test(tc, gemm_matches_cpu);
    tcase_add_test(tc, fill_respects_strides_and_pool_reuses);
    tcase_add_test(tc, bad_ids_are_reported_like_the_cpu);
    tcase_add_test(tc, a_tolerated_failure_is_not_the_next_launchs);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
