/* The communication seam (comm.h): the communicators of the rank grid, the control
 * plane over MPI (status agreement, scalar reductions, broadcast, arena images
 * between rank 0 and the first replica's stages), and the dispatch of the data
 * plane to the transport (comm_impl.h). */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/trace.h"
#include "math/cuda_module.h"
#include "mpi/job_mpi.h"
#include "mpi/mpi_check.h"

/* What the control plane's waits are for, in a stall's message (watch.c). */
static const pn_wait_for AGREEMENT = {"the agreement on the outcome among", NULL, -1,
                                      PN_SCOPE_WORLD};
static const pn_wait_for FROM_ROOT = {"a broadcast from rank 0 to", NULL, -1, PN_SCOPE_WORLD};
static const pn_wait_for IMAGES = {"the snapshot's stage indexes between", NULL, -1,
                                   PN_SCOPE_PIPE};

/* MPI_Bcast from rank 0 of comm through the watched wait. */
static int bcast(pn_comm *c, void *data, int n, MPI_Datatype type, MPI_Comm comm,
                 const pn_wait_for *what)
{
    MPI_Request r;
    PN_MPI_CHECK(MPI_Ibcast(data, n, type, 0, comm, &r));
    return pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, what);
}

int pn_comm_create(pn_comm **out, pn_job *job, int stages)
{
    *out = NULL;
    int size = pn_job_size(job), rank = pn_job_rank(job);
    if (stages < 1)
        return pn_error_set(PN_ERR_INVALID, "--stages must be at least 1, got %d", stages);
    if (size % stages)
        return pn_error_set(PN_ERR_INVALID,
                            "%d ranks cannot hold replicas of a %d-stage pipeline: the number "
                            "of ranks must be a multiple of --stages",
                            size, stages);
    pn_comm *c = calloc(1, sizeof *c);
    if (!c) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    c->world = c->pipe = c->replicas = c->watch = MPI_COMM_NULL;
    c->transport = &pn_transport_mpi;
    c->transport_kind = PN_TRANSPORT_REQUEST_MPI;
    *out = c;
    pn_grid *g = &c->grid;
    *g = (pn_grid){.rank = rank, .size = size, .stages = stages, .replicas = size / stages,
                   .stage = rank % stages, .replica = rank / stages};
    if (!(c->gather_at = malloc(3 * (size_t)g->replicas * sizeof *c->gather_at)) ||
        !(c->owner = calloc(PN_OWNER_ALL + 1, sizeof *c->owner)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int k = 0; k <= PN_OWNER_ALL; k++)
        if (!(c->owner[k].at = malloc(6 * (size_t)g->replicas * sizeof *c->owner[k].at)))
            return pn_error_set(PN_ERR_NOMEM, "out of memory");
    PN_MPI_CHECK(MPI_Comm_dup(pn_job_comm(job), &c->world));
    PN_MPI_CHECK(MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN));
    PN_MPI_CHECK(MPI_Comm_split(c->world, g->replica, g->stage, &c->pipe));
    PN_MPI_CHECK(MPI_Comm_split(c->world, g->stage, g->replica, &c->replicas));
    PN_MPI_CHECK(MPI_Comm_dup(c->world, &c->watch));
    int *tag_ub, found = 0; /* the largest tag this MPI takes, at least 32767 */
    PN_MPI_CHECK(MPI_Comm_get_attr(c->world, MPI_TAG_UB, &tag_ub, &found));
    c->image_tag = found ? *tag_ub : 32767;
    c->tie_tag = c->image_tag - 1;
    MPI_Comm node;
    PN_MPI_CHECK(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    const char *call = "MPI_Comm_size";
    int rc = MPI_Comm_size(node, &g->local_ranks);
    if (rc == MPI_SUCCESS) { /* the node's number: its lowest world rank */
        call = "MPI_Allreduce";
        rc = MPI_Allreduce(&rank, &c->node, 1, MPI_INT, MPI_MIN, node);
    }
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, call, __FILE__, __LINE__);
    /* Every rank's host, now while all answer: after a node is lost, nobody can ask it. */
    if (!(c->hosts = calloc((size_t)size, PN_HOST_CAP)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    char name[MPI_MAX_PROCESSOR_NAME] = "", mine[PN_HOST_CAP] = "";
    int len = 0;
    PN_MPI_CHECK(MPI_Get_processor_name(name, &len));
    snprintf(mine, sizeof mine, "%s", name); /* a longer name is cut, still telling */
    PN_MPI_CHECK(MPI_Allgather(mine, PN_HOST_CAP, MPI_CHAR, c->hosts, PN_HOST_CAP, MPI_CHAR,
                               c->world));
    return PN_OK;
}

void pn_comm_free(pn_comm *c)
{
    if (!c) return;
    if (c->transport_state && c->transport->release) c->transport->release(c);
    MPI_Comm *comms[] = {&c->pipe, &c->replicas, &c->watch, &c->world};
    for (int i = 0; i < 4; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    free(c->gather_at);
    for (int k = 0; c->owner && k <= PN_OWNER_ALL; k++) free(c->owner[k].at);
    free(c->owner);
    free(c->hosts);
    free(c);
}

const pn_grid *pn_comm_grid(const pn_comm *c) { return &c->grid; }

/* --- the transport ----------------------------------------------------------------------- */

/* This rank's NCCL transport into *out (NULL where it has none) and whether it has
 * one into *have: for a GPU rank that asks for nccl or auto in a build with NCCL, its
 * CUDA module's (open already: the rank's device came from it); for the others, what
 * the build says (nothing is opened). */
static int nccl_of(pn_transport_request r, pn_device dev, const pn_transport **out, bool *have)
{
    *out = NULL;
    *have = pn_transport_have_nccl();
    if (!*have || r == PN_TRANSPORT_REQUEST_MPI || dev.kind == PN_DEVICE_HOST) return PN_OK;
    const pn_cuda_module *m;
    PN_TRY(pn_cuda_module_get(&m));
    *have = m->nccl_transport != NULL;
    if (*have && m->nccl_transport_size != sizeof(pn_transport))
        return pn_error_set(PN_ERR_UNSUPPORTED, "transport nccl: the CUDA module %s has a "
                            "transport table of %zu bytes, this pipenet's are %zu: rebuild or "
                            "reinstall it", pn_cuda_module_path(), m->nccl_transport_size,
                            sizeof(pn_transport));
    *out = m->nccl_transport;
    return PN_OK;
}

int pn_comm_use_transport(pn_comm *c, pn_transport_request r, pn_device dev)
{
    const pn_grid *g = &c->grid;
    const pn_transport *nccl_transport;
    bool have_nccl;
    int rc = nccl_of(r, dev, &nccl_transport, &have_nccl);
    pn_rank_gpu mine = {c->node, dev.kind == PN_DEVICE_HOST ? -1 : dev.index,
                        pn_device_identity(dev), have_nccl};
    pn_rank_gpu *all = rc == PN_OK ? malloc((size_t)g->size * sizeof *all) : NULL;
    if (rc == PN_OK && !all) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    /* agreed first: a rank that returned alone would leave the others in the gather */
    int ok = pn_comm_agree(c, rc);
    if (ok < 0) {
        free(all);
        return ok;
    }
    _Static_assert(sizeof(pn_rank_gpu) == 4 * sizeof(int), "a rank's place travels as 4 ints");
    MPI_Request req;
    rc = MPI_Iallgather(&mine, 4, MPI_INT, all, 4, MPI_INT, c->world, &req);
    rc = rc == MPI_SUCCESS ? pn_comm_wait(c, 1, &req, MPI_STATUSES_IGNORE,
                                          &(pn_wait_for){"the devices of", NULL, -1,
                                                         PN_SCOPE_WORLD})
                           : pn_mpi_fail(rc, "MPI_Iallgather", __FILE__, __LINE__);
    pn_transport_request chosen = PN_TRANSPORT_REQUEST_MPI;
    if (rc == PN_OK) rc = pn_transport_choose(r, all, g->size, g->stages, &chosen);
    free(all);
    PN_TRY(rc);
    if (chosen == c->transport_kind) return PN_OK;
    const pn_transport *table = chosen == PN_TRANSPORT_REQUEST_NCCL ? nccl_transport
                                : chosen == PN_TRANSPORT_REQUEST_MPI  ? &pn_transport_mpi
                                                                      : NULL;
    if (!table) /* every rank said it has one */
        return pn_error_set(PN_ERR_INTERNAL, "transport %s chosen on a rank without it",
                            pn_transport_request_name(chosen));
    if (c->transport_state) c->transport->release(c); /* nothing moved yet */
    c->transport = table;
    c->transport_kind = chosen;
    return c->transport->start ? c->transport->start(c) : PN_OK;
}

const char *pn_comm_transport_name(const pn_comm *c)
{
    return pn_transport_request_name(c->transport_kind);
}

int pn_comm_links_ready(pn_comm *c)
{
    return c->transport->links_ready ? c->transport->links_ready(c) : PN_OK;
}

/* --- status ------------------------------------------------------------------------------ */

int pn_comm_agree(pn_comm *c, int rc)
{
    const pn_grid *g = &c->grid;
    int mine = rc < 0 ? g->rank : g->size, first;
    MPI_Request r;
    int sent = MPI_Iallreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->world, &r);
    int waited =
        sent == MPI_SUCCESS ? pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &AGREEMENT) : PN_ERR_MPI;
    if (waited == PN_ERR_STALL) return waited;
    if (waited < 0)
        return rc < 0 ? rc
                      : pn_error_set(PN_ERR_MPI, "cannot agree on the outcome with the other ranks");
    if (first == g->size) return PN_OK;
    if (c->transport->abort) c->transport->abort(c); /* the job ends: no NCCL wait may hang */
    if (first == g->rank) return rc;
    return pn_error_set(PN_ERR_PEER, "rank %d failed", first);
}

int pn_comm_agree_root(pn_comm *c, int rc, const char *what)
{
    int root_rc = rc;
    PN_TRY(bcast(c, &root_rc, 1, MPI_INT, c->world, &AGREEMENT));
    if (c->grid.rank == 0 || rc < 0) return rc;
    return root_rc < 0 ? pn_error_set(PN_ERR_PEER, "rank 0 could not %s", what) : PN_OK;
}

/* --- scalars ----------------------------------------------------------------------------- */

static MPI_Comm scope_comm(const pn_comm *c, pn_comm_scope scope)
{
    return scope == PN_SCOPE_PIPE ? c->pipe : scope == PN_SCOPE_REPLICAS ? c->replicas : c->world;
}

/* MPI_Allreduce through the watched wait. */
static int allreduce(pn_comm *c, const void *in, void *out, int n, MPI_Datatype type, MPI_Op op,
                     pn_comm_scope scope, const char *what)
{
    MPI_Request r;
    PN_MPI_CHECK(MPI_Iallreduce(in, out, n, type, op, scope_comm(c, scope), &r));
    return pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &(pn_wait_for){what, NULL, -1, scope});
}

