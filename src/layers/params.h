/* pn_params: the parameter arena of one stage. Values, gradients and each optimizer
 * slot are one contiguous buffer each; a parameter is a named slice at the same
 * offset in all of them, so an all-reduce, an update or a snapshot of the stage is
 * one call over one buffer. Initial values depend only on (seed, parameter name).
 * Life cycle: declare every parameter, finalize (allocates), then add slots. */
#ifndef PN_PARAMS_H
#define PN_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "layers/row_grad.h"
#include "math/matrix.h"

typedef enum pn_init_kind {
    PN_INIT_ZEROS = 0,
    PN_INIT_ONES,
    PN_INIT_UNIFORM, /* uniform in [-scale, scale] */
    PN_INIT_NORMAL   /* normal with standard deviation scale */
} pn_init_kind;

typedef struct pn_init {
    pn_init_kind kind;
    float scale;
} pn_init;

typedef struct pn_param {
    char *name;    /* "<layer>/<param>", e.g. "fc1/w" */
    int rows, cols;
    size_t offset; /* in floats, the same in values, grads and slots */
    pn_init init;
    bool decay;    /* weight decay applies (matrices yes, biases and norms no) */
    char *tie;     /* a tied copy: the name of the parameter it copies, else NULL */
    bool row_sparse;    /* its gradient is a pn_row_grad, not a slice of the grads */
    size_t grad_offset; /* in floats into the gradient buffer (row-sparse: none) */
    bool sharded;       /* its rows are split across the arena's shards (a row-sparse
                         * table with "shard": "rows"): rows counts this shard's */
    int table_rows;     /* the whole table's rows: rows, unless sharded */
} pn_param;

typedef struct pn_params pn_params;

/* An empty arena on dev. */
int pn_params_create(pn_params **out, pn_device dev);
void pn_params_free(pn_params *p);

/* Declares a parameter (before finalize); *index receives its handle. Declaring an
 * existing name again with the same shape returns the existing handle (shared
 * parameters); another shape is an error. */
int pn_params_declare(pn_params *p, const char *name, int rows, int cols, pn_init init,
                      bool decay, int *index);

/* Marks parameter index as a copy of the parameter named source (which may live in
 * another stage's arena): its values start as source's (init and seed of that name),
 * snapshots store source only and fill the copy from it (pipeline/ties.h keeps the
 * two equal while training). Before finalize. */
int pn_params_tie(pn_params *p, int index, const char *source);

/* Marks parameter index row-sparse (after finalize: nothing, the arena of a forward-
 * only network, which has no gradients to hold): its values and slots stay
 * dense slices, but it takes no room in the gradient buffer; its gradient is a
 * pn_row_grad (pn_params_row_grad) that backward passes append to and the trainer
 * merges, sums over replicas and updates row by row (docs/training.md). */
int pn_params_set_row_sparse(pn_params *p, int index);

/* Marks row-sparse parameter index sharded (before finalize): the arena keeps only
 * its rows id with id mod shards = shard (pn_params_set_shards), global row id at
 * local row id / shards (local row k is global row k x shards + shard). A
 * forward-only arena (no row-sparse gradients) ignores it. */
int pn_params_set_sharded(pn_params *p, int index);

/* This arena is shard `shard` of `shards` (a stage's replica group; before finalize;
 * default 1 of 1, where a sharded parameter is whole). */
int pn_params_set_shards(pn_params *p, int shards, int shard);
void pn_params_shards(const pn_params *p, int *shards, int *shard);

/* Whether parameter q (of this arena, or of an index unpacked from one) has its rows
 * split across more than one shard: what pulls, pushes and snapshots by owner. */
bool pn_params_split(const pn_params *p, const pn_param *q);

/* The rows shard `shard` of `shards` holds of a table of table_rows rows. */
static inline int pn_shard_row_count(int table_rows, int shards, int shard)
{
    /* in long: a table near INT_MAX rows is what sharding is for */
    return table_rows > shard ? (int)(((long)table_rows - shard + shards - 1) / shards) : 0;
}

/* Allocates values and gradients (zeroed); no declarations after this. */
int pn_params_finalize(pn_params *p);

/* Adds an optimizer slot buffer (zeroed) named e.g. "m"; *slot receives its handle.
 * Adding an existing name returns its handle. */
int pn_params_add_slot(pn_params *p, const char *name, int *slot);

