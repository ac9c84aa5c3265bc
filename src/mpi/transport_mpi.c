/* The MPI transport of the communication seam (comm_impl.h): stage links as
 * non-blocking point-to-point messages through host buffers, one per micro-batch,
 * each a checked header, the payload and, where samples are padded sequences,
 * their lengths (host int32, what the receiving stage's layers mask by); the
 * replicas' gradient buckets as MPI_Iallreduce in place; the replica gather as
 * MPI_Iallgather; every wait through the seam's watched wait (watch.c). Data on a
 * device other than the host is staged through host memory (pn_matrix_read/write). */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "mpi/mpi_check.h"

enum { LINK_MAGIC = 0x706e6c6b, HEADER_BYTES = 64 };

typedef struct header {
    int32_t magic, kind, node, micro;
    int64_t step;
    int32_t rows, cols;
    int32_t samples; /* lengths after the payload: rows / seq, or 0 */
    int32_t chunk;   /* the consuming chunk (virtual stages), else 0 */
} header;
_Static_assert(sizeof(header) <= HEADER_BYTES, "a link's header fits its bytes");

typedef struct mpi_link {
    pn_link base;
    char **buf;        /* [slots] header + payload (+ lengths), host memory */
    MPI_Request *req;  /* [slots] */
    const int **lengths; /* [slots] the lengths received in each slot's buffer, or NULL */
    pn_buffer landing; /* a received payload on the destination's device, to add from */
} mpi_link;

/* Gradient buckets in flight. */
typedef struct mpi_state {
    MPI_Request *buckets;
    int n_buckets, cap;
    MPI_Request *exchange; /* the tied-gradient exchange's, kept from step to step */
    int exchange_cap;
} mpi_state;

/* The transport's state, made on first use. */
static mpi_state *state_of(pn_comm *c)
{
    if (!c->transport_state) c->transport_state = calloc(1, sizeof(mpi_state));
    return c->transport_state;
}

static const char *kind_name(int kind) { return kind == PN_LINK_GRAD ? "gradient" : "value"; }

/* One tag per (node, kind, consuming chunk's virtual stage): the links of two chunks
 * between the same pair of ranks never match each other's messages. */
static int tag_of(const pn_link *l)
{
    int v = l->spec.virtual_stages > 1 ? l->spec.virtual_stages : 1;
    int lane = l->spec.chunk / l->comm->grid.stages; /* the chunk's place on its stage */
    return (l->spec.node * 2 + (int)l->spec.kind) * v + lane % v;
}

/* Lengths a message of rows carries: one per sample when the link carries them. */
static int samples_for(const pn_link *l, int rows)
{
    return l->spec.seq > 0 ? rows / l->spec.seq : 0;
}

static size_t bytes_for(const pn_link *l, int rows)
{
    return HEADER_BYTES + (size_t)rows * (size_t)l->spec.cols * sizeof(float) +
           (size_t)samples_for(l, rows) * sizeof(int32_t);
}

/* Where a message's lengths start in its buffer (after a payload of rows). */
static int32_t *lengths_in(const mpi_link *l, int slot, int rows)
{
    return (int32_t *)(l->buf[slot] + HEADER_BYTES +
                       (size_t)rows * (size_t)l->base.spec.cols * sizeof(float));
}

static void link_cancel(pn_link *base)
{
    mpi_link *l = (mpi_link *)base;
    for (int s = 0; l->req && l->buf && s < base->spec.slots; s++)
        if (l->req[s] != MPI_REQUEST_NULL) {
            MPI_Cancel(&l->req[s]);
            MPI_Request_free(&l->req[s]);
        }
}

static void link_free(pn_link *base)
{
    mpi_link *l = (mpi_link *)base;
    link_cancel(base);
    for (int s = 0; l->buf && s < base->spec.slots; s++) free(l->buf[s]);
    free(l->buf);
    free(l->req);
    free(l->lengths);
    pn_buffer_release(&l->landing);
    free(l);
}

static int link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out)
{
    mpi_link *l = calloc(1, sizeof *l);
    if (!l) return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    l->base = (pn_link){*spec, c};
    /* One message carries a micro-batch's argument, and MPI counts bytes in an int. */
    size_t most = bytes_for(&l->base, spec->max_rows);
    if (most > INT_MAX) {
        free(l);
        return pn_error_set(PN_ERR_INVALID,
                            "the %s of '%s' (%d x %d per micro-batch, %zu bytes) is more than "
                            "one MPI message holds (%d bytes): use more micro-batches",
                            kind_name(spec->kind), spec->name, spec->max_rows, spec->cols, most,
                            INT_MAX);
    }
    l->buf = calloc((size_t)spec->slots, sizeof *l->buf);
    l->req = malloc((size_t)spec->slots * sizeof *l->req);
    l->lengths = calloc((size_t)spec->slots, sizeof *l->lengths);
    int rc = l->buf && l->req && l->lengths ? PN_OK
                              : pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    for (int s = 0; rc == PN_OK && s < spec->slots; s++) l->req[s] = MPI_REQUEST_NULL;
    size_t bytes = (most + 63) / 64 * 64;
    for (int s = 0; rc == PN_OK && s < spec->slots; s++)
        if (!(l->buf[s] = aligned_alloc(64, bytes)))
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    if (rc < 0) {
        link_free(&l->base);
        return rc;
    }
    *out = &l->base;
    return PN_OK;
}

