/* Inference across pipeline stages (`mpirun -np P pipenet infer MODEL --stages P`): a
 * model file split as training splits it (pn_plan_build), each rank building only its
 * stage (a forward-only pn_stage) and reading only its stage's parameters from the
 * file (io/snapshot_file.h, pn_snapshot_read_values), so no rank holds the whole
 * model. The data's batches are pipelined: every rank reads the same run of
 * `in_flight` batches, and each stage sends a batch's activations on as soon as its
 * forward is done (pn_stage_infer). Each batch is exactly one-process infer's batch,
 * so outputs and loss sums are the same bits as in one process. */
#ifndef PN_INFER_STAGES_H
#define PN_INFER_STAGES_H

#include <stdbool.h>

#include "layers/auc.h"
#include "layers/layer.h"
#include "layers/params.h"
#include "mpi/comm.h"
#include "mpi/job.h"
#include "net/graph.h"

typedef struct pn_infer_stages pn_infer_stages;

typedef struct pn_infer_stages_config {
    const char *model;   /* a model or snapshot file, or a snapshot directory */
    const char *data;    /* the dataset file */
    int stages;          /* P: the job's size (no replicas) */
    int batch;           /* samples per forward, as one process's --batch */
    int in_flight;       /* batches pipelined at once (link slots); 0: 2 P */
    int device_request;  /* pn_device_request: each rank's device */
} pn_infer_stages_config;

/* Collective: the model's graph from the file's config, the placement, the ranks'
 * devices and transport, this rank's stage and its parameters, the data file (every
 * input a stage reads must be there: labels too). Every failure is agreed on: every
 * rank returns an error, the rank that owns it its own, the others PN_ERR_PEER. */
int pn_infer_stages_open(pn_infer_stages **out, pn_job *job, const pn_infer_stages_config *cfg);
void pn_infer_stages_free(pn_infer_stages *x);

/* The model's graph, the resolved model path, and the samples of the data file. */
const pn_graph *pn_infer_stages_graph(const pn_infer_stages *x);
const char *pn_infer_stages_model(const pn_infer_stages *x);
long pn_infer_stages_samples(const pn_infer_stages *x);

/* pn_comm_agree over the job's ranks: rc of the lowest failing rank on that rank,
 * PN_ERR_PEER on the others, PN_OK when none failed. */
int pn_infer_stages_agree(pn_infer_stages *x, int rc);

/* The rank that computes node (a layer, not a data input). */
int pn_infer_stages_rank_of(const pn_infer_stages *x, int node);

/* A piece's output values: samples [row0, row0 + rows), host memory. */
typedef int (*pn_infer_out_fn)(void *ctx, long row0, int rows, const float *values);

/* Runs every batch of the file forward; on the rank that computes out_node, fn gets
 * its values batch by batch in file order. Collective; a failure on one rank ends
 * the others through their links' stall bound or the caller's abort. */
int pn_infer_stages_run(pn_infer_stages *x, int out_node, pn_infer_out_fn fn, void *ctx);

/* Collective, after the run: each loss layer's statistics ([graph nodes], only loss
 * layers count) and the binary losses' AUC histogram (when auc is not NULL), summed
 * over the ranks (each loss layer is counted by one rank). */
int pn_infer_stages_losses(pn_infer_stages *x, pn_layer_stats *per_node, pn_auc *auc);

/* Collective: this rank's device for request (a GPU: node-local rank mod visible
 * GPUs), made current, then the transport between the ranks (as training's auto
 * chooses); agreed. Generation across stages places its ranks alike. */
int pn_infer_place_device(pn_comm *comm, pn_job *job, int request, pn_device *dev);

/* Writes every parameter of arena from the model or snapshot file at path, reading
 * only their datasets (a tied copy's from its table; no optimizer slots): what one
 * stage of a split model loads. A missing or misshapen one is refused, naming it. */
int pn_infer_load_params(pn_params *arena, const char *path);

#endif
