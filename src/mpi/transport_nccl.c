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
 *    non-blocking (config.blocking = 0), so a wait can give up on it.
 *  - stage links: the header and lengths still travel over MPI on the link's tag and
 *    are checked on every message (link_header.h), with the link's message count,
 *    which must follow the payloads' order; the payload goes by ncclSend/ncclRecv
 *    on the link's stream from (into) device buffers of the link, ordered after the
 *    compute stream with events.
 *  - buckets: ncclAllReduce in place on the transport's communication stream, after
 *    an event recorded on the compute stream, so the sum overlaps the rest of
 *    backward; buckets_wait makes the compute stream wait for the communication
 *    stream and polls it.
 *  - the replica gather (--deterministic): ncclAllGather; tied gradients: ncclSend and
 *    ncclRecv in one group on the pipe's communicator.
 * Every wait polls (cudaEventQuery, ncclCommGetAsyncError) through pn_comm_poll, the
 * stall watchdog of MPI's waits; when it gives up, or an agreement says a rank
 * failed, every communicator of the transport is aborted (ncclCommAbort). */
#include "config.h"

#include "mpi/comm_impl.h"

#include <cuda_runtime.h>
#include <nccl.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "math/ops.h"
#include "mpi/link_header.h"
#include "mpi/mpi_check.h"

int pn_cuda_compute_stream(void **out); /* math/cuda/cuda_backend.cu */

/* How long the end of a run waits for a communicator to finish what it holds before
 * it aborts it instead. */
static const double FINALIZE_S = 30.0;
/* The bound of the set-up's waits on NCCL (communicators made) when no stall bound is
 * set yet: a rank that never joins ends the job, not hangs it. */
static const double SETUP_STALL_S = 300.0;

