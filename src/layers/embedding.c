/* embedding: integer ids -> rows of a learned table [vocab, size]. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct embedding_state {
    int vocab, size;
} embedding_state;

static const char *const embedding_attrs[] = {"vocab", "size", NULL};

static int embedding_parse(pn_layer *l, const json_t *spec)
{
    embedding_state *s = l->state;
    PN_TRY(pn_attr_int(l, spec, "vocab", true, 1, 0, &s->vocab));
    return pn_attr_int(l, spec, "size", true, 1, 0, &s->size);
}

static int embedding_infer(pn_layer *l)
{
    const embedding_state *s = l->state;
    if (!l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "needs integer ids (a data input with \"ids\": true)");
    l->out_shape = (pn_shape){s->size, l->in_shapes[0].seq, false};
    return PN_OK;
}

static void embedding_declare(pn_layer *l)
{
    const embedding_state *s = l->state;
    pn_layer_add_param(l, "table", s->vocab, s->size, (pn_init){PN_INIT_NORMAL, 0.02f}, true);
}

static int embedding_forward(pn_layer *l, const pn_pass *pass, pn_params *params,
                             pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    pn_matrix table = pn_layer_param(l, params, 0);
    return pn_gather_rows(&table, in[0]->ids, &out->value);
}

static int embedding_backward(pn_layer *l, const pn_pass *pass, pn_params *params,
                              pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    pn_matrix dtable = pn_layer_param_grad(l, params, 0);
    return pn_scatter_add_rows(&out->grad, in[0]->ids, &dtable);
}

static double embedding_flops(const pn_layer *l)
{
    return (double)l->out_shape.seq * l->out_shape.width;
}

const pn_layer_type pn_layer_embedding = {
    .name = "embedding",
    .summary = "lookup of integer ids in a learned table; attrs vocab, size",
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(embedding_state),
    .attrs = embedding_attrs,
    .parse = embedding_parse,
    .infer = embedding_infer,
    .declare = embedding_declare,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .flops = embedding_flops,
};
