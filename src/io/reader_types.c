/* What the dataset reader takes for a model input and what its refusals say
 * (reader_types.h). */
#include "io/reader_types.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"

/* "input 'x'", or "the model" for a field no input is named for. */
static const char *input_label(const pn_reader_field *spec, char *buf, size_t cap)
{
    if (!spec->input) return "the model";
    snprintf(buf, cap, "input '%s'", spec->input);
    return buf;
}

/* --- element types ------------------------------------------------------------------ */

bool pn_reader_type_is_wide(pn_hdf5_type mem)
{
    return mem == PN_HDF5_INT64 || mem == PN_HDF5_UINT64 || mem == PN_HDF5_FLOAT64;
}

/* The numpy line that turns what the file holds into what an ids field reads. */
static const char *ids_fix(const pn_hdf5_elem *elem)
{
    if (!strcmp(elem->name, "string"))
        return "numpy: class names become ids with np.unique(a, return_inverse=True)[1]";
    if (!strcmp(elem->name, "an enum"))
        return "numpy: a.astype('int32'); h5py stores numpy's bool as an enum";
    if (!strcmp(elem->name, "a compound type"))
        return "numpy: each field of a structured array, a['name'], as a dataset of its own";
    return "numpy: a.astype('int32')";
}

/* The refusal of an element type that field spec cannot read, with what to write. */
static int type_error(const char *fname, const char *name, const pn_reader_field *spec,
                      const pn_hdf5_elem *elem)
{
    char who[PN_NAME_MAX + 16];
    const char *input = input_label(spec, who, sizeof who);
    const char *holds = !strcmp(elem->name, "string") ? "strings" : elem->name;
    if (spec->shape.ids)
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %s, but %s reads %s: "
                            "write integers (%s)",
                            fname, name, holds, input,
                            spec->length_max > 0 ? "lengths, integers" : "integer ids",
                            ids_fix(elem));
    if (elem->kind == PN_HDF5_KIND_OTHER)
        return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %s, but %s reads floats: "
                            "write floats (numpy: a.astype('float32'))",
                            fname, name, holds, input);
    return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s' holds %s, but %s reads floats: "
                        "if they are class ids, write \"ids\": true on %s in place of its "
                        "\"size\"; if they are values, write floats (numpy: a.astype('float32'))",
                        fname, name, holds, input, input);
}

int pn_reader_mem_type(const char *fname, const char *name, const pn_reader_field *spec,
                       const pn_hdf5_elem *elem, pn_hdf5_type *mem)
{
    if (!spec->shape.ids && elem->kind == PN_HDF5_KIND_FLOAT) {
        *mem = PN_HDF5_FLOAT32; /* HDF5 rounds wider floats, widens narrower ones */
        return PN_OK;
    }
    if (!spec->shape.ids || elem->kind == PN_HDF5_KIND_OTHER)
        return type_error(fname, name, spec, elem);
    /* int32 takes every value of these exactly; the others are checked as they narrow */
    if (elem->kind == PN_HDF5_KIND_SIGNED)
        *mem = elem->bytes <= 4 ? PN_HDF5_INT32 : PN_HDF5_INT64;
    else if (elem->kind == PN_HDF5_KIND_UNSIGNED)
        *mem = elem->bytes <= 2 ? PN_HDF5_INT32 : PN_HDF5_UINT64;
    else
        *mem = PN_HDF5_FLOAT64;
    return PN_OK;
}

void pn_reader_type_note(const pn_hdf5_elem *elem, pn_hdf5_type mem, char *buf, size_t cap)
{
    const char *to = mem == PN_HDF5_FLOAT32 ? "float32" : "int32";
    const char *checked = mem == PN_HDF5_FLOAT64 ? " (each value must be a whole number)"
                          : pn_reader_type_is_wide(mem) ? " (each value must fit an int32)"
                                                        : "";
    if (!strcmp(elem->name, to))
        buf[0] = '\0';
    else
        snprintf(buf, cap, "%s converted to %s as it is read%s", elem->name, to, checked);
}

/* --- shapes --------------------------------------------------------------------------- */

/* The shapes field spec may have in the file, each of the samples' extent -1 (into
 * shapes[2]); returns how many: float inputs [N, width*seq], also [N, seq, width]
 * for seq > 1 and [N] for one value a sample; ids [N, seq], also [N] and [N, 1]
 * for seq 1. */
