/* pn_comm: the communication seam. Everything pipenet sends between ranks goes
 * through these calls, and every MPI call of the project lives under src/mpi:
 *  - stage links: one direction of one Argument between two stages of a replica,
 *    a checked header in front of every message;
 *  - the replicas' gradient sum, in buckets started while backward goes on, and the
 *    gather of every replica's sum for the deterministic tree;
 *  - the exchange of tied parameters' gradients between stages of a replica;
 *  - the owner exchange of tables sharded by rows over a stage's replicas;
 *  - scalar sums and XORs over the world, a replica's pipe or a stage's replicas;
 *  - a gather of the first replica's stages' indexes to rank 0 (snapshots), of
 *    every rank's part one rank at a time (traces), and a broadcast from rank 0;
 *  - status agreement, so every rank takes the same exit path after a failure;
 *  - a watchdog over every wait, so a stalled rank ends the job with a message.
 * The data plane (links, buckets, replica gathers, tied gradients) goes through a
 * transport table (comm_impl.h): MPI (host memory, device memory staged through
 * it) or, where the build has NCCL and every rank a GPU of its own, NCCL (device
 * memory; never run so far). Matrices passed in live on the stage's device. */
#ifndef PN_COMM_H
#define PN_COMM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/choices.h"
#include "math/device.h"
#include "math/matrix.h"
#include "mpi/grid.h"
#include "mpi/job.h"

typedef struct pn_comm pn_comm;
typedef struct pn_link pn_link;

/* Who takes part in a reduction. */
typedef enum pn_comm_scope {
    PN_SCOPE_WORLD = 0, /* every rank of the job */
    PN_SCOPE_PIPE,      /* the stages of this rank's replica */
    PN_SCOPE_REPLICAS   /* the replicas of this rank's stage */
} pn_comm_scope;

/* Lays job's ranks out as size / stages replicas of a stages-deep pipeline and
 * makes the communicators. Errors (the same on every rank, no communication
 * needed): stages < 1 or a size that stages does not divide. */
int pn_comm_create(pn_comm **out, pn_job *job, int stages);
/* Frees c after its links (pn_link_free them first): the NCCL transport ends the
 * links' communicators here, together with its own. */
void pn_comm_free(pn_comm *c);

/* This rank's place in the layout. */
const pn_grid *pn_comm_grid(const pn_comm *c);

/* --- the transport --------------------------------------------------------------------- */

/* What a run asks for (--transport, "transport" in the model's train section), in
 * the order of pn_transport_requests, the one table of their names and meanings. */
typedef enum pn_transport_request {
    PN_TRANSPORT_REQUEST_MPI = 0,
    PN_TRANSPORT_REQUEST_NCCL,
    PN_TRANSPORT_REQUEST_AUTO /* NCCL where it can run (pn_transport_choose), else MPI */
} pn_transport_request;

extern const pn_choices pn_transport_requests;

/* A name of pn_transport_requests -> the request; -1 for another name. */
int pn_transport_request_from_name(const char *name);
const char *pn_transport_request_name(pn_transport_request r);

/* Whether this build has the NCCL transport: its CUDA module was built with NCCL
 * (math/cuda_module.h). Opens nothing. */
bool pn_transport_have_nccl(void);

/* Where a rank trains: its node (any number the ranks of one node share), its GPU's
 * index in this process (-1 on the cpu; for messages), which GPU that is on the
 * node (pn_device_identity: ranks that see one GPU under different indices share it,
 * ranks that each see only "GPU 0" under per-rank masks do not; -1 unknown), and
 * whether it has the NCCL transport (a GPU rank: its CUDA module carries it; a cpu
 * rank: its build's module would). */
typedef struct pn_rank_gpu {
    int node, gpu, id, nccl;
} pn_rank_gpu;

