/* pn_train: Paddle's Trainer over ParallelNeuralNetwork. The ranks of a job form D
 * replicas of a P-stage pipeline (mpi/comm.h). Each rank runs the stage runtime of
 * its stage (pipeline/stage.h): the layers placed there (plan/plan.h), its
 * replica's slice of every global batch, its schedule's passes (plan/schedule.h)
 * exchanging Arguments with the other stages, its gradients summed over the
 * replicas; then it updates its own parameters. Loss and accuracy reduce to every
 * rank; rank 0 reports progress and metrics and writes snapshots. One process is
 * the case P = D = 1. */
#ifndef PN_TRAINER_H
#define PN_TRAINER_H

#include "layers/params.h"
#include "mpi/job.h"
#include "net/graph.h"
#include "train/train_config.h"

typedef struct pn_train_result {
    long steps;            /* global step count at the end */
    double last_loss;      /* training loss of the last step */
    double eval_loss;      /* last evaluation (NaN when there was none) */
    double eval_accuracy;  /* fraction in [0, 1] for a classification loss, else NaN */
    double eval_rmse;      /* root mean squared error for an mse loss, else NaN */
    double eval_auc;       /* area under the ROC curve for a binary loss (layers/auc.h),
                              over the whole evaluation set; else NaN */
    double seconds;        /* wall time of the training steps */
    double samples_per_s;  /* training throughput over the run */
    double *losses;        /* [steps] when collect_losses was set; caller frees */
    unsigned long long param_hash; /* of every parameter, by name, in graph order */
    int failed_together;   /* the failure is known to every rank (set-up, a snapshot): no
                              abort needed */
    int stopped_by_signal; /* SIGTERM or SIGUSR1: stopped before the last step, after a
                              snapshot when there was something new to save */
    int stopped_unsaved;   /* so stopped with no snapshot directory: nothing of the run
                              is saved */
    char snapshot[PN_PATH_MAX + 32]; /* rank 0: the snapshot that holds the parameters
                                        the run ended with ("" when none does) */
} pn_train_result;

typedef struct pn_train_hooks {
    int collect_losses;    /* fill result->losses */
    /* Called on every rank after training with its stage's parameters. */
    int (*on_params)(void *ctx, const pn_params *params);
    void *ctx;
} pn_train_hooks;

/* Trains g as cfg says over the ranks of job; result and hooks may be NULL.
 * A failure during setup is agreed on by all ranks: the lowest failing rank returns
 * its error, the others PN_ERR_PEER. A failure during a step returns on the rank
 * where it happened (its message names the rank and stage); its peers may be left
 * waiting, so the program must then abort the job. A wait that outlasts
 * cfg->stall_timeout_s (a stalled peer: mpi/comm.h, pn_comm_watch) returns
 * PN_ERR_STALL on one rank, whose message names the ranks that did not answer,
 * and leaves its memory allocated: the program must abort the job at once. */
int pn_train(const pn_graph *g, const pn_train_config *cfg, pn_job *job,
             const pn_train_hooks *hooks, pn_train_result *result);

#endif