static int accepted_shapes(const pn_reader_field *spec, pn_hdf5_shape *shapes)
{
    pn_shape s = spec->shape;
    if (s.ids) {
        if (s.seq > 1) {
            shapes[0] = (pn_hdf5_shape){2, {-1, s.seq}};
            return 1;
        }
        shapes[0] = (pn_hdf5_shape){1, {-1}};
        shapes[1] = (pn_hdf5_shape){2, {-1, 1}};
        return 2;
    }
    if (s.seq == 1 && s.width == 1) { /* [N]: numpy's shape of a regression target */
        shapes[0] = (pn_hdf5_shape){1, {-1}};
        shapes[1] = (pn_hdf5_shape){2, {-1, 1}};
        return 2;
    }
    shapes[0] = (pn_hdf5_shape){2, {-1, (long)s.width * s.seq}};
    if (s.seq == 1) return 1;
    shapes[1] = (pn_hdf5_shape){3, {-1, s.seq, s.width}};
    return 2;
}

/* Appends printf-style text to buf (cap bytes) at *len, cut to fit. */
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    if (*len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
    va_end(ap);
    *len = n < 0 ? *len : *len + (size_t)n >= cap ? cap - 1 : *len + (size_t)n;
}

/* "[331, 2]": the extents of a shape; a sample extent (-1) shows as samples. */
static void add_shape(char *buf, size_t cap, size_t *len, int rank, const long *dims,
                      const char *samples)
{
    add(buf, cap, len, "[");
    for (int k = 0; k < rank; k++)
        if (dims[k] < 0)
            add(buf, cap, len, "%s%s", k ? ", " : "", samples);
        else
            add(buf, cap, len, "%s%ld", k ? ", " : "", dims[k]);
    add(buf, cap, len, "]");
}

/* "one id a sample", "6 values a sample", "3 positions of 5 values a sample". */
static void add_sample(char *buf, size_t cap, size_t *len, const pn_reader_field *spec)
{
    pn_shape s = spec->shape;
    if (spec->length_max > 0)
        add(buf, cap, len, "one length a sample");
    else if (s.ids)
        s.seq > 1 ? add(buf, cap, len, "%d ids a sample", s.seq)
                  : add(buf, cap, len, "one id a sample");
    else if (s.seq > 1)
        add(buf, cap, len, "%d positions of %d values a sample", s.seq, s.width);
    else
        s.width > 1 ? add(buf, cap, len, "%d values a sample", s.width)
                    : add(buf, cap, len, "one value a sample");
}

/* What the model could say instead to fit the file's shape, when it is plain. */
static void add_model_fix(char *buf, size_t cap, size_t *len, const pn_reader_field *spec,
                          int rank, const hsize_t *dims)
{
    if (!spec->input || spec->length_max > 0 || rank < 1) return;
    pn_shape s = spec->shape;
    unsigned long long per = 1; /* values a sample in the file */
    for (int k = 1; k < rank && per <= (1u << 30); k++) per *= dims[k];
    bool small = per >= 1 && per <= (1u << 30);
    if (!s.ids && s.seq == 1 && rank >= 2 && small) {
        bool fits = per == (unsigned long long)s.width; /* once flattened */
        if (!fits) add(buf, cap, len, ", or set \"size\": %llu on input '%s'", per, spec->input);
        if (rank >= 3 && !fits)
            add(buf, cap, len, " and write [%llu, %llu] (numpy: a.reshape(len(a), -1))",
                (unsigned long long)dims[0], per);
        else if (rank >= 3)
            add(buf, cap, len, " (numpy: a.reshape(len(a), -1))");
    } else if (s.ids && s.seq == 1 && rank == 2 && small && dims[1] > 1) {
        add(buf, cap, len, ", or set \"seq\": %llu on input '%s'", (unsigned long long)dims[1],
            spec->input);
    } else if (s.ids && s.seq > 1 && rank == 1) {
        add(buf, cap, len, ", or leave \"seq\" out of input '%s'", spec->input);
    }
}

