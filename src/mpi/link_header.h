/* What both transports put in front of a stage link's message (comm_impl.h): a
 * header naming the node, kind, consuming chunk, step, micro-batch, shape and number
 * of lengths, checked on every receive, so a message that is not the one expected
 * is an error naming both sides, never data used in the wrong place. The MPI
 * transport sends header, payload and lengths as one message; the NCCL transport
 * sends header and lengths over MPI and the payload over NCCL. Only src/mpi. */
#ifndef PN_LINK_HEADER_H
#define PN_LINK_HEADER_H

#include <stddef.h>
#include <stdint.h>

#include "mpi/comm_impl.h"

enum { PN_LINK_HEADER_BYTES = 64 };

typedef struct pn_link_header {
    int32_t magic, kind, node, micro;
    int64_t step;
    int32_t rows, cols;
    int32_t samples; /* lengths that travel with it: rows / seq, or 0 */
    int32_t chunk;   /* the consuming chunk (virtual stages), else 0 */
    uint32_t seq;    /* the link's message count (NCCL: payloads match in this order) */
    int32_t elem_bytes; /* of the payload: 4 (float) or 2 (bf16, spec.bf16) */
} pn_link_header;
_Static_assert(sizeof(pn_link_header) <= PN_LINK_HEADER_BYTES, "a link's header fits its bytes");

/* The MPI tag of l's messages: one per (node, kind, consuming chunk's virtual stage),
 * so the links of two chunks between the same pair of ranks never match each other's
 * messages (comm.c keeps the largest below the tied gradients' tag). */
int pn_link_tag(const pn_link *l);

/* Rows a micro-batch's slot holds (spec.slot_rows, or max_rows where it is 0). */
int pn_link_slot_rows(const pn_link *l);

/* Bytes of one payload element: 2 where the link carries bf16 (spec.bf16), else 4. */
size_t pn_link_elem_bytes(const pn_link *l);

/* Lengths a message of rows carries: one per sample when the link carries them. */
int pn_link_samples(const pn_link *l, int rows);

/* The checks of pn_link_send's arguments (PN_ERR_INTERNAL: a caller's bug). */
int pn_link_check_send(const pn_link *l, const pn_matrix *m, const int *lengths);

/* The header of m's message as micro-batch micro of step. */
pn_link_header pn_link_header_of(const pn_link *l, long step, int micro, const pn_matrix *m,
                                 uint32_t seq);

/* Checks a received message against what the receiver expects: header h (from a
 * message of got bytes, where want was due), step, micro-batch, into's shape,
 * lengths[0 .. samples) in [1, seq], and the link's message count (the count-th
 * received must be the count-th sent: NCCL matches a link's payloads in order, and
 * both transports check it, so the CPU's runs test the schedules' order). A
 * mismatch is PN_ERR_MPI naming both sides. */
int pn_link_check_recv(const pn_link *l, const pn_link_header *h, size_t got, size_t want,
                       long step, int micro, const pn_matrix *into, const int32_t *lengths,
                       uint32_t count);

#endif
