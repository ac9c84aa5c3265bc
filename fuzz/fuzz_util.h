/* Shared pieces of the fuzz targets: reading decisions from the input bytes (an
 * exhausted input reads zeros, and zero always means "what pipenet expects"),
 * scratch files in /dev/shm, root attributes of every kind for the HDF5 targets,
 * damage after writing, and the check that a refused input left a message. */
#ifndef PN_FUZZ_UTIL_H
#define PN_FUZZ_UTIL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

/* The input as a stream of decisions. */
typedef struct fz_in {
    const uint8_t *p;
    size_t n;
} fz_in;

/* The next byte, 0 when the input is used up. */
unsigned fz_byte(fz_in *in);

/* A choice in [0, n) (0 when used up). */
unsigned fz_below(fz_in *in, unsigned n);

/* An unsigned integer of `bytes` bytes (little-endian). */
uint64_t fz_uint(fz_in *in, int bytes);

/* A value from table[0 .. n): a byte picks it (so table[0] is the default). */
long fz_pick(fz_in *in, const long *table, int n);
#define FZ_PICK(in, table) fz_pick((in), (table), (int)(sizeof(table) / sizeof *(table)))

/* Up to cap - 1 bytes (a length byte, then the bytes), NUL-terminated; NUL bytes
 * of the input become 'x'. Returns the length. */
size_t fz_text(fz_in *in, char *buf, size_t cap);

/* A path for scratch file `tag` of this process in /dev/shm (else $TMPDIR or /tmp). */
const char *fz_scratch(const char *tag, char *buf, size_t cap);

/* Silences HDF5's error printing for the target's own HDF5 calls. */
void fz_hdf5_quiet(void);

/* Writes a root attribute chosen by the input: name, type (integers of every size
 * and sign, floats, fixed and variable strings, arrays, compounds, enums, opaque,
 * scalar, null and multi-element dataspaces) and value. */
void fz_write_root_attr(fz_in *in, hid_t file);

/* Where a dataset's values lie in its file (its first chunk, or all of it). */
typedef struct fz_region {
    uint64_t offset, size;
} fz_region;

enum { FZ_MAX_REGIONS = 16 };

/* Records the region of open dataset dset's values, once they are written. */
void fz_note_values(hid_t dset, fz_region *regions, int *n);

/* Damages the closed file at path as the input says: nothing (the default), cut to
 * a fraction of its length, or one byte changed in one of the regions of values.
 * Never a byte of HDF5's own structures: that tests HDF5's decoder, whose 1.10
 * release dereferences NULL on some damaged headers (fuzz/README.md). */
void fz_damage(fz_in *in, const char *path, const fz_region *regions, int n);

/* Aborts when rc says failure but no message was recorded (a refused input must say
 * why), or when rc is neither 0 nor a pn_status. With PN_FUZZ_VERBOSE set in the
 * environment, prints every outcome (to see what an input reaches). */
void fz_check_status(int rc, const char *what);

/* Aborts when an HDF5 object (file, dataset, group, type, space, attribute) is still
 * open after the input: pipenet must close what it opens, also on every error. */
void fz_check_hdf5_closed(const char *what);

#endif
