/* The order of a dataset's samples: the epoch's permutation, keyed by (seed, epoch)
 * only, so every layout and every resume sees the same order; and a batch's samples
 * sorted by their row in the file, so that they are read front to back. */
#ifndef PN_SAMPLE_ORDER_H
#define PN_SAMPLE_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A sample of the batch: its row in the file and its position in the batch. */
typedef struct pn_row_ref {
    long row;
    long pos;
} pn_row_ref;

/* out[0..n) = the samples of epoch in order: 0..n-1, or with shuffle a Fisher-Yates
 * permutation drawn from (seed, epoch). */
void pn_sample_permutation(long n, bool shuffle, uint64_t seed, long epoch, long *out);

/* Sorts a[0..n) by row: heapsort, in place, no allocation, O(n log n). */
void pn_sort_rows(pn_row_ref *a, size_t n);

#endif
