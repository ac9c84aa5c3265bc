/* How long a step's pipeline takes: the schedule's action lists (schedule.h) run with
 * measured times, every stage a rank, the ranks sharing the cores. The plan's
 * prediction (plan_predict.h) is built on it. */
#ifndef PN_SCHEDULE_TIME_H
#define PN_SCHEDULE_TIME_H

#include "plan/schedule.h"

typedef struct pn_chunk_times {
    const double *forward_s;  /* [P V] seconds of chunk c's forward of one micro-batch
                               * (chunk c = v P + s), alone on a core */
    const double *backward_s; /* [P V] its backward */
    const double *send_s;     /* [P V] chunk c's value to chunk c + 1, or the gradient
                               * back; NULL: messages are free */
    const double *update_s;   /* [P] each stage's update after its last pass; NULL: none */
    double slots;             /* ranks that run at once at full speed (cores / threads
                               * per rank); 0: any number */
    int copies;               /* replicas: pipelines running alike beside each other,
                               * sharing the slots (0 or 1: this one alone) */
    double contention;        /* with all P x copies ranks running, each runs this much
                               * slower than the slots alone say (>= 1: shared caches,
                               * memory, switches; measured); with k of them running,
                               * 1 + (contention - 1) (k - 1) / (P copies - 1) */
} pn_chunk_times;

/* The time from the first pass to the last update when every stage runs its list in
 * order, a forward of (c, m) once forward (c - 1, m) and its message are done, a
 * backward once forward (c, m) and backward (c + 1, m) and its message are; sends
 * never block the sender, and the running ranks share the slots equally (processor
 * sharing), each also slowed by the contention. Fails as pn_schedule_check does on lists that cannot finish. */
int pn_schedule_makespan(const pn_schedule *s, const pn_chunk_times *ct, double *makespan);

#endif
