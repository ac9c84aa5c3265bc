/* Storage management for pn_arg. */
#include "layers/arg.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"

/* A float block: a view on `on` (the planner's storage, at least bytes; bf16: stored
 * as bf16), else a's own buffer. */
static int float_block(pn_buffer *own, const pn_buffer *on, bool bf16, pn_device dev,
                       size_t bytes, int rows, int cols, pn_matrix *m)
{
    if (on) {
        pn_buffer_release(own);
        if (on->bytes < bytes)
            return pn_error_set(PN_ERR_INTERNAL, "planned storage of %zu bytes for %zu",
                                on->bytes, bytes);
        /* bf16 storage: a matrix only in name, which the network widens for a call */
        *m = bf16 ? (pn_matrix){on->data, rows, cols, cols, on->device}
                  : pn_matrix_on(on, rows, cols);
        return PN_OK;
    }
    PN_TRY(pn_buffer_reserve(own, dev, bytes));
    *m = pn_matrix_on(own, rows, cols);
    return PN_OK;
}

int pn_arg_reserve(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad)
{
    return pn_arg_reserve_on(a, dev, shape, batch, with_grad, NULL, NULL);
}

int pn_arg_reserve_on(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad,
                      const pn_buffer *value_on, const pn_buffer *grad_on)
{
    return pn_arg_reserve_on_bf16(a, dev, shape, batch, with_grad, value_on, grad_on, false,
                                  false);
}

int pn_arg_reserve_on_bf16(pn_arg *a, pn_device dev, pn_shape shape, int batch,
                           bool with_grad, const pn_buffer *value_on, const pn_buffer *grad_on,
                           bool value_bf16, bool grad_bf16)
{
    int64_t rows64 = (int64_t)batch * shape.seq; /* pn_layer_check_batch says why */
    if (batch < 0 || rows64 > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "%d samples of %d rows: more rows than a "
                            "matrix holds (%d)", batch, shape.seq, INT_MAX);
    int rows = (int)rows64;
    a->shape = shape;
    a->batch = batch;
    a->seq_starts = NULL;
    a->n_seqs = 0;
    a->lengths = NULL;
    a->grad_stale = false;
    if (shape.sparse) { /* offsets now; the nnz arrays as batches come */
        PN_TRY(pn_buffer_reserve(&a->csr_off_buf, pn_device_host(),
                                 ((size_t)batch + 1) * sizeof(int)));
        a->csr.offsets = a->csr_off_buf.data;
        a->csr.offsets[0] = 0;
        a->csr.rows = batch;
        a->ids = NULL;
        a->value = (pn_matrix){NULL, rows, 0, 0, dev};
        a->grad = a->value;
        return pn_arg_csr_reserve(a, 0);
    }
    if (shape.ids) {
        PN_TRY(pn_buffer_reserve(&a->ids_buf, dev, (size_t)rows * sizeof(int)));
        a->ids = a->ids_buf.data;
        a->value = (pn_matrix){NULL, rows, 0, 0, dev};
        a->grad = a->value;
        return PN_OK;
    }
    size_t elems = (size_t)rows * (size_t)shape.width, bytes = elems * sizeof(float);
    size_t half = elems * sizeof(uint16_t);
    bool value_half = value_on && value_bf16, grad_half = grad_on && grad_bf16;
    PN_TRY(float_block(&a->value_buf, value_on, value_half, dev, value_half ? half : bytes, rows,
                       shape.width, &a->value));
    a->ids = NULL;
    if (with_grad) {
        PN_TRY(float_block(&a->grad_buf, grad_on, grad_half, dev, grad_half ? half : bytes,
                           rows, shape.width, &a->grad));
    } else {
        pn_buffer_release(&a->grad_buf);
        a->grad = (pn_matrix){NULL, rows, shape.width, shape.width, dev};
    }
    return PN_OK;
}

int pn_arg_csr_reserve(pn_arg *a, int nnz)
{
    size_t n = nnz > 0 ? (size_t)nnz : 1, fields = a->shape.fields > 0 ? n * sizeof(int) : 0;
    PN_TRY(pn_buffer_reserve(&a->csr_nz_buf, pn_device_host(),
                             n * (sizeof(int64_t) + sizeof(float)) + fields));
    char *at = a->csr_nz_buf.data; /* int64 ids first keeps every array aligned */
    a->csr.cols = (int64_t *)at;
    a->csr.vals = (float *)(at + n * sizeof(int64_t));
    a->csr.fields = fields ? (int *)(at + n * (sizeof(int64_t) + sizeof(float))) : NULL;
    a->csr.nnz = nnz;
    return PN_OK;
}

int pn_arg_csr_feed(pn_arg *a, const pn_csr *src, int first, int rows)
{
    int from = src->offsets[first], nnz = src->offsets[first + rows] - from;
    PN_TRY(pn_arg_csr_reserve(a, nnz));
    a->csr.rows = rows;
    for (int b = 0; b <= rows; b++) a->csr.offsets[b] = src->offsets[first + b] - from;
    memcpy(a->csr.cols, src->cols + from, (size_t)nnz * sizeof(int64_t));
    memcpy(a->csr.vals, src->vals + from, (size_t)nnz * sizeof(float));
    if (a->csr.fields) {
        if (!src->fields)
            return pn_error_set(PN_ERR_INTERNAL, "a sparse batch without the fields its edge has");
        memcpy(a->csr.fields, src->fields + from, (size_t)nnz * sizeof(int));
    }
    return PN_OK;
}

float pn_arg_grad_beta(pn_arg *a)
{
    float beta = a->grad_stale ? 0.0f : 1.0f;
    a->grad_stale = false;
    return beta;
}

int pn_arg_grad_zero_stale(pn_arg *a)
{
    if (!a->grad_stale) return PN_OK;
    a->grad_stale = false;
    return a->grad.data ? pn_fill(&a->grad, 0.0f) : PN_OK;
}

void pn_arg_release(pn_arg *a)
{
    pn_buffer_release(&a->value_buf);
    pn_buffer_release(&a->grad_buf);
    pn_buffer_release(&a->ids_buf);
    pn_buffer_release(&a->csr_off_buf);
    pn_buffer_release(&a->csr_nz_buf);
    *a = (pn_arg){0};
}

size_t pn_shape_bytes(pn_shape shape)
{
    if (shape.sparse) return sizeof(int); /* its offset; the features vary by batch */
    return (size_t)shape.seq * (shape.ids ? sizeof(int) : (size_t)shape.width * sizeof(float));
}

const char *pn_shape_format(pn_shape shape, char *buf, int cap)
{
    if (shape.sparse)
        snprintf(buf, (size_t)cap, "csr[%lld]", (long long)shape.columns);
    else if (shape.ids)
        snprintf(buf, (size_t)cap, "ids[%d]", shape.seq);
    else if (shape.seq > 1)
        snprintf(buf, (size_t)cap, "%dx%d", shape.seq, shape.width);
    else
        snprintf(buf, (size_t)cap, "%d", shape.width);
    return buf;
}
