/* The radix sort of key_sort.h. */
#include "base/key_sort.h"

#include <string.h>

void pn_key_sort(const int *keys, int n, int *order, int *tmp)
{
    enum { BITS = 11, BUCKETS = 1 << BITS };
    int *from = order, *to = tmp, top = 0;
    for (int k = 0; k < n; k++) {
        from[k] = k;
        if (keys[k] > top) top = keys[k];
    }
    for (int shift = 0; shift < 31 && (top >> shift) > 0; shift += BITS) {
        int at[BUCKETS + 1] = {0};
        for (int k = 0; k < n; k++) at[((keys[from[k]] >> shift) & (BUCKETS - 1)) + 1]++;
        for (int b = 0; b < BUCKETS; b++) at[b + 1] += at[b];
        for (int k = 0; k < n; k++) to[at[(keys[from[k]] >> shift) & (BUCKETS - 1)]++] = from[k];
        int *t = from;
        from = to, to = t;
    }
    if (from != order) memcpy(order, from, (size_t)n * sizeof *from);
}
