/* pn_opt_shard: the replica's part of the optimizer's slots, and the gather of the
 * values its update makes (optimizer_shard.h). A dense parameter's part is its
 * gradient slice cut to this replica's piece [lo, lo + piece) of the gradient buffer
 * (pn_params_piece_run, which a snapshot's index uses too); its slot part sits at the
 * same place less lo in the compact slot buffer, after which come the row-sparse
 * parameters' whole slices. */
#include "optim/optimizer_shard.h"

#include <limits.h>
#include <stdlib.h>

#include "base/error.h"
#include "math/ops.h"

struct pn_opt_shard {
    pn_params *params;
    pn_comm *comm;
    int replicas;
    size_t piece, lo;      /* this replica's run of the gradient buffer starts at lo */
    int n_slots;
    const char *names[2];
    pn_buffer slots[2];    /* [piece] dense part, then the row-sparse slices */
    size_t floats;         /* per slot */
    size_t *sparse_at;     /* [count]: a row-sparse parameter's place in slots */
    int replica;
};

static size_t count_of(const pn_param *q) { return (size_t)q->rows * (size_t)q->cols; }

int pn_opt_shard_create(pn_opt_shard **out, pn_params *params, pn_comm *comm, int n_slots,
                        const char *const *names)
{
    *out = NULL;
    const pn_grid *g = pn_comm_grid(comm);
    size_t piece = pn_params_grad_piece(params);
    if (n_slots > 2 || pn_params_grad_room(params) != piece * (size_t)g->replicas)
        return pn_error_set(PN_ERR_INTERNAL, "sharded optimizer: an arena not laid out in %d "
                            "pieces", g->replicas);
    if (piece > (size_t)INT_MAX / (size_t)g->replicas)
        return pn_error_set(PN_ERR_UNSUPPORTED, "sharded optimizer: pieces of %zu floats", piece);
    pn_opt_shard *sh = calloc(1, sizeof *sh);
    int n = pn_params_count(params);
    if (!sh || !(sh->sparse_at = calloc(n ? (size_t)n : 1, sizeof *sh->sparse_at))) {
        free(sh);
        return pn_error_set(PN_ERR_NOMEM, "out of memory for the sharded optimizer");
    }
    *sh = (pn_opt_shard){params, comm, g->replicas, piece, 0, n_slots, {0}, {{0}}, 0,
                         sh->sparse_at, g->replica};
    size_t hi;
    pn_params_grad_own(params, &sh->lo, &hi);
    size_t at = piece;
    for (int i = 0; i < n; i++) {
        const pn_param *q = pn_params_get(params, i);
        if (!q->row_sparse) continue;
        sh->sparse_at[i] = at;
        at += count_of(q);
    }
    sh->floats = at;
    int rc = PN_OK;
    for (int k = 0; k < n_slots && rc == PN_OK; k++) {
        sh->names[k] = names[k];
        rc = pn_buffer_acquire(&sh->slots[k], pn_params_device(params), at * sizeof(float));
    }
    if (rc < 0) {
        pn_opt_shard_free(sh);
        return rc;
    }
    *out = sh;
    return PN_OK;
}

void pn_opt_shard_free(pn_opt_shard *sh)
{
    if (!sh) return;
    for (int k = 0; k < 2; k++) pn_buffer_release(&sh->slots[k]);
    free(sh->sparse_at);
    free(sh);
}

size_t pn_opt_shard_floats(const pn_opt_shard *sh) { return sh->floats; }

/* A 1 x n view of buf from float at. */
static pn_matrix run_of(const pn_buffer *buf, size_t at, size_t n)
{
    pn_matrix all = pn_matrix_on(buf, 1, (int)(at + n));
    return pn_matrix_cols(all, (int)at, (int)n);
}

/* Dense parameter q's overlap [*a, *b) with this replica's piece, in gradient floats. */
static bool overlap(const pn_opt_shard *sh, const pn_param *q, size_t *a, size_t *b)
{
    return !q->row_sparse &&
           pn_params_piece_run(q->grad_offset, count_of(q), sh->piece, sh->replica, a, b);
}

