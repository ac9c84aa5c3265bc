/* Snapshots over the rank grid (checkpoint.h): arena images gathered to rank 0 and
 * written as one file; one file read on rank 0 and scattered as arena images.
 * Tables sharded by rows across a stage's replicas are not in the images (the first
 * replica's image holds its own rows only): checkpoint_shards.c sends each owner's
 * rows to rank 0 one rank at a time while the file is open, so the file holds every
 * table whole as an unsharded run writes it, and no rank holds a sharded table
 * whole while saving. A load reads the file whole on rank 0 (as for every snapshot
 * today) and sends each owner only its rows. Writing from every rank in parallel
 * (no file on rank 0 alone) is the next step. */
#include "pipeline/checkpoint.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "io/snapshot_size.h"
#include "pipeline/checkpoint_shards.h"

/* --- arena images ------------------------------------------------------------------------ */

/* Arrays in an image: the values, then each optimizer slot, each the arena's size. */
static int image_arrays(const pn_params *p) { return 1 + pn_params_n_slots(p); }

/* Copies the arena's values and slots into image. */
static int read_image_into(const pn_params *p, float *image)
{
    size_t n = pn_params_size(p);
    pn_matrix values = pn_params_all_values(p);
    PN_TRY(pn_matrix_read(&values, image));
    for (int s = 0; s < pn_params_n_slots(p); s++) {
        pn_matrix slot = pn_params_all_slot(p, s);
        PN_TRY(pn_matrix_read(&slot, image + (1 + (size_t)s) * n));
    }
    return PN_OK;
}

/* The same into a new *image (malloc'd, *floats long). */
static int read_image(const pn_params *p, float **image, size_t *floats)
{
    size_t total = (size_t)image_arrays(p) * pn_params_size(p);
    if (!(*image = malloc((total ? total : 1) * sizeof(float))))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a snapshot of %zu floats", total);
    *floats = total;
    return read_image_into(p, *image);
}

/* Writes an image (as read_image makes it) into the arena. */
static int write_image(pn_params *p, const float *image)
{
    size_t n = pn_params_size(p);
    pn_matrix values = pn_params_all_values(p);
    PN_TRY(pn_matrix_write(&values, image));
    for (int s = 0; s < pn_params_n_slots(p); s++) {
        pn_matrix slot = pn_params_all_slot(p, s);
        PN_TRY(pn_matrix_write(&slot, image + (1 + (size_t)s) * n));
    }
    return PN_OK;
}

/* Gathers the first replica's packed indexes to rank 0: *own is this rank's (first
 * replica), *others (rank 0) those of stages 1 .. P-1 back to back, index_bytes[stage]
 * long each. */
static int gather_indexes(pn_comm *c, const pn_params *params, char **own, char **others,
                          size_t *index_bytes)
{
    size_t bytes = 0;
    int rc = pn_comm_grid(c)->replica == 0 ? pn_params_pack_index(params, own, &bytes) : PN_OK;
    rc = pn_comm_agree(c, rc); /* a stage that cannot take part would leave rank 0 waiting */
    if (rc == PN_OK)
        rc = pn_comm_gather_stages(c, *own, bytes, PN_COMM_BYTES, (void **)others, index_bytes);
    return rc;
}

/* --- save ------------------------------------------------------------------------------- */

/* Rank 0: adds one stage's arena image (index, then the image the state points into). */
static int adopt_stage(pn_train_state *st, const char *index, size_t bytes, const float *image,
                       size_t image_floats, int stage)
{
    pn_param *items;
    int count;
    size_t floats;
    PN_TRY(pn_params_unpack_index(index, bytes, &items, &count, &floats));
    int kept = 0; /* a tied copy is its table: the file holds the table only; a split
                   * table's rows arrive from their owners while the file is written */
    for (int i = 0; i < count; i++) {
        pn_param q = items[i];
        if (q.tie || q.sharded) continue;
        items[i] = items[kept];
        items[kept++] = q;
    }
    int rc = floats * (size_t)(1 + st->n_slot_names) == image_floats
                 ? pn_train_state_adopt(st, items, kept, image, floats)
                 : pn_error_set(PN_ERR_INTERNAL, "stage %d sent %zu floats for an arena of %zu",
                                stage, image_floats, floats);
    for (int i = kept; rc == PN_OK && i < count; i++)
        if (items[i].sharded)
            rc = pn_train_state_defer(st, items[i].name, items[i].table_rows, items[i].cols);
    pn_params_free_index(items, count);
    return rc;
}

