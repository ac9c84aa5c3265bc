/* The pull and push of tables sharded by rows across a stage's replicas
 * (shard_rows.h). MPI moves host memory: on a GPU the rows pass through host
 * buffers here; the gathers and scatters run on the table's device. */
#include "pipeline/shard_rows.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/trace.h"
#include "math/ops.h"

/* One exchange's own buffers (the pull's, or a push's in flight), host memory. */
typedef struct lanes {
    int *send_counts, *recv_counts; /* [d] each */
    pn_buffer ids_out;              /* ids grouped by owner */
    pn_buffer order;                /* where each id or entry went in ids_out */
    pn_buffer from;                 /* a push: the entry each row sent comes from */
    pn_buffer rows_out, rows_in;    /* rows sent, rows received */
    int in;                         /* a push: entries coming */
} lanes;

/* A pull posted ahead of the forward that takes it (pn_shard_rows_ahead_*). */
typedef struct ahead {
    lanes l;
    pn_buffer asked;                /* host: the ids this rank asks for, a copy */
    pn_buffer ids_in;               /* host: the ids the others ask this owner for */
    int param, n;                   /* the table, and how many ids asked */
    int phase;                      /* AHEAD_* */
    long step;                      /* for the trace */
    int micro;
} ahead;

enum { AHEAD_IDLE, AHEAD_ASKED, AHEAD_SENT, AHEAD_ANSWERED };

struct pn_shard_rows {
    pn_comm *comm;
    int d, me;
    pn_row_puller puller;
    lanes pull, push[PN_OWNER_SLOTS];
    ahead ahead[PN_OWNER_AHEAD_SLOTS];
    int take_next, take_left;       /* the forward's next pulls take these entries */
    pn_buffer ids_in;               /* host: the ids a pull asks this owner for */
    pn_buffer dev_ints;             /* indices on the table's device */
    pn_buffer rows_dev;             /* rows on the table's device */
};

/* Exchange slot of ahead entry e: after the pushes'. */
static int ahead_slot(int e) { return PN_OWNER_SLOTS + e; }

static int pull(void *ctx, const pn_params *arena, int param, const int *ids, int n,
                pn_matrix *out);

int pn_shard_rows_create(pn_shard_rows **out, pn_comm *comm)
{
    const pn_grid *g = pn_comm_grid(comm);
    pn_shard_rows *x = calloc(1, sizeof *x);
    if (!x) return pn_error_set(PN_ERR_NOMEM, "out of memory for the sharded tables' exchange");
    *out = x;
    x->comm = comm;
    x->d = g->replicas;
    x->me = g->replica;
    x->puller = (pn_row_puller){pull, x};
    for (int k = 0; k <= PN_OWNER_ALL; k++) {
        lanes *l = k < PN_OWNER_SLOTS ? &x->push[k]
                   : k < PN_OWNER_ALL ? &x->ahead[k - PN_OWNER_SLOTS].l
                                      : &x->pull;
        if (!(l->send_counts = calloc(2 * (size_t)x->d, sizeof(int))))
            return pn_error_set(PN_ERR_NOMEM, "out of memory for the sharded tables' exchange");
        l->recv_counts = l->send_counts + x->d;
    }
    return PN_OK;
}

static void release_lanes(lanes *l)
{
    pn_buffer *bufs[] = {&l->ids_out, &l->order, &l->from, &l->rows_out, &l->rows_in};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pn_buffer_release(bufs[i]);
    free(l->send_counts);
}

void pn_shard_rows_free(pn_shard_rows *x)
{
    if (!x) return;
    release_lanes(&x->pull);
    for (int k = 0; k < PN_OWNER_SLOTS; k++) release_lanes(&x->push[k]);
    for (int e = 0; e < PN_OWNER_AHEAD_SLOTS; e++) {
        release_lanes(&x->ahead[e].l);
        pn_buffer_release(&x->ahead[e].asked);
        pn_buffer_release(&x->ahead[e].ids_in);
    }
    pn_buffer_release(&x->ids_in);
    pn_buffer_release(&x->dev_ints);
    pn_buffer_release(&x->rows_dev);
    free(x);
}

