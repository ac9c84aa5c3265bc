/* Snapshot gathering and scattering over the rank grid. Every rank of replica 0
 * sends rank 0 its parameters (name, shape, values, slots); the other replicas hold
 * copies and send nothing. On resume every rank reads the file itself. */
#include "pipeline/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "mpi/mpi_check.h"

enum { NAME_CAP = 256, TAG_COUNT = 11, TAG_NAME, TAG_SHAPE, TAG_DATA };

/* Adds parameter i of params to st, values and slots in arena order. */
static int add_local(pn_train_state *st, const pn_params *params, int i)
{
    const pn_param *p = pn_params_get(params, i);
    int n_slots = pn_params_n_slots(params);
    const float *slots[16];
    for (int s = 0; s < n_slots && s < 16; s++) slots[s] = pn_params_slot(params, s, i).data;
    return pn_train_state_add(st, p->name, p->rows, p->cols, pn_params_value(params, i).data,
                              n_slots ? slots : NULL);
}

/* Sends every parameter of this stage to rank 0 (ranks of replica 0 but 0). */
static int send_stage(const pn_grid *g, const pn_params *params)
{
    int n = pn_params_count(params), n_slots = pn_params_n_slots(params);
    PN_MPI_CHECK(MPI_Send(&n, 1, MPI_INT, 0, TAG_COUNT, g->world));
    for (int i = 0; i < n; i++) {
        const pn_param *p = pn_params_get(params, i);
        char name[NAME_CAP];
        snprintf(name, sizeof name, "%s", p->name);
        int shape[2] = {p->rows, p->cols}, count = p->rows * p->cols;
        PN_MPI_CHECK(MPI_Send(name, NAME_CAP, MPI_CHAR, 0, TAG_NAME, g->world));
        PN_MPI_CHECK(MPI_Send(shape, 2, MPI_INT, 0, TAG_SHAPE, g->world));
        PN_MPI_CHECK(MPI_Send(pn_params_value(params, i).data, count, MPI_FLOAT, 0, TAG_DATA,
                              g->world));
        for (int s = 0; s < n_slots; s++)
            PN_MPI_CHECK(MPI_Send(pn_params_slot(params, s, i).data, count, MPI_FLOAT, 0,
                                  TAG_DATA, g->world));
    }
    return PN_OK;
}

/* Receives the parameters of stage `from` into st (rank 0). It drains every message
 * even after a failure, so that the sender never waits forever. */
static int receive_stage(const pn_grid *g, pn_train_state *st, int from, int n_slots)
{
    int n;
    PN_MPI_CHECK(MPI_Recv(&n, 1, MPI_INT, from, TAG_COUNT, g->world, MPI_STATUS_IGNORE));
    int rc = PN_OK;
    for (int i = 0; i < n; i++) {
        char name[NAME_CAP];
        int shape[2];
        PN_MPI_CHECK(MPI_Recv(name, NAME_CAP, MPI_CHAR, from, TAG_NAME, g->world, MPI_STATUS_IGNORE));
        PN_MPI_CHECK(MPI_Recv(shape, 2, MPI_INT, from, TAG_SHAPE, g->world, MPI_STATUS_IGNORE));
        size_t count = (size_t)shape[0] * (size_t)shape[1];
        float *buf = malloc((size_t)(1 + n_slots) * (count ? count : 1) * sizeof(float));
        if (!buf) return pn_error_set(PN_ERR_NOMEM, "out of memory gathering '%s'", name);
        const float *slots[16];
        for (int s = 0; s <= n_slots; s++) {
            PN_MPI_CHECK(MPI_Recv(buf + (size_t)s * count, (int)count, MPI_FLOAT, from, TAG_DATA,
                                  g->world, MPI_STATUS_IGNORE));
            if (s > 0 && s <= 16) slots[s - 1] = buf + (size_t)s * count;
        }
        if (rc == PN_OK)
            rc = pn_train_state_add(st, name, shape[0], shape[1], buf, n_slots ? slots : NULL);
        free(buf);
    }
    return rc;
}

/* Rank 0: the whole model's state from its own stage and the others'. */
static int gather(const pn_grid *g, const pn_params *params, pn_train_state *st)
{
    int rc = PN_OK;
    for (int i = 0; i < pn_params_count(params) && rc == PN_OK; i++) rc = add_local(st, params, i);
    for (int stage = 1; stage < g->stages; stage++) {
        int r = receive_stage(g, st, pn_grid_rank_of(g, 0, stage), pn_params_n_slots(params));
        if (rc == PN_OK) rc = r;
    }
    return rc;
}

