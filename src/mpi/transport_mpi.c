/* The MPI transport of the communication seam (comm_impl.h): stage links as
 * non-blocking point-to-point messages through host buffers, one per micro-batch,
 * each a checked header, the payload and, where samples are padded sequences,
 * their lengths (host int32, what the receiving stage's layers mask by); the
 * replicas' gradient buckets as MPI_Iallreduce in place (a sharded optimizer's
 * pieces: MPI_Ireduce to the piece's replica); the replica gather as MPI_Iallgather
 * (in place when the replica's own row is given); every wait through the seam's watched wait (watch.c). Data on a
 * device other than the host (and host views that are not dense) is staged through
 * host memory (pn_matrix_read/write): links, buckets, gathers and tied gradients.
 * The staging of buckets, gathers and tied gradients has never run on GPUs (it needs several). */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "math/ops.h"
#include "mpi/link_header.h"
#include "mpi/mpi_check.h"

enum { HEADER_BYTES = PN_LINK_HEADER_BYTES };

typedef struct mpi_link {
    pn_link base;
    char **buf;        /* [slots] header + payload (+ lengths), host memory */
    MPI_Request *req;  /* [slots] */
    const int **lengths; /* [slots] the lengths received in each slot's buffer, or NULL */
    pn_buffer landing; /* a received payload on the destination's device, to add from */
    uint32_t sent, received; /* messages so far: received in the order sent, which MPI
                                would not need but NCCL does (the same check on both) */
} mpi_link;

/* A host copy of a matrix MPI cannot read or write in place (on a GPU, or a view
 * with a stride): MPI moves the copy, the result goes back with pn_matrix_write. */
typedef struct staged {
    pn_matrix m;  /* the caller's matrix (a shallow copy of the view) */
    bool direct;  /* m is dense host memory and moves in place */
    float *host;  /* else its copy, kept from step to step */
    size_t cap;   /* floats host holds */
} staged;

/* Gradient buckets in flight, and the tied-gradient exchange's requests, each with its
 * staging, kept from step to step (the same buckets and messages every step). */
/* Requests, each with the host copy of its matrix, kept from step to step. */
typedef struct staged_requests {
    MPI_Request *req;
    staged *data;
    int cap;
} staged_requests;

typedef struct mpi_state {
    staged_requests buckets;
    int n_buckets;
    staged_requests exchange;
    staged gather_in, gather_out; /* the replica gather's */
} mpi_state;

/* The transport's state, made on first use. */
static mpi_state *state_of(pn_comm *c)
{
    if (!c->transport_state) c->transport_state = calloc(1, sizeof(mpi_state));
    return c->transport_state;
}

static const char *kind_name(int kind) { return kind == PN_LINK_GRAD ? "gradient" : "value"; }

static size_t payload_bytes(const pn_link *l, int rows)
{
    return (size_t)rows * (size_t)l->spec.cols * pn_link_elem_bytes(l);
}

/* The payload with the padding after it that starts the lengths on an int32's
 * boundary: an odd count of bf16 values ends mid-word, and the receiver hands the
 * lengths to the layers as an int array in place. */
static size_t padded_payload_bytes(const pn_link *l, int rows)
{
    size_t a = _Alignof(int32_t);
    return (payload_bytes(l, rows) + a - 1) / a * a;
}

static size_t bytes_for(const pn_link *l, int rows)
{
    return HEADER_BYTES + padded_payload_bytes(l, rows) +
           (size_t)pn_link_samples(l, rows) * sizeof(int32_t);
}

/* Where a message's lengths start in its buffer (after a payload of rows). */
static int32_t *lengths_in(const mpi_link *l, int slot, int rows)
{
    return (int32_t *)(l->buf[slot] + HEADER_BYTES + padded_payload_bytes(&l->base, rows));
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
    l->base = (pn_link){*spec, c, &pn_transport_mpi};
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
                           base->spec.peer, pn_link_tag(base), base->comm->pipe, &l->req[micro]));
    return PN_OK;
}

/* The host payload as floats on into's device, in *out: the message buffer itself
 * when it holds floats and into is on the host, else the landing buffer (floats,
 * then on a GPU the bf16 payload copied behind them to be widened from). */
