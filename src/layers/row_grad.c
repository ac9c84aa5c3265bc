/* The row-sparse gradient (row_grad.h): entries appended, sealed into partials and
 * merged by one routine: a stable sort of their ids and one scatter-add. */
#include "layers/row_grad.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/key_sort.h"
#include "math/ops.h"

void pn_row_grad_init(pn_row_grad *g, int table_rows, int width, pn_device dev)
{
    *g = (pn_row_grad){.table_rows = table_rows, .width = width, .dev = dev};
}

void pn_row_grad_release(pn_row_grad *g)
{
    free(g->ids);
    free(g->slot);
    free(g->order);
    free(g->tmp);
    pn_buffer_release(&g->rows);
    pn_buffer_release(&g->sums);
    pn_buffer_release(&g->dev_ids);
    pn_buffer_release(&g->dev_slot);
    pn_buffer_release(&g->staging);
    *g = (pn_row_grad){.table_rows = g->table_rows, .width = g->width, .dev = g->dev};
}

void pn_row_grad_reset(pn_row_grad *g)
{
    g->n = g->sealed = 0;
    g->merged = false;
}

/* Grows a host int array to cap, keeping its first n. */
static int grow_ints(int **a, int n, int cap)
{
    int *b = malloc((size_t)cap * sizeof *b);
    if (!b) return pn_error_set(PN_ERR_NOMEM, "out of memory for a row-sparse gradient");
    if (n) memcpy(b, *a, (size_t)n * sizeof *b);
    free(*a);
    *a = b;
    return PN_OK;
}

int pn_row_grad_reserve(pn_row_grad *g, int n)
{
    if (n <= g->cap) return PN_OK;
    if ((size_t)n * (size_t)g->width > INT_MAX)
        return pn_error_set(PN_ERR_UNSUPPORTED, "a row-sparse gradient of %d rows of %d: at most "
                            "%d floats", n, g->width, INT_MAX);
    int cap = n > 2 * g->cap ? n : 2 * g->cap;
    size_t bytes = (size_t)cap * (size_t)g->width * sizeof(float);
    PN_TRY(grow_ints(&g->ids, g->merged ? 0 : g->n, cap));
    PN_TRY(grow_ints(&g->slot, 0, cap));
    PN_TRY(grow_ints(&g->order, 0, cap));
    PN_TRY(grow_ints(&g->tmp, 0, cap));
    pn_buffer rows = {0};
    PN_TRY(pn_buffer_acquire(&rows, g->dev, bytes));
    if (g->n && !g->merged) { /* keep the entries appended so far */
        pn_matrix from = pn_matrix_on(&g->rows, g->n, g->width), to = pn_matrix_on(&rows, g->n, g->width);
        int rc = pn_copy(&from, &to);
        if (rc < 0) {
            pn_buffer_release(&rows);
            return rc;
        }
    }
    pn_buffer_release(&g->rows);
    g->rows = rows;
    PN_TRY(pn_buffer_reserve(&g->sums, g->dev, bytes));
    PN_TRY(pn_buffer_reserve(&g->dev_ids, g->dev, (size_t)cap * sizeof(int)));
    if (pn_row_grad_on_device(g)) {
        PN_TRY(pn_buffer_reserve(&g->dev_slot, g->dev, (size_t)cap * sizeof(int)));
        PN_TRY(pn_buffer_reserve(&g->staging, pn_device_host(), 2 * bytes));
    }
    g->cap = cap;
    return PN_OK;
}

int pn_row_grad_append(pn_row_grad *g, const int *ids, const pn_matrix *rows)
{
    if (g->merged)
        return pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient appended to after its merge");
    if (rows->cols != g->width)
        return pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient of width %d given rows of %d",
                            g->width, rows->cols);
    if (rows->rows == 0) return PN_OK;
    for (int k = 0; k < rows->rows; k++)
        if (ids[k] < 0 || ids[k] >= g->table_rows)
            return pn_error_set(PN_ERR_INVALID, "row-sparse gradient: id %d at entry %d is "
                                "outside [0, %d)", ids[k], k, g->table_rows);
    if (rows->rows > INT_MAX - g->n)
        return pn_error_set(PN_ERR_UNSUPPORTED, "row-sparse gradient: more than %d entries", INT_MAX);
    PN_TRY(pn_row_grad_reserve(g, g->n + rows->rows));
    memcpy(g->ids + g->n, ids, (size_t)rows->rows * sizeof *ids);
    pn_matrix to = pn_matrix_rows(pn_matrix_on(&g->rows, g->cap, g->width), g->n, rows->rows);
    PN_TRY(pn_copy(rows, &to));
    g->n += rows->rows;
    return PN_OK;
}

pn_matrix pn_row_grad_entries(const pn_row_grad *g)
{
    return pn_matrix_on(&g->rows, g->n, g->width);
}

