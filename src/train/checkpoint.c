/* Snapshots over the rank grid (checkpoint.h), written in parallel
 * (docs/snapshots.md): each writer (every stage's first replica, and every owner of
 * rows of a split table) writes its own part file straight from its arena, then
 * rank 0 writes the index over the parts and commits it; a job of one writer writes
 * one version 1 file the same way. No rank gathers the model. To load, every rank
 * opens the snapshot read-only and reads only its own stage's parameters (an owner
 * of a split table its rows, by a strided selection), whatever layout wrote it. */
#include "train/checkpoint.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "io/snapshot_parts.h"
#include "io/snapshot_size.h"
#include "train/checkpoint_shards.h"
#include "train/fault.h"

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

int pn_checkpoint_prepare(pn_comm *c, const char *dir, pn_snapshot_lock **lock)
{
    *lock = NULL;
    int rc = PN_OK;
    if (pn_comm_grid(c)->rank == 0) { /* the rank that commits snapshots */
        rc = pn_snapshot_dir_prepare(dir);
        if (rc == PN_OK) rc = pn_snapshot_lock_take(dir, lock);
    }
    return pn_comm_agree_root(c, rc, "prepare the snapshot directory");
}

/* Whether this arena holds rows of a table split across its replicas. */
static bool holds_split(const pn_params *p)
{
    for (int i = 0; i < pn_params_count(p); i++)
        if (pn_params_split(p, pn_params_get(p, i))) return true;
    return false;
}

/* Collective: every rank that writes parts (the first replica, the split tables'
 * owners, and with a sharded optimizer every replica) sees the directory rank 0
 * writes to: a marker file of rank 0's. */
static int check_writers_see(pn_comm *c, const pn_params *params, bool sharded,
                             const char *dir)
{
    const pn_grid *g = pn_comm_grid(c);
    char mark[64] = "";
    bool split = false;
    int rc = pn_shards_any(c, params, &split);
    if (rc < 0 || (g->stages == 1 && !split && !sharded)) return rc; /* rank 0 alone writes */
    if (g->rank == 0) rc = pn_snapshot_dir_mark(dir, mark, sizeof mark, true);
    PN_TRY(pn_comm_agree_root(c, rc, "mark the snapshot directory"));
    rc = pn_comm_broadcast(c, mark, sizeof mark);
    if (rc == PN_OK && g->rank != 0 && (g->replica == 0 || holds_split(params) || sharded))
        rc = pn_snapshot_dir_mark(dir, mark, sizeof mark, false);
    rc = pn_comm_agree(c, rc);
    if (g->rank == 0) pn_snapshot_dir_unmark(dir, mark);
    /* rank 0 reports it (a set-up failure is agreed once more, and the lowest failing
     * rank speaks): "rank N failed" is all it knows, and what it needs to say */
    char who[128];
    snprintf(who, sizeof who, "%s", pn_error_message()); /* "rank N failed" */
    if (rc == PN_ERR_PEER && g->rank == 0)
        return pn_error_set(PN_ERR_IO, "snapshot directory '%s': %s to see it: every rank that "
                            "writes a part of a snapshot (the first replica's, the owners of "
                            "tables sharded by rows, every replica with --shard-optimizer) "
                            "must see the directory rank 0 writes "
                            "to (a file system they share, not a node-local path)", dir, who);
    return rc < 0 && g->rank != 0 ? pn_error_set(PN_ERR_PEER, "rank 0 reports it") : rc;
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
                                    &floats, NULL);
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
                    items[s][i].name, items[s][i].table_rows, items[s][i].cols, 0, false};
    contents.params = arrays;
    if (rc == PN_OK) rc = pn_snapshot_file_bytes(&contents, bytes);
    for (int s = 0; items && counts && s < stages; s++) pn_params_free_index(items[s], counts[s]);
    free(arrays);
    free(items);
    free(counts);
    return rc;
}

