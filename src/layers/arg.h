/* pn_arg: what flows along one edge of the network for one (micro-)batch, Paddle's
 * Argument: a value matrix, its gradient, integer ids (labels, tokens) and sequence
 * start positions. An arg may own its storage (pn_arg_reserve) or be filled with
 * views by whoever plans memory. */
#ifndef PN_ARG_H
#define PN_ARG_H

#include <stdbool.h>
#include <stdint.h>

#include "math/matrix.h"

/* What one sample of an edge holds: seq rows of width floats, seq integer ids, or
 * (sparse) one row of a CSR matrix of `columns` columns, its features optionally
 * tagged with fields in [0, fields). */
typedef struct pn_shape {
    int width;  /* floats per row; 0 for ids and sparse edges */
    int seq;    /* rows per sample (1 unless the edge carries sequences) */
    bool ids;   /* integer ids instead of floats */
    bool sparse; /* a CSR batch (pn_arg.csr): made by sparse_input, read on its stage */
    int fields;  /* sparse: the number of fields, 0 when the data has none */
    int64_t columns; /* sparse: feature ids lie in [0, columns) (may exceed 2^31) */
} pn_shape;

/* A dense edge's shape: seq rows of width floats, or (ids) seq ids. */
static inline pn_shape pn_shape_dense(int width, int seq, bool ids)
{
    return (pn_shape){.width = width, .seq = seq, .ids = ids};
}

/* A CSR batch in host memory (a sparse edge's samples, or the reader's): sample b's
 * features are [offsets[b], offsets[b+1]). Feature ids are int64 because a file's
 * columns may exceed 2^31; a batch's nnz fits an int (the reader checks its bound). */
typedef struct pn_csr {
    int rows;
    int nnz;
    int *offsets;  /* [rows + 1], offsets[0] == 0 */
    int64_t *cols; /* [nnz] */
    float *vals;   /* [nnz] */
    int *fields;   /* [nnz], or NULL when the edge has no fields */
} pn_csr;

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
    /* A sparse edge's batch, always in host memory (the layers that read it copy
     * what the device needs through pn_buffer_write): offsets are reserved for the
     * planned batch, the nnz arrays grow only (pn_arg_csr_reserve), so once the
     * largest batch has passed a step allocates nothing. */
    pn_csr csr;
    pn_buffer value_buf, grad_buf, ids_buf; /* storage when the arg owns it */
    pn_buffer csr_off_buf, csr_nz_buf;
} pn_arg;

/* Rows of the arg's matrices (batch * seq). */
static inline int pn_arg_rows(const pn_arg *a) { return a->batch * a->shape.seq; }

/* Makes the arg own storage for batch samples of shape on dev (grad only when
 * with_grad); keeps its blocks when they are big enough. */
int pn_arg_reserve(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad);

/* The same, a float edge's value (gradient) a view on value_on (grad_on) when not
 * NULL, which holds at least the batch's bytes: storage a memory planner shares
 * between arguments (net/arg_plan.h); the arg's own block is released. */
int pn_arg_reserve_on(pn_arg *a, pn_device dev, pn_shape shape, int batch, bool with_grad,
                      const pn_buffer *value_on, const pn_buffer *grad_on);

/* The same, where value_bf16 (grad_bf16) says that value_on (grad_on) stores the
 * matrix as bf16, 2 bytes an element: the matrix then points at that storage, which
 * only the network that planned it reads (net/arg_bf16.h). */
int pn_arg_reserve_on_bf16(pn_arg *a, pn_device dev, pn_shape shape, int batch,
                           bool with_grad, const pn_buffer *value_on, const pn_buffer *grad_on,
                           bool value_bf16, bool grad_bf16);

/* Makes a sparse arg's nnz arrays hold at least nnz features (growing only; the
 * contents do not survive a growth), and sets csr.nnz. */
int pn_arg_csr_reserve(pn_arg *a, int nnz);

/* Copies samples [first, first + rows) of src into sparse arg a (offsets rebased
 * to 0), growing a's nnz arrays if needed. */
int pn_arg_csr_feed(pn_arg *a, const pn_csr *src, int first, int rows);

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

/* Writes "784", "64x32" (seq x width), "ids[32]" or "csr[1000000]" into buf. */
const char *pn_shape_format(pn_shape shape, char *buf, int cap);

#endif
