/* The NCCL transport's stage links (nccl_impl.h; the design is in transport_nccl.c's
 * header): a communicator of two ranks and a stream per link; header and lengths
 * over MPI on the link's tag, checked on every message; the payload by ncclSend
 * and ncclRecv from and into the link's device buffers, ordered against the compute
 * stream with events. NEVER RUN: no GPU has executed any of it. */
#include "config.h"

#include "mpi/nccl_impl.h"

#include <stdlib.h>
#include <string.h>

#include "math/ops.h"
#include "mpi/link_header.h"
#include "mpi/mpi_check.h"

/* --- stage links ------------------------------------------------------------------------ */

static size_t msg_bytes(const pn_link *l, int rows)
{
    return PN_LINK_HEADER_BYTES + (size_t)pn_link_samples(l, rows) * sizeof(int32_t);
}

static int32_t *lengths_in(const nccl_link *l, int slot)
{
    return (int32_t *)(l->msg[slot] + PN_LINK_HEADER_BYTES);
}

void pn_nccl_link_cancel(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    for (int s = 0; l->req && l->msg && s < base->spec.slots; s++)
        if (l->req[s] != MPI_REQUEST_NULL) {
            MPI_Cancel(&l->req[s]);
            MPI_Request_free(&l->req[s]);
        }
    if (l->id_req != MPI_REQUEST_NULL) { /* a link freed before pn_nccl_links_ready */
        if (!base->spec.sends) {
            MPI_Cancel(&l->id_req);
            MPI_Request_free(&l->id_req);
        } else { /* MPI may still read l->id: the link must outlive the send */
            int done = 0;
            MPI_Test(&l->id_req, &done, MPI_STATUS_IGNORE);
            if (!done) {
                MPI_Request_free(&l->id_req);
                l->id_pending = true;
            }
        }
    }
}

void pn_nccl_link_free(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    nccl_state *st = pn_nccl_state(base->comm);
    pn_nccl_link_cancel(base);
    for (int i = 0; st && i < st->n_links; i++) /* off the comm's list */
        if (st->links[i] == l) st->links[i] = st->links[--st->n_links];
    pn_nccl_retire_comm(base->comm, &l->comm); /* ended in release, with all the others */
    int slots = base->spec.slots, buffers = base->spec.sends ? slots : 1;
    for (int s = 0; l->msg && s < slots; s++) free(l->msg[s]);
    for (int s = 0; l->payload && s < buffers; s++) pn_buffer_release(&l->payload[s]);
    pn_buffer_release(&l->large);
    pn_buffer_release(&l->wide);
    /* best effort: a failure here must not become a later launch's error */
    for (int s = 0; l->sent && s < slots; s++)
        if (l->sent[s]) pn_cuda_forget(cudaEventDestroy(l->sent[s]));
    if (l->ordered) pn_cuda_forget(cudaEventDestroy(l->ordered));
    if (l->consumed) pn_cuda_forget(cudaEventDestroy(l->consumed));
    if (l->large_sent) pn_cuda_forget(cudaEventDestroy(l->large_sent));
    if (l->stream) pn_cuda_forget(cudaStreamDestroy(l->stream));
    free(l->msg);
    free(l->req);
    free(l->lengths);
    free(l->payload);
    free(l->sent);
    free(l->in_flight);
    if (!l->id_pending) free(l); /* else left to MPI's send of its id (a failed set-up) */
}

/* The link's CUDA and host parts; the communicator comes in pn_nccl_links_ready.
 * A sender's slots hold a training micro-batch each (slot_rows), not max_rows, which
 * covers evaluation's whole batch (M micro-batches) and would take M times the device
 * memory a step sends; the one larger message at a time (evaluation's, in slot 0)
 * goes through large. */
