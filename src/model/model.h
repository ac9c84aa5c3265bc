/* What the pipenet program needs of a pn_model beyond the public include/pipenet.h:
 * building one from a state already read (export checks a snapshot before writing
 * it) and the graph behind it (infer shapes its dataset reader from it). */
#ifndef PN_MODEL_H
#define PN_MODEL_H

#include "io/train_state.h"
#include "math/device.h"
#include "pipeline/graph.h"
#include "pipenet.h"

/* A model from st's config and values, on the host; path names the file in messages. */
int pn_model_from_state(pn_model **out, const pn_train_state *st, const char *path);

/* The model's graph (owned by the model). */
const pn_graph *pn_model_graph(const pn_model *m);

/* Generation (model/generate.c) keeps its state in the model: the state, or NULL;
 * and a new one (NULL: none), which replaces and frees the one before with the
 * free function it was set with. */
typedef struct pn_gen pn_gen;
pn_gen *pn_model_gen(const pn_model *m);
void pn_model_set_gen(pn_model *m, pn_gen *g, void (*free_fn)(pn_gen *g));

/* The model's arena, the path it was loaded from, its default output's graph index. */
pn_params *pn_model_params(const pn_model *m);
const char *pn_model_path(const pn_model *m);
int pn_model_output_node(const pn_model *m);

/* Where the model's arena and networks live; and making that device current, which
 * every call that runs the model does first (models may live on different GPUs). */
pn_device pn_model_device_of(const pn_model *m);
int pn_model_select_device(const pn_model *m);

#endif
