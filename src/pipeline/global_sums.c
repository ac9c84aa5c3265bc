/* Layout-independent sums over the model's parameters (global_sums.h). */
#include "pipeline/global_sums.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "math/ops.h"

struct pn_global_sums {
    const pn_graph *graph;
    const pn_params *arena;
    pn_comm *comm;
    int n;            /* parameters of the whole graph */
    int *local;       /* [n]: handle in arena, or -1 when another stage holds it */
    int *node;        /* [n]: the graph node whose parameter it is */
    double *parts;    /* [n] per-parameter squared norms */
    uint64_t *hashes; /* [n] per-parameter hashes */
    float *values;    /* host copy of the arena's values, for hashing */
    bool sharded;     /* a table here is sharded across the stage's replicas */
    double *shard_parts;    /* [n] the sharded tables' parts, summed over the replicas */
    uint64_t *shard_hashes; /* [n] their rows' hashes, combined over the replicas */
    bool pieces;            /* dense gradients summed in this replica's piece only */
    size_t lo, hi;          /* that piece of the gradient buffer */
};

/* Whether entry k is a table sharded across more than one replica. */
static bool is_sharded(const pn_global_sums *gs, int k)
{
    return gs->local[k] >= 0 && pn_params_split(gs->arena, pn_params_get(gs->arena, gs->local[k]));
}

