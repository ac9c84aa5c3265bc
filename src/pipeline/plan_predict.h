/* The plan's prediction from measured layer times (plan_measure.h): per stage, the
 * forward and backward time of one micro-batch, its link transfers, its optimizer
 * update and its memory; for the step, the schedule's time
 *   (M + P - 1) x the slowest stage's forward + backward (interleaved: M + (P - 1) / V)
 *   + the link transfers on the fill and drain path (each cut once forward, once back)
 *   + the slowest stage's update (and, with D > 1, its ring all-reduce over the link),
 * the bubble (the share of the P stages' time that is idle: 1 - M x the mean stage
 * time / that pipeline time) and samples per second. When the ranks' BLAS threads
 * outnumber the cores, a step also takes at least all ranks' work divided by the
 * cores; the prediction is the larger of the two, and says which. The table of
 * `pipenet plan --measure` and the JSON of `--json` are printed here too. */
#ifndef PN_PLAN_PREDICT_H
#define PN_PLAN_PREDICT_H

#include <jansson.h>
#include <stdio.h>

#include "pipeline/plan.h"
#include "pipeline/plan_measure.h"
#include "pipeline/schedule.h"

typedef struct pn_stage_prediction {
    double forward_s, backward_s; /* one micro-batch */
    double link_s;                /* its forward sends and the gradients back, one micro-batch */
    double optimizer_s;           /* one update of its parameters (all-reduce included) */
    double param_bytes, grad_bytes, slot_bytes, activation_bytes; /* on each of its ranks */
} pn_stage_prediction;

typedef struct pn_plan_prediction {
    int stages, replicas, micro, micro_batch;
    pn_stage_prediction *stage;   /* [stages] */
    int slowest;                  /* the stage with the largest forward + backward */
    double slot_s;                /* its forward + backward */
    double pipeline_s;            /* (M + P - 1) x slot_s; interleaved (M + (P - 1) / V) */
    double link_s, optimizer_s;   /* on the step's critical path */
    double cpu_bound_s;           /* all ranks' work / cores (0 when they fit the cores) */
    double step_s, bubble, samples_per_s;
    int ranks, threads, cores;
    double scale;                 /* this micro-batch / the measured one */
} pn_plan_prediction;

/* Predicts the step of plan p under schedule s for D = replicas with micro_batch
 * samples per micro-batch, slots optimizer slots per parameter, threads BLAS threads
 * per rank on cores cores. Times measured for another micro-batch are scaled by the
 * ratio of the micro-batches. */
int pn_plan_predict(pn_plan_prediction *out, const pn_plan *p, const pn_graph *g,
                    const pn_schedule *s, const pn_plan_times *t, int replicas,
                    int micro_batch, int slots, int threads, int cores);
void pn_plan_prediction_release(pn_plan_prediction *pr);

/* The per-stage table of predicted times and memory, then the step's line. */
void pn_plan_print_prediction(const pn_plan_prediction *pr, const pn_plan *p,
                              const pn_graph *g, const pn_plan_times *t, FILE *out);

/* The plan as JSON: layout, per stage its layers, parameters, FLOPs, bytes and (with
 * pr) times and memory; with pr the step's prediction and the measurement's
 * settings. NULL when out of memory. */
json_t *pn_plan_json(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                     int micro_batch, const pn_plan_prediction *pr, const pn_plan_times *t);

#endif
