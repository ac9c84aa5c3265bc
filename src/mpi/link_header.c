/* The stage links' message header (link_header.h), shared by the transports. */
#include "mpi/link_header.h"

#include "base/error.h"

enum { LINK_MAGIC = 0x706e6c6b };

static const char *kind_name(int kind) { return kind == PN_LINK_GRAD ? "gradient" : "value"; }

int pn_link_tag(const pn_link *l)
{
    int v = l->spec.virtual_stages > 1 ? l->spec.virtual_stages : 1;
    int lane = l->spec.chunk / l->comm->grid.stages; /* the chunk's place on its stage */
    return (l->spec.node * 2 + (int)l->spec.kind) * v + lane % v;
}

int pn_link_slot_rows(const pn_link *l)
{
    return l->spec.slot_rows > 0 ? l->spec.slot_rows : l->spec.max_rows;
}

size_t pn_link_elem_bytes(const pn_link *l) { return l->spec.bf16 ? sizeof(uint16_t) : sizeof(float); }

int pn_link_samples(const pn_link *l, int rows)
{
    return l->spec.seq > 0 ? rows / l->spec.seq : 0;
}

int pn_link_check_send(const pn_link *l, const pn_matrix *m, const int *lengths)
{
    const pn_link_spec *sp = &l->spec;
    if (m->rows > sp->max_rows || m->cols != sp->cols)
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s': %d x %d does not fit %d x %d",
                            sp->name, m->rows, m->cols, sp->max_rows, sp->cols);
    if ((sp->seq > 0) != (lengths != NULL) || (sp->seq > 0 && m->rows % sp->seq))
        return pn_error_set(PN_ERR_INTERNAL, "link of '%s' (lengths of seq %d): %d rows %s "
                                             "lengths",
                            sp->name, sp->seq, m->rows, lengths ? "with" : "without");
    return PN_OK;
}

pn_link_header pn_link_header_of(const pn_link *l, long step, int micro, const pn_matrix *m,
                                 uint32_t seq)
{
    const pn_link_spec *sp = &l->spec;
    return (pn_link_header){LINK_MAGIC, (int32_t)sp->kind, sp->node, micro, step, m->rows,
                            m->cols, pn_link_samples(l, m->rows), sp->chunk, seq,
                            (int32_t)pn_link_elem_bytes(l)};
}

int pn_link_check_recv(const pn_link *l, const pn_link_header *h, size_t got, size_t want,
                       long step, int micro, const pn_matrix *into, const int32_t *lengths,
                       uint32_t count)
{
    const pn_link_spec *sp = &l->spec;
    int rows = into->rows, samples = pn_link_samples(l, rows);
    if (h->magic != LINK_MAGIC || h->kind != (int)sp->kind || h->node != sp->node ||
        h->chunk != sp->chunk || h->step != step || h->micro != micro || h->rows != rows ||
        h->cols != sp->cols || h->samples != samples || into->cols != sp->cols || got != want ||
        h->elem_bytes != (int32_t)pn_link_elem_bytes(l))
        return pn_error_set(PN_ERR_MPI,
                            "stage %d expected the %s of '%s' for step %ld, micro-batch %d "
                            "(%d x %d of %zu bytes, %d lengths) from stage %d for chunk %d, "
                            "and received a message for node %d, %s, step %ld, micro-batch %d "
                            "(%d x %d of %d bytes, %d lengths, %zu bytes) for chunk %d",
                            l->comm->grid.stage, kind_name(sp->kind), sp->name, step, micro,
                            rows, sp->cols, pn_link_elem_bytes(l), samples, sp->peer, sp->chunk,
                            h->node, kind_name(h->kind), (long)h->step, h->micro, h->rows,
                            h->cols, (int)h->elem_bytes, h->samples, got, h->chunk);
    for (int k = 0; k < samples; k++)
        if (lengths[k] < 1 || lengths[k] > sp->seq)
            return pn_error_set(PN_ERR_MPI,
                                "stage %d received from stage %d the value of '%s' for step %ld, "
                                "micro-batch %d, whose sample %d has length %d, outside 1..%d",
                                l->comm->grid.stage, sp->peer, sp->name, step, micro, k,
                                (int)lengths[k], sp->seq);
    if (h->seq != count)
        return pn_error_set(PN_ERR_MPI,
                            "stage %d received the %s of '%s' for step %ld, micro-batch %d as "
                            "message %u of its link from stage %d, where message %u was due: a "
                            "link's micro-batches must be received in the order they were sent",
                            l->comm->grid.stage, kind_name(sp->kind), sp->name, step, micro,
                            h->seq, sp->peer, count);
    return PN_OK;
}
