/* pn_kept_inputs: what a stage keeps of each micro-batch in flight under
 * --recompute (pipeline/stage.h). Instead of one network per micro-batch between
 * its forward and its backward, the stage runs them all in one network and keeps
 * only the values that network does not compute itself: the Arguments received
 * from earlier stages. (Its data inputs need no copy: the step's batch stays alive,
 * and the rows are fed again.) Before a backward, the stage puts the micro-batch's
 * inputs back and runs its forward again. One buffer per kept input and slot; slot
 * = micro-batch % the schedule's peak in flight, as the networks were. Copies go
 * through pn_copy, so the buffers may live on any device. */
#ifndef PN_KEPT_INPUTS_H
#define PN_KEPT_INPUTS_H

#include <stddef.h>

#include "math/buffer.h"
#include "net/network.h"

typedef struct pn_kept_inputs {
    pn_device device;
    int slots;        /* micro-batches in flight */
    int n;            /* kept inputs */
    int *node;        /* [n] graph node of each */
    int *rows, *cols; /* [n] matrix rows of a whole micro-batch, and width */
    pn_buffer *bufs;  /* [n * slots] */
} pn_kept_inputs;

/* An empty set for `slots` micro-batches in flight on dev. */
void pn_kept_inputs_init(pn_kept_inputs *k, pn_device dev, int slots);

/* Keeps node's value (rows x cols at most, a micro-batch's) in every slot. */
int pn_kept_inputs_add(pn_kept_inputs *k, int node, int rows, int cols);

/* Copies net's values of the kept nodes into slot / from slot back into net (the
 * network's batch decides the rows). */
int pn_kept_inputs_save(pn_kept_inputs *k, int slot, pn_network *net);
int pn_kept_inputs_restore(pn_kept_inputs *k, int slot, pn_network *net);

/* Bytes of the blocks held. */
size_t pn_kept_inputs_bytes(const pn_kept_inputs *k);

void pn_kept_inputs_free(pn_kept_inputs *k);

#endif
