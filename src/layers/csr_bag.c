/* The bag sums shared by embedding_bag and sparse_fc (csr_bag.h). */
#include "layers/csr_bag.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/hash.h"
#include "base/key_sort.h"
#include "math/ops.h"

int pn_bag_row(const pn_bag_rule *r, int64_t columns, int64_t col, int f)
{
    int64_t row = pn_bag_hashes(r, columns) ? (int64_t)(pn_mix64((uint64_t)col) % (uint64_t)r->rows)
                                            : col;
    return (int)(row + (r->per_field ? (int64_t)f * r->rows : 0));
}

void pn_bag_note(const pn_bag_rule *r, int64_t columns, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (pn_bag_hashes(r, columns))
        snprintf(buf, cap, "%lld columns hashed into %d rows%s (pn_mix64(id) mod rows)",
                 (long long)columns, r->rows, r->per_field ? " per field" : "");
}

/* Grows buf on dev to bytes, or to one byte for an empty batch. */
static int grow(pn_buffer *buf, pn_device dev, size_t bytes)
{
    return pn_buffer_reserve(buf, dev, bytes ? bytes : 1);
}

/* Feature j (of sample b, for the message) of c: its field *f and its table row. */
static int feature_row(const pn_bag_rule *r, int64_t columns, const pn_csr *c, int b, int j,
                       int *f, int *row)
{
    *f = r->use_fields ? c->fields[j] : 0;
    if (*f < 0 || *f >= r->bags)
        return pn_error_set(PN_ERR_INVALID, "sample %d: field %d outside [0, %d)", b, *f,
                            r->bags);
    *row = pn_bag_row(r, columns, c->cols[j], *f);
    return PN_OK;
}

int pn_bag_plan_make(pn_bag_plan *p, const pn_bag_rule *r, const pn_arg *in, int width,
                     pn_device dev)
{
    const pn_csr *c = &in->csr;
    size_t nnz = (size_t)c->nnz, n_bags = (size_t)in->batch * (size_t)r->bags;
    size_t ints = 2 * nnz + n_bags, floats = nnz * (size_t)width;
    PN_TRY(grow(&p->host, pn_device_host(), ints * sizeof(int) + floats * sizeof(float)));
    int *rows = p->host.data, *bag = rows + nnz, *count = bag + nnz;
    float *w = (float *)(count + n_bags);
    memset(count, 0, n_bags * sizeof(int));
    for (int b = 0; b < in->batch; b++)
        for (int j = c->offsets[b]; j < c->offsets[b + 1]; j++) {
            int f;
            PN_TRY(feature_row(r, in->shape.columns, c, b, j, &f, &rows[j]));
            bag[j] = b * r->bags + f;
            count[bag[j]]++;
        }
    for (size_t j = 0; j < nnz; j++) {
        float v = c->vals[j] / (r->mean ? (float)count[bag[j]] : 1.0f);
        for (int k = 0; k < width; k++) w[j * (size_t)width + (size_t)k] = v;
    }
    p->nnz = (int)nnz;
    p->width = width;
    PN_TRY(grow(&p->rows, dev, nnz * sizeof(int)));
    PN_TRY(grow(&p->bag, dev, nnz * sizeof(int)));
    PN_TRY(grow(&p->weight, dev, floats * sizeof(float)));
    PN_TRY(grow(&p->work, dev, floats * sizeof(float)));
    PN_TRY(pn_buffer_write(&p->rows, 0, rows, nnz * sizeof(int)));
    PN_TRY(pn_buffer_write(&p->bag, 0, bag, nnz * sizeof(int)));
    return pn_buffer_write(&p->weight, 0, w, floats * sizeof(float));
}

/* The gathered rows, times the weights, in p->work. */
static int weighted(pn_bag_plan *p, const pn_matrix *from, const int *index, pn_matrix *work)
{
    *work = pn_matrix_on(&p->work, p->nnz, p->width);
    pn_matrix w = pn_matrix_on(&p->weight, p->nnz, p->width);
    PN_TRY(pn_gather_rows(from, index, work));
    return pn_mul(work, &w, 0.0f, work);
}

int pn_bag_forward(pn_bag_plan *p, const pn_matrix *table, pn_matrix *out)
{
    PN_TRY(pn_fill(out, 0.0f));
    if (p->nnz == 0) return PN_OK; /* every bag empty: zeros */
    pn_matrix work;
    PN_TRY(weighted(p, table, p->rows.data, &work));
    return pn_scatter_add_rows(&work, p->bag.data, out);
}