/* Fills every value from its init, seeded by (seed, name), a tied copy by its
 * source's name. */
int pn_params_init_values(pn_params *p, uint64_t seed);

/* Sets every gradient to zero. */
int pn_params_zero_grads(pn_params *p);

int pn_params_count(const pn_params *p);
const pn_param *pn_params_get(const pn_params *p, int index);
/* Handle of name, or -1. */
int pn_params_find(const pn_params *p, const char *name);
pn_device pn_params_device(const pn_params *p);

/* Total floats in the arena (including alignment padding). */
size_t pn_params_size(const pn_params *p);
/* Floats in parameters proper (no padding). */
size_t pn_params_elements(const pn_params *p);

int pn_params_n_slots(const pn_params *p);
const char *pn_params_slot_name(const pn_params *p, int slot);

/* Floats in the gradient buffer (dense parameters only, with padding). */
size_t pn_params_grad_size(const pn_params *p);

/* The gradient buffer as grad_pieces equal pieces (before finalize; default 1): a
 * sharded optimizer's replicas each own one piece (pn_params_grad_piece floats,
 * aligned; the last ones padded past pn_params_grad_size), and the buffer has room
 * for all of them (pn_params_grad_room floats), so it can take a gather of the
 * pieces in place of a second arena. */
int pn_params_set_grad_pieces(pn_params *p, int pieces);
size_t pn_params_grad_piece(const pn_params *p);
size_t pn_params_grad_room(const pn_params *p);
/* This arena's own piece (shard `shard` of pn_params_set_shards) of the gradient
 * buffer, [*lo, *hi) in floats, hi at most pn_params_grad_size. */
void pn_params_grad_own(const pn_params *p, size_t *lo, size_t *hi);

/* The run [*a, *b) of the gradient slice [first, first + count) of a dense parameter
 * that lies in piece r of pieces of `piece` floats (pn_params_grad_piece): what
 * replica r of a sharded optimizer keeps slots of; false when it is empty. */
bool pn_params_piece_run(size_t first, size_t count, size_t piece, int r, size_t *a,
                         size_t *b);

/* Views of one parameter: rows x cols (a row-sparse parameter's grad: 0 x cols). */
pn_matrix pn_params_value(const pn_params *p, int index);
pn_matrix pn_params_grad(const pn_params *p, int index);
/* Widens [*first, *end) of the gradient buffer to take parameter index's slice
 * (start from SIZE_MAX, 0; a row-sparse parameter has none and changes nothing). */
void pn_params_grad_span(const pn_params *p, int index, size_t *first, size_t *end);
/* A row-sparse parameter's gradient, else NULL. */
pn_row_grad *pn_params_row_grad(const pn_params *p, int index);
/* Seals every row-sparse gradient (pn_row_grad_seal): after a micro-batch's backward. */
int pn_params_seal_row_grads(pn_params *p);
/* Forgets every row-sparse gradient's entries (after an update). */
void pn_params_reset_row_grads(pn_params *p);
pn_matrix pn_params_slot(const pn_params *p, int slot, int index);

/* The arena's index for another process: each parameter's name, shape, offset, tie
 * (the name it copies, or none), table rows, whether it is split across shards
 * (sharded with more than one shard: unpacked as .sharded), whether it is row-sparse
 * and its gradient offset, and the arena's size in floats and its gradient piece
 * (pn_params_grad_piece), packed into *out (malloc'd, *bytes long). With the arena's
 * buffers it is all a snapshot needs of a stage (of each replica's part of a sharded
 * optimizer's slots too). */
int pn_params_pack_index(const pn_params *p, char **out, size_t *bytes);

/* Reads a packed index back: *params (*count entries, names and ties malloc'd; free them
 * with pn_params_free_index), *floats, the size of the arena it describes, and
 * *grad_piece (unless NULL), its gradient piece. A malformed index is PN_ERR_INTERNAL. */
int pn_params_unpack_index(const char *in, size_t bytes, pn_param **params, int *count,
                           size_t *floats, size_t *grad_piece);
void pn_params_free_index(pn_param *params, int count);

/* Whole-arena views: 1 x pn_params_size (gradients: 1 x pn_params_grad_size). */
pn_matrix pn_params_all_values(const pn_params *p);
pn_matrix pn_params_all_grads(const pn_params *p);
pn_matrix pn_params_all_slot(const pn_params *p, int slot);

#endif
