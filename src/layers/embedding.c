/* embedding: integer ids -> rows of a learned table [vocab, size]; with "positions",
 * plus a learned position table [seq, size] whose row t is added at position t of
 * every sample (GPT's token + position embedding in one layer, no position dataset).
 * A sample's seq x size outputs are contiguous, so the position table is added as one
 * row vector [1, seq*size] to the batch seen as [batch, seq*size], and its gradient
 * is the column sums of the output gradient seen the same way. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct embedding_attrs {
    int vocab, size;
    bool positions;
} embedding_attrs;

static const char *const embedding_attr_names[] = {"vocab", "size", "positions", NULL};

static int embedding_parse(pn_layer *l, const json_t *spec)
{
    embedding_attrs *s = l->attrs;
    PN_TRY(pn_attr_int(l, spec, "vocab", true, 1, 0, &s->vocab));
    PN_TRY(pn_attr_bool(l, spec, "positions", false, &s->positions));
    return pn_attr_int(l, spec, "size", true, 1, 0, &s->size);
}

static int embedding_infer(pn_layer *l)
{
    const embedding_attrs *s = l->attrs;
    if (!l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "float values",
                             "integer ids (a data input with \"ids\": true)");
    l->out_shape = pn_shape_dense(s->size, l->in_shapes[0].seq, false);
    return PN_OK;
}

static void embedding_declare(pn_layer *l)
{
    const embedding_attrs *s = l->attrs;
    pn_layer_add_param(l, "table", s->vocab, s->size, (pn_init){PN_INIT_NORMAL, 0.02f}, true);
    if (s->positions)
        pn_layer_add_param(l, "pos", l->out_shape.seq, s->size,
                           (pn_init){PN_INIT_NORMAL, 0.02f}, true);
}

/* m [batch*seq, size] seen as [batch, seq*size]. */
static pn_matrix per_sample(pn_matrix m, int seq)
{
    return pn_matrix_reshape(m, m.rows / seq, m.cols * seq);
}

static int embedding_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    (void)pass;
    pn_matrix table = pn_layer_param(x, 0);
    PN_TRY(pn_gather_rows(&table, in[0]->ids, &out->value));
    if (!((const embedding_attrs *)x->layer->attrs)->positions || out->value.rows == 0)
        return PN_OK;
    int seq = x->layer->out_shape.seq;
    pn_matrix pos = pn_layer_param(x, 1), rows = per_sample(out->value, seq);
    pos = pn_matrix_reshape(pos, 1, pos.rows * pos.cols);
    return pn_add_row_vector(&pos, &rows);
}

static int embedding_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                              pn_arg *out)
{
    (void)pass;
    pn_matrix dtable = pn_layer_param_grad(x, 0);
    PN_TRY(pn_scatter_add_rows(&out->grad, in[0]->ids, &dtable));
    if (!((const embedding_attrs *)x->layer->attrs)->positions || out->grad.rows == 0)
        return PN_OK;
    int seq = x->layer->out_shape.seq;
    pn_matrix dpos = pn_layer_param_grad(x, 1), rows = per_sample(out->grad, seq);
    dpos = pn_matrix_reshape(dpos, 1, dpos.rows * dpos.cols);
    return pn_col_sums(&rows, 1.0f, &dpos);
}

/* One id per sequence at position pos: its table row, plus row pos of the position
 * table. */
static int embedding_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out)
{
    pn_matrix table = pn_layer_param(x, 0);
    PN_TRY(pn_gather_rows(&table, in[0]->ids, &out->value));
    if (!((const embedding_attrs *)x->layer->attrs)->positions) return PN_OK;
    pn_matrix row = pn_matrix_rows(pn_layer_param(x, 1), pos, 1);
    return pn_add_row_vector(&row, &out->value);
}

static double embedding_flops(const pn_layer *l)
{
    const embedding_attrs *s = l->attrs;
    return (double)l->out_shape.seq * l->out_shape.width * (s->positions ? 3 : 1);
}

static int embedding_id_limit(const pn_layer *l, int k)
{
    return ((const embedding_attrs *)l->attrs)->vocab;
}

/* The ids, not the output. */
static bool embedding_backward_reads(const pn_layer *l, int k)
{
    (void)l;
    return k >= 0;
}

const pn_layer_type pn_layer_embedding = {
    .name = "embedding",
    .summary = "lookup of integer ids in a learned table; attrs vocab, size, positions",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(embedding_attrs),
    .attrs = embedding_attr_names,
    .parse = embedding_parse,
    .infer = embedding_infer,
    .declare = embedding_declare,
    .forward = embedding_forward,
    .backward = embedding_backward,
    .backward_reads = embedding_backward_reads,
    .flops = embedding_flops,
    .id_limit = embedding_id_limit,
    .step = embedding_step,
};
