/* Snapshot and model files (DESIGN.md section 3). A pn_train_state is the training
 * state independent of layout: every parameter by name with its shape, values and
 * optimizer slots, the step counters, the data position and the model's JSON text.
 * Snapshots (format "pipenet-snapshot") hold all of it; model exports
 * ("pipenet-model") hold the config and the values only. Files are written under a
 * temporary name, fsynced and renamed, so a crash never leaves a half file under
 * the final name; datasets are chunked with HDF5's fletcher32 checksum, the config
 * text carries a CRC-32, and reading verifies all of it: a truncated or corrupted
 * file is refused, naming it.
 *
 * HDF5 layout (docs/formats.md): root attributes format, version, step, epoch,
 * batch_index, seed (uint64), config, config_crc32, slots (snapshots: the slot names
 * joined by commas); /params/<layer>/<param> float32 [rows, cols] ([cols] when rows
 * is 1); /optimizer/<layer>/<param>/<slot> the same shape (snapshots only). */
#ifndef PN_SNAPSHOT_H
#define PN_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#define PN_FORMAT_SNAPSHOT "pipenet-snapshot"
#define PN_FORMAT_MODEL "pipenet-model"

typedef struct pn_state_param {
    char *name;     /* "<layer>/<param>" */
    int rows, cols;
    float *value;   /* rows * cols */
    float **slots;  /* [state->n_slot_names] rows * cols each; NULL in a model file */
} pn_state_param;

/* A state owns every string and array it points to; pn_train_state_free releases
 * them, so set config and slot_names through the setters below. */
typedef struct pn_train_state {
    char format[32];     /* PN_FORMAT_SNAPSHOT or PN_FORMAT_MODEL */
    long step;           /* optimizer steps done */
    long epoch;          /* epoch of the next batch */
    long batch_index;    /* index of the next batch within that epoch */
    uint64_t seed;
    char *config;        /* the model file's JSON text */
    int n_slot_names;
    char **slot_names;   /* optimizer slots, e.g. "adam_m", "adam_v" */
    int n_params;
    pn_state_param *params;
} pn_train_state;

/* An empty state (counters 0, no params) to fill; free with pn_train_state_free. */
int pn_train_state_create(pn_train_state **out, const char *format);
void pn_train_state_free(pn_train_state *st);

/* Sets the optimizer slot names (copied; no ',' or '/' in a name) of a snapshot
 * state, before any parameter is added. */
int pn_train_state_set_slots(pn_train_state *st, int n, const char *const *names);

/* Sets the model's JSON text (copied). */
int pn_train_state_set_config(pn_train_state *st, const char *config);

/* Adds a parameter "<layer>/<param>" (values and slots copied: slots holds
 * n_slot_names arrays, or is NULL in a model or a state without slots); a bad or
 * repeated name or an empty shape is an error. */
int pn_train_state_add(pn_train_state *st, const char *name, int rows, int cols,
                       const float *value, const float *const *slots);

/* The parameter called name, or NULL. */
const pn_state_param *pn_train_state_find(const pn_train_state *st, const char *name);

/* Writes st to path (temporary name, fsync, rename; the directory is fsynced too). */
int pn_snapshot_write(const char *path, const pn_train_state *st);

/* Reads and verifies a snapshot or model file. expect_format may be NULL (either). */
int pn_snapshot_read(const char *path, const char *expect_format, pn_train_state **out);

/* dir/snapshot-<step, 10 digits>.h5 */
void pn_snapshot_path(const char *dir, long step, char *out, size_t cap);

/* The newest snapshot of dir that opens and verifies (by step), into out; an error
 * when there is none (the message lists what was refused and why). */
int pn_snapshot_latest(const char *dir, char *out, size_t cap);

/* Deletes all but the newest keep snapshots of dir (by step), and the temporary
 * files snapshot-*.tmp-<pid> whose writer process is gone (on this host). */
int pn_snapshot_prune(const char *dir, int keep);

#endif
