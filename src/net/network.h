/* pn_network: Paddle's NeuralNetwork. Runs forward and backward over a set of a
 * graph's nodes (all of them, or one pipeline stage's) on one device. The graph is
 * a shared, read-only description; the network owns everything that runs: one
 * layer instance per computed node (scratch buffers, loss statistics) and the
 * arguments, planned once for the largest batch and reused: a step allocates
 * nothing. Nodes consumed but not computed here (a stage's inputs from other
 * stages) get an argument the caller fills, and receive their gradient in its grad.
 * Parameters live in a pn_params arena shared by the networks of a stage (one per
 * micro-batch in flight), not owned by any of them; pn_network_build makes such a
 * set in one call. */
#ifndef PN_NETWORK_H
#define PN_NETWORK_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/layer.h"
#include "math/precision.h"
#include "net/arg_plan.h"
#include "net/graph.h"

typedef struct pn_network pn_network;

typedef struct pn_network_options {
    const bool *member;  /* member[i]: node i is computed here (NULL: every node) */
    pn_device device;    /* where the arguments (and a built arena) live */
    bool forward_only;   /* no gradient buffers; backward is refused */
    /* Arguments share storage where their lifetimes do not overlap (the activation
     * memory planner, net/arg_plan.h): values within the network, gradients
     * in grads, which every network of a stage may share (NULL: the network's own).
     * Then only the inputs supplied, the values sent on and the outputs nothing here
     * consumes hold their values after a pass, and no gradient but the supplied
     * inputs' holds its values after a backward. */
    bool share_memory;
    pn_grad_store *grads;
    /* PN_PRECISION_BF16: after every layer call (forward, a recompute's forward,
     * backward) what the layer wrote into an argument is rounded to bf16 (the
     * output's value; the input gradients); with share_memory the planned slots store
     * bf16 and layers compute on fp32 copies in grads' work area (net/arg_bf16.h
     * says what is and is not rounded). The same bits with share_memory on and off.
     * The network does not read pn_math_precision (which makes GEMMs round their
     * operands): the trainer sets both. pn_network_step refuses a bf16 network. */
    pn_precision precision;
    /* pn_network_build only: */
    int copies;          /* networks over the one arena (0 counts as 1) */
    bool init;           /* fill the new arena's values from (seed, parameter name) */
    uint64_t seed;
} pn_network_options;

/* A network over o->member's nodes of g whose layers take their parameters from
 * params: they are declared there now (so params must not be finalized unless it
 * already holds them all). */
int pn_network_create(pn_network **out, const pn_graph *g, const pn_network_options *o,
                      pn_params *params);
void pn_network_free(pn_network *net);

/* The one call that sets up a stage (or a whole model): a new arena on o->device,
 * o->copies networks over it (nets[0 .. copies)), the arena finalized and, with
 * o->init, its values initialized. On failure nothing is left allocated. */
int pn_network_build(const pn_graph *g, const pn_network_options *o, pn_params **arena,
                     pn_network **nets);

/* The arena the network's layers use. */
pn_params *pn_network_params(const pn_network *net);

/* Reserves every argument for up to max_batch samples; a batch whose matrices would
 * have more rows than an int holds, or whose memory cannot be had, is refused
 * naming the layer. */
int pn_network_plan(pn_network *net, int max_batch);

/* The argument holding node's output here (computed or supplied), or NULL. */
pn_arg *pn_network_arg(pn_network *net, int node);

/* Sets every argument to batch samples (<= the planned maximum). */
int pn_network_set_batch(pn_network *net, int batch);

/* Runs the member layers forward in topological order. Data and external
 * arguments must hold their values (and lengths, where samples have them) for the
 * current batch; each layer's output takes the lengths of its first input of the
 * same seq that has lengths, else none. With pass->recompute
 * (the same forward again, for its backward) the loss statistics are left as they
 * were before the call. */
int pn_network_forward(pn_network *net, const pn_pass *pass);

/* The arena's handles of the sharded tables a forward pulls (pn_row_puller), in the
 * order it pulls them, *n of them (none where the arena is one shard). */