#define CUDA_OK(call)                                                                         \
    do {                                                                                      \
        cudaError_t e_ = (call);                                                              \
        if (e_ != cudaSuccess)                                                                \
            return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: %s", __FILE__, __LINE__, #call,     \
                                cudaGetErrorString(e_));                                      \
    } while (0)

static int nccl_fail(ncclResult_t r, ncclComm_t comm, const char *call, int line)
{
    const char *last = ncclGetLastError(comm);
    return pn_error_set(PN_ERR_DEVICE, "%s:%d: %s: %s%s%s", __FILE__, line, call,
                        ncclGetErrorString(r), last && last[0] ? ": " : "", last ? last : "");
}

typedef struct nccl_link nccl_link;

typedef struct nccl_state {
    ncclComm_t pipe, replicas; /* NULL where the group is one rank */
    cudaStream_t stream;       /* buckets, gathers, tied gradients */
    cudaEvent_t computed;      /* recorded on the compute stream before the stream's work */
    cudaEvent_t moved;         /* recorded on the stream after it */
    bool buckets_pending;
    bool aborted;
    bool set_up;       /* links_ready has returned: the run's stall bound rules */
    nccl_link **links; /* every link of the comm, for links_ready and abort */
    int n_links, links_cap;
} nccl_state;

struct nccl_link {
    pn_link base;
    ncclComm_t comm;      /* the link's two ranks: sender 0, receiver 1 */
    ncclUniqueId id;      /* made by the sender, sent to the receiver */
    MPI_Request id_req;
    bool connected;
    cudaStream_t stream;
    char **msg;           /* [slots] header + lengths, host memory, over MPI */
    MPI_Request *req;     /* [slots] */
    const int **lengths;  /* [slots] received lengths, or NULL */
    pn_buffer *payload;   /* sender: [slots] a micro-batch each; receiver: [1] landing */
    cudaEvent_t *sent;    /* sender: [slots] the payload's send has completed */
    bool *in_flight;      /* sender: [slots] a send was started since the last wait */
    cudaEvent_t ordered;  /* compute -> link stream (sender), link -> compute (receiver) */
    cudaEvent_t consumed; /* receiver: the landing's copy into the destination is done */
    bool landing_used;
    uint32_t count;       /* messages sent, or received */
};

static nccl_state *state(pn_comm *c) { return c->transport_state; }

static cudaStream_t compute_stream(int *rc)
{
    void *s = NULL;
    *rc = pn_cuda_compute_stream(&s);
    return (cudaStream_t)s;
}

/* --- waits ------------------------------------------------------------------------------ */

/* What a wait polls: an event (or none) and the communicators whose errors end it. */
typedef struct nccl_poll {
    pn_comm *c;
    cudaEvent_t event; /* NULL: only the communicators' states (their set-up, a call) */
    ncclComm_t comms[8];
    int n_comms;
} nccl_poll;

static void abort_all(pn_comm *c);

static int test(void *ctx, bool *done)
{
    nccl_poll *p = ctx;
    bool busy = false;
    for (int i = 0; i < p->n_comms; i++) {
        ncclResult_t st;
        ncclResult_t r = ncclCommGetAsyncError(p->comms[i], &st);
        if (r != ncclSuccess) return nccl_fail(r, p->comms[i], "ncclCommGetAsyncError", __LINE__);
        if (st == ncclInProgress) busy = true;
        else if (st != ncclSuccess) {
            int rc = nccl_fail(st, p->comms[i], "a communicator of the NCCL transport", __LINE__);
            abort_all(p->c);
            return rc;
        }
    }
    if (p->event && !busy) {
        cudaError_t e = cudaEventQuery(p->event);
        if (e == cudaErrorNotReady) busy = true;
        else CUDA_OK(e);
    }
    *done = !busy;
    return PN_OK;
}

static void give_up(void *ctx) { abort_all(((nccl_poll *)ctx)->c); }

/* Polls event (NULL: the communicators' states only) and comms until done, watched;
 * during set-up, where no stall bound is set yet, under SETUP_STALL_S. */
static int await(pn_comm *c, cudaEvent_t event, const ncclComm_t *comms, int n_comms,
                 const pn_wait_for *what)
{
    nccl_poll p = {c, event, {0}, 0};
    for (int i = 0; i < n_comms && p.n_comms < 8; i++)
        if (comms[i]) p.comms[p.n_comms++] = comms[i];
    bool setup = !state(c)->set_up && c->stall_s == 0;
    char doing[sizeof c->doing];
    memcpy(doing, c->doing, sizeof doing);
    if (setup) pn_comm_watch(c, SETUP_STALL_S, "the set-up of the NCCL transport");
    int rc = pn_comm_poll(c, &(pn_poll){test, give_up, &p}, what);
    if (setup) { /* no bound again, and the work as it was */
        c->stall_s = 0;
        memcpy(c->doing, doing, sizeof doing);
    }
    return rc;
}

/* A call on a non-blocking communicator may return ncclInProgress: NCCL then wants
 * its state polled to ncclSuccess before the next call on it. */
static int called(pn_comm *c, ncclResult_t r, ncclComm_t comm, const char *call, int line,
                  const pn_wait_for *what)
{
    if (r == ncclSuccess) return PN_OK;
    if (r != ncclInProgress) return nccl_fail(r, comm, call, line);
    return await(c, NULL, &comm, 1, what);
}

#define NCCL_CALL(c, call, comm, what) PN_TRY(called((c), (call), (comm), #call, __LINE__, (what)))

/* Event e, recorded on from, made a precondition of the work queued on to next. */
static int order(cudaEvent_t e, cudaStream_t from, cudaStream_t to)
{
    CUDA_OK(cudaEventRecord(e, from));
    CUDA_OK(cudaStreamWaitEvent(to, e, 0));
    return PN_OK;
}

/* --- communicators ------------------------------------------------------------------------ */

/* Starts making a communicator of n ranks, this one rank, from id: non-blocking, so
 * the call returns before the others have joined. */
static int init_comm(ncclComm_t *out, int n, ncclUniqueId id, int rank)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t r = ncclCommInitRankConfig(out, n, id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress)
        return nccl_fail(r, NULL, "ncclCommInitRankConfig", __LINE__);
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
        return rank == 0 ? nccl_fail(r, NULL, "ncclGetUniqueId", __LINE__)
                         : pn_error_set(PN_ERR_PEER, "rank 0 of a group could not make an NCCL id");
    PN_MPI_CHECK(MPI_Ibcast(&id, (int)sizeof id, MPI_BYTE, 0, group, &req));
    PN_TRY(pn_comm_wait(c, 1, &req, MPI_STATUSES_IGNORE, what));
    return init_comm(out, n, id, rank);
}

