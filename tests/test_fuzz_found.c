/* Regressions for what the fuzz targets (fuzz/) found: each test is one finding,
 * named after what must hold, with the input that broke it written out small. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "testutil.h"

static bool prime(size_t n)
{
    for (size_t d = 2; d * d <= n; d++)
        if (n % d == 0) return false;
    return n >= 2;
}

/* fuzz_dataset: a compressed dataset of one-float chunks made the reader ask HDF5
 * for a chunk cache of 100 slots per chunk: 838 MB of hash table for a 4 MB
 * dataset (and an allocation failure for a larger one). */
START_TEST(chunk_cache_tables_stay_small_for_tiny_chunks)
{
    size_t small = pn_hdf5_chunk_cache_slots((size_t)4 << 20, 4);
    ck_assert_msg(small <= ((size_t)1 << 20) + 1000 && prime(small), "%zu slots", small);
    size_t huge = pn_hdf5_chunk_cache_slots((size_t)256 << 20, 1);
    ck_assert_msg(huge <= ((size_t)1 << 20) + 1000 && prime(huge), "%zu slots", huge);
    size_t few = pn_hdf5_chunk_cache_slots((size_t)1 << 20, (size_t)64 << 10); /* 17 chunks */
    ck_assert_msg(few >= 100 * 17 && few < 100 * 17 + 200 && prime(few), "%zu slots", few);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("fuzz_found");
    TCase *tc = tcase_create("fuzz_found");
    tcase_add_test(tc, chunk_cache_tables_stay_small_for_tiny_chunks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
