/* flatten: a sample's seq rows of width k side by side as one row of seq x k (the F
 * field embeddings of a sample as the one vector a DNN or a cross network takes).
 * The memory is the same, so forward is a copy and backward an addition. An input
 * with lengths is refused: padding would become features. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

static int flatten_infer(pn_layer *l)
{
    pn_shape in = l->in_shapes[0];
    if (in.ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float values");
    l->out_shape = (pn_shape){.width = in.seq * in.width, .seq = 1}; /* fits: checked on create */
    return PN_OK;
}

static pn_matrix as_rows(pn_matrix m, const pn_arg *out)
{
    return pn_matrix_reshape(m, out->value.rows, out->value.cols);
}

static int flatten_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                           pn_arg *out)
{
    (void)pass;
    PN_TRY(pn_layer_refuse_lengths(x, in[0]));
    pn_matrix v = as_rows(in[0]->value, out);
    return pn_copy(&v, &out->value);
}

static int flatten_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                            pn_arg *out)
{
    (void)x, (void)pass;
    if (!in[0]->grad.data) return PN_OK;
    pn_matrix d = as_rows(in[0]->grad, out);
    if (pn_arg_grad_beta(in[0]) == 0.0f) return pn_copy(&out->grad, &d); /* first producer */
    return pn_axpy(1.0f, &out->grad, &d);
}

static double flatten_flops(const pn_layer *l) { return 2.0 * l->out_shape.width; }

const pn_layer_type pn_layer_flatten = {
    .name = "flatten",
    .summary = "a sample's seq rows side by side as one row (seq 1, width seq x width)",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = flatten_infer,
    .forward = flatten_forward,
    .backward = flatten_backward,
    .writes_stale_grads = true,
    .flops = flatten_flops,
};
