/* data: a network input. It has no inputs and computes nothing: whoever feeds the
 * network (the reader, a test) writes its output arg. Its attributes come from the
 * model's "inputs" object: the dataset it reads, the shape of one sample and,
 * optionally, the dataset holding each sample's length (the feeder sets the output
 * arg's lengths from it). */
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct data_attrs {
    char dataset[PN_NAME_MAX + 1];
    char lengths[PN_NAME_MAX + 1]; /* integer [N] dataset of each sample's length, or "" */
    int size, seq;
    bool ids;
} data_attrs;

static const char *const data_attr_names[] = {"dataset", "size", "seq", "ids", "lengths", NULL};

static int data_parse(pn_layer *l, const json_t *spec)
{
    data_attrs *s = l->attrs;
    const char *dataset;
    PN_TRY(pn_attr_string(l, spec, "dataset", false, l->name, &dataset));
    PN_TRY(pn_json_name_length(&l->where, "dataset", dataset, "a name"));
    strcpy(s->dataset, dataset);
    PN_TRY(pn_attr_bool(l, spec, "ids", false, &s->ids));
    PN_TRY(pn_attr_int(l, spec, "seq", false, 1, 1, &s->seq));
    if (s->ids && json_object_get(spec, "size"))
        return pn_json_error_value(&l->where, "size", json_object_get(spec, "size"),
                                   "no size with \"ids\": true (one id per position)");
    /* labels written without "ids": true land here: the likely fix is that key */
    if (!s->ids && !json_object_get(spec, "size"))
        return pn_attr_error(l, "size", NULL, "an integer >= 1 (required), or, if dataset "
                             "'%s' holds class ids (integers), \"ids\": true in its place",
                             s->dataset);
    if (!s->ids) PN_TRY(pn_attr_int(l, spec, "size", true, 1, 0, &s->size));
    const char *lengths = NULL;
    PN_TRY(pn_attr_string(l, spec, "lengths", false, NULL, &lengths));
    if (lengths) {
        PN_TRY(pn_json_name_length(&l->where, "lengths", lengths, "a name"));
        if (s->seq < 2)
            return pn_json_error_value(&l->where, "lengths", json_object_get(spec, "lengths"),
                                       "no lengths on an input of seq 1 (every sample is 1 long)");
        strcpy(s->lengths, lengths);
    }
    return PN_OK;
}

static int data_infer(pn_layer *l)
{
    const data_attrs *s = l->attrs;
    l->out_shape = pn_shape_dense(s->ids ? 0 : s->size, s->seq, s->ids);
    return PN_OK;
}

static int data_pass(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)x, (void)pass, (void)in, (void)out;
    return PN_OK;
}

const char *pn_data_layer_dataset(const pn_layer *l)
{
    if (l->type == &pn_layer_sparse_input) return pn_sparse_input_dataset(l);
    return ((const data_attrs *)l->attrs)->dataset;
}

const char *pn_data_layer_lengths(const pn_layer *l)
{
    if (l->type != &pn_layer_data) return NULL;
    const char *name = ((const data_attrs *)l->attrs)->lengths;
    return name[0] ? name : NULL;
}

const pn_layer_type pn_layer_data = {
    .name = "data",
    .summary = "network input filled from a dataset; attrs dataset, size, seq, ids, lengths",
    .min_inputs = 0,
    .max_inputs = 0,
    .attrs_size = sizeof(data_attrs),
    .attrs = data_attr_names,
    .parse = data_parse,
    .infer = data_infer,
    .forward = data_pass,
    .backward = data_pass,
};
