/* The order of a dataset's samples (sample_order.h). */
#include "io/sample_order.h"

#include "base/rng.h"

/* Uniform integer in [0, bound) without modulo bias. */
static uint64_t uniform_below(pn_rng *rng, uint64_t bound)
{
    uint64_t threshold = -bound % bound, x;
    do x = pn_rng_next(rng);
    while (x < threshold);
    return x % bound;
}

void pn_sample_permutation(long n, bool shuffle, uint64_t seed, long epoch, long *out)
{
    for (long i = 0; i < n; i++) out[i] = i;
    if (!shuffle) return;
    pn_rng rng;
    pn_rng_init(&rng, seed, pn_hash_mix(pn_hash_string("pn_reader/shuffle"), (uint64_t)epoch));
    for (long i = n - 1; i > 0; i--) {
        long j = (long)uniform_below(&rng, (uint64_t)i + 1), t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

static void sift_down(pn_row_ref *a, size_t i, size_t n)
{
    for (size_t c; (c = 2 * i + 1) < n; i = c) {
        if (c + 1 < n && a[c + 1].row > a[c].row) c++;
        if (a[i].row >= a[c].row) return;
        pn_row_ref t = a[i];
        a[i] = a[c];
        a[c] = t;
    }
}

void pn_sort_rows(pn_row_ref *a, size_t n)
{
    bool sorted = true;
    for (size_t i = 1; sorted && i < n; i++) sorted = a[i - 1].row <= a[i].row;
    if (sorted) return;
    for (size_t i = n / 2; i-- > 0;) sift_down(a, i, n);
    for (size_t end = n; end-- > 1;) {
        pn_row_ref t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift_down(a, 0, end);
    }
}