static const pn_wait_for SETUP = {"the set-up of NCCL communicators among", NULL, -1,
                                  PN_SCOPE_WORLD};

static int make_streams(nccl_state *st)
{
    CUDA_OK(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking));
    CUDA_OK(cudaEventCreateWithFlags(&st->computed, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&st->moved, cudaEventDisableTiming));
    return PN_OK;
}

/* Whether any rank failed to start its part (rc): then every rank aborts what it
 * started and returns its own rc (the caller's agreement names the rank that
 * failed), instead of waiting for a communicator that a rank will never join. */
static int started_everywhere(pn_comm *c, int rc)
{
    bool any = false;
    int polled = pn_comm_any(c, rc < 0, &any);
    if (polled < 0 && rc == PN_OK) rc = polled;
    if (any || rc < 0) abort_all(c);
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
    PN_TRY(started_everywhere(c, rc));
    if (st->aborted) return PN_OK; /* another rank failed: its error comes in the agreement */
    ncclComm_t both[2] = {st->pipe, st->replicas};
    return await(c, NULL, both, 2, &SETUP);
}

/* Ends a communicator: what it holds finished within FINALIZE_S, else aborted. */
static void end_comm(ncclComm_t *comm, bool aborted)
{
    if (!*comm) return;
    if (!aborted && ncclCommFinalize(*comm) != ncclSuccess) {
        ncclResult_t st = ncclInProgress;
        for (double end = pn_now() + FINALIZE_S; st == ncclInProgress && pn_now() < end;)
            if (ncclCommGetAsyncError(*comm, &st) != ncclSuccess) break;
        aborted = st != ncclSuccess;
    }
    if (aborted) ncclCommAbort(*comm);
    else ncclCommDestroy(*comm);
    *comm = NULL;
}

/* After a failure: every communicator aborted (the kernels waiting on a peer return),
 * once. What used them is not used again: the job ends. */
static void abort_all(pn_comm *c)
{
    nccl_state *st = state(c);
    if (!st || st->aborted) return;
    st->aborted = true;
    for (int i = 0; i < st->n_links; i++)
        if (st->links[i]->comm) {
            ncclCommAbort(st->links[i]->comm);
            st->links[i]->comm = NULL;
        }
    ncclComm_t *comms[2] = {&st->pipe, &st->replicas};
    for (int i = 0; i < 2; i++)
        if (*comms[i]) {
            ncclCommAbort(*comms[i]);
            *comms[i] = NULL;
        }
}

static void release(pn_comm *c)
{
    nccl_state *st = state(c);
    end_comm(&st->pipe, st->aborted);
    end_comm(&st->replicas, st->aborted);
    if (st->stream) cudaStreamDestroy(st->stream);
    if (st->computed) cudaEventDestroy(st->computed);
    if (st->moved) cudaEventDestroy(st->moved);
    free(st->links);
    free(st);
    c->transport_state = NULL;
}

/* --- stage links ------------------------------------------------------------------------ */

static size_t msg_bytes(const pn_link *l, int rows)
{
    return PN_LINK_HEADER_BYTES + (size_t)pn_link_samples(l, rows) * sizeof(int32_t);
}

static int32_t *lengths_in(const nccl_link *l, int slot)
{
    return (int32_t *)(l->msg[slot] + PN_LINK_HEADER_BYTES);
}

static void link_cancel(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    for (int s = 0; l->req && l->msg && s < base->spec.slots; s++)
        if (l->req[s] != MPI_REQUEST_NULL) {
            MPI_Cancel(&l->req[s]);
            MPI_Request_free(&l->req[s]);
        }
    if (l->id_req != MPI_REQUEST_NULL) { /* a link freed before links_ready */
        if (!base->spec.sends) MPI_Cancel(&l->id_req); /* a send of the id completes */
        MPI_Request_free(&l->id_req);
    }
}