int pn_checkpoint_check_room(pn_comm *c, const pn_params *params, int n_slots,
                             const char *const *slot_names, bool sharded_slots,
                             const char *config, const char *dir, double *snap_bytes)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t *index_bytes = NULL;
    char *own = NULL, *indexes = NULL;
    uint64_t bytes = 0;
    int rc = PN_OK;
    if (g->rank == 0 && !(index_bytes = calloc((size_t)g->stages, sizeof *index_bytes)))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = gather_indexes(c, params, &own, &indexes, index_bytes);
    if (rc == PN_OK && g->rank == 0) {
        pn_snapshot_contents contents = {NULL, 0, n_slots, slot_names, strlen(config), true};
        rc = snapshot_bytes(g->stages, own, indexes, index_bytes, contents, &bytes);
        if (rc == PN_OK) rc = pn_snapshot_dir_check_room(dir, bytes);
    }
    free(own);
    free(indexes);
    free(index_bytes);
    PN_TRY(pn_comm_agree(c, rc));
    PN_TRY(pn_comm_broadcast(c, &bytes, sizeof bytes)); /* rank 0's figure, for everyone */
    *snap_bytes = (double)bytes;
    return check_writers_see(c, params, sharded_slots, dir);
}

/* --- save ------------------------------------------------------------------------------- */

/* What this rank writes: its arena's parameters (all but tied copies) on the first
 * replica, its rows of the split tables on the others, and with a sharded optimizer
 * (slots) its run of every dense parameter's slots. */
typedef struct part_source {
    const pn_params *params;
    const pn_slot_parts *slots; /* NULL: the arena's */
    pn_snapshot_array *arrays;
    bool *matrix; /* a split table's rows */
    int *index;   /* the arena's parameter of each array */
    int n;
    size_t largest;
    pn_fault fault; /* "part": fails after the part's first dataset */
    int calls;
} part_source;

/* Slot k of parameter i as this rank writes and reads it: from the arena, or its part
 * of a sharded optimizer's (false: it keeps none; *at and *n its run). */
static bool slot_of_param(const pn_params *p, const pn_slot_parts *slots, int i, int k,
                          size_t *at, size_t *n, pn_matrix *m)
{
    if (slots) return slots->part(slots->ctx, i, k, at, n, m);
    *m = pn_params_slot(p, k, i);
    *at = 0;
    *n = pn_matrix_count(*m);
    return true;
}

static int part_fill(void *ctx, int array, int slot, float *staging, const float **data)
{
    part_source *ps = ctx;
    if (++ps->calls == 2) PN_TRY(pn_fault_at(&ps->fault, "part"));
    int i = ps->index[array];
    size_t at, n;
    pn_matrix m = pn_params_value(ps->params, i);
    if (slot >= 0 && !slot_of_param(ps->params, ps->slots, i, slot, &at, &n, &m))
        return pn_error_set(PN_ERR_INTERNAL, "no slot %d of '%s' here", slot,
                            ps->arrays[array].name);
    if (m.device.kind == PN_DEVICE_HOST && pn_matrix_dense(m)) {
        *data = m.data; /* the arena (or the optimizer's part) itself: no copy */
        return PN_OK;
    }
    if (!staging) return pn_error_set(PN_ERR_INTERNAL, "no staging buffer for '%s'",
                                      ps->arrays[array].name);
    PN_TRY(pn_matrix_read(&m, staging)); /* a GPU arena: one parameter at a time */
    *data = staging;
    return PN_OK;
}

/* ps's arrays: parameter i with its values when values, and its slots whole (run 0),
 * as this replica's run of a sharded optimizer's, or none (run < 0). */
