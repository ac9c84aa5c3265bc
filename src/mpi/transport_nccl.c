/* The NCCL transport of the communication seam (comm_impl.h): device memory moved
 * by NCCL, picked by pn_comm_use_transport where the build has NCCL and every rank
 * a GPU of its own.
 *
 * NEVER RUN: compiled against NCCL 2.28 and CUDA 13 on a machine without a GPU and
 * read against the NCCL documentation and nccl-tests; no record says that any of it
 * has run. docs/running.md (Transports) lists the runs that check it.
 *
 *  - communicators: one per pipe (tied gradients) and one per replica group
 *    (buckets, gathers), each from an ncclUniqueId made on the group's rank 0 and
 *    broadcast over MPI; and one of two ranks per stage link (sender 0, receiver 1,
 *    its id sent over MPI on the link's tag), with a stream of its own, so that a
 *    link's payloads match in the order they were sent whatever the other links do,
 *    and no link's kernel waits behind another's. Every communicator is made
 *    non-blocking (config.blocking = 0), so a wait can give up on it; set-up connects
 *    every link (one float, all links in one group); the end finalizes every
 *    communicator at once, under one bound (pn_nccl_end_comms).
 *  - stage links: the header and lengths still travel over MPI on the link's tag and
 *    are checked on every message (link_header.h), with the link's message count,
 *    which must follow the payloads' order; the payload goes by ncclSend/ncclRecv
 *    on the link's stream from (into) device buffers of the link, ordered after the
 *    compute stream with events.
 *  - buckets: ncclAllReduce in place on the transport's communication stream (or,
 *    for a sharded optimizer's pieces, ncclReduce to the piece's replica), after
 *    an event recorded on the compute stream, so the sum overlaps the rest of
 *    backward; buckets_wait makes the compute stream wait for the communication
 *    stream and polls it.
 *  - the replica gather (--deterministic): ncclAllGather; tied gradients: ncclSend and
 *    ncclRecv in one group on the pipe's communicator.
 * The stage links are in transport_nccl_link.c, what both files share in
 * nccl_impl.h.
 * Every wait polls (cudaEventQuery, ncclCommGetAsyncError) through pn_comm_poll, the
 * stall watchdog of MPI's waits; when it gives up, or an agreement says a rank
 * failed, every communicator of the transport is aborted (ncclCommAbort). */
#include "config.h"

#include "mpi/nccl_impl.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "math/cuda/cuda_exports.h"
#include "mpi/mpi_check.h"

/* How long the end of a run waits for its communicators to finish what they hold
 * before it aborts them instead (one bound for all). */
static const double FINALIZE_S = 30.0;
/* The bound of the set-up's waits on NCCL (communicators made) when no stall bound is
 * set yet: a rank that never joins ends the job, not hangs it. */
static const double SETUP_STALL_S = 300.0;

int pn_nccl_fail(ncclResult_t r, ncclComm_t comm, const char *call, const char *file, int line)
{
    const char *last = ncclGetLastError(comm);
    return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: %s%s%s", file, line, call,
                        ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}

cudaStream_t pn_nccl_compute_stream(int *rc)
{
    void *s = NULL;
    *rc = pn_cuda_compute_stream(&s);
    return (cudaStream_t)s;
}

/* --- waits ------------------------------------------------------------------------------ */

/* What a wait polls: events (or none) and the communicators whose errors end it;
 * NULL entries are skipped. */
typedef struct nccl_poll {
    pn_comm *c;
    const cudaEvent_t *events; /* none: only the communicators' states (set-up, a call) */
    int n_events;
    const ncclComm_t *comms;
    int n_comms;
} nccl_poll;

