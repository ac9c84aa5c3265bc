/* Snapshots of tables sharded by rows (checkpoint_shards.h): whether a job has any,
 * and rank 0's view of the stages' indexes. */
#include "train/checkpoint_shards.h"

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

/* --- rank 0's view of the stages ---------------------------------------------------------- */

int pn_shard_layout_make(pn_shard_layout *l, const pn_grid *g, int n_slots, const char *own,
                         const char *indexes, const size_t *index_bytes)
{
    *l = (pn_shard_layout){g->stages, g->replicas, n_slots, NULL, NULL, NULL};
    l->items = calloc((size_t)g->stages, sizeof *l->items);
    l->counts = calloc((size_t)g->stages, sizeof *l->counts);
    l->pieces = calloc((size_t)g->stages, sizeof *l->pieces);
    if (!l->items || !l->counts || !l->pieces) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    const char *index = indexes;
    for (int s = 0; s < g->stages; s++) {
        size_t floats;
        PN_TRY(pn_params_unpack_index(s ? index : own, index_bytes[s], &l->items[s],
                                      &l->counts[s], &floats, &l->pieces[s]));
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
    free(l->pieces);
    l->items = NULL;
    l->counts = NULL;
    l->pieces = NULL;
}

