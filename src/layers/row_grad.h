/* pn_row_grad: a row-sparse gradient (Paddle's SparseRowMatrix): a table's gradient
 * held as the ids of the rows a step touched and those rows, never a table-sized
 * buffer, so a step's work and memory follow the batch's features, not the table.
 * A backward pass appends entries (id, row), duplicates included; after each
 * micro-batch's backward pn_row_grad_seal sums that micro-batch's entries into its
 * partials: its unique ids in increasing order, each with the sum of its entries in
 * append order. So what is kept and exchanged is one entry per (micro-batch, id),
 * not one per feature. The replicas' partials are concatenated in replica order
 * (pn_comm_gather_rows): the global micro-batch order, as under --deterministic
 * every layout of one micro-batch size runs the same micro-batches of the same
 * samples (replica r's micro-batch m is global micro-batch r M + m);
 * pn_row_grad_merge then sums each id's partials in that order (one scatter-add into
 * the unique rows) and leaves the unique ids in increasing order. Sealing and
 * merging are one routine over a fixed order, which keeps --deterministic
 * bit-identical across layouts. Ids live on the host (sorted there), rows are views
 * for ops on the table's device; on a GPU the merge's slots and the unique ids are
 * copied to device buffers for the ops, and the replica exchange stages the rows
 * through its host staging buffer. Buffers grow only, keeping their entries. */
#ifndef PN_ROW_GRAD_H
#define PN_ROW_GRAD_H

#include <stdbool.h>

#include "math/matrix.h"

typedef struct pn_row_grad {
    int table_rows, width; /* the table's shape: ids lie in [0, table_rows) */
    int n;                 /* entries appended, or unique rows once merged */
    int sealed;            /* entries [0, sealed) are micro-batches' partials */
    int cap;               /* entries the buffers hold */
    bool merged;
    pn_device dev;
    int *ids;              /* [cap] host: entries' ids, then the unique ids sorted */
    int *slot;             /* [cap] host scratch of merge: an entry's unique row */
    int *order, *tmp;      /* [cap] host scratch of merge: entries sorted by id */
    pn_buffer rows;        /* [cap, width] entries' rows */
    pn_buffer sums;        /* [cap, width] merged rows */
    pn_buffer dev_ids;     /* [cap] the unique ids on dev, for the update op */
    pn_buffer dev_slot;    /* [cap] slot on dev, for the merge's scatter (not on the host) */
    pn_buffer staging;     /* [2 cap, width] host: the replica exchange's own rows, then
                            * everyone's (only where the rows are off the host) */
} pn_row_grad;

/* An empty gradient of a table_rows x width table on dev. */
void pn_row_grad_init(pn_row_grad *g, int table_rows, int width, pn_device dev);
void pn_row_grad_release(pn_row_grad *g);

/* Forgets every entry (no work per table row). */
void pn_row_grad_reset(pn_row_grad *g);

/* Makes room for n entries in all, keeping those held. */
int pn_row_grad_reserve(pn_row_grad *g, int n);

/* Appends rows->rows entries: row k of rows for id ids[k]. Not after a merge. */
int pn_row_grad_append(pn_row_grad *g, const int *ids, const pn_matrix *rows);

/* The entries' rows [n, width] (before a merge: where a gather writes them). */
pn_matrix pn_row_grad_entries(const pn_row_grad *g);

/* Room for n entries and where a gather may write them (*ids, *rows [n, width]: the
 * merge's scratch, never NULL, n = 0 included); pn_row_grad_adopt(g, n) then makes
 * them the entries (partials, all sealed). */
int pn_row_grad_incoming(pn_row_grad *g, int n, int **ids, pn_matrix *rows);
void pn_row_grad_adopt(pn_row_grad *g, int n);

/* Replaces the entries appended since the last seal (one micro-batch's) by their
 * partials in place: unique ids in increasing order, each with the sum of its
 * entries in append order. Sealing with nothing new does nothing; not after a merge. */
int pn_row_grad_seal(pn_row_grad *g);

/* Sums duplicate ids (in append order), leaving n unique ids in increasing order and
 * their rows (pn_row_grad_rows). Merging a merged gradient does nothing. */
int pn_row_grad_merge(pn_row_grad *g);

/* After a merge: the unique rows [n, width], and their ids on dev for ops. */
pn_matrix pn_row_grad_rows(const pn_row_grad *g);
const int *pn_row_grad_dev_ids(const pn_row_grad *g);

/* After a merge, on shard `shard` of a table sharded by rows across `shards`
 * (pipeline/shard_rows.h): every id is this shard's and becomes its local row,
 * id / shards, for the update of the shard's rows. */
int pn_row_grad_localize(pn_row_grad *g, int shards, int shard);

/* dense[id] += row for every entry (merged or not): the gradient as a table, for
 * tests and for the dense path it must equal. */
int pn_row_grad_add_to(const pn_row_grad *g, pn_matrix *dense);

/* Whether the rows live off the host (then pn_comm_gather_rows, which reads and
 * writes host memory, takes them through the staging buffer). */
static inline bool pn_row_grad_on_device(const pn_row_grad *g)
{
    return g->dev.kind != PN_DEVICE_HOST;
}

#endif
