/* `pipenet inspect A --compare B [--tolerance R]`: whether two of pipenet's files
 * hold the same numbers. Snapshots and models: every parameter by name (the same
 * names and shapes in both); dataset files (a predictions file of `infer --out`):
 * every float32 and int32 dataset by name (names of any length). Floats agree when
 * each array's relative L2 difference |a - b| / |b| is at most R (0: every element
 * equal, bit for bit except that -0 equals 0), NaN and infinities where both sides
 * have the same at the same place (compare_floats); ints always exactly. The check
 * a GPU run's results need without h5py (tests/test_cuda_train.sh); exit 0 same, 1
 * different. */
#include "cli/inspect_compare.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/hdf5_util.h"
#include "io/snapshot_file.h"

/* What the comparison found so far. */
typedef struct tally {
    double tolerance;
    int compared, differing;
    double worst;          /* largest relative difference of the floats */
    char *worst_name;      /* the array it is of (malloc'd), NULL before the first */
} tally;

/* "[3, 17]": the place of flat index i in an array of shape dims[rank]. */
static void place_of(size_t i, int rank, const hsize_t *dims, char *buf, size_t cap)
{
    size_t at[32], len = 0;
    for (int k = rank - 1; k >= 0; k--) {
        at[k] = dims[k] ? i % dims[k] : 0;
        i = dims[k] ? i / dims[k] : 0;
    }
    for (int k = 0; k < rank && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%zu", k ? ", " : "[", at[k]);
    if (len < cap) snprintf(buf + len, cap - len, rank ? "]" : "[]");
}

/* Compares the n floats of a and b (arrays of shape dims[rank], from files path_a
 * and path_b); prints and counts the array when it differs. Values that are not
 * numbers agree where both sides hold the same one at the same place (NaN and NaN,
 * inf and inf), in either comparison, and are left out of the L2 sums; one against
 * a number or another is a difference whatever the tolerance, named by its first
 * place. The finite values agree when equal (tolerance 0) or within the relative
 * L2 tolerance. */
static void compare_floats(tally *t, const char *name, const float *a, const float *b, size_t n,
                           int rank, const hsize_t *dims, const char *path_a, const char *path_b)
{
    double diff2 = 0.0, norm2 = 0.0, max_abs = 0.0;
    bool equal = true;
    size_t odd = 0, first_odd = 0; /* places where only one side is not a number */
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(a[i]) || !isfinite(b[i])) {
            bool same = (isnan(a[i]) && isnan(b[i])) || a[i] == b[i];
            if (!same && odd++ == 0) first_odd = i;
            continue;
        }
        double d = (double)a[i] - (double)b[i];
        equal &= a[i] == b[i];
        diff2 += d * d;
        norm2 += (double)b[i] * b[i];
        if (fabs(d) > max_abs) max_abs = fabs(d);
    }
    double rel = equal ? 0.0 : norm2 > 0.0 ? sqrt(diff2 / norm2) : INFINITY;
    t->compared++;
    double worst = odd ? INFINITY : rel;
    if (!t->worst_name || worst > t->worst) {
        free(t->worst_name);
        t->worst = worst;
        t->worst_name = strdup(name);
    }
    bool ok = !odd && (t->tolerance > 0.0 ? rel <= t->tolerance : equal);
    if (ok) return;
    t->differing++;
    printf("differs: %s: ", name);
    if (odd) {
        char place[256];
        place_of(first_odd, rank, dims, place, sizeof place);
        printf("%zu of %zu values NaN or infinite where the other file has another value, "
               "first at %s (%g in %s, %g in %s); the others: ", odd, n, place, a[first_odd],
               path_a, b[first_odd], path_b);
    }
    printf("relative L2 difference %.3g, largest |a - b| %.3g (%zu values)\n", rel, max_abs, n);
}

/* Counts the differing ints; prints and counts the array when any does. */
static void compare_ints(tally *t, const char *name, const int *a, const int *b, size_t n)
{
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += a[i] != b[i];
    t->compared++;
    if (!diff) return;
    t->differing++;
    printf("differs: %s: %zu of %zu ints\n", name, diff, n);
}

/* Reports something one file has and the other lacks, or another shape. */
static void mismatch(tally *t, const char *fmt, const char *name, const char *file)
{
    t->differing++;
    printf("differs: ");
    printf(fmt, name, file);
    printf("\n");
}

