/* The two collectives behind `pipenet train --trace` (comm.h): every rank's clock
 * against rank 0's, and the gather of every rank's bytes to rank 0 one rank at a
 * time, so that rank 0 never holds more than one rank's part besides its own (the
 * trace's events; also the rows of sharded tables a snapshot writes). */
#include "mpi/comm_impl.h"

#include <stdlib.h>

#include "base/clock.h"
#include "base/error.h"
#include "mpi/mpi_check.h"

static const pn_wait_for CLOCKS = {"the comparison of clocks with rank 0 among", NULL, -1,
                                   PN_SCOPE_WORLD};
static const pn_wait_for EVENTS = {"the gather of every rank's part to rank 0 from", NULL, -1,
                                   PN_SCOPE_WORLD};

enum { ROUNDS = 8 };

/* One round trip of rank 0 with peer: rank 0 sends nothing, peer answers with its
 * clock. */
static int ping(pn_comm *c, int peer, double *remote)
{
    MPI_Request r[2];
    PN_MPI_CHECK(MPI_Irecv(remote, 1, MPI_DOUBLE, peer, c->image_tag, c->world, &r[0]));
    PN_MPI_CHECK(MPI_Isend(NULL, 0, MPI_BYTE, peer, c->image_tag, c->world, &r[1]));
    return pn_comm_wait(c, 2, r, MPI_STATUSES_IGNORE, &CLOCKS);
}

static int pong(pn_comm *c)
{
    MPI_Request r;
    PN_MPI_CHECK(MPI_Irecv(NULL, 0, MPI_BYTE, 0, c->image_tag, c->world, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &CLOCKS));
    double now = pn_now();
    PN_MPI_CHECK(MPI_Isend(&now, 1, MPI_DOUBLE, 0, c->image_tag, c->world, &r));
    return pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &CLOCKS);
}

int pn_comm_clock_offset(pn_comm *c, double *offset, double *origin)
{
    const pn_grid *g = &c->grid;
    double *offsets = NULL;
    *offset = 0.0;
    if (g->rank == 0 && !(offsets = calloc((size_t)g->size, sizeof *offsets)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    int rc = PN_OK;
    if (g->rank == 0) { /* the round trip of least delay tells best */
        for (int peer = 1; rc == PN_OK && peer < g->size; peer++) {
            double best = -1.0;
            for (int k = 0; rc == PN_OK && k < ROUNDS; k++) {
                double remote, t0 = pn_now();
                rc = ping(c, peer, &remote);
                double t1 = pn_now();
                if (rc == PN_OK && (best < 0 || t1 - t0 < best)) {
                    best = t1 - t0;
                    offsets[peer] = 0.5 * (t0 + t1) - remote;
                }
            }
        }
    } else {
        for (int k = 0; rc == PN_OK && k < ROUNDS; k++) rc = pong(c);
    }
    MPI_Request r;
    if (rc == PN_OK && (rc = MPI_Iscatter(offsets, 1, MPI_DOUBLE, offset, 1, MPI_DOUBLE, 0,
                                          c->world, &r)) != MPI_SUCCESS)
        rc = pn_mpi_fail(rc, "MPI_Iscatter", __FILE__, __LINE__);
    else if (rc == PN_OK)
        rc = pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &CLOCKS);
    free(offsets);
    PN_TRY(rc);
    *origin = pn_now() + *offset; /* rank 0's, broadcast: the timeline's zero */
    MPI_Request b;
    PN_MPI_CHECK(MPI_Ibcast(origin, 1, MPI_DOUBLE, 0, c->world, &b));
    return pn_comm_wait(c, 1, &b, MPI_STATUSES_IGNORE, &CLOCKS);
}

/* Rank 0 receives rank peer's bytes and hands them to take (unless an earlier
 * take failed: the bytes are still received, so that no sender waits for ever). */
static int receive_from(pn_comm *c, int peer, int *taken, pn_comm_take_fn take, void *ctx)
{
    unsigned long n = 0;
    MPI_Request r;
    PN_MPI_CHECK(MPI_Irecv(&n, 1, MPI_UNSIGNED_LONG, peer, c->image_tag, c->world, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &EVENTS));
    char *buf = malloc(n ? n : 1);
    if (!buf) return pn_error_set(PN_ERR_NOMEM, "out of memory for rank %d's part", peer);
    int rc = PN_OK;
    for (unsigned long done = 0; rc == PN_OK && done < n; done += 1UL << 28) {
        int part = (int)(n - done < (1UL << 28) ? n - done : (1UL << 28));
        if ((rc = MPI_Irecv(buf + done, part, MPI_BYTE, peer, c->image_tag, c->world, &r)) !=
            MPI_SUCCESS)
            rc = pn_mpi_fail(rc, "MPI_Irecv", __FILE__, __LINE__);
        else
            rc = pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &EVENTS);
    }
    if (rc == PN_OK && *taken == PN_OK) *taken = take(ctx, peer, buf, n);
    free(buf);
    return rc;
}

int pn_comm_gather_each(pn_comm *c, const void *mine, size_t n, pn_comm_take_fn take, void *ctx)
{
    const pn_grid *g = &c->grid;
    MPI_Request r;
    if (g->rank != 0) {
        unsigned long count = n;
        PN_MPI_CHECK(MPI_Isend(&count, 1, MPI_UNSIGNED_LONG, 0, c->image_tag, c->world, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &EVENTS));
        for (size_t done = 0; done < n; done += (size_t)1 << 28) {
            int part = (int)(n - done < ((size_t)1 << 28) ? n - done : ((size_t)1 << 28));
            PN_MPI_CHECK(MPI_Isend((const char *)mine + done, part, MPI_BYTE, 0, c->image_tag,
                                   c->world, &r));
            PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &EVENTS));
        }
        return PN_OK;
    }
    int taken = take(ctx, 0, mine, n);
    for (int peer = 1; peer < g->size; peer++) PN_TRY(receive_from(c, peer, &taken, take, ctx));
    return taken;
}
