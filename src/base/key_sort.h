/* A stable sort of non-negative int keys by index: what the row-sparse merge (rows by
 * id) and the sharded tables' pull (a batch's distinct rows) both need, a few
 * thousand to a few hundred thousand keys a call, many calls a step. */
#ifndef PN_KEY_SORT_H
#define PN_KEY_SORT_H

/* order[0..n) = 0..n-1 ordered by keys[k] (every key >= 0), equal keys in increasing
 * k: an LSD radix sort of 11 bits a pass, as many passes as the largest key has
 * bits / 11, whatever the keys' range (qsort took 40% of a small model's step);
 * tmp holds n ints of scratch. */
void pn_key_sort(const int *keys, int n, int *order, int *tmp);

#endif