const pn_row_puller *pn_shard_rows_puller(pn_shard_rows *x) { return &x->puller; }

/* Room for n ints or n rows of width floats (at least one byte). */
static int ints(pn_buffer *b, pn_device dev, long n)
{
    return pn_buffer_reserve(b, dev, (size_t)(n > 0 ? n : 1) * sizeof(int));
}
static int floats(pn_buffer *b, pn_device dev, long n, int width)
{
    if (n * width > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a sharded table's exchange of %ld rows of %d",
                            n, width);
    return pn_buffer_reserve(b, dev, (size_t)(n > 0 ? n * width : 1) * sizeof(float));
}

/* l's ids_out = ids[0..n) grouped by owner (id mod d), in their order within an
 * owner; order[k] = where ids[k] went; send_counts per owner. */
static int group_by_owner(const pn_shard_rows *x, lanes *l, const int *ids, int n)
{
    PN_TRY(ints(&l->ids_out, pn_device_host(), n));
    PN_TRY(ints(&l->order, pn_device_host(), n));
    int *grouped = l->ids_out.data, *order = l->order.data, *at = l->recv_counts;
    for (int r = 0; r < x->d; r++) l->send_counts[r] = 0;
    for (int k = 0; k < n; k++) l->send_counts[ids[k] % x->d]++;
    for (int r = 0, sum = 0; r < x->d; sum += l->send_counts[r], r++) at[r] = sum;
    for (int k = 0; k < n; k++) {
        order[k] = at[ids[k] % x->d]++;
        grouped[order[k]] = ids[k];
    }
    return PN_OK; /* recv_counts was scratch: the counts exchange fills it next */
}

/* out[k] = from[index[k]] on out's device; from and index on the host. */
static int gather_into(pn_shard_rows *x, const pn_matrix *from, const int *index, int n,
                       pn_matrix *out)
{
    if (n == 0) return PN_OK;
    if (out->device.kind == PN_DEVICE_HOST) return pn_gather_rows(from, index, out);
    PN_TRY(ints(&x->dev_ints, out->device, n));
    PN_TRY(floats(&x->rows_dev, out->device, from->rows, from->cols));
    PN_TRY(pn_buffer_write(&x->dev_ints, 0, index, (size_t)n * sizeof(int)));
    pn_matrix staged = pn_matrix_on(&x->rows_dev, from->rows, from->cols);
    PN_TRY(pn_matrix_write(&staged, from->data));
    return pn_gather_rows(&staged, x->dev_ints.data, out);
}

/* host[k] = from[index[k]] for a from on any device; index on the host. */
static int gather_to_host(pn_shard_rows *x, const pn_matrix *from, const int *index, int n,
                          pn_matrix *host)
{
    if (n == 0) return PN_OK;
    if (from->device.kind == PN_DEVICE_HOST) return pn_gather_rows(from, index, host);
    PN_TRY(ints(&x->dev_ints, from->device, n));
    PN_TRY(floats(&x->rows_dev, from->device, n, from->cols));
    PN_TRY(pn_buffer_write(&x->dev_ints, 0, index, (size_t)n * sizeof(int)));
    pn_matrix rows = pn_matrix_on(&x->rows_dev, n, from->cols);
    PN_TRY(pn_gather_rows(from, x->dev_ints.data, &rows));
    return pn_matrix_read(&rows, host->data);
}

static long total(const int *counts, int d)
{
    long n = 0;
    for (int r = 0; r < d; r++) n += counts[r];
    return n;
}

/* The owner's answer to the ids in *ids_in (asked of them, on the host): its local
 * rows id / d gathered into l's rows_out, in the order asked; l's rows_in made room
 * for the n rows that come back. */