/* rows[0..nnz)'s distinct values, increasing, into ids (returns how many) and each
 * one's place among them into place: one stable key sort (order, tmp: its scratch),
 * no search. */
static int distinct(const int *rows, int nnz, int *ids, int *place, int *order, int *tmp)
{
    int n = 0;
    pn_key_sort(rows, nnz, order, tmp);
    for (int k = 0; k < nnz; k++) {
        int row = rows[order[k]];
        if (n == 0 || ids[n - 1] != row) ids[n++] = row;
        place[order[k]] = n - 1;
    }
    return n;
}

/* The planned features' distinct rows and each feature's place among them, on the
 * host and (the places) on dev. */
static int plan_distinct(pn_bag_plan *p, pn_device dev)
{
    size_t nnz = (size_t)p->nnz;
    PN_TRY(grow(&p->distinct, pn_device_host(), 4 * nnz * sizeof(int)));
    int *ids = p->distinct.data, *place = ids + nnz;
    p->n_distinct = distinct(p->host.data, p->nnz, ids, place, place + nnz, place + 2 * nnz);
    PN_TRY(grow(&p->places, dev, nnz * sizeof(int)));
    return pn_buffer_write(&p->places, 0, place, nnz * sizeof(int));
}

int pn_bag_distinct_rows(const pn_bag_rule *r, int64_t columns, const pn_csr *in, int first,
                         int rows, pn_buffer *work, const int **ids, int *n)
{
    if (r->use_fields && !in->fields)
        return pn_error_set(PN_ERR_INTERNAL, "a sparse batch without the fields its edge has");
    int from = in->offsets[first], nnz = in->offsets[first + rows] - from;
    PN_TRY(grow(work, pn_device_host(), 5 * (size_t)nnz * sizeof(int)));
    int *row = work->data, *out = row + nnz, *place = out + nnz;
    for (int b = first; b < first + rows; b++)
        for (int j = in->offsets[b]; j < in->offsets[b + 1]; j++) {
            int f;
            PN_TRY(feature_row(r, columns, in, b - first, j, &f, &row[j - from]));
        }
    *n = distinct(row, nnz, out, place, place + nnz, place + 2 * nnz);
    *ids = out;
    return PN_OK;
}

int pn_bag_forward_param(pn_bag_plan *p, const pn_layer_inst *x, int param,
                         const pn_pass *pass, pn_matrix *out)
{
    if (!pn_params_split(x->params, pn_params_get(x->params, x->param_index[param]))) {
        pn_matrix table = pn_layer_param(x, param);
        return pn_bag_forward(p, &table, out);
    }
    /* every replica pulls, an empty batch too: the exchange is collective */
    PN_TRY(plan_distinct(p, out->device));
    pn_matrix rows;
    PN_TRY(pn_layer_pull_rows(x, param, pass, p->distinct.data, p->n_distinct, &p->pulled,
                              &rows));
    PN_TRY(pn_fill(out, 0.0f));
    if (p->nnz == 0) return PN_OK;
    pn_matrix work;
    PN_TRY(weighted(p, &rows, p->places.data, &work));
    return pn_scatter_add_rows(&work, p->bag.data, out);
}

int pn_bag_backward_rows(pn_bag_plan *p, const pn_matrix *dout, pn_row_grad *dtable)
{
    if (!dtable)
        return pn_error_set(PN_ERR_INTERNAL, "a backward into a table without a row-sparse "
                            "gradient (an arena finalized before the layer declared it)");
    if (p->nnz == 0) return PN_OK;
    pn_matrix work;
    PN_TRY(weighted(p, dout, p->bag.data, &work));
    /* the ids on the host: the plan wrote them there first */
    return pn_row_grad_append(dtable, (const int *)p->host.data, &work);
}

void pn_bag_plan_release(pn_bag_plan *p)
{
    pn_buffer_release(&p->host);
    pn_buffer_release(&p->rows);
    pn_buffer_release(&p->bag);
    pn_buffer_release(&p->weight);
    pn_buffer_release(&p->work);
    pn_buffer_release(&p->distinct);
    pn_buffer_release(&p->places);
    pn_buffer_release(&p->pulled);
    *p = (pn_bag_plan){0};
}