int pn_reader_check_shape(const char *fname, const char *name, const pn_reader_field *spec,
                          int rank, const hsize_t *dims)
{
    pn_hdf5_shape shapes[2];
    int n = accepted_shapes(spec, shapes);
    if (pn_hdf5_match_shape(shapes, n, rank, dims) >= 0) return PN_OK;
    char msg[1024], who[PN_NAME_MAX + 16], samples[24] = "N"; /* N: a scalar has none */
    size_t len = 0;
    long found[H5S_MAX_RANK];
    for (int k = 0; k < rank; k++) found[k] = (long)dims[k];
    if (rank >= 1) snprintf(samples, sizeof samples, "%llu", (unsigned long long)dims[0]);
    add(msg, sizeof msg, &len, "shape ");
    add_shape(msg, sizeof msg, &len, rank, found, samples);
    add(msg, sizeof msg, &len, " does not fit %s (", input_label(spec, who, sizeof who));
    add_sample(msg, sizeof msg, &len, spec);
    add(msg, sizeof msg, &len, "): write ");
    for (int s = 0; s < n; s++) {
        if (s) add(msg, sizeof msg, &len, " or ");
        add_shape(msg, sizeof msg, &len, shapes[s].rank, shapes[s].dims, samples);
    }
    add_model_fix(msg, sizeof msg, &len, spec, rank, dims);
    return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s': %s", fname, name, msg);
}

/* --- values ---------------------------------------------------------------------------- */

int pn_reader_check_values(const char *fname, const char *name, const pn_reader_field *spec,
                           const pn_hdf5_elem *elem, long row, const void *values, size_t n)
{
    const char *user = spec->id_user ? spec->id_user : "?";
    for (size_t k = 0; k < n; k++) {
        if (spec->shape.ids) {
            int id = ((const int *)values)[k];
            if (spec->length_max > 0 && (id < 1 || id > spec->length_max))
                return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s', sample %ld: length %d is "
                                    "outside [1, %d] (input '%s')",
                                    fname, name, row, id, spec->length_max, user);
            if (spec->id_limit > 0 && (id < 0 || id >= spec->id_limit))
                return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s', sample %ld: id %d is "
                                    "outside [0, %d) (layer '%s')",
                                    fname, name, row, id, spec->id_limit, user);
        } else if (!isfinite(((const float *)values)[k])) {
            bool wide = elem->bytes > 4 && isinf(((const float *)values)[k]);
            return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s', sample %ld: value %zu of %zu "
                                "is %g (data must be finite%s%s%s)",
                                fname, name, row, k, n, ((const float *)values)[k],
                                wide ? "; " : "", wide ? elem->name : "",
                                wide ? " values beyond float32's range, 3.4e38, read as inf" : "");
        }
    }
    return PN_OK;
}

/* The refusal of value (shown) at position k of sample row: a fraction where an id
 * is expected (fraction), else a value outside int32's range. */
static int bad_id(const char *fname, const char *name, const pn_reader_field *spec, long row,
                  size_t k, size_t n, const char *shown, bool fraction)
{
    char at[48] = "", who[PN_NAME_MAX + 16];
    if (n > 1) snprintf(at, sizeof at, ", position %zu", k);
    bool lengths = spec->length_max > 0;
    const char *hint = !fraction || lengths || !spec->input
                           ? ""
                           : "; a regression target takes a \"size\" in place of \"ids\": true";
    return pn_error_set(PN_ERR_INVALID, "%s: dataset '/%s', sample %ld%s: %s %s %s (%s%s)",
                        fname, name, row, at, lengths ? "length" : "id", shown,
                        fraction ? "is not a whole number"
                                 : "is outside int32's range, [-2147483648, 2147483647]",
                        input_label(spec, who, sizeof who), hint);
}

int pn_reader_narrow_ids(const char *fname, const char *name, const pn_reader_field *spec,
                         pn_hdf5_type mem, long row, const void *wide, size_t n, int *out)
{
    char shown[48];
    for (size_t k = 0; k < n; k++) {
        if (mem == PN_HDF5_INT64) {
            int64_t v = ((const int64_t *)wide)[k];
            if (v >= INT32_MIN && v <= INT32_MAX) {
                out[k] = (int)v;
                continue;
            }
            snprintf(shown, sizeof shown, "%" PRId64, v);
            return bad_id(fname, name, spec, row, k, n, shown, false);
        }
        if (mem == PN_HDF5_UINT64) {
            uint64_t v = ((const uint64_t *)wide)[k];
            if (v <= INT32_MAX) {
                out[k] = (int)v;
                continue;
            }
            snprintf(shown, sizeof shown, "%" PRIu64, v);
            return bad_id(fname, name, spec, row, k, n, shown, false);
        }
        double v = ((const double *)wide)[k];
        bool whole = v == floor(v); /* false for NaN; infinities fail the range */
        if (whole && v >= INT32_MIN && v <= INT32_MAX) {
            out[k] = (int)v;
            continue;
        }
        snprintf(shown, sizeof shown, "%.15g", v);
        return bad_id(fname, name, spec, row, k, n, shown, !whole);
    }
    return PN_OK;
}
