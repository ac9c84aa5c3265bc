/* pn_train_config: how to train, from the model's "train" object with command-line
 * overrides applied on top (the CLI does that part). */
#ifndef PN_TRAIN_CONFIG_H
#define PN_TRAIN_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "math/device.h"
#include "math/precision.h"
#include "optim/optimizer.h"

enum { PN_PATH_MAX = 1024 };

typedef struct pn_train_config {
    char data[PN_PATH_MAX];    /* training set (dataset HDF5) */
    char eval[PN_PATH_MAX];    /* evaluation set, "" for none */
    long eval_every;           /* steps between evaluations (0: at the end of each epoch) */
    char metrics[PN_PATH_MAX]; /* JSON-lines metrics file, "" for none */
    char trace[PN_PATH_MAX];   /* Chrome trace-event timeline of every rank, "" for none */
    char layer_times[PN_PATH_MAX]; /* measured layer times the partitioner balances
                                      (plan/plan_measure.h), "" for FLOP estimates */
    int batch;                 /* global batch */
    int epochs;
    long steps;                /* > 0: stop when the global step count reaches it */
    uint64_t seed;
    int threads;               /* BLAS threads per process, 0: automatic */
    double log_every_s;        /* plain progress lines at most this often */
    long data_cache_mb;        /* hold a dataset file in memory up to this size (0: never) */
    int stages;                /* pipeline stages P (0: from the layers' "stage" attributes) */
    int micro_batches;         /* M per step and replica (0: automatic) */
    int schedule;              /* pn_schedule_kind */
    int virtual_stages;        /* V chunks per stage under the interleaved schedule (0: 2
                                  there, 1 elsewhere) */
    bool deterministic;        /* sum gradients in a fixed tree: bit-identical layouts */
    bool recompute;            /* keep stage inputs, run forwards again for backward */
    bool shard_optimizer;      /* each replica keeps 1/D of the optimizer slots (ZeRO 1) */
    bool share_memory;         /* the activation memory planner (default true) */
    int device_request;        /* pn_device_request (the default: cpu) */
    pn_device device;          /* where this rank's stage lives: set by the trainer from
                                  device_request and the rank's place on its node */
    int precision;             /* pn_precision (math/precision.h; the default: fp32) */
    int transport_request;     /* pn_transport_request (mpi/comm.h; the default: auto) */
    char snapshot_dir[PN_PATH_MAX]; /* "" for none */
    long snapshot_every;       /* steps between snapshots (0: only at the end and on signals) */
    int keep;                  /* snapshots kept in snapshot_dir */
    char resume[PN_PATH_MAX];  /* a snapshot file, "auto" (newest in snapshot_dir) or "" */
    bool seed_given, batch_given; /* set on the command line: a resume must not differ */
    bool resume_override;      /* resume even where seed, batch or model differ (warned) */
    double stall_timeout_s;    /* a wait in a step longer than this ends the job; 0: never,
                                  < 0: automatic (train/trainer.c: stall_bound) */
    pn_optimizer_config optimizer;
} pn_train_config;

/* Defaults: batch 64, 1 epoch, seed 1, sgd with lr 0.01, progress every 10 s,
 * datasets up to 1024 MiB cached in memory, 1f1b, the last 3 snapshots kept, the
 * automatic stall timeout. */
void pn_train_config_default(pn_train_config *cfg);

/* M when none is given: the largest divisor of a replica's samples up to 4 P (enough
 * micro-batches to keep the bubble near 20% without making them tiny). */
int pn_default_micro_batches(int replica_rows, int stages);

/* The same for the interleaved schedule, which sends micro-batches round in groups of
 * P: the largest multiple of P up to 4 P that divides a replica's samples (P when
 * none does; the layout check then says why). */
int pn_default_micro_batches_interleaved(int replica_rows, int stages);

/* V of cfg: virtual_stages, or when unset 2 under interleaved and 1 elsewhere. */
int pn_train_virtual_stages(const pn_train_config *cfg);

/* *v = pn_train_virtual_stages(cfg); PN_ERR_INVALID when V > 1 under a schedule
 * other than interleaved (train and plan refuse it alike). */
int pn_train_schedule_chunks(const pn_train_config *cfg, int *v);

/* The keys the model's "train" object may hold (NULL-terminated): the parser's list,
 * which its message for an unknown key names and docs/training.md's table must match. */
extern const char *const pn_train_keys[];

/* Reads the model's "train" object (may be NULL) over cfg; errors name file and field. */
int pn_train_config_from_json(const json_t *train, const char *file, pn_train_config *cfg);

#endif
