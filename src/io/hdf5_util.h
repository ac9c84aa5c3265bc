/* Small HDF5 helpers shared by src/io: the dataset reader, the importers and the
 * snapshot writer. Debian's HDF5 is not a thread-safe build and the reader prefetches
 * in a thread, so every HDF5 call in src/io runs under pn_hdf5_lock(); the helpers
 * below take that (recursive) lock themselves. Their messages name the file (fname)
 * and the dataset; HDF5's own error-stack printing is silenced. */
#ifndef PN_HDF5_UTIL_H
#define PN_HDF5_UTIL_H

#include <hdf5.h>
#include <stddef.h>

enum { PN_HDF5_MAX_RANK = 4 };

/* The element types of pipenet datasets (little-endian in the file). */
typedef enum pn_hdf5_type { PN_HDF5_FLOAT32, PN_HDF5_INT32 } pn_hdf5_type;

/* One shape a dataset may have; an extent of -1 matches any length (the samples). */
typedef struct pn_hdf5_shape {
    int rank;
    long dims[PN_HDF5_MAX_RANK];
} pn_hdf5_shape;

/* Takes the process-wide HDF5 lock (recursive); a thread's first call also turns
 * off HDF5's automatic error printing. */
void pn_hdf5_lock(void);

/* Releases one level of the HDF5 lock. */
void pn_hdf5_unlock(void);

/* HDF5's own description of the error it has just reported, as ": <why>" (or ""),
 * to append to a message; clears HDF5's error stack. Call it under the lock. */
const char *pn_hdf5_reason(char buf[256]);

/* Opens an existing HDF5 file read-only with file access list fapl (H5P_DEFAULT
 * or one with a chunk cache); errors read "cannot open 'x.h5': <why>". */
int pn_hdf5_open_file(const char *path, hid_t fapl, hid_t *out);

/* Creates (or truncates) an HDF5 file for writing; errors read
 * "cannot create 'x.h5': <why>". */
int pn_hdf5_create_file(const char *path, hid_t *out);

/* Closes any HDF5 object id (file, dataset, ...) under the lock; ids < 0 are
 * ignored. Returns 0, or PN_ERR_IO naming fname when closing fails (a file's
 * buffered data could not be written). */
int pn_hdf5_close(hid_t id, const char *fname);

/* Writes a variable-length UTF-8 string attribute on the root group. */
int pn_hdf5_write_attr_string(hid_t file, const char *fname, const char *name,
                              const char *value);

/* Writes a 64-bit integer attribute on the root group. */
int pn_hdf5_write_attr_int(hid_t file, const char *fname, const char *name, long value);

/* Reads a string attribute of the root group into buf (cap bytes, NUL-terminated,
 * cut to fit). */
int pn_hdf5_read_attr_string(hid_t file, const char *fname, const char *name, char *buf,
                             size_t cap);

/* Reads an integer attribute of the root group. */
int pn_hdf5_read_attr_int(hid_t file, const char *fname, const char *name, long *value);

/* Creates dataset name of type with extents dims[rank], chunked by chunk_rows
 * samples along the first dimension; *out is the open dataset. */
int pn_hdf5_create_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           int rank, const hsize_t *dims, hsize_t chunk_rows, hid_t *out);

/* Writes samples [row0, row0 + rows) of dataset dset from data (native type,
 * row-major, rows times the elements of one sample). */
int pn_hdf5_write_rows(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                       hsize_t row0, hsize_t rows, const void *data);

/* Creates a chunked dataset (as pn_hdf5_create_dataset) and writes all of data. */
int pn_hdf5_write_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                          int rank, const hsize_t *dims, hsize_t chunk_rows, const void *data);

/* Opens dataset name of file; a missing one is an error that names the file, the
 * dataset and, when purpose is not NULL, why it is wanted ("the model's input 'y'
 * reads it"). */
int pn_hdf5_open_dataset(hid_t file, const char *fname, const char *name, const char *purpose,
                         hid_t *out);

/* Checks that dset holds type in one of shapes[n_shapes]; *which is the index of
 * the matching shape and dims (PN_HDF5_MAX_RANK entries) receives the extents. */
int pn_hdf5_check_dataset(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                          const pn_hdf5_shape *shapes, int n_shapes, int *which, hsize_t *dims);

/* "float32", "uint8", "string", "a compound type", ... for a file datatype (the
 * caller holds the lock). */
void pn_hdf5_type_name(hid_t t, char *buf, size_t cap);

#endif
