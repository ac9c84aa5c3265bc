/* Measured layer times for the plan: `pipenet plan --measure` builds the model's
 * whole network for one micro-batch on this machine, feeds it random inputs of the
 * right kind (ids below their vocabulary), and times every layer's forward and
 * backward (median of several steps after a warm-up) and one optimizer update; under
 * mpirun with 2 or more ranks it also times the link between ranks 0 and 1
 * (ping-pong) and how the ranks share the machine (pn_plan_measure_job). The times can be saved to a JSON file (docs/formats.md, "Layer
 * times") and read back by `pipenet plan --layer-times` and `pipenet train
 * --layer-times`, where the partitioner balances them instead of FLOP estimates
 * (pn_plan_build_timed): every rank reads the same file, so every rank places
 * alike. */
#ifndef PN_PLAN_MEASURE_H
#define PN_PLAN_MEASURE_H

#include <stdbool.h>
#include <stdint.h>

#include "mpi/comm.h"
#include "net/graph.h"
#include "optim/optimizer.h"

typedef struct pn_plan_times {
    int n_nodes;              /* the graph's */
    double *forward_s;        /* [n_nodes] seconds per micro-batch; 0 for inputs */
    double *backward_s;       /* [n_nodes] */
    int micro_batch;          /* samples per micro-batch the times are for */
    int threads;              /* BLAS threads they were measured with */
    int repetitions;          /* the median is of this many */
    double optimizer_s_per_param; /* one update, per parameter float */
    bool link_measured;
    double link_latency_s;    /* one message between two ranks, empty */
    double link_bytes_per_s;  /* and per byte beyond it */
    /* Sharing the machine (pn_plan_measure_job; shared_ranks 0: not measured):
     * seconds per training step of the whole network, one micro-batch, on rank 0
     * alone and on each of shared_ranks ranks stepping at once (their mean). */
    int shared_ranks;
    double alone_step_s, shared_step_s;
} pn_plan_times;

typedef struct pn_measure_options {
    int micro_batch;          /* samples per micro-batch */
    int warmup;               /* steps run before timing */
    int repetitions;          /* timed steps; per-layer medians */
    int threads;              /* recorded only: the caller sets the BLAS threads */
    uint64_t seed;            /* initial values and inputs */
    const pn_optimizer_config *optimizer; /* NULL: sgd */
} pn_measure_options;

/* Zeroed times for g's nodes. */
int pn_plan_times_create(pn_plan_times **out, const pn_graph *g);
void pn_plan_times_free(pn_plan_times *t);

/* layer_s[node] = forward + backward seconds of each node (what the partitioner
 * balances); layer_s has g->n_nodes entries. */
void pn_plan_times_layer_sum(const pn_plan_times *t, double *layer_s);

/* Times every layer of g and the optimizer on this process (see above). */
int pn_plan_measure_layers(pn_plan_times *t, const pn_graph *g, const pn_measure_options *o);

/* Times the link between ranks 0 and 1 of c (collective over c's ranks; a job of
 * one rank measures nothing). The result is valid on rank 0. */
int pn_plan_measure_link(pn_plan_times *t, pn_comm *c);

/* All of the above for `pipenet plan --measure` in a job (collective over c): the
 * link, the layers on rank 0 alone (the other ranks asleep in a wait), and the
 * sharing of the machine by a layout of `ranks` ranks: the first `ranks` ranks of
 * the job (at most all; none below 2) each train the whole network back to back for
 * half a second, rank 0 first alone, then all at once; shared_step_s / alone_step_s
 * is how much slower a rank trains beside the others (ranks that outnumber the
 * cores take turns, and running at once also shares caches and memory). Each of
 * those ranks builds the whole network. The result is valid on rank 0. */
int pn_plan_measure_job(pn_plan_times *t, const pn_graph *g, const pn_measure_options *o,
                        pn_comm *c, int ranks);

/* Writes t for g's layers to path as JSON, put in place whole (base/out_file.h: a
 * failed write leaves what path held); reads it back, refusing a file that is not
 * one, or that lacks a layer of g or names one g does not have, with a message in the
 * shape of config errors. */
int pn_plan_times_save(const pn_plan_times *t, const pn_graph *g, const char *path);
int pn_plan_times_load(pn_plan_times **out, const pn_graph *g, const char *path);

#endif