/* Rank 0: the whole model's state from its own image and the gathered ones (the
 * state keeps both blocks). */
static int assemble(const pn_params *params, pn_run_settings run, pn_progress_mark mark,
                    int stages, const char *own_index, const char *indexes,
                    const size_t *index_bytes, float *own_image, float *images,
                    const size_t *image_floats, pn_train_state **out)
{
    int rc = pn_train_state_create(out, PN_FORMAT_SNAPSHOT);
    pn_train_state *st = *out;
    if (rc < 0) {
        free(own_image);
        free(images);
        return rc;
    }
    st->step = mark.step;
    st->epoch = mark.epoch;
    st->batch_index = mark.batch_index;
    st->seed = run.seed;
    st->batch = run.batch;
    rc = pn_train_state_keep(st, own_image);
    int rc2 = pn_train_state_keep(st, images);
    if (rc == PN_OK) rc = rc2;
    if (rc == PN_OK) rc = pn_train_state_set_config(st, run.config);
    const char *names[PN_STATE_MAX_SLOTS];
    int n_slots = pn_params_n_slots(params);
    for (int s = 0; s < n_slots && s < PN_STATE_MAX_SLOTS; s++)
        names[s] = pn_params_slot_name(params, s);
    if (rc == PN_OK) rc = pn_train_state_set_slots(st, n_slots, names);
    if (rc == PN_OK)
        rc = adopt_stage(st, own_index, index_bytes[0], own_image, image_floats[0], 0);
    const char *index = indexes;
    const float *image = images;
    for (int s = 1; rc == PN_OK && s < stages; s++) {
        rc = adopt_stage(st, index, index_bytes[s], image, image_floats[s], s);
        index += index_bytes[s];
        image += image_floats[s];
    }
    return rc;
}

/* Rank 0; with shards (not NULL), the split tables' rows are received while the
 * file is open. */
static int write_on_root(pn_train_state *st, pn_shard_writer *shards, const char *dir, int keep,
                         char *path, size_t cap)
{
    PN_TRY(pn_snapshot_dir_create(dir));
    pn_snapshot_path(dir, st->step, path, cap);
    PN_TRY(pn_snapshot_write_filled(path, st, NULL, shards ? pn_shards_write : NULL, shards));
    return pn_snapshot_prune(dir, keep, st->step);
}

int pn_checkpoint_prepare(pn_comm *c, const char *dir, pn_snapshot_lock **lock)
{
    *lock = NULL;
    int rc = PN_OK;
    if (pn_comm_grid(c)->rank == 0) { /* write_on_root's rank */
        rc = pn_snapshot_dir_prepare(dir);
        if (rc == PN_OK) rc = pn_snapshot_lock_take(dir, lock);
    }
    return pn_comm_agree_root(c, rc, "prepare the snapshot directory");
}

/* Rank 0: the bytes of a snapshot of the stages whose indexes it gathered (own is
 * stage 0's), holding what the file will: tied copies are their table's. */
static int snapshot_bytes(int stages, const char *own, const char *indexes,
                          const size_t *index_bytes, pn_snapshot_contents contents,
                          uint64_t *bytes)
{
    pn_param **items = calloc((size_t)stages, sizeof *items);
    int *counts = calloc((size_t)stages, sizeof *counts), total = 0, rc = PN_OK;
    if (!items || !counts) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    const char *index = indexes;
    for (int s = 0; rc == PN_OK && s < stages; s++) {
        size_t floats;
        rc = pn_params_unpack_index(s ? index : own, index_bytes[s], &items[s], &counts[s],
                                    &floats);
        if (s) index += index_bytes[s];
        total += counts[s];
    }
    pn_snapshot_array *arrays = NULL;
    if (rc == PN_OK && !(arrays = malloc((size_t)(total ? total : 1) * sizeof *arrays)))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int s = 0; rc == PN_OK && s < stages; s++)
        for (int i = 0; i < counts[s]; i++)
            if (!items[s][i].tie) /* a split table: whole in the file */
                arrays[contents.n_params++] = (pn_snapshot_array){
                    items[s][i].name, items[s][i].table_rows, items[s][i].cols};
    contents.params = arrays;
    if (rc == PN_OK) rc = pn_snapshot_file_bytes(&contents, bytes);
    for (int s = 0; items && counts && s < stages; s++) pn_params_free_index(items[s], counts[s]);
    free(arrays);
    free(items);
    free(counts);
    return rc;
}

