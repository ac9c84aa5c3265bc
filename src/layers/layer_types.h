/* The layer types compiled into pipenet; layers/registry.c lists them. */
#ifndef PN_LAYER_TYPES_H
#define PN_LAYER_TYPES_H

#include "layers/layer.h"

extern const pn_layer_type pn_layer_data;
extern const pn_layer_type pn_layer_fc;
extern const pn_layer_type pn_layer_act;
extern const pn_layer_type pn_layer_embedding;
extern const pn_layer_type pn_layer_layernorm;
extern const pn_layer_type pn_layer_add;
extern const pn_layer_type pn_layer_concat;
extern const pn_layer_type pn_layer_dropout;
extern const pn_layer_type pn_layer_attention;
extern const pn_layer_type pn_layer_softmax_xent;
extern const pn_layer_type pn_layer_mse;
extern const pn_layer_type pn_layer_lstm;
extern const pn_layer_type pn_layer_gru;
extern const pn_layer_type pn_layer_seq_pool;
extern const pn_layer_type pn_layer_flatten;
extern const pn_layer_type pn_layer_fm;
extern const pn_layer_type pn_layer_inner_product;
extern const pn_layer_type pn_layer_cross;
extern const pn_layer_type pn_layer_sigmoid_xent;
extern const pn_layer_type pn_layer_sparse_input;
extern const pn_layer_type pn_layer_embedding_bag;
extern const pn_layer_type pn_layer_sparse_fc;

/* The dataset a data or sparse_input layer reads (its "dataset" attribute, else its
 * name; a CSR group for sparse_input). */
const char *pn_data_layer_dataset(const pn_layer *l);

/* sparse_input's "dataset" (pn_data_layer_dataset answers for either input type). */
const char *pn_sparse_input_dataset(const pn_layer *l);

/* The int32 [N] dataset holding each sample's length (its "lengths" attribute), or
 * NULL: every sample is seq long. */
const char *pn_data_layer_lengths(const pn_layer *l);

#endif
