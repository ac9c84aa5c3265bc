/* pn_grid: the layout of a job's ranks. World = D replicas x P stages; rank r runs
 * stage r % P of replica r / P. The ranks of one replica form its pipe (rank in the
 * pipe == stage); the ranks that hold one stage form its replica group (rank in the
 * group == replica). Plain data: mpi/comm.h makes the communicators behind it. */
#ifndef PN_GRID_H
#define PN_GRID_H

typedef struct pn_grid {
    int rank, size;
    int stages, replicas;
    int stage, replica;
    int local_ranks; /* ranks of this job on this node */
} pn_grid;

/* World rank of (replica, stage). */
static inline int pn_grid_rank_of(const pn_grid *g, int replica, int stage)
{
    return replica * g->stages + stage;
}

#endif
