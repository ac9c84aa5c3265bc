/* pn_train_state: the training state of a whole model in host memory, independent
 * of the layout that made it: every parameter by name with its shape, values and
 * optimizer slots, the step counters, the data position, the seed, the global batch
 * and the model's JSON text. It is what a snapshot file holds (io/snapshot_file.h) and what rank 0
 * assembles from the stages' arenas (train/checkpoint.h). Parameters point into
 * blocks the state owns: one block per arena image (values, then each slot), so
 * taking in a stage's arena costs no allocation per parameter. */
#ifndef PN_TRAIN_STATE_H
#define PN_TRAIN_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "layers/params.h"

#define PN_FORMAT_SNAPSHOT "pipenet-snapshot"
#define PN_FORMAT_MODEL "pipenet-model"

enum { PN_STATE_MAX_SLOTS = 8 };

typedef struct pn_state_param {
    char *name;     /* "<layer>/<param>" */
    int rows, cols;
    float *value;   /* rows * cols */
    float *slots[PN_STATE_MAX_SLOTS]; /* [n_slot_names] rows * cols each; NULL in a model */
} pn_state_param;

/* A state owns every string and array it points to; pn_train_state_free releases
 * them, so set config and slot names through the setters below. */
typedef struct pn_train_state {
    char format[32];     /* PN_FORMAT_SNAPSHOT or PN_FORMAT_MODEL */
    long step;           /* optimizer steps done */
    long epoch;          /* epoch of the next batch */
    long batch_index;    /* index of the next batch within that epoch */
    uint64_t seed;
    long batch;          /* the run's global batch; 0: not recorded (older files) */
    char *config;        /* the model file's JSON text */
    int n_slot_names;
    char **slot_names;   /* optimizer slots, e.g. "adam_m", "adam_v" */
    int n_params;
    pn_state_param *params;
    int n_blocks;
    void **blocks;       /* memory the parameters point into, freed with the state */
} pn_train_state;

/* An empty state (counters 0, no params) to fill; free with pn_train_state_free. */
int pn_train_state_create(pn_train_state **out, const char *format);
void pn_train_state_free(pn_train_state *st);

/* Sets the optimizer slot names (copied; at most PN_STATE_MAX_SLOTS, no ',' or '/'
 * in a name) of a snapshot state, before any parameter is added. */
int pn_train_state_set_slots(pn_train_state *st, int n, const char *const *names);

/* Sets the model's JSON text (copied). */
int pn_train_state_set_config(pn_train_state *st, const char *config);

/* Adds a parameter "<layer>/<param>" (values and slots copied: slots holds
 * n_slot_names arrays, or is NULL in a model or a state without slots); a bad or
 * repeated name or an empty shape is an error. */
int pn_train_state_add(pn_train_state *st, const char *name, int rows, int cols,
                       const float *value, const float *const *slots);

/* Adds the parameters of one arena image without copying: index[count] gives each
 * one's name, shape and offset (in floats) in the image's arrays, the values at
 * image and slot s at image + (1 + s) * stride. The parameters point into image,
 * which must live as long as the state (see pn_train_state_keep). */
int pn_train_state_adopt(pn_train_state *st, const pn_param *index, int count,
                         const float *image, size_t stride);

/* Hands block (malloc'd) to the state: it is freed with the state, also when this
 * fails. */
int pn_train_state_keep(pn_train_state *st, void *block);

/* The parameter called name, or NULL. */
const pn_state_param *pn_train_state_find(const pn_train_state *st, const char *name);

/* True when name can be a slot name (one HDF5 link name and one item of the
 * comma-joined `slots` attribute, at most PN_SUFFIX_MAX bytes). */
int pn_train_state_valid_slot_name(const char *name);

#endif