static int write_on_root(const pn_grid *g, const pn_params *params, const char *config,
                         uint64_t seed, pn_progress_mark mark, const char *dir, int keep,
                         char *path, size_t cap)
{
    pn_train_state *st;
    PN_TRY(pn_train_state_create(&st, PN_FORMAT_SNAPSHOT));
    st->step = mark.step;
    st->epoch = mark.epoch;
    st->batch_index = mark.batch_index;
    st->seed = seed;
    int rc = (st->config = strdup(config)) ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    int n_slots = pn_params_n_slots(params);
    if (rc == PN_OK && n_slots) {
        st->slot_names = calloc((size_t)n_slots, sizeof *st->slot_names);
        if (!st->slot_names) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
        for (int s = 0; rc == PN_OK && s < n_slots; s++)
            if (!(st->slot_names[st->n_slot_names++] = strdup(pn_params_slot_name(params, s))))
                rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int gathered = gather(g, params, st); /* always, so senders are released */
    if (rc == PN_OK) rc = gathered;
    if (rc == PN_OK) rc = pn_snapshot_dir_create(dir);
    if (rc == PN_OK) {
        pn_snapshot_path(dir, mark.step, path, cap);
        rc = pn_snapshot_write(path, st, NULL);
    }
    if (rc == PN_OK) rc = pn_snapshot_prune(dir, keep);
    pn_train_state_free(st);
    return rc;
}

int pn_checkpoint_save(const pn_grid *g, const pn_params *params, const char *config,
                       uint64_t seed, pn_progress_mark mark, const char *dir, int keep,
                       char *written_path, size_t cap)
{
    int rc = PN_OK;
    if (g->rank == 0)
        rc = write_on_root(g, params, config, seed, mark, dir, keep, written_path, cap);
    else if (g->replica == 0)
        rc = send_stage(g, params);
    /* one outcome for all: rank 0's */
    int root_rc = rc;
    PN_MPI_CHECK(MPI_Bcast(&root_rc, 1, MPI_INT, 0, g->world));
    if (g->rank == 0 || rc < 0) return rc;
    return root_rc < 0 ? pn_error_set(PN_ERR_PEER, "rank 0 could not write the snapshot") : PN_OK;
}

/* Copies the file's values and slots of every parameter of params. */
static int load_params(const pn_train_state *st, pn_params *params, const char *path)
{
    int n_slots = pn_params_n_slots(params);
    for (int s = 0; s < n_slots; s++) {
        bool found = false;
        for (int k = 0; k < st->n_slot_names; k++) found |= !strcmp(st->slot_names[k], pn_params_slot_name(params, s));
        if (!found)
            return pn_error_set(PN_ERR_INVALID, "%s: has no optimizer slot '%s' (was it written "
                                                "with another optimizer?)",
                                path, pn_params_slot_name(params, s));
    }
    for (int i = 0; i < pn_params_count(params); i++) {
        const pn_param *p = pn_params_get(params, i);
        const pn_state_param *q = pn_train_state_find(st, p->name);
        if (!q) return pn_error_set(PN_ERR_INVALID, "%s: has no parameter '%s'", path, p->name);
        if (q->rows != p->rows || q->cols != p->cols)
            return pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %d x %d, the model's is %d x %d",
                                path, p->name, q->rows, q->cols, p->rows, p->cols);
        size_t bytes = (size_t)p->rows * p->cols * sizeof(float);
        memcpy(pn_params_value(params, i).data, q->value, bytes);
        for (int s = 0; s < n_slots; s++)
            for (int k = 0; k < st->n_slot_names; k++)
                if (!strcmp(st->slot_names[k], pn_params_slot_name(params, s)))
                    memcpy(pn_params_slot(params, s, i).data, q->slots[k], bytes);
    }
    return PN_OK;
}

int pn_checkpoint_load(const pn_grid *g, pn_params *params, const char *resume,
                       const char *dir, pn_progress_mark *mark, char *path_out, size_t cap)
{
    int rc = PN_OK;
    char path[4096] = "";
    if (strcmp(resume, "auto")) {
        snprintf(path, sizeof path, "%s", resume);
    } else if (g->rank == 0) {
        if (!dir || !dir[0])
            rc = pn_error_set(PN_ERR_INVALID, "--resume auto needs --snapshot-dir");
        else
            rc = pn_snapshot_latest(dir, path, sizeof path);
    }
    int root_rc = rc;
    PN_MPI_CHECK(MPI_Bcast(&root_rc, 1, MPI_INT, 0, g->world));
    if (root_rc < 0)
        return g->rank == 0 ? rc : pn_error_set(PN_ERR_PEER, "rank 0 found no snapshot");
    PN_MPI_CHECK(MPI_Bcast(path, sizeof path, MPI_CHAR, 0, g->world));
    pn_train_state *st = NULL;
    rc = pn_snapshot_read(path, PN_FORMAT_SNAPSHOT, &st);
    if (rc == PN_OK) rc = load_params(st, params, path);
    if (rc == PN_OK) {
        *mark = (pn_progress_mark){st->step, st->epoch, st->batch_index};
        snprintf(path_out, cap, "%s", path);
    }
    pn_train_state_free(st);
    return rc;
}
