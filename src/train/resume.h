/* What a resumed run takes from its snapshot before it is set up: the seed and the
 * global batch of the snapshot's run (they fix the data order and what the step
 * counters mean), after checking that nothing the user gave contradicts them and
 * that the model is the one that wrote the snapshot. Layout settings (ranks, stages,
 * micro-batches, schedule, a layer's "stage") and the length and pace of the run
 * (epochs, steps, optimizer, data files) are free to change. */
#ifndef PN_RESUME_H
#define PN_RESUME_H

#include <stddef.h>

#include "mpi/comm.h"
#include "net/graph.h"
#include "train/train_config.h"

/* Collective, for cfg->resume. Finds the snapshot (*path, cap bytes; "" when
 * --resume auto finds none yet: the run starts fresh with cfg as it is) and makes
 * cfg->seed and cfg->batch the snapshot's. A --seed or --batch given on the command
 * line (cfg->seed_given, batch_given) with another value, or a model g whose inputs,
 * layers or train.seed/train.batch differ from the snapshot's model text, is an
 * error naming the snapshot, the setting and both values; with
 * cfg->resume_override it is taken instead, and rank 0 warns once for each.
 * *snapshot_batch is the global batch the snapshot's run had (0: not recorded, or
 * no snapshot): its data position counts batches of that size. */
int pn_resume_settings(pn_comm *c, const pn_graph *g, pn_train_config *cfg, char *path,
                       size_t cap, long *snapshot_batch);

/* Rank 0's part of it, without MPI (fuzz/fuzz_snapshot.c calls it too): reads the
 * header of the snapshot at path, checks it against g and cfg as above, and gives
 * the seed and global batch the resume takes. */
int pn_resume_check(const char *path, const pn_graph *g, const pn_train_config *cfg,
                    uint64_t *seed, long *batch);

#endif