/* The decision, from every rank's place (ranks[0 .. size), laid out as size / stages
 * replicas of stages), into *chosen (a transport, never auto): nccl when r is nccl and
 * NCCL can run, else mpi; auto takes mpi until the NCCL transport has run on GPUs
 * (docs/running.md, "Transports"). NCCL can run when
 * every rank has it, every rank is on a GPU, and no two ranks of one communicator
 * (a replica's pipe, a stage's replicas) use one GPU of a node (same node and id;
 * the index when an id is unknown), which NCCL does not support. nccl where it
 * cannot run is an error (PN_ERR_UNSUPPORTED) that says which condition fails; the
 * same on every rank, as every rank decides from the same list. Pure. */
int pn_transport_choose(pn_transport_request r, const pn_rank_gpu *ranks, int size, int stages,
                        pn_transport_request *chosen);

/* Gathers every rank's place (its device is dev, already selected) over the job,
 * decides (pn_transport_choose) and, for NCCL, makes its communicators. Collective,
 * before the first link is made; an error on one rank is the caller's to agree on.
 * Only a GPU rank that asks for nccl or auto looks at the CUDA module (open already:
 * its device came from it). */
int pn_comm_use_transport(pn_comm *c, pn_transport_request r, pn_device dev);

/* The name (pn_transport_requests) of the transport the data plane takes. */
const char *pn_comm_transport_name(const pn_comm *c);

/* Collective, after every link of the run is made (pn_stage_create) and before the
 * first is used: the transport connects them (NCCL: a communicator per link). */
int pn_comm_links_ready(pn_comm *c);

/* --- status ---------------------------------------------------------------------------- */

/* Every rank passes its status; all get the same answer: 0 when every rank passed 0,
 * otherwise the status of the lowest failing rank on that rank and PN_ERR_PEER on
 * the others (whose message then says which rank failed). */
int pn_comm_agree(pn_comm *c, int rc);

/* Rank 0's status, for everyone: rc on rank 0, PN_ERR_PEER elsewhere when it failed
 * (what names the work in the peers' message), else each rank's own rc. */
int pn_comm_agree_root(pn_comm *c, int rc, const char *what);

/* --- the stall watchdog -------------------------------------------------------------------- */

/* From now on, a wait of this rank in the seam that lasts longer than seconds (0:
 * never, the default: waits are MPI's own) asks every rank whether it still answers;
 * unless it completes meanwhile, it fails with PN_ERR_STALL, normally on one rank
 * only: the lowest that timed out (the others wait up to 5 s for its abort, then
 * report too), its message naming what it waited for and the ranks that did not
 * answer (each with its host), after the work fmt describes ("step 12"). Time in
 * which this process did not run (a suspended job) does not count. The caller then ends the job
 * (pn_job_abort) without freeing what the abandoned wait may still write into. */
