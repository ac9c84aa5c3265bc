/* Row sums and column broadcasts over a vector of ones (layers/rowvec.h). */
#include "layers/rowvec.h"

#include "base/error.h"
#include "layers/layer.h"

/* n ones as an [n, 1] matrix (also read as [1, n]: the same memory). The fill is n
 * floats, far below the GEMM it feeds, so it runs every time instead of being tracked. */
static int ones_of(pn_buffer *buf, pn_device dev, int n, pn_matrix *out)
{
    PN_TRY(pn_layer_scratch(buf, dev, n, 1, out));
    return pn_fill(out, 1.0f);
}

int pn_row_sums(const pn_matrix *m, pn_buffer *ones, float alpha, float beta, pn_matrix *out)
{
    pn_matrix one;
    PN_TRY(ones_of(ones, m->device, m->cols, &one));
    return pn_gemm(false, false, alpha, m, &one, beta, out);
}

int pn_broadcast_col(const pn_matrix *v, pn_buffer *ones, float beta, pn_matrix *out)
{
    pn_matrix one;
    PN_TRY(ones_of(ones, v->device, out->cols, &one));
    one = pn_matrix_reshape(one, 1, out->cols);
    return pn_gemm(false, false, 1.0f, v, &one, beta, out);
}
