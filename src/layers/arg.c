/* Storage management for pn_arg. */
#include "layers/arg.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "math/ops.h"

int pn_arg_reserve(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad)
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
    if (shape.ids) {
        PN_TRY(pn_buffer_reserve(&a->ids_buf, dev, (size_t)rows * sizeof(int)));
        a->ids = a->ids_buf.data;
        a->value = (pn_matrix){NULL, rows, 0, 0, dev};
        a->grad = a->value;
        return PN_OK;
    }
    size_t bytes = (size_t)rows * (size_t)shape.width * sizeof(float);
    PN_TRY(pn_buffer_reserve(&a->value_buf, dev, bytes));
    a->value = pn_matrix_on(&a->value_buf, rows, shape.width);
    a->ids = NULL;
    if (with_grad) {
        PN_TRY(pn_buffer_reserve(&a->grad_buf, dev, bytes));
        a->grad = pn_matrix_on(&a->grad_buf, rows, shape.width);
    } else {
        pn_buffer_release(&a->grad_buf);
        a->grad = (pn_matrix){NULL, rows, shape.width, shape.width, dev};
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
    *a = (pn_arg){0};
}

size_t pn_shape_bytes(pn_shape shape)
{
    return (size_t)shape.seq * (shape.ids ? sizeof(int) : (size_t)shape.width * sizeof(float));
}

const char *pn_shape_format(pn_shape shape, char *buf, int cap)
{
    if (shape.ids)
        snprintf(buf, (size_t)cap, "ids[%d]", shape.seq);
    else if (shape.seq > 1)
        snprintf(buf, (size_t)cap, "%dx%d", shape.seq, shape.width);
    else
        snprintf(buf, (size_t)cap, "%d", shape.width);
    return buf;
}