void pn_comm_watch(pn_comm *c, double seconds, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same with a bound that is not --stall-timeout itself: bound names it in the
 * message ("no progress for 40 s (<bound>) waiting for ..."). */
void pn_comm_watch_as(pn_comm *c, double seconds, const char *bound, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* How long a watched wait polls without pause before it naps between polls, in
 * seconds: a rank that needs the cores to itself waits this long for the others'
 * waits to turn to naps. */
double pn_comm_spin_seconds(void);

/* --- scalars ----------------------------------------------------------------------------- */

/* v[0 .. n) summed (in place) over the ranks of scope. */
int pn_comm_sum(pn_comm *c, pn_comm_scope scope, double *v, int n);

/* v[0 .. n) combined with XOR over the ranks of scope. */
int pn_comm_xor(pn_comm *c, pn_comm_scope scope, uint64_t *v, int n);

/* *any = whether mine is true on any rank of the job. */
int pn_comm_any(pn_comm *c, bool mine, bool *any);

/* *max = the largest of the ranks' values of mine. */
int pn_comm_max(pn_comm *c, int mine, int *max);

/* Copies bytes[0 .. n) of rank 0 to every rank. */
int pn_comm_broadcast(pn_comm *c, void *bytes, size_t n);

/* --- stage links ------------------------------------------------------------------------- */

typedef enum pn_link_kind { PN_LINK_VALUE = 0, PN_LINK_GRAD = 1 } pn_link_kind;

/* One direction of one Argument between this stage and a neighbour of its replica:
 * the forward value of a graph node from the stage that computes it to a stage that
 * consumes it, or that consumer's gradient back (to the previous consumer, where the
 * node has several: the stage runtime chains them, stage_setup.c). */
typedef struct pn_link_spec {
    pn_link_kind kind;
    bool sends;        /* this side sends (else receives) */
    int node;          /* graph node whose value or gradient travels */
    const char *name;  /* the node's name, for messages (must outlive the link) */
    int peer;          /* the other side's stage (this stage's own under interleaving,
                          when a layer feeds a later chunk of the same stage) */
    int cols, max_rows;
    int slots;         /* micro-batches of a step: one buffer each */
    int seq;           /* > 0 (values only): each message also carries its samples'
                        * lengths (rows / seq of them, each in [1, seq]), which the
                        * receiving stage's layers need for padded sequences */
    int chunk;         /* the consuming chunk of the model (virtual stages; else 0);
                          of a gradient link, the reader that sends it */
    int virtual_stages;/* V (0 counts as 1): a node reaches up to V chunks of one stage,
                          each over its own link, kept apart by tag and header */
    int slot_rows;     /* rows of a training micro-batch, at most max_rows (0: max_rows);
                          max_rows is evaluation's larger batch, which travels alone */
    bool bf16;         /* the payload travels as bfloat16 (math/precision.h): half the
                          bytes, and exact for the values a bf16 network makes, which
                          are bf16 already; others are rounded on the way */
} pn_link_spec;

/* Creates a link with a buffer per micro-batch, so that receives are posted ahead and
 * a send never waits for a buffer. The NCCL transport's send buffers (device memory)
 * hold slot_rows x cols each, and one more max_rows x cols for a larger message; the
 * MPI transport's (host memory, one kind for both directions) hold max_rows each: a
 * receive is posted before its message's size is known. */
int pn_link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out);
void pn_link_free(pn_link *l);

/* What kind of link l is, whether it sends, and its node (for the stage runtime). */
const pn_link_spec *pn_link_spec_of(const pn_link *l);

/* Posts the receive of micro-batch slot micro (in the order the peer sends). */
int pn_link_post_recv(pn_link *l, int micro);

/* Waits for micro-batch micro of step, checks its header (node, kind, consuming
 * chunk, step, micro-batch, into's shape, the number of lengths): a mismatch is an
 * error naming both sides, and so is a length outside [1, seq]. Then copies the
 * payload into into, or adds it (add) to what into holds. */
int pn_link_recv(pn_link *l, long step, int micro, pn_matrix *into, bool add);

/* The lengths the message received in slot micro carried ([rows / seq], host
 * memory), valid until that slot's receive is posted again (the next step); NULL
 * when the link carries none or nothing was received there since. */
const int *pn_link_lengths(const pn_link *l, int micro);

/* Starts sending m (rows x cols, rows <= max_rows) as micro-batch micro of step,
 * with its samples' lengths ([rows / seq], host memory) when the link carries them
 * (spec.seq > 0), else lengths must be NULL; both are copied before the call
 * returns. */
int pn_link_send(pn_link *l, long step, int micro, const pn_matrix *m, const int *lengths);

/* Waits until every started send of the link has completed. */
int pn_link_wait_sends(pn_link *l);

/* Cancels receives still pending (after a failure or at the end of a run). */
void pn_link_cancel(pn_link *l);

/* --- the replicas' gradients ------------------------------------------------------------- */

/* Starts summing m in place over this stage's replicas (a bucket of the gradient
 * arena); m must stay untouched until pn_comm_buckets_wait. */
int pn_comm_bucket_start(pn_comm *c, pn_matrix *m);

/* Starts summing m over this stage's replicas into replica root's m only (the
 * others' m is left as it was): a sharded optimizer's piece, where the transport can
 * (pn_comm_can_reduce_buckets); waited for by pn_comm_buckets_wait. */
bool pn_comm_can_reduce_buckets(const pn_comm *c);
int pn_comm_bucket_reduce_start(pn_comm *c, pn_matrix *m, int root);

/* Waits for every bucket started since the last wait. */
int pn_comm_buckets_wait(pn_comm *c);

/* all[r, :] = mine of replica r, for every replica of this stage (all is replicas x
 * mine's columns, mine is 1 row): what the deterministic sum adds in a fixed tree.
 * mine may be all's own row (this replica's: in place, both transports). */
int pn_comm_gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all);

