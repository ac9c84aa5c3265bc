/* pn_stage: the stage runtime of one rank, Paddle's ParallelNeuralNetwork seen from
 * one stage. It holds the stage's layers as one network per micro-batch in flight
 * over one parameter arena (net/network.h), the links that carry Arguments to
 * and from the neighbour stages (mpi/comm.h), and runs one step's passes in the
 * order of the schedule: receive inputs -> forward -> send outputs; receive output
 * gradients -> backward -> send input gradients. The last backward starts summing
 * each layer's gradients over the replicas as soon as they are final (buckets), or
 * under --deterministic adds the micro-batches' gradients in a fixed tree. After a
 * step the arena's gradients are the whole global batch's, each tied table's uses
 * summed over the stages that hold them (pipeline/ties.h). The epoch loop,
 * clipping, the update and everything around them are the trainer's. */
#ifndef PN_STAGE_H
#define PN_STAGE_H

#include <stdbool.h>
#include <stdint.h>

#include "io/reader.h"
#include "layers/params.h"
#include "mpi/comm.h"
#include "math/precision.h"
#include "net/graph.h"
#include "net/network.h"
#include "plan/plan.h"
#include "plan/schedule.h"

typedef struct pn_stage pn_stage;

typedef struct pn_stage_config {
    const pn_graph *graph;
    const pn_plan *plan;         /* the stage of each layer */
    const pn_schedule *sched;    /* the order of each stage's passes */
    pn_comm *comm;               /* this rank's place (stage, replica) and transport */
    pn_device device;            /* where the arena and the arguments live */
    uint64_t seed;               /* parameter init and dropout masks */
    int global_batch;            /* samples per step over all replicas (losses are means) */
    int micro_rows;              /* samples per micro-batch */
    int eval_rows;               /* samples of the largest forward-only batch */
    bool deterministic;          /* sum gradients in a fixed tree (--deterministic) */
    bool recompute;              /* one network; keep only each micro-batch's received
                                    inputs and run its forward again before its backward */
    bool shard_optimizer;        /* lay the gradients out in one piece per replica
                                    (pn_params_set_grad_pieces) for a sharded optimizer */
    bool forward_only;           /* inference: one network per chunk without gradients,
                                    no gradient links; pn_stage_step is refused */
    bool share_memory;           /* the activation memory planner (net/arg_plan.h):
                                    one set of argument gradients for every network of
                                    the stage, values shared within each network */
    pn_precision precision;      /* bf16: the links carry bf16 (math/precision.h) */
} pn_stage_config;

/* What the stage's activations take now: every network's arguments (values,
 * gradients, ids; the gradients its networks share counted once), the inputs kept under --recompute, and the layers' scratch (what
 * the pool grew by during passes, so known once a step and an evaluation ran). */
typedef struct pn_stage_mem {
    int networks;
    size_t arg_bytes, kept_bytes, scratch_bytes;
    size_t work_bytes; /* a bf16 stage's fp32 work area of a layer call (arg_bf16.h) */
} pn_stage_mem;

/* Builds this rank's stage: networks, arena (initialized from the seed), links. */
int pn_stage_create(pn_stage **out, const pn_stage_config *cfg);
void pn_stage_free(pn_stage *s);

/* Whether a step leaves the dense gradients summed in this replica's piece only
 * (pn_params_grad_own; --shard-optimizer without --deterministic, no tied table
 * here, a transport that reduces to one replica): the rest is not the sum. */
bool pn_stage_grads_in_pieces(const pn_stage *s);

/* The stage's parameter arena (the optimizer adds its slots to it). */
pn_params *pn_stage_params(const pn_stage *s);

void pn_stage_memory(const pn_stage *s, pn_stage_mem *out);

/* The dataset fields the stage reads, in the order a pn_batch holds them: the
 * model inputs its layers consume, or, for a stage that consumes none, the first
 * input (so that every stage of a replica sees the same batch sizes). */
const pn_reader_field *pn_stage_fields(const pn_stage *s, int *n);

/* One training step over this replica's rows of batch b: every pass of the
 * schedule, then the gradients summed over micro-batches and replicas. */
int pn_stage_step(pn_stage *s, const pn_batch *b, long step);

/* Forward of this replica's rows of evaluation batch b at once; tag (negative)
 * keeps its messages apart from any step's. most_rows: the most rows any replica
 * has of this batch (the first replica's): a stage with a table sharded across the
 * replicas takes part in as many of its pulls as the busiest replica, rows or not
 * (called for every batch, b->rows 0 included; without such a table that does
 * nothing). */
int pn_stage_evaluate(pn_stage *s, const pn_batch *b, long tag, int most_rows);

/* Called after each piece's forward through one of the stage's chunks, before the
 * next piece overwrites it: net holds samples [first, first + rows) of the batch. */
typedef int (*pn_stage_piece_fn)(void *ctx, pn_network *net, int first, int rows);

/* Inference over batch b (every rank of the pipe reads the same rows): the batch in
 * pieces of piece rows, each piece's forward sent on as soon as it is done, so the
 * stages work on different pieces at once (the pieces are pipelined, at most the
 * schedule's micro-batches of them in flight on a link); step (>= 0) numbers the
 * call, fn (may be NULL) sees each piece on each chunk. */
int pn_stage_infer(pn_stage *s, const pn_batch *b, long step, int piece, pn_stage_piece_fn fn,
                   void *ctx);

/* The loss statistics of the stage's loss layers since the last call: {loss sum,
 * rows predicted right, rows}, and their AUC histograms added into auc (unless
 * NULL); they start again from zero. */
void pn_stage_take_stats(pn_stage *s, double out[3], pn_auc *auc);

#endif