static int land_payload(mpi_link *l, const void *payload, const pn_matrix *into,
                        pn_matrix *out)
{
    bool host = into->device.kind == PN_DEVICE_HOST, bf16 = l->base.spec.bf16;
    if (host && !bf16) {
        *out = pn_matrix_host((float *)payload, into->rows, into->cols);
        return PN_OK;
    }
    size_t n = pn_matrix_count(*into), wide = n * sizeof(float);
    size_t narrow = bf16 && !host ? n * sizeof(uint16_t) : 0;
    PN_TRY(pn_buffer_reserve(&l->landing, into->device, wide + narrow));
    *out = pn_matrix_on(&l->landing, into->rows, into->cols);
    if (!bf16) return pn_matrix_write(out, payload);
    const uint16_t *src = payload;
    if (!host) {
        PN_TRY(pn_buffer_write(&l->landing, wide, payload, narrow));
        src = (const uint16_t *)((const char *)l->landing.data + wide);
    }
    return pn_from_bf16(src, out);
}

/* Writes (or adds) the host payload into into. */
static int take_payload(mpi_link *l, const void *payload, pn_matrix *into, bool add)
{
    if (!add && !l->base.spec.bf16) return pn_matrix_write(into, payload);
    if (!add && into->device.kind == PN_DEVICE_HOST) return pn_from_bf16(payload, into);
    pn_matrix src;
    PN_TRY(land_payload(l, payload, into, &src));
    return add ? pn_axpy(1.0f, &src, into) : pn_copy(&src, into);
}

/* m into the host payload: floats, or narrowed to bf16 (on a GPU through the landing
 * buffer, which a sending link does not otherwise use). */
static int put_payload(mpi_link *l, const pn_matrix *m, void *payload)
{
    if (!l->base.spec.bf16) return pn_matrix_read(m, payload);
    if (m->device.kind == PN_DEVICE_HOST) return pn_to_bf16(m, payload);
    size_t bytes = pn_matrix_count(*m) * sizeof(uint16_t);
    PN_TRY(pn_buffer_reserve(&l->landing, m->device, bytes));
    PN_TRY(pn_to_bf16(m, l->landing.data));
    return pn_buffer_read(&l->landing, 0, payload, bytes);
}

static int link_recv(pn_link *base, long step, int micro, pn_matrix *into, bool add)
{
    mpi_link *l = (mpi_link *)base;
    MPI_Status status;
    PN_TRY(pn_comm_wait(base->comm, 1, &l->req[micro], &status,
                        &(pn_wait_for){"the receive of", base, micro, PN_SCOPE_PIPE}));
    pn_link_header h;
    memcpy(&h, l->buf[micro], sizeof h);
    int got = 0, rows = into->rows;
    MPI_Get_count(&status, MPI_BYTE, &got);
    const int32_t *lengths = lengths_in(l, micro, rows);
    PN_TRY(pn_link_check_recv(base, &h, (size_t)got, bytes_for(base, rows), step, micro, into,
                              lengths, l->received));
    l->received++;
    if (pn_link_samples(base, rows)) l->lengths[micro] = lengths;
    return take_payload(l, l->buf[micro] + HEADER_BYTES, into, add);
}