int pn_comm_sum(pn_comm *c, pn_comm_scope scope, double *v, int n)
{
    return allreduce(c, MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, scope, "a sum over");
}

int pn_comm_xor(pn_comm *c, pn_comm_scope scope, uint64_t *v, int n)
{
    return allreduce(c, MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_BXOR, scope, "an XOR over");
}

int pn_comm_max(pn_comm *c, int mine, int *max)
{
    return allreduce(c, &mine, max, 1, MPI_INT, MPI_MAX, PN_SCOPE_WORLD, "a maximum over");
}

int pn_comm_any(pn_comm *c, bool mine, bool *any)
{
    int out = 0;
    PN_TRY(pn_comm_max(c, mine, &out));
    *any = out != 0;
    return PN_OK;
}

int pn_comm_broadcast(pn_comm *c, void *bytes, size_t n)
{
    if (n > INT_MAX) return pn_error_set(PN_ERR_INTERNAL, "broadcast of %zu bytes", n);
    return bcast(c, bytes, (int)n, MPI_BYTE, c->world, &FROM_ROOT);
}

/* --- large messages ------------------------------------------------------------------------ */

/* MPI counts are ints: arena images may be larger, so they travel in pieces. */
static const size_t PIECE = (size_t)1 << 28;

static size_t elem_size(pn_comm_type type) { return type == PN_COMM_FLOATS ? 4 : 1; }
static MPI_Datatype elem_type(pn_comm_type type)
{
    return type == PN_COMM_FLOATS ? MPI_FLOAT : MPI_BYTE;
}

