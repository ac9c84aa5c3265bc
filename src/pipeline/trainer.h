/* pn_train: Paddle's Trainer for one process. Builds the network, its parameter
 * arena and optimizer, streams shuffled batches from the dataset file, runs
 * forward, backward and the update each step, evaluates after every epoch, and
 * reports progress and metrics. */
#ifndef PN_TRAINER_H
#define PN_TRAINER_H

#include "pipeline/graph.h"
#include "pipeline/train_config.h"

typedef struct pn_train_result {
    long steps;            /* global step count at the end */
    double last_loss;      /* training loss of the last step */
    double eval_loss;      /* last evaluation (NaN when there was none) */
    double eval_accuracy;  /* fraction in [0, 1] */
    double seconds;        /* wall time of the training steps */
    double samples_per_s;  /* training throughput over the run */
} pn_train_result;

/* Trains g as cfg says; result may be NULL. */
int pn_train(const pn_graph *g, const pn_train_config *cfg, pn_train_result *result);

#endif
