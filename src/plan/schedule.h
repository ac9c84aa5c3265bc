/* pn_schedule: the order in which each pipeline stage runs the forward and backward
 * passes of a step's M micro-batches (DESIGN.md section 2, step 6). A schedule is
 * built by a pure function of (kind, stages P, virtual stages V, micro-batches M) as
 * one action list per stage; the stage runtime executes its list, receiving before a
 * forward or a backward what it needs from its neighbours. A checker simulates all
 * stages' lists together and rejects any that could deadlock.
 *   gpipe: every forward, then every backward (in micro-batch order).
 *   1f1b:  stage s runs min(P - s, M) warm-up forwards, then alternates one backward
 *          and one forward, then the remaining backwards (cool-down); it never holds
 *          the activations of more than P - s micro-batches.
 *   interleaved (virtual stages, as in Megatron-LM): the model is cut into P x V
 *          chunks and chunk c runs on stage c mod P, so each stage holds V chunks
 *          (its virtual stages v = 0 .. V-1 are the model's chunks v P + s) and a
 *          micro-batch goes round the pipe V times. Each stage walks the M x V
 *          (chunk, micro-batch) pairs in groups of P micro-batches: the forwards of
 *          micro-batches kP .. kP+P-1 through its chunk 0, then through chunk 1, ...,
 *          then the next group; the backwards likewise with the chunks in reverse
 *          order. Stage s runs min(2 (P - s - 1) + (V - 1) P, M V) forwards first
 *          (warm-up), then alternates one forward and one backward, then the
 *          remaining backwards. A stage is busy again after 1/V of a stage's work,
 *          so the bubble shrinks V times, at the price of V times as many messages.
 *          Needs P >= 2, V >= 2 and M a multiple of P. */
#ifndef PN_SCHEDULE_H
#define PN_SCHEDULE_H

#include "base/choices.h"

typedef enum pn_schedule_kind {
    PN_SCHEDULE_GPIPE = 0,
    PN_SCHEDULE_1F1B = 1,
    PN_SCHEDULE_INTERLEAVED = 2
} pn_schedule_kind;

typedef enum pn_pass_kind { PN_PASS_FORWARD = 0, PN_PASS_BACKWARD = 1 } pn_pass_kind;

typedef struct pn_action {
    pn_pass_kind pass;
    int micro; /* micro-batch, 0 .. M-1 */
    int chunk; /* the stage's virtual stage v, 0 .. V-1 (the model's chunk v P + stage) */
} pn_action;

typedef struct pn_schedule {
    pn_schedule_kind kind;
    int stages, micro;
    int virtual_stages;  /* V: chunks per stage; 1 (or 0) but for interleaved */
    int *count;          /* [stages] actions of each stage (2 * micro * V) */
    pn_action **actions; /* [stages][count[s]] */
} pn_schedule;

/* The one table of the schedules' names (--schedule, train.schedule), in
 * pn_schedule_kind's order. */
extern const pn_choices pn_schedule_kinds;

/* A name of pn_schedule_kinds -> kind; -1 for anything else. */
int pn_schedule_kind_from_name(const char *name);
/* kind -> its name ("?" outside the enum). */
const char *pn_schedule_kind_name(pn_schedule_kind kind);

/* Builds the action lists of gpipe or 1f1b (stages >= 1, micro >= 1); the same as
 * pn_schedule_build_virtual with one virtual stage, which interleaved refuses. */
int pn_schedule_build(pn_schedule **out, pn_schedule_kind kind, int stages, int micro);

/* The same with V virtual stages: V must be 1 for gpipe and 1f1b; interleaved needs
 * stages >= 2, V >= 2 and micro a multiple of stages (errors say which). */
int pn_schedule_build_virtual(pn_schedule **out, pn_schedule_kind kind, int stages,
                              int virtual_stages, int micro);

/* Why (kind, P, V, M) cannot be built, as pn_schedule_build_virtual would refuse it
 * (recorded, PN_ERR_INVALID), or PN_OK: for callers that check a layout early. */
int pn_schedule_check_layout(pn_schedule_kind kind, int stages, int virtual_stages, int micro);
/* Frees each actions[s], actions, count and s (all from malloc); NULL is ignored. */
void pn_schedule_free(pn_schedule *s);

/* Simulates every stage's list together over the model's chunks (chunk c = v P + s
 * for virtual stage v of stage s; c = s without virtual stages): forward (c, m) needs
 * forward (c-1, m) done; backward (c, m) needs forward (c, m) and backward (c+1, m)
 * done. Fails with a message naming the stuck stages and actions when no stage can
 * move before all are done, or when a (chunk, micro-batch) lacks its forward or its
 * backward or has two. */
int pn_schedule_check(const pn_schedule *s);

/* Most micro-batches whose forward is done and backward is not, at stage s (a
 * micro-batch in two of its chunks counts twice); a negative status when the lists
 * are malformed or stage is out of range. */
int pn_schedule_peak_in_flight(const pn_schedule *s, int stage);

/* The same for one virtual stage (chunk 0 .. V-1) of stage s: the networks it needs. */
int pn_schedule_peak_in_flight_chunk(const pn_schedule *s, int stage, int chunk);

/* Idle fraction of the pipeline for equal chunks, a backward costing twice a forward:
 * 1 - busy time / (stages * makespan), from simulating the lists with those costs.
 * For gpipe and 1f1b this is (P - 1) / (M + P - 1); for interleaved (P - 1) /
 * (V M + P - 1) (pn_schedule_bubble_formula). Negative when pn_schedule_check fails. */
double pn_schedule_bubble(const pn_schedule *s);

/* The analytic figure above for (kind, P, V, M), without building anything. */
double pn_schedule_bubble_formula(pn_schedule_kind kind, int stages, int virtual_stages,
                                  int micro);

#endif
