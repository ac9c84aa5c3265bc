/* pn_graph: a model JSON file (DESIGN.md section 3) as a validated DAG of layers
 * with inferred shapes, in topological order. The model's "inputs" become data
 * nodes; each entry of "layers" becomes a node whose inputs name earlier or later
 * entries (the order in the file does not matter, cycles are refused). Every
 * mistake is reported with the file, the place and the field. A graph is parsed
 * once and read-only afterwards: it describes layers, and the networks built from
 * it (net/network.h) own everything that runs, so any number of them (a
 * stage's micro-batches in flight, a model's forwards) share one graph. */
#ifndef PN_GRAPH_H
#define PN_GRAPH_H

#include <jansson.h>
#include <stdbool.h>

#include "layers/layer.h"

typedef struct pn_graph_node {
    char *name;
    pn_layer *layer;
    int n_inputs;
    int *inputs;      /* indices of the producing nodes, in the spec's order */
    int stage;        /* the "stage" attribute, -1 when absent */
    bool is_input;    /* one of the model's "inputs" (a data layer) */
    bool needs_grad;  /* a gradient flows into this node's output */
    int n_consumers;
} pn_graph_node;

typedef struct pn_graph {
    char *file;             /* path for messages */
    char *name;             /* the model's "name" (or the file's base name) */
    json_t *root;           /* the parsed document (owned) */
    int n_nodes;
    pn_graph_node *nodes;   /* topological order: inputs of a node come before it */
} pn_graph;

/* The bound the layers reading node's ids put on them: ids must lie in [0, limit);
 * 0 when no consumer bounds them. *user (may be NULL) names the tightest consumer. */
int pn_graph_id_limit(const pn_graph *g, int node, const pn_graph_node **user);

/* Parses and validates a model file. */
int pn_graph_load(pn_graph **out, const char *path);

/* Validates an already-parsed document (root is borrowed and referenced); file is
 * used in messages. */
int pn_graph_from_json(pn_graph **out, json_t *root, const char *file);

void pn_graph_free(pn_graph *g);

/* Index of the node called name, or -1. */
int pn_graph_find(const pn_graph *g, const char *name);

/* The "train" object of the model, or NULL. */
const json_t *pn_graph_train_spec(const pn_graph *g);

/* Number of loss layers. */
int pn_graph_loss_count(const pn_graph *g);

/* The kind (layers/layer.h) that every loss layer of g has; PN_LOSS_OTHER when
 * there is none or their kinds differ, so that no single accuracy or RMSE mixes
 * rows of different losses. */
pn_loss_kind pn_graph_loss_kind(const pn_graph *g);

/* The first loss layer whose prediction (its first input) is node, or -1: what the
 * values of node are (logits of a classification, a regression's estimates). */
int pn_graph_loss_of(const pn_graph *g, int node);

/* Positions per sample of the model's inputs (the largest "seq"; 1 when none is a
 * sequence): what tokens/s counts. */
int pn_graph_tokens_per_sample(const pn_graph *g);

/* Parameters the graph's layers declare, summed; a tied copy (below) counts in the
 * parameter it copies. */
long pn_graph_param_count(const pn_graph *g);

/* Checks every tied copy a layer declares (an fc's "tie"): it names an embedding
 * whose table has the copy's shape; the copy takes the table's init and decay.
 * Errors name the file, the layer and its "tie". Part of pn_graph_from_json
 * (graph_ties.c). */
int pn_graph_resolve_ties(pn_graph *g);

/* Whether parameter decl of node's layer is a tied copy: one parameter with the one
 * it copies, so sums, hashes, counts and snapshots take only that one. */
bool pn_graph_is_tied_copy(const pn_graph *g, int node, int decl);

/* Refuses, naming the layer, a batch of `batch` samples (the most one network holds)
 * for which a layer's matrices would have more rows than an int holds. */
int pn_graph_check_batch(const pn_graph *g, int batch);

#endif