static int compare_states(tally *t, const char *path_a, const char *path_b)
{
    pn_train_state *a = NULL, *b = NULL;
    int rc = pn_snapshot_read(path_a, NULL, &a);
    if (rc == PN_OK) rc = pn_snapshot_read(path_b, NULL, &b);
    for (int i = 0; rc == PN_OK && i < a->n_params; i++) {
        const pn_state_param *pa = &a->params[i];
        const pn_state_param *pb = pn_train_state_find(b, pa->name);
        if (!pb)
            mismatch(t, "%s: not in %s", pa->name, path_b);
        else if (pa->rows != pb->rows || pa->cols != pb->cols)
            mismatch(t, "%s: another shape in %s", pa->name, path_b);
        else {
            hsize_t dims[2] = {(hsize_t)pa->rows, (hsize_t)pa->cols};
            bool row = pa->rows == 1; /* stored as [cols] */
            compare_floats(t, pa->name, pa->value, pb->value, (size_t)pa->rows * pa->cols,
                           row ? 1 : 2, row ? dims + 1 : dims, path_a, path_b);
        }
    }
    for (int i = 0; rc == PN_OK && i < b->n_params; i++)
        if (!pn_train_state_find(a, b->params[i].name))
            mismatch(t, "%s: not in %s", b->params[i].name, path_a);
    pn_train_state_free(a);
    pn_train_state_free(b);
    return rc;
}

/* The datasets of a file, by name (any length), with their types and shapes. */
typedef struct listing {
    int n, cap;
    pn_hdf5_dataset_info *items;
    char **names;
} listing;

static int list_one(void *ctx, const pn_hdf5_dataset_info *info)
{
    listing *l = ctx;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        pn_hdf5_dataset_info *items = realloc(l->items, (size_t)cap * sizeof *items);
        if (items) l->items = items;
        char **names = realloc(l->names, (size_t)cap * sizeof *names);
        if (names) l->names = names;
        if (!items || !names) return pn_error_set(PN_ERR_NOMEM, "out of memory");
        l->cap = cap;
    }
    if (!(l->names[l->n] = strdup(info->name)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    l->items[l->n] = *info;
    l->items[l->n].name = NULL; /* the listing's pointer dies with the callback */
    l->n++;
    return 0;
}

static void free_listing(listing *l)
{
    for (int i = 0; i < l->n; i++) free(l->names[i]);
    free(l->names);
    free(l->items);
}

static int find_listed(const listing *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->names[i], name)) return i;
    return -1;
}

/* Reads dataset name of file (type, n elements) into a new array *out. */
static int read_dataset(hid_t file, const char *path, const char *name, pn_hdf5_type type,
                        size_t n, void **out)
{
    *out = malloc((n ? n : 1) * 4);
    if (!*out) return pn_error_set(PN_ERR_NOMEM, "%s: out of memory for /%s", path, name);
    hid_t dset;
    PN_TRY(pn_hdf5_open_dataset(file, path, name, NULL, &dset));
    int rc = pn_hdf5_check_storage(dset, path, name); /* never compare a fill value */
    if (rc == PN_OK) rc = pn_hdf5_read_all(dset, path, name, type, *out);
    return pn_hdf5_close_after(dset, path, rc);
}

/* Compares dataset i of la (in file fa) with its namesake in fb. */
static int compare_dataset(tally *t, const listing *la, int i, hid_t fa, const char *pa,
                           const listing *lb, hid_t fb, const char *pb)
{
    const pn_hdf5_dataset_info *da = &la->items[i];
    const char *name = la->names[i];
    bool is_float = !strcmp(da->type, "float32"), is_int = !strcmp(da->type, "int32");
    if (!is_float && !is_int) return PN_OK; /* neither: not pipenet's numbers */
    int j = find_listed(lb, name);
    const pn_hdf5_dataset_info *db = j < 0 ? NULL : &lb->items[j];
    bool same = db && !strcmp(db->type, da->type) && db->rank == da->rank && da->rank >= 0;
    size_t n = 1;
    for (int k = 0; same && k < da->rank; k++) {
        same &= da->dims[k] == db->dims[k];
        n *= (size_t)da->dims[k];
    }
    if (!same) {
        mismatch(t, "/%s: missing, or another type or shape, in %s", name, pb);
        return PN_OK;
    }
    void *a = NULL, *b = NULL;
    pn_hdf5_type type = is_float ? PN_HDF5_FLOAT32 : PN_HDF5_INT32;
    int rc = read_dataset(fa, pa, name, type, n, &a);
    if (rc == PN_OK) rc = read_dataset(fb, pb, name, type, n, &b);
    char *label = malloc(strlen(name) + 2);
    if (rc == PN_OK && !label) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (label) sprintf(label, "/%s", name);
    if (rc == PN_OK && is_float)
        compare_floats(t, label, a, b, n, da->rank, da->dims, pa, pb);
    if (rc == PN_OK && is_int) compare_ints(t, label, a, b, n);
    free(label);
    free(a);
    free(b);
    return rc;
}