/* An image sent to (or received from) stage peer of this replica, piece by piece. */
static int move_large(pn_comm *c, bool send, void *data, size_t count, pn_comm_type type,
                      int peer)
{
    for (size_t done = 0; done < count; done += PIECE) {
        size_t n = count - done < PIECE ? count - done : PIECE;
        char *at = (char *)data + done * elem_size(type);
        MPI_Request r;
        if (send)
            PN_MPI_CHECK(MPI_Isend(at, (int)n, elem_type(type), peer, c->image_tag, c->pipe, &r));
        else
            PN_MPI_CHECK(MPI_Irecv(at, (int)n, elem_type(type), peer, c->image_tag, c->pipe, &r));
        PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &IMAGES));
    }
    return PN_OK;
}

/* --- arena images ------------------------------------------------------------------------ */

int pn_comm_gather_stages(pn_comm *c, const void *mine, size_t count, pn_comm_type type,
                          void **all, size_t *counts)
{
    const pn_grid *g = &c->grid;
    if (g->replica != 0) return PN_OK;
    _Static_assert(sizeof(size_t) == sizeof(unsigned long), "counts travel as MPI_UNSIGNED_LONG");
    MPI_Request r;
    PN_MPI_CHECK(MPI_Igather(&count, 1, MPI_UNSIGNED_LONG, counts, 1, MPI_UNSIGNED_LONG, 0,
                             c->pipe, &r));
    PN_TRY(pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE, &IMAGES));
    /* rank 0 makes room for the others, then tells the stages whether to send */
    int ready = 1;
    char *buf = NULL;
    if (g->stage == 0) {
        size_t total = 0;
        for (int s = 1; s < g->stages; s++) total += counts[s];
        ready = (buf = malloc((total ? total : 1) * elem_size(type))) != NULL;
    }
    int rc = bcast(c, &ready, 1, MPI_INT, c->pipe, &IMAGES);
    if (rc < 0) {
        free(buf);
        return rc;
    }
    if (!ready)
        return g->stage == 0
                   ? pn_error_set(PN_ERR_NOMEM, "out of memory gathering the stages' state")
                   : pn_error_set(PN_ERR_PEER, "rank 0 has no memory for the stages' state");
    if (g->stage != 0) return move_large(c, true, (void *)mine, count, type, 0);
    size_t at = 0;
    for (int s = 1; s < g->stages; s++) {
        rc = move_large(c, false, buf + at * elem_size(type), counts[s], type, s);
        if (rc < 0) {
            free(buf);
            return rc;
        }
        at += counts[s];
    }
    *all = buf;
    return PN_OK;
}

