/* The link probe behind `pipenet plan --measure` (comm.h): ranks 0 and 1 bounce a
 * message back and forth and rank 0 times the round trips, so that the plan can
 * price a stage link (latency + bytes / bandwidth) as this machine and this MPI
 * move it. */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "mpi/mpi_check.h"

static const pn_wait_for PROBE = {"the link probe between ranks 0 and 1 of", NULL, -1,
                                  PN_SCOPE_WORLD};

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One round trip: the first side sends then receives, the second receives then
 * sends back the same bytes. */
static int bounce(pn_comm *c, char *buf, int n, int peer, bool first)
{
    MPI_Request r;
    if (first) {
        PN_MPI_CHECK(MPI_Isend(buf, n, MPI_BYTE, peer, c->image_tag, c->world, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUS_IGNORE, &PROBE));
    }
    PN_MPI_CHECK(MPI_Irecv(buf, n, MPI_BYTE, peer, c->image_tag, c->world, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUS_IGNORE, &PROBE));
    if (!first) {
        PN_MPI_CHECK(MPI_Isend(buf, n, MPI_BYTE, peer, c->image_tag, c->world, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUS_IGNORE, &PROBE));
    }
    return PN_OK;
}

int pn_comm_pingpong(pn_comm *c, size_t bytes, int reps, double *seconds)
{
    const pn_grid *g = &c->grid;
    *seconds = 0.0;
    if (g->size < 2 || g->rank > 1) return PN_OK;
    if (bytes > INT_MAX || reps < 1)
        return pn_error_set(PN_ERR_INVALID, "link probe of %zu bytes x %d: expected at most "
                            "%d bytes and at least one round", bytes, reps, INT_MAX);
    char *buf = malloc(bytes ? bytes : 1);
    double *trip = malloc((size_t)reps * sizeof *trip);
    int rc = buf && trip ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (buf) memset(buf, 0, bytes ? bytes : 1);
    int peer = 1 - g->rank;
    for (int k = 0; rc == PN_OK && k < reps; k++) {
        double t0 = pn_now();
        rc = bounce(c, buf, (int)bytes, peer, g->rank == 0);
        trip[k] = pn_now() - t0;
    }
    if (rc == PN_OK && g->rank == 0) {
        qsort(trip, (size_t)reps, sizeof *trip, by_value);
        *seconds = 0.5 * trip[reps / 2];
    }
    free(buf);
    free(trip);
    return rc;
}
