/* pn_schedule: the order in which each pipeline stage runs the forward and backward
 * passes of a step's M micro-batches (DESIGN.md section 2, step 6). A schedule is
 * built by a pure function of (kind, stages P, micro-batches M) as one action list
 * per stage; the stage runtime executes its list, receiving before a forward or a
 * backward what it needs from its neighbours. A checker simulates all stages'
 * lists together and rejects any that could deadlock.
 *   gpipe: every forward, then every backward (in micro-batch order).
 *   1f1b:  stage s runs min(P - s, M) warm-up forwards, then alternates one backward
 *          and one forward, then the remaining backwards (cool-down); it never holds
 *          the activations of more than P - s micro-batches. */
#ifndef PN_SCHEDULE_H
#define PN_SCHEDULE_H

typedef enum pn_schedule_kind { PN_SCHEDULE_GPIPE = 0, PN_SCHEDULE_1F1B = 1 } pn_schedule_kind;

typedef enum pn_pass_kind { PN_PASS_FORWARD = 0, PN_PASS_BACKWARD = 1 } pn_pass_kind;

typedef struct pn_action {
    pn_pass_kind pass;
    int micro; /* micro-batch, 0 .. M-1 */
} pn_action;

typedef struct pn_schedule {
    pn_schedule_kind kind;
    int stages, micro;
    int *count;          /* [stages] actions of each stage (2 * micro) */
    pn_action **actions; /* [stages][count[s]] */
} pn_schedule;

/* "gpipe" / "1f1b" -> kind; -1 for anything else. */
int pn_schedule_kind_from_name(const char *name);
/* kind -> "gpipe" / "1f1b" ("unknown" outside the enum). */
const char *pn_schedule_kind_name(pn_schedule_kind kind);

/* Builds the action lists (stages >= 1, micro >= 1). */
int pn_schedule_build(pn_schedule **out, pn_schedule_kind kind, int stages, int micro);
/* Frees each actions[s], actions, count and s (all from malloc); NULL is ignored. */
void pn_schedule_free(pn_schedule *s);

/* Simulates every stage's list together: forward (s, m) needs forward (s-1, m) done;
 * backward (s, m) needs forward (s, m) and backward (s+1, m) done. Fails with a
 * message naming the stuck stages and actions when no stage can move before all are
 * done, or when a (stage, micro-batch) lacks its forward or its backward or has two. */
int pn_schedule_check(const pn_schedule *s);

/* Most micro-batches whose forward is done and backward is not, at stage s; a
 * negative status when the lists are malformed or stage is out of range. */
int pn_schedule_peak_in_flight(const pn_schedule *s, int stage);

/* Idle fraction of the pipeline for equal stages, a backward costing twice a forward:
 * 1 - busy time / (stages * makespan), from simulating the lists with those costs.
 * For both kinds this is (P - 1) / (M + P - 1). Negative when pn_schedule_check fails. */
double pn_schedule_bubble(const pn_schedule *s);

#endif
