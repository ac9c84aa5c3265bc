/* View arithmetic for pn_matrix, and copies between a matrix and host memory. */
#include "math/matrix.h"

#include <assert.h>

#include "base/error.h"
#include "math/memory_backend.h"

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

int pn_matrix_write(pn_matrix *m, const float *host)
{
    const pn_memory_backend *be;
    PN_TRY(pn_memory_backend_for(m->device, &be));
    size_t row = (size_t)m->cols * sizeof(float);
    if (pn_matrix_dense(*m)) return be->copy_from_host(m->data, host, row * (size_t)m->rows);
    for (int r = 0; r < m->rows; r++)
        PN_TRY(be->copy_from_host(m->data + (size_t)r * (size_t)m->ld, host + (size_t)r * m->cols,
                                  row));
    return PN_OK;
}

int pn_matrix_read(const pn_matrix *m, float *host)
{
    const pn_memory_backend *be;
    PN_TRY(pn_memory_backend_for(m->device, &be));
    size_t row = (size_t)m->cols * sizeof(float);
    if (pn_matrix_dense(*m)) return be->copy_to_host(host, m->data, row * (size_t)m->rows);
    for (int r = 0; r < m->rows; r++)
        PN_TRY(be->copy_to_host(host + (size_t)r * m->cols, m->data + (size_t)r * (size_t)m->ld,
                                row));
    return PN_OK;
}