static int link_parts(nccl_link *l)
{
    const pn_link_spec *sp = &l->base.spec;
    int slots = sp->slots, buffers = sp->sends ? slots : 1;
    l->msg = calloc((size_t)slots, sizeof *l->msg);
    l->req = malloc((size_t)slots * sizeof *l->req);
    for (int s = 0; l->req && s < slots; s++) l->req[s] = MPI_REQUEST_NULL; /* for cancel */
    l->lengths = calloc((size_t)slots, sizeof *l->lengths);
    l->payload = calloc((size_t)buffers, sizeof *l->payload);
    l->sent = calloc((size_t)slots, sizeof *l->sent);
    l->in_flight = calloc((size_t)slots, sizeof *l->in_flight);
    if (!l->msg || !l->req || !l->lengths || !l->payload || !l->sent || !l->in_flight)
        return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    for (int s = 0; s < slots; s++) {
        if (!(l->msg[s] = malloc(msg_bytes(&l->base, sp->max_rows))))
            return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    }
    int dev;
    CUDA_CHECK(cudaGetDevice(&dev));
    size_t row = (size_t)sp->cols * pn_link_elem_bytes(&l->base);
    size_t bytes = (size_t)(sp->sends ? pn_link_slot_rows(&l->base) : sp->max_rows) * row;
    for (int s = 0; s < buffers; s++)
        PN_TRY(pn_buffer_reserve(&l->payload[s], pn_device_cuda(dev), bytes ? bytes : 1));
    if (sp->sends && pn_link_slot_rows(&l->base) < sp->max_rows) {
        PN_TRY(pn_buffer_reserve(&l->large, pn_device_cuda(dev), (size_t)sp->max_rows * row));
        CUDA_CHECK(cudaEventCreateWithFlags(&l->large_sent, cudaEventDisableTiming));
    }
    for (int s = 0; sp->sends && s < slots; s++)
        CUDA_CHECK(cudaEventCreateWithFlags(&l->sent[s], cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&l->ordered, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&l->consumed, cudaEventDisableTiming));
    CUDA_CHECK(cudaStreamCreateWithFlags(&l->stream, cudaStreamNonBlocking));
    /* The buffers' zero-fill (pn_buffer_reserve: a memset on the compute stream) comes
     * before anything the link's stream does with them: the first ncclRecv into the
     * landing, and set-up's exchange from a slot (pn_nccl_links_ready). A send slot's
     * later uses are ordered already: its copy runs on the compute stream, then
     * pn_nccl_link_send orders the link's stream after it. */
    int rc;
    cudaStream_t compute = pn_nccl_compute_stream(&rc);
    PN_TRY(rc);
    return pn_nccl_order(l->ordered, compute, l->stream);
}

/* The sender makes the link's id and sends it on the link's tag, the receiver posts
 * its receive: neither waits here (links are made in different orders on the two
 * sides), pn_nccl_links_ready does. */
int pn_nccl_link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out)
{
    /* a stage's link to itself (interleaved chunks): NCCL has no communicator of one
     * process with itself twice; MPI moves it, through the host */
    if (spec->peer == c->grid.stage) return pn_transport_mpi.link_create(c, spec, out);
    nccl_state *st = pn_nccl_state(c);
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
        if (r != ncclSuccess) rc = pn_nccl_fail(r, NULL, "ncclGetUniqueId", __FILE__, __LINE__);
    }
    if (rc == PN_OK) {
        int err = spec->sends ? MPI_Isend(&l->id, (int)sizeof l->id, MPI_BYTE, spec->peer,
                                          pn_link_tag(&l->base), c->pipe, &l->id_req)
                              : MPI_Irecv(&l->id, (int)sizeof l->id, MPI_BYTE, spec->peer,
                                          pn_link_tag(&l->base), c->pipe, &l->id_req);
        if (err != MPI_SUCCESS) rc = pn_mpi_fail(err, "MPI_Isend/Irecv", __FILE__, __LINE__);
    }
    if (rc < 0) {
        pn_nccl_link_free(&l->base);
        return rc;
    }
    st->links[st->n_links++] = l;
    *out = &l->base;
    return PN_OK;
}

static const pn_wait_for LINKS_MADE = {"the NCCL set-up of the stage links among", NULL, -1,
                                      PN_SCOPE_PIPE};
static const pn_wait_for LINKS_CONNECTED = {"the first exchange on the NCCL stage links among",
                                           NULL, -1, PN_SCOPE_PIPE};

/* NCCL connects a pair of ranks lazily, in their first send and receive: the first
 * ncclSend of a link would hold the host until the peer posts its ncclRecv, which can
 * be a schedule later, with this rank unable to reach the work the peer waits for. So
 * at set-up every new link carries one float from sender to receiver (a slot and the
 * landing: pool blocks hold 256 bytes at least), all in one group: NCCL connects the
 * group's communicators together, so the order in which two ranks list their links
 * cannot deadlock. Then the exchanges are awaited together, under the watchdog.
 * (A small message connects the pair: NCCL sets up every channel it will use for the
 * peer at its first operation, whatever its size.) */
