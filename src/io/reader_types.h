/* reader_types: which element types, shapes and values the dataset reader
 * (io/reader.h) takes for a model input, and what it says when a file holds
 * something else.
 *
 * Files written from numpy hold its default dtypes (float64 features, int64
 * labels), so the reader takes any width and lets HDF5 convert: floats of any width
 * for a float input, read as float32; for ids (and lengths), integers of any width,
 * or floats whose values are whole numbers. Integers that always fit an int32
 * (int8 to int32, uint8, uint16) are read as int32 directly; the others (int64,
 * uint32, uint64, floats) are read as int64, uint64 or float64 first and narrowed
 * here, each value checked, because HDF5 clips out-of-range integers and truncates
 * fractions without an error. Every refusal names the file and the dataset, says
 * what the file holds and what to write instead. */
#ifndef PN_READER_TYPES_H
#define PN_READER_TYPES_H

#include <stdbool.h>
#include <stddef.h>

#include "io/hdf5_util.h"
#include "io/reader.h"

/* The memory type HDF5 converts field spec's values to when the dataset (name in
 * file fname) holds elem: PN_HDF5_FLOAT32, PN_HDF5_INT32, or a wide type that
 * pn_reader_narrow_ids narrows. Refuses any other element type, saying what to
 * write instead. */
int pn_reader_mem_type(const char *fname, const char *name, const pn_reader_field *spec,
                       const pn_hdf5_elem *elem, pn_hdf5_type *mem);

/* True for the 64-bit memory types, whose values pn_reader_narrow_ids narrows. */
bool pn_reader_type_is_wide(pn_hdf5_type mem);

/* The line the reader logs once when the file's values are converted ("float64
 * converted to float32 as it is read"), or "" when they already are what it reads. */
void pn_reader_type_note(const pn_hdf5_elem *elem, pn_hdf5_type mem, char *buf, size_t cap);

/* Checks that a dataset of extents dims[rank] has a shape field spec reads: float
 * inputs [N, width*seq], also [N, seq, width] for seq > 1 and [N] for one value a
 * sample; ids [N, seq], also [N] and [N, 1] for seq 1. Else an error that names
 * what the file has and the shapes to write (or the input's "size" or "seq" that
 * would fit the file). */
int pn_reader_check_shape(const char *fname, const char *name, const pn_reader_field *spec,
                          int rank, const hsize_t *dims);

/* Checks the n values of sample row as the field reads them (float32 or int32):
 * floats finite (a file of wider floats hears that values beyond float32's range
 * read as inf), ids within spec's id_limit, lengths in [1, length_max]; the message
 * names the file, the dataset, the sample and the value. */
int pn_reader_check_values(const char *fname, const char *name, const pn_reader_field *spec,
                           const pn_hdf5_elem *elem, long row, const void *values, size_t n);

/* Narrows the n values of sample row (of a field read as the wide type mem) into
 * out, refusing a value outside int32's range or, from floats, one that is not a
 * whole number: the message names the file, the dataset, the sample (and the
 * position within it when n > 1) and the value. */
int pn_reader_narrow_ids(const char *fname, const char *name, const pn_reader_field *spec,
                         pn_hdf5_type mem, long row, const void *wide, size_t n, int *out);

#endif
