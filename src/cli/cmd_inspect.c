/* `pipenet inspect FILE`: what one of pipenet's HDF5 files holds. The root
 * attribute `format` tells the kind: a snapshot or a model is read whole (so every
 * checksum is verified) and summarized with a table of its parameters; a file
 * without it is a dataset file, listed as its datasets and root attributes.
 * Exit 0, 1 on an unreadable or damaged file, 2 on misuse. */
#include <getopt.h>
#include <hdf5.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/commands.h"
#include "io/hdf5_util.h"
#include "io/snapshot.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet inspect FILE\n"
            "\n"
            "Shows what a pipenet HDF5 file holds; its root attribute `format` tells\n"
            "the kind (docs/formats.md):\n"
            "  pipenet-snapshot  training state: step, epoch, batch, seed, optimizer\n"
            "                    slots and every parameter\n"
            "  pipenet-model     an exported model: its config and parameters\n"
            "  (none)            a dataset file: its datasets with type, shape and\n"
            "                    chunks, and its root attributes\n"
            "Snapshots and models are read whole, which verifies every checksum; for\n"
            "each parameter the table shows its shape, mean, standard deviation and\n"
            "L2 norm (and the norm of each optimizer slot). A damaged or unreadable\n"
            "file is an error (exit status 1).\n"
            "\n"
            "options:\n"
            "  -h, --help  this text\n");
}

static int misuse(const char *message)
{
    fprintf(stderr, "pipenet: error: %s (see `pipenet inspect --help`)\n", message);
    return 2;
}

/* n with thousands separators ("1,863,690"). */
static const char *grouped(long long n, char buf[32])
{
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%lld", n < 0 ? -n : n), k = 0;
    if (n < 0) buf[k++] = '-';
    for (int i = 0; i < len; i++) {
        if (i && (len - i) % 3 == 0) buf[k++] = ',';
        buf[k++] = digits[i];
    }
    buf[k] = '\0';
    return buf;
}

/* "784 x 1024", or "1024" for a row vector. */
static void param_shape(const pn_state_param *p, char *buf, size_t cap)
{
    if (p->rows == 1)
        snprintf(buf, cap, "%d", p->cols);
    else
        snprintf(buf, cap, "%d x %d", p->rows, p->cols);
}

static double l2_norm(const float *v, size_t n)
{
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)v[i] * v[i];
    return sqrt(sum);
}

/* One line about the config: the model's name from the JSON, else its first line. */
static void describe_config(const char *config, char *buf, size_t cap)
{
    size_t len = strlen(config);
    if (!len) {
        snprintf(buf, cap, "(empty)");
        return;
    }
    json_error_t err;
    json_t *root = json_loads(config, 0, &err);
    const char *name = root ? json_string_value(json_object_get(root, "name")) : NULL;
    if (name)
        snprintf(buf, cap, "model '%s' (%zu bytes of JSON)", name, len);
    else
        snprintf(buf, cap, "%.*s%s (%zu bytes)", (int)strcspn(config, "\n") > 60 ? 60
                                                  : (int)strcspn(config, "\n"),
                 config, strcspn(config, "\n") < len ? " ..." : "", len);
    json_decref(root);
}

static void print_params(const pn_train_state *st)
{
    int width = 9;
    for (int i = 0; i < st->n_params; i++)
        if ((int)strlen(st->params[i].name) > width) width = (int)strlen(st->params[i].name);
    printf("\n%-*s  %-12s %12s %12s %12s", width, "parameter", "shape", "mean", "std", "norm");
    for (int s = 0; s < st->n_slot_names; s++) {
        char head[64];
        snprintf(head, sizeof head, "|%s|", st->slot_names[s]);
        printf(" %12s", head);
    }
    printf("\n");
    for (int i = 0; i < st->n_params; i++) {
        const pn_state_param *p = &st->params[i];
        size_t n = (size_t)p->rows * (size_t)p->cols;
        double sum = 0, sq = 0;
        for (size_t k = 0; k < n; k++) sum += p->value[k];
        double mean = sum / (double)n;
        for (size_t k = 0; k < n; k++) sq += (p->value[k] - mean) * (p->value[k] - mean);
        char shape[32];
        param_shape(p, shape, sizeof shape);
        printf("%-*s  %-12s %12.5g %12.5g %12.5g", width, p->name, shape, mean,
               sqrt(sq / (double)n), l2_norm(p->value, n));
        for (int s = 0; s < st->n_slot_names; s++) printf(" %12.5g", l2_norm(p->slots[s], n));
        printf("\n");
    }
}