int pn_global_sums_create(pn_global_sums **out, const pn_graph *g, const pn_params *arena,
                          pn_comm *comm)
{
    *out = NULL;
    pn_global_sums *gs = calloc(1, sizeof *gs);
    if (!gs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    gs->graph = g;
    gs->arena = arena;
    gs->comm = comm;
    for (int i = 0; i < g->n_nodes; i++) gs->n += g->nodes[i].layer->n_params;
    size_t n = (size_t)(gs->n ? gs->n : 1);
    gs->local = malloc(n * sizeof *gs->local);
    gs->node = malloc(n * sizeof *gs->node);
    gs->parts = malloc(n * sizeof *gs->parts);
    gs->hashes = malloc(n * sizeof *gs->hashes);
    gs->shard_parts = malloc(n * sizeof *gs->shard_parts);
    gs->shard_hashes = malloc(n * sizeof *gs->shard_hashes);
    if (!gs->local || !gs->node || !gs->parts || !gs->hashes || !gs->shard_parts ||
        !gs->shard_hashes) {
        pn_global_sums_free(gs);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        for (int j = 0; j < l->n_params; j++) {
            char name[PN_PARAM_NAME_MAX + 1];
            int rc = pn_layer_param_name(l, j, name);
            if (rc < 0) {
                pn_global_sums_free(gs);
                return rc;
            }
            gs->node[k] = i;
            /* a tied copy equals the table it copies: counted and hashed there only */
            gs->local[k] = pn_graph_is_tied_copy(g, i, j) ? -1 : pn_params_find(arena, name);
            gs->sharded |= is_sharded(gs, k);
            k++;
        }
    }
    *out = gs;
    return PN_OK;
}

void pn_global_sums_free(pn_global_sums *gs)
{
    if (!gs) return;
    free(gs->local);
    free(gs->node);
    free(gs->parts);
    free(gs->hashes);
    free(gs->shard_parts);
    free(gs->shard_hashes);
    free(gs->values);
    free(gs);
}

void pn_global_sums_in_pieces(pn_global_sums *gs)
{
    gs->pieces = true;
    pn_params_grad_own(gs->arena, &gs->lo, &gs->hi);
}

/* Whether entry k's part is spread over the replicas: a sharded table, or a dense
 * gradient summed in pieces. */
static bool spread(const pn_global_sums *gs, int k)
{
    return is_sharded(gs, k) ||
           (gs->pieces && gs->local[k] >= 0 && !pn_params_get(gs->arena, gs->local[k])->row_sparse);
}

/* Entry k's gradient as this replica sums it: a row-sparse one's merged rows, a dense
 * one's slice, or under pieces its overlap with this replica's piece (maybe none). */
static pn_matrix grad_of(const pn_global_sums *gs, int k, pn_row_grad *rg)
{
    if (rg) return pn_row_grad_rows(rg);
    pn_matrix g = pn_params_grad(gs->arena, gs->local[k]);
    if (!gs->pieces) return g;
    const pn_param *q = pn_params_get(gs->arena, gs->local[k]);
    size_t first = q->grad_offset, end = first + (size_t)q->rows * (size_t)q->cols;
    size_t a = first > gs->lo ? first : gs->lo, b = end < gs->hi ? end : gs->hi;
    pn_matrix all = pn_params_all_grads(gs->arena);
    return a < b ? pn_matrix_cols(all, (int)a, (int)(b - a)) : pn_matrix_cols(all, 0, 0);
}

int pn_global_grad_norm2(pn_global_sums *gs, double *out)
{
    for (int k = 0; k < gs->n; k++) {
        gs->parts[k] = 0.0;
        if (gs->local[k] < 0) continue;
        pn_row_grad *rg = pn_params_row_grad(gs->arena, gs->local[k]);
        if (rg) PN_TRY(pn_row_grad_merge(rg)); /* duplicates summed before squaring */
        pn_matrix g = grad_of(gs, k, rg);
        if (g.cols > 0) PN_TRY(pn_sum_squares(&g, &gs->parts[k]));
    }
    if (gs->sharded || gs->pieces) { /* a sharded table's rows, or the pieces, are spread
                                        over the replicas */
        for (int k = 0; k < gs->n; k++) gs->shard_parts[k] = spread(gs, k) ? gs->parts[k] : 0;
        PN_TRY(pn_comm_sum(gs->comm, PN_SCOPE_REPLICAS, gs->shard_parts, gs->n));
        for (int k = 0; k < gs->n; k++)
            if (spread(gs, k)) gs->parts[k] = gs->shard_parts[k];
    }
    PN_TRY(pn_comm_sum(gs->comm, PN_SCOPE_PIPE, gs->parts, gs->n));
    double total = 0.0;
    for (int k = 0; k < gs->n; k++) total += gs->parts[k];
    *out = total;
    return PN_OK;
}

int pn_global_first_nonfinite(const pn_global_sums *gs, int *node, int *decl)
{
    for (int k = 0, j = 0; k < gs->n; k++, j++) {
        if (k > 0 && gs->node[k] != gs->node[k - 1]) j = 0;
        if (!isfinite(gs->parts[k])) {
            *node = gs->node[k];
            *decl = j;
            return k;
        }
    }
    return -1;
}

/* FNV-1a of n bytes, from the hash of name (a dense parameter's). */
static uint64_t bytes_hash(const char *name, const unsigned char *bytes, size_t n)
{
    uint64_t h = pn_hash_string(name);
    for (size_t i = 0; i < n; i++) h = (h ^ bytes[i]) * 1099511628211ULL;
    return h;
}

/* A table's rows (row-sparse parameters): the XOR over its rows of (global row id,
 * FNV-1a of the row), which the shards of a table sharded by rows compute each over
 * their own rows and XOR together: the same value however the rows are spread. */
static uint64_t rows_hash(const pn_global_sums *gs, const pn_param *q,
                          const unsigned char *bytes)
{
    int shards = 1, shard = 0;
    if (q->sharded) pn_params_shards(gs->arena, &shards, &shard);
    size_t row_bytes = (size_t)q->cols * sizeof(float);
    uint64_t h = 0;
    for (int r = 0; r < q->rows; r++) {
        uint64_t id = (uint64_t)r * (uint64_t)shards + (uint64_t)shard;
        h ^= pn_hash_mix(id, bytes_hash("", bytes + (size_t)r * row_bytes, row_bytes));
    }
    return h;
}

int pn_global_param_hash(pn_global_sums *gs, unsigned long long *out)
{
    pn_matrix all = pn_params_all_values(gs->arena);
    if (!gs->values && !(gs->values = malloc(pn_matrix_count(all) * sizeof(float) + 1)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    PN_TRY(pn_matrix_read(&all, gs->values));
    for (int k = 0; k < gs->n; k++) {
        gs->hashes[k] = 0;
        if (gs->local[k] < 0) continue;
        const pn_param *q = pn_params_get(gs->arena, gs->local[k]);
        const unsigned char *bytes = (const unsigned char *)(gs->values + q->offset);
        gs->hashes[k] = q->row_sparse ? rows_hash(gs, q, bytes) : bytes_hash(q->name, bytes,
                                            (size_t)q->rows * (size_t)q->cols * sizeof(float));
    }
    if (gs->sharded) { /* a sharded table's rows: every replica's share */
        uint64_t *mine = gs->shard_hashes;
        for (int k = 0; k < gs->n; k++) mine[k] = is_sharded(gs, k) ? gs->hashes[k] : 0;
        PN_TRY(pn_comm_xor(gs->comm, PN_SCOPE_REPLICAS, mine, gs->n));
        for (int k = 0; k < gs->n; k++)
            if (is_sharded(gs, k)) gs->hashes[k] = mine[k];
    }
    for (int k = 0; k < gs->n; k++) { /* the tables' names, once their rows are combined */
        const pn_param *q = gs->local[k] < 0 ? NULL : pn_params_get(gs->arena, gs->local[k]);
        if (q && q->row_sparse) gs->hashes[k] = pn_hash_mix(pn_hash_string(q->name), gs->hashes[k]);
    }
    PN_TRY(pn_comm_xor(gs->comm, PN_SCOPE_PIPE, gs->hashes, gs->n));
    uint64_t total = 0;
    for (int k = 0; k < gs->n; k++) total = pn_hash_mix(total, gs->hashes[k]);
    *out = total;
    return PN_OK;
}