int pn_checkpoint_check_room(pn_comm *c, const pn_params *params, int n_slots,
                             const char *const *slot_names, const char *config,
                             const char *dir)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t *index_bytes = NULL;
    char *own = NULL, *indexes = NULL;
    int rc = PN_OK;
    if (g->rank == 0 && !(index_bytes = calloc((size_t)g->stages, sizeof *index_bytes)))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = gather_indexes(c, params, &own, &indexes, index_bytes);
    if (rc == PN_OK && g->rank == 0) {
        pn_snapshot_contents contents = {NULL, 0, n_slots, slot_names, strlen(config), true};
        uint64_t bytes = 0;
        rc = snapshot_bytes(g->stages, own, indexes, index_bytes, contents, &bytes);
        if (rc == PN_OK) rc = pn_snapshot_dir_check_room(dir, bytes);
    }
    free(own);
    free(indexes);
    free(index_bytes);
    return pn_comm_agree(c, rc);
}

int pn_checkpoint_save(pn_comm *c, const pn_params *params, pn_run_settings run,
                       pn_progress_mark mark, const char *dir, int keep, char *written_path,
                       size_t cap)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t *index_bytes = NULL, *image_floats = NULL, floats = 0;
    char *own_index = NULL, *indexes = NULL;
    float *mine = NULL, *images = NULL;
    bool split = false;
    int rc = pn_shards_any(c, params, &split);
    if (rc == PN_OK && g->rank == 0 &&
        (!(index_bytes = calloc((size_t)g->stages, sizeof *index_bytes)) ||
         !(image_floats = calloc((size_t)g->stages, sizeof *image_floats))))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK && g->replica == 0) rc = read_image(params, &mine, &floats);
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = gather_indexes(c, params, &own_index, &indexes, index_bytes);
    if (rc == PN_OK)
        rc = pn_comm_gather_stages(c, mine, floats, PN_COMM_FLOATS, (void **)&images, image_floats);
    rc = pn_comm_agree(c, rc); /* the split tables' senders wait on rank 0's file */
    pn_shard_layout layout = {0};
    pn_shard_writer shards = {c, &layout, params, false, NULL};
    if (rc == PN_OK && g->rank == 0) {
        pn_train_state *st = NULL;
        if (split)
            rc = pn_shard_layout_make(&layout, g, pn_params_n_slots(params), own_index, indexes,
                                      index_bytes);
        int rc2 = assemble(params, run, mark, g->stages, own_index, indexes, index_bytes, mine,
                           images, image_floats, &st); /* st takes mine and images */
        mine = images = NULL;
        if (rc == PN_OK) rc = rc2;
        if (rc == PN_OK)
            rc = write_on_root(st, split ? &shards : NULL, dir, keep, written_path, cap);
        pn_train_state_free(st);
        if (split) {
            int drained = pn_shards_drain(&shards); /* when the file failed before its fill */
            if (rc == PN_OK) rc = drained;
        }
        pn_shard_layout_free(&layout);
    } else if (rc == PN_OK && split) {
        rc = pn_shards_send(c, params);
    }
    free(mine);
    free(images);
    free(own_index);
    free(indexes);
    free(index_bytes);
    free(image_floats);
    return pn_comm_agree(c, rc);
}

/* --- load ------------------------------------------------------------------------------- */

/* The parameter name of st, which must have shape rows x cols; errors name the file. */
static int lookup(const pn_train_state *st, const char *path, const char *name, int rows,
                  int cols, const pn_state_param **q)
{
    if (!(*q = pn_train_state_find(st, name)))
        return pn_error_set(PN_ERR_INVALID, "%s: has no parameter '%s'", path, name);
    if ((*q)->rows != rows || (*q)->cols != cols)
        return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %d x %d, the model's is %d x %d",
                            path, name, (*q)->rows, (*q)->cols, rows, cols);
    return PN_OK;
}