static int link_post_recv(pn_link *base, int micro)
{
    mpi_link *l = (mpi_link *)base;
    l->lengths[micro] = NULL;
    PN_MPI_CHECK(MPI_Irecv(l->buf[micro], (int)bytes_for(base, base->spec.max_rows), MPI_BYTE,
                           base->spec.peer, tag_of(base), base->comm->pipe, &l->req[micro]));
    return PN_OK;
}

/* Adds the host payload to into, through a landing buffer on into's device when that
 * is not the host. */
static int add_payload(mpi_link *l, const float *payload, pn_matrix *into)
{
    pn_matrix src = pn_matrix_host((float *)payload, into->rows, into->cols);
    if (into->device.kind != PN_DEVICE_HOST) {
        size_t bytes = pn_matrix_count(*into) * sizeof(float);
        PN_TRY(pn_buffer_reserve(&l->landing, into->device, bytes));
        src = pn_matrix_on(&l->landing, into->rows, into->cols);
        PN_TRY(pn_matrix_write(&src, payload));
    }
    return pn_axpy(1.0f, &src, into);
}

static int link_recv(pn_link *base, long step, int micro, pn_matrix *into, bool add)
{
    mpi_link *l = (mpi_link *)base;
    const pn_link_spec *sp = &base->spec;
    MPI_Status status;
    PN_TRY(pn_comm_wait(base->comm, 1, &l->req[micro], &status,
                        &(pn_wait_for){"the receive of", base, micro, PN_SCOPE_PIPE}));
    header h;
    memcpy(&h, l->buf[micro], sizeof h);
    int got = 0, rows = into->rows, samples = samples_for(base, rows);
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (h.magic != LINK_MAGIC || h.kind != (int)sp->kind || h.node != sp->node ||
        h.chunk != sp->chunk || h.step != step || h.micro != micro || h.rows != rows ||
        h.cols != sp->cols || h.samples != samples || into->cols != sp->cols ||
        (size_t)got != bytes_for(base, rows))
        return pn_error_set(PN_ERR_MPI,
                            "stage %d expected the %s of '%s' for step %ld, micro-batch %d "
                            "(%d x %d, %d lengths) from stage %d for chunk %d, and received a "
                            "message for node %d, %s, step %ld, micro-batch %d (%d x %d, %d "
                            "lengths, %d bytes) for chunk %d",
                            base->comm->grid.stage, kind_name(sp->kind), sp->name, step, micro,
                            rows, sp->cols, samples, sp->peer, sp->chunk, h.node,
                            kind_name(h.kind), (long)h.step, h.micro, h.rows, h.cols, h.samples,
                            got, h.chunk);
    const int32_t *lengths = lengths_in(l, micro, rows);
    for (int k = 0; k < samples; k++)
        if (lengths[k] < 1 || lengths[k] > sp->seq)
            return pn_error_set(PN_ERR_MPI,
                                "stage %d received from stage %d the value of '%s' for step %ld, "
                                "micro-batch %d, whose sample %d has length %d, outside 1..%d",
                                base->comm->grid.stage, sp->peer, sp->name, step, micro, k,
                                (int)lengths[k], sp->seq);
    if (samples) l->lengths[micro] = lengths;
    const float *payload = (const float *)(l->buf[micro] + HEADER_BYTES);
    return add ? add_payload(l, payload, into) : pn_matrix_write(into, payload);
}

static int link_send(pn_link *base, long step, int micro, const pn_matrix *m, const int *lengths)
{
    mpi_link *l = (mpi_link *)base;
    const pn_link_spec *sp = &base->spec;
    if (m->rows > sp->max_rows || m->cols != sp->cols)
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s': %d x %d does not fit %d x %d",
                            sp->name, m->rows, m->cols, sp->max_rows, sp->cols);
    if ((sp->seq > 0) != (lengths != NULL) || (sp->seq > 0 && m->rows % sp->seq))
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s' (lengths of seq %d): %d rows %s "
                                             "lengths",
                            sp->name, sp->seq, m->rows, lengths ? "with" : "without");
    int samples = samples_for(base, m->rows);
    header h = {LINK_MAGIC, (int32_t)sp->kind, sp->node, micro, step, m->rows, m->cols,
                samples, sp->chunk};
    memcpy(l->buf[micro], &h, sizeof h);
    PN_TRY(pn_matrix_read(m, (float *)(l->buf[micro] + HEADER_BYTES)));
    for (int k = 0; k < samples; k++) lengths_in(l, micro, m->rows)[k] = lengths[k];
    PN_MPI_CHECK(MPI_Isend(l->buf[micro], (int)bytes_for(base, m->rows), MPI_BYTE, sp->peer,
                           tag_of(base), base->comm->pipe, &l->req[micro]));
    return PN_OK;
}

static const int *link_lengths(const pn_link *base, int micro)
{
    return ((const mpi_link *)base)->lengths[micro];
}

