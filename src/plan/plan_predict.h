/* The plan's prediction from measured layer times (plan_measure.h): per stage, the
 * forward and backward time of one micro-batch, its link transfers, its optimizer
 * update and its memory; for the step, the schedule's action lists run with those
 * times (schedule_time.h: each pass its stage's time, each message the link's, each
 * stage's update after its last pass; ranks that outnumber the cores share them,
 * slowed beyond their count by what the sharing probe measured), plus the ring
 * all-reduce of the slowest stage's gradients over the link when D > 1; the bubble
 * (the idle share of the lists with a core per rank) and samples per second, and
 * beside them the textbook (M + P - 1) slots of the slowest stage. The table of
 * `pipenet plan --measure` and the JSON of `--json` are printed here too. */
#ifndef PN_PLAN_PREDICT_H
#define PN_PLAN_PREDICT_H

#include <jansson.h>
#include <stdio.h>

#include "plan/plan.h"
#include "plan/plan_measure.h"
#include "plan/schedule.h"

typedef struct pn_stage_prediction {
    double forward_s, backward_s; /* one micro-batch */
    double link_s;                /* its forward sends and the gradients back, one micro-batch */
    double optimizer_s;           /* one update of its parameters */
    double allreduce_s;           /* the replicas' sum of its gradients (D > 1) */
    double param_bytes, grad_bytes, slot_bytes, activation_bytes; /* on each of its ranks */
} pn_stage_prediction;

typedef struct pn_plan_prediction {
    int stages, replicas, micro, micro_batch;
    pn_stage_prediction *stage;   /* [stages] */
    int slowest;                  /* the stage with the largest forward + backward */
    double slot_s;                /* its forward + backward */
    double pipeline_s;            /* the schedule's lists run with the stages' passes, links
                                   * and updates, sharing the cores (schedule_time.h) */
    double formula_slots;         /* M + P - 1; interleaved M + (P - 1) / V */
    double formula_s;             /* formula_slots x slot_s */
    double link_s;                /* all stages' links, one micro-batch */
    double optimizer_s;           /* the slowest stage's update */
    double allreduce_s;           /* the slowest stage's replica sum, after the pipeline */
    bool oversubscribed;          /* ranks x threads > cores: ranks take turns */
    double slowdown;              /* a rank's time with all ranks at once / alone */
    bool slowdown_measured;       /* by the sharing probe (else ranks x threads / cores) */
    double contention;            /* slowdown / max(1, ranks x threads / cores): beyond
                                   * taking turns, what running at once costs */
    double step_s, samples_per_s;
    double bubble;                /* the lists' idle share with a core per rank, no updates */
    int ranks, threads, cores;
    double scale;                 /* this micro-batch / the measured one */
} pn_plan_prediction;

/* Predicts the step of plan p under schedule s for D = replicas with micro_batch
 * samples per micro-batch, slots optimizer slots per parameter, threads BLAS threads
 * per rank on cores cores: the schedule's lists run with the measured times (each
 * stage's update at its end), then the replicas' gradient sums. When the ranks'
 * threads outnumber the cores, at most cores / threads ranks run at full speed and
 * more share them, each slower by what the sharing probe measured beyond the count
 * (else by the count alone). Times measured for another micro-batch are scaled by
 * the ratio of the micro-batches. */
int pn_plan_predict(pn_plan_prediction *out, const pn_plan *p, const pn_graph *g,
                    const pn_schedule *s, const pn_plan_times *t, int replicas,
                    int micro_batch, int slots, int threads, int cores);

/* Under --shard-optimizer: each rank's slot memory as the sharded optimizer keeps
 * it, the dense parameters' slots divided by the replicas (row-sparse ones whole). */
void pn_plan_predict_shard_slots(pn_plan_prediction *pr, const pn_plan *p, const pn_graph *g,
                                 int slots);
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
