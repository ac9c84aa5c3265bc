/* The HDF5 helpers of src/io, the one module through which pipenet talks to HDF5
 * about files, attributes and datasets (the dataset reader, the importers, the
 * snapshot and model files, `pipenet inspect` and `infer`). hdf5_util.c holds the
 * lock, errors, files and datasets; hdf5_attr.c the root attributes; hdf5_list.c
 * the listings; hdf5_storage.c where a dataset's values are stored and whether they
 * are all there.
 * Debian's HDF5 is not a thread-safe build and the reader prefetches in a thread,
 * so every HDF5 call runs under pn_hdf5_lock(); the helpers take that (recursive)
 * lock themselves. Their messages name the file (fname) and the object, and end
 * with the HDF5 function that failed and HDF5's own reason; HDF5's error-stack
 * printing is silenced. */
#ifndef PN_HDF5_UTIL_H
#define PN_HDF5_UTIL_H

#include <hdf5.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PN_HDF5_MAX_RANK = 4 };

/* The element types of pipenet datasets (little-endian in the file); the 64-bit
 * ones are what the dataset reader reads wide ids as before it narrows them. */
typedef enum pn_hdf5_type {
    PN_HDF5_FLOAT32,
    PN_HDF5_INT32,
    PN_HDF5_FLOAT64,
    PN_HDF5_INT64,
    PN_HDF5_UINT64
} pn_hdf5_type;

/* What kind of number a dataset's values are (HDF5 converts within floats and
 * within integers, and between the two); OTHER: strings, compounds, enums, ... */
typedef enum pn_hdf5_kind {
    PN_HDF5_KIND_FLOAT,
    PN_HDF5_KIND_SIGNED,
    PN_HDF5_KIND_UNSIGNED,
    PN_HDF5_KIND_OTHER
} pn_hdf5_kind;

/* A dataset's element type as the file holds it. */
typedef struct pn_hdf5_elem {
    pn_hdf5_kind kind;
    size_t bytes;  /* of one value in the file */
    char name[32]; /* pn_hdf5_type_name: "float64", "uint8", "string", ... */
} pn_hdf5_elem;

/* One shape a dataset may have; an extent of -1 matches any length (the samples). */
typedef struct pn_hdf5_shape {
    int rank;
    long dims[PN_HDF5_MAX_RANK];
} pn_hdf5_shape;

/* --- the lock and errors ------------------------------------------------------------ */

/* Takes the process-wide HDF5 lock (recursive); a thread's first call also turns
 * off HDF5's automatic error printing. */
void pn_hdf5_lock(void);

/* Releases one level of the HDF5 lock. */
void pn_hdf5_unlock(void);

/* HDF5's own description of the error it has just reported (or ""), as one line
 * (HDF5's texts may hold newlines); clears HDF5's error stack. Call it under the
 * lock. */
const char *pn_hdf5_reason(char buf[256]);

/* Records "<what> (<function>: <HDF5's reason>)" as PN_ERR_IO, where function is
 * the name called in call_text ("dset = H5Dopen2(...)" gives H5Dopen2), and returns
 * PN_ERR_IO. Call it under the lock. */
