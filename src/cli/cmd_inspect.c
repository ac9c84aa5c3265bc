/* `pipenet inspect FILE`: what one of pipenet's HDF5 files holds. The root
 * attribute `format` tells the kind: a snapshot or a model is read whole (so every
 * checksum is verified) and summarized with a table of its parameters; a file
 * without it is a dataset file, listed as its datasets and root attributes.
 * Exit 0, 1 on an unreadable or damaged file (or a dataset file whose virtual or
 * external datasets' values are not all there), 2 on misuse. */
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/inspect_compare.h"
#include "cli/options.h"
#include "io/hdf5_util.h"
#include "io/snapshot_file.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet inspect FILE [--compare OTHER [--tolerance R]]\n"
            "\n"
            "Shows what a pipenet HDF5 file holds; its root attribute `format` tells\n"
            "the kind (docs/formats.md):\n"
            "  pipenet-snapshot  training state: step, epoch, batch, seed, optimizer\n"
            "                    slots and every parameter\n"
            "  pipenet-model     an exported model: its config and parameters\n"
            "  (none)            a dataset file: its datasets with type, shape and\n"
            "                    storage (chunks; a virtual dataset's sources, an\n"
            "                    external one's files), and its root attributes\n"
            "Snapshots and models are read whole, which verifies every checksum; for\n"
            "each parameter the table shows its shape, mean, standard deviation and\n"
            "L2 norm (and the norm of each optimizer slot). A damaged or unreadable\n"
            "file is an error (exit status 1), and so is a dataset file with a virtual\n"
            "or external dataset whose values are not all there (a source or file\n"
            "missing or cut short: HDF5 would read zeros), listed with why.\n"
            "\n"
            "With --compare OTHER, compares FILE's numbers with OTHER's instead: two\n"
            "snapshots or models parameter by parameter, two dataset files (e.g. the\n"
            "predictions of `pipenet infer --out`) every float32 and int32 dataset by\n"
            "name. Floats agree when each array's relative L2 difference |a - b| / |b|\n"
            "is at most R (default 0: every value equal); NaN or inf agrees with the\n"
            "same at the same place, and against a number differs at any R (its first\n"
            "place named); ints must be equal. Prints each array that differs and a\n"
            "summary; exit status 0 when all agree, 1 when any differs (or a file\n"
            "cannot be read).\n"
            "\n"
            "options:\n"
            "  --compare OTHER  compare with OTHER (a file of the same kind)\n"
            "  --tolerance R    largest relative L2 difference of a float array   [0]\n"
            "  -h, --help       this text\n");
}

