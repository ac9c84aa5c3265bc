/* Binary-counter tree summation: level k holds the sum of the last complete run of
 * 2^k leaves; a new leaf carries upward, always added as (earlier + later). */
#include "pipeline/grad_tree.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int pn_grad_tree_init(pn_grad_tree *t, size_t n, int leaves)
{
    memset(t, 0, sizeof *t);
    if (leaves < 1 || (leaves & (leaves - 1)))
        return pn_error_set(PN_ERR_INVALID, "deterministic summation needs a power-of-two "
                                            "number of micro-batches per replica, got %d", leaves);
    int levels = 1;
    while ((1 << (levels - 1)) < leaves) levels++;
    t->n = n;
    t->levels = levels;
    t->level = calloc((size_t)levels, sizeof *t->level);
    t->store = malloc((size_t)levels * (n ? n : 1) * sizeof(float));
    if (!t->level || !t->store) {
        pn_grad_tree_free(t);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for deterministic gradient sums");
    }
    return PN_OK;
}

void pn_grad_tree_free(pn_grad_tree *t)
{
    free(t->level);
    free(t->store);
    memset(t, 0, sizeof *t);
}

void pn_grad_tree_reset(pn_grad_tree *t)
{
    for (int k = 0; k < t->levels; k++) t->level[k] = NULL;
    t->pushed = 0;
}

void pn_grad_tree_push(pn_grad_tree *t, const float *leaf)
{
    int k = 0;
    /* the carry lives in the slot of the level it will land on */
    while (k < t->levels - 1 && t->level[k]) k++;
    float *dst = t->store + (size_t)k * t->n;
    if (k == 0) {
        memcpy(dst, leaf, t->n * sizeof(float));
    } else { /* dst = level[k-1] + (level[k-2] + (... + (level[0] + leaf))) built upward */
        float *carry = dst;
        memcpy(carry, leaf, t->n * sizeof(float));
        for (int j = 0; j < k; j++) {
            const float *left = t->level[j];
            for (size_t i = 0; i < t->n; i++) carry[i] = left[i] + carry[i];
            t->level[j] = NULL;
        }
    }
    t->level[k] = dst;
    t->pushed++;
}

const float *pn_grad_tree_result(const pn_grad_tree *t)
{
    for (int k = t->levels - 1; k >= 0; k--)
        if (t->level[k]) return t->level[k];
    return NULL;
}

void pn_grad_tree_sum_blocks(float *blocks, int count, size_t n, float *out)
{
    if (count == 1) {
        if (out != blocks) memcpy(out, blocks, n * sizeof(float));
        return;
    }
    int half = 1;
    while (half * 2 < count) half *= 2;
    pn_grad_tree_sum_blocks(blocks, half, n, blocks);                        /* left into block 0 */
    pn_grad_tree_sum_blocks(blocks + (size_t)half * n, count - half, n, blocks + (size_t)half * n);
    const float *left = blocks, *right = blocks + (size_t)half * n;
    for (size_t i = 0; i < n; i++) out[i] = left[i] + right[i];
}
