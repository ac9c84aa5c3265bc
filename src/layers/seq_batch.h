/* pn_seq_batch: Paddle's SequenceToBatch for the recurrent layers. The samples of an
 * arg (row b*seq + t is position t of sample b; positions past a sample's length are
 * padding) are sorted by length, longest first, and their real rows laid out time-major:
 * step t holds the count[t] samples still running, in that order, as rows
 * [offset[t], offset[t] + count[t]) of the batch layout. Because the order is by
 * length, the samples running at step t are a prefix of those at step t - 1, so the
 * previous hidden state of step t's rows is the first count[t] rows of step t - 1:
 * one GEMM per step over a shrinking batch, no per-step gather.
 * index[r] is the arg row that batch row r comes from (on the layers' device, for
 * pn_gather_rows / pn_scatter_add_rows); with reverse, step t of a sample is its
 * position len - 1 - t. Planned on the host from the lengths; buffers only grow. */
#ifndef PN_SEQ_BATCH_H
#define PN_SEQ_BATCH_H

#include <stdbool.h>

#include "math/buffer.h"

typedef struct pn_seq_batch {
    int batch, seq;
    int total;   /* real rows: the sum of the lengths */
    int steps;   /* the longest length */
    int *order;  /* [batch] sample at each place, longest first (host) */
    int *offset; /* [seq + 1] first batch row of each step (host) */
    int *count;  /* [seq] samples running at each step (host) */
    int *rows;   /* [batch * seq] arg row of each batch row, total used (host) */
    int *index;  /* the same on the device */
    pn_buffer host_buf, dev_buf;
} pn_seq_batch;

/* Plans sb for batch samples of seq positions with the given lengths (NULL: all
 * seq long; each must lie in [1, seq], else PN_ERR_INVALID naming the sample). */
int pn_seq_batch_plan(pn_seq_batch *sb, pn_device dev, int batch, int seq, const int *lengths,
                      bool reverse);

void pn_seq_batch_release(pn_seq_batch *sb);

#endif
