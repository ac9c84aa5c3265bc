/* pn_csr_bag: what embedding_bag and sparse_fc share: out[bag] = sum over the
 * bag's features j of w_j * table[row_j], for the features of a CSR batch
 * (pn_arg.csr). A sample has `bags` bags (one per field, or one); feature j of
 * sample b lies in bag b * bags + field_j. Its row is its id, or, when the data's
 * columns exceed the table's rows, pn_mix64(id) mod rows (base/hash.h: the same row
 * on every rank and run), plus field_j * rows with a table per field. w_j is the
 * feature's value, divided by the bag's feature count for a mean.
 * Built from existing ops only: the rows are gathered into [nnz, width], scaled by
 * the weights (pn_mul with a weight row per feature) and scatter-added into the
 * zeroed output; backward gathers the output gradient by bag, scales it the same
 * way and appends the rows to the table's row-sparse gradient (row_grad.h). Buffers
 * grow only. */
#ifndef PN_CSR_BAG_H
#define PN_CSR_BAG_H

#include <stdbool.h>
#include <stddef.h>

#include "layers/arg.h"
#include "layers/layer.h"
#include "layers/row_grad.h"

typedef struct pn_bag_rule {
    int rows;       /* table rows a feature maps into (per field with per_field) */
    int bags;       /* bags per sample: the edge's fields, or 1 */
    bool use_fields; /* feature j goes to bag field_j (else every feature to bag 0) */
    bool per_field; /* a table of `rows` rows per field, stacked */
    bool mean;      /* divide by the bag's feature count */
} pn_bag_rule;

typedef struct pn_bag_plan {
    int nnz, width;
    pn_buffer host;               /* rows, bags, counts (int), weights (float) */
    pn_buffer rows, bag, weight;  /* the same on the layer's device */
    pn_buffer work;               /* [nnz, width] gathered rows */
    /* a sharded table: the batch's distinct rows, pulled from their owners */
    int n_distinct;
    pn_buffer distinct;           /* host: the distinct rows, increasing, then each
                                   * feature's place among them [nnz], then the
                                   * sort's scratch [2 nnz] */
    pn_buffer places, pulled;     /* on the device: the places, the pulled rows */
} pn_bag_plan;

/* Whether the rule hashes ids: the data's columns exceed the table's rows. */
static inline bool pn_bag_hashes(const pn_bag_rule *r, int64_t columns)
{
    return columns > r->rows;
}

/* What a layer of rule r over the data's columns says when it hashes ids, else "". */
void pn_bag_note(const pn_bag_rule *r, int64_t columns, char *buf, size_t cap);

/* The table row feature id col of field f maps to under rule r (columns: the data's). */
int pn_bag_row(const pn_bag_rule *r, int64_t columns, int64_t col, int f);

/* Plans the batch in in->csr for an output of width columns on dev. */
int pn_bag_plan_make(pn_bag_plan *p, const pn_bag_rule *r, const pn_arg *in, int width,
                     pn_device dev);

/* out = the bags' sums (out has batch * bags rows). */
int pn_bag_forward(pn_bag_plan *p, const pn_matrix *table, pn_matrix *out);

/* The same from parameter `param` of layer instance x, a table that may be sharded
 * across the stage's replicas: then the batch's distinct rows are pulled through
 * pass->puller (pn_layer_param_rows) and the bags gather from them. */
int pn_bag_forward_param(pn_bag_plan *p, const pn_layer_inst *x, int param,
                         const pn_pass *pass, pn_matrix *out);

/* The distinct rows, increasing, that pn_bag_forward_param pulls for samples
 * [first, first + rows) of batch in under rule r (columns: the data's), in host
 * memory *work holds (*ids, *n of them): what a stage pulls ahead of the forward. */
int pn_bag_distinct_rows(const pn_bag_rule *r, int64_t columns, const pn_csr *in, int first,
                         int rows, pn_buffer *work, const int **ids, int *n);

/* dtable[row_j] += w_j * dout[bag_j] for every feature j of the planned batch, as
 * entries (row_j, w_j * dout[bag_j]) appended to the table's row-sparse gradient. */
int pn_bag_backward_rows(pn_bag_plan *p, const pn_matrix *dout, pn_row_grad *dtable);

void pn_bag_plan_release(pn_bag_plan *p);

#endif
