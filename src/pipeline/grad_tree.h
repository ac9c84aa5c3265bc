/* pn_grad_tree: deterministic summation of per-micro-batch gradients. Leaves are
 * added in a fixed binary tree over their global index (pairs, then pairs of pairs),
 * so the sum has the same bits whatever layout computed the leaves, as long as the
 * micro-batch size is the same. A replica's M leaves (M a power of two) form one
 * subtree; replicas' subtree sums are then added in the same tree over the replica
 * index. Used by --deterministic. The partial sums live on the stage's device and
 * are added with math ops. */
#ifndef PN_GRAD_TREE_H
#define PN_GRAD_TREE_H

#include <stdbool.h>
#include <stddef.h>

#include "math/matrix.h"

typedef struct pn_grad_tree {
    int n;          /* floats per leaf */
    int levels;     /* log2 of the leaves it can hold, plus one */
    bool *full;     /* [levels] level k holds the sum of the last complete run of 2^k leaves */
    pn_buffer store;/* levels x n floats */
    int pushed;
} pn_grad_tree;

/* A tree on dev for up to `leaves` (a power of two) leaves of n floats. */
int pn_grad_tree_init(pn_grad_tree *t, pn_device dev, int n, int leaves);
void pn_grad_tree_free(pn_grad_tree *t);

/* Starts a new sum. */
void pn_grad_tree_reset(pn_grad_tree *t);

/* Adds the next leaf (1 x n; leaves arrive in index order). */
int pn_grad_tree_push(pn_grad_tree *t, const pn_matrix *leaf);

/* A view (1 x n) of the sum of all pushed leaves (their count must be a power of
 * two); an empty view before the first push. */
pn_matrix pn_grad_tree_result(const pn_grad_tree *t);

/* out (1 x n) = the rows of blocks (count x n) added in the tree over their index:
 * sum(lo, hi) = sum(lo, mid) + sum(mid, hi), mid = lo + the largest power of two
 * below hi - lo. blocks may be overwritten. */
int pn_grad_tree_sum_blocks(pn_matrix *blocks, pn_matrix *out);

#endif
