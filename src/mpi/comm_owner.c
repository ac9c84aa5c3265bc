/* The owner exchange (comm.h): all-to-all exchanges within a stage's replicas, for
 * tables sharded by rows over them (row id -> replica id mod D). Host memory over
 * MPI on the control plane's communicator c->replicas, whatever the transport. */
#include "mpi/comm_impl.h"

#include <limits.h>

#include "base/error.h"
#include "base/trace.h"
#include "mpi/mpi_check.h"

/* Posts the counts' all-to-all in pending slot p. The counts wait for the slowest
 * replica, so their event is where the exchange's synchronization shows in a
 * timeline (finish). */
static int start_counts(pn_comm *c, pn_owner_pending *p, const int *send_counts,
                        int *recv_counts)
{
    if (p->n) return pn_error_set(PN_ERR_INTERNAL, "owner exchange: a slot started twice");
    c->row_bytes_sent += (double)sizeof(int) * (c->grid.replicas - 1);
    p->op = "the owner counts of";
    p->event = "owner exchange: counts";
    p->t0 = PN_TRACE_T0();
    PN_MPI_CHECK(MPI_Ialltoall(send_counts, 1, MPI_INT, recv_counts, 1, MPI_INT, c->replicas,
                               &p->req[0]));
    p->n = 1;
    return PN_OK;
}

static int finish(pn_comm *c, pn_owner_pending *p);

int pn_comm_owner_counts(pn_comm *c, const int *send_counts, int *recv_counts)
{
    pn_owner_pending *p = &c->owner[PN_OWNER_ALL];
    PN_TRY(start_counts(c, p, send_counts, recv_counts));
    return finish(c, p);
}

/* counts[0 .. d) (none negative) -> their sum into *total; displacements of the
 * entries into at and, with width, counts and displacements of the floats into
 * fcounts and fat. false when a count is negative or a sum (of entries, or of
 * floats) passes INT_MAX, which MPI's int counts and displacements cannot hold. */
static bool lay_out(const int *counts, int d, int width, long *total, int *at, int *fcounts,
                    int *fat)
{
    long k = 0;
    for (int r = 0; r < d; r++) {
        if (counts[r] < 0 || k + counts[r] > INT_MAX || (k + counts[r]) * width > INT_MAX)
            return false;
        at[r] = (int)k;
        fat[r] = (int)(k * width);
        fcounts[r] = counts[r] * width; /* at most (k + counts[r]) * width */
        k += counts[r];
    }
    *total = k;
    return true;
}

static bool host_dense(const pn_matrix *m)
{
    return m->device.kind == PN_DEVICE_HOST && pn_matrix_dense(*m);
}

/* Posts an exchange in pending slot p (its requests and displacements). */
static int start(pn_comm *c, pn_owner_pending *p, const int *send_counts, const int *ids,
                 const pn_matrix *rows, const int *recv_counts, int *recv_ids,
                 pn_matrix *recv_rows)
{
    int d = c->grid.replicas;
    if (p->n)
        return pn_error_set(PN_ERR_INTERNAL, "owner exchange: a slot started twice");
    if (!ids != !recv_ids || !rows != !recv_rows || (!ids && !rows))
        return pn_error_set(PN_ERR_INTERNAL,
                            "owner exchange: ids %s/%s, rows %s/%s (sent/received)",
                            ids ? "given" : "absent", recv_ids ? "given" : "absent",
                            rows ? "given" : "absent", recv_rows ? "given" : "absent");
    if (rows && (!host_dense(rows) || !host_dense(recv_rows) || rows->cols != recv_rows->cols))
        return pn_error_set(PN_ERR_INTERNAL, "owner exchange: %d x %d rows (%s) into %d x %d (%s)",
                            rows->rows, rows->cols, host_dense(rows) ? "host" : "not dense host",
                            recv_rows->rows, recv_rows->cols,
                            host_dense(recv_rows) ? "host" : "not dense host");
    int width = rows ? rows->cols : 1;
    /* the ids' displacements sent and received, then the floats' counts and displacements */
    int *sat = p->at, *rat = sat + d, *sf = sat + 2 * d, *sfat = sat + 3 * d,
        *rf = sat + 4 * d, *rfat = sat + 5 * d;
    long sent, received;
    if (!lay_out(send_counts, d, width, &sent, sat, sf, sfat) ||
        !lay_out(recv_counts, d, width, &received, rat, rf, rfat))
        return pn_error_set(PN_ERR_INTERNAL, "owner exchange over %d replicas: a count below 0, or "
                            "more than %d entries%s sent or received", d, INT_MAX,
                            rows ? " times the rows' width" : "");
    if (rows && (rows->rows != sent || recv_rows->rows != received))
        return pn_error_set(PN_ERR_INTERNAL, "owner exchange: %d rows for %ld entries sent, %d "
                            "for %ld received", rows->rows, sent, recv_rows->rows, received);
    /* what the wait names (watch.c: "<op> the D replicas of stage s"), by what travels:
     * a pull's request (ids), its reply (rows) or a push (ids and their gradient rows) */
    p->op = !rows ? "the requested row ids of" : !ids ? "the table rows of" : "the row gradients of";
    p->event = !rows ? "owner exchange: ids"
               : !ids ? "owner exchange: rows" : "owner exchange: ids and rows";
    /* what leaves this rank: its share for itself stays in memory */
    size_t entry = (ids ? sizeof(int) : 0) + (rows ? (size_t)width * sizeof(float) : 0);
    for (int r = 0; r < d; r++)
        if (r != c->grid.replica) c->row_bytes_sent += (double)send_counts[r] * (double)entry;
    p->t0 = PN_TRACE_T0();
    int rc = MPI_SUCCESS;
    if (ids) {
        rc = MPI_Ialltoallv(ids, send_counts, sat, MPI_INT, recv_ids, recv_counts, rat, MPI_INT,
                            c->replicas, &p->req[p->n]);
        if (rc == MPI_SUCCESS) p->n++;
    }
    if (rc == MPI_SUCCESS && rows) {
        rc = MPI_Ialltoallv(rows->data, sf, sfat, MPI_FLOAT, recv_rows->data, rf, rfat, MPI_FLOAT,
                            c->replicas, &p->req[p->n]);
        if (rc == MPI_SUCCESS) p->n++;
    }
    return rc == MPI_SUCCESS ? PN_OK : pn_mpi_fail(rc, "MPI_Ialltoallv", __FILE__, __LINE__);
}