static int test(void *ctx, bool *done)
{
    nccl_poll *p = ctx;
    bool busy = false;
    for (int i = 0; i < p->n_comms; i++) {
        if (!p->comms[i]) continue;
        ncclResult_t st;
        ncclResult_t r = ncclCommGetAsyncError(p->comms[i], &st);
        if (r != ncclSuccess)
            return pn_nccl_fail(r, p->comms[i], "ncclCommGetAsyncError", __FILE__, __LINE__);
        if (st == ncclInProgress) busy = true;
        else if (st != ncclSuccess) {
            int rc = pn_nccl_fail(st, p->comms[i], "a communicator of the NCCL transport",
                                  __FILE__, __LINE__);
            pn_nccl_abort_all(p->c);
            return rc;
        }
    }
    for (int i = 0; !busy && i < p->n_events; i++) {
        if (!p->events[i]) continue;
        cudaError_t e = cudaEventQuery(p->events[i]);
        if (e == cudaErrorNotReady) { /* kept as the last error, else the next launch's */
            pn_cuda_forget(e);
            busy = true;
        } else {
            CUDA_CHECK(e);
        }
    }
    *done = !busy;
    return PN_OK;
}

static void give_up(void *ctx) { pn_nccl_abort_all(((nccl_poll *)ctx)->c); }

/* Polls events and comms until done, watched; during set-up, where no stall bound is
 * set yet, under SETUP_STALL_S. */
int pn_nccl_await_all(pn_comm *c, const cudaEvent_t *events, int n_events,
                      const ncclComm_t *comms, int n_comms, const pn_wait_for *what)
{
    nccl_poll p = {c, events, n_events, comms, n_comms};
    bool setup = !pn_nccl_state(c)->set_up && c->stall_s == 0;
    char doing[sizeof c->doing], bound[sizeof c->bound];
    memcpy(doing, c->doing, sizeof doing);
    memcpy(bound, c->bound, sizeof bound);
    if (setup) pn_comm_watch(c, SETUP_STALL_S, "the set-up of the NCCL transport");
    int rc = pn_comm_poll(c, &(pn_poll){test, give_up, &p}, what);
    if (setup) { /* no bound again, and the work as it was */
        c->stall_s = 0;
        memcpy(c->doing, doing, sizeof doing);
        memcpy(c->bound, bound, sizeof bound);
    }
    return rc;
}

int pn_nccl_await(pn_comm *c, cudaEvent_t event, const ncclComm_t *comms, int n_comms,
                  const pn_wait_for *what)
{
    return pn_nccl_await_all(c, &event, event ? 1 : 0, comms, n_comms, what);
}

/* A call on a non-blocking communicator may return ncclInProgress: NCCL then wants
 * its state polled to ncclSuccess before the next call on it. */
int pn_nccl_called(pn_comm *c, ncclResult_t r, ncclComm_t comm, const char *call, int line,
                  const pn_wait_for *what)
{
    if (r == ncclSuccess) return PN_OK;
    if (r != ncclInProgress) return pn_nccl_fail(r, comm, call, __FILE__, line);
    return pn_nccl_await(c, NULL, &comm, 1, what);
}


/* Event e, recorded on from, made a precondition of the work queued on to next. */
int pn_nccl_order(cudaEvent_t e, cudaStream_t from, cudaStream_t to)
{
    CUDA_CHECK(cudaEventRecord(e, from));
    CUDA_CHECK(cudaStreamWaitEvent(to, e, 0));
    return PN_OK;
}

/* --- communicators ------------------------------------------------------------------------ */

/* Starts making a communicator of n ranks, this one rank, from id: non-blocking, so
 * the call returns before the others have joined. */
int pn_nccl_init_comm(ncclComm_t *out, int n, ncclUniqueId id, int rank)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(out, n, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return pn_nccl_fail(r, NULL, "ncclCommInitRankConfig", __FILE__, __LINE__);
    return PN_OK;
}

