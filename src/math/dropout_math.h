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

/* Column col's share of the hash: the same for every row, so a loop over rows may
 * compute it once per column (pn_hash_mix(h, w) mixes pn_mix64(w) into h). */
PN_KERNEL_FN uint64_t pn_dropout_col_hash(int col) { return pn_mix64((uint64_t)col); }

/* The mask value of the row keyed row_key at the column of col_hash
 * (pn_dropout_col_hash): 0 with probability rate, else keep_scale. */
PN_KERNEL_FN float pn_dropout_mask_at(uint64_t row_key, uint64_t col_hash, float rate,
                                      float keep_scale)
{
    float u = pn_hash_to_unit(pn_mix64(row_key + 0x9e3779b97f4a7c15ULL + col_hash));
    return u >= rate ? keep_scale : 0.0f;
}

/* The mask value at column col of the row keyed row_key: the same as
 * pn_dropout_mask_at with col's hash, that is pn_hash_mix(row_key, col). */
PN_KERNEL_FN float pn_dropout_mask(uint64_t row_key, int col, float rate, float keep_scale)
{
    return pn_dropout_mask_at(row_key, pn_dropout_col_hash(col), rate, keep_scale);
}

#endif