static void link_free(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    nccl_state *st = state(base->comm);
    link_cancel(base);
    for (int i = 0; st && i < st->n_links; i++) /* off the comm's list */
        if (st->links[i] == l) st->links[i] = st->links[--st->n_links];
    end_comm(&l->comm, st ? st->aborted : true);
    int slots = base->spec.slots, buffers = base->spec.sends ? slots : 1;
    for (int s = 0; l->msg && s < slots; s++) free(l->msg[s]);
    for (int s = 0; l->payload && s < buffers; s++) pn_buffer_release(&l->payload[s]);
    for (int s = 0; l->sent && s < slots; s++)
        if (l->sent[s]) cudaEventDestroy(l->sent[s]);
    if (l->ordered) cudaEventDestroy(l->ordered);
    if (l->consumed) cudaEventDestroy(l->consumed);
    if (l->stream) cudaStreamDestroy(l->stream);
    free(l->msg);
    free(l->req);
    free(l->lengths);
    free(l->payload);
    free(l->sent);
    free(l->in_flight);
    free(l);
}

/* The link's CUDA and host parts; the communicator comes in links_ready. */
static int link_parts(nccl_link *l)
{
    const pn_link_spec *sp = &l->base.spec;
    int slots = sp->slots, buffers = sp->sends ? slots : 1;
    l->msg = calloc((size_t)slots, sizeof *l->msg);
    l->req = malloc((size_t)slots * sizeof *l->req);
    l->lengths = calloc((size_t)slots, sizeof *l->lengths);
    l->payload = calloc((size_t)buffers, sizeof *l->payload);
    l->sent = calloc((size_t)slots, sizeof *l->sent);
    l->in_flight = calloc((size_t)slots, sizeof *l->in_flight);
    if (!l->msg || !l->req || !l->lengths || !l->payload || !l->sent || !l->in_flight)
        return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    for (int s = 0; s < slots; s++) {
        l->req[s] = MPI_REQUEST_NULL;
        if (!(l->msg[s] = malloc(msg_bytes(&l->base, sp->max_rows))))
            return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    }
    int dev;
    CUDA_OK(cudaGetDevice(&dev));
    size_t bytes = (size_t)sp->max_rows * (size_t)sp->cols * sizeof(float);
    for (int s = 0; s < buffers; s++)
        PN_TRY(pn_buffer_reserve(&l->payload[s], pn_device_cuda(dev), bytes ? bytes : 1));
    for (int s = 0; sp->sends && s < slots; s++)
        CUDA_OK(cudaEventCreateWithFlags(&l->sent[s], cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&l->ordered, cudaEventDisableTiming));
    CUDA_OK(cudaEventCreateWithFlags(&l->consumed, cudaEventDisableTiming));
    CUDA_OK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
    return PN_OK;
}

/* The sender makes the link's id and sends it on the link's tag, the receiver posts
 * its receive: neither waits here (links are made in different orders on the two
 * sides), links_ready does. */