/* Waits for what slot p started: also after a failure to start part of it, so that
 * nothing writes into the caller's buffers once this returns. */
static int finish(pn_comm *c, pn_owner_pending *p)
{
    /* traced: what this rank waits for an exchange, from its post for a blocking one,
     * from the wait for one started early (a push, a pull ahead), whose flight is the
     * work between, not time lost */
    double t0 = p == &c->owner[PN_OWNER_ALL] ? p->t0 : PN_TRACE_T0();
    int n = p->n;
    p->n = 0;
    int rc = n > 0 ? pn_comm_wait(c, n, p->req, MPI_STATUSES_IGNORE,
                                  &(pn_wait_for){p->op, NULL, -1, PN_SCOPE_REPLICAS})
                   : PN_OK;
    if (n > 0) PN_TRACE(p->event, "comm", NULL, -1, -1, t0);
    return rc;
}

static int check_slot(int slot)
{
    return slot >= 0 && slot < PN_OWNER_ALL
               ? PN_OK
               : pn_error_set(PN_ERR_INTERNAL, "owner exchange slot %d of %d", slot, PN_OWNER_ALL);
}

int pn_comm_owner_exchange(pn_comm *c, const int *send_counts, const int *ids,
                           const pn_matrix *rows, const int *recv_counts, int *recv_ids,
                           pn_matrix *recv_rows)
{
    pn_owner_pending *p = &c->owner[PN_OWNER_ALL];
    int rc = start(c, p, send_counts, ids, rows, recv_counts, recv_ids, recv_rows);
    int done = finish(c, p);
    return rc < 0 ? rc : done;
}

int pn_comm_owner_exchange_start(pn_comm *c, int slot, const int *send_counts, const int *ids,
                                 const pn_matrix *rows, const int *recv_counts, int *recv_ids,
                                 pn_matrix *recv_rows)
{
    PN_TRY(check_slot(slot));
    pn_owner_pending *p = &c->owner[slot];
    int rc = start(c, p, send_counts, ids, rows, recv_counts, recv_ids, recv_rows);
    if (rc < 0) (void)finish(c, p); /* what started is waited for before the error returns */
    return rc;
}

int pn_comm_owner_exchange_finish(pn_comm *c, int slot)
{
    PN_TRY(check_slot(slot));
    return finish(c, &c->owner[slot]);
}

int pn_comm_owner_counts_start(pn_comm *c, int slot, const int *send_counts, int *recv_counts)
{
    PN_TRY(check_slot(slot));
    return start_counts(c, &c->owner[slot], send_counts, recv_counts);
}

int pn_comm_owner_progress(pn_comm *c)
{
    for (int k = 0; k < PN_OWNER_ALL; k++) {
        pn_owner_pending *p = &c->owner[k];
        int done = 0;
        /* completed requests become MPI_REQUEST_NULL, which the finish's wait passes */
        if (p->n) PN_MPI_CHECK(MPI_Testall(p->n, p->req, &done, MPI_STATUSES_IGNORE));
    }
    return PN_OK;
}
