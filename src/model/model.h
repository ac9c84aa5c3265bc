/* What the pipenet program needs of a pn_model beyond the public include/pipenet.h:
 * building one from a state already read (export checks a snapshot before writing
 * it) and the graph behind it (infer shapes its dataset reader from it). */
#ifndef PN_MODEL_H
#define PN_MODEL_H

#include "io/train_state.h"
#include "math/device.h"
#include "net/graph.h"
#include "net/network.h"
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

/* A model of which this process holds part, one pipeline stage's layers
 * (`pipenet generate` under mpirun): members(ctx, g, member) marks the graph nodes
 * to hold (layers; their inputs from elsewhere are filled by the caller), and only
 * their parameters are read from the file. Such a model generates through a hook
 * (pn_model_set_gen_hook) and refuses pn_model_forward. */
typedef int (*pn_model_members_fn)(void *ctx, const pn_graph *g, bool *member);
int pn_model_load_part(pn_model **out, const char *path, const char *device,
                       pn_model_members_fn members, void *ctx);

/* The nodes a part holds ([graph nodes]), or NULL for a whole model. */
const bool *pn_model_part(const pn_model *m);

/* Generation over a part: step runs one position of n sequences through this
 * process's part of the step network net and, when logits is not NULL, leaves the
 * output's values of every sequence there on every process (pipeline/gen_stages.h). */
typedef struct pn_gen_hook {
    int (*step)(void *ctx, pn_network *net, int pos, int n, float *logits);
    void *ctx;
} pn_gen_hook;
void pn_model_set_gen_hook(pn_model *m, const pn_gen_hook *hook);
const pn_gen_hook *pn_model_gen_hook(const pn_model *m);

/* The default output of a graph: the node feeding the first loss layer, else the
 * last node nothing consumes (pn_model_output_name's). */
int pn_model_default_output_of(const pn_graph *g);

/* What node's values are (pn_model_classifies): 1 a classification's logits, 2 a
 * binary classifier's logit, else 0. */
int pn_model_classifies_node(const pn_graph *g, int node);

/* What loss layers counted, in the numbers `infer` prints: rows, their mean loss and,
 * by the kind the counting layers share (else NaN), the accuracy, RMSE or AUC. */
typedef struct pn_loss_summary {
    long rows;
    double mean_loss, accuracy, rmse, auc;
} pn_loss_summary;

/* The summary of per_node ([g->n_nodes]: each loss layer's statistics) and the
 * binary losses' histogram (may be NULL). The same for one process and for stages. */
void pn_loss_summarize(const pn_graph *g, const pn_layer_stats *per_node, const pn_auc *auc,
                       pn_loss_summary *out);

#endif