static int link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out)
{
    /* a stage's link to itself (interleaved chunks): NCCL has no communicator of one
     * process with itself twice; MPI moves it, through the host */
    if (spec->peer == c->grid.stage) return pn_transport_mpi.link_create(c, spec, out);
    nccl_state *st = state(c);
    nccl_link *l = calloc(1, sizeof *l);
    if (!l) return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    l->base = (pn_link){*spec, c, &pn_transport_nccl};
    l->id_req = MPI_REQUEST_NULL;
    int rc = link_parts(l);
    if (rc == PN_OK && st->n_links == st->links_cap) {
        int cap = st->links_cap ? 2 * st->links_cap : 8;
        nccl_link **more = realloc(st->links, (size_t)cap * sizeof *more);
        if (more) st->links = more, st->links_cap = cap;
        else rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    if (rc == PN_OK && spec->sends) {
        ncclResult_t r = ncclGetUniqueId(&l->id);
        if (r != ncclSuccess) rc = nccl_fail(r, NULL, "ncclGetUniqueId", __LINE__);
    }
    if (rc == PN_OK) {
        int err = spec->sends ? MPI_Isend(&l->id, (int)sizeof l->id, MPI_BYTE, spec->peer,
                                          pn_link_tag(&l->base), c->pipe, &l->id_req)
                              : MPI_Irecv(&l->id, (int)sizeof l->id, MPI_BYTE, spec->peer,
                                          pn_link_tag(&l->base), c->pipe, &l->id_req);
        if (err != MPI_SUCCESS) rc = pn_mpi_fail(err, "MPI_Isend/Irecv", __FILE__, __LINE__);
    }
    if (rc < 0) {
        link_free(&l->base);
        return rc;
    }
    st->links[st->n_links++] = l;
    *out = &l->base;
    return PN_OK;
}

/* Every link's id has arrived (the peers sent them while making their links), every
 * link's communicator is started, then all are awaited together: two ranks make
 * their shared links in any order. */
static int links_ready(pn_comm *c)
{
    nccl_state *st = state(c);
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < st->n_links; i++) {
        nccl_link *l = st->links[i];
        if (l->connected) continue;
        rc = pn_comm_wait(c, 1, &l->id_req, MPI_STATUSES_IGNORE,
                          &(pn_wait_for){"the NCCL id of", &l->base, -1, PN_SCOPE_PIPE});
        if (rc == PN_OK) rc = init_comm(&l->comm, 2, l->id, l->base.spec.sends ? 0 : 1);
    }
    PN_TRY(started_everywhere(c, rc));
    if (st->aborted) return PN_OK; /* another rank failed: its error comes in the agreement */
    for (int i = 0; i < st->n_links; i++) {
        nccl_link *l = st->links[i];
        if (l->connected) continue;
        PN_TRY(await(c, NULL, &l->comm, 1,
                     &(pn_wait_for){"the NCCL set-up of", &l->base, -1, PN_SCOPE_PIPE}));
        l->connected = true;
    }
    st->set_up = true;
    return PN_OK;
}

static int need_connected(const nccl_link *l)
{
    if (l->connected && l->comm) return PN_OK;
    return pn_error_set(PN_ERR_INTERNAL, "link of '%s' used before pn_comm_links_ready%s",
                        l->base.spec.name, l->comm ? "" : " (or after an abort)");
}

static int link_post_recv(pn_link *base, int micro)
{
    nccl_link *l = (nccl_link *)base;
    l->lengths[micro] = NULL;
    PN_MPI_CHECK(MPI_Irecv(l->msg[micro], (int)msg_bytes(base, base->spec.max_rows), MPI_BYTE,
                           base->spec.peer, pn_link_tag(base), base->comm->pipe, &l->req[micro]));
    return PN_OK;
}

static int link_recv(pn_link *base, long step, int micro, pn_matrix *into, bool add)
{
    nccl_link *l = (nccl_link *)base;
    pn_comm *c = base->comm;
    PN_TRY(need_connected(l));
    pn_wait_for what = {"the receive of", base, micro, PN_SCOPE_PIPE};
    MPI_Status status;
    PN_TRY(pn_comm_wait(c, 1, &l->req[micro], &status, &what));
    pn_link_header h;
    memcpy(&h, l->msg[micro], sizeof h);
    int got = 0, rows = into->rows;
    MPI_Get_count(&status, MPI_BYTE, &got);
    PN_TRY(pn_link_check_recv(base, &h, (size_t)got, msg_bytes(base, rows), step, micro, into,
                              lengths_in(l, micro)));
    if (h.seq != l->count) /* NCCL matches a link's payloads in the order they were sent */
        return pn_error_set(PN_ERR_INTERNAL,
                            "stage %d received the %d-th message of the link of '%s' from "
                            "stage %d where the %u-th was due: the NCCL transport receives a "
                            "link's micro-batches in the order they were sent",
                            c->grid.stage, (int)h.seq, base->spec.name, base->spec.peer,
                            l->count);
    l->count++;
    int rc;
    cudaStream_t compute = compute_stream(&rc);
    PN_TRY(rc);
    if (l->landing_used) /* the previous payload has left the landing */
        CUDA_OK(cudaStreamWaitEvent(l->stream, l->consumed, 0));
    size_t n = (size_t)rows * (size_t)base->spec.cols;
    NCCL_CALL(c, ncclRecv(l->payload[0].data, n, ncclFloat, 0, l->comm, l->stream), l->comm,
              &what);
    CUDA_OK(cudaEventRecord(l->ordered, l->stream));
    PN_TRY(await(c, l->ordered, &l->comm, 1, &what));
    CUDA_OK(cudaStreamWaitEvent(compute, l->ordered, 0));
    if (pn_link_samples(base, rows)) l->lengths[micro] = lengths_in(l, micro);
    pn_matrix src = pn_matrix_on(&l->payload[0], rows, base->spec.cols);
    PN_TRY(add ? pn_axpy(1.0f, &src, into) : pn_copy(&src, into));
    CUDA_OK(cudaEventRecord(l->consumed, compute));
    l->landing_used = true;
    return PN_OK;
}