static int compare_dataset_files(tally *t, hid_t fa, const char *pa, hid_t fb, const char *pb)
{
    listing la = {0}, lb = {0};
    int rc = pn_hdf5_list_datasets(fa, pa, list_one, &la);
    if (rc == PN_OK) rc = pn_hdf5_list_datasets(fb, pb, list_one, &lb);
    for (int i = 0; rc == PN_OK && i < la.n; i++)
        rc = compare_dataset(t, &la, i, fa, pa, &lb, fb, pb);
    for (int i = 0; rc == PN_OK && i < lb.n; i++)
        if (find_listed(&la, lb.names[i]) < 0 &&
            (!strcmp(lb.items[i].type, "float32") || !strcmp(lb.items[i].type, "int32")))
            mismatch(t, "/%s: not in %s", lb.names[i], pa);
    free_listing(&la);
    free_listing(&lb);
    return rc;
}

/* The root attribute format of an open file, "" when it has none. */
static int read_format(hid_t file, const char *path, char *buf, size_t cap)
{
    buf[0] = '\0';
    int has = pn_hdf5_attr_exists(file, path, "format");
    if (has < 0) return has;
    return has ? pn_hdf5_read_attr_string(file, path, "format", buf, cap) : PN_OK;
}

static bool is_state_format(const char *format)
{
    return !strcmp(format, PN_FORMAT_SNAPSHOT) || !strcmp(format, PN_FORMAT_MODEL);
}

int pn_inspect_compare(const char *path_a, const char *path_b, double tolerance, int *differing)
{
    tally t = {.tolerance = tolerance};
    hid_t fa = H5I_INVALID_HID, fb = H5I_INVALID_HID;
    char format_a[64], format_b[64];
    int rc = pn_hdf5_open_file(path_a, H5P_DEFAULT, &fa);
    if (rc == PN_OK) rc = pn_hdf5_open_file(path_b, H5P_DEFAULT, &fb);
    if (rc == PN_OK) rc = read_format(fa, path_a, format_a, sizeof format_a);
    if (rc == PN_OK) rc = read_format(fb, path_b, format_b, sizeof format_b);
    bool states = rc == PN_OK && is_state_format(format_a);
    if (rc == PN_OK && states != is_state_format(format_b))
        rc = pn_error_set(PN_ERR_INVALID, "--compare: %s is a %s file, %s a %s file: compare "
                          "two snapshots or models, or two dataset files", path_a,
                          format_a[0] ? format_a : "dataset", path_b,
                          format_b[0] ? format_b : "dataset");
    if (rc == PN_OK && !states) rc = compare_dataset_files(&t, fa, path_a, fb, path_b);
    if (fa != H5I_INVALID_HID) rc = pn_hdf5_close_after(fa, path_a, rc);
    if (fb != H5I_INVALID_HID) rc = pn_hdf5_close_after(fb, path_b, rc);
    if (rc == PN_OK && states) rc = compare_states(&t, path_a, path_b);
    if (rc == PN_OK && tolerance > 0.0)
        printf("compared %d arrays of %s and %s: %d differ; largest relative L2 difference "
               "%.3g (%s), tolerance %g\n", t.compared, path_a, path_b, t.differing, t.worst,
               t.worst_name ? t.worst_name : "none", tolerance);
    else if (rc == PN_OK)
        printf("compared %d arrays of %s and %s: %d differ (exact comparison)\n", t.compared,
               path_a, path_b, t.differing);
    free(t.worst_name);
    *differing = t.differing;
    return rc;
}