/* recv[q, :] = send[r, :] of replica q, where r is this replica (send and recv are
 * replicas x n, distinct): an all-to-all over this stage's replicas, each replica's
 * row r of every other's (a sharded optimizer's pieces under --deterministic). */
int pn_comm_exchange_replicas(pn_comm *c, const pn_matrix *send, pn_matrix *recv);

/* Row-sparse gradients over the stage's replicas (layers/row_grad.h), in host memory
 * (the sparse layers run on the host), through MPI collectives on the control plane:
 * counts[r] = replica r's n; then every replica's entries (ids and rows of
 * rows->cols) concatenated in replica order into all_ids and all_rows (their rows:
 * the sum of counts). */
int pn_comm_replica_counts(pn_comm *c, int n, int *counts);
int pn_comm_gather_rows(pn_comm *c, const int *counts, const int *ids, const pn_matrix *rows,
                        int *all_ids, pn_matrix *all_rows);

/* Bytes this rank has handed MPI for other ranks in the row-sparse exchanges since
 * pn_comm_create: the gathers of row gradients (its entries, ids and rows, once per
 * other replica) and their counts, and the owner exchange (what it sends to the other
 * replicas, its own share excluded) and its counts. The payload the algorithm must
 * deliver, not what a given MPI's collective puts on the wire; a figure to compare
 * unsharded with sharded tables by (bench/bench_shard.sh). */
double pn_comm_row_bytes_sent(const pn_comm *c);

/* Payload bytes this rank's stage links have sent since pn_comm_create (values and
 * gradients, headers and lengths not counted): what --precision bf16 halves. */
double pn_comm_link_bytes_sent(const pn_comm *c);

/* --- tables sharded by rows over the stage's replicas (the owner exchange) ----------------- */

/* Row id of a sharded table lives on replica id mod D, as its local row id / D. A
 * forward pass sends the unique ids a micro-batch touches to their owners and gets
 * the rows back (a pull: ids, then rows the other way); backward sends (id, gradient
 * row) partials to the owners (a push). Both are all-to-alls within the replica
 * group, as parameter servers pull and push, done the MPI way. Collective over the
 * stage's replicas; host memory over MPI whatever the transport (rows on a GPU are
 * staged through host buffers by the caller, as for pn_comm_gather_rows): an NCCL
 * version belongs behind these same calls later. */

/* recv_counts[r] = what replica r's send_counts[me] says it sends this rank; each
 * side passes one count per replica. The receiver learns how much arrives, so it
 * can size its buffers before pn_comm_owner_exchange. */
int pn_comm_owner_counts(pn_comm *c, const int *send_counts, int *recv_counts);

/* Sends send_counts[r] entries to each replica r, from ids and rows (rows->cols wide)
 * grouped by destination (replica 0's block first), and receives recv_counts[r] from
 * each into recv_ids and recv_rows grouped by source in replica order: a fixed order,
 * so that an owner adds the partials of one row in the same order on every run.
 * Either of ids/recv_ids or rows/recv_rows may be absent (both NULL) so one call
 * serves a pull's request (ids), its reply (rows; the counts swapped) and a push (ids
 * and rows); what travels must be the same on every replica, so a rank with no ids
 * to send or receive still passes non-NULL pointers when ids travel. Rows are dense
 * host matrices with the sums of the counts as rows; more than INT_MAX entries or
 * floats on either side is refused (MPI counts are ints). */
int pn_comm_owner_exchange(pn_comm *c, const int *send_counts, const int *ids,
                           const pn_matrix *rows, const int *recv_counts, int *recv_ids,
                           pn_matrix *recv_rows);