static int link_send(pn_link *base, long step, int micro, const pn_matrix *m, const int *lengths)
{
    mpi_link *l = (mpi_link *)base;
    const pn_link_spec *sp = &base->spec;
    PN_TRY(pn_link_check_send(base, m, lengths));
    int samples = pn_link_samples(base, m->rows);
    pn_link_header h = pn_link_header_of(base, step, micro, m, l->sent++);
    memcpy(l->buf[micro], &h, sizeof h);
    PN_TRY(put_payload(l, m, l->buf[micro] + HEADER_BYTES));
    base->comm->link_bytes_sent += (double)payload_bytes(base, m->rows);
    for (int k = 0; k < samples; k++) lengths_in(l, micro, m->rows)[k] = lengths[k];
    PN_MPI_CHECK(MPI_Isend(l->buf[micro], (int)bytes_for(base, m->rows), MPI_BYTE, sp->peer,
                           pn_link_tag(base), base->comm->pipe, &l->req[micro]));
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

/* MPI reads and writes host memory itself: a matrix elsewhere gets a host copy in s
 * (read when send, else only room for what arrives). *data: what MPI moves. */
static int stage_in(staged *s, const pn_matrix *m, bool send, float **data)
{
    s->m = *m;
    s->direct = m->device.kind == PN_DEVICE_HOST && pn_matrix_dense(*m);
    if (s->direct) {
        *data = m->data;
        return PN_OK;
    }
    size_t n = pn_matrix_count(*m);
    if (s->cap < n) {
        float *more = realloc(s->host, (n ? n : 1) * sizeof *more);
        if (!more) return pn_error_set(PN_ERR_NOMEM, "out of memory staging %zu floats", n);
        s->host = more;
        s->cap = n;
    }
    *data = s->host;
    return send ? pn_matrix_read(m, s->host) : PN_OK;
}

/* After MPI has written the host copy: back into the caller's matrix. */
static int stage_out(staged *s)
{
    return s->direct ? PN_OK : pn_matrix_write(&s->m, s->host);
}

/* Room for n requests in r (the same n every step: it grows in the first only). */
static int reserve_requests(staged_requests *r, int n)
{
    if (r->cap >= n) return PN_OK;
    MPI_Request *more = realloc(r->req, (size_t)n * sizeof *more);
    if (more) r->req = more;
    staged *data = more ? realloc(r->data, (size_t)n * sizeof *data) : NULL;
    if (!data) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    memset(data + r->cap, 0, (size_t)(n - r->cap) * sizeof *data);
    r->data = data;
    r->cap = n;
    return PN_OK;
}

/* Keeps the host copy's memory for the next step, forgets the matrix. */
static void staged_free(staged *s, int n)
{
    for (int i = 0; s && i < n; i++) free(s[i].host);
}

static void release_requests(staged_requests *r)
{
    staged_free(r->data, r->cap);
    free(r->req);
    free(r->data);
}

/* root < 0: summed on every replica (all-reduce); else on replica root only. */
static int bucket_post(pn_comm *c, pn_matrix *m, int root)
{
    if (pn_matrix_count(*m) > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a gradient bucket of %d x %d floats", m->rows,
                            m->cols);
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    staged_requests *b = &st->buckets;
    if (st->n_buckets == b->cap) /* grows in the first step only */
        PN_TRY(reserve_requests(b, b->cap ? 2 * b->cap : 16));
    float *data; /* a bucket on a GPU: its host copy, read now (after backward's kernels) */
    PN_TRY(stage_in(&b->data[st->n_buckets], m, true, &data));
    int n = (int)pn_matrix_count(*m);
    MPI_Request *r = &b->req[st->n_buckets++];
    if (root < 0)
        PN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, c->replicas, r));
    else if (root == c->grid.replica)
        PN_MPI_CHECK(MPI_Ireduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, root, c->replicas, r));
    else
        PN_MPI_CHECK(MPI_Ireduce(data, NULL, n, MPI_FLOAT, MPI_SUM, root, c->replicas, r));
    int done; /* push the reductions already in flight along */
    PN_MPI_CHECK(MPI_Testall(st->n_buckets, b->req, &done, MPI_STATUSES_IGNORE));
    return PN_OK;
}

static int bucket_start(pn_comm *c, pn_matrix *m) { return bucket_post(c, m, -1); }

static int bucket_reduce_start(pn_comm *c, pn_matrix *m, int root)
{
    if (root < 0 || root >= c->grid.replicas)
        return pn_error_set(PN_ERR_INTERNAL, "a bucket reduced to replica %d of %d", root,
                            c->grid.replicas);
    return bucket_post(c, m, root);
}

