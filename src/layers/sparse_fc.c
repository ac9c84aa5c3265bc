/* sparse_fc: a CSR batch times a dense weight [rows, size] plus a bias: the wide
 * (logistic-regression) part of Wide & Deep. Row j of the weight is feature j's
 * (csr_bag.h: one bag per sample, the features' values as weights); a weight of
 * fewer rows than the data's columns takes the ids hashed, as embedding_bag does. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/csr_bag.h"
#include "layers/layer_types.h"
#include "math/ops.h"

typedef struct sparse_fc_attrs {
    int rows, size;
    bool bias, sharded;
} sparse_fc_attrs;

typedef struct sparse_fc_scratch {
    pn_bag_plan plan;
} sparse_fc_scratch;

static const char *const sparse_fc_attr_names[] = {"rows", "size", "bias", "shard", NULL};

static int sparse_fc_parse(pn_layer *l, const json_t *spec)
{
    sparse_fc_attrs *s = l->attrs;
    PN_TRY(pn_attr_int(l, spec, "rows", true, 1, 0, &s->rows));
    PN_TRY(pn_attr_int(l, spec, "size", false, 1, 1, &s->size));
    PN_TRY(pn_attr_shard(l, spec, &s->sharded));
    return pn_attr_bool(l, spec, "bias", true, &s->bias);
}

static pn_bag_rule rule_of(const pn_layer *l)
{
    return (pn_bag_rule){((const sparse_fc_attrs *)l->attrs)->rows, 1, false, false, false};
}

static int sparse_fc_infer(pn_layer *l)
{
    l->out_shape = pn_shape_dense(((const sparse_fc_attrs *)l->attrs)->size, 1, false);
    return PN_OK;
}

static void sparse_fc_declare(pn_layer *l)
{
    const sparse_fc_attrs *s = l->attrs;
    pn_layer_add_row_sparse_param(l, "W", s->rows, s->size, (pn_init){PN_INIT_NORMAL, 0.01f},
                                  true);
    if (s->sharded) pn_layer_shard_last_param(l);
    if (s->bias) pn_layer_add_param(l, "b", 1, s->size, (pn_init){PN_INIT_ZEROS, 0.0f}, false);
}

static int sparse_fc_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    sparse_fc_scratch *sc = x->scratch;
    pn_bag_rule r = rule_of(x->layer);
    int width = ((const sparse_fc_attrs *)x->layer->attrs)->size;
    PN_TRY(pn_bag_plan_make(&sc->plan, &r, in[0], width, out->value.device));
    PN_TRY(pn_bag_forward_param(&sc->plan, x, 0, pass, &out->value));
    if (x->layer->n_params < 2) return PN_OK;
    pn_matrix b = pn_layer_param(x, 1);
    return pn_add_row_vector(&b, &out->value);
}

static int sparse_fc_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                              pn_arg *out)
{
    (void)pass, (void)in;
    PN_TRY(pn_bag_backward_rows(&((sparse_fc_scratch *)x->scratch)->plan, &out->grad,
                                pn_layer_param_row_grad(x, 0)));
    if (x->layer->n_params < 2) return PN_OK;
    pn_matrix db = pn_layer_param_grad(x, 1);
    return pn_col_sums(&out->grad, 1.0f, &db);
}

static void sparse_fc_note(const pn_layer *l, char *buf, size_t cap)
{
    pn_bag_rule r = rule_of(l);
    pn_bag_note(&r, l->in_shapes[0].columns, buf, cap);
}

static int sparse_fc_pull_ids(const pn_layer *l, const pn_csr *in, int first, int rows,
                              pn_buffer *work, const int **ids, int *n)
{
    pn_bag_rule r = rule_of(l);
    return pn_bag_distinct_rows(&r, l->in_shapes[0].columns, in, first, rows, work, ids, n);
}

static void sparse_fc_release(pn_layer_inst *x)
{
    pn_bag_plan_release(&((sparse_fc_scratch *)x->scratch)->plan);
}

static double sparse_fc_flops(const pn_layer *l) { return 8.0 * l->out_shape.width; }

const pn_layer_type pn_layer_sparse_fc = {
    .name = "sparse_fc",
    .summary = "sparse input times a weight [rows, size] plus bias (the wide part); attrs "
               "rows, size, bias, shard",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(sparse_fc_attrs),
    .scratch_size = sizeof(sparse_fc_scratch),
    .attrs = sparse_fc_attr_names,
    .parse = sparse_fc_parse,
    .infer = sparse_fc_infer,
    .declare = sparse_fc_declare,
    .forward = sparse_fc_forward,
    .backward = sparse_fc_backward,
    .takes_sparse = true,
    .flops = sparse_fc_flops,
    .note = sparse_fc_note,
    .pull_ids = sparse_fc_pull_ids,
    .release = sparse_fc_release,
};
