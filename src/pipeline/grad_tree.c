/* Binary-counter tree summation: level k holds the sum of the last complete run of
 * 2^k leaves; a new leaf carries upward, always added as (earlier + later). Float
 * addition is commutative, so pn_axpy(1, earlier, later) gives the same bits as
 * earlier + later. */
#include "pipeline/grad_tree.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"

int pn_grad_tree_init(pn_grad_tree *t, pn_device dev, int n, int leaves)
{
    memset(t, 0, sizeof *t);
    if (leaves < 1 || (leaves & (leaves - 1)))
        return pn_error_set(PN_ERR_INVALID, "deterministic summation needs a power-of-two "
                                            "number of micro-batches per replica, got %d", leaves);
    int levels = 1;
    while ((1 << (levels - 1)) < leaves) levels++;
    t->n = n;
    t->levels = levels;
    t->full = calloc((size_t)levels, sizeof *t->full);
    int rc = t->full ? pn_buffer_acquire(&t->store, dev,
                                         (size_t)levels * (size_t)(n ? n : 1) * sizeof(float))
                     : PN_ERR_NOMEM;
    if (rc < 0) {
        pn_grad_tree_free(t);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for deterministic gradient sums");
    }
    return PN_OK;
}

void pn_grad_tree_free(pn_grad_tree *t)
{
    free(t->full);
    pn_buffer_release(&t->store);
    memset(t, 0, sizeof *t);
}

void pn_grad_tree_reset(pn_grad_tree *t)
{
    for (int k = 0; k < t->levels; k++) t->full[k] = false;
    t->pushed = 0;
}

/* Level k's partial sum. */
static pn_matrix level(const pn_grad_tree *t, int k)
{
    return pn_matrix_rows(pn_matrix_on(&t->store, t->levels, t->n), k, 1);
}

int pn_grad_tree_push(pn_grad_tree *t, const pn_matrix *leaf)
{
    int k = 0;
    /* the carry lives in the slot of the level it will land on */
    while (k < t->levels - 1 && t->full[k]) k++;
    pn_matrix carry = level(t, k);
    PN_TRY(pn_copy(leaf, &carry));
    /* carry = level[k-1] + (level[k-2] + (... + (level[0] + leaf))) built upward */
    for (int j = 0; j < k; j++) {
        pn_matrix left = level(t, j);
        PN_TRY(pn_axpy(1.0f, &left, &carry));
        t->full[j] = false;
    }
    t->full[k] = true;
    t->pushed++;
    return PN_OK;
}

pn_matrix pn_grad_tree_result(const pn_grad_tree *t)
{
    for (int k = t->levels - 1; k >= 0; k--)
        if (t->full[k]) return level(t, k);
    return (pn_matrix){0};
}

int pn_grad_tree_sum_blocks(pn_matrix *blocks, pn_matrix *out)
{
    int count = blocks->rows;
    pn_matrix first = pn_matrix_rows(*blocks, 0, 1);
    if (count == 1) return out->data == first.data ? PN_OK : pn_copy(&first, out);
    int half = 1;
    while (half * 2 < count) half *= 2;
    pn_matrix left = pn_matrix_rows(*blocks, 0, half);
    pn_matrix right = pn_matrix_rows(*blocks, half, count - half);
    pn_matrix right_first = pn_matrix_rows(right, 0, 1);
    PN_TRY(pn_grad_tree_sum_blocks(&left, &first));        /* left's sum into block 0 */
    PN_TRY(pn_grad_tree_sum_blocks(&right, &right_first)); /* right's into block half */
    if (out->data != first.data) PN_TRY(pn_copy(&first, out));
    return pn_axpy(1.0f, &right_first, out);               /* out = left + right */
}