static int answer(pn_shard_rows *x, lanes *l, const pn_matrix *table, pn_buffer *ids_in,
                  int n, pn_matrix *rows_out, pn_matrix *rows_in)
{
    long asked = total(l->recv_counts, x->d);
    int *local = ids_in->data;
    for (long k = 0; k < asked; k++) {
        if (local[k] % x->d != x->me || local[k] / x->d >= table->rows)
            return pn_error_set(PN_ERR_INTERNAL, "replica %d asked for row %d of a table "
                                "sharded %d ways", x->me, local[k], x->d);
        local[k] /= x->d;
    }
    PN_TRY(floats(&l->rows_out, pn_device_host(), asked, table->cols));
    PN_TRY(floats(&l->rows_in, pn_device_host(), n, table->cols));
    *rows_out = pn_matrix_on(&l->rows_out, (int)asked, table->cols);
    *rows_in = pn_matrix_on(&l->rows_in, n, table->cols);
    return gather_to_host(x, table, local, (int)asked, rows_out);
}

/* Room for the ids the others ask this owner for, once l's counts are in. */
static int room_for_asked(const pn_shard_rows *x, const lanes *l, pn_buffer *ids_in)
{
    long asked = total(l->recv_counts, x->d);
    if (asked > INT_MAX) return pn_error_set(PN_ERR_UNSUPPORTED, "a pull of %ld rows", asked);
    return ints(ids_in, pn_device_host(), asked);
}

/* Angel's pull: the distinct ids to their owners, their rows back (pn_row_puller);
 * the forward's next pulls take what was pulled ahead instead (pn_shard_rows_take). */
static int take(pn_shard_rows *x, int param, const int *ids, int n, pn_matrix *out);

static int pull(void *ctx, const pn_params *arena, int param, const int *ids, int n,
                pn_matrix *out)
{
    pn_shard_rows *x = ctx;
    if (x->take_left > 0) return take(x, param, ids, n, out);
    lanes *l = &x->pull;
    pn_matrix table = pn_params_value(arena, param), sent, got;
    PN_TRY(group_by_owner(x, l, ids, n));
    PN_TRY(pn_comm_owner_counts(x->comm, l->send_counts, l->recv_counts));
    PN_TRY(room_for_asked(x, l, &x->ids_in));
    PN_TRY(pn_comm_owner_exchange(x->comm, l->send_counts, l->ids_out.data, NULL,
                                  l->recv_counts, x->ids_in.data, NULL));
    PN_TRY(answer(x, l, &table, &x->ids_in, n, &sent, &got));
    PN_TRY(pn_comm_owner_exchange(x->comm, l->recv_counts, NULL, &sent, l->send_counts, NULL,
                                  &got));
    /* got is grouped by owner: row k of out is got's row order[k] */
    return gather_into(x, &got, l->order.data, n, out);
}

/* --- pulls ahead ------------------------------------------------------------------------ */

/* Ahead entry e, which must be in phase want. */
static int entry(pn_shard_rows *x, int e, int want, ahead **a)
{
    if (e < 0 || e >= PN_OWNER_AHEAD_SLOTS || x->ahead[e].phase != want)
        return pn_error_set(PN_ERR_INTERNAL, "pull ahead %d of %d: in phase %d, not %d", e,
                            PN_OWNER_AHEAD_SLOTS, e >= 0 && e < PN_OWNER_AHEAD_SLOTS
                                                      ? x->ahead[e].phase : -1, want);
    *a = &x->ahead[e];
    return PN_OK;
}

