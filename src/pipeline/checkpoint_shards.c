/* Snapshots of tables sharded by rows (checkpoint_shards.h): every rank's part of
 * the split tables travels alone, to rank 0 for the file or from it for a load. */
#include "pipeline/checkpoint_shards.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int pn_shards_any(pn_comm *c, const pn_params *p, bool *any)
{
    bool mine = false;
    for (int i = 0; i < pn_params_count(p); i++)
        mine = mine || pn_params_split(p, pn_params_get(p, i));
    return pn_comm_any(c, mine, any);
}

/* --- a rank's part ------------------------------------------------------------------------ */

static size_t part_floats(const pn_params *p)
{
    size_t n = 0, arrays = 1 + (size_t)pn_params_n_slots(p);
    for (int i = 0; i < pn_params_count(p); i++) {
        const pn_param *q = pn_params_get(p, i);
        if (pn_params_split(p, q)) n += arrays * (size_t)q->rows * (size_t)q->cols;
    }
    return n;
}

/* Copies this rank's part out of its arena (write false) or into it (write true). */
static int move_part(pn_params *p, float *part, bool write)
{
    float *at = part;
    for (int i = 0; i < pn_params_count(p); i++) {
        const pn_param *q = pn_params_get(p, i);
        if (!pn_params_split(p, q)) continue;
        for (int a = -1; a < pn_params_n_slots(p); a++) {
            pn_matrix m = a < 0 ? pn_params_value(p, i) : pn_params_slot(p, a, i);
            PN_TRY(write ? pn_matrix_write(&m, at) : pn_matrix_read(&m, at));
            at += (size_t)q->rows * (size_t)q->cols;
        }
    }
    return PN_OK;
}

