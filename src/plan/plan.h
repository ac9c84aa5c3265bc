/* pn_plan: which pipeline stage runs each layer (Paddle's per-layer device), and
 * what each stage costs. Placement is manual, from the layers' "stage" attributes
 * (a layer without one takes the stage of the layer before it in topological order,
 * the first layer stage 0), or automatic for a requested number of stages: a
 * partitioner cuts the topological order into contiguous runs that balance the
 * estimated time per stage (layer FLOP and byte estimates, or measured layer times:
 * plan/plan_measure.h) and, among balanced
 * cuts, prefers those that send fewer bytes. Data inputs are not placed: every
 * stage that consumes one reads it itself. Stages are non-decreasing along the
 * topological order, so every edge goes forward; a placement with a backward edge
 * or an empty stage is refused with a message naming the layers. */
#ifndef PN_PLAN_H
#define PN_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "math/precision.h"
#include "net/graph.h"
#include "plan/schedule.h"

typedef struct pn_stage_cost {
    int layers;                /* layers placed here */
    long params;               /* parameter floats */
    double flops;              /* forward + backward FLOPs per sample */
    double activation_bytes;   /* kept from forward to backward, per sample */
    double send_bytes;         /* per sample, forward values to later stages */
    double recv_bytes;         /* per sample, forward values from earlier stages */
} pn_stage_cost;

typedef struct pn_plan {
    int stages;           /* pipeline stages P: the ranks of one replica */
    int virtual_stages;   /* V: chunks per stage (the interleaved schedule), else 1 */
    int chunks;           /* P x V: the contiguous pieces the model is cut into */
    int *chunk_of;        /* [graph->n_nodes]: chunk of each layer; -1 for data inputs */
    int *stage_of;        /* [graph->n_nodes]: stage of each layer, chunk_of mod P (chunk c
                             runs on stage c mod P); -1 for data inputs */
    pn_stage_cost *cost;  /* [chunks] (with one virtual stage: [stages]) */
    pn_precision precision; /* of the links' bytes in cost (pn_plan_set_precision) */
} pn_plan;

/* The links' bytes of a run in precision (a bf16 run's carry 2 bytes a value, not
 * 4: math/precision.h): what the plan prints and predicts from; built plans are
 * fp32's. The cut does not change: a uniform scale leaves its choice alone. */
void pn_plan_set_precision(pn_plan *p, pn_precision precision);

/* Places g's layers. stages > 0: that many stages (automatic unless the model has
 * "stage" attributes, which must then use exactly stages stages); stages == 0: from
 * the attributes (one stage when there are none). Errors: more stages than layers,
 * a backward edge, an empty stage, attributes that disagree with stages. */
int pn_plan_build(pn_plan **out, const pn_graph *g, int stages);

/* The same, with the partitioner balancing layer_s[node] (seconds of a layer's
 * forward + backward, indexed like g->nodes; inputs ignored) instead of the FLOP
 * estimate; NULL: the estimate. It minimizes the largest stage time, then the bytes
 * crossing the cuts; among cuts equal in both, the one whose last cut comes first
 * wins (deterministic: every rank given the same times places alike). A time that
 * is negative, infinite or NaN is refused. Manual placement ignores layer_s. */
int pn_plan_build_timed(pn_plan **out, const pn_graph *g, int stages, const double *layer_s);

/* The same for the interleaved schedule: the layers are cut into stages x
 * virtual_stages chunks (balanced like stages above; "stage" attributes then number
 * the chunks, and with stages == 0 their count must be a multiple of virtual_stages),
 * chunk c on stage c mod stages. virtual_stages 1 is pn_plan_build_timed. Errors
 * also: fewer layers than chunks. */
int pn_plan_build_virtual(pn_plan **out, const pn_graph *g, int stages, int virtual_stages,
                          const double *layer_s);
void pn_plan_free(pn_plan *p);

/* The costs of stage's chunks added up (its one chunk's without virtual stages). */
pn_stage_cost pn_plan_stage_cost(const pn_plan *p, int stage);

/* What one rank of stage holds with `replicas` replicas, in floats: *values, its
 * parameters' values (a table with "shard": "rows" only its largest shard's rows;
 * each optimizer slot as much again), *grads, its dense gradient buffer (a
 * row-sparse table's gradient is the rows a step touches, none of it). */
void pn_plan_stage_held(const pn_plan *p, const pn_graph *g, int stage, int replicas,
                        long *values, long *grads);

/* Estimated seconds per sample of a stage with cost c: the measure the partitioner
 * balances (its FLOPs and activation bytes at fixed device rates). */
double pn_plan_stage_time(const pn_stage_cost *c);

/* Bytes of activations stage holds at the peak of schedule s with micro-batches of
 * micro_batch samples: one micro-batch's per micro-batch in flight; with recompute
 * one micro-batch's plus, per micro-batch in flight, the values it received from
 * earlier stages (the inputs kept to run its forward again). With virtual stages,
 * the sum of that over the stage's chunks, each with its own peak in flight (the
 * networks the stage runtime keeps for it). */
double pn_plan_activation_bytes(const pn_plan *p, const pn_schedule *s, int stage,
                                int micro_batch, bool recompute);

/* The argument bytes (values and gradients) of stage's networks at the peak of
 * schedule s (one network per chunk under recompute), with micro-batches of
 * micro_batch samples: *own with every argument in a block of its own
 * (`train --no-share-memory`; fp32 in either precision), *shared as the activation
 * memory planner (net/arg_plan.h) lays them out in the plan's precision
 * (pn_plan_set_precision: bf16 slots),
 * gradients in one store for the stage; *work (NULL: not asked) the fp32 work area
 * the stage's bf16 layer calls share (net/arg_bf16.h; 0 in fp32). */
int pn_plan_arg_bytes(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int stage,
                      int micro_batch, bool recompute, double *own, double *shared,
                      double *work);

/* Prints them per stage, and the same under --recompute (plan_args.c), in the plan's
 * precision. */
int pn_plan_print_arg_memory(const pn_plan *p, const pn_graph *g, const pn_schedule *s,
                             int micro_batch, FILE *out);

/* Prints the per-stage table of `pipenet plan` for a layout of `replicas` copies of
 * the pipeline with `micro` micro-batches of `micro_batch` samples under schedule s:
 * layers, parameters, FLOPs per sample, activation bytes at the schedule's peak,
 * bytes sent and received per micro-batch, and the predicted bubble fraction. With
 * virtual stages, a row per chunk (its stage beside it), then each stage's
 * parameters and activation memory. */
/* The row-sparse tables (an embedding_bag's table, a sparse_fc's W): per table its
 * stage, its values' and its `slots` optimizer slots' memory (dense, as any
 * parameter's), and what its gradient takes per step instead of a table-sized
 * buffer: an id and a row per feature of the step's global batch (the rows a step
 * touches are at most its features), twice (the entries and their merged sums).
 * A table with "shard": "rows" also gets each rank's share over `replicas`
 * replicas (rows, values and slots) beside the unsharded figure. Prints nothing for
 * a model without one. */
void pn_plan_print_row_sparse(const pn_plan *p, const pn_graph *g, int slots, int replicas,
                              FILE *out);

void pn_plan_print(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                   int micro_batch, FILE *out);

#endif