static int link_wait_sends(pn_link *base)
{
    mpi_link *l = (mpi_link *)base;
    return pn_comm_wait(base->comm, base->spec.slots, l->req, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the sends of", base, -1, PN_SCOPE_PIPE});
}

/* MPI reads and writes these buffers itself: they must be host memory. */
static int need_host(const pn_matrix *m, const char *what)
{
    if (m->device.kind == PN_DEVICE_HOST && pn_matrix_dense(*m)) return PN_OK;
    return pn_error_set(PN_ERR_UNSUPPORTED, "the MPI transport sums %s in dense host memory only",
                        what);
}

static int bucket_start(pn_comm *c, pn_matrix *m)
{
    PN_TRY(need_host(m, "gradient buckets"));
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (st->n_buckets == st->cap) { /* grows in the first step only */
        int cap = st->cap ? 2 * st->cap : 16;
        MPI_Request *more = realloc(st->buckets, (size_t)cap * sizeof *more);
        if (!more) return pn_error_set(PN_ERR_NOMEM, "out of memory");
        st->buckets = more;
        st->cap = cap;
    }
    PN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, m->data, (int)pn_matrix_count(*m), MPI_FLOAT,
                                MPI_SUM, c->replicas, &st->buckets[st->n_buckets++]));
    int done; /* push the reductions already in flight along */
    PN_MPI_CHECK(MPI_Testall(st->n_buckets, st->buckets, &done, MPI_STATUSES_IGNORE));
    return PN_OK;
}

static int buckets_wait(pn_comm *c)
{
    mpi_state *st = c->transport_state;
    if (!st) return PN_OK;
    int n = st->n_buckets;
    st->n_buckets = 0;
    return pn_comm_wait(c, n, st->buckets, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the gradient sum over", NULL, -1, PN_SCOPE_REPLICAS});
}

static int gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    PN_TRY(need_host(mine, "replica gathers"));
    PN_TRY(need_host(all, "replica gathers"));
    int n = mine->cols;
    MPI_Request r;
    PN_MPI_CHECK(MPI_Iallgather(mine->data, n, MPI_FLOAT, all->data, n, MPI_FLOAT, c->replicas,
                                &r));
    return pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the gradient gather over", NULL, -1, PN_SCOPE_REPLICAS});
}

/* Tied gradients: one message per matrix on the pipe, under their own tag (above
 * every link's, below the arena images'); one sender's messages match in order. */
static int pipe_exchange(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                         int n_recv, pn_matrix *recv, const int *from)
{
    if (n_send < 0 || n_recv < 0)
        return pn_error_set(PN_ERR_INTERNAL, "pipe exchange of %d and %d", n_send, n_recv);
    int n = n_send + n_recv;
    for (int i = 0; i < n; i++) { /* all checked before any is posted */
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        PN_TRY(need_host(m, "tied gradients"));
        if ((size_t)m->rows * (size_t)m->cols > INT_MAX)
            return pn_error_set(PN_ERR_UNSUPPORTED, "a tied gradient of %d x %d floats",
                                m->rows, m->cols);
    }
    if (n == 0) return PN_OK;
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (st->exchange_cap < n) { /* the same n every step: grows in the first only */
        MPI_Request *more = realloc(st->exchange, (size_t)n * sizeof *more);
        if (!more) return pn_error_set(PN_ERR_NOMEM, "out of memory");
        st->exchange = more;
        st->exchange_cap = n;
    }
    MPI_Request *r = st->exchange;
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < n; i++) {
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        int count = m->rows * m->cols, err =
            i < n_send ? MPI_Isend(m->data, count, MPI_FLOAT, to[i], c->tie_tag, c->pipe, &r[i])
                       : MPI_Irecv(m->data, count, MPI_FLOAT, from[i - n_send], c->tie_tag,
                                   c->pipe, &r[i]);
        if (err != MPI_SUCCESS) /* the job ends on it: what is posted stays posted */
            rc = pn_mpi_fail(err, i < n_send ? "MPI_Isend" : "MPI_Irecv", __FILE__, __LINE__);
    }
    if (rc == PN_OK)
        rc = pn_comm_wait(c, n, r, MPI_STATUSES_IGNORE,
                          &(pn_wait_for){"the tied gradient exchange over", NULL, -1,
                                         PN_SCOPE_PIPE});
    return rc;
}

static void release(pn_comm *c)
{
    mpi_state *st = c->transport_state;
    free(st->buckets);
    free(st->exchange);
    free(st);
    c->transport_state = NULL;
}

const pn_transport pn_transport_mpi = {
    .name = "mpi",
    .link_create = link_create,
    .link_free = link_free,
    .link_post_recv = link_post_recv,
    .link_recv = link_recv,
    .link_lengths = link_lengths,
    .link_send = link_send,
    .link_wait_sends = link_wait_sends,
    .link_cancel = link_cancel,
    .bucket_start = bucket_start,
    .buckets_wait = buckets_wait,
    .gather_replicas = gather_replicas,
    .pipe_exchange = pipe_exchange,
    .release = release,
};
