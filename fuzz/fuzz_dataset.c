/* Fuzz target: dataset files as `train`, `infer` and `inspect` read them. The input
 * chooses what the model expects and what the file holds (names, dtypes, ranks,
 * extents, layouts, values in other files (a VDS's source, an external raw file,
 * either missing or cut short), rows written or only declared, bad values, root
 * attributes),
 * which is written with the HDF5 API to /dev/shm and handed to the reader: bytes of
 * HDF5 itself are left alone, since flipping them tests HDF5 (fuzz/README.md). */
#include <hdf5.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/hdf5_util.h"
#include "io/reader.h"

/* Where the values of this input's datasets lie, for fz_damage. */
static fz_region regions[FZ_MAX_REGIONS];
static int n_regions;

enum { MAX_FIELDS = 3, NAME_CAP = 320 };

/* The reader's expectation and how the file answers it, for one field. */
typedef struct field_plan {
    char name[NAME_CAP];
    pn_reader_field spec;
} field_plan;

static void choose_name(fz_in *in, int i, char *name)
{
    static const char *const forms[] = {"f%d", "/f%d", "g/f%d", "f0", "", "nothing%d",
                                        "g", "f%d/", "//f%d", ".", "f%d\xff"};
    unsigned k = fz_below(in, sizeof forms / sizeof *forms + 2);
    if (k < sizeof forms / sizeof *forms) {
        snprintf(name, NAME_CAP, forms[k], i);
    } else if (k == sizeof forms / sizeof *forms) {
        memset(name, 'n', 300); /* a long name */
        snprintf(name + 300, NAME_CAP - 300, "%d", i);
    } else {
        fz_text(in, name, NAME_CAP);
    }
}

static void choose_spec(fz_in *in, int i, field_plan *f)
{
    static const long seqs[] = {1, 2, 3, 0, -1, 1 << 12, INT_MAX};
    static const long widths[] = {4, 1, 7, 0, -3, 1 << 12, INT_MAX};
    static const long limits[] = {3, 0, 1, INT_MAX, -1, 100};
    choose_name(in, i, f->name);
    f->spec.dataset = f->name;
    f->spec.shape.ids = (i == 1) ^ (fz_below(in, 4) == 3);
    f->spec.shape.seq = (int)FZ_PICK(in, seqs);
    f->spec.shape.width = f->spec.shape.ids ? 0 : (int)FZ_PICK(in, widths);
    f->spec.input = fz_below(in, 4) == 3 ? NULL : "x";
    f->spec.id_limit = f->spec.shape.ids ? (int)FZ_PICK(in, limits) : 0;
    f->spec.id_user = fz_below(in, 4) == 3 ? NULL : "emb";
}

/* The file type for a field: what it expects, or one of many others. */
static hid_t choose_type(fz_in *in, bool ids)
{
    hid_t t;
    switch (fz_below(in, 19)) {
    case 0: return H5Tcopy(ids ? H5T_STD_I32LE : H5T_IEEE_F32LE);
    case 1: return H5Tcopy(ids ? H5T_IEEE_F32LE : H5T_STD_I32LE);
    case 2: return H5Tcopy(ids ? H5T_STD_I32BE : H5T_IEEE_F32BE);
    case 3: return H5Tcopy(H5T_IEEE_F64LE);
    case 4: return H5Tcopy(H5T_STD_I64LE);
    case 5: return H5Tcopy(H5T_STD_U32LE);
    case 6: return H5Tcopy(H5T_STD_I16LE);
    case 7: return H5Tcopy(H5T_STD_U8LE);
    case 8: t = H5Tcopy(H5T_C_S1), H5Tset_size(t, 4); return t;
    case 9: t = H5Tcopy(H5T_C_S1), H5Tset_size(t, H5T_VARIABLE); return t;
    case 10: t = H5Tcreate(H5T_COMPOUND, 4), H5Tinsert(t, "v", 0, H5T_STD_I32LE); return t;
    case 11: t = H5Tenum_create(H5T_STD_I32LE); {
            int v = 0;
            H5Tenum_insert(t, "a", &v);
        }
        return t;
    case 12: return H5Tcreate(H5T_OPAQUE, 4);
    case 13: return H5Tcopy(H5T_STD_B32LE);
    case 14: t = H5Tcopy(H5T_STD_I32LE), H5Tset_precision(t, 8); return t;
    case 15: return H5Tcopy(H5T_STD_U64LE);
    case 16: /* numpy's float16 as h5py writes it (HDF5 1.10 has no half type) */
        t = H5Tcopy(H5T_IEEE_F32LE), H5Tset_fields(t, 15, 10, 5, 0, 10), H5Tset_size(t, 2);
        H5Tset_ebias(t, 15);
        return t;
    case 17: return H5Tcopy(H5T_NATIVE_LDOUBLE);
    default: {
        hsize_t one = 1;
        return H5Tarray_create2(ids ? H5T_STD_I32LE : H5T_IEEE_F32LE, 1, &one);
    }
    }
}

