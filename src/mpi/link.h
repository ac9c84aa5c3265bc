/* pn_link: one direction of one Argument between two stages of a replica: the
 * forward value of a node from the stage that computes it to a stage that consumes
 * it, or that consumer's gradient back. Each micro-batch of a step has its own
 * buffer, so receives are posted ahead and sends never wait for a buffer. Every
 * message starts with a header (step, micro-batch, node, value or gradient, shape)
 * that the receiver checks: a mismatch is an error naming both sides, never a
 * silent wrong number or a hang. */
#ifndef PN_LINK_H
#define PN_LINK_H

#include <mpi.h>
#include <stdbool.h>

#include "math/matrix.h"

typedef enum pn_link_kind { PN_LINK_VALUE = 0, PN_LINK_GRAD = 1 } pn_link_kind;

typedef struct pn_link {
    pn_link_kind kind;
    bool sends;        /* this side sends (else receives) */
    int node;          /* graph node whose value or gradient travels */
    const char *name;  /* the node's name, for messages */
    int peer;          /* the other side's stage (rank in the pipe communicator) */
    int self;          /* this side's stage */
    int cols, max_rows;
    int slots;         /* one buffer per micro-batch of a step */
    char **buf;        /* [slots] header + payload */
    MPI_Request *req;  /* [slots] */
} pn_link;

/* Allocates the buffers of a link for micro-batches of up to max_rows x cols. */
int pn_link_init(pn_link *l, pn_link_kind kind, bool sends, int node, const char *name,
                 int self, int peer, int cols, int max_rows, int slots);
void pn_link_free(pn_link *l);

/* Posts the receive of micro-batch slot `micro`. */
int pn_link_post_recv(pn_link *l, MPI_Comm pipe, int micro);

/* Waits for micro-batch `micro` of `step`, checks its header against the expected
 * rows, and returns a host view of the payload in *payload. */
int pn_link_wait_recv(pn_link *l, long step, int micro, int rows, pn_matrix *payload);

/* Copies m (rows x cols) into the buffer of `micro` behind a header and starts
 * sending it. */
int pn_link_send(pn_link *l, MPI_Comm pipe, long step, int micro, const pn_matrix *m);

/* Waits until every started send of the link has completed. */
int pn_link_wait_sends(pn_link *l);

/* Cancels receives still pending (after a failure or at the end of a run). */
void pn_link_cancel(pn_link *l);

#endif