/* The id from rank 0 of the MPI communicator group, then this rank's part. */
static int group_comm(pn_comm *c, MPI_Comm group, ncclComm_t *out, const pn_wait_for *what)
{
    int n, rank;
    PN_MPI_CHECK(MPI_Comm_size(group, &n));
    PN_MPI_CHECK(MPI_Comm_rank(group, &rank));
    if (n < 2) return PN_OK;
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    ncclResult_t r = rank == 0 ? ncclGetUniqueId(&id) : ncclSuccess;
    int ok = r == ncclSuccess, all_ok; /* rank 0's failure, for everyone */
    MPI_Request req;
    PN_MPI_CHECK(MPI_Iallreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, group, &req));
    PN_TRY(pn_comm_wait(c, 1, &req, MPI_STATUSES_IGNORE, what));
    if (!all_ok)
        return rank == 0 ? pn_nccl_fail(r, NULL, "ncclGetUniqueId", __FILE__, __LINE__)
                         : pn_error_set(PN_ERR_PEER, "rank 0 of a group could not make an NCCL id");
    PN_MPI_CHECK(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, group, &req));
    PN_TRY(pn_comm_wait(c, 1, &req, MPI_STATUSES_IGNORE, what));
    return pn_nccl_init_comm(out, n, id, rank);
}

static const pn_wait_for SETUP = {"the set-up of NCCL communicators among", NULL, -1,
                                  PN_SCOPE_WORLD};

static int make_streams(nccl_state *st)
{
    CUDA_CHECK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&st->computed, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&st->moved, cudaEventDisableTiming));
    return PN_OK;
}

/* Whether any rank failed to start its part (rc): then every rank aborts what it
 * started and returns its own rc (the caller's agreement names the rank that
 * failed), instead of waiting for a communicator that a rank will never join. */
int pn_nccl_started_everywhere(pn_comm *c, int rc)
{
    bool any = false;
    int polled = pn_comm_any(c, rc < 0, &any);
    if (polled < 0 && rc == PN_OK) rc = polled;
    if (any || rc < 0) pn_nccl_abort_all(c);
    return rc;
}

/* Every rank takes part in both groups' collectives whatever failed before, then
 * all learn whether one failed before anyone waits for the communicators. */
static int start(pn_comm *c)
{
    nccl_state *st = calloc(1, sizeof *st);
    c->transport_state = st;
    int rc = st ? make_streams(st) : pn_error_set(PN_ERR_NOMEM, "out of memory");
    ncclComm_t pipe = NULL, replicas = NULL;
    int rc_pipe = group_comm(c, c->pipe, &pipe, &SETUP);
    int rc_replicas = group_comm(c, c->replicas, &replicas, &SETUP);
    if (st) st->pipe = pipe, st->replicas = replicas;
    else if (pipe || replicas) { /* no state to hold them */
        if (pipe) ncclCommAbort(pipe);
        if (replicas) ncclCommAbort(replicas);
    }
    if (rc == PN_OK) rc = rc_pipe < 0 ? rc_pipe : rc_replicas;
    PN_TRY(pn_nccl_started_everywhere(c, rc));
    if (st->aborted) return PN_OK; /* another rank failed: its error comes in the agreement */
    ncclComm_t both[2] = {st->pipe, st->replicas};
    return pn_nccl_await(c, NULL, both, 2, &SETUP);
}

/* Ends communicators: all finalized first, then polled together, so that the end of
 * a run with many links waits FINALIZE_S at most, not FINALIZE_S per link. */
void pn_nccl_end_comms(ncclComm_t *comms, int n, bool aborted)
{
    for (int i = 0; i < n; i++) {
        if (!comms[i]) continue;
        ncclResult_t r = aborted ? ncclSuccess : ncclCommFinalize(comms[i]);
        if (aborted || (r != ncclSuccess && r != ncclInProgress)) {
            ncclCommAbort(comms[i]);
            comms[i] = NULL;
        }
    }
    for (double end = pn_now() + FINALIZE_S;;) {
        bool busy = false;
        for (int i = 0; i < n; i++) {
            if (!comms[i]) continue;
            ncclResult_t st = ncclInProgress;
            if (ncclCommGetAsyncError(comms[i], &st) != ncclSuccess) st = ncclInternalError;
            if (st == ncclInProgress) {
                busy = true;
                continue;
            }
            if (st == ncclSuccess) ncclCommDestroy(comms[i]); /* finalized */
            else ncclCommAbort(comms[i]);
            comms[i] = NULL;
        }
        if (!busy || pn_now() >= end) break;
        nanosleep(&(struct timespec){0, 100000}, NULL); /* 0.1 ms: no CPU burnt on it */
    }
    for (int i = 0; i < n; i++) /* still finalizing after FINALIZE_S */
        if (comms[i]) {
            ncclCommAbort(comms[i]);
            comms[i] = NULL;
        }
}

