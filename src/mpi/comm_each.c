/* Rank 0 hands every rank bytes of their own, one rank at a time (comm.h), so that
 * rank 0 never holds more than one rank's part besides what it already has: the
 * rows of a sharded table that each owner loads from a snapshot. */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <string.h>

#include "base/error.h"
#include "mpi/mpi_check.h"

static const pn_wait_for PARTS = {"the scatter of their parts from rank 0 to", NULL, -1,
                                  PN_SCOPE_WORLD};

enum { FAILED = 0 }; /* header[0]: whether rank 0 has a part to send */

/* MPI counts are ints: a part travels in pieces. */
static const size_t PIECE = (size_t)1 << 28;

static int move(pn_comm *c, bool send, void *bytes, size_t n, int peer)
{
    for (size_t done = 0; done < n; done += PIECE) {
        int part = (int)(n - done < PIECE ? n - done : PIECE);
        MPI_Request r;
        if (send)
            PN_MPI_CHECK(MPI_Isend((char *)bytes + done, part, MPI_BYTE, peer, c->image_tag,
                                   c->world, &r));
        else
            PN_MPI_CHECK(MPI_Irecv((char *)bytes + done, part, MPI_BYTE, peer, c->image_tag,
                                   c->world, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &PARTS));
    }
    return PN_OK;
}

/* A peer: the header (whether rank 0 has its part, and its size), then the part. */
static int receive_part(pn_comm *c, void *mine, size_t n)
{
    unsigned long header[2] = {0, 0};
    MPI_Request r;
    PN_MPI_CHECK(MPI_Irecv(header, 2, MPI_UNSIGNED_LONG, 0, c->image_tag, c->world, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &PARTS));
    if (header[0] == FAILED)
        return pn_error_set(PN_ERR_PEER, "rank 0 could not make this rank's part");
    if (header[1] != n)
        return pn_error_set(PN_ERR_INTERNAL, "rank 0 sends a part of %lu bytes, this rank "
                            "expects %zu", header[1], n);
    return move(c, false, mine, n, 0);
}

int pn_comm_scatter_each(pn_comm *c, pn_comm_give_fn give, void *ctx, void *mine, size_t n)
{
    const pn_grid *g = &c->grid;
    if (g->rank != 0) return receive_part(c, mine, n);
    const void *part = NULL;
    size_t bytes = 0;
    int given = give(ctx, 0, &part, &bytes);
    if (given == PN_OK && bytes != n)
        given = pn_error_set(PN_ERR_INTERNAL, "rank 0's part is %zu bytes, not %zu", bytes, n);
    if (given == PN_OK && n) memcpy(mine, part, n);
    for (int peer = 1; peer < g->size; peer++) {
        /* after a failure the others still hear so, rather than wait for ever */
        if (given == PN_OK) given = give(ctx, peer, &part, &bytes);
        unsigned long header[2] = {given == PN_OK, given == PN_OK ? bytes : 0};
        MPI_Request r;
        PN_MPI_CHECK(MPI_Isend(header, 2, MPI_UNSIGNED_LONG, peer, c->image_tag, c->world, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &PARTS));
        if (given == PN_OK) PN_TRY(move(c, true, (void *)part, bytes, peer));
    }
    return given;
}
