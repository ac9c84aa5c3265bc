/* The one table of layer types. A new type is a file defining its pn_layer_type,
 * a line in layer_types.h and a line here (and a case in tests/test_layer_grad.c,
 * whose suite fails for a registered type without one). */
#include <string.h>

#include "layers/layer_types.h"

static const pn_layer_type *const registry[] = {
    &pn_layer_data,      &pn_layer_fc,      &pn_layer_act,       &pn_layer_embedding,
    &pn_layer_layernorm, &pn_layer_add,     &pn_layer_concat,    &pn_layer_dropout,
    &pn_layer_attention, &pn_layer_softmax_xent, &pn_layer_mse,     &pn_layer_lstm,
    &pn_layer_gru,       &pn_layer_seq_pool, &pn_layer_flatten,   &pn_layer_fm,
    &pn_layer_inner_product, &pn_layer_cross, &pn_layer_sigmoid_xent, &pn_layer_sparse_input,
    &pn_layer_embedding_bag, &pn_layer_sparse_fc,
};

int pn_layer_type_count(void) { return (int)(sizeof registry / sizeof *registry); }

const pn_layer_type *pn_layer_type_at(int i) { return registry[i]; }

const pn_layer_type *pn_layer_type_find(const char *name)
{
    for (int i = 0; i < pn_layer_type_count(); i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}