static int pack_part(const pn_params *p, float **part, size_t *floats)
{
    *floats = part_floats(p);
    if (!(*part = malloc((*floats ? *floats : 1) * sizeof **part)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for %zu floats of sharded tables",
                            *floats);
    int rc = move_part((pn_params *)p, *part, false); /* reads only */
    if (rc < 0) {
        free(*part);
        *part = NULL;
    }
    return rc;
}

/* --- rank 0's view of the stages ---------------------------------------------------------- */

int pn_shard_layout_make(pn_shard_layout *l, const pn_grid *g, int n_slots, const char *own,
                         const char *indexes, const size_t *index_bytes)
{
    *l = (pn_shard_layout){g->stages, g->replicas, n_slots, NULL, NULL};
    l->items = calloc((size_t)g->stages, sizeof *l->items);
    l->counts = calloc((size_t)g->stages, sizeof *l->counts);
    if (!l->items || !l->counts) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    const char *index = indexes;
    for (int s = 0; s < g->stages; s++) {
        size_t floats;
        PN_TRY(pn_params_unpack_index(s ? index : own, index_bytes[s], &l->items[s],
                                      &l->counts[s], &floats));
        if (s) index += index_bytes[s];
    }
    return PN_OK;
}

void pn_shard_layout_free(pn_shard_layout *l)
{
    for (int s = 0; l->items && l->counts && s < l->stages; s++)
        pn_params_free_index(l->items[s], l->counts[s]);
    free(l->items);
    free(l->counts);
    l->items = NULL;
    l->counts = NULL;
}

/* What rank's part holds: its stage's split tables, its rows of each (as owner
 * `replica` of `replicas`: global rows replica, replica + replicas, ...). */
static size_t part_floats_of(const pn_shard_layout *l, int rank, int *stage, int *replica)
{
    *stage = rank % l->stages;
    *replica = rank / l->stages;
    size_t n = 0;
    for (int i = 0; i < l->counts[*stage]; i++) {
        const pn_param *q = &l->items[*stage][i];
        if (q->sharded)
            n += (size_t)(1 + l->n_slots) *
                 (size_t)pn_shard_row_count(q->table_rows, l->replicas, *replica) *
                 (size_t)q->cols;
    }
    return n;
}

/* --- save ------------------------------------------------------------------------------- */

/* Rank 0: writes rank's part at its rows of each table's datasets. */
static int take_part(void *ctx, int rank, const void *bytes, size_t n)
{
    pn_shard_writer *w = ctx;
    const pn_shard_layout *l = w->layout;
    int stage, replica;
    size_t floats = part_floats_of(l, rank, &stage, &replica);
    if (n != floats * sizeof(float))
        return pn_error_set(PN_ERR_INTERNAL, "rank %d sent %zu bytes of sharded tables, not %zu",
                            rank, n, floats * sizeof(float));
    const float *at = bytes;
    for (int i = 0; i < l->counts[stage]; i++) {
        const pn_param *q = &l->items[stage][i];
        if (!q->sharded) continue;
        int rows = pn_shard_row_count(q->table_rows, l->replicas, replica);
        for (int a = -1; a < l->n_slots; a++) {
            PN_TRY(pn_snapshot_fill_rows(w->sink, q->name, a, replica, l->replicas, rows, at));
            at += (size_t)rows * (size_t)q->cols;
        }
    }
    return PN_OK;
}

int pn_shards_write(void *writer, pn_snapshot_sink *sink)
{
    pn_shard_writer *w = writer;
    float *part;
    size_t floats;
    w->gathered = true; /* from here on every part is received, whatever fails */
    w->sink = sink;
    int rc = pack_part(w->params, &part, &floats);
    int taken = pn_comm_gather_each(w->c, rc == PN_OK ? part : NULL,
                                    rc == PN_OK ? floats * sizeof(float) : 0, take_part, w);
    if (rc == PN_OK) free(part);
    return rc < 0 ? rc : taken;
}

int pn_shards_send(pn_comm *c, const pn_params *p)
{
    float *part = NULL;
    size_t floats = 0;
    int rc = pack_part(p, &part, &floats);
    /* rank 0 waits for a part from every rank: an empty one stands for a failure here,
     * which rank 0 then refuses by its size */
    int sent = pn_comm_gather_each(c, part, rc == PN_OK ? floats * sizeof(float) : 0, NULL, NULL);
    free(part);
    return rc < 0 ? rc : sent;
}

static int drop_part(void *ctx, int rank, const void *bytes, size_t n)
{
    (void)ctx, (void)rank, (void)bytes, (void)n;
    return PN_OK;
}

int pn_shards_drain(pn_shard_writer *w)
{
    if (w->gathered) return PN_OK;
    w->gathered = true;
    return pn_comm_gather_each(w->c, NULL, 0, drop_part, NULL);
}

/* --- load ------------------------------------------------------------------------------- */

typedef struct part_maker {
    const pn_train_state *st;
    const int *slot_of;
    const pn_shard_layout *layout;
    const char *path;
    float *buf;
    size_t cap;
} part_maker;

/* Rank 0: rank's part cut from the file's whole tables. */
static int give_part(void *ctx, int rank, const void **bytes, size_t *n)
{
    part_maker *m = ctx;
    const pn_shard_layout *l = m->layout;
    int stage, replica;
    size_t floats = part_floats_of(l, rank, &stage, &replica);
    if (floats > m->cap) {
        float *grown = realloc(m->buf, floats * sizeof *grown);
        if (!grown)
            return pn_error_set(PN_ERR_NOMEM, "out of memory for %zu floats of rank %d's rows",
                                floats, rank);
        m->buf = grown;
        m->cap = floats;
    }
    float *at = m->buf;
    for (int i = 0; i < l->counts[stage]; i++) {
        const pn_param *q = &l->items[stage][i];
        if (!q->sharded) continue;
        const pn_state_param *f = pn_train_state_find(m->st, q->name);
        if (!f) return pn_error_set(PN_ERR_INVALID, "%s: has no parameter '%s'", m->path, q->name);
        if (f->rows != q->table_rows || f->cols != q->cols)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %d x %d, the model's is "
                                "%d x %d", m->path, q->name, f->rows, f->cols, q->table_rows,
                                q->cols);
        int rows = pn_shard_row_count(q->table_rows, l->replicas, replica);
        size_t row_floats = (size_t)q->cols;
        for (int a = -1; a < l->n_slots; a++) {
            const float *whole = a < 0 ? f->value : f->slots[m->slot_of[a]];
            for (int k = 0; k < rows; k++, at += row_floats)
                memcpy(at, whole + ((size_t)replica + (size_t)k * (size_t)l->replicas) * row_floats,
                       row_floats * sizeof *at);
        }
    }
    *bytes = m->buf;
    *n = floats * sizeof(float);
    return PN_OK;
}

int pn_shards_load(pn_comm *c, pn_params *p, const pn_train_state *st, const int *slot_of,
                   const pn_shard_layout *layout, const char *path)
{
    size_t floats = part_floats(p);
    float *part = malloc((floats ? floats : 1) * sizeof *part);
    int rc = part ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory for %zu floats of sharded "
                                         "tables", floats);
    rc = pn_comm_agree(c, rc); /* every rank takes part, or none */
    part_maker maker = {st, slot_of, layout, path, NULL, 0};
    if (rc == PN_OK)
        rc = pn_comm_scatter_each(c, give_part, &maker, part, floats * sizeof *part);
    if (rc == PN_OK) rc = move_part(p, part, true);
    free(maker.buf);
    free(part);
    return rc;
}
