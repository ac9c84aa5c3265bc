/* The pull and push of tables sharded by rows across a stage's replicas
 * (shard_rows.h). MPI moves host memory: on a GPU the rows pass through host
 * buffers here; the gathers and scatters run on the table's device. */
#include "pipeline/shard_rows.h"

#include <limits.h>
#include <stdlib.h>

#include "base/error.h"
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

struct pn_shard_rows {
    pn_comm *comm;
    int d, me;
    pn_row_puller puller;
    lanes pull, push[PN_OWNER_SLOTS];
    pn_buffer ids_in;               /* host: the ids a pull asks this owner for */
    pn_buffer dev_ints;             /* indices on the table's device */
    pn_buffer rows_dev;             /* rows on the table's device */
};

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
    for (int k = 0; k <= PN_OWNER_SLOTS; k++) {
        lanes *l = k < PN_OWNER_SLOTS ? &x->push[k] : &x->pull;
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

/* Angel's pull: the distinct ids to their owners, their rows back (pn_row_puller). */
static int pull(void *ctx, const pn_params *arena, int param, const int *ids, int n,
                pn_matrix *out)
{
    pn_shard_rows *x = ctx;
    lanes *l = &x->pull;
    pn_matrix table = pn_params_value(arena, param);
    int width = table.cols;
    PN_TRY(group_by_owner(x, l, ids, n));
    PN_TRY(pn_comm_owner_counts(x->comm, l->send_counts, l->recv_counts));
    long asked = total(l->recv_counts, x->d);
    if (asked > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a pull of %ld rows", asked);
    PN_TRY(ints(&x->ids_in, pn_device_host(), asked));
    PN_TRY(pn_comm_owner_exchange(x->comm, l->send_counts, l->ids_out.data, NULL,
                                  l->recv_counts, x->ids_in.data, NULL));
    /* the owner's answer: its local rows id / d, in the order asked */
    int *local = x->ids_in.data;
    for (long k = 0; k < asked; k++) {
        if (local[k] % x->d != x->me || local[k] / x->d >= table.rows)
            return pn_error_set(PN_ERR_INTERNAL, "replica %d asked for row %d of a table "
                                "sharded %d ways", x->me, local[k], x->d);
        local[k] /= x->d;
    }
    PN_TRY(floats(&l->rows_out, pn_device_host(), asked, width));
    PN_TRY(floats(&l->rows_in, pn_device_host(), n, width));
    pn_matrix answer = pn_matrix_on(&l->rows_out, (int)asked, width);
    pn_matrix got = pn_matrix_on(&l->rows_in, n, width);
    PN_TRY(gather_to_host(x, &table, local, (int)asked, &answer));
    PN_TRY(pn_comm_owner_exchange(x->comm, l->recv_counts, NULL, &answer, l->send_counts, NULL,
                                  &got));
    /* got is grouped by owner: row k of out is got's row order[k] */
    return gather_into(x, &got, l->order.data, n, out);
}

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
    for (int k = 0; k < PN_OWNER_SLOTS; k++) (void)pn_comm_owner_exchange_finish(x->comm, k);
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
