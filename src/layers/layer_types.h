/* The layer types compiled into pipenet: the one list of them (PN_LAYER_TYPES), which
 * layers/registry.c makes the table of. */
#ifndef PN_LAYER_TYPES_H
#define PN_LAYER_TYPES_H

#include "layers/layer.h"

/* The one list of the layer types, in the order `pipenet layers` prints them: a new
 * type is its file and its name here. X(name) names the table pn_layer_<name>; the
 * registry (registry.c) is built from this list. */
#define PN_LAYER_TYPES(X)                                                               \
    X(data) X(fc) X(act) X(embedding) X(layernorm) X(add) X(concat) X(dropout)          \
    X(attention) X(softmax_xent) X(mse) X(lstm) X(gru) X(seq_pool) X(flatten) X(fm)     \
    X(inner_product) X(cross) X(sigmoid_xent) X(sparse_input) X(embedding_bag)          \
    X(sparse_fc)

#define PN_LAYER_TYPE_DECLARE(name) extern const pn_layer_type pn_layer_##name;
PN_LAYER_TYPES(PN_LAYER_TYPE_DECLARE)
#undef PN_LAYER_TYPE_DECLARE

/* The dataset a data or sparse_input layer reads (its "dataset" attribute, else its
 * name; a CSR group for sparse_input). */
const char *pn_data_layer_dataset(const pn_layer *l);

/* sparse_input's "dataset" (pn_data_layer_dataset answers for either input type). */
const char *pn_sparse_input_dataset(const pn_layer *l);

/* The int32 [N] dataset holding each sample's length (its "lengths" attribute), or
 * NULL: every sample is seq long. */
const char *pn_data_layer_lengths(const pn_layer *l);

#endif