int pn_row_grad_incoming(pn_row_grad *g, int n, int **ids, pn_matrix *rows)
{
    if (g->merged)
        return pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient gathered after its merge");
    /* room for one at least: an exchange that brings nothing still passes buffers
     * (a table no step has touched yet has none) */
    PN_TRY(pn_row_grad_reserve(g, n > 0 ? n : 1));
    *ids = g->slot;
    *rows = pn_matrix_on(&g->sums, n, g->width);
    return PN_OK;
}

void pn_row_grad_adopt(pn_row_grad *g, int n)
{
    int *ids = g->ids;
    pn_buffer rows = g->rows;
    g->ids = g->slot, g->slot = ids;
    g->rows = g->sums, g->sums = rows;
    g->n = g->sealed = n; /* gathered partials */
}

/* The one merge that pn_row_grad_seal and pn_row_grad_merge share: entries [first, n)
 * summed by id into sums [0, *unique) (each id's entries added in append order, onto
 * zeros), their unique ids in increasing order into ids [first, first + *unique). */
static int sum_entries(pn_row_grad *g, int first, int *unique)
{
    int m = g->n - first, u = 0, *ids = g->ids + first;
    *unique = 0;
    if (m == 0) return PN_OK;
    pn_key_sort(ids, m, g->order, g->tmp); /* by id, equal ids in append order */
    /* each run of one id in sorted order is one unique row */
    for (int k = 0; k < m; k++) {
        int e = g->order[k];
        if (k == 0 || ids[e] != ids[g->order[k - 1]]) u++;
        g->slot[e] = u - 1;
    }
    for (int e = 0; e < m; e++) g->order[g->slot[e]] = ids[e]; /* the unique ids */
    memcpy(ids, g->order, (size_t)u * sizeof *ids);
    pn_matrix sums = pn_matrix_on(&g->sums, u, g->width);
    pn_matrix entries = pn_matrix_rows(pn_matrix_on(&g->rows, g->n, g->width), first, m);
    PN_TRY(pn_fill(&sums, 0.0f));
    /* entry k is added in increasing k: each id's entries in append order; the slots
     * on the rows' device (a kernel reads them) */
    const int *slot = g->slot;
    if (pn_row_grad_on_device(g)) {
        PN_TRY(pn_buffer_write(&g->dev_slot, 0, g->slot, (size_t)m * sizeof(int)));
        slot = g->dev_slot.data;
    }
    PN_TRY(pn_scatter_add_rows(&entries, slot, &sums));
    *unique = u;
    return PN_OK;
}

int pn_row_grad_seal(pn_row_grad *g)
{
    if (g->merged)
        return pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient sealed after its merge");
    int u;
    PN_TRY(sum_entries(g, g->sealed, &u));
    if (u > 0) { /* the partials replace the entries they sum, in place */
        pn_matrix sums = pn_matrix_on(&g->sums, u, g->width);
        pn_matrix to = pn_matrix_rows(pn_matrix_on(&g->rows, g->n, g->width), g->sealed, u);
        PN_TRY(pn_copy(&sums, &to));
    }
    g->n = g->sealed + u;
    g->sealed = g->n;
    return PN_OK;
}

int pn_row_grad_merge(pn_row_grad *g)
{
    if (g->merged) return PN_OK;
    int u;
    PN_TRY(sum_entries(g, 0, &u));
    if (u > 0) PN_TRY(pn_buffer_write(&g->dev_ids, 0, g->ids, (size_t)u * sizeof(int)));
    g->n = u;
    g->merged = true;
    return PN_OK;
}

pn_matrix pn_row_grad_rows(const pn_row_grad *g)
{
    return pn_matrix_on(&g->sums, g->merged ? g->n : 0, g->width);
}

const int *pn_row_grad_dev_ids(const pn_row_grad *g) { return g->dev_ids.data; }

int pn_row_grad_add_to(const pn_row_grad *g, pn_matrix *dense)
{
    if (g->n == 0) return PN_OK;
    pn_matrix rows = g->merged ? pn_row_grad_rows(g) : pn_row_grad_entries(g);
    if (!pn_row_grad_on_device(g)) return pn_scatter_add_rows(&rows, g->ids, dense);
    /* the ids on the device for the kernel: a buffer of this call's own (g is const) */
    pn_buffer ids = {0};
    PN_TRY(pn_buffer_acquire(&ids, g->dev, (size_t)g->n * sizeof(int)));
    int rc = pn_buffer_write(&ids, 0, g->ids, (size_t)g->n * sizeof(int));
    if (rc >= 0) rc = pn_scatter_add_rows(&rows, ids.data, dense);
    pn_buffer_release(&ids);
    return rc;
}

int pn_row_grad_localize(pn_row_grad *g, int shards, int shard)
{
    if (!g->merged)
        return pn_error_set(PN_ERR_INTERNAL, "row-sparse gradient localized before its merge");
    for (int k = 0; k < g->n; k++) {
        if (g->ids[k] % shards != shard)
            return pn_error_set(PN_ERR_INTERNAL, "row %d reached shard %d of %d", g->ids[k],
                                shard, shards);
        g->ids[k] /= shards;
    }
    return g->n ? pn_buffer_write(&g->dev_ids, 0, g->ids, (size_t)g->n * sizeof(int)) : PN_OK;
}
