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

/* relu, tanh, sigmoid and softmax step back from the output, gelu from the input. */
static bool act_backward_reads(const pn_layer *l, int k)
{
    pn_act act = ((const act_attrs *)l->attrs)->act;
    if (act == PN_ACT_NONE) return false;
    return k < 0 ? act != PN_ACT_GELU : act == PN_ACT_GELU;
}

/* Element-wise from the input, backward from the output: relu, tanh, sigmoid (the
 * copy of none and softmax's rows are not written element by element). */
static bool act_in_place(const pn_layer *l)
{
    pn_act act = ((const act_attrs *)l->attrs)->act;
    return act == PN_ACT_RELU || act == PN_ACT_TANH || act == PN_ACT_SIGMOID;
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
    .backward_reads = act_backward_reads,
    .in_place = act_in_place,
    .flops = act_flops,
    .per_row = true,
};