static int misuse(const char *message)
{
    return pn_cli_misuse("%s (see `pipenet inspect --help`)", message);
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
static int inspect_state(const char *path, long version, long parts)
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
    if (parts > 0) /* an index over its parts (docs/formats.md, version 2) */
        printf("parts:       %ld (%s%010ld.part-SSS-RRR.h5 beside it, stage SSS, replica "
               "RRR)\n", parts, PN_SNAPSHOT_PREFIX, st->step);
    if (snapshot) {
        printf("step:        %s\n", grouped(st->step, a));
        printf("epoch:       %ld\n", st->epoch);
        printf("batch:       %ld (the next batch of that epoch)\n", st->batch_index);
    }
    printf("seed:        %llu\n", (unsigned long long)st->seed);
    if (st->batch > 0) printf("global batch: %ld\n", st->batch);
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

/* "[60000, 784]" */
static void format_dims(const hsize_t *dims, int rank, const char *prefix, char *buf, size_t cap)
{
    size_t len = (size_t)snprintf(buf, cap, "%s[", prefix);
    for (int k = 0; k < rank && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%llu", k ? ", " : "",
                                (unsigned long long)dims[k]);
    if (len < cap) snprintf(buf + len, cap - len, "]");
}

enum { MAX_CSR_GROUPS = 8 };

/* What the dataset listing found: datasets, those whose values are not all there,
 * and the groups that hold an `indptr` (CSR groups, whose attributes say their
 * shape and fields). */
typedef struct listed {
    int datasets, missing;
    int n_groups;
    char groups[MAX_CSR_GROUPS][256];
} listed;

/* One line of the dataset listing: type, shape, storage (chunks and checksum), and
 * for a virtual or external dataset its sources and whether they are all there. */
static int print_dataset(void *ctx, const pn_hdf5_dataset_info *d)
{
    listed *seen = ctx;
    if (d->unreadable) {
        printf("  /%-15s (cannot open)\n", d->name);
        return 0;
    }
    char shape[96] = "?", storage[96];
    if (d->rank >= 0) format_dims(d->dims, d->rank, "", shape, sizeof shape);
    if (d->chunk_rank > 0)
        format_dims(d->chunk, d->chunk_rank, "chunks ", storage, sizeof storage);
    else
        snprintf(storage, sizeof storage, "%s", pn_hdf5_storage_name(d->storage));
    printf("  /%-15s %-8s %-16s %s%s\n", d->name, d->type, shape, storage,
           d->checksum ? ", fletcher32" : "");
    if (d->sources[0])
        printf("  %-16s %s: %s\n", "", d->storage == PN_HDF5_VIRTUAL ? "sources" : "files",
               d->sources);
    if (d->missing[0]) printf("  %-16s NOT ALL THERE: %s\n", "", d->missing);
    seen->datasets++;
    seen->missing += d->missing[0] != '\0';
    size_t len = strlen(d->name);
    if (len > 7 && !strcmp(d->name + len - 7, "/indptr") && len - 7 < sizeof seen->groups[0] &&
        seen->n_groups < MAX_CSR_GROUPS)
        snprintf(seen->groups[seen->n_groups++], sizeof seen->groups[0], "/%.*s",
                 (int)(len - 7), d->name);
    return 0;
}

static int print_attr(void *count, const char *name, const char *type, const char *value)
{
    printf("  %-16s %-8s %s\n", name, type, value);
    ++*(int *)count;
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
    listed seen = {0};
    int n_attrs = 0;
    printf("datasets:\n");
    int rc = pn_hdf5_list_datasets(file, path, print_dataset, &seen);
    if (rc == 0 && seen.datasets == 0) printf("  (none)\n");
    printf("attributes:\n");
    if (rc == 0) rc = pn_hdf5_list_attrs(file, path, print_attr, &n_attrs);
    if (rc == 0 && n_attrs == 0) printf("  (none)\n");
    for (int g = 0; rc == 0 && g < seen.n_groups; g++) { /* a CSR group's shape and fields */
        int n = 0;
        printf("attributes of %s (a CSR group):\n", seen.groups[g]);
        rc = pn_hdf5_list_object_attrs(file, path, seen.groups[g], print_attr, &n);
        if (rc == 0 && n == 0) printf("  (none)\n");
    }
    if (rc < 0) return pn_cli_fail(pn_error_message());
    if (seen.missing) {
        char message[PATH_MAX + 128];
        snprintf(message, sizeof message, "%s: %d dataset%s whose values are not all there "
                 "(see above): pipenet refuses to read %s", path, seen.missing,
                 seen.missing == 1 ? "" : "s", seen.missing == 1 ? "it" : "them");
        return pn_cli_fail(message);
    }
    return 0;
}

int pn_cmd_inspect(int argc, char **argv)
{
    enum { OPT_COMPARE = 256, OPT_TOLERANCE };
    static const struct option long_options[] = {
        {"compare", required_argument, NULL, OPT_COMPARE},
        {"tolerance", required_argument, NULL, OPT_TOLERANCE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *other = NULL;
    double tolerance = 0.0;
    bool tolerance_given = false;
    optind = 1;
    for (int c; (c = pn_opt_next(argc, argv, long_options)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c == OPT_COMPARE) {
            other = optarg;
            continue;
        }
        if (c == OPT_TOLERANCE) {
            if (pn_opt_double("tolerance", optarg, 0.0, 1e30, &tolerance) < 0)
                return PN_EXIT_USAGE;
            tolerance_given = true;
            continue;
        }
        return PN_EXIT_USAGE; /* pn_opt_next said why */
    }
    if (optind != argc - 1) return misuse("inspect takes exactly one FILE");
    const char *path = argv[optind];
    if (tolerance_given && !other) return misuse("--tolerance goes with --compare OTHER");
    if (other) {
        int differing;
        if (pn_inspect_compare(path, other, tolerance, &differing) < 0)
            return pn_cli_fail(pn_error_message());
        return differing ? 1 : 0;
    }
    hid_t file;
    if (pn_hdf5_open_file(path, H5P_DEFAULT, &file) < 0) return pn_cli_fail(pn_error_message());
    char format[64] = "";
    long version = 0, parts = 0;
    int has_format = pn_hdf5_attr_exists(file, path, "format");
    int rc = has_format < 0 ? -1 : 0;
    if (has_format > 0)
        rc = pn_hdf5_read_attr_string(file, path, "format", format, sizeof format);
    bool pipenet = rc == 0 && (!strcmp(format, PN_FORMAT_SNAPSHOT) ||
                               !strcmp(format, PN_FORMAT_MODEL));
    if (pipenet) rc = pn_hdf5_read_attr_int(file, path, "version", &version);
    if (rc == 0 && pipenet && pn_hdf5_attr_exists(file, path, "parts") > 0)
        rc = pn_hdf5_read_attr_int(file, path, "parts", &parts);
    if (rc == 0 && !pipenet) rc = inspect_dataset_file(file, path, has_format > 0 ? format : NULL);
    else if (rc < 0) rc = pn_cli_fail(pn_error_message());
    if (pn_hdf5_close(file, path) < 0 && rc == 0) rc = pn_cli_fail(pn_error_message());
    if (rc == 0 && pipenet) rc = inspect_state(path, version, parts);
    return rc;
}