/* Extents: the shape the reader accepts for spec (with rows samples), or another. */
static int choose_dims(fz_in *in, const pn_reader_field *spec, hsize_t rows, hsize_t *dims)
{
    static const long odd_rows[] = {0, 1, 2, 5, 1L << 31, 1L << 40, 1L << 62};
    int seq = spec->shape.seq > 0 ? spec->shape.seq : 1;
    int width = spec->shape.width > 0 ? spec->shape.width : 1;
    int rank;
    dims[0] = rows;
    switch (fz_below(in, 10)) {
    case 0: /* the first accepted shape */
        if (spec->shape.ids && seq == 1) return 1;
        dims[1] = spec->shape.ids ? (hsize_t)seq : (hsize_t)width * (hsize_t)seq;
        return 2;
    case 1: /* the second: [N, 1] ids, [N, seq, width] floats */
        dims[1] = spec->shape.ids ? 1 : (hsize_t)seq;
        dims[2] = (hsize_t)width;
        return spec->shape.ids ? 2 : 3;
    case 2: return 0; /* scalar */
    case 3: /* declared rows far from the written ones */
        dims[0] = (hsize_t)FZ_PICK(in, odd_rows);
        dims[1] = spec->shape.ids ? (hsize_t)seq : (hsize_t)width * (hsize_t)seq;
        return spec->shape.ids && seq == 1 ? 1 : 2;
    default: /* any rank up to 6, small extents */
        rank = (int)fz_below(in, 7);
        for (int k = 0; k < rank; k++) dims[k] = k ? fz_below(in, 9) : rows;
        return rank;
    }
}

static hsize_t elements(int rank, const hsize_t *dims)
{
    hsize_t n = 1;
    for (int k = 0; k < rank; k++) n *= dims[k];
    return n;
}

/* Creation properties: contiguous, compact, chunked (with filters), fill value. */
static hid_t choose_layout(fz_in *in, int rank, const hsize_t *dims, hid_t type, bool *chunked)
{
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[8];
    *chunked = false;
    unsigned kind = fz_below(in, 7);
    if (rank > 0 && kind <= 4) {
        for (int k = 0; k < rank; k++) {
            chunk[k] = dims[k] ? dims[k] : 1;
            if (k == 0 && chunk[0] > 1) chunk[0] = 1 + fz_below(in, 8);
            if (chunk[k] > 64) chunk[k] = 64;
        }
        *chunked = H5Pset_chunk(dcpl, rank, chunk) >= 0;
        if (kind == 1) H5Pset_deflate(dcpl, 1 + fz_below(in, 9));
        if (kind == 2) H5Pset_shuffle(dcpl), H5Pset_fletcher32(dcpl);
        if (kind == 3) H5Pset_filter(dcpl, 32000 + fz_below(in, 8), H5Z_FLAG_OPTIONAL, 0, NULL);
        if (kind == 4) H5Pset_nbit(dcpl);
    } else if (kind == 5 && elements(rank, dims) <= 256) {
        H5Pset_layout(dcpl, H5D_COMPACT);
    }
    if (fz_below(in, 4) == 3 && H5Tget_class(type) == H5T_FLOAT) { /* unwritten rows: NaN */
        float nan = NAN;
        H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &nan);
    } else if (fz_below(in, 4) == 3 && H5Tget_class(type) == H5T_INTEGER) {
        int bad = -7;
        H5Pset_fill_value(dcpl, H5T_NATIVE_INT, &bad);
    }
    if (fz_below(in, 2)) H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER);
    return dcpl;
}

/* Where one field's values may lie outside the file: a VDS's source file or an
 * external raw file (a scratch file of this input), and how the input spoils it. */
