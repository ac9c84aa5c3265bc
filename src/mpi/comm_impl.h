/* Inside the communication seam (comm.h): the communicators of a pn_comm and the
 * transport table that moves the data plane (stage links, gradient buckets, replica
 * gathers). A transport is one static const table, like a math backend; comm.c
 * dispatches to it. Today there is the MPI transport (transport_mpi.c, host
 * memory); a device transport (NCCL) is a second table beside it, picked in
 * pn_comm_create, while the control plane (status, scalars, snapshot gathers) stays
 * on MPI. Only files under src/mpi include this header. */
#ifndef PN_COMM_IMPL_H
#define PN_COMM_IMPL_H

#include <mpi.h>

#include "mpi/comm.h"

typedef struct pn_transport {
    const char *name;
    int (*link_create)(pn_comm *c, const pn_link_spec *spec, pn_link **out);
    void (*link_free)(pn_link *l);
    int (*link_post_recv)(pn_link *l, int micro);
    int (*link_recv)(pn_link *l, long step, int micro, pn_matrix *into, bool add);
    int (*link_send)(pn_link *l, long step, int micro, const pn_matrix *m);
    int (*link_wait_sends)(pn_link *l);
    void (*link_cancel)(pn_link *l);
    int (*bucket_start)(pn_comm *c, pn_matrix *m);
    int (*buckets_wait)(pn_comm *c);
    int (*gather_replicas)(pn_comm *c, const pn_matrix *mine, pn_matrix *all);
    void (*release)(pn_comm *c); /* frees transport_state */
} pn_transport;

struct pn_comm {
    pn_grid grid;
    MPI_Comm world;    /* a duplicate of the job's communicator, errors returned */
    MPI_Comm pipe;     /* this replica's stages, rank = stage */
    MPI_Comm replicas; /* this stage's replicas, rank = replica */
    int image_tag;     /* arena images on pipe: MPI_TAG_UB, above every link's tag */
    const pn_transport *transport;
    void *transport_state;
};

/* What every transport's link starts with. */
struct pn_link {
    pn_link_spec spec;
    pn_comm *comm;
};

extern const pn_transport pn_transport_mpi;

#endif
