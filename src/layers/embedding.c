/* embedding: integer ids -> rows of a learned table [vocab, size]. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct embedding_attrs {
    int vocab, size;
} embedding_attrs;

static const char *const embedding_attr_names[] = {"vocab", "size", NULL};

static int embedding_parse(pn_layer *l, const json_t *spec)
{
    embedding_attrs *s = l->attrs;
    PN_TRY(pn_attr_int(l, spec, "vocab", true, 1, 0, &s->vocab));
    return pn_attr_int(l, spec, "size", true, 1, 0, &s->size);
}

static int embedding_infer(pn_layer *l)
{
    const embedding_attrs *s = l->attrs;
    if (!l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "float values",
                             "integer ids (a data input with \"ids\": true)");
    l->out_shape = (pn_shape){s->size, l->in_shapes[0].seq, false};
    return PN_OK;
}

static void embedding_declare(pn_layer *l)
{
    const embedding_attrs *s = l->attrs;
    pn_layer_add_param(l, "table", s->vocab, s->size, (pn_init){PN_INIT_NORMAL, 0.02f}, true);
}

static int embedding_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    (void)pass;
    pn_matrix table = pn_layer_param(x, 0);
    return pn_gather_rows(&table, in[0]->ids, &out->value);
}

static int embedding_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                              pn_arg *out)
{
    (void)pass;
    pn_matrix dtable = pn_layer_param_grad(x, 0);
    return pn_scatter_add_rows(&out->grad, in[0]->ids, &dtable);
}

static double embedding_flops(const pn_layer *l)
{
    return (double)l->out_shape.seq * l->out_shape.width;
}

static int embedding_id_limit(const pn_layer *l, int k)
{
    return ((const embedding_attrs *)l->attrs)->vocab;
}

const pn_layer_type pn_layer_embedding = {
    .name = "embedding",
    .summary = "lookup of integer ids in a learned table; attrs vocab, size",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(embedding_attrs),
    .attrs = embedding_attr_names,
    .parse = embedding_parse,
    .infer = embedding_infer,
    .declare = embedding_declare,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .flops = embedding_flops,
    .id_limit = embedding_id_limit,
};
