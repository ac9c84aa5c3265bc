/* pn_grad_tree: deterministic summation of per-micro-batch gradients. Leaves are
 * added in a fixed binary tree over their global index (pairs, then pairs of pairs),
 * so the sum has the same bits whatever layout computed the leaves, as long as the
 * micro-batch size is the same. A replica's M leaves (M a power of two) form one
 * subtree; replicas' subtree sums are then added in the same tree over the replica
 * index. Used by --deterministic. */
#ifndef PN_GRAD_TREE_H
#define PN_GRAD_TREE_H

#include <stddef.h>

typedef struct pn_grad_tree {
    size_t n;       /* floats per leaf */
    int levels;     /* log2 of the leaves it can hold, plus one */
    float **level;  /* [levels] partial sums of 2^k leaves, or NULL when empty */
    float *store;   /* backing memory of the levels */
    int pushed;
} pn_grad_tree;

/* A tree for up to `leaves` (a power of two) leaves of n floats. */
int pn_grad_tree_init(pn_grad_tree *t, size_t n, int leaves);
void pn_grad_tree_free(pn_grad_tree *t);

/* Starts a new sum. */
void pn_grad_tree_reset(pn_grad_tree *t);

/* Adds the next leaf (leaves arrive in index order). */
void pn_grad_tree_push(pn_grad_tree *t, const float *leaf);

/* The sum of all pushed leaves (their count must be a power of two). */
const float *pn_grad_tree_result(const pn_grad_tree *t);

/* out = the sum of blocks[0..count) of n floats added in the tree over their index:
 * sum(lo, hi) = sum(lo, mid) + sum(mid, hi), mid = lo + the largest power of two
 * below hi - lo. blocks may be overwritten. */
void pn_grad_tree_sum_blocks(float *blocks, int count, size_t n, float *out);

#endif