static int connect_links(pn_comm *c, nccl_link **fresh, int n, ncclComm_t *comms,
                         cudaEvent_t *events)
{
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess) return pn_nccl_fail(r, NULL, "ncclGroupStart", __FILE__, __LINE__);
    for (int i = 0; r == ncclSuccess && i < n; i++) {
        nccl_link *l = fresh[i];
        void *at = l->payload[0].data;
        r = l->base.spec.sends ? ncclSend(at, 1, ncclFloat, 1, l->comm, l->stream)
                               : ncclRecv(at, 1, ncclFloat, 0, l->comm, l->stream);
    }
    ncclResult_t end = ncclGroupEnd(); /* always: the group must close */
    if (r != ncclSuccess) return pn_nccl_fail(r, NULL, "ncclSend/ncclRecv", __FILE__, __LINE__);
    if (end != ncclSuccess && end != ncclInProgress)
        return pn_nccl_fail(end, NULL, "ncclGroupEnd", __FILE__, __LINE__);
    /* non-blocking communicators: queued once each one's state leaves ncclInProgress */
    PN_TRY(pn_nccl_await_all(c, NULL, 0, comms, n, &LINKS_CONNECTED));
    for (int i = 0; i < n; i++) {
        CUDA_CHECK(cudaEventRecord(fresh[i]->ordered, fresh[i]->stream));
        events[i] = fresh[i]->ordered;
    }
    return pn_nccl_await_all(c, events, n, comms, n, &LINKS_CONNECTED);
}

/* Every link's id has arrived (the peers sent them while making their links), every
 * link's communicator is started, then all are awaited together (one bound) and
 * connected together: two ranks make and list their shared links in any order. */
int pn_nccl_links_ready(pn_comm *c)
{
    nccl_state *st = pn_nccl_state(c);
    size_t most = st->n_links > 0 ? (size_t)st->n_links : 1;
    nccl_link **fresh = malloc(most * sizeof *fresh);
    ncclComm_t *comms = malloc(most * sizeof *comms);
    cudaEvent_t *events = malloc(most * sizeof *events);
    int rc = fresh && comms && events ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    int n = 0;
    for (int i = 0; rc == PN_OK && i < st->n_links; i++) {
        nccl_link *l = st->links[i];
        if (l->connected) continue;
        rc = pn_comm_wait(c, 1, &l->id_req, MPI_STATUSES_IGNORE,
                          &(pn_wait_for){"the NCCL id of", &l->base, -1, PN_SCOPE_PIPE});
        if (rc == PN_OK) rc = pn_nccl_init_comm(&l->comm, 2, l->id, l->base.spec.sends ? 0 : 1);
        if (rc == PN_OK) fresh[n++] = l;
    }
    rc = pn_nccl_started_everywhere(c, rc); /* every rank's failure aborts all */
    if (rc == PN_OK && !st->aborted && n > 0) {
        for (int i = 0; i < n; i++) comms[i] = fresh[i]->comm;
        rc = pn_nccl_await_all(c, NULL, 0, comms, n, &LINKS_MADE);
        if (rc == PN_OK) rc = connect_links(c, fresh, n, comms, events);
        for (int i = 0; rc == PN_OK && i < n; i++) fresh[i]->connected = true;
    }
    free(fresh);
    free(comms);
    free(events);
    /* after an abort (another rank failed) its error comes in the agreement */
    if (rc == PN_OK && !st->aborted) st->set_up = true;
    return rc;
}

static int need_connected(const nccl_link *l)
{
    if (l->connected && l->comm) return PN_OK;
    return pn_error_set(PN_ERR_INTERNAL, "link of '%s' used before pn_comm_links_ready%s",
                        l->base.spec.name, l->comm ? "" : " (or after an abort)");
}

int pn_nccl_link_post_recv(pn_link *base, int micro)
{
    nccl_link *l = (nccl_link *)base;
    l->lengths[micro] = NULL;
    PN_MPI_CHECK(MPI_Irecv(l->msg[micro], (int)msg_bytes(base, base->spec.max_rows), MPI_BYTE,
                           base->spec.peer, pn_link_tag(base), base->comm->pipe, &l->req[micro]));
    return PN_OK;
}

/* The landing's payload of rows written (or added) into into: floats, or bf16 widened
 * (through wide when added). On the compute stream. */
static int take_payload(nccl_link *l, int rows, pn_matrix *into, bool add)
{
    int cols = l->base.spec.cols;
    if (!l->base.spec.bf16) {
        pn_matrix src = pn_matrix_on(&l->payload[0], rows, cols);
        return add ? pn_axpy(1.0f, &src, into) : pn_copy(&src, into);
    }
    const uint16_t *narrow = l->payload[0].data;
    if (!add) return pn_from_bf16(narrow, into);
    PN_TRY(pn_buffer_reserve(&l->wide, into->device, (size_t)rows * (size_t)cols * sizeof(float)));
    pn_matrix src = pn_matrix_on(&l->wide, rows, cols);
    PN_TRY(pn_from_bf16(narrow, &src));
    return pn_axpy(1.0f, &src, into);
}

