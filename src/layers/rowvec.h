/* Per-row sums and column broadcasts, as GEMMs against a vector of ones: what the
 * feature-cross layers (fm, inner_product, cross) reduce and expand rows with, so that
 * they need no backend op of their own and run on every device as they are. */
#ifndef PN_ROWVEC_H
#define PN_ROWVEC_H

#include "math/ops.h"

/* out[i, 0] = beta * out[i, 0] + alpha * sum_j m[i, j]; ones is the caller's buffer
 * for the vector of ones (on m's device, grown as needed). */
int pn_row_sums(const pn_matrix *m, pn_buffer *ones, float alpha, float beta, pn_matrix *out);

/* out[i, j] = beta * out[i, j] + v[i, 0] for every column j of out. */
int pn_broadcast_col(const pn_matrix *v, pn_buffer *ones, float beta, pn_matrix *out);

#endif
