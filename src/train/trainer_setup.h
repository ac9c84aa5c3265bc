/* The trainer's state, shared by its two files: trainer_setup.c (layout, schedule,
 * the stage runtime, data, optimizer) and trainer.c (the loop). Private to them; the
 * public face is trainer.h. */
#ifndef PN_TRAINER_SETUP_H
#define PN_TRAINER_SETUP_H

#include <stdbool.h>

#include "io/reader.h"
#include "train/checkpoint.h"
#include "mpi/comm.h"
#include "train/fault.h"
#include "pipeline/global_sums.h"
#include "train/metrics.h"
#include "optim/optimizer.h"
#include "plan/plan.h"
#include "train/progress.h"
#include "plan/schedule.h"
#include "pipeline/stage.h"
#include "train/trainer.h"

enum { STEP_TIMES = 31 };

typedef struct trainer {
    const pn_graph *graph;
    pn_train_config cfg;                 /* the caller's, with a resume's seed and batch */
    const pn_train_hooks *hooks;
    pn_comm *comm;
    const pn_grid *grid;
    pn_plan *plan;
    pn_schedule *sched;
    int micro, micro_rows, replica_rows; /* M, samples per micro-batch, per replica */
    pn_stage *stage;
    pn_optimizer *opt;
    pn_optimizer_config opt_cfg;          /* with the run's length filled in */
    pn_global_sums *sums;
    pn_reader *train_data, *eval_data;
    pn_metrics *metrics;
    pn_progress progress;
    long total_steps;
    int threads;                         /* BLAS threads of this rank */
    int tokens;                          /* positions per sample: tokens/s of sequence models */
    pn_fault fault;
    pn_progress_mark start;              /* where the run starts (a resumed snapshot) */
    char resume_path[PN_PATH_MAX + 32];  /* the snapshot resumed from, "" for none */
    long resume_batch;                   /* the global batch of its run (0: not recorded) */
    char newest_path[PN_PATH_MAX + 32];  /* rank 0: the newest snapshot written or resumed */
    long newest_step;                    /* its step (-1: none) */
    double step_s[STEP_TIMES];           /* the last steps' times, for the stall bound */
    long timed;                          /* steps timed in this run */
    double snapshot_bytes;               /* one snapshot's, all parts (--snapshot-dir) */
    double longest_snapshot_s;           /* the longest snapshot this run has written */
    double eval_link_bytes;              /* stage links' bytes its evaluations sent */
    pn_snapshot_lock *snapshot_lock;     /* rank 0's, with --snapshot-dir */
    bool failed_together;                /* an agreed failure (a snapshot): no abort */
    bool tracing;                        /* --trace: every rank records its timeline */
    char *config;                        /* the model's JSON text, for snapshots */
    char devices[512];                   /* each rank's device, for the layout line */
} trainer;

/* Rank 0 of the job: the one that prints and writes metrics. */
static inline bool is_root(const trainer *t) { return t->grid->rank == 0; }

/* Builds everything a run needs, in an order that loses no work to a bad setting
 * (the snapshot directory is checked and locked before anything is built, and its
 * room for a snapshot before the data is read). */
int pn_trainer_setup(trainer *t, pn_job *job);

/* Frees what pn_trainer_setup built (any part may be missing) but the snapshot
 * directory's lock, which pn_train gives back itself (even when it frees nothing). */
void pn_trainer_teardown(trainer *t);

#endif