int pn_hdf5_fail(const char *call_text, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Runs call (an HDF5 call that returns a negative value on failure) when rc is still
 * 0, and on failure sets rc to pn_hdf5_fail(call, fmt, ...): a chain of checked
 * calls stops at the first failure, and the cleanup after it still runs. */
#define PN_HDF5_CHECK(rc, call, ...)                                             \
    do {                                                                         \
        if ((rc) == 0 && (call) < 0) (rc) = pn_hdf5_fail(#call, __VA_ARGS__);   \
    } while (0)

/* --- files -------------------------------------------------------------------------- */

/* Opens an existing HDF5 file read-only with file access list fapl (H5P_DEFAULT
 * or one with a chunk cache); errors read "cannot open 'x.h5': <why>". */
int pn_hdf5_open_file(const char *path, hid_t fapl, hid_t *out);

/* Creates (or truncates) an HDF5 file for writing. durable (snapshots, models):
 * the HDF5 1.10 format, root attributes kept in the root group's checksummed object
 * header (up to 16), and closing the file fails while one of its objects is open. */
int pn_hdf5_create_file(const char *path, bool durable, hid_t *out);

/* Closes any HDF5 object id (file, dataset, ...) under the lock; ids < 0 are
 * ignored. Returns 0, or PN_ERR_IO naming fname when closing fails (a file's
 * buffered data could not be written). */
int pn_hdf5_close(hid_t id, const char *fname);

/* Closes id after work whose status is rc: rc < 0 is returned with its message
 * kept (a failed close after a failed write would hide the reason); else the
 * close's status. */
int pn_hdf5_close_after(hid_t id, const char *fname, int rc);

/* Reserves bytes of disk space for a file just created (fallocate), so that a full
 * disk, a quota or a file-size limit is found before anything is written: HDF5
 * cannot close a file cleanly after a failed write, and would crash at exit. A file
 * system that cannot reserve space is not an error. Close such a file with
 * pn_hdf5_close_reserved, which gives back what was not used. */
int pn_hdf5_reserve(hid_t file, const char *fname, uint64_t bytes);

/* pn_hdf5_close_after for a file given pn_hdf5_reserve: then cuts the file (fname
 * is its path) to the bytes HDF5 used. */
int pn_hdf5_close_reserved(hid_t file, const char *fname, int rc);

/* --- root attributes (hdf5_attr.c) -------------------------------------------------- */

/* 1 when the root group has attribute name, 0 when not, or a negative status. */
int pn_hdf5_attr_exists(hid_t file, const char *fname, const char *name);

/* Writes a UTF-8 string attribute on the root group (replacing one of that name):
 * fixed_length stores it in the attribute itself (covered by the object header's
 * checksum), otherwise as a variable-length string in HDF5's global heap. */
int pn_hdf5_write_attr_string(hid_t file, const char *fname, const char *name,
                              const char *value, bool fixed_length);

/* Writes a signed 64-bit integer attribute on the root group. */
int pn_hdf5_write_attr_int(hid_t file, const char *fname, const char *name, long value);

/* Writes an unsigned integer attribute of 32 or 64 bits on the root group. */
int pn_hdf5_write_attr_uint(hid_t file, const char *fname, const char *name, uint64_t value,
                            int bits);

/* Writes a float64 attribute on the root group. */
int pn_hdf5_write_attr_double(hid_t file, const char *fname, const char *name, double value);

/* Writes an int64 attribute on object (a group or dataset path; "." is the root):
 * n values, or one scalar value when n is 0. */
int pn_hdf5_write_object_attr_int64(hid_t file, const char *fname, const char *object,
                                    const char *name, const int64_t *values, int n);

/* Reads a string attribute (fixed- or variable-length) of any length into *out
 * (malloc'd); a missing attribute is PN_ERR_INVALID "no attribute 'x'". */
int pn_hdf5_read_attr_text(hid_t file, const char *fname, const char *name, char **out);

/* The same into buf (cap bytes, NUL-terminated, cut to fit). */
int pn_hdf5_read_attr_string(hid_t file, const char *fname, const char *name, char *buf,
                             size_t cap);

/* Reads an integer attribute as a long. */
int pn_hdf5_read_attr_int(hid_t file, const char *fname, const char *name, long *value);

/* Reads an integer attribute that is unsigned, or signed and not negative. */
int pn_hdf5_read_attr_uint(hid_t file, const char *fname, const char *name, uint64_t *value);

/* Calls fn for every root attribute in name order with its type ("int64", "string",
 * ...) and its value shown in one line (a number, a quoted first line of a string,
 * or the shape of an array); a non-zero return of fn stops the walk. */
typedef int (*pn_hdf5_attr_fn)(void *ctx, const char *name, const char *type,
                               const char *value);
int pn_hdf5_list_attrs(hid_t file, const char *fname, pn_hdf5_attr_fn fn, void *ctx);
/* The same for the attributes of object (a group or dataset path, "/" the root). */
int pn_hdf5_list_object_attrs(hid_t file, const char *fname, const char *object,
                              pn_hdf5_attr_fn fn, void *ctx);

/* --- datasets ----------------------------------------------------------------------- */

/* Creates group path (its parents too) in file. */
int pn_hdf5_create_group(hid_t file, const char *fname, const char *path);

/* Creates dataset name of type with extents dims[rank], chunked by chunk_rows
 * samples along the first dimension; *out is the open dataset. Groups on the way
 * are created. */
int pn_hdf5_create_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           int rank, const hsize_t *dims, hsize_t chunk_rows, hid_t *out);

/* Writes samples [row0, row0 + rows) of dataset dset from data (native type,
 * row-major, rows times the elements of one sample). */
int pn_hdf5_write_rows(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                       hsize_t row0, hsize_t rows, const void *data);

/* Creates a one-dimensional dataset name of type that starts empty and grows without
 * limit (chunks of chunk values): for writers that do not know its length before
 * the end (the sparse importers, which stream). */
int pn_hdf5_create_growing(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                           hsize_t chunk, hid_t *out);

/* Appends n values of data (native type) to growing dataset dset at its end, *length
 * values so far; *length grows by n. */
int pn_hdf5_append(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                   hsize_t *length, hsize_t n, const void *data);

/* Creates a chunked dataset (as pn_hdf5_create_dataset) and writes all of data. */
int pn_hdf5_write_dataset(hid_t file, const char *fname, const char *name, pn_hdf5_type type,
                          int rank, const hsize_t *dims, hsize_t chunk_rows, const void *data);

/* Creates float32 dataset name [dims] in chunks of chunk[rank], each with HDF5's
 * fletcher32 checksum, and writes data (dense, native floats); with data NULL it is
 * left unwritten. */
int pn_hdf5_write_checksummed(hid_t file, const char *fname, const char *name, int rank,
                              const hsize_t *dims, const hsize_t *chunk, const float *data);

/* Reads rows first, first + step, ... (count of them, whole rows) of the 2-D float32
 * dataset name into out (count rows, dense): one owner's rows of a table split by row
 * id mod step; a failure is a checksum mismatch or damaged data (HDF5's reason). */
int pn_hdf5_read_strided(hid_t file, const char *fname, const char *name, hsize_t first,
                         hsize_t step, hsize_t count, float *out);

/* --- virtual datasets over the parts of a snapshot (hdf5_virtual.c) ------------------ */

/* One mapping of a virtual dataset: rows first, first + step, ... (count of them,
 * whole rows) take all of dataset `dataset` of file `file` (a bare name, found beside
 * the virtual dataset's file); a 1-D dataset maps whole (first 0, step 1, count 1).
 * With n > 0 instead: values at .. at + n - 1 in row-major order take all of the 1-D
 * dataset [n] (a run cut mid-row maps as up to three rectangles). */
typedef struct pn_hdf5_source {
    const char *file;
    const char *dataset;
    hsize_t first, step, count;
    hsize_t at, n;
} pn_hdf5_source;

/* Creates float32 virtual dataset name [dims] (rank 1 or 2; groups on the way too)
 * over sources[n], fill value NaN, so that a value no source gives shows as one. */
int pn_hdf5_write_virtual(hid_t file, const char *fname, const char *name, int rank,
                          const hsize_t *dims, const pn_hdf5_source *sources, int n);

/* Reads values at .. at + n - 1 in row-major order of the float32 dataset name (rank 1
 * or 2, virtual or not) into out (n floats): a replica's run of a sharded optimizer's
 * slot, which may start and end mid-row. */
int pn_hdf5_read_run(hid_t file, const char *fname, const char *name, hsize_t at, hsize_t n,
                     float *out);

/* Mapping i of a virtual dataset's creation list dcpl: its source file name (file)
 * or dataset name, malloc'd; NULL when HDF5 cannot say. Call it under the lock. */
char *pn_hdf5_virtual_name(hid_t dcpl, size_t i, bool file);

/* Checks a virtual dataset of a snapshot's index (fname): every source a bare file
 * name starting with prefix and ending in ".h5", beside fname, its dataset of the
 * same name, stored in its file (chunked: neither virtual nor external); then that
 * every value is there (pn_hdf5_check_storage). Anything else is refused: a hostile
 * index pointing at other files. */
int pn_hdf5_check_parts(hid_t dset, const char *fname, const char *name, const char *prefix);

/* True when file has a link (dataset or group) at name; false when not, also when a
 * group on the way is missing. */
bool pn_hdf5_link_exists(hid_t file, const char *name);

/* Opens dataset name of file; a missing one is an error that names the file, the
 * dataset and, when purpose is not NULL, why it is wanted ("the model's input 'y'
 * reads it"). */
int pn_hdf5_open_dataset(hid_t file, const char *fname, const char *name, const char *purpose,
                         hid_t *out);

/* Checks that dset holds type in one of shapes[n_shapes]; *which is the index of
 * the matching shape and dims (PN_HDF5_MAX_RANK entries) receives the extents. Then
 * that its values are all there (pn_hdf5_check_storage). */
int pn_hdf5_check_dataset(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                          const pn_hdf5_shape *shapes, int n_shapes, int *which, hsize_t *dims);

/* The index of the first of shapes[n_shapes] that extents dims[rank] have, or -1. */
int pn_hdf5_match_shape(const pn_hdf5_shape *shapes, int n_shapes, int rank,
                        const hsize_t *dims);

/* The element type of dset. */
int pn_hdf5_dataset_elem(hid_t dset, const char *fname, const char *name, pn_hdf5_elem *out);

/* The extents of dset: *rank (0 for a scalar) and dims[0 .. rank) (dims holds
 * H5S_MAX_RANK entries). */
int pn_hdf5_dataset_extent(hid_t dset, const char *fname, const char *name, int *rank,
                           hsize_t *dims);

/* HDF5's native memory type for type (H5T_NATIVE_FLOAT, ...). */
hid_t pn_hdf5_mem_type(pn_hdf5_type type);

/* Reads all of dset into out (native type; HDF5 converts the file's values to it);
 * a failure is a checksum mismatch (fletcher32) or damaged data, and says so. */
int pn_hdf5_read_all(hid_t dset, const char *fname, const char *name, pn_hdf5_type type,
                     void *out);

/* The hash-table slots of a chunk cache of cache_bytes for chunks of chunk_bytes:
 * a prime about 100 times the chunks it holds (HDF5's advice), but at most about
 * 2^20 (an 8 MiB table), however small the chunks. */
size_t pn_hdf5_chunk_cache_slots(size_t cache_bytes, size_t chunk_bytes);

/* A compressed dataset's chunks are decompressed whole: reopens *dset (name in file,
 * of rank dims and elem_bytes a value as the file holds it) with a chunk cache that
 * holds the whole dataset, up to cache_max bytes, after checking that this HDF5 has
 * its filters (a missing one is an error naming it and saying what to write).
 * Unfiltered datasets are left as they are, so HDF5 reads only the rows asked for. */
int pn_hdf5_cache_filtered(hid_t file, const char *fname, const char *name, int rank,
                           const hsize_t *dims, size_t elem_bytes, size_t cache_max,
                           hid_t *dset);

/* "float32", "uint8", "string", "a compound type", ... for a file datatype (the
 * caller holds the lock). */
void pn_hdf5_type_name(hid_t t, char *buf, size_t cap);

/* --- where values are stored (hdf5_storage.c) ---------------------------------------- */

/* How a dataset stores its values: in its file (contiguous, chunked, compact), or
 * elsewhere: a virtual dataset (VDS) maps regions of datasets of other files (or of
 * its own), an external one (H5Pset_external) lies in raw files beside it. */
typedef enum pn_hdf5_storage {
    PN_HDF5_CONTIGUOUS,
    PN_HDF5_CHUNKED,
    PN_HDF5_COMPACT,
    PN_HDF5_VIRTUAL,
    PN_HDF5_EXTERNAL,
    PN_HDF5_STORAGE_UNKNOWN
} pn_hdf5_storage;

/* How dset stores its values (PN_HDF5_STORAGE_UNKNOWN when HDF5 cannot say). */
pn_hdf5_storage pn_hdf5_storage_kind(hid_t dset);

/* "contiguous", "chunked", "compact", "virtual", "external". */
const char *pn_hdf5_storage_name(pn_hdf5_storage kind);

/* Where dset's values lie outside its file, in one line into buf (cut with "..."):
 * a virtual dataset's sources ("a.h5:/x, b.h5:/x", "." for its own file), an
 * external one's raw files; "" for any other. */
void pn_hdf5_storage_sources(hid_t dset, char *buf, size_t cap);

/* Checks that every value of dset (dataset name of the file at path fname) is
 * stored where HDF5 reads it from. HDF5 reads these gaps as the fill value, without
 * an error, and they are refused: rows never written (storage never allocated); in
 * a virtual dataset, values mapped to no source, or to a source file HDF5 would not
 * find (searched as HDF5 does), a source dataset missing or smaller than the region
 * mapped, or a source not whole itself (checked alike, 4 levels deep at most); in
 * an external one, a raw file missing, not a regular file, or shorter than the
 * bytes the dataset takes from it. Unlimited mappings and printf-style source names
 * are refused as unchecked. The message names fname, the dataset and the source. */
int pn_hdf5_check_storage(hid_t dset, const char *fname, const char *name);

/* Refuses a virtual or external dataset: for files that must hold every value
 * themselves, under their checksums (snapshots and models). */
int pn_hdf5_check_self_contained(hid_t dset, const char *fname, const char *name);

/* --- listings (hdf5_list.c) --------------------------------------------------------- */

/* Calls fn with the name of every link of group path, in name order; a non-zero
 * return of fn stops the walk and is returned. */
typedef int (*pn_hdf5_name_fn)(void *ctx, const char *name);
int pn_hdf5_list_group(hid_t file, const char *fname, const char *path, pn_hdf5_name_fn fn,
                       void *ctx);

/* What `pipenet inspect` shows of one dataset. */
typedef struct pn_hdf5_dataset_info {
    const char *name;                 /* path below the root, without the leading '/' */
    char type[32];                    /* "float32", "uint8", "string", ... */
    int rank;                         /* -1 when the shape cannot be read */
    hsize_t dims[PN_HDF5_MAX_RANK + 4];
    int chunk_rank;                   /* 0: not chunked */
    hsize_t chunk[PN_HDF5_MAX_RANK + 4];
    bool checksum;                    /* fletcher32 */
    bool unreadable;                  /* the object could not be opened */
    pn_hdf5_storage storage;
    char sources[256];                /* virtual or external: pn_hdf5_storage_sources */
    char missing[512];                /* virtual or external: why its values are not all
                                       * there (pn_hdf5_check_storage), "" when they are */
} pn_hdf5_dataset_info;

/* Calls fn for every dataset of the file, groups walked recursively in name order. */
typedef int (*pn_hdf5_dataset_fn)(void *ctx, const pn_hdf5_dataset_info *info);
int pn_hdf5_list_datasets(hid_t file, const char *fname, pn_hdf5_dataset_fn fn, void *ctx);

#endif