/* The summary of a snapshot or a model file. */
static int inspect_state(const char *path, long version)
{
    pn_train_state *st;
    if (pn_snapshot_read(path, NULL, &st) < 0) return pn_cli_fail(pn_error_message());
    long long floats = 0;
    for (int i = 0; i < st->n_params; i++)
        floats += (long long)st->params[i].rows * st->params[i].cols;
    char a[32], b[32], config[160];
    bool snapshot = !strcmp(st->format, PN_FORMAT_SNAPSHOT);
    printf("file:        %s\n", path);
    printf("format:      %s, version %ld (every checksum verified)\n", st->format, version);
    if (snapshot) {
        printf("step:        %s\n", grouped(st->step, a));
        printf("epoch:       %ld\n", st->epoch);
        printf("batch:       %ld (the next batch of that epoch)\n", st->batch_index);
    }
    printf("seed:        %llu\n", (unsigned long long)st->seed);
    if (snapshot) {
        printf("slots:       ");
        for (int s = 0; s < st->n_slot_names; s++)
            printf("%s%s", s ? ", " : "", st->slot_names[s]);
        printf("%s\n", st->n_slot_names ? "" : "none");
    }
    printf("parameters:  %d (%s floats, %.1f MiB per copy)\n", st->n_params, grouped(floats, b),
           (double)floats * 4 / (1 << 20));
    describe_config(st->config ? st->config : "", config, sizeof config);
    printf("config:      %s\n", config);
    if (st->n_params) print_params(st);
    pn_train_state_free(st);
    return 0;
}

/* "[60000, 784]" from a dataspace (NULL: scalar). */
static void describe_space(hid_t space, char *buf, size_t cap)
{
    hsize_t dims[H5S_MAX_RANK];
    int rank = H5Sget_simple_extent_dims(space, dims, NULL);
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int k = 0; k < rank && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", k ? ", " : "",
                                (unsigned long long)dims[k]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

/* The value of attribute attr of type t (one number or string, else its shape). */
static void describe_value(hid_t attr, hid_t t, char *buf, size_t cap)
{
    hid_t space = H5Aget_space(attr);
    hssize_t n = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    H5T_class_t cls = H5Tget_class(t);
    if (n != 1) {
        char shape[64] = "?";
        if (space >= 0) describe_space(space, shape, sizeof shape);
        snprintf(buf, cap, "%s values", shape);
    } else if (cls == H5T_INTEGER && H5Tget_sign(t) == H5T_SGN_NONE) {
        unsigned long long v;
        if (H5Aread(attr, H5T_NATIVE_ULLONG, &v) < 0) snprintf(buf, cap, "(unreadable)");
        else snprintf(buf, cap, "%llu", v);
    } else if (cls == H5T_INTEGER) {
        long long v;
        if (H5Aread(attr, H5T_NATIVE_LLONG, &v) < 0) snprintf(buf, cap, "(unreadable)");
        else snprintf(buf, cap, "%lld", v);
    } else if (cls == H5T_FLOAT) {
        double v;
        if (H5Aread(attr, H5T_NATIVE_DOUBLE, &v) < 0) snprintf(buf, cap, "(unreadable)");
        else snprintf(buf, cap, "%.9g", v);
    } else if (cls == H5T_STRING) {
        size_t size = H5Tget_size(t);
        htri_t vlen = H5Tis_variable_str(t);
        hid_t mem = H5Tcopy(t);
        char *text = NULL, *fixed = vlen == 0 && size ? calloc(size + 1, 1) : NULL;
        bool ok = mem >= 0 && vlen >= 0 &&
                  (vlen ? H5Aread(attr, mem, &text) >= 0
                        : fixed && H5Aread(attr, mem, fixed) >= 0);
        const char *s = vlen ? text : fixed;
        if (!ok || !s) {
            snprintf(buf, cap, "(unreadable)");
        } else {
            int line = (int)strcspn(s, "\n");
            snprintf(buf, cap, "\"%.*s\"%s", line > 100 ? 100 : line, s,
                     line > 100 || s[line] ? " ..." : "");
        }
        if (text) H5free_memory(text);
        free(fixed);
        if (mem >= 0) H5Tclose(mem);
    } else {
        snprintf(buf, cap, "(not shown)");
    }
    if (space >= 0) H5Sclose(space);
}

static herr_t print_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data)
{
    char type[32] = "?", value[160] = "(unreadable)";
    hid_t attr = H5Aopen(loc, name, H5P_DEFAULT);
    hid_t t = attr < 0 ? H5I_INVALID_HID : H5Aget_type(attr);
    if (t >= 0) {
        pn_hdf5_type_name(t, type, sizeof type);
        describe_value(attr, t, value, sizeof value);
        H5Tclose(t);
    }
    if (attr >= 0) H5Aclose(attr);
    printf("  %-16s %-8s %s\n", name, type, value);
    ++*(int *)data;
    return 0;
}

