/* pn_matrix: a row-major float view (rows x cols, leading dimension ld) over device
 * memory it does not own. Slicing rows or columns yields another view. */
#ifndef PN_MATRIX_H
#define PN_MATRIX_H

#include <stddef.h>

#include "math/buffer.h"

typedef struct pn_matrix {
    float *data;
    int rows, cols;
    int ld; /* floats between the starts of consecutive rows (>= cols) */
    pn_device device;
} pn_matrix;

/* A dense rows x cols view of the start of buf (which must be large enough). */
pn_matrix pn_matrix_on(const pn_buffer *buf, int rows, int cols);

/* A dense view over host memory (tests, reference code). */
pn_matrix pn_matrix_host(float *data, int rows, int cols);

/* Rows [first, first + n) of m. */
pn_matrix pn_matrix_rows(pn_matrix m, int first, int n);

/* Columns [first, first + n) of m. */
pn_matrix pn_matrix_cols(pn_matrix m, int first, int n);

/* m reinterpreted as rows x cols; m must be dense and hold as many elements. */
pn_matrix pn_matrix_reshape(pn_matrix m, int rows, int cols);

/* Copy m's rows x cols floats from / to dense row-major host memory, whatever m's
 * device (row by row when m is strided): how code outside src/math moves values
 * into and out of memory that may not be the host's. */
int pn_matrix_write(pn_matrix *m, const float *host);
int pn_matrix_read(const pn_matrix *m, float *host);

static inline size_t pn_matrix_count(pn_matrix m) { return (size_t)m.rows * (size_t)m.cols; }
static inline int pn_matrix_dense(pn_matrix m) { return m.ld == m.cols || m.rows <= 1; }

#endif