static int link_send(pn_link *base, long step, int micro, const pn_matrix *m, const int *lengths)
{
    nccl_link *l = (nccl_link *)base;
    pn_comm *c = base->comm;
    const pn_link_spec *sp = &base->spec;
    PN_TRY(need_connected(l));
    PN_TRY(pn_link_check_send(base, m, lengths));
    int rc;
    cudaStream_t compute = compute_stream(&rc);
    PN_TRY(rc);
    if (l->in_flight[micro]) /* the slot's last payload must have left before the copy */
        CUDA_OK(cudaStreamWaitEvent(compute, l->sent[micro], 0));
    pn_matrix slot = pn_matrix_on(&l->payload[micro], m->rows, m->cols);
    PN_TRY(pn_copy(m, &slot)); /* m may change once this returns: the copy is the send's */
    PN_TRY(order(l->ordered, compute, l->stream));
    pn_link_header h = pn_link_header_of(base, step, micro, m, l->count++);
    memcpy(l->msg[micro], &h, sizeof h);
    for (int k = 0; k < h.samples; k++) lengths_in(l, micro)[k] = lengths[k];
    PN_MPI_CHECK(MPI_Isend(l->msg[micro], (int)msg_bytes(base, m->rows), MPI_BYTE, sp->peer,
                           pn_link_tag(base), c->pipe, &l->req[micro]));
    size_t n = (size_t)m->rows * (size_t)m->cols;
    NCCL_CALL(c, ncclSend(slot.data, n, ncclFloat, 1, l->comm, l->stream), l->comm,
              &((pn_wait_for){"the send of", base, micro, PN_SCOPE_PIPE}));
    CUDA_OK(cudaEventRecord(l->sent[micro], l->stream));
    l->in_flight[micro] = true;
    return PN_OK;
}

static const int *link_lengths(const pn_link *base, int micro)
{
    return ((const nccl_link *)base)->lengths[micro];
}

/* The headers' MPI sends, then each payload's completion on the link's stream. */
static int link_wait_sends(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    pn_wait_for what = {"the sends of", base, -1, PN_SCOPE_PIPE};
    PN_TRY(pn_comm_wait(base->comm, base->spec.slots, l->req, MPI_STATUSES_IGNORE, &what));
    for (int s = 0; s < base->spec.slots; s++) {
        if (!l->in_flight[s]) continue;
        PN_TRY(need_connected(l));
        PN_TRY(await(base->comm, l->sent[s], &l->comm, 1, &what));
        l->in_flight[s] = false;
    }
    return PN_OK;
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
    cudaStream_t compute = compute_stream(&rc);
    PN_TRY(rc);
    return order(st->computed, compute, st->stream);
}

/* The compute stream after the transport's stream, and this rank after both: polled. */
static int finish(pn_comm *c, ncclComm_t comm, const pn_wait_for *what)
{
    nccl_state *st = state(c);
    int rc;
    cudaStream_t compute = compute_stream(&rc);
    PN_TRY(rc);
    PN_TRY(order(st->moved, st->stream, compute));
    return await(c, st->moved, &comm, 1, what);
}

