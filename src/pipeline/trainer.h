/* pn_train: Paddle's Trainer over ParallelNeuralNetwork. The ranks of a
 * communicator form D replicas of a P-stage pipeline (mpi/grid.h). Each rank
 * builds the layers of its stage (pipeline/plan.h) once per micro-batch it may hold
 * at a time, streams its replica's slice of every global batch, runs its stage's
 * schedule (pipeline/schedule.h) exchanging Arguments with the other stages
 * (mpi/link.h), all-reduces its gradients over the replicas, and updates its own
 * parameters. Loss and accuracy reduce to every rank; rank 0 reports progress and
 * metrics. One process is the case P = D = 1. */
#ifndef PN_TRAINER_H
#define PN_TRAINER_H

#include <mpi.h>

#include "pipeline/graph.h"
#include "pipeline/train_config.h"

typedef struct pn_train_result {
    long steps;            /* global step count at the end */
    double last_loss;      /* training loss of the last step */
    double eval_loss;      /* last evaluation (NaN when there was none) */
    double eval_accuracy;  /* fraction in [0, 1] */
    double seconds;        /* wall time of the training steps */
    double samples_per_s;  /* training throughput over the run */
    double *losses;        /* [steps] when collect_losses was set; caller frees */
    unsigned long long param_hash; /* of every parameter, by name, in graph order */
    int failed_together;   /* the failure is known to every rank (setup): no abort needed */
    int stopped_by_signal; /* SIGTERM or SIGUSR1: stopped after a step and a snapshot */
} pn_train_result;

typedef struct pn_train_hooks {
    int collect_losses;    /* fill result->losses */
    /* Called on every rank after training with its stage's parameters. */
    int (*on_params)(void *ctx, const pn_params *params);
    void *ctx;
} pn_train_hooks;

/* Trains g as cfg says over the ranks of comm; result and hooks may be NULL.
 * A failure during setup is agreed on by all ranks: the lowest failing rank returns
 * its error, the others PN_ERR_PEER. A failure during a step returns on the rank
 * where it happened (its message names the rank and stage); its peers may be left
 * waiting, so the program must then abort the job. */
int pn_train(const pn_graph *g, const pn_train_config *cfg, MPI_Comm comm,
             const pn_train_hooks *hooks, pn_train_result *result);

#endif