/* --- the data plane, through the transport ------------------------------------------------- */

int pn_link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out)
{
    *out = NULL;
    /* a link's tag is (2 x node + kind) x V + the chunk's lane (link_header.c: pn_link_tag):
     * the largest must stay below the tags of tied gradients and arena images */
    long v = spec->virtual_stages > 1 ? spec->virtual_stages : 1;
    if ((2 * (long)spec->node + 1) * v + v - 1 >= c->tie_tag)
        return pn_error_set(PN_ERR_UNSUPPORTED, "layer %d ('%s'): this MPI's tags (up to %d) "
                                                "cannot name so many layers%s",
                            spec->node, spec->name, c->tie_tag - 1,
                            v > 1 ? " times the virtual stages" : "");
    bool value = spec->kind == PN_LINK_VALUE;
    if (spec->seq < 0 || (spec->seq > 0 && (!value || spec->max_rows % spec->seq ||
                                            spec->slot_rows % spec->seq)))
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s': lengths of seq %d on a %s link of "
                                             "%d rows",
                            spec->name, spec->seq, value ? "value" : "gradient", spec->max_rows);
    if (spec->slot_rows < 0 || spec->slot_rows > spec->max_rows)
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s': slots of %d rows, messages of %d",
                            spec->name, spec->slot_rows, spec->max_rows);
    return c->transport->link_create(c, spec, out);
}

