/* The communication seam (comm.h): the communicators of the rank grid, the control
 * plane over MPI (status agreement, scalar reductions, broadcast, arena images
 * between rank 0 and the first replica's stages), and the dispatch of the data
 * plane to the transport (comm_impl.h). */
#include "mpi/comm_impl.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "mpi/job_mpi.h"
#include "mpi/mpi_check.h"


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
    c->world = c->pipe = c->replicas = MPI_COMM_NULL;
    c->transport = &pn_transport_mpi;
    *out = c;
    pn_grid *g = &c->grid;
    *g = (pn_grid){.rank = rank, .size = size, .stages = stages, .replicas = size / stages,
                   .stage = rank % stages, .replica = rank / stages};
    PN_MPI_CHECK(MPI_Comm_dup(pn_job_comm(job), &c->world));
    PN_MPI_CHECK(MPI_Comm_set_errhandler(c->world, MPI_ERRORS_RETURN));
    PN_MPI_CHECK(MPI_Comm_split(c->world, g->replica, g->stage, &c->pipe));
    PN_MPI_CHECK(MPI_Comm_split(c->world, g->stage, g->replica, &c->replicas));
    int *tag_ub, found = 0; /* the largest tag this MPI takes, at least 32767 */
    PN_MPI_CHECK(MPI_Comm_get_attr(c->world, MPI_TAG_UB, &tag_ub, &found));
    c->image_tag = found ? *tag_ub : 32767;
    MPI_Comm node;
    PN_MPI_CHECK(MPI_Comm_split_type(c->world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int rc = MPI_Comm_size(node, &g->local_ranks);
    MPI_Comm_free(&node);
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, "MPI_Comm_size", __FILE__, __LINE__);
    return PN_OK;
}

void pn_comm_free(pn_comm *c)
{
    if (!c) return;
    if (c->transport_state && c->transport->release) c->transport->release(c);
    MPI_Comm *comms[] = {&c->pipe, &c->replicas, &c->world};
    for (int i = 0; i < 3; i++)
        if (*comms[i] != MPI_COMM_NULL) MPI_Comm_free(comms[i]);
    free(c);
}

const pn_grid *pn_comm_grid(const pn_comm *c) { return &c->grid; }

/* --- status ------------------------------------------------------------------------------ */

int pn_comm_agree(pn_comm *c, int rc)
{
    const pn_grid *g = &c->grid;
    int mine = rc < 0 ? g->rank : g->size, first;
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, c->world) != MPI_SUCCESS)
        return rc < 0 ? rc
                      : pn_error_set(PN_ERR_MPI, "cannot agree on the outcome with the other ranks");
    if (first == g->size) return PN_OK;
    if (first == g->rank) return rc;
    return pn_error_set(PN_ERR_PEER, "rank %d failed", first);
}

int pn_comm_agree_root(pn_comm *c, int rc, const char *what)
{
    int root_rc = rc;
    PN_MPI_CHECK(MPI_Bcast(&root_rc, 1, MPI_INT, 0, c->world));
    if (c->grid.rank == 0 || rc < 0) return rc;
    return root_rc < 0 ? pn_error_set(PN_ERR_PEER, "rank 0 could not %s", what) : PN_OK;
}

/* --- scalars ----------------------------------------------------------------------------- */

static MPI_Comm scope_comm(const pn_comm *c, pn_comm_scope scope)
{
    return scope == PN_SCOPE_PIPE ? c->pipe : scope == PN_SCOPE_REPLICAS ? c->replicas : c->world;
}

int pn_comm_sum(pn_comm *c, pn_comm_scope scope, double *v, int n)
{
    PN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, MPI_SUM, scope_comm(c, scope)));
    return PN_OK;
}

int pn_comm_xor(pn_comm *c, pn_comm_scope scope, uint64_t *v, int n)
{
    PN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, v, n, MPI_UINT64_T, MPI_BXOR, scope_comm(c, scope)));
    return PN_OK;
}

int pn_comm_max(pn_comm *c, int mine, int *max)
{
    PN_MPI_CHECK(MPI_Allreduce(&mine, max, 1, MPI_INT, MPI_MAX, c->world));
    return PN_OK;
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
    PN_MPI_CHECK(MPI_Bcast(bytes, (int)n, MPI_BYTE, 0, c->world));
    return PN_OK;
}

/* --- large messages ------------------------------------------------------------------------ */

/* MPI counts are ints: arena images may be larger, so they travel in pieces. */
static const size_t PIECE = (size_t)1 << 28;

static size_t elem_size(pn_comm_type type) { return type == PN_COMM_FLOATS ? 4 : 1; }
static MPI_Datatype elem_type(pn_comm_type type)
{
    return type == PN_COMM_FLOATS ? MPI_FLOAT : MPI_BYTE;
}

static int send_large(const void *data, size_t count, pn_comm_type type, int to, MPI_Comm comm,
                      int tag)
{
    for (size_t done = 0; done < count; done += PIECE) {
        size_t n = count - done < PIECE ? count - done : PIECE;
        PN_MPI_CHECK(MPI_Send((const char *)data + done * elem_size(type), (int)n, elem_type(type),
                              to, tag, comm));
    }
    return PN_OK;
}

