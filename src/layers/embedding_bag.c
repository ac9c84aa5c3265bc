/* embedding_bag: a CSR batch -> per sample and field, the sum or mean of its
 * features' table rows weighted by their values (csr_bag.h); the output is
 * fields x size per sample, the layout an embedding of "seq": fields produces, so
 * fm, inner_product and flatten take it. Without fields in the data one bag per
 * sample. One table shared by the fields, or (per_field) one per field. A table of
 * fewer rows than the data's columns takes the ids hashed (csr_bag.h): that is how
 * a vocabulary of 2^40 ids fits. "shard": "rows" splits the table by rows across the
 * replicas of its stage (params.h; the stage pulls a batch's rows from their owners
 * and pushes their gradients back): a table as large as the replicas' memory. */
#include <limits.h>
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/csr_bag.h"
#include "layers/layer_types.h"

typedef struct embedding_bag_attrs {
    int rows, size;
    bool mean, per_field, sharded;
} embedding_bag_attrs;

typedef struct embedding_bag_scratch {
    pn_bag_plan plan;
} embedding_bag_scratch;

static const char *const embedding_bag_attr_names[] = {"rows", "size", "mode", "per_field",
                                                       "shard", NULL};
static const char *const mode_names[] = {"sum", "mean"};

static int embedding_bag_parse(pn_layer *l, const json_t *spec)
{
    embedding_bag_attrs *s = l->attrs;
    int mode;
    PN_TRY(pn_attr_int(l, spec, "rows", true, 1, 0, &s->rows));
    PN_TRY(pn_attr_int(l, spec, "size", true, 1, 0, &s->size));
    PN_TRY(pn_json_choice(spec, &l->where, "mode", false, "a bag mode", mode_names, 2, 0, &mode));
    s->mean = mode == 1;
    PN_TRY(pn_attr_shard(l, spec, &s->sharded));
    return pn_attr_bool(l, spec, "per_field", false, &s->per_field);
}

static pn_bag_rule rule_of(const pn_layer *l)
{
    const embedding_bag_attrs *s = l->attrs;
    int fields = l->in_shapes[0].fields;
    return (pn_bag_rule){s->rows, fields > 0 ? fields : 1, fields > 0, s->per_field && fields > 0,
                         s->mean};
}

static int embedding_bag_infer(pn_layer *l)
{
    const embedding_bag_attrs *s = l->attrs;
    if (s->per_field && l->in_shapes[0].fields == 0)
        return pn_attr_error(l, "per_field", "true on an input without fields",
                             "per_field only where the input has \"fields\"");
    pn_bag_rule r = rule_of(l);
    if (r.per_field && (int64_t)r.rows * r.bags > INT_MAX) {
        char found[64];
        snprintf(found, sizeof found, "%d rows x %d fields", r.rows, r.bags);
        return pn_attr_error(l, "rows", found, "at most %d table rows in all", INT_MAX);
    }
    l->out_shape = pn_shape_dense(s->size, r.bags, false);
    return PN_OK;
}

static void embedding_bag_declare(pn_layer *l)
{
    const embedding_bag_attrs *s = l->attrs;
    pn_bag_rule r = rule_of(l);
    pn_layer_add_row_sparse_param(l, "table", r.per_field ? r.rows * r.bags : r.rows, s->size,
                                  (pn_init){PN_INIT_NORMAL, 0.02f}, true);
    if (s->sharded) pn_layer_shard_last_param(l);
}

static int embedding_bag_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                                 pn_arg *out)
{
    embedding_bag_scratch *sc = x->scratch;
    pn_bag_rule r = rule_of(x->layer);
    int width = ((const embedding_bag_attrs *)x->layer->attrs)->size;
    PN_TRY(pn_bag_plan_make(&sc->plan, &r, in[0], width, out->value.device));
    return pn_bag_forward_param(&sc->plan, x, 0, pass, &out->value);
}

static int embedding_bag_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                                  pn_arg *out)
{
    (void)pass, (void)in;
    return pn_bag_backward_rows(&((embedding_bag_scratch *)x->scratch)->plan, &out->grad,
                                pn_layer_param_row_grad(x, 0));
}

static void embedding_bag_note(const pn_layer *l, char *buf, size_t cap)
{
    pn_bag_rule r = rule_of(l);
    pn_bag_note(&r, l->in_shapes[0].columns, buf, cap);
}

static int embedding_bag_pull_ids(const pn_layer *l, const pn_csr *in, int first, int rows,
                                  pn_buffer *work, const int **ids, int *n)
{
    pn_bag_rule r = rule_of(l);
    return pn_bag_distinct_rows(&r, l->in_shapes[0].columns, in, first, rows, work, ids, n);
}

static void embedding_bag_release(pn_layer_inst *x)
{
    pn_bag_plan_release(&((embedding_bag_scratch *)x->scratch)->plan);
}

/* Per bag: a row's gather, scale and add, forward and backward (features vary). */
static double embedding_bag_flops(const pn_layer *l)
{
    return 6.0 * l->out_shape.seq * l->out_shape.width;
}

const pn_layer_type pn_layer_embedding_bag = {
    .name = "embedding_bag",
    .summary = "sum or mean of value-weighted table rows per sample and field of a sparse "
               "input; attrs rows, size, mode, per_field, shard",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(embedding_bag_attrs),
    .scratch_size = sizeof(embedding_bag_scratch),
    .attrs = embedding_bag_attr_names,
    .parse = embedding_bag_parse,
    .infer = embedding_bag_infer,
    .declare = embedding_bag_declare,
    .forward = embedding_bag_forward,
    .backward = embedding_bag_backward,
    .takes_sparse = true,
    .flops = embedding_bag_flops,
    .note = embedding_bag_note,
    .pull_ids = embedding_bag_pull_ids,
    .release = embedding_bag_release,
};