/* Prints one dataset: type, shape, chunks and checksum. */
static void print_dataset(hid_t dset, const char *name)
{
    char type[32] = "?", shape[96] = "?", chunks[96] = "contiguous";
    hid_t t = H5Dget_type(dset), space = H5Dget_space(dset), dcpl = H5Dget_create_plist(dset);
    if (t >= 0) pn_hdf5_type_name(t, type, sizeof type);
    if (space >= 0) describe_space(space, shape, sizeof shape);
    bool checksum = false;
    if (dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED) {
        hsize_t dims[H5S_MAX_RANK];
        int rank = H5Pget_chunk(dcpl, H5S_MAX_RANK, dims);
        size_t len = (size_t)snprintf(chunks, sizeof chunks, "chunks [");
        for (int k = 0; k < rank && len < sizeof chunks; k++)
            len += (size_t)snprintf(chunks + len, sizeof chunks - len, "%s%llu", k ? ", " : "",
                                    (unsigned long long)dims[k]);
        if (len < sizeof chunks) snprintf(chunks + len, sizeof chunks - len, "]");
        unsigned flags;
        checksum = H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, NULL, NULL, 0,
                                        NULL, NULL) >= 0;
        H5Eclear2(H5E_DEFAULT);
    }
    printf("  /%-15s %-8s %-16s %s%s\n", name, type, shape, chunks,
           checksum ? ", fletcher32" : "");
    if (dcpl >= 0) H5Pclose(dcpl);
    if (space >= 0) H5Sclose(space);
    if (t >= 0) H5Tclose(t);
}

static herr_t visit_link(hid_t root, const char *name, const H5L_info_t *info, void *data)
{
    hid_t obj = H5Oopen(root, name, H5P_DEFAULT);
    if (obj < 0) {
        printf("  /%-15s (cannot open)\n", name);
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    if (H5Iget_type(obj) == H5I_DATASET) {
        print_dataset(obj, name);
        ++*(int *)data;
    }
    H5Oclose(obj);
    return 0;
}

/* The listing of a file that is no snapshot or model: datasets and attributes. */
static int inspect_dataset_file(hid_t file, const char *path, const char *format)
{
    printf("file:        %s\n", path);
    if (format)
        printf("kind:        an HDF5 file of format '%s' (not a pipenet format)\n", format);
    else
        printf("kind:        dataset file (no 'format' attribute)\n");
    char why[256];
    int n_datasets = 0, rc = 0;
    pn_hdf5_lock();
    printf("datasets:\n");
    if (H5Lvisit(file, H5_INDEX_NAME, H5_ITER_INC, visit_link, &n_datasets) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot list its datasets%s", path,
                          pn_hdf5_reason(why));
    if (rc == 0 && n_datasets == 0) printf("  (none)\n");
    printf("attributes:\n");
    hsize_t idx = 0;
    int n_attrs = 0;
    if (rc == 0 && H5Aiterate2(file, H5_INDEX_NAME, H5_ITER_INC, &idx, print_attr, &n_attrs) < 0)
        rc = pn_error_set(PN_ERR_IO, "%s: cannot list its attributes%s", path,
                          pn_hdf5_reason(why));
    if (rc == 0 && n_attrs == 0) printf("  (none)\n");
    H5Eclear2(H5E_DEFAULT);
    pn_hdf5_unlock();
    return rc < 0 ? pn_cli_fail(pn_error_message()) : 0;
}

int pn_cmd_inspect(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    char message[256];
    opterr = 0;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, "h", long_options, NULL)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        snprintf(message, sizeof message, "unknown option '%s'", argv[optind - 1]);
        return misuse(message);
    }
    if (optind != argc - 1) return misuse("inspect takes exactly one FILE");
    const char *path = argv[optind];
    hid_t file;
    if (pn_hdf5_open_file(path, H5P_DEFAULT, &file) < 0) return pn_cli_fail(pn_error_message());
    char format[64] = "", why[256];
    long version = 0;
    pn_hdf5_lock();
    htri_t has_format = H5Aexists(file, "format");
    if (has_format < 0)
        pn_error_set(PN_ERR_IO, "%s: cannot look up attribute 'format'%s", path,
                     pn_hdf5_reason(why));
    pn_hdf5_unlock();
    int rc = has_format < 0 ? -1 : 0;
    if (has_format > 0)
        rc = pn_hdf5_read_attr_string(file, path, "format", format, sizeof format);
    bool pipenet = rc == 0 && (!strcmp(format, PN_FORMAT_SNAPSHOT) ||
                               !strcmp(format, PN_FORMAT_MODEL));
    if (pipenet) rc = pn_hdf5_read_attr_int(file, path, "version", &version);
    if (rc == 0 && !pipenet) rc = inspect_dataset_file(file, path, has_format > 0 ? format : NULL);
    else if (rc < 0) rc = pn_cli_fail(pn_error_message());
    if (pn_hdf5_close(file, path) < 0 && rc == 0) rc = pn_cli_fail(pn_error_message());
    if (rc == 0 && pipenet) rc = inspect_state(path, version);
    return rc;
}
