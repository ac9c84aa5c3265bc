/* act: an activation as a layer of its own (fc also takes one as a property). */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct act_attrs {
    pn_act act;
} act_attrs;

static const char *const act_attr_names[] = {"act", NULL};

static int act_parse(pn_layer *l, const json_t *spec)
{
    act_attrs *s = l->attrs;
    return pn_attr_act(l, spec, "act", true, PN_ACT_NONE, &s->act);
}

static int act_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids) return pn_attr_error(l, "input", "integer ids", "float values");
    l->out_shape = l->in_shapes[0];
    return PN_OK;
}

static int act_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const act_attrs *s = x->layer->attrs;
    return pn_act_forward(s->act, &in[0]->value, &out->value);
}

static int act_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const act_attrs *s = x->layer->attrs;
    if (!in[0]->grad.data) return PN_OK;
    return pn_act_backward(s->act, &in[0]->value, &out->value, &out->grad,
                           pn_arg_grad_beta(in[0]), &in[0]->grad);
}

static double act_flops(const pn_layer *l)
{
    return 10.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

const pn_layer_type pn_layer_act = {
    .name = "act",
    .summary = "activation: relu, tanh, sigmoid, gelu or softmax (per row); attr act",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(act_attrs),
    .attrs = act_attr_names,
    .parse = act_parse,
    .infer = act_infer,
    .forward = act_forward,
    .backward = act_backward,
    .writes_stale_grads = true,
    .flops = act_flops,
    .per_row = true,
};
