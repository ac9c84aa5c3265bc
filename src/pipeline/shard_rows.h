/* Tables sharded by rows across a stage's replicas (Angel's parameter server done with
 * MPI collectives, as DLRM and TorchRec shard theirs): replica r of D owns the rows
 * id with id mod D = r, at local row id / D. Rows go round-robin rather than in
 * contiguous ranges because hot ids are small ones (Zipf ranks, hashed or not), so
 * ranges would put the hot rows, and the traffic, on replica 0.
 *  - pull (a forward of a layer over a sharded table, pn_row_puller): the batch's
 *    distinct ids go to their owners, each owner answers with its rows; in training
 *    the stage posts it passes ahead (pn_shard_rows_ahead_*, stage_ahead.c) and the
 *    forward takes the rows;
 *  - push (posted when the step's passes end, waited for once the dense gradients
 *    are summed, so it moves meanwhile): the row gradients go to their owners, one
 *    entry per (micro-batch, distinct id) as the micro-batches sealed them; an owner
 *    receives them by source replica in replica order, which is the global
 *    micro-batch order, so one merge sums each row's entries in the order the
 *    unsharded run does, and updates its own rows.
 * Both are all-to-all exchanges among the stage's replicas (pn_comm_owner_*), of
 * distinct ids, never of every occurrence. */
#ifndef PN_SHARD_ROWS_H
#define PN_SHARD_ROWS_H

#include "layers/layer.h"
#include "mpi/comm.h"

typedef struct pn_shard_rows pn_shard_rows;

/* The exchanges of one stage over comm's replica group. */
int pn_shard_rows_create(pn_shard_rows **out, pn_comm *comm);
void pn_shard_rows_free(pn_shard_rows *x);

/* The puller layers of this stage pull through (pn_pass.puller). */
const pn_row_puller *pn_shard_rows_puller(pn_shard_rows *x);

/* A pull ahead of the forward that takes it, so that it moves while the stage
 * computes (pipeline/stage_ahead.c says when): its three exchanges posted in three
 * calls, at seams between passes, in entry e (0 .. PN_OWNER_AHEAD_SLOTS-1):
 *  - _ask groups ids[0..n) (the distinct rows of table param the forward will pull)
 *    by owner and posts the counts;
 *  - _send waits for the counts and posts the ids;
 *  - _answer waits for the ids the others ask this owner for, gathers its rows from
 *    arena's table (unchanged until the step's update) and posts them.
 * Every replica makes the same calls in the same order. step, micro: for the trace. */
int pn_shard_rows_ahead_ask(pn_shard_rows *x, int e, int param, const int *ids, int n,
                            long step, int micro);
int pn_shard_rows_ahead_send(pn_shard_rows *x, int e);
int pn_shard_rows_ahead_answer(pn_shard_rows *x, const pn_params *arena, int e);

/* The next count pulls of the puller take entries first, first + 1, ... (answered):
 * they wait for the rows and check that the forward asks for the ids asked ahead.
 * _take_done ends it, an error where a pull was left untaken. */
void pn_shard_rows_take(pn_shard_rows *x, int first, int count);
int pn_shard_rows_take_done(pn_shard_rows *x);

/* Moves the exchanges in flight (pn_comm_owner_progress): a stage's seams call it. */
int pn_shard_rows_progress(pn_shard_rows *x);

/* Starts sending row-sparse gradient rg of a sharded table to its rows' owners, in
 * slot (0 .. PN_OWNER_SLOTS-1, one push a slot): the step's other work (the dense
 * gradients' sums) runs while it moves. rg must not change until the finish. */
int pn_shard_rows_push_start(pn_shard_rows *x, int slot, pn_row_grad *rg);

/* Waits for every push and pull ahead still in flight, their results dropped: what
 * an error path does before the buffers MPI writes into are freed. */
void pn_shard_rows_abandon(pn_shard_rows *x);

/* Waits for slot's push and leaves in rg, merged, this replica's rows' sums with local
 * ids (id / D), for the optimizer's update of its rows. */
int pn_shard_rows_push_finish(pn_shard_rows *x, int slot, pn_row_grad *rg);

#endif