/* Links are freed before the comm that releases the transport (pn_stage_free, then
 * pn_comm_free): a link hands its communicator over instead of ending it alone. */
void pn_nccl_retire_comm(pn_comm *c, ncclComm_t *comm)
{
    nccl_state *st = pn_nccl_state(c);
    if (!*comm) return;
    if (st && !st->aborted && st->n_ending == st->ending_cap) {
        int cap = st->ending_cap ? 2 * st->ending_cap : 8;
        ncclComm_t *more = realloc(st->ending, (size_t)cap * sizeof *more);
        if (more) st->ending = more, st->ending_cap = cap;
    }
    if (st && !st->aborted && st->n_ending < st->ending_cap) {
        st->ending[st->n_ending++] = *comm;
        *comm = NULL;
        return;
    }
    pn_nccl_end_comms(comm, 1, !st || st->aborted); /* no state, no memory, or aborted */
}

/* After a failure: every communicator aborted (the kernels waiting on a peer return),
 * once. What used them is not used again: the job ends. */
void pn_nccl_abort_all(pn_comm *c)
{
    nccl_state *st = pn_nccl_state(c);
    if (!st || st->aborted) return;
    st->aborted = true;
    for (int i = 0; i < st->n_links; i++)
        if (st->links[i]->comm) {
            ncclCommAbort(st->links[i]->comm);
            st->links[i]->comm = NULL;
        }
    for (int i = 0; i < st->n_ending; i++) ncclCommAbort(st->ending[i]);
    st->n_ending = 0;
    ncclComm_t *comms[2] = {&st->pipe, &st->replicas};
    for (int i = 0; i < 2; i++)
        if (*comms[i]) {
            ncclCommAbort(*comms[i]);
            *comms[i] = NULL;
        }
}

static void release(pn_comm *c)
{
    nccl_state *st = pn_nccl_state(c);
    /* the freed links' communicators and the groups', finalized together: one bound */
    ncclComm_t *all = realloc(st->ending, (size_t)(st->n_ending + 2) * sizeof *all);
    if (all) {
        st->ending = all;
        all[st->n_ending++] = st->pipe;
        all[st->n_ending++] = st->replicas;
        st->pipe = st->replicas = NULL;
    }
    pn_nccl_end_comms(st->ending, st->n_ending, st->aborted);
    ncclComm_t groups[2] = {st->pipe, st->replicas}; /* still here: no memory for all */
    pn_nccl_end_comms(groups, 2, st->aborted);
    free(st->ending);
    /* best effort: a failure here must not become a later launch's error */
    if (st->stream) pn_cuda_forget(cudaStreamDestroy(st->stream));
    if (st->computed) pn_cuda_forget(cudaEventDestroy(st->computed));
    if (st->moved) pn_cuda_forget(cudaEventDestroy(st->moved));
    free(st->links);
    free(st);
    c->transport_state = NULL;
}

/* --- the replicas' gradients and the tied gradients -------------------------------------- */

/* NCCL reads and writes the memory itself: dense, on this rank's GPU. */
static int need_device(const pn_matrix *m, const char *what)
{
    if (m->device.kind == PN_DEVICE_CUDA && pn_matrix_dense(*m)) return PN_OK;
    return pn_error_set(PN_ERR_UNSUPPORTED, "the NCCL transport moves %s in dense GPU memory "
                        "only (this one is %s)", what,
                        m->device.kind == PN_DEVICE_CUDA ? "a strided view" : "on the host");
}