int pn_network_pulls(pn_network *net, const int **pulls, int *n);

/* Pull k's layer and the graph node of its one input (-1: it has several). */
int pn_network_pull_source(pn_network *net, int k, const pn_layer_inst **layer, int *input);

/* Generation, one position at a time: runs the member layers at position pos of n
 * sequences (n <= the planned batch), one row each (pn_layer_step), after setting
 * every argument to n rows. The data arguments must hold the n ids of position pos;
 * positions 0..pos-1 of the same sequences must have been stepped before. A later
 * pn_network_set_batch restores whole samples. */
int pn_network_step(pn_network *net, int pos, int n);

/* Makes sequence i continue sequence from[i] (its first len positions), i < n, in
 * every layer that keeps state between steps (beam search). */
int pn_network_step_reorder(pn_network *net, const int *from, int n, int len);

/* Runs backward: pn_network_backward_begin, then pn_network_backward_run. */
int pn_network_backward(pn_network *net, const pn_pass *pass, long global_batch);

/* Marks argument gradients stale (zeros not yet written, layers/arg.h) and seeds
 * every loss output with 1 / (global_batch * rows per sample), so losses are means
 * over the global batch; a loss whose rows carry lengths with 1 / (real positions
 * of the global batch), as set by pn_network_set_positions (unset: this network's
 * batch is the global batch, and its own lengths count). Between begin and run, a
 * pipeline stage adds the gradients that later stages sent for its outputs, and for
 * a supplied input that later stages read too their sum (into a stale gradient:
 * writes them, pn_arg_grad_beta; the layers here then add theirs). */
int pn_network_backward_begin(pn_network *net, long global_batch);

/* The real positions (sum of the lengths) of the step's global batch, over every
 * micro-batch and replica: the mean a loss over padded samples takes. 0: unset. */
void pn_network_set_positions(pn_network *net, double global_positions);

/* Runs the member layers backward in reverse topological order. Gradients of
 * supplied arguments and of parameters accumulate; at the end no argument gradient
 * is stale (one nothing produced holds zeros). */
int pn_network_backward_run(pn_network *net, const pn_pass *pass);

/* Called during pn_network_backward_run right after a layer with parameters has
 * run (a stage starts reducing that layer's gradients while earlier layers are
 * still computing theirs). */
typedef int (*pn_grads_ready_fn)(void *ctx, const pn_layer_inst *layer);

/* Installs the callback; fn NULL removes it. */
void pn_network_on_grads_ready(pn_network *net, pn_grads_ready_fn fn, void *ctx);

/* From now on, each computed layer's forward (backward) pass stores its wall time
 * in seconds in forward_s[node] (backward_s[node]), both indexed like the graph's
 * nodes (`pipenet plan --measure`); NULL stops it. */
void pn_network_time_layers(pn_network *net, double *forward_s, double *backward_s);

/* Bytes of the blocks the network's arguments hold now (values, gradients, ids),
 * inputs supplied by the caller included, its planned value slots too; layer
 * scratch and a shared pn_grad_store (options.grads) are not counted, nor the work
 * area of a bf16 network (pn_network_work_bytes). */
size_t pn_network_arg_bytes(const pn_network *net);

/* Bytes of the fp32 work area the network's bf16 layer calls use (in its gradient
 * store, shared with the stage's other networks when options.grads is given); 0 for
 * an fp32 or unplanned network. */
size_t pn_network_work_bytes(const pn_network *net);

/* Loss statistics of the member loss layers since the last reset, summed; and
 * those of one node (NULL unless it is a loss layer computed here). */
void pn_network_stats(const pn_network *net, pn_layer_stats *out);
const pn_layer_stats *pn_network_node_stats(const pn_network *net, int node);
/* Adds the AUC histograms of the member binary losses (layers/auc.h) into into. */
void pn_network_auc(const pn_network *net, pn_auc *into);
/* Forgets both. */
void pn_network_reset_stats(pn_network *net);

#endif
