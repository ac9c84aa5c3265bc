/* pn_network: Paddle's NeuralNetwork. Runs forward and backward over a set of a
 * graph's nodes (all of them, or one pipeline stage's) on one device. Arguments
 * are planned once for the largest batch and reused: a step allocates nothing.
 * Nodes consumed but not computed here (a stage's inputs from other stages) get
 * an argument the caller fills, and receive their gradient in its grad.
 * Parameters live in a pn_params arena passed in, not owned by the network. */
#ifndef PN_NETWORK_H
#define PN_NETWORK_H

#include <stdbool.h>

#include "layers/layer.h"
#include "pipeline/graph.h"

typedef struct pn_network pn_network;

/* A network over the nodes with member[i] true (NULL: every node), on dev. */
int pn_network_create(pn_network **out, const pn_graph *g, const bool *member, pn_device dev);
void pn_network_free(pn_network *net);

/* Declares the parameters of the network's layers in params (before finalize). */
int pn_network_bind(pn_network *net, pn_params *params);

/* Reserves every argument for up to max_batch samples. */
int pn_network_plan(pn_network *net, int max_batch);

/* The argument holding node's output here (computed or supplied), or NULL. */
pn_arg *pn_network_arg(pn_network *net, int node);

/* Sets every argument to batch samples (<= the planned maximum). */
int pn_network_set_batch(pn_network *net, int batch);

/* Runs the member layers forward in topological order. Data and external
 * arguments must hold their values for the current batch. */
int pn_network_forward(pn_network *net, const pn_pass *pass, pn_params *params);

/* Runs backward: pn_network_backward_begin, then pn_network_backward_run. */
int pn_network_backward(pn_network *net, const pn_pass *pass, pn_params *params,
                        long global_batch);

/* Clears argument gradients and seeds every loss output with 1 / (global_batch *
 * rows per sample), so losses are means over the global batch. Between begin and
 * run, a pipeline stage adds the gradients that later stages sent for its outputs. */
int pn_network_backward_begin(pn_network *net, long global_batch);

/* Runs the member layers backward in reverse topological order. Gradients of
 * supplied arguments and of parameters accumulate. */
int pn_network_backward_run(pn_network *net, const pn_pass *pass, pn_params *params);

/* Called during pn_network_backward_run right after a layer with parameters has
 * run (a trainer starts reducing that layer's gradients while earlier layers are
 * still computing theirs). */
typedef int (*pn_grads_ready_fn)(void *ctx, const pn_layer *layer);

/* Installs the callback; fn NULL removes it. */
void pn_network_on_grads_ready(pn_network *net, pn_grads_ready_fn fn, void *ctx);

/* Loss statistics of the member loss layers since the last reset. */
void pn_network_stats(const pn_network *net, pn_layer_stats *out);
void pn_network_reset_stats(pn_network *net);

#endif
