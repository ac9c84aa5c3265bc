/* View arithmetic for pn_matrix. */
#include "math/matrix.h"

#include <assert.h>

pn_matrix pn_matrix_on(const pn_buffer *buf, int rows, int cols)
{
    assert(buf->bytes >= (size_t)rows * (size_t)cols * sizeof(float));
    return (pn_matrix){(float *)buf->data, rows, cols, cols, buf->device};
}

pn_matrix pn_matrix_host(float *data, int rows, int cols)
{
    return (pn_matrix){data, rows, cols, cols, pn_device_host()};
}

pn_matrix pn_matrix_rows(pn_matrix m, int first, int n)
{
    assert(first >= 0 && n >= 0 && first + n <= m.rows);
    m.data += (size_t)first * (size_t)m.ld;
    m.rows = n;
    return m;
}

pn_matrix pn_matrix_cols(pn_matrix m, int first, int n)
{
    assert(first >= 0 && n >= 0 && first + n <= m.cols);
    m.data += first;
    m.cols = n;
    return m;
}

pn_matrix pn_matrix_reshape(pn_matrix m, int rows, int cols)
{
    assert(pn_matrix_dense(m) && (size_t)rows * (size_t)cols == pn_matrix_count(m));
    m.rows = rows;
    m.cols = cols;
    m.ld = cols;
    return m;
}