bool pn_opt_shard_part(const pn_opt_shard *sh, int i, pn_matrix *w, pn_matrix *g,
                       pn_matrix slots[2])
{
    const pn_param *q = pn_params_get(sh->params, i);
    if (q->row_sparse) {
        *w = pn_params_value(sh->params, i);
        *g = pn_params_grad(sh->params, i);
        for (int k = 0; k < sh->n_slots; k++)
            slots[k] = pn_matrix_reshape(run_of(&sh->slots[k], sh->sparse_at[i], count_of(q)),
                                         q->rows, q->cols);
        return true;
    }
    size_t a, b;
    if (!overlap(sh, q, &a, &b)) return false;
    pn_matrix values = pn_params_all_values(sh->params), grads = pn_params_all_grads(sh->params);
    *w = pn_matrix_cols(values, (int)(q->offset + (a - q->grad_offset)), (int)(b - a));
    *g = pn_matrix_cols(grads, (int)a, (int)(b - a));
    for (int k = 0; k < sh->n_slots; k++) slots[k] = run_of(&sh->slots[k], a - sh->lo, b - a);
    return true;
}

/* The gradient buffer, room included, as rows x (room / rows). */
static pn_matrix grad_room(const pn_opt_shard *sh, int rows)
{
    pn_matrix grads = pn_params_all_grads(sh->params);
    int cols = (int)(pn_params_grad_room(sh->params) / (size_t)rows);
    return (pn_matrix){grads.data, rows, cols, cols, grads.device};
}

/* This replica's piece of the gradient buffer: what it adds to a gather, in place
 * (no second buffer of 1/D of the arena). */
static pn_matrix mine_of(const pn_opt_shard *sh)
{
    return pn_matrix_rows(grad_room(sh, sh->replicas), sh->replica, 1);
}

/* Every replica's piece (mine_of) into the whole gradient buffer, then each dense
 * parameter's slice of it into `into` (1 x the arena's values), then the gradients
 * zero. */
static int gather_into(pn_opt_shard *sh, pn_matrix into)
{
    if (sh->piece == 0) return PN_OK; /* no dense parameter on this stage */
    pn_matrix mine = mine_of(sh), all = grad_room(sh, sh->replicas);
    PN_TRY(pn_comm_gather_replicas(sh->comm, &mine, &all));
    pn_matrix grads = grad_room(sh, 1);
    for (int i = 0; i < pn_params_count(sh->params); i++) {
        const pn_param *q = pn_params_get(sh->params, i);
        if (q->row_sparse || count_of(q) == 0) continue;
        pn_matrix from = pn_matrix_cols(grads, (int)q->grad_offset, (int)count_of(q));
        pn_matrix to = pn_matrix_cols(into, (int)q->offset, (int)count_of(q));
        PN_TRY(pn_copy(&from, &to));
    }
    return pn_fill(&grads, 0.0f);
}

/* This replica's part of `whole` (1 x the arena's values) into `part`. */
static int take_part(pn_opt_shard *sh, pn_matrix whole, pn_matrix part)
{
    for (int i = 0; i < pn_params_count(sh->params); i++) {
        const pn_param *q = pn_params_get(sh->params, i);
        size_t a, b;
        if (!overlap(sh, q, &a, &b)) continue;
        pn_matrix w = pn_matrix_cols(whole, (int)(q->offset + (a - q->grad_offset)), (int)(b - a));
        pn_matrix m = pn_matrix_cols(part, (int)(a - sh->lo), (int)(b - a));
        PN_TRY(pn_copy(&w, &m));
    }
    return PN_OK;
}

bool pn_opt_shard_slot(const pn_opt_shard *sh, int i, int k, size_t *at, size_t *n,
                       pn_matrix *slot)
{
    const pn_param *q = pn_params_get(sh->params, i);
    size_t a, b;
    if (k < 0 || k >= sh->n_slots || count_of(q) == 0) return false;
    if (q->row_sparse) {
        *at = 0;
        *n = count_of(q);
        *slot = pn_matrix_reshape(run_of(&sh->slots[k], sh->sparse_at[i], *n), q->rows, q->cols);
        return true;
    }
    if (!overlap(sh, q, &a, &b)) return false;
    *at = a - q->grad_offset;
    *n = b - a;
    *slot = run_of(&sh->slots[k], a - sh->lo, b - a);
    return true;
}

int pn_opt_shard_finish(pn_opt_shard *sh)
{
    if (sh->piece == 0) return PN_OK;
    PN_TRY(take_part(sh, pn_params_all_values(sh->params), mine_of(sh)));
    return gather_into(sh, pn_params_all_values(sh->params));
}
