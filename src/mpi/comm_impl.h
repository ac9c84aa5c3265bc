/* Inside the communication seam (comm.h): the communicators of a pn_comm and the
 * transport table that moves the data plane (stage links, gradient buckets, replica
 * gathers). A transport is one static const table, like a math backend; comm.c
 * dispatches to it (links, buckets, replica gathers, the pipe exchange of tied
 * gradients). Today there is the MPI transport (transport_mpi.c, host
 * memory); a device transport (NCCL) is a second table beside it, picked in
 * pn_comm_create, while the control plane (status, scalars, snapshot gathers) stays
 * on MPI. Only files under src/mpi include this header. */
#ifndef PN_COMM_IMPL_H
#define PN_COMM_IMPL_H

#include <mpi.h>
#include <stdbool.h>

#include "mpi/comm.h"

typedef struct pn_transport {
    const char *name;
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
    int (*gather_replicas)(pn_comm *c, const pn_matrix *mine, pn_matrix *all);
    int (*pipe_exchange)(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                         int n_recv, pn_matrix *recv, const int *from);
    void (*release)(pn_comm *c); /* frees transport_state */
} pn_transport;

struct pn_comm {
    pn_grid grid;
    MPI_Comm world;    /* a duplicate of the job's communicator, errors returned */
    MPI_Comm pipe;     /* this replica's stages, rank = stage */
    MPI_Comm replicas; /* this stage's replicas, rank = replica */
    MPI_Comm watch;    /* the watchdog's census after a stall (watch.c), apart from data */
    int image_tag;     /* arena images on pipe: MPI_TAG_UB, above every link's tag */
    int tie_tag;       /* tied gradients on pipe: image_tag - 1, also above the links' */
    const pn_transport *transport;
    void *transport_state;
    double stall_s;    /* pn_comm_watch: a wait this long ends the job; 0: never */
    char doing[80];    /* pn_comm_watch: the work, for the message */
    bool lower_stalled; /* a lower rank timed out and reports the stall */
};

/* What a wait is for, named in the message when it stalls. */
typedef struct pn_wait_for {
    const char *op;        /* "the receive of", "a sum over", ... */
    const pn_link *link;   /* the link waited on, or NULL: a collective over scope */
    int micro;             /* the link's micro-batch, or -1 */
    pn_comm_scope scope;
} pn_wait_for;

/* Waits for reqs[0 .. n) (statuses may be MPI_STATUSES_IGNORE), as MPI_Waitall but
 * watched (watch.c) while a stall bound is set: PN_ERR_STALL when they have not
 * completed within it; waits past half a second nap between polls. Every wait of the
 * seam goes through here. */
int pn_comm_wait(pn_comm *c, int n, MPI_Request *reqs, MPI_Status *statuses,
                 const pn_wait_for *what);

/* What every transport's link starts with. */
struct pn_link {
    pn_link_spec spec;
    pn_comm *comm;
};

extern const pn_transport pn_transport_mpi;

#endif