/* slot_of[s]: the slot of st named like slot s of params, or an error naming the file. */
static int match_slots(const pn_train_state *st, const pn_params *params, const char *path,
                       int *slot_of)
{
    for (int s = 0; s < pn_params_n_slots(params); s++) {
        for (slot_of[s] = 0; slot_of[s] < st->n_slot_names; slot_of[s]++)
            if (!strcmp(st->slot_names[slot_of[s]], pn_params_slot_name(params, s))) break;
        if (slot_of[s] == st->n_slot_names)
            return pn_error_set(PN_ERR_INVALID, "%s: has no optimizer slot '%s' (was it written "
                                                "with another optimizer?)",
                                path, pn_params_slot_name(params, s));
    }
    return PN_OK;
}

/* Rank 0: writes its own stage's values and slots from st into its arena. */
static int load_own(const pn_train_state *st, pn_params *params, const char *path,
                    const int *slot_of)
{
    for (int i = 0; i < pn_params_count(params); i++) {
        const pn_param *p = pn_params_get(params, i);
        const pn_state_param *q;
        if (pn_params_split(params, p)) continue; /* its rows come with pn_shards_load */
        PN_TRY(lookup(st, path, p->tie ? p->tie : p->name, p->rows, p->cols, &q));
        pn_matrix value = pn_params_value(params, i);
        PN_TRY(pn_matrix_write(&value, q->value));
        for (int s = 0; s < pn_params_n_slots(params); s++) {
            pn_matrix slot = pn_params_slot(params, s, i);
            PN_TRY(pn_matrix_write(&slot, q->slots[slot_of[s]]));
        }
    }
    return PN_OK;
}

/* Rank 0: cuts the file's state into the images of stages 1 .. P-1, back to back in
 * *images (image_floats[s] each), by their indexes. */
