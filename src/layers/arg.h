/* pn_arg: what flows along one edge of the network for one (micro-)batch, Paddle's
 * Argument: a value matrix, its gradient, integer ids (labels, tokens) and sequence
 * start positions. An arg may own its storage (pn_arg_reserve) or be filled with
 * views by whoever plans memory. */
#ifndef PN_ARG_H
#define PN_ARG_H

#include <stdbool.h>

#include "math/matrix.h"

/* What one sample of an edge holds: seq rows of width floats, or seq integer ids. */
typedef struct pn_shape {
    int width;  /* floats per row; 0 for ids */
    int seq;    /* rows per sample (1 unless the edge carries sequences) */
    bool ids;   /* integer ids instead of floats */
} pn_shape;

typedef struct pn_arg {
    pn_matrix value;  /* [batch * seq, width]; empty for ids */
    pn_matrix grad;   /* same shape; data == NULL when no gradient flows here */
    int *ids;         /* [batch * seq] on value's device; NULL for float edges */
    int *seq_starts;  /* [n_seqs + 1] row where each sequence starts; NULL: fixed seq
                       * (reserved for a packed layout; no layer uses it yet) */
    int n_seqs;
    /* [batch] real positions of each sample, in [1, shape.seq], in host memory (the
     * schedule of a recurrent layer is planned on the host, like Paddle's
     * SequenceToBatch); rows past a sample's length are padding. NULL: every sample
     * is shape.seq long (the fixed-length layout). Set by whoever feeds the arg. */
    const int *lengths;
    int batch;        /* samples in this arg */
    pn_shape shape;
    /* The gradient holds nothing yet in this backward and counts as zeros: set by
     * pn_network_backward_begin instead of zeroing every gradient; the first layer
     * that produces it writes it whole (pn_arg_grad_beta) instead of adding into
     * zeros, and anything that must read or add into it first zeroes it
     * (pn_arg_grad_zero_stale). */
    bool grad_stale;
    pn_buffer value_buf, grad_buf, ids_buf; /* storage when the arg owns it */
} pn_arg;

/* Rows of the arg's matrices (batch * seq). */
static inline int pn_arg_rows(const pn_arg *a) { return a->batch * a->shape.seq; }

/* Makes the arg own storage for batch samples of shape on dev (grad only when
 * with_grad); keeps its blocks when they are big enough. */
int pn_arg_reserve(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad);

/* The beta for an op about to write all of a's gradient: 0 (overwrite) while the
 * gradient is stale, else 1 (add to what producers before wrote); the gradient
 * counts as written afterwards. */
float pn_arg_grad_beta(pn_arg *a);

/* Zeroes a's gradient if it is stale (then it is not). */
int pn_arg_grad_zero_stale(pn_arg *a);

/* Releases storage the arg owns and empties it. */
void pn_arg_release(pn_arg *a);

/* Bytes one sample of shape takes (value, not grad). */
size_t pn_shape_bytes(pn_shape shape);

/* Writes "784", "64x32" (seq x width) or "ids[32]" into buf. */
const char *pn_shape_format(pn_shape shape, char *buf, int cap);

#endif
