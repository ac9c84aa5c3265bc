/* add: elementwise sum of two or more inputs of one shape (residual connections). */
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

static int add_infer(pn_layer *l)
{
    pn_shape first = l->in_shapes[0];
    for (int i = 0; i < l->n_inputs; i++) {
        pn_shape s = l->in_shapes[i];
        char a[32], b[32], found[96];
        snprintf(found, sizeof found, "integer ids as input %d", i);
        if (s.ids) return pn_attr_error(l, "input", found, "float inputs");
        snprintf(found, sizeof found, "input %d of shape %s and input 0 of shape %s", i,
                 pn_shape_format(s, a, sizeof a), pn_shape_format(first, b, sizeof b));
        if (s.width != first.width || s.seq != first.seq)
            return pn_attr_error(l, "input", found, "inputs of one shape");
    }
    l->out_shape = first;
    return PN_OK;
}

static int add_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    PN_TRY(pn_copy(&in[0]->value, &out->value));
    for (int i = 1; i < x->layer->n_inputs; i++) PN_TRY(pn_axpy(1.0f, &in[i]->value, &out->value));
    return PN_OK;
}

static int add_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    for (int i = 0; i < x->layer->n_inputs; i++) {
        if (!in[i]->grad.data) continue;
        if (pn_arg_grad_beta(in[i]) == 0.0f) /* the first producer: a copy, not 0 + dy */
            PN_TRY(pn_copy(&out->grad, &in[i]->grad));
        else
            PN_TRY(pn_axpy(1.0f, &out->grad, &in[i]->grad));
    }
    return PN_OK;
}

static double add_flops(const pn_layer *l)
{
    return 2.0 * l->n_inputs * l->out_shape.seq * l->out_shape.width;
}

/* Gradients pass through: no value is read. */
static bool add_backward_reads(const pn_layer *l, int k)
{
    (void)l, (void)k;
    return false;
}

const pn_layer_type pn_layer_add = {
    .name = "add",
    .summary = "elementwise sum of inputs of one shape",
    .min_inputs = 2,
    .max_inputs = -1,
    .infer = add_infer,
    .forward = add_forward,
    .backward = add_backward,
    .writes_stale_grads = true,
    .backward_reads = add_backward_reads,
    .flops = add_flops,
    .per_row = true,
};