static int part_source_make(part_source *ps, const pn_params *p, const pn_slot_parts *slots,
                            bool first_replica)
{
    int n = pn_params_count(p);
    ps->params = p;
    ps->slots = slots;
    ps->arrays = malloc((size_t)(n ? n : 1) * sizeof *ps->arrays);
    ps->matrix = malloc((size_t)(n ? n : 1) * sizeof *ps->matrix);
    ps->index = malloc((size_t)(n ? n : 1) * sizeof *ps->index);
    if (!ps->arrays || !ps->matrix || !ps->index) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const pn_param *q = pn_params_get(p, i);
        bool split = pn_params_split(p, q), values = first_replica || split;
        if (q->tie || q->rows == 0) continue;
        long run = values ? 0 : -1; /* the slots with the values, as the arena holds them */
        size_t at, len;
        pn_matrix m;
        if (slots && !q->row_sparse) /* a dense parameter's: this replica's run */
            run = slots->n_slots > 0 && slot_of_param(p, slots, i, 0, &at, &len, &m) ? (long)len
                                                                                       : -1;
        if (!values && run < 0) continue;
        ps->arrays[ps->n] = (pn_snapshot_array){q->name, q->rows, q->cols, run, !values};
        ps->matrix[ps->n] = split;
        ps->index[ps->n++] = i;
        if ((size_t)q->rows * (size_t)q->cols > ps->largest)
            ps->largest = (size_t)q->rows * (size_t)q->cols;
    }
    return PN_OK;
}

static void part_source_free(part_source *ps)
{
    free(ps->arrays);
    free(ps->matrix);
    free(ps->index);
}

/* The snapshot's attributes: counters, run settings, slot names; no parameters. */
static int make_header(const pn_params *params, const pn_slot_parts *slots, pn_run_settings run,
                       pn_progress_mark mark, pn_train_state **out)
{
    PN_TRY(pn_train_state_create(out, PN_FORMAT_SNAPSHOT));
    pn_train_state *st = *out;
    st->step = mark.step;
    st->epoch = mark.epoch;
    st->batch_index = mark.batch_index;
    st->seed = run.seed;
    st->batch = run.batch;
    const char *names[PN_STATE_MAX_SLOTS];
    int n_slots = slots ? slots->n_slots : pn_params_n_slots(params);
    if (n_slots > PN_STATE_MAX_SLOTS)
        return pn_error_set(PN_ERR_UNSUPPORTED, "%d optimizer slots", n_slots);
    for (int s = 0; s < n_slots; s++)
        names[s] = slots ? slots->names[s] : pn_params_slot_name(params, s);
    PN_TRY(pn_train_state_set_config(st, run.config));
    return pn_train_state_set_slots(st, n_slots, names);
}

/* This rank's part (stage < 0: the whole file of a one-writer job). */
static int write_own_part(const pn_params *params, const pn_slot_parts *slots,
                          const pn_train_state *header, int stage, int replica,
                          bool first_replica, const char *dir, long pid, int rank, char *path,
                          size_t cap)
{
    part_source ps = {0};
    ps.fault = pn_fault_for_rank(rank);
    int rc = part_source_make(&ps, params, slots, first_replica);
    bool host = pn_params_device(params).kind == PN_DEVICE_HOST;
    pn_snapshot_part part = {header, stage, replica, ps.arrays, ps.matrix, ps.n,
                             host ? 0 : ps.largest, part_fill, &ps};
    if (rc == PN_OK) rc = pn_snapshot_write_part(dir, &part, pid, path, cap);
    part_source_free(&ps);
    return rc;
}

/* The runs of stage s's dense parameter q's slots, one per replica that keeps some
 * (a sharded optimizer: replica r the part of q in piece r of the gradient buffer,
 * optimizer_shard.h), into runs; returns how many. */
static int slot_runs(const pn_shard_layout *l, int s, const pn_param *q, pn_snapshot_run *runs)
{
    int n = 0;
    size_t count = (size_t)q->rows * (size_t)q->cols, a, b;
    for (int r = 0; r < l->replicas; r++)
        if (pn_params_piece_run(q->grad_offset, count, l->pieces[s], r, &a, &b))
            runs[n++] = (pn_snapshot_run){s, r, a - q->grad_offset, b - a};
    return n;
}