static int need_comm(ncclComm_t comm, const char *what)
{
    return comm ? PN_OK : pn_error_set(PN_ERR_INTERNAL, "%s without its NCCL communicator "
                                                        "(one rank, or aborted)", what);
}

/* The transport's stream after the compute stream's work so far. */
static int after_compute(nccl_state *st)
{
    int rc;
    cudaStream_t compute = pn_nccl_compute_stream(&rc);
    PN_TRY(rc);
    return pn_nccl_order(st->computed, compute, st->stream);
}

/* The compute stream after the transport's stream, and this rank after both: polled. */
static int finish(pn_comm *c, ncclComm_t comm, const pn_wait_for *what)
{
    nccl_state *st = pn_nccl_state(c);
    int rc;
    cudaStream_t compute = pn_nccl_compute_stream(&rc);
    PN_TRY(rc);
    PN_TRY(pn_nccl_order(st->moved, st->stream, compute));
    return pn_nccl_await(c, st->moved, &comm, 1, what);
}

static const pn_wait_for SUM = {"the gradient sum over", NULL, -1, PN_SCOPE_REPLICAS};

static int bucket_start(pn_comm *c, pn_matrix *m)
{
    nccl_state *st = pn_nccl_state(c);
    PN_TRY(need_device(m, "gradient buckets"));
    PN_TRY(need_comm(st->replicas, "a gradient bucket"));
    PN_TRY(after_compute(st)); /* the bucket's gradients are complete */
    NCCL_CALL(c, ncclAllReduce(m->data, m->data, pn_matrix_count(*m), ncclFloat, ncclSum,
                               st->replicas, st->stream),
              st->replicas, &SUM);
    st->buckets_pending = true;
    return PN_OK;
}

/* In place on the root; the others' m is only read (NCCL ignores their receive
 * buffer). */
static int bucket_reduce_start(pn_comm *c, pn_matrix *m, int root)
{
    nccl_state *st = pn_nccl_state(c);
    PN_TRY(need_device(m, "gradient buckets"));
    PN_TRY(need_comm(st->replicas, "a gradient bucket"));
    if (root < 0 || root >= c->grid.replicas)
        return pn_error_set(PN_ERR_INTERNAL, "a bucket reduced to replica %d of %d", root,
                            c->grid.replicas);
    PN_TRY(after_compute(st));
    NCCL_CALL(c, ncclReduce(m->data, m->data, pn_matrix_count(*m), ncclFloat, ncclSum, root,
                            st->replicas, st->stream),
              st->replicas, &SUM);
    st->buckets_pending = true;
    return PN_OK;
}

static int buckets_wait(pn_comm *c)
{
    nccl_state *st = pn_nccl_state(c);
    if (!st->buckets_pending) return PN_OK;
    st->buckets_pending = false;
    return finish(c, st->replicas, &SUM);
}

static const pn_wait_for GATHER = {"the gradient gather over", NULL, -1, PN_SCOPE_REPLICAS};

static int gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    nccl_state *st = pn_nccl_state(c);
    PN_TRY(need_device(mine, "replica gathers"));
    PN_TRY(need_device(all, "replica gathers"));
    PN_TRY(need_comm(st->replicas, "a replica gather"));
    PN_TRY(after_compute(st));
    NCCL_CALL(c, ncclAllGather(mine->data, all->data, (size_t)mine->cols, ncclFloat,
                               st->replicas, st->stream),
              st->replicas, &GATHER);
    return finish(c, st->replicas, &GATHER);
}

/* One group: row q of send to replica q, row q of recv from it; this replica's own
 * row copied on the compute stream first (before the group waits for it). */