static int buckets_wait(pn_comm *c)
{
    mpi_state *st = c->transport_state;
    if (!st) return PN_OK;
    int n = st->n_buckets;
    st->n_buckets = 0;
    PN_TRY(pn_comm_wait(c, n, st->buckets.req, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the gradient sum over", NULL, -1, PN_SCOPE_REPLICAS}));
    for (int i = 0; i < n; i++) PN_TRY(stage_out(&st->buckets.data[i]));
    return PN_OK;
}

static int gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    if (pn_matrix_count(*all) > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a replica gather of %d x %d floats", all->rows,
                            all->cols);
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    float *in, *out;
    PN_TRY(stage_in(&st->gather_in, mine, true, &in));
    PN_TRY(stage_in(&st->gather_out, all, false, &out));
    int n = mine->cols;
    MPI_Request r;
    /* mine as all's own row: in place, as MPI wants it said */
    bool in_place = in == out + (size_t)c->grid.replica * (size_t)n;
    PN_MPI_CHECK(MPI_Iallgather(in_place ? MPI_IN_PLACE : in, n, MPI_FLOAT, out, n, MPI_FLOAT,
                                c->replicas, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the gradient gather over", NULL, -1, PN_SCOPE_REPLICAS}));
    return stage_out(&st->gather_out);
}

static int exchange_replicas(pn_comm *c, const pn_matrix *send, pn_matrix *recv)
{
    if (pn_matrix_count(*send) > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a replica exchange of %d x %d floats",
                            send->rows, send->cols);
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    float *in, *out;
    PN_TRY(stage_in(&st->gather_in, send, true, &in));
    PN_TRY(stage_in(&st->gather_out, recv, false, &out));
    int n = send->cols;
    MPI_Request r;
    PN_MPI_CHECK(MPI_Ialltoall(in, n, MPI_FLOAT, out, n, MPI_FLOAT, c->replicas, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE,
                        &(pn_wait_for){"the gradient exchange over", NULL, -1, PN_SCOPE_REPLICAS}));
    return stage_out(&st->gather_out);
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
        if ((size_t)m->rows * (size_t)m->cols > INT_MAX)
            return pn_error_set(PN_ERR_UNSUPPORTED, "a tied gradient of %d x %d floats",
                                m->rows, m->cols);
    }
    if (n == 0) return PN_OK;
    mpi_state *st = state_of(c);
    if (!st) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    PN_TRY(reserve_requests(&st->exchange, n));
    MPI_Request *r = st->exchange.req;
    for (int i = 0; i < n; i++) { /* host copies first: no request is posted on a failure */
        float *data;
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        PN_TRY(stage_in(&st->exchange.data[i], m, i < n_send, &data));
    }
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < n; i++) {
        const pn_matrix *m = i < n_send ? &send[i] : &recv[i - n_send];
        float *data = st->exchange.data[i].direct ? m->data : st->exchange.data[i].host;
        int count = m->rows * m->cols, err =
            i < n_send ? MPI_Isend(data, count, MPI_FLOAT, to[i], c->tie_tag, c->pipe, &r[i])
                       : MPI_Irecv(data, count, MPI_FLOAT, from[i - n_send], c->tie_tag,
                                   c->pipe, &r[i]);
        if (err != MPI_SUCCESS) /* the job ends on it: what is posted stays posted */
            rc = pn_mpi_fail(err, i < n_send ? "MPI_Isend" : "MPI_Irecv", __FILE__, __LINE__);
    }
    if (rc == PN_OK)
        rc = pn_comm_wait(c, n, r, MPI_STATUSES_IGNORE,
                          &(pn_wait_for){"the tied gradient exchange over", NULL, -1,
                                         PN_SCOPE_PIPE});
    for (int i = n_send; rc == PN_OK && i < n; i++) rc = stage_out(&st->exchange.data[i]);
    return rc;
}

static void release(pn_comm *c)
{
    mpi_state *st = c->transport_state;
    release_requests(&st->buckets);
    release_requests(&st->exchange);
    staged_free(&st->gather_in, 1);
    staged_free(&st->gather_out, 1);
    free(st);
    c->transport_state = NULL;
}

const pn_transport pn_transport_mpi = {
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
    .bucket_reduce_start = bucket_reduce_start,
    .gather_replicas = gather_replicas,
    .exchange_replicas = exchange_replicas,
    .pipe_exchange = pipe_exchange,
    .release = release,
};
