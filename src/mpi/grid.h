/* pn_grid: the layout of a job's ranks. World = D replicas x P stages; rank r runs
 * stage r % P of replica r / P. The pipe communicator joins the stages of one
 * replica (rank in pipe == stage); the data communicator joins the replicas of one
 * stage (rank in data == replica). The files under src/mpi hold everything that
 * talks MPI, so the rest of the engine stays testable without it. */
#ifndef PN_GRID_H
#define PN_GRID_H

#include <mpi.h>

typedef struct pn_grid {
    MPI_Comm world; /* a duplicate of the job's communicator */
    int rank, size;
    int stages, replicas;
    int stage, replica;
    MPI_Comm pipe, data;
    int local_ranks; /* ranks of this job on this node */
} pn_grid;

/* Splits comm into stages x (size / stages). Errors (same on every rank, no
 * communication needed): stages < 1 or a size that stages does not divide. */
int pn_grid_create(pn_grid **out, MPI_Comm comm, int stages);
void pn_grid_free(pn_grid *g);

/* World rank of (replica, stage). */
int pn_grid_rank_of(const pn_grid *g, int replica, int stage);

/* Every rank passes its status; all get the same answer: 0 when every rank passed 0,
 * otherwise the status of the lowest failing rank on that rank and PN_ERR_PEER on
 * the others (whose message then says which rank failed). */
int pn_grid_agree(const pn_grid *g, int rc);

#endif
