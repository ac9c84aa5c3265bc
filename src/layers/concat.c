/* concat: joins inputs side by side along the feature axis (same rows each). */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

static int concat_infer(pn_layer *l)
{
    int64_t width = 0;
    for (int i = 0; i < l->n_inputs; i++) {
        pn_shape s = l->in_shapes[i];
        char found[96];
        snprintf(found, sizeof found, "integer ids as input %d", i);
        if (s.ids) return pn_attr_error(l, "input", found, "float inputs");
        snprintf(found, sizeof found, "input %d with %d rows per sample and input 0 with %d", i,
                 s.seq, l->in_shapes[0].seq);
        if (s.seq != l->in_shapes[0].seq)
            return pn_attr_error(l, "input", found, "inputs with the same rows per sample");
        width += s.width;
    }
    if (width > INT_MAX) {
        char found[64];
        snprintf(found, sizeof found, "widths that add up to %lld", (long long)width);
        return pn_attr_error(l, "input", found, "widths that add up to at most %d", INT_MAX);
    }
    l->out_shape = pn_shape_dense((int)width, l->in_shapes[0].seq, false);
    return PN_OK;
}

static int concat_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                          pn_arg *out)
{
    (void)pass;
    int col = 0;
    for (int i = 0; i < x->layer->n_inputs; i++) {
        pn_matrix part = pn_matrix_cols(out->value, col, in[i]->value.cols);
        PN_TRY(pn_copy(&in[i]->value, &part));
        col += in[i]->value.cols;
    }
    return PN_OK;
}

static int concat_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                           pn_arg *out)
{
    (void)pass;
    int col = 0;
    for (int i = 0; i < x->layer->n_inputs; i++) {
        pn_matrix part = pn_matrix_cols(out->grad, col, in[i]->value.cols);
        if (in[i]->grad.data) PN_TRY(pn_axpy(1.0f, &part, &in[i]->grad));
        col += in[i]->value.cols;
    }
    return PN_OK;
}

static double concat_flops(const pn_layer *l)
{
    return 2.0 * l->out_shape.seq * l->out_shape.width;
}

const pn_layer_type pn_layer_concat = {
    .name = "concat",
    .summary = "inputs joined along the feature axis",
    .min_inputs = 2,
    .max_inputs = -1,
    .infer = concat_infer,
    .forward = concat_forward,
    .backward = concat_backward,
    .flops = concat_flops,
    .per_row = true,
};