static const pn_wait_for SUM = {"the gradient sum over", NULL, -1, PN_SCOPE_REPLICAS};

static int bucket_start(pn_comm *c, pn_matrix *m)
{
    nccl_state *st = state(c);
    PN_TRY(need_device(m, "gradient buckets"));
    PN_TRY(need_comm(st->replicas, "a gradient bucket"));
    PN_TRY(after_compute(st)); /* the bucket's gradients are complete */
    NCCL_CALL(c, ncclAllReduce(m->data, m->data, pn_matrix_count(*m), ncclFloat, ncclSum,
                               st->replicas, st->stream),
              st->replicas, &SUM);
    st->buckets_pending = true;
    return PN_OK;
}

static int buckets_wait(pn_comm *c)
{
    nccl_state *st = state(c);
    if (!st->buckets_pending) return PN_OK;
    st->buckets_pending = false;
    return finish(c, st->replicas, &SUM);
}

static const pn_wait_for GATHER = {"the gradient gather over", NULL, -1, PN_SCOPE_REPLICAS};

static int gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    nccl_state *st = state(c);
    PN_TRY(need_device(mine, "replica gathers"));
    PN_TRY(need_device(all, "replica gathers"));
    PN_TRY(need_comm(st->replicas, "a replica gather"));
    PN_TRY(after_compute(st));
    NCCL_CALL(c, ncclAllGather(mine->data, all->data, (size_t)mine->cols, ncclFloat,
                               st->replicas, st->stream),
              st->replicas, &GATHER);
    return finish(c, st->replicas, &GATHER);
}

static const pn_wait_for TIES = {"the tied gradient exchange over", NULL, -1, PN_SCOPE_PIPE};

/* One group of sends and receives on the pipe's communicator: NCCL matches each pair
 * of stages' messages in the order listed, as MPI does. */
static int pipe_exchange(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                         int n_recv, pn_matrix *recv, const int *from)
{
    nccl_state *st = state(c);
    if (n_send < 0 || n_recv < 0)
        return pn_error_set(PN_ERR_INTERNAL, "pipe exchange of %d and %d", n_send, n_recv);
    if (n_send + n_recv == 0) return PN_OK;
    for (int i = 0; i < n_send + n_recv; i++)
        PN_TRY(need_device(i < n_send ? &send[i] : &recv[i - n_send], "tied gradients"));
    PN_TRY(need_comm(st->pipe, "the tied gradient exchange"));
    PN_TRY(after_compute(st));
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return nccl_fail(r, st->pipe, "ncclGroupStart", __LINE__);
    for (int i = 0; r == ncclSuccess && i < n_send + n_recv; i++) {
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        r = i < n_send ? ncclSend(m->data, pn_matrix_count(*m), ncclFloat, to[i], st->pipe,
                                  st->stream)
                       : ncclRecv(m->data, pn_matrix_count(*m), ncclFloat, from[i - n_send],
                                  st->pipe, st->stream);
    }
    ncclResult_t end = ncclGroupEnd(); /* always: the group must close */
    if (r != ncclSuccess) return nccl_fail(r, st->pipe, "ncclSend/ncclRecv", __LINE__);
    PN_TRY(called(c, end, st->pipe, "ncclGroupEnd", __LINE__, &TIES));
    return finish(c, st->pipe, &TIES);
}

const pn_transport pn_transport_nccl = {
    .name = "nccl",
    .link_create = link_create,
    .link_free = link_free,
    .link_post_recv = link_post_recv,
    .link_recv = link_recv,
    .link_lengths = link_lengths,
    .link_send = link_send,
    .link_wait_sends = link_wait_sends,
    .link_cancel = link_cancel,
    .bucket_start = bucket_start,
    .buckets_wait = buckets_wait,
    .gather_replicas = gather_replicas,
    .pipe_exchange = pipe_exchange,
    .release = release,
    .start = start,
    .links_ready = links_ready,
    .abort = abort_all,
};
