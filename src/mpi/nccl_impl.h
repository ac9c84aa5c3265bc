/* Inside the NCCL transport (transport_nccl.c: communicators, waits, the replicas'
 * and tied gradients, the table; transport_nccl_link.c: the stage links): what the
 * two files share. Only where the build has NCCL, and only in the CUDA module
 * (pipenet-cuda.so, math/cuda_module.h). NEVER RUN (see transport_nccl.c). */
#ifndef PN_NCCL_IMPL_H
#define PN_NCCL_IMPL_H

#include "mpi/comm_impl.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include "base/error.h"
#include "math/cuda/cuda_check.h"

/* The transport's table (transport_nccl.c), which the CUDA module's descriptor names
 * (cuda_module_entry.c). */
extern const pn_transport pn_transport_nccl;

/* A failed NCCL call (r) on comm (or NULL), as PN_ERR_DEVICE naming it and file:line. */
int pn_nccl_fail(ncclResult_t r, ncclComm_t comm, const char *call, const char *file, int line);

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
    ncclComm_t *ending; /* freed links' communicators, ended with the others in release */
    int n_ending, ending_cap;
} nccl_state;

struct nccl_link {
    pn_link base;
    ncclComm_t comm;      /* the link's two ranks: sender 0, receiver 1 */
    ncclUniqueId id;      /* made by the sender, sent to the receiver */
    MPI_Request id_req;
    bool id_pending;      /* freed while MPI may still send id: the link is not freed */
    bool connected;
    cudaStream_t stream;
    char **msg;           /* [slots] header + lengths, host memory, over MPI */
    MPI_Request *req;     /* [slots] */
    const int **lengths;  /* [slots] received lengths, or NULL */
    pn_buffer *payload;   /* sender: [slots] a micro-batch (slot_rows) each; receiver:
                             [1] landing of max_rows */
    cudaEvent_t *sent;    /* sender: [slots] the payload's send has completed */
    bool *in_flight;      /* sender: [slots] a send was started since the last wait */
    pn_buffer large;      /* sender: a message of more rows than a slot's (evaluation's
                             batch, up to max_rows); empty where none can be larger */
    cudaEvent_t large_sent;
    bool large_in_flight;
    cudaEvent_t ordered;  /* compute -> link stream (sender), link -> compute (receiver) */
    cudaEvent_t consumed; /* receiver: the landing's copy into the destination is done */
    pn_buffer wide;       /* receiver of a bf16 link: a payload widened to floats, to be
                             added into its destination */
    bool landing_used;
    uint32_t count;       /* messages sent, or received */
};

static inline nccl_state *pn_nccl_state(pn_comm *c) { return c->transport_state; }

/* The CUDA backend's compute stream of the current device; *rc its status. */
cudaStream_t pn_nccl_compute_stream(int *rc);

/* Polls event (NULL: the communicators' states only) and comms[0 .. n_comms) (NULL
 * entries skipped) until done, under the stall watchdog (pn_comm_poll); during
 * set-up, where no stall bound is set yet, under 300 s. A communicator's error, or a
 * wait given up, aborts every communicator of the transport. */
int pn_nccl_await(pn_comm *c, cudaEvent_t event, const ncclComm_t *comms, int n_comms,
                  const pn_wait_for *what);
/* The same for events[0 .. n_events) and the comms together: one wait, one bound. */
int pn_nccl_await_all(pn_comm *c, const cudaEvent_t *events, int n_events,
                      const ncclComm_t *comms, int n_comms, const pn_wait_for *what);

/* r, the result of call on a non-blocking communicator: ncclInProgress is polled to
 * its end (NCCL wants that before the next call on it), other failures reported. */
int pn_nccl_called(pn_comm *c, ncclResult_t r, ncclComm_t comm, const char *call, int line,
                   const pn_wait_for *what);
#define NCCL_CALL(c, call, comm, what) \
    PN_TRY(pn_nccl_called((c), (call), (comm), #call, __LINE__, (what)))

/* Event e, recorded on from, made a precondition of the work queued on to next. */
int pn_nccl_order(cudaEvent_t e, cudaStream_t from, cudaStream_t to);

/* Starts making a communicator of n ranks, this one rank, from id: non-blocking. */
int pn_nccl_init_comm(ncclComm_t *out, int n, ncclUniqueId id, int rank);

/* Ends comms[0 .. n) (NULL entries skipped; all NULL after): each finalized, then all
 * polled together and destroyed as each finishes what it holds; aborted instead when
 * aborted, when finalizing fails, or when they have not all finished within 30 s
 * (one bound for all of them). */
void pn_nccl_end_comms(ncclComm_t *comms, int n, bool aborted);

/* A freed link's communicator (*comm, NULL after): kept to be ended with every other
 * in the transport's release; aborted at once where the transport has aborted. */
void pn_nccl_retire_comm(pn_comm *c, ncclComm_t *comm);

/* Aborts every communicator of the transport, once (after a failure anywhere). */
void pn_nccl_abort_all(pn_comm *c);

/* Whether any rank failed (rc) to start its part: then every rank aborts what it
 * started and returns its own rc. Collective. */
int pn_nccl_started_everywhere(pn_comm *c, int rc);

/* The stage links (transport_nccl_link.c). */
int pn_nccl_link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out);
void pn_nccl_link_free(pn_link *l);
int pn_nccl_link_post_recv(pn_link *l, int micro);
int pn_nccl_link_recv(pn_link *l, long step, int micro, pn_matrix *into, bool add);
const int *pn_nccl_link_lengths(const pn_link *l, int micro);
int pn_nccl_link_send(pn_link *l, long step, int micro, const pn_matrix *m, const int *lengths);
int pn_nccl_link_wait_sends(pn_link *l);
void pn_nccl_link_cancel(pn_link *l);
int pn_nccl_links_ready(pn_comm *c);

#endif
