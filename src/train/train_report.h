/* The lines a training run prints about itself (train_report.c). */
#ifndef PN_TRAIN_REPORT_H
#define PN_TRAIN_REPORT_H

#include "train/trainer_setup.h"

/* Rank 0: the run, its layout, its precision and the optimizer's slots, once. */
void pn_train_announce(trainer *t);

/* One line of what each stage's activations took (the first replica's; the others
 * are alike): arguments of its networks, inputs kept by --recompute, layer scratch.
 * Collective. */
int pn_train_report_memory(trainer *t);

/* What the ranks sent each other per step over the steps since the start: the stage
 * links' payloads of the steps (pn_comm_link_bytes_sent, less what the evaluations
 * sent: what bf16 halves) and the row-sparse
 * exchanges' (pn_comm_row_bytes_sent: what sharding a table trades its memory for;
 * evaluations' pulls are in the sum too, spread over the steps). Collective. */
int pn_train_report_traffic(trainer *t, long steps);

#endif