int pn_shard_rows_ahead_ask(pn_shard_rows *x, int e, int param, const int *ids, int n,
                            long step, int micro)
{
    ahead *a = NULL;
    PN_TRY(entry(x, e, AHEAD_IDLE, &a));
    double t0 = PN_TRACE_T0();
    PN_TRY(ints(&a->asked, pn_device_host(), n));
    if (n > 0) memcpy(a->asked.data, ids, (size_t)n * sizeof(int));
    a->param = param, a->n = n, a->step = step, a->micro = micro;
    PN_TRY(group_by_owner(x, &a->l, ids, n));
    PN_TRY(pn_comm_owner_counts_start(x->comm, ahead_slot(e), a->l.send_counts,
                                      a->l.recv_counts));
    a->phase = AHEAD_ASKED;
    PN_TRACE("pull ahead: ask", "comm", NULL, step, micro, t0);
    return PN_OK;
}

int pn_shard_rows_ahead_send(pn_shard_rows *x, int e)
{
    ahead *a = NULL;
    PN_TRY(entry(x, e, AHEAD_ASKED, &a));
    double t0 = PN_TRACE_T0();
    lanes *l = &a->l;
    PN_TRY(pn_comm_owner_exchange_finish(x->comm, ahead_slot(e)));
    PN_TRY(room_for_asked(x, l, &a->ids_in));
    PN_TRY(pn_comm_owner_exchange_start(x->comm, ahead_slot(e), l->send_counts,
                                        l->ids_out.data, NULL, l->recv_counts,
                                        a->ids_in.data, NULL));
    a->phase = AHEAD_SENT;
    PN_TRACE("pull ahead: send", "comm", NULL, a->step, a->micro, t0);
    return PN_OK;
}

int pn_shard_rows_ahead_answer(pn_shard_rows *x, const pn_params *arena, int e)
{
    ahead *a = NULL;
    PN_TRY(entry(x, e, AHEAD_SENT, &a));
    double t0 = PN_TRACE_T0();
    lanes *l = &a->l;
    PN_TRY(pn_comm_owner_exchange_finish(x->comm, ahead_slot(e)));
    /* the table's values hold until the step's update: the forward that takes these
     * rows runs before it, in the same step */
    pn_matrix table = pn_params_value(arena, a->param), sent, got;
    PN_TRY(answer(x, l, &table, &a->ids_in, a->n, &sent, &got));
    PN_TRY(pn_comm_owner_exchange_start(x->comm, ahead_slot(e), l->recv_counts, NULL, &sent,
                                        l->send_counts, NULL, &got));
    a->phase = AHEAD_ANSWERED;
    PN_TRACE("pull ahead: answer", "comm", NULL, a->step, a->micro, t0);
    return PN_OK;
}

void pn_shard_rows_take(pn_shard_rows *x, int first, int count)
{
    x->take_next = first;
    x->take_left = count;
}

int pn_shard_rows_take_done(pn_shard_rows *x)
{
    int left = x->take_left;
    x->take_left = 0;
    return left == 0 ? PN_OK
                     : pn_error_set(PN_ERR_INTERNAL, "a forward left %d pulls ahead untaken", left);
}

int pn_shard_rows_progress(pn_shard_rows *x) { return pn_comm_owner_progress(x->comm); }

/* A forward's pull that the stage pulled ahead: its rows, once they are in, after a
 * check that the forward asks for the ids the stage asked for. */
static int take(pn_shard_rows *x, int param, const int *ids, int n, pn_matrix *out)
{
    int e = x->take_next++;
    x->take_left--;
    ahead *a = NULL;
    PN_TRY(entry(x, e, AHEAD_ANSWERED, &a));
    double t0 = PN_TRACE_T0();
    a->phase = AHEAD_IDLE;
    PN_TRY(pn_comm_owner_exchange_finish(x->comm, ahead_slot(e)));
    if (a->param != param || a->n != n ||
        (n > 0 && memcmp(a->asked.data, ids, (size_t)n * sizeof(int)) != 0))
        return pn_error_set(PN_ERR_INTERNAL, "micro-batch %d pulls %d rows of table %d, not the "
                            "%d of table %d pulled ahead for it", a->micro, n, param, a->n,
                            a->param);
    pn_matrix got = pn_matrix_on(&a->l.rows_in, n, out ? out->cols : 1);
    PN_TRY(gather_into(x, &got, a->l.order.data, n, out));
    PN_TRACE("pull ahead: take", "comm", NULL, a->step, a->micro, t0);
    return PN_OK;
}