/* Rank 0: the index's parameters, from the stages' unpacked indexes: each stage's
 * parameters from its first replica's part, a split table's rows r, r + D, ... from
 * replica r's, a sharded optimizer's slots (sharded) of a dense parameter from every
 * replica's run; a tied copy is its table's. *parts counts the part files. */
static int index_params(const pn_shard_layout *l, bool sharded, pn_snapshot_index_param **out,
                        int *n, pn_snapshot_source **sources, pn_snapshot_run **runs,
                        int *parts)
{
    int total = 0, n_src = 0;
    *parts = 0;
    for (int s = 0; s < l->stages; s++) {
        bool split = false;
        for (int i = 0; i < l->counts[s]; i++) {
            total++;
            n_src += l->items[s][i].sharded ? l->replicas : 1;
            split = split || l->items[s][i].sharded;
        }
        *parts += split || sharded ? l->replicas : 1; /* sharded: every replica writes */
    }
    *out = malloc((size_t)(total ? total : 1) * sizeof **out);
    *sources = malloc((size_t)(n_src ? n_src : 1) * sizeof **sources);
    size_t n_runs = sharded ? (size_t)total * (size_t)l->replicas : 1;
    *runs = malloc((n_runs ? n_runs : 1) * sizeof **runs);
    if (!*out || !*sources || !*runs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_snapshot_source *src = *sources;
    pn_snapshot_run *run = *runs;
    *n = 0;
    for (int s = 0; s < l->stages; s++)
        for (int i = 0; i < l->counts[s]; i++) {
            const pn_param *q = &l->items[s][i];
            if (q->tie) continue;
            pn_snapshot_index_param *p = &(*out)[(*n)++];
            *p = (pn_snapshot_index_param){q->name, q->table_rows, q->cols, src, 0, run, 0};
            for (int r = 0; r < (q->sharded ? l->replicas : 1); r++) {
                int rows = q->sharded ? pn_shard_row_count(q->table_rows, l->replicas, r)
                                      : q->rows;
                if (rows > 0)
                    src[p->n_sources++] = (pn_snapshot_source){s, r, r, q->sharded ? l->replicas
                                                                                   : 0, rows};
            }
            src += p->n_sources;
            if (sharded && !q->row_sparse) p->n_runs = slot_runs(l, s, q, run);
            run += p->n_runs;
        }
    return PN_OK;
}

static int index_fault(void *ctx) { return pn_fault_at(ctx, "index"); }

/* Rank 0, once every part is in place: the index over them, committed. */
static int commit(const pn_grid *g, bool sharded, const char *own, const char *indexes,
                  const size_t *index_bytes, const pn_train_state *header, const char *dir,
                  char *path, size_t cap)
{
    pn_shard_layout layout = {0};
    pn_snapshot_index_param *params = NULL;
    pn_snapshot_source *sources = NULL;
    pn_snapshot_run *runs = NULL;
    int n = 0, parts = 0;
    pn_fault fault = pn_fault_for_rank(0);
    int rc = pn_fault_at(&fault, "parts"); /* between the parts and the index */
    if (rc == PN_OK)
        rc = pn_shard_layout_make(&layout, g, header->n_slot_names, own, indexes, index_bytes);
    if (rc == PN_OK) rc = index_params(&layout, sharded, &params, &n, &sources, &runs, &parts);
    if (rc == PN_OK)
        rc = pn_snapshot_commit_index(dir, header, parts, params, n, index_fault, &fault, path,
                                      cap);
    free(params);
    free(sources);
    free(runs);
    pn_shard_layout_free(&layout);
    return rc;
}

int pn_checkpoint_save(pn_comm *c, const pn_params *params, const pn_slot_parts *slots,
                       pn_run_settings run, pn_progress_mark mark, const char *dir, int keep,
                       char *written_path, size_t cap)
{
    const pn_grid *g = pn_comm_grid(c);
    size_t *index_bytes = NULL;
    char *own_index = NULL, *indexes = NULL, part_path[4096 + 64];
    bool split = false, sharded = false;
    pn_train_state *header = NULL;
    long pid = (long)getpid(); /* rank 0's names every temporary */
    int rc = pn_shards_any(c, params, &split);
    if (rc == PN_OK) rc = pn_comm_any(c, slots && slots->n_slots > 0, &sharded);
    if (!sharded) slots = NULL; /* the arena's slots: there are none elsewhere */
    /* else rank 0 alone writes one file; sharded, every replica writes its part */
    bool multi = g->stages > 1 || split || sharded;
    bool writer = multi ? g->replica == 0 || holds_split(params) || sharded : g->rank == 0;
    if (rc == PN_OK) rc = pn_comm_broadcast(c, &pid, sizeof pid);
    if (rc == PN_OK && g->rank == 0) {
        rc = pn_snapshot_dir_create(dir);
        if (rc == PN_OK && multi) rc = pn_snapshot_unpublish(dir, mark.step);
        if (rc == PN_OK && !(index_bytes = calloc((size_t)g->stages, sizeof *index_bytes)))
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    /* each phase's outcome agreed once: the rank that failed reports, the others stop.
     * A stall (PN_ERR_STALL: a peer stopped or cut off) agrees nothing and ends the job
     * now, as a kill would: its parts stay (rank 0 may still read them for the index),
     * and the next save clears what is left. */
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK && multi) rc = gather_indexes(c, params, &own_index, &indexes, index_bytes);
    if (rc == PN_OK) {
        if (writer) rc = make_header(params, slots, run, mark, &header);
        if (rc == PN_OK && writer)
            rc = write_own_part(params, slots, header, multi ? g->stage : -1, g->replica,
                                g->replica == 0, dir, pid, g->rank,
                                g->rank == 0 && !multi ? written_path : part_path,
                                g->rank == 0 && !multi ? cap : sizeof part_path);
        rc = pn_comm_agree(c, rc); /* every part in place, or none kept */
        if (rc < 0 && rc != PN_ERR_STALL && multi && writer)
            pn_snapshot_drop_part(dir, mark.step, g->stage, g->replica, pid);
    }
    if (rc == PN_OK && multi) {
        if (g->rank == 0)
            rc = commit(g, sharded, own_index, indexes, index_bytes, header, dir, written_path,
                        cap);
        rc = pn_comm_agree(c, rc);
        if (rc < 0 && rc != PN_ERR_STALL && writer) /* no index: the parts go too */
            pn_snapshot_drop_part(dir, mark.step, g->stage, g->replica, pid);
    }
    if (rc == PN_OK) {
        if (g->rank == 0) rc = pn_snapshot_prune(dir, keep, mark.step);
        rc = pn_comm_agree(c, rc);
    }
    pn_train_state_free(header);
    free(own_index);
    free(indexes);
    free(index_bytes);
    return rc;
}

/* --- load ------------------------------------------------------------------------------- */

/* slot_of[s]: the slot of the file named like slot s of the n_slots names, or an
 * error naming it. */
static int match_slots(const pn_train_state *st, int n_slots, const char *const *names,
                       const char *path, int *slot_of)
{
    if (n_slots > PN_STATE_MAX_SLOTS)
        return pn_error_set(PN_ERR_UNSUPPORTED, "%d optimizer slots", n_slots);
    for (int s = 0; s < n_slots; s++) {
        for (slot_of[s] = 0; slot_of[s] < st->n_slot_names; slot_of[s]++)
            if (!strcmp(st->slot_names[slot_of[s]], names[s])) break;
        if (slot_of[s] == st->n_slot_names)
            return pn_error_set(PN_ERR_INVALID, "%s: has no optimizer slot '%s' (was it written "
                                                "with another optimizer?)",
                                path, names[s]);
    }
    return PN_OK;
}

/* Reads this rank's parameters from r into its arena (and its slots into slots, a
 * sharded optimizer's, when not NULL): each whole, a tied copy from its table, a
 * split table's own rows (shard k of D: rows k, k + D, ...), a sharded optimizer's
 * run of a dense parameter's slots. */
static int read_own(pn_snapshot_reader *r, pn_params *params, const pn_slot_parts *slots,
                    const int *slot_of)
{
    bool host = pn_params_device(params).kind == PN_DEVICE_HOST;
    size_t largest = 1;
    for (int i = 0; !host && i < pn_params_count(params); i++) {
        const pn_param *p = pn_params_get(params, i);
        if ((size_t)p->rows * (size_t)p->cols > largest)
            largest = (size_t)p->rows * (size_t)p->cols;
    }
    float *staging = host ? NULL : malloc(largest * sizeof *staging);
    if (!host && !staging)
        return pn_error_set(PN_ERR_NOMEM, "out of memory for %zu floats", largest);
    int shards, shard, rc = PN_OK;
    int n_slots = slots ? slots->n_slots : pn_params_n_slots(params);
    pn_params_shards(params, &shards, &shard);
    for (int i = 0; rc == PN_OK && i < pn_params_count(params); i++) {
        const pn_param *p = pn_params_get(params, i);
        bool split = pn_params_split(params, p);
        const char *name = p->tie ? p->tie : p->name;
        for (int a = -1; rc == PN_OK && a < n_slots; a++) {
            size_t at = 0, n = 0;
            pn_matrix m = pn_params_value(params, i);
            if (a >= 0 && !slot_of_param(params, slots, i, a, &at, &n, &m)) continue;
            bool direct = m.device.kind == PN_DEVICE_HOST && pn_matrix_dense(m);
            float *to = direct ? m.data : staging;
            int slot = a < 0 ? -1 : slot_of[a];
            if (a >= 0 && slots && !p->row_sparse) /* its run: whatever D wrote the file */
                rc = pn_snapshot_reader_run(r, name, slot, p->rows, p->cols, at, n, to);
            else if (split)
                rc = pn_snapshot_reader_rows(r, name, slot, p->table_rows, p->cols, shard,
                                             shards, p->rows, to);
            else
                rc = pn_snapshot_reader_rows(r, name, slot, p->rows, p->cols, 0, 1, p->rows, to);
            if (rc == PN_OK && !direct) rc = pn_matrix_write(&m, staging);
        }
    }
    free(staging);
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

int pn_checkpoint_load(pn_comm *c, pn_params *params, const pn_slot_parts *slots,
                       const char *path, pn_progress_mark *mark)
{
    pn_snapshot_reader *r = NULL;
    int slot_of[PN_STATE_MAX_SLOTS] = {0};
    const char *names[PN_STATE_MAX_SLOTS];
    int n_slots = slots ? slots->n_slots : pn_params_n_slots(params);
    for (int s = 0; s < n_slots && s < PN_STATE_MAX_SLOTS; s++)
        names[s] = slots ? slots->names[s] : pn_params_slot_name(params, s);
    /* every rank reads its own part of the file: read-only opens, side by side */
    int rc = pn_snapshot_reader_open(path, &r);
    if (rc == PN_OK)
        rc = match_slots(pn_snapshot_reader_header(r), n_slots, names, path, slot_of);
    if (rc == PN_OK) rc = read_own(r, params, slots, slot_of);
    long counters[3] = {0};
    if (rc == PN_OK) {
        const pn_train_state *h = pn_snapshot_reader_header(r);
        counters[0] = h->step, counters[1] = h->epoch, counters[2] = h->batch_index;
    }
    pn_snapshot_reader_close(r);
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = pn_comm_broadcast(c, counters, sizeof counters); /* rank 0's word */
    if (rc == PN_OK) *mark = (pn_progress_mark){counters[0], counters[1], counters[2]};
    return rc;
}