enum { IN_FILE, VIRTUAL, EXTERNAL, VIRTUAL_GONE, VIRTUAL_SHORT, EXTERNAL_SHORT, N_WHERE };
static char elsewhere[256];
static unsigned elsewhere_kind; /* IN_FILE: no field uses it */
/* A VDS's source dataset, open until its values are written, and its extents: the
 * values go there, not through the VDS (HDF5 1.10 reads past the buffer when it
 * writes through a VDS with a type conversion). */
static hid_t source_file = H5I_INVALID_HID, source = H5I_INVALID_HID;
static hsize_t source_dims[8];

/* A creation list that puts the values elsewhere as the input says (then dcpl is
 * closed), or dcpl itself: a VDS over all of a source dataset of the same type
 * (half its rows: VIRTUAL_SHORT), or one external raw file of the values' size. */
static hid_t choose_elsewhere(fz_in *in, hid_t dcpl, int rank, const hsize_t *dims, hid_t type)
{
    unsigned where = fz_below(in, N_WHERE);
    size_t bytes = H5Tget_size(type) * elements(rank, dims);
    bool external = where == EXTERNAL || where == EXTERNAL_SHORT;
    if (where == IN_FILE || elsewhere_kind != IN_FILE || rank < 1 ||
        (external && (bytes == 0 || bytes > (1u << 24))))
        return dcpl;
    H5Pclose(dcpl);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    elsewhere_kind = where;
    fz_scratch(external ? "external.raw" : "source.h5", elsewhere, sizeof elsewhere);
    if (external) {
        H5Pset_external(dcpl, elsewhere, 0, (hsize_t)bytes);
        return dcpl;
    }
    memcpy(source_dims, dims, (size_t)rank * sizeof *dims);
    if (where == VIRTUAL_SHORT) source_dims[0] /= 2;
    source_file = H5Fcreate(elsewhere, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t space = H5Screate_simple(rank, source_dims, NULL);
    hid_t all = H5Screate_simple(rank, dims, NULL);
    if (source_file >= 0)
        source = H5Dcreate2(source_file, "s", type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5Pset_virtual(dcpl, all, elsewhere, "s", all);
    H5Sclose(all);
    H5Sclose(space);
    H5Eclear2(H5E_DEFAULT);
    return dcpl;
}

/* After the file is closed: the source removed, or the raw file cut in half. */
static void spoil_elsewhere(void)
{
    struct stat st;
    if (elsewhere_kind == VIRTUAL_GONE) unlink(elsewhere);
    if (elsewhere_kind == EXTERNAL_SHORT && stat(elsewhere, &st) == 0 &&
        truncate(elsewhere, st.st_size / 2) != 0)
        unlink(elsewhere);
}

/* Writes rows [0, written) of dataset d (rank dims) with values the input spoils;
 * ids may be spoiled with what only a wider file type holds (written as doubles:
 * beyond int32, a fraction), which the reader must refuse however it converts. */
static void write_values(fz_in *in, hid_t d, int rank, const hsize_t *dims, hsize_t written,
                         bool ids, int id_limit)
{
    if (rank == 0) written = 1;
    hsize_t per_row = rank > 0 ? elements(rank - 1, dims + 1) : 1;
    hsize_t n = written * per_row;
    if (written == 0 || n == 0 || n > (1u << 16)) return;
    hid_t mem_type = ids ? H5T_NATIVE_INT : H5T_NATIVE_FLOAT;
    void *data = malloc(n * 4);
    if (!data) return;
    for (hsize_t k = 0; k < n; k++) {
        if (ids)
            ((int *)data)[k] = id_limit > 0 ? (int)(k % (hsize_t)id_limit) : (int)k;
        else
            ((float *)data)[k] = (float)k * 0.25f - 1.0f;
    }
    unsigned spoil = fz_below(in, 6);
    hsize_t at = fz_uint(in, 2) % n;
    static const float bad_floats[] = {NAN, INFINITY, -INFINITY, 3e38f};
    static const int bad_ids[] = {-1, INT_MIN, INT_MAX, 3, 100};
    static const double wide_ids[] = {2.5, 5e9, -5e9, 1e300, NAN};
    if (spoil >= 4 && !ids) ((float *)data)[at] = bad_floats[fz_below(in, 4)];
    if (spoil >= 4 && ids) ((int *)data)[at] = bad_ids[fz_below(in, 5)];
    double *wide = spoil == 5 && ids ? malloc(n * sizeof *wide) : NULL;
    for (hsize_t k = 0; wide && k < n; k++) wide[k] = ((int *)data)[k];
    if (wide) wide[at] = wide_ids[fz_below(in, 5)];
    hid_t fspace = H5Dget_space(d), mspace = H5I_INVALID_HID;
    if (rank > 0) {
        hsize_t start[8] = {0}, count[8];
        memcpy(count, dims, (size_t)rank * sizeof *count);
        count[0] = written;
        H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL);
        mspace = H5Screate_simple(rank, count, NULL);
    } else {
        mspace = H5Screate(H5S_SCALAR);
    }
    H5Dwrite(d, wide ? H5T_NATIVE_DOUBLE : mem_type, mspace, fspace, H5P_DEFAULT,
             wide ? (void *)wide : data);
    H5Sclose(mspace);
    H5Sclose(fspace);
    free(wide);
    free(data);
    H5Eclear2(H5E_DEFAULT);
}

/* Puts something (or nothing) at field i's name in file. */
static void write_field(fz_in *in, hid_t file, const field_plan *fields, int i, hsize_t rows)
{
    const field_plan *f = &fields[i];
    const char *name = f->name[0] == '/' ? f->name + 1 : f->name;
    if (!name[0]) return;
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    switch (fz_below(in, 12)) {
    case 7: break; /* missing */
    case 8: H5Gclose(H5Gcreate2(file, name, lcpl, H5P_DEFAULT, H5P_DEFAULT)); break;
    case 9: H5Lcreate_soft(fields[0].name, file, name, lcpl, H5P_DEFAULT); break;
    case 10: H5Lcreate_soft("/nowhere", file, name, lcpl, H5P_DEFAULT); break;
    case 11: H5Lcreate_external("/nonexistent.h5", "x", file, name, lcpl, H5P_DEFAULT); break;
    default: {
        hsize_t dims[8] = {0}, maxdims[8];
        int rank = choose_dims(in, &f->spec, rows, dims);
        hid_t type = choose_type(in, f->spec.shape.ids);
        bool chunked;
        hid_t dcpl = choose_layout(in, rank, dims, type, &chunked);
        hid_t chosen = dcpl;
        if ((dcpl = choose_elsewhere(in, dcpl, rank, dims, type)) != chosen) chunked = false;
        for (int k = 0; k < rank; k++) maxdims[k] = dims[k];
        if (chunked && rank > 0 && fz_below(in, 4) == 3) maxdims[0] = H5S_UNLIMITED;
        hid_t space = rank ? H5Screate_simple(rank, dims, maxdims) : H5Screate(H5S_SCALAR);
        if (rank == 0 && fz_below(in, 4) == 3) {
            H5Sclose(space);
            space = H5Screate(H5S_NULL);
        }
        hid_t d = H5Dcreate2(file, name, type, space, lcpl, dcpl, H5P_DEFAULT);
        if (d >= 0) {
            static const long parts[] = {16, 0, 8, 15};
            hsize_t written = rank ? dims[0] * (hsize_t)FZ_PICK(in, parts) / 16 : 1;
            bool virtual = source >= 0;
            if (virtual && written > source_dims[0]) written = source_dims[0];
            write_values(in, virtual ? source : d, rank, virtual ? source_dims : dims, written,
                         f->spec.shape.ids, f->spec.id_limit);
            if (!virtual) fz_note_values(d, regions, &n_regions);
            H5Dclose(d);
        }
        if (source >= 0) H5Dclose(source);
        if (source_file >= 0) H5Fclose(source_file);
        source = source_file = H5I_INVALID_HID;
        H5Sclose(space);
        H5Pclose(dcpl);
        H5Tclose(type);
    }
    }
    H5Pclose(lcpl);
    H5Eclear2(H5E_DEFAULT);
}

static int count_dataset(void *ctx, const pn_hdf5_dataset_info *d)
{
    char line[256];
    snprintf(line, sizeof line, "%s %s %d %d", d->name, d->type, d->rank, d->chunk_rank);
    ++*(int *)ctx;
    return 0;
}

static int count_attr(void *ctx, const char *name, const char *type, const char *value)
{
    char line[512];
    snprintf(line, sizeof line, "%s %s %s", name, type, value);
    ++*(int *)ctx;
    return 0;
}

/* What `pipenet inspect` does with a file that has no pipenet format. */
static void inspect(const char *path)
{
    hid_t file;
    pn_error_clear();
    int rc = pn_hdf5_open_file(path, H5P_DEFAULT, &file);
    fz_check_status(rc, "pn_hdf5_open_file");
    if (rc < 0) return;
    int n = 0;
    pn_error_clear();
    fz_check_status(pn_hdf5_list_datasets(file, path, count_dataset, &n), "pn_hdf5_list_datasets");
    pn_error_clear();
    fz_check_status(pn_hdf5_list_attrs(file, path, count_attr, &n), "pn_hdf5_list_attrs");
    pn_hdf5_close(file, path);
}

/* Reads a few batches, seeks, reads again: every outcome must be a status with a
 * message; a batch must hold what the options promise. */
static void read_batches(fz_in *in, pn_reader *r, const pn_reader_options *o)
{
    long batches = pn_reader_batches_per_epoch(r);
    for (int k = 0; k < 4; k++) {
        if (k == 2) {
            pn_error_clear();
            fz_check_status(pn_reader_seek(r, (long)fz_below(in, 3), (long)fz_below(in, 9) %
                                                                        (batches + 1)),
                            "pn_reader_seek");
        }
        const pn_batch *b;
        pn_error_clear();
        int rc = pn_reader_next(r, &b);
        fz_check_status(rc, "pn_reader_next");
        if (rc == 0 && (b->rows < 0 || b->rows > o->count)) {
            fprintf(stderr, "fuzz: a batch of %d rows for a count of %d\n", b->rows, o->count);
            abort();
        }
    }
    long samples = pn_reader_samples(r);
    if (samples > 0 && samples <= (1L << 16)) {
        long *perm = malloc((size_t)samples * sizeof *perm);
        if (perm) fz_check_status(pn_reader_permutation(r, (long)fz_below(in, 4), perm),
                                  "pn_reader_permutation");
        free(perm);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long n_fields_table[] = {2, 1, 3};
    fz_in in = {data, size};
    fz_hdf5_quiet();
    char path[256];
    fz_scratch("dataset.h5", path, sizeof path);

    field_plan fields[MAX_FIELDS] = {0};
    int n_fields = (int)FZ_PICK(&in, n_fields_table);
    for (int i = 0; i < n_fields; i++) choose_spec(&in, i, &fields[i]);

    n_regions = 0;
    elsewhere_kind = IN_FILE;
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) return 0;
    hsize_t rows = 8 + fz_below(&in, 24);
    for (int i = 0; i < n_fields; i++) write_field(&in, file, fields, i, rows);
    for (unsigned a = fz_below(&in, 4); a > 0; a--) fz_write_root_attr(&in, file);
    H5Fclose(file);
    fz_damage(&in, path, regions, n_regions);
    spoil_elsewhere();

    pn_reader_field specs[MAX_FIELDS];
    const char *names[MAX_FIELDS];
    bool exists[MAX_FIELDS];
    for (int i = 0; i < n_fields; i++) specs[i] = fields[i].spec, names[i] = fields[i].name;
    static const long batches[] = {4, 1, 3, 7, 32, 0, 1 << 20};
    pn_reader_options o = {.global_batch = (int)FZ_PICK(&in, batches), .shuffle = true,
                           .seed = fz_uint(&in, 2), .drop_last = true};
    o.count = o.global_batch; /* one replica's rows: all of them, or a part */
    if (fz_below(&in, 2) && o.global_batch > 1) {
        o.first = (int)fz_below(&in, (unsigned)o.global_batch);
        o.count = 1 + (int)fz_below(&in, (unsigned)(o.global_batch - o.first));
        if (fz_below(&in, 4) == 3) o.count = o.global_batch + 1; /* more than fits */
    }
    o.shuffle = fz_below(&in, 2) == 0;
    o.drop_last = fz_below(&in, 2) == 0;
    static const long caches[] = {0, 1 << 20, 1L << 30, 64};
    o.cache_bytes = (size_t)FZ_PICK(&in, caches);

    pn_error_clear();
    fz_check_status(pn_reader_probe(path, names, n_fields, exists), "pn_reader_probe");
    pn_reader *r = NULL;
    pn_error_clear();
    int rc = pn_reader_open(&r, path, specs, n_fields, &o);
    fz_check_status(rc, "pn_reader_open");
    if (rc == 0) read_batches(&in, r, &o);
    pn_reader_close(r);
    inspect(path);
    fz_check_hdf5_closed("the reader");
    unlink(path);
    if (elsewhere_kind != IN_FILE) unlink(elsewhere);
    return 0;
}