/* --- pushes ----------------------------------------------------------------------------- */

static int push_slot(int slot)
{
    return slot >= 0 && slot < PN_OWNER_SLOTS
               ? PN_OK
               : pn_error_set(PN_ERR_INTERNAL, "push slot %d of %d", slot, PN_OWNER_SLOTS);
}

int pn_shard_rows_push_start(pn_shard_rows *x, int slot, pn_row_grad *rg)
{
    PN_TRY(push_slot(slot));
    lanes *l = &x->push[slot];
    int n = rg->n, width = rg->width;
    PN_TRY(group_by_owner(x, l, rg->ids, n));
    /* the entries' rows in grouped order: row order[k] of the send buffer is entry k's,
     * so the send buffer's row j comes from the entry whose order is j */
    PN_TRY(ints(&l->from, pn_device_host(), n));
    int *from = l->from.data, *order = l->order.data;
    for (int k = 0; k < n; k++) from[order[k]] = k;
    PN_TRY(floats(&l->rows_out, pn_device_host(), n, width));
    pn_matrix send = pn_matrix_on(&l->rows_out, n, width), entries = pn_row_grad_entries(rg);
    PN_TRY(gather_to_host(x, &entries, from, n, &send));
    PN_TRY(pn_comm_owner_counts(x->comm, l->send_counts, l->recv_counts));
    long in = total(l->recv_counts, x->d);
    if (in > INT_MAX) return pn_error_set(PN_ERR_UNSUPPORTED, "a push of %ld rows", in);
    l->in = (int)in;
    /* the gradient's room for what comes, reserved now: its buffers must not move
     * while MPI writes into them */
    int *ids;
    pn_matrix rows;
    PN_TRY(pn_row_grad_incoming(rg, l->in, &ids, &rows));
    if (pn_row_grad_on_device(rg)) { /* MPI writes host memory: the rows come here first */
        PN_TRY(floats(&l->rows_in, pn_device_host(), in, width));
        rows = pn_matrix_on(&l->rows_in, l->in, width);
    }
    return pn_comm_owner_exchange_start(x->comm, slot, l->send_counts, l->ids_out.data, &send,
                                        l->recv_counts, ids, &rows);
}

void pn_shard_rows_abandon(pn_shard_rows *x)
{
    /* the error that led here is the one to report, not a wait's below */
    char why[1024];
    snprintf(why, sizeof why, "%s", pn_error_message());
    int failed = PN_OK;
    for (int k = 0; k < PN_OWNER_ALL; k++) {
        int rc = pn_comm_owner_exchange_finish(x->comm, k);
        if (failed == PN_OK) failed = rc;
    }
    if (failed < 0) (void)pn_error_set(failed, "%s", why);
    for (int e = 0; e < PN_OWNER_AHEAD_SLOTS; e++) x->ahead[e].phase = AHEAD_IDLE;
    x->take_left = 0;
}

int pn_shard_rows_push_finish(pn_shard_rows *x, int slot, pn_row_grad *rg)
{
    PN_TRY(push_slot(slot));
    lanes *l = &x->push[slot];
    PN_TRY(pn_comm_owner_exchange_finish(x->comm, slot));
    if (pn_row_grad_on_device(rg) && l->in > 0) {
        int *ids;
        pn_matrix rows;
        PN_TRY(pn_row_grad_incoming(rg, l->in, &ids, &rows)); /* reserved: nothing moves */
        PN_TRY(pn_matrix_write(&rows, l->rows_in.data));
    }
    pn_row_grad_adopt(rg, l->in);
    PN_TRY(pn_row_grad_merge(rg));
    return pn_row_grad_localize(rg, x->d, x->me);
}
