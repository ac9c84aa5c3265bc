/* Checked, buffered point-to-point transfer of Arguments between stages. */
#include "mpi/link.h"

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
} header;

static const char *kind_name(int kind) { return kind == PN_LINK_GRAD ? "gradient" : "value"; }

static int tag_of(const pn_link *l) { return l->node * 2 + (int)l->kind; }

static size_t bytes_for(const pn_link *l, int rows)
{
    return HEADER_BYTES + (size_t)rows * (size_t)l->cols * sizeof(float);
}

int pn_link_init(pn_link *l, pn_link_kind kind, bool sends, int node, const char *name,
                 int self, int peer, int cols, int max_rows, int slots)
{
    *l = (pn_link){kind, sends, node, name, peer, self, cols, max_rows, slots, NULL, NULL};
    l->buf = calloc((size_t)slots, sizeof *l->buf);
    l->req = malloc((size_t)slots * sizeof *l->req);
    if (!l->buf || !l->req) return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    for (int s = 0; s < slots; s++) {
        l->req[s] = MPI_REQUEST_NULL;
        if (!(l->buf[s] = aligned_alloc(64, (bytes_for(l, max_rows) + 63) / 64 * 64)))
            return pn_error_set(PN_ERR_NOMEM, "out of memory for link buffers");
    }
    return PN_OK;
}

void pn_link_free(pn_link *l)
{
    if (!l->buf) return;
    pn_link_cancel(l);
    for (int s = 0; s < l->slots; s++) free(l->buf[s]);
    free(l->buf);
    free(l->req);
    l->buf = NULL;
}

int pn_link_post_recv(pn_link *l, MPI_Comm pipe, int micro)
{
    PN_MPI_CHECK(MPI_Irecv(l->buf[micro], (int)bytes_for(l, l->max_rows), MPI_BYTE, l->peer,
                           tag_of(l), pipe, &l->req[micro]));
    return PN_OK;
}

int pn_link_wait_recv(pn_link *l, long step, int micro, int rows, pn_matrix *payload)
{
    MPI_Status status;
    int rc = MPI_Wait(&l->req[micro], &status);
    if (rc != MPI_SUCCESS)
        return pn_mpi_fail(rc, "MPI_Wait (receive from a neighbour stage)", __FILE__, __LINE__);
    header h;
    memcpy(&h, l->buf[micro], sizeof h);
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (h.magic != LINK_MAGIC || h.kind != (int)l->kind || h.node != l->node ||
        h.step != step || h.micro != micro || h.rows != rows || h.cols != l->cols ||
        (size_t)got != bytes_for(l, rows))
        return pn_error_set(PN_ERR_MPI,
                            "stage %d expected the %s of '%s' for step %ld, micro-batch %d "
                            "(%d x %d) from stage %d, and received a message for node %d, "
                            "%s, step %ld, micro-batch %d (%d x %d, %d bytes)",
                            l->self, kind_name(l->kind), l->name, step, micro, rows, l->cols,
                            l->peer, h.node, kind_name(h.kind), (long)h.step, h.micro, h.rows,
                            h.cols, got);
    *payload = pn_matrix_host((float *)(l->buf[micro] + HEADER_BYTES), rows, l->cols);
    return PN_OK;
}

int pn_link_send(pn_link *l, MPI_Comm pipe, long step, int micro, const pn_matrix *m)
{
    if (m->rows > l->max_rows || m->cols != l->cols)
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s': %d x %d does not fit %d x %d",
                            l->name, m->rows, m->cols, l->max_rows, l->cols);
    header h = {LINK_MAGIC, (int32_t)l->kind, l->node, micro, step, m->rows, m->cols};
    memcpy(l->buf[micro], &h, sizeof h);
    pn_matrix dst = pn_matrix_host((float *)(l->buf[micro] + HEADER_BYTES), m->rows, m->cols);
    PN_TRY(pn_copy(m, &dst));
    PN_MPI_CHECK(MPI_Isend(l->buf[micro], (int)bytes_for(l, m->rows), MPI_BYTE, l->peer,
                           tag_of(l), pipe, &l->req[micro]));
    return PN_OK;
}

int pn_link_wait_sends(pn_link *l)
{
    PN_MPI_CHECK(MPI_Waitall(l->slots, l->req, MPI_STATUSES_IGNORE));
    return PN_OK;
}

void pn_link_cancel(pn_link *l)
{
    for (int s = 0; s < l->slots; s++)
        if (l->req[s] != MPI_REQUEST_NULL) {
            MPI_Cancel(&l->req[s]);
            MPI_Request_free(&l->req[s]);
        }
}