static int exchange_replicas(pn_comm *c, const pn_matrix *send, pn_matrix *recv)
{
    nccl_state *st = pn_nccl_state(c);
    PN_TRY(need_device(send, "replica exchanges"));
    PN_TRY(need_device(recv, "replica exchanges"));
    PN_TRY(need_comm(st->replicas, "a replica exchange"));
    int me = c->grid.replica;
    pn_matrix own = pn_matrix_rows(*send, me, 1), into = pn_matrix_rows(*recv, me, 1);
    PN_TRY(pn_copy(&own, &into));
    PN_TRY(after_compute(st));
    size_t n = (size_t)send->cols;
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return pn_nccl_fail(r, st->replicas, "ncclGroupStart", __FILE__, __LINE__);
    for (int q = 0; r == ncclSuccess && q < c->grid.replicas; q++) {
        if (q == me) continue;
        r = ncclSend(pn_matrix_rows(*send, q, 1).data, n, ncclFloat, q, st->replicas, st->stream);
        if (r == ncclSuccess)
            r = ncclRecv(pn_matrix_rows(*recv, q, 1).data, n, ncclFloat, q, st->replicas,
                         st->stream);
    }
    ncclResult_t end = ncclGroupEnd(); /* always: the group must close */
    if (r != ncclSuccess)
        return pn_nccl_fail(r, st->replicas, "ncclSend/ncclRecv", __FILE__, __LINE__);
    PN_TRY(pn_nccl_called(c, end, st->replicas, "ncclGroupEnd", __LINE__, &GATHER));
    return finish(c, st->replicas, &GATHER);
}

static const pn_wait_for TIES = {"the tied gradient exchange over", NULL, -1, PN_SCOPE_PIPE};

/* One group of sends and receives on the pipe's communicator: NCCL matches each pair
 * of stages' messages in the order listed, as MPI does. */
static int pipe_exchange(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                         int n_recv, pn_matrix *recv, const int *from)
{
    nccl_state *st = pn_nccl_state(c);
    if (n_send < 0 || n_recv < 0)
        return pn_error_set(PN_ERR_INTERNAL, "pipe exchange of %d and %d", n_send, n_recv);
    if (n_send + n_recv == 0) return PN_OK;
    for (int i = 0; i < n_send + n_recv; i++)
        PN_TRY(need_device(i < n_send ? &send[i] : &recv[i - n_send], "tied gradients"));
    PN_TRY(need_comm(st->pipe, "the tied gradient exchange"));
    PN_TRY(after_compute(st));
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return pn_nccl_fail(r, st->pipe, "ncclGroupStart", __FILE__, __LINE__);
    for (int i = 0; r == ncclSuccess && i < n_send + n_recv; i++) {
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        r = i < n_send ? ncclSend(m->data, pn_matrix_count(*m), ncclFloat, to[i], st->pipe,
                                  st->stream)
                       : ncclRecv(m->data, pn_matrix_count(*m), ncclFloat, from[i - n_send],
                                  st->pipe, st->stream);
    }
    ncclResult_t end = ncclGroupEnd(); /* always: the group must close */
    if (r != ncclSuccess) return pn_nccl_fail(r, st->pipe, "ncclSend/ncclRecv", __FILE__, __LINE__);
    PN_TRY(pn_nccl_called(c, end, st->pipe, "ncclGroupEnd", __LINE__, &TIES));
    return finish(c, st->pipe, &TIES);
}

const pn_transport pn_transport_nccl = {
    .link_create = pn_nccl_link_create,
    .link_free = pn_nccl_link_free,
    .link_post_recv = pn_nccl_link_post_recv,
    .link_recv = pn_nccl_link_recv,
    .link_lengths = pn_nccl_link_lengths,
    .link_send = pn_nccl_link_send,
    .link_wait_sends = pn_nccl_link_wait_sends,
    .link_cancel = pn_nccl_link_cancel,
    .bucket_start = bucket_start,
    .buckets_wait = buckets_wait,
    .bucket_reduce_start = bucket_reduce_start,
    .gather_replicas = gather_replicas,
    .exchange_replicas = exchange_replicas,
    .pipe_exchange = pipe_exchange,
    .release = release,
    .start = start,
    .links_ready = pn_nccl_links_ready,
    .abort = pn_nccl_abort_all,
};

