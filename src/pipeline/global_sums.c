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
};

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
    if (!gs->local || !gs->node || !gs->parts || !gs->hashes) {
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
            gs->local[k++] = pn_graph_is_tied_copy(g, i, j) ? -1 : pn_params_find(arena, name);
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
    free(gs->values);
    free(gs);
}

int pn_global_grad_norm2(pn_global_sums *gs, double *out)
{
    for (int k = 0; k < gs->n; k++) {
        gs->parts[k] = 0.0;
        if (gs->local[k] < 0) continue;
        pn_row_grad *rg = pn_params_row_grad(gs->arena, gs->local[k]);
        if (rg) PN_TRY(pn_row_grad_merge(rg)); /* duplicates summed before squaring */
        pn_matrix g = rg ? pn_row_grad_rows(rg) : pn_params_grad(gs->arena, gs->local[k]);
        PN_TRY(pn_sum_squares(&g, &gs->parts[k]));
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
        uint64_t h = pn_hash_string(q->name);
        const unsigned char *bytes = (const unsigned char *)(gs->values + q->offset);
        size_t n = (size_t)q->rows * (size_t)q->cols * sizeof(float);
        for (size_t i = 0; i < n; i++) h = (h ^ bytes[i]) * 1099511628211ULL;
        gs->hashes[k] = h;
    }
    PN_TRY(pn_comm_xor(gs->comm, PN_SCOPE_PIPE, gs->hashes, gs->n));
    uint64_t total = 0;
    for (int k = 0; k < gs->n; k++) total = pn_hash_mix(total, gs->hashes[k]);
    *out = total;
    return PN_OK;
}