static int recv_large(void *data, size_t count, pn_comm_type type, int from, MPI_Comm comm,
                      int tag)
{
    for (size_t done = 0; done < count; done += PIECE) {
        size_t n = count - done < PIECE ? count - done : PIECE;
        PN_MPI_CHECK(MPI_Recv((char *)data + done * elem_size(type), (int)n, elem_type(type),
                              from, tag, comm, MPI_STATUS_IGNORE));
    }
    return PN_OK;
}

static int bcast_large(void *data, size_t count, pn_comm_type type, MPI_Comm comm)
{
    for (size_t done = 0; done < count; done += PIECE) {
        size_t n = count - done < PIECE ? count - done : PIECE;
        PN_MPI_CHECK(MPI_Bcast((char *)data + done * elem_size(type), (int)n, elem_type(type), 0,
                               comm));
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
    PN_MPI_CHECK(MPI_Gather(&count, 1, MPI_UNSIGNED_LONG, counts, 1, MPI_UNSIGNED_LONG, 0,
                            c->pipe));
    /* rank 0 makes room for the others, then tells the stages whether to send */
    int ready = 1;
    char *buf = NULL;
    if (g->stage == 0) {
        size_t total = 0;
        for (int s = 1; s < g->stages; s++) total += counts[s];
        ready = (buf = malloc((total ? total : 1) * elem_size(type))) != NULL;
    }
    PN_MPI_CHECK(MPI_Bcast(&ready, 1, MPI_INT, 0, c->pipe));
    if (!ready)
        return g->stage == 0
                   ? pn_error_set(PN_ERR_NOMEM, "out of memory gathering the stages' state")
                   : pn_error_set(PN_ERR_PEER, "rank 0 has no memory for the stages' state");
    if (g->stage != 0) return send_large(mine, count, type, 0, c->pipe, c->image_tag);
    size_t at = 0;
    for (int s = 1; s < g->stages; s++) {
        int r = recv_large(buf + at * elem_size(type), counts[s], type, s, c->pipe,
                           c->image_tag);
        if (r < 0) {
            free(buf);
            return r;
        }
        at += counts[s];
    }
    *all = buf;
    return PN_OK;
}

int pn_comm_scatter_stages(pn_comm *c, const void *all, const size_t *counts, void *mine,
                           size_t count, pn_comm_type type)
{
    const pn_grid *g = &c->grid;
    if (g->replica != 0) return PN_OK;
    if (g->stage != 0) return recv_large(mine, count, type, 0, c->pipe, c->image_tag);
    size_t at = 0;
    for (int s = 1; s < g->stages; s++) {
        PN_TRY(send_large((const char *)all + at * elem_size(type), counts[s], type, s, c->pipe,
                          c->image_tag));
        at += counts[s];
    }
    return PN_OK;
}

int pn_comm_broadcast_replicas(pn_comm *c, void *data, size_t count, pn_comm_type type)
{
    return c->grid.replicas > 1 ? bcast_large(data, count, type, c->replicas) : PN_OK;
}

/* --- the data plane, through the transport ------------------------------------------------- */

int pn_link_create(pn_comm *c, const pn_link_spec *spec, pn_link **out)
{
    *out = NULL;
    if (2 * (long)spec->node + 1 >= c->image_tag) /* a link's tag is 2 x node + kind */
        return pn_error_set(PN_ERR_UNSUPPORTED, "layer %d ('%s'): this MPI's tags (up to %d) "
                                                "cannot name so many layers",
                            spec->node, spec->name, c->image_tag);
    return c->transport->link_create(c, spec, out);
}

void pn_link_free(pn_link *l)
{
    if (l) l->comm->transport->link_free(l);
}

const pn_link_spec *pn_link_spec_of(const pn_link *l) { return &l->spec; }

int pn_link_post_recv(pn_link *l, int micro)
{
    return l->comm->transport->link_post_recv(l, micro);
}

int pn_link_recv(pn_link *l, long step, int micro, pn_matrix *into, bool add)
{
    return l->comm->transport->link_recv(l, step, micro, into, add);
}

int pn_link_send(pn_link *l, long step, int micro, const pn_matrix *m)
{
    return l->comm->transport->link_send(l, step, micro, m);
}

int pn_link_wait_sends(pn_link *l) { return l->comm->transport->link_wait_sends(l); }

void pn_link_cancel(pn_link *l) { l->comm->transport->link_cancel(l); }

int pn_comm_bucket_start(pn_comm *c, pn_matrix *m) { return c->transport->bucket_start(c, m); }

int pn_comm_buckets_wait(pn_comm *c) { return c->transport->buckets_wait(c); }

int pn_comm_gather_replicas(pn_comm *c, const pn_matrix *mine, pn_matrix *all)
{
    if (all->rows != c->grid.replicas || all->cols != mine->cols || mine->rows != 1)
        return pn_error_set(PN_ERR_INTERNAL, "replica gather: %d x %d from 1 x %d over %d replicas",
                            all->rows, all->cols, mine->cols, c->grid.replicas);
    return c->transport->gather_replicas(c, mine, all);
}