void pn_link_free(pn_link *l)
{
    if (l) l->transport->link_free(l);
}

const pn_link_spec *pn_link_spec_of(const pn_link *l) { return &l->spec; }

int pn_link_post_recv(pn_link *l, int micro)
{
    return l->transport->link_post_recv(l, micro);
}

/* The trace's name of a transfer on l. */
static const char *transfer_name(const pn_link *l, bool send)
{
    return l->spec.kind == PN_LINK_VALUE ? (send ? "send value" : "recv value")
                                         : (send ? "send grad" : "recv grad");
}

int pn_link_recv(pn_link *l, long step, int micro, pn_matrix *into, bool add)
{
    double t0 = PN_TRACE_T0();
    int rc = l->transport->link_recv(l, step, micro, into, add);
    PN_TRACE(transfer_name(l, false), "comm", l->spec.name, step, micro, t0);
    return rc;
}

const int *pn_link_lengths(const pn_link *l, int micro)
{
    return l->transport->link_lengths(l, micro);
}

int pn_link_send(pn_link *l, long step, int micro, const pn_matrix *m, const int *lengths)
{
    double t0 = PN_TRACE_T0();
    int rc = l->transport->link_send(l, step, micro, m, lengths);
    PN_TRACE(transfer_name(l, true), "comm", l->spec.name, step, micro, t0);
    return rc;
}

int pn_link_wait_sends(pn_link *l)
{
    double t0 = PN_TRACE_T0();
    int rc = l->transport->link_wait_sends(l);
    PN_TRACE("wait sends", "wait", l->spec.name, -1, -1, t0);
    return rc;
}

void pn_link_cancel(pn_link *l) { l->transport->link_cancel(l); }

int pn_comm_bucket_start(pn_comm *c, pn_matrix *m) { return c->transport->bucket_start(c, m); }

bool pn_comm_can_reduce_buckets(const pn_comm *c)
{
    return c->transport->bucket_reduce_start != NULL;
}

int pn_comm_bucket_reduce_start(pn_comm *c, pn_matrix *m, int root)
{
    if (!c->transport->bucket_reduce_start)
        return pn_error_set(PN_ERR_INTERNAL, "transport %s reduces no bucket to one replica",
                            pn_comm_transport_name(c));
    return c->transport->bucket_reduce_start(c, m, root);
}

int pn_comm_buckets_wait(pn_comm *c)
{
    double t0 = PN_TRACE_T0();
    int rc = c->transport->buckets_wait(c);
    PN_TRACE("bucket all-reduce wait", "wait", NULL, -1, -1, t0);
    return rc;
}

int pn_comm_gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    if (all->rows != c->grid.replicas || all->cols != mine->cols || mine->rows != 1)
        return pn_error_set(PN_ERR_INTERNAL, "replica gather: %d x %d from 1 x %d over %d replicas",
                            all->rows, all->cols, mine->cols, c->grid.replicas);
    double t0 = PN_TRACE_T0();
    int rc = c->transport->gather_replicas(c, mine, all);
    PN_TRACE("replica gather", "allreduce", NULL, -1, -1, t0);
    return rc;
}

int pn_comm_exchange_replicas(pn_comm *c, const pn_matrix *send, pn_matrix *recv)
{
    if (send->rows != c->grid.replicas || recv->rows != c->grid.replicas ||
        send->cols != recv->cols || send->data == recv->data)
        return pn_error_set(PN_ERR_INTERNAL, "replica exchange: %d x %d into %d x %d over %d "
                            "replicas", send->rows, send->cols, recv->rows, recv->cols,
                            c->grid.replicas);
    double t0 = PN_TRACE_T0();
    int rc = c->transport->exchange_replicas(c, send, recv);
    PN_TRACE("replica exchange", "allreduce", NULL, -1, -1, t0);
    return rc;
}

