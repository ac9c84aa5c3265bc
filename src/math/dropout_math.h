/* Dropout's counter-based mask, one text for the CPU loop and the CUDA kernel: the
 * value at (global row, column) is a hash of (key, row, column), so the mask does not
 * depend on who computes it, in which order, or on which device. Integer hashing and
 * one float compare: both backends give the same bits. */
#ifndef PN_DROPOUT_MATH_H
#define PN_DROPOUT_MATH_H

#include <stdint.h>

#include "base/hash.h"
#include "math/kernel_fn.h"

/* What a kept value is multiplied by: 1 / (1 - rate), 0 when everything drops. */
PN_KERNEL_FN float pn_dropout_keep_scale(float rate)
{
    return rate < 1.0f ? 1.0f / (1.0f - rate) : 0.0f;
}

/* The key of one global row (row0 + i of a batch). */
PN_KERNEL_FN uint64_t pn_dropout_row_key(uint64_t key, long row)
{
    return pn_hash_mix(key, (uint64_t)row);
}

/* The mask value at column col of the row keyed row_key: 0 with probability rate,
 * else keep_scale. */
PN_KERNEL_FN float pn_dropout_mask(uint64_t row_key, int col, float rate, float keep_scale)
{
    float u = pn_hash_to_unit(pn_hash_mix(row_key, (uint64_t)col));
    return u >= rate ? keep_scale : 0.0f;
}

#endif
