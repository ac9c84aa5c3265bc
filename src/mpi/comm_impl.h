/* Inside the communication seam (comm.h): the communicators of a pn_comm and the
 * transport table that moves the data plane (stage links, gradient buckets, replica
 * gathers). A transport is one static const table, like a math backend; comm.c
 * dispatches to it (links, buckets, replica gathers, the pipe exchange of tied
 * gradients). There are two: MPI (transport_mpi.c, host memory, device memory
 * staged through it) and NCCL (transport_nccl.c, device memory, built into the CUDA
 * module where the build has NCCL), picked in pn_comm_use_transport; the control
 * plane (status, scalars, snapshot gathers) stays on MPI. Only files under src/mpi
 * include this header. */
#ifndef PN_COMM_IMPL_H
#define PN_COMM_IMPL_H

#include <mpi.h>
#include <stdbool.h>

#include "mpi/comm.h"

/* Bytes kept of a host's name (with its NUL): enough for cluster node names, and
 * small enough to gather every rank's at start. */
enum { PN_HOST_CAP = 64 };

/* A transport's name is its request's in pn_transport_requests (the one list of the
 * names): the comm keeps which one it took (transport_kind), the table has none. */
typedef struct pn_transport {
    int (*link_create)(pn_comm *c, const pn_link_spec *spec, pn_link **out);
    void (*link_free)(pn_link *l);
    int (*link_post_recv)(pn_link *l, int micro);
    int (*link_recv)(pn_link *l, long step, int micro, pn_matrix *into, bool add);
    const int *(*link_lengths)(const pn_link *l, int micro);
    int (*link_send)(pn_link *l, long step, int micro, const pn_matrix *m, const int *lengths);
    int (*link_wait_sends)(pn_link *l);
    void (*link_cancel)(pn_link *l);
    int (*bucket_start)(pn_comm *c, pn_matrix *m);
    int (*buckets_wait)(pn_comm *c);
    /* Optional (NULL: the stage all-reduces instead; both transports have it): a
     * bucket summed on replica root only, in place there; waited for with the others
     * by buckets_wait. */
    int (*bucket_reduce_start)(pn_comm *c, pn_matrix *m, int root);
    int (*gather_replicas)(pn_comm *c, const pn_matrix *mine, pn_matrix *all);
    int (*exchange_replicas)(pn_comm *c, const pn_matrix *send, pn_matrix *recv);
    int (*pipe_exchange)(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                         int n_recv, pn_matrix *recv, const int *from);
    void (*release)(pn_comm *c); /* frees transport_state */
    /* Optional (NULL: nothing to do). start: collective, makes the transport's state
     * when it is picked; links_ready: collective, after every link is made; abort:
     * after a failure anywhere (an agreement that says so, a stall), so that nothing
     * of the transport waits forever; the job then ends. */
    int (*start)(pn_comm *c);
    int (*links_ready)(pn_comm *c);
    void (*abort)(pn_comm *c);
} pn_transport;

/* An owner exchange in flight (comm_owner.c): its requests, what its wait is named,
 * and its counts and displacements (ids sent, ids received, floats sent and
 * received), 6 x replicas, which MPI reads until it completes. */
typedef struct pn_owner_pending {
    MPI_Request req[2];
    int n;               /* requests started; 0: none in flight */
    const char *op, *event;
    double t0;
    int *at;
} pn_owner_pending;

struct pn_comm {
    pn_grid grid;
    MPI_Comm world;    /* a duplicate of the job's communicator, errors returned */
    MPI_Comm pipe;     /* this replica's stages, rank = stage */
    MPI_Comm replicas; /* this stage's replicas, rank = replica */
    MPI_Comm watch;    /* the watchdog's census after a stall (watch.c), apart from data */
    int node;          /* the lowest world rank on this rank's node: names the node */
    char *hosts;       /* every rank's host name (MPI_Get_processor_name), PN_HOST_CAP
                          bytes a rank: gathered once at creation, so that a stall's
                          message can name the host of a rank that no longer answers */
    int image_tag;     /* arena images on pipe: MPI_TAG_UB, above every link's tag */
    int tie_tag;       /* tied gradients on pipe: image_tag - 1, also above the links' */
    const pn_transport *transport;
    pn_transport_request transport_kind; /* which of pn_transport_requests it is */
    void *transport_state;
    double stall_s;    /* pn_comm_watch: a wait this long ends the job; 0: never */
    char doing[80];    /* pn_comm_watch: the work, for the message */
    char bound[64];    /* pn_comm_watch_as: what set stall_s, for the message */
    bool lower_stalled; /* a lower rank timed out and reports the stall */
    int *gather_at;     /* pn_comm_gather_rows' displacements and counts, 3 x replicas:
                           made once, so that a step allocates nothing */
    pn_owner_pending *owner; /* [PN_OWNER_ALL + 1] owner exchanges in flight: the
                           slots pn_comm_owner_exchange_start names, then the
                           blocking calls' own; their displacements made once */
    double row_bytes_sent; /* pn_comm_row_bytes_sent: the row-sparse exchanges' bytes */
    double link_bytes_sent; /* pn_comm_link_bytes_sent: the stage links' payloads */
};

/* What a wait is for, named in the message when it stalls. */
typedef struct pn_wait_for {
    const char *op;        /* "the receive of", "a sum over", ... */
    const pn_link *link;   /* the link waited on, or NULL: a collective over scope */
    int micro;             /* the link's micro-batch, or -1 */
    pn_comm_scope scope;
} pn_wait_for;

/* Something a wait polls: test sets *done once it has completed (an error ends the
 * wait); give_up, when not NULL, is called once a watched wait gives up on it (the
 * NCCL transport aborts its communicators there, so no kernel waits forever). */
typedef struct pn_poll {
    int (*test)(void *ctx, bool *done);
    void (*give_up)(void *ctx);
    void *ctx;
} pn_poll;

/* Polls p until it is done, watched (watch.c) while a stall bound is set: PN_ERR_STALL
 * when it has not completed within it; waits past half a second nap between polls.
 * Every wait of the seam goes through here, MPI's (pn_comm_wait) and NCCL's. */
int pn_comm_poll(pn_comm *c, const pn_poll *p, const pn_wait_for *what);

/* Waits for reqs[0 .. n) (statuses may be MPI_STATUSES_IGNORE), as MPI_Waitall, but
 * through pn_comm_poll while a stall bound is set. */
int pn_comm_wait(pn_comm *c, int n, MPI_Request *reqs, MPI_Status *statuses,
                 const pn_wait_for *what);

/* What every transport's link starts with. transport: the table that moves this
 * link (the NCCL transport leaves a stage's links to itself to MPI). */
struct pn_link {
    pn_link_spec spec;
    pn_comm *comm;
    const pn_transport *transport;
};

extern const pn_transport pn_transport_mpi;
/* The NCCL transport is in the CUDA module (math/cuda_module.h): its descriptor's
 * nccl_transport, a pn_transport, where the module was built with NCCL. */

#endif
