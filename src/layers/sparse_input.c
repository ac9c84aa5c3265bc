/* sparse_input: a network input whose dataset is a CSR group (docs/formats.md,
 * "Sparse features (CSR)"): the model's input {"dataset": ..., "sparse": true,
 * "columns": C, "fields": F}. Like data it computes nothing: the feeder copies each
 * batch's CSR rows into its output arg (pn_arg.csr, host memory). Its edge feeds
 * only the types that take sparse inputs (embedding_bag, sparse_fc), which run on
 * the stage that reads the data, so no CSR edge ever crosses stages. */
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

/* Keeps "columns" below 2^62: nnz-sized int64 arithmetic never wraps. */
static const long COLUMNS_MAX = (long)1 << 62;

typedef struct sparse_input_attrs {
    char dataset[PN_NAME_MAX + 1];
    long columns;
    int fields;
} sparse_input_attrs;

static const char *const sparse_input_attr_names[] = {"dataset", "sparse", "columns", "fields",
                                                      NULL};

static int sparse_input_parse(pn_layer *l, const json_t *spec)
{
    sparse_input_attrs *s = l->attrs;
    const char *dataset;
    PN_TRY(pn_attr_string(l, spec, "dataset", false, l->name, &dataset));
    PN_TRY(pn_json_name_length(&l->where, "dataset", dataset, "a name"));
    strcpy(s->dataset, dataset);
    bool sparse;
    PN_TRY(pn_attr_bool(l, spec, "sparse", true, &sparse));
    if (!sparse)
        return pn_json_error_value(&l->where, "sparse", json_object_get(spec, "sparse"),
                                   "true (a false \"sparse\" is a dense input: leave it out)");
    PN_TRY(pn_json_int(spec, &l->where, "columns", true, 1, COLUMNS_MAX, 1, &s->columns));
    return pn_attr_int(l, spec, "fields", false, 1, 0, &s->fields);
}

static int sparse_input_infer(pn_layer *l)
{
    const sparse_input_attrs *s = l->attrs;
    l->out_shape = (pn_shape){.seq = 1, .sparse = true, .fields = s->fields,
                              .columns = s->columns};
    return PN_OK;
}

static int sparse_input_pass(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    (void)x, (void)pass, (void)in, (void)out;
    return PN_OK;
}

const char *pn_sparse_input_dataset(const pn_layer *l)
{
    return ((const sparse_input_attrs *)l->attrs)->dataset;
}

const pn_layer_type pn_layer_sparse_input = {
    .name = "sparse_input",
    .summary = "network input filled from a CSR group; attrs dataset, sparse, columns, fields",
    .min_inputs = 0,
    .max_inputs = 0,
    .attrs_size = sizeof(sparse_input_attrs),
    .attrs = sparse_input_attr_names,
    .parse = sparse_input_parse,
    .infer = sparse_input_infer,
    .forward = sparse_input_pass,
    .backward = sparse_input_pass,
};
