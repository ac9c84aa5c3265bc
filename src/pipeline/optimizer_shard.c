/* pn_opt_shard: the replica's part of the optimizer's slots, and the moves between
 * it, the arena's whole slots and the replicas (optimizer_shard.h). A dense
 * parameter's part is its gradient slice cut to this replica's piece [lo, hi) of the
 * gradient buffer; its slot part sits at the same place less lo in the compact slot
 * buffer, after which come the row-sparse parameters' whole slices. */
#include "pipeline/optimizer_shard.h"

#include <limits.h>
#include <stdlib.h>

#include "base/error.h"
#include "math/ops.h"

struct pn_opt_shard {
    pn_params *params;
    pn_comm *comm;
    int replicas;
    size_t piece, lo, hi;  /* this replica's run of the gradient buffer, hi <= its size */
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
    *sh = (pn_opt_shard){params, comm, g->replicas, piece, 0, 0, n_slots, {0}, {{0}}, 0,
                         sh->sparse_at, g->replica};
    pn_params_grad_own(params, &sh->lo, &sh->hi);
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

/* Dense parameter q's overlap [*a, *b) with [lo, hi), in gradient floats. */
static bool overlap(const pn_param *q, size_t lo, size_t hi, size_t *a, size_t *b)
{
    size_t first = q->grad_offset, end = first + count_of(q);
    *a = first > lo ? first : lo;
    *b = end < hi ? end : hi;
    return !q->row_sparse && *a < *b;
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
    if (!overlap(q, sh->lo, sh->hi, &a, &b)) return false;
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
 * parameter's slice of it into `into` (1 x the arena: the values, or a whole slot),
 * then the gradients zero. */
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

/* This replica's part of `whole` (1 x the arena: values or a whole slot) into `mine`,
 * or the other way (back). */
static int move_part(pn_opt_shard *sh, pn_matrix whole, pn_matrix part, bool back)
{
    for (int i = 0; i < pn_params_count(sh->params); i++) {
        const pn_param *q = pn_params_get(sh->params, i);
        size_t a, b;
        if (!overlap(q, sh->lo, sh->hi, &a, &b)) continue;
        pn_matrix w = pn_matrix_cols(whole, (int)(q->offset + (a - q->grad_offset)), (int)(b - a));
        pn_matrix m = pn_matrix_cols(part, (int)(a - sh->lo), (int)(b - a));
        PN_TRY(back ? pn_copy(&m, &w) : pn_copy(&w, &m));
    }
    return PN_OK;
}

/* Between a whole slot and the row-sparse slices of this replica's slot k. */
static int move_sparse(pn_opt_shard *sh, int k, pn_matrix whole, bool back)
{
    for (int i = 0; i < pn_params_count(sh->params); i++) {
        const pn_param *q = pn_params_get(sh->params, i);
        if (!q->row_sparse || count_of(q) == 0) continue;
        pn_matrix w = pn_matrix_cols(whole, (int)q->offset, (int)count_of(q));
        pn_matrix m = run_of(&sh->slots[k], sh->sparse_at[i], count_of(q));
        PN_TRY(back ? pn_copy(&m, &w) : pn_copy(&w, &m));
    }
    return PN_OK;
}

int pn_opt_shard_take(pn_opt_shard *sh)
{
    if (pn_params_n_slots(sh->params) != sh->n_slots)
        return pn_error_set(PN_ERR_INTERNAL, "sharded optimizer: the arena has %d slots, not %d",
                            pn_params_n_slots(sh->params), sh->n_slots);
    for (int k = 0; k < sh->n_slots; k++) {
        pn_matrix whole = pn_params_all_slot(sh->params, k);
        pn_matrix dense = run_of(&sh->slots[k], 0, sh->piece);
        PN_TRY(move_part(sh, whole, dense, false));
        PN_TRY(move_sparse(sh, k, whole, false));
    }
    pn_params_drop_slots(sh->params);
    return PN_OK;
}

int pn_opt_shard_give(pn_opt_shard *sh)
{
    if (pn_params_n_slots(sh->params) != 0)
        return pn_error_set(PN_ERR_INTERNAL, "sharded optimizer: whole slots given twice");
    for (int k = 0; k < sh->n_slots; k++) {
        int handle;
        PN_TRY(pn_params_add_slot(sh->params, sh->names[k], &handle));
        pn_matrix whole = pn_params_all_slot(sh->params, handle);
        if (sh->piece > 0) {
            pn_matrix dense = run_of(&sh->slots[k], 0, sh->piece), mine = mine_of(sh);
            PN_TRY(pn_copy(&dense, &mine));
        }
        PN_TRY(gather_into(sh, whole));
        PN_TRY(move_sparse(sh, k, whole, true));
    }
    return PN_OK;
}

int pn_opt_shard_finish(pn_opt_shard *sh)
{
    if (sh->piece == 0) return PN_OK;
    PN_TRY(move_part(sh, pn_params_all_values(sh->params), mine_of(sh), false));
    return gather_into(sh, pn_params_all_values(sh->params));
}