/* The same in two halves, so that other work runs while it moves (a push while the
 * dense gradients are summed, a pull ahead of its forward): _start posts it in slot
 * (0 .. PN_OWNER_ALL-1, one exchange a slot), _finish waits for it. Every buffer must
 * stay as it is until _finish returns; every replica starts its exchanges in one
 * order. Slots: PN_OWNER_SLOTS for the pushes, then PN_OWNER_AHEAD_SLOTS for the
 * pulls posted ahead of their forward (pipeline/stage_ahead.c). */
enum { PN_OWNER_SLOTS = 8, PN_OWNER_AHEAD_SLOTS = 24,
       PN_OWNER_ALL = PN_OWNER_SLOTS + PN_OWNER_AHEAD_SLOTS };
int pn_comm_owner_exchange_start(pn_comm *c, int slot, const int *send_counts, const int *ids,
                                 const pn_matrix *rows, const int *recv_counts, int *recv_ids,
                                 pn_matrix *recv_rows);
int pn_comm_owner_exchange_finish(pn_comm *c, int slot);

/* pn_comm_owner_counts in two halves in slot (finished by pn_comm_owner_exchange_finish):
 * recv_counts must stay until then. */
int pn_comm_owner_counts_start(pn_comm *c, int slot, const int *send_counts, int *recv_counts);

/* Tests every owner exchange in flight, which moves them: Open MPI advances a
 * nonblocking collective only inside MPI calls (no progress thread), so a stage calls
 * this between its passes. Completes nothing the caller must know of: the finish
 * still waits (at once). */
int pn_comm_owner_progress(pn_comm *c);

/* --- tied parameters' gradients between the stages of a replica ------------------------- */

/* Sends each send[i] to stage to[i] and receives each recv[j] (its shape set by the
 * caller) from stage from[j] of this replica, then waits for all of them. Two stages
 * list the messages between them in the same order (MPI matches one sender's
 * messages in order), and no link of a step is in flight. pipeline/ties.c swaps the
 * gradients of a table tied across stages with it. */
int pn_comm_pipe_exchange(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                          int n_recv, pn_matrix *recv, const int *from);

/* --- stages' indexes to rank 0 (snapshots) ---------------------------- */

typedef enum pn_comm_type { PN_COMM_BYTES = 0, PN_COMM_FLOATS = 1 } pn_comm_type;

/* The first replica's stages 1 .. P-1 each send count elements of type at mine to
 * rank 0 (stage 0 of that replica), which receives them back to back, stage by
 * stage, in *all (malloc'd, its to free; its own part is not copied) and learns
 * every stage's count in counts[stage] (stages entries; NULL elsewhere). Ranks of
 * other replicas take no part and return at once. */
int pn_comm_gather_stages(pn_comm *c, const void *mine, size_t count, pn_comm_type type,
                          void **all, size_t *counts);

/* --- the link probe (`pipenet plan --measure`) -------------------------------------------- */

/* Ranks 0 and 1 of the job bounce a message of bytes (at most INT_MAX) back and
 * forth reps times; on rank 0, *seconds = the median one-way time (half a round
 * trip). Other ranks, and a job of one rank, take no part: *seconds = 0 at once. */
int pn_comm_pingpong(pn_comm *c, size_t bytes, int reps, double *seconds);

/* --- traces (train/tracing.c) ------------------------------------------------------------ */

/* Compares every rank's monotonic clock with rank 0's (round trips, the quickest of
 * a few per rank): *offset = rank 0's clock minus this rank's, and *origin = rank
 * 0's clock now, the same on every rank. Collective over the job. */
int pn_comm_clock_offset(pn_comm *c, double *offset, double *origin);

/* Receives one rank's bytes on rank 0; returns a status. */
typedef int (*pn_comm_take_fn)(void *ctx, int rank, const void *bytes, size_t n);

/* Every rank sends n bytes at mine to rank 0, which hands them to take rank by
 * rank in order (its own first), holding one rank's bytes at a time. After a take
 * fails, rank 0 still receives the rest and returns that failure; the other ranks
 * return once theirs are sent. Collective over the job. */
int pn_comm_gather_each(pn_comm *c, const void *mine, size_t n, pn_comm_take_fn take, void *ctx);

#endif
