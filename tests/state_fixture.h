/* Train states for the snapshot tests: test_snapshot.c (the file format) and
 * test_snapshot_dir.c (writing, finding and pruning snapshots in a directory). */
#ifndef PN_STATE_FIXTURE_H
#define PN_STATE_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "io/train_state.h"
#include "testutil.h"

extern const char *const sf_slot_names[2];      /* adam_m, adam_v */
extern const char sf_config_text[];             /* a model's JSON, UTF-8 */
extern const uint64_t sf_big_seed;              /* above 2^32 and 2^63 */

/* Adds parameter name (index p, which picks its values) of rows x cols to st, with
 * slot values when st has slots. */
void sf_add_param(pn_train_state *st, int p, const char *name, int rows, int cols);

/* Three parameters (added unsorted; one a 1 x n bias), counters, seed, config and,
 * for a snapshot, two slots; w_rows sets the size of fc1/w. */
pn_train_state *sf_make_state(const char *format, int w_rows);

/* got equals want to the bit, with got's parameters in sorted order. */
void sf_assert_same_state(const pn_train_state *got, const pn_train_state *want);

/* pn_snapshot_write, asserted to succeed. */
void sf_write_state(const char *path, const pn_train_state *st);

/* Flips one bit in the middle of the first chunk of dataset name of path. */
void sf_flip_chunk_bit(const char *path, const char *name);

#endif