static int cut_images(const pn_train_state *st, int n_slots, const int *slot_of,
                      const char *path, int stages, const char *indexes,
                      const size_t *index_bytes, float **images, size_t *image_floats)
{
    size_t total = 0;
    const char *index = indexes;
    for (int s = 1; s < stages; s++) { /* sizes first */
        pn_param *items;
        int count;
        size_t floats;
        PN_TRY(pn_params_unpack_index(index, index_bytes[s], &items, &count, &floats));
        pn_params_free_index(items, count);
        total += image_floats[s] = floats * (size_t)(1 + n_slots);
        index += index_bytes[s];
    }
    if (!(*images = calloc(total ? total : 1, sizeof **images)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a snapshot of %zu floats", total);
    int rc = PN_OK;
    float *image = *images;
    index = indexes;
    for (int s = 1; rc == PN_OK && s < stages; s++) {
        pn_param *items;
        int count;
        size_t floats;
        rc = pn_params_unpack_index(index, index_bytes[s], &items, &count, &floats);
        for (int i = 0; rc == PN_OK && i < count; i++) {
            const pn_param *p = &items[i];
            const pn_state_param *q;
            size_t n = (size_t)p->rows * (size_t)p->cols;
            if (p->sharded) continue; /* its rows come with pn_shards_load */
            if ((rc = lookup(st, path, p->tie ? p->tie : p->name, p->rows, p->cols, &q)) < 0)
                break;
            memcpy(image + p->offset, q->value, n * sizeof(float));
            for (int k = 0; k < n_slots; k++)
                memcpy(image + (1 + (size_t)k) * floats + p->offset, q->slots[slot_of[k]],
                       n * sizeof(float));
        }
        pn_params_free_index(items, count); /* NULL, 0 after a failed unpack */
        index += index_bytes[s];
        image += image_floats[s];
    }
    return rc;
}

/* Rank 0: reads the file once (into *st, kept for the split tables' owners), loads
 * its own stage and cuts the others' images. */
static int read_on_root(pn_params *params, const char *path, int stages, const char *indexes,
                        const size_t *index_bytes, float **images, size_t *image_floats,
                        pn_train_state **st, int *slot_of)
{
    int n_slots = pn_params_n_slots(params);
    int rc = pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, st);
    if (rc == PN_OK && n_slots > PN_STATE_MAX_SLOTS)
        rc = pn_error_set(PN_ERR_UNSUPPORTED, "%d optimizer slots", n_slots);
    if (rc == PN_OK) rc = match_slots(*st, params, path, slot_of);
    if (rc == PN_OK) rc = load_own(*st, params, path, slot_of);
    if (rc == PN_OK)
        rc = cut_images(*st, n_slots, slot_of, path, stages, indexes, index_bytes, images,
                        image_floats);
    return rc;
}

/* Rank 0's part of pn_checkpoint_find: a file, a directory (its newest snapshot that
 * verifies, as export and infer read one) or "auto" (the same in dir, where none yet
 * is no error: the run starts fresh). */
static int find_on_root(const char *resume, const char *dir, char *path, size_t cap)
{
    if (strcmp(resume, "auto")) return pn_snapshot_resolve(resume, path, cap);
    if (!dir || !dir[0]) /* the command line refuses it first (exit 2) */
        return pn_error_set(PN_ERR_INVALID, "--resume auto needs a snapshot directory "
                                            "(--snapshot-dir DIR)");
    return pn_snapshot_latest(dir, true, path, cap);
}

int pn_checkpoint_find(pn_comm *c, const char *resume, const char *dir, char *path,
                       size_t cap)
{
    int rc = pn_comm_grid(c)->rank == 0 ? find_on_root(resume, dir, path, cap) : PN_OK;
    PN_TRY(pn_comm_agree_root(c, rc, "find a snapshot"));
    return pn_comm_broadcast(c, path, cap); /* every rank takes what rank 0 found */
}

int pn_checkpoint_load(pn_comm *c, pn_params *params, const char *path,
                       pn_progress_mark *mark)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t *index_bytes = NULL, *image_floats = NULL;
    char *own_index = NULL, *indexes = NULL;
    float *images = NULL, *mine = NULL;
    size_t floats = (size_t)image_arrays(params) * pn_params_size(params);
    bool root = g->rank == 0, image_needed = !root || g->replicas > 1, split = false;
    long counters[3] = {0};
    pn_train_state *st = NULL;
    int slot_of[PN_STATE_MAX_SLOTS] = {0};
    pn_shard_layout layout = {0};
    int rc = pn_shards_any(c, params, &split);
    if (rc == PN_OK && root && (!(index_bytes = calloc((size_t)g->stages, sizeof *index_bytes)) ||
                 !(image_floats = calloc((size_t)g->stages, sizeof *image_floats))))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK && image_needed && !(mine = malloc((floats ? floats : 1) * sizeof *mine)))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory for a snapshot of %zu floats", floats);
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = gather_indexes(c, params, &own_index, &indexes, index_bytes);
    if (rc == PN_OK && root) /* one reader for the whole job */
        rc = read_on_root(params, path, g->stages, indexes, index_bytes, &images, image_floats,
                          &st, slot_of);
    if (rc == PN_OK && root) counters[0] = st->step, counters[1] = st->epoch,
                             counters[2] = st->batch_index;
    if (rc == PN_OK && root && split)
        rc = pn_shard_layout_make(&layout, g, pn_params_n_slots(params), own_index, indexes,
                                  index_bytes);
    rc = pn_comm_agree(c, rc); /* all take their part, or none */
    if (rc == PN_OK) rc = pn_comm_broadcast(c, counters, sizeof counters);
    if (rc == PN_OK)
        rc = pn_comm_scatter_stages(c, images, image_floats, mine, floats, PN_COMM_FLOATS);
    if (rc == PN_OK && root && image_needed) rc = read_image_into(params, mine);
    rc = pn_comm_agree(c, rc); /* before the replicas wait on the first replica */
    if (rc == PN_OK) rc = pn_comm_broadcast_replicas(c, mine, floats, PN_COMM_FLOATS);
    if (rc == PN_OK && !root) rc = write_image(params, mine);
    rc = pn_comm_agree(c, rc);
    /* last: the first replica's image just wrote its own rows over the split tables */
    if (rc == PN_OK && split) rc = pn_comm_agree(c, pn_shards_load(c, params, st, slot_of,
                                                                    &layout, path));
    if (rc == PN_OK) *mark = (pn_progress_mark){counters[0], counters[1], counters[2]};
    pn_shard_layout_free(&layout);
    pn_train_state_free(st);
    free(images);
    free(mine);
    free(own_index);
    free(indexes);
    free(index_bytes);
    free(image_floats);
    return rc;
}