/* m into a send buffer: a copy, or narrowed to bf16 on a bf16 link. */
static int put_payload(const pn_link *base, const pn_matrix *m, pn_buffer *slot)
{
    if (base->spec.bf16) return pn_to_bf16(m, slot->data);
    pn_matrix dst = pn_matrix_on(slot, m->rows, m->cols);
    return pn_copy(m, &dst);
}

int pn_nccl_link_recv(pn_link *base, long step, int micro, pn_matrix *into, bool add)
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
                              lengths_in(l, micro), l->count));
    l->count++;
    int rc;
    cudaStream_t compute = pn_nccl_compute_stream(&rc);
    PN_TRY(rc);
    if (l->landing_used) /* the previous payload has left the landing */
        CUDA_CHECK(cudaStreamWaitEvent(l->stream, l->consumed, 0));
    size_t n = (size_t)rows * (size_t)base->spec.cols;
    NCCL_CALL(c, ncclRecv(l->payload[0].data, n * pn_link_elem_bytes(base), ncclUint8, 0,
                          l->comm, l->stream),
              l->comm, &what);
    CUDA_CHECK(cudaEventRecord(l->ordered, l->stream));
    PN_TRY(pn_nccl_await(c, l->ordered, &l->comm, 1, &what));
    CUDA_CHECK(cudaStreamWaitEvent(compute, l->ordered, 0));
    if (pn_link_samples(base, rows)) l->lengths[micro] = lengths_in(l, micro);
    PN_TRY(take_payload(l, rows, into, add));
    CUDA_CHECK(cudaEventRecord(l->consumed, compute));
    l->landing_used = true;
    return PN_OK;
}

int pn_nccl_link_send(pn_link *base, long step, int micro, const pn_matrix *m,
                      const int *lengths)
{
    nccl_link *l = (nccl_link *)base;
    pn_comm *c = base->comm;
    const pn_link_spec *sp = &base->spec;
    PN_TRY(need_connected(l));
    PN_TRY(pn_link_check_send(base, m, lengths));
    int rc;
    cudaStream_t compute = pn_nccl_compute_stream(&rc);
    PN_TRY(rc);
    /* the buffer's last payload must have left before the copy */
    bool large = m->rows > pn_link_slot_rows(base);
    if (large ? l->large_in_flight : l->in_flight[micro])
        CUDA_CHECK(cudaStreamWaitEvent(compute, large ? l->large_sent : l->sent[micro], 0));
    pn_buffer *slot = large ? &l->large : &l->payload[micro];
    PN_TRY(put_payload(base, m, slot)); /* m may change once this returns: the copy is the send's */
    PN_TRY(pn_nccl_order(l->ordered, compute, l->stream));
    pn_link_header h = pn_link_header_of(base, step, micro, m, l->count++);
    memcpy(l->msg[micro], &h, sizeof h);
    for (int k = 0; k < h.samples; k++) lengths_in(l, micro)[k] = lengths[k];
    PN_MPI_CHECK(MPI_Isend(l->msg[micro], (int)msg_bytes(base, m->rows), MPI_BYTE, sp->peer,
                           pn_link_tag(base), c->pipe, &l->req[micro]));
    size_t bytes = (size_t)m->rows * (size_t)m->cols * pn_link_elem_bytes(base);
    c->link_bytes_sent += (double)bytes;
    NCCL_CALL(c, ncclSend(slot->data, bytes, ncclUint8, 1, l->comm, l->stream), l->comm,
              &((pn_wait_for){"the send of", base, micro, PN_SCOPE_PIPE}));
    CUDA_CHECK(cudaEventRecord(l->sent[micro], l->stream));
    l->in_flight[micro] = true;
    if (large) {
        CUDA_CHECK(cudaEventRecord(l->large_sent, l->stream));
        l->large_in_flight = true;
    }
    return PN_OK;
}

const int *pn_nccl_link_lengths(const pn_link *base, int micro)
{
    return ((const nccl_link *)base)->lengths[micro];
}

/* The headers' MPI sends, then each payload's completion on the link's stream. */
int pn_nccl_link_wait_sends(pn_link *base)
{
    nccl_link *l = (nccl_link *)base;
    pn_wait_for what = {"the sends of", base, -1, PN_SCOPE_PIPE};
    PN_TRY(pn_comm_wait(base->comm, base->spec.slots, l->req, MPI_STATUSES_IGNORE, &what));
    for (int s = 0; s < base->spec.slots; s++) {
        if (!l->in_flight[s]) continue;
        PN_TRY(need_connected(l));
        PN_TRY(pn_nccl_await(base->comm, l->sent[s], &l->comm, 1, &what));
        l->in_flight[s] = false;
    }
    l->large_in_flight = false; /* its send was recorded in its slot's event too */
    return PN_OK;
}

