/* Rank layout and collective agreement on failures. */
#include "mpi/grid.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "mpi/mpi_check.h"

int pn_mpi_fail(int code, const char *call, const char *file, int line)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "code %d", code);
    return pn_error_set(PN_ERR_MPI, "%s failed: %s (%s:%d)", call, text, file, line);
}

int pn_grid_create(pn_grid **out, MPI_Comm comm, int stages)
{
    int size, rank;
    PN_MPI_CHECK(MPI_Comm_size(comm, &size));
    PN_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    if (stages < 1)
        return pn_error_set(PN_ERR_INVALID, "--stages must be at least 1, got %d", stages);
    if (size % stages)
        return pn_error_set(PN_ERR_INVALID,
                            "%d ranks cannot hold replicas of a %d-stage pipeline: the number "
                            "of ranks must be a multiple of --stages",
                            size, stages);
    pn_grid *g = calloc(1, sizeof *g);
    if (!g) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    g->world = g->pipe = g->data = MPI_COMM_NULL;
    *out = g;
    g->rank = rank;
    g->size = size;
    g->stages = stages;
    g->replicas = size / stages;
    g->stage = rank % stages;
    g->replica = rank / stages;
    PN_MPI_CHECK(MPI_Comm_dup(comm, &g->world));
    PN_MPI_CHECK(MPI_Comm_set_errhandler(g->world, MPI_ERRORS_RETURN));
    PN_MPI_CHECK(MPI_Comm_split(g->world, g->replica, g->stage, &g->pipe));
    PN_MPI_CHECK(MPI_Comm_split(g->world, g->stage, g->replica, &g->data));
    MPI_Comm node;
    PN_MPI_CHECK(MPI_Comm_split_type(g->world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    PN_MPI_CHECK(MPI_Comm_size(node, &g->local_ranks));
    PN_MPI_CHECK(MPI_Comm_free(&node));
    return PN_OK;
}

void pn_grid_free(pn_grid *g)
{
    if (!g) return;
    MPI_Comm *comms[] = {&g->pipe, &g->data, &g->world};
    for (int i = 0; i < 3; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    free(g);
}

int pn_grid_rank_of(const pn_grid *g, int replica, int stage) { return replica * g->stages + stage; }

int pn_grid_agree(const pn_grid *g, int rc)
{
    int mine = rc < 0 ? g->rank : g->size, first;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, g->world) != MPI_SUCCESS)
        return rc < 0 ? rc : pn_error_set(PN_ERR_MPI, "cannot agree on the outcome with the other ranks");
    if (first == g->size) return PN_OK;
    if (first == g->rank) return rc;
    return pn_error_set(PN_ERR_PEER, "rank %d failed", first);
}