int pn_comm_replica_counts(pn_comm *c, int n, int *counts)
{
    MPI_Request r;
    c->row_bytes_sent += (double)sizeof(int) * (c->grid.replicas - 1);
    double t0 = PN_TRACE_T0(); /* like the gather's: where the replicas wait for each other */
    PN_MPI_CHECK(MPI_Iallgather(&n, 1, MPI_INT, counts, 1, MPI_INT, c->replicas, &r));
    int rc = pn_comm_wait(c, 1, &r, MPI_STATUSES_IGNORE,
                          &(pn_wait_for){"the row-sparse counts of", NULL, -1, PN_SCOPE_REPLICAS});
    PN_TRACE("row-sparse counts", "allreduce", NULL, -1, -1, t0);
    return rc;
}

int pn_comm_gather_rows(pn_comm *c, const int *counts, const int *ids, const pn_matrix *rows,
                        int *all_ids, pn_matrix *all_rows)
{
    int d = c->grid.replicas, me = c->grid.replica, width = rows->cols;
    long total = 0;
    for (int r = 0; r < d; r++) total += counts[r];
    if (rows->device.kind != PN_DEVICE_HOST || all_rows->device.kind != PN_DEVICE_HOST ||
        !pn_matrix_dense(*rows) || !pn_matrix_dense(*all_rows) || rows->rows != counts[me] ||
        all_rows->rows != total || all_rows->cols != width || total * width > INT_MAX)
        return pn_error_set(PN_ERR_INTERNAL, "row gather: %d x %d into %d x %d over %d replicas",
                            rows->rows, width, all_rows->rows, all_rows->cols, d);
    /* displacements of the ids, counts and displacements of the floats */
    int *at = c->gather_at, *fcounts = at + d, *fat = at + 2 * d;
    for (int r = 0, k = 0; r < d; k += counts[r], r++) {
        at[r] = k;
        fcounts[r] = counts[r] * width;
        fat[r] = k * width;
    }
    /* every other replica receives this rank's entries */
    c->row_bytes_sent += (double)counts[me] * (sizeof(int) + (double)width * sizeof(float)) *
                         (d - 1);
    double t0 = PN_TRACE_T0();
    MPI_Request req[2];
    int rc = MPI_Iallgatherv(ids, counts[me], MPI_INT, all_ids, counts, at, MPI_INT, c->replicas,
                             &req[0]);
    if (rc == MPI_SUCCESS)
        rc = MPI_Iallgatherv(rows->data, fcounts[me], MPI_FLOAT, all_rows->data, fcounts, fat,
                             MPI_FLOAT, c->replicas, &req[1]);
    int out = rc == MPI_SUCCESS
                  ? pn_comm_wait(c, 2, req, MPI_STATUSES_IGNORE,
                                 &(pn_wait_for){"the row-sparse gradients of", NULL, -1,
                                                PN_SCOPE_REPLICAS})
                  : pn_error_set(PN_ERR_MPI, "MPI_Iallgatherv of row-sparse gradients failed (%d)",
                                 rc);
    PN_TRACE("row-sparse gather", "allreduce", NULL, -1, -1, t0);
    return out;
}

int pn_comm_pipe_exchange(pn_comm *c, int n_send, const pn_matrix *send, const int *to,
                          int n_recv, pn_matrix *recv, const int *from)
{
    for (int i = 0; i < n_send + n_recv; i++) {
        int peer = i < n_send ? to[i] : from[i - n_send];
        if (peer < 0 || peer >= c->grid.stages || peer == c->grid.stage)
            return pn_error_set(PN_ERR_INTERNAL, "pipe exchange with stage %d from stage %d of %d",
                                peer, c->grid.stage, c->grid.stages);
    }
    double t0 = PN_TRACE_T0();
    int rc = c->transport->pipe_exchange(c, n_send, send, to, n_recv, recv, from);
    PN_TRACE("tied gradient exchange", "comm", NULL, -1, -1, t0);
    return rc;
}

double pn_comm_row_bytes_sent(const pn_comm *c)
{
    return c->row_bytes_sent;
}

double pn_comm_link_bytes_sent(const pn_comm *c) { return c->link_bytes_sent; }
