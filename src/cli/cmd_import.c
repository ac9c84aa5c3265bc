/* `pipenet import`: converts a public dataset (Fashion-MNIST), text files, libsvm or
 * libffm files, or a generated click-through dataset into dataset HDF5 files
 * (DESIGN.md section 3, docs/formats.md, docs/sparse.md); progress goes to stdout.
 * The datasets are one table (importers[]): each names the options it takes, so an
 * option given to the wrong one is refused by the table. Exit 0 on success, 1 on bad
 * data or I/O errors, 2 on misuse. */
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "base/path.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/import_fashion.h"
#include "io/csr_file.h"
#include "io/import_sparse.h"
#include "io/import_text.h"

static void usage(FILE *out)
{
    pn_ctr_options d;
    pn_ctr_defaults(&d);
    fprintf(out,
            "usage: pipenet import fashion-mnist [--src DIR] --out DIR\n"
            "       pipenet import text FILE... --out DIR --seq T [--eval-fraction F]\n"
            "                           [--records SEP]\n"
            "       pipenet import libsvm FILE... --out DIR [--test-fraction F | --test FILE]\n"
            "                           [--format auto|libsvm|libffm] [--index-base 0|1]\n"
            "                           [--columns N] [--fields N] [--chunk N]\n"
            "       pipenet import synthetic-ctr --out DIR [--samples N] [--test-samples M]\n"
            "                           [--fields F] [--vocab V] [--seed S] [--zipf S]\n"
            "                           [--rank R] [--bias B] [--logit-scale T] [--chunk N]\n"
            "\n"
            "fashion-mnist: converts Fashion-MNIST's gzip IDX files into DIR/train.h5\n"
            "(60000 samples) and DIR/test.h5 (10000 samples): /features float32\n"
            "[N, 784] scaled to [0, 1], /labels int32 [N] in 0..9, root attributes\n"
            "`source` and `num_classes`.\n"
            "\n"
            "text: the bytes of the FILEs, concatenated, become samples of T byte ids\n"
            "(vocabulary: the 256 byte values) cut from consecutive non-overlapping\n"
            "windows (stride T): /tokens int32 [N, T] holds bytes kT..kT+T-1 of a split\n"
            "and /targets int32 [N, T] the bytes one further, the next token to\n"
            "predict. DIR/train.h5 takes the text's first 1 - F, DIR/test.h5 its last F.\n"
            "Root attributes: `tokenizer` = \"bytes\", `vocab_size` = `num_classes` =\n"
            "256, `seq`, `stride`, `source`. A model reads them with inputs like\n"
            "  \"x\": {\"dataset\": \"tokens\", \"ids\": true, \"seq\": T},\n"
            "  \"y\": {\"dataset\": \"targets\", \"ids\": true, \"seq\": T}\n"
            "\n"
            "text --records SEP: one or more samples per record instead of windows. A\n"
            "line equal to SEP (Debian's fortune files: %%) ends a record, and so does\n"
            "the end of a file; a record is the bytes of its lines, newlines included.\n"
            "A record of L bytes gives L - 1 tokens and targets (the byte after each),\n"
            "cut into ceil((L - 1) / T) samples; positions past a sample's pairs are\n"
            "padding (id 0), and /lengths int32 [N] holds its real positions, 1..T.\n"
            "test.h5 takes the last F of the records (at least one), train.h5 the rest.\n"
            "Empty records (separators in a row) are skipped and counted; a record of\n"
            "one byte, an empty SEP and fewer than 2 records are refused. Read with\n"
            "  \"x\": {\"dataset\": \"tokens\", \"ids\": true, \"seq\": T, \"lengths\": \"lengths\"}\n"
            "\n"
            "libsvm: text files of lines `label idx:val idx:val ...` (libsvm) or\n"
            "`label field:idx:val ...` (libffm) become the sparse group /features (CSR:\n"
            "indptr int64 [N+1], indices int64 [nnz], values float32 [nnz], and for libffm\n"
            "fields int32 [nnz]; attributes shape = (N, columns) and num_fields) and\n"
            "/labels int32 [N] (docs/formats.md, docs/sparse.md). Labels are 0 or 1;\n"
            "-1 reads as 0 and +1 as 1. Indices count from 1 in libsvm and from 0 in\n"
            "libffm, each format's own convention (--index-base says otherwise); the\n"
            "file's index i is column i - base. Fields count from 0. Without --format\n"
            "the first feature decides (one ':' libsvm, two libffm) and every later one\n"
            "must match. Columns: the largest column + 1 of both files (or --columns).\n"
            "Blank lines and lines starting with '#' are skipped; a token starting with\n"
            "'#' ends the line. The files are streamed (any size); a mistake is refused\n"
            "naming the file, line and column. Without --test-fraction or --test only\n"
            "DIR/train.h5 is written. Read with \"x\": {\"dataset\": \"features\", ...}.\n"
            "\n"
            "synthetic-ctr: a click-through dataset with a planted model: F fields, one\n"
            "feature per field per sample drawn from a Zipf law over V ids (id 0 the\n"
            "most frequent), column field * V + id, labels drawn from\n"
            "sigmoid(bias + weights + pairwise factor products) (docs/sparse.md). The\n"
            "root attributes hold the parameters and the planted model's log-loss and\n"
            "AUC on the file's own samples: the best a model can reach.\n"
            "\n"
            "Each file is written under a temporary name and renamed when complete;\n"
            "DIR is created if missing.\n"
            "\n"
            "options:\n"
            "  --src DIR    fashion-mnist: where train-images-idx3-ubyte.gz and the\n"
            "               three other IDX files are (default %s,\n"
            "               from Debian's dataset-fashion-mnist package)\n"
            "  --out DIR    where to write train.h5 and test.h5\n"
            "  --seq T      text: positions per sample (required)\n"
            "  --eval-fraction F\n"
            "               text: the share of the text, from its end, that becomes\n"
            "               test.h5, in (0, 1) (default %g)\n"
            "  --records SEP\n"
            "               text: samples from records separated by lines equal to SEP\n"
            "               (above); without it, windows of the whole text\n"
            "  --test-fraction F\n"
            "               libsvm: the last share F of the samples, in (0, 1), becomes\n"
            "               test.h5 (a first pass counts them)\n"
            "  --test FILE  libsvm: test.h5 from FILE\n"
            "  --format NAME\n"
            "               libsvm: the lines' form (default auto), one of\n",
            PN_FASHION_MNIST_SRC, PN_TEXT_EVAL_FRACTION);
    pn_choice_help(out, &pn_svm_forms, 17);
    fprintf(out,
            "  --index-base 0|1\n"
            "               libsvm: the file's first index (default 1 for libsvm, 0 for\n"
            "               libffm)\n"
            "  --columns N  libsvm: the columns (default the largest + 1); a larger\n"
            "               index is refused\n"
            "  --fields N   libsvm: the fields (default the largest + 1), a larger one\n"
            "               refused; synthetic-ctr: the fields (default %d)\n"
            "  --chunk N    libsvm, synthetic-ctr: values per HDF5 chunk and per write\n"
            "               (default %d)\n"
            "  --samples N, --test-samples M\n"
            "               synthetic-ctr: samples in train.h5, test.h5 (default %ld, %ld)\n"
            "  --vocab V    synthetic-ctr: ids per field (default %ld)\n"
            "  --seed S     synthetic-ctr: the seed of everything drawn (default %llu)\n"
            "  --zipf S     synthetic-ctr: id r (from 1) drawn with weight r^-S (default %g)\n"
            "  --rank R     synthetic-ctr: the planted factors' rank (default %d)\n"
            "  --bias B, --logit-scale T\n"
            "               synthetic-ctr: the planted logit's constant (default %g) and\n"
            "               the standard deviation of the rest (default %g)\n"
            "  -h, --help   this text\n",
            d.fields, PN_CSR_CHUNK, d.samples,
            d.test_samples, d.vocab, (unsigned long long)d.seed, d.zipf, d.rank, d.bias,
            d.logit_scale);
}

static int misuse(const char *message)
{
    return pn_cli_misuse("%s (see `pipenet import --help`)", message);
}

static void report(const char *path, long samples, void *ctx)
{
    printf("wrote %s: %ld samples\n", path, samples);
    fflush(stdout);
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The options of every dataset; an importer names those it takes (a bit each). */
enum {
    OPT_SRC, OPT_OUT, OPT_SEQ, OPT_EVAL, OPT_RECORDS, OPT_TEST_FRACTION, OPT_TEST,
    OPT_FORMAT, OPT_INDEX_BASE, OPT_COLUMNS, OPT_FIELDS, OPT_CHUNK, OPT_SAMPLES,
    OPT_TEST_SAMPLES, OPT_VOCAB, OPT_SEED, OPT_ZIPF, OPT_RANK, OPT_BIAS, OPT_LOGIT_SCALE,
    OPT_COUNT
};
#define BIT(o) (1u << (o))

static const struct option long_options[] = {
    {"src", required_argument, NULL, 256 + OPT_SRC},
    {"out", required_argument, NULL, 256 + OPT_OUT},
    {"seq", required_argument, NULL, 256 + OPT_SEQ},
    {"eval-fraction", required_argument, NULL, 256 + OPT_EVAL},
    {"records", required_argument, NULL, 256 + OPT_RECORDS},
    {"test-fraction", required_argument, NULL, 256 + OPT_TEST_FRACTION},
    {"test", required_argument, NULL, 256 + OPT_TEST},
    {"format", required_argument, NULL, 256 + OPT_FORMAT},
    {"index-base", required_argument, NULL, 256 + OPT_INDEX_BASE},
    {"columns", required_argument, NULL, 256 + OPT_COLUMNS},
    {"fields", required_argument, NULL, 256 + OPT_FIELDS},
    {"chunk", required_argument, NULL, 256 + OPT_CHUNK},
    {"samples", required_argument, NULL, 256 + OPT_SAMPLES},
    {"test-samples", required_argument, NULL, 256 + OPT_TEST_SAMPLES},
    {"vocab", required_argument, NULL, 256 + OPT_VOCAB},
    {"seed", required_argument, NULL, 256 + OPT_SEED},
    {"zipf", required_argument, NULL, 256 + OPT_ZIPF},
    {"rank", required_argument, NULL, 256 + OPT_RANK},
    {"bias", required_argument, NULL, 256 + OPT_BIAS},
    {"logit-scale", required_argument, NULL, 256 + OPT_LOGIT_SCALE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Everything the command line said. */
typedef struct import_args {
    const char *const *files; /* the arguments after the dataset's name */
    int n_files;
    const char *src, *out, *separator;
    int seq;
    double eval_fraction;
    pn_libsvm_options svm;
    pn_ctr_options ctr;
    unsigned given; /* BIT(OPT_...) of each option given */
} import_args;

/* Refuses (PN_ERR_INVALID) outputs DIR/train.h5 and DIR/test.h5 that are one of the
 * files read (base/path.h), or a directory, before anything is read. */
static int check_outputs(const char *const *files, int n_files, const char *extra,
                         const char *out)
{
    pn_named_path *inputs = calloc((size_t)n_files + 1, sizeof *inputs);
    if (!inputs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_files; i++) inputs[i] = (pn_named_path){files[i], "one of the files read"};
    if (extra) inputs[n_files++] = (pn_named_path){extra, "the --test file"};
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < 2; i++) {
        char path[PATH_MAX];
        if (pn_import_output(out, i, path, sizeof path) < 0)
            rc = pn_error_set(PN_ERR_INVALID, "--out %s: the path is too long", out);
        else
            rc = pn_path_check_output("--out", path, inputs, n_files, false);
    }
    free(inputs);
    return rc;
}

static int run_fashion(const import_args *a)
{
    printf("importing Fashion-MNIST from %s into %s\n", a->src, a->out);
    fflush(stdout);
    if (pn_import_fashion_mnist(a->src, a->out, report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    return 0;
}

/* import text: windows of the whole text, or samples of records (--records). */
static int run_text(const import_args *a)
{
    if (a->seq == 0) return misuse("import text needs --seq T (positions per sample)");
    if (check_outputs(a->files, a->n_files, NULL, a->out) < 0)
        return pn_cli_misuse("%s", pn_error_message()); /* a wrong command line */
    printf("importing %d text file%s into %s (--seq %d, --eval-fraction %g", a->n_files,
           a->n_files > 1 ? "s" : "", a->out, a->seq, a->eval_fraction);
    if (a->separator) printf(", --records '%s'", a->separator);
    printf(")\n");
    fflush(stdout);
    if (!a->separator) {
        if (pn_import_text(a->files, a->n_files, a->out, a->seq, a->eval_fraction, report,
                           NULL) < 0)
            return pn_cli_fail(pn_error_message());
        return 0;
    }
    pn_text_records rec = {.separator = a->separator};
    if (pn_import_text_records(a->files, a->n_files, a->out, a->seq, a->eval_fraction, &rec,
                               report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    printf("records: %ld in train.h5, %ld in test.h5; %ld empty skipped\n", rec.records[0],
           rec.records[1], rec.empty);
    return 0;
}

static int run_libsvm(const import_args *a)
{
    if ((a->given & BIT(OPT_TEST)) && (a->given & BIT(OPT_TEST_FRACTION)))
        return misuse("--test FILE and --test-fraction F both choose test.h5's samples; give one");
    if (check_outputs(a->files, a->n_files, a->svm.test_file, a->out) < 0)
        return pn_cli_misuse("%s", pn_error_message());
    printf("importing %d file%s into %s (--format %s)\n", a->n_files, a->n_files > 1 ? "s" : "",
           a->out, pn_choice_name(&pn_svm_forms, (int)a->svm.form));
    fflush(stdout);
    pn_libsvm_result r;
    if (pn_import_libsvm(a->files, a->n_files, a->out, &a->svm, &r, report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    printf("form %s, index base %d: %lld columns", pn_choice_name(&pn_svm_forms, (int)r.form),
           r.index_base, (long long)r.columns);
    if (r.form == PN_SVM_LIBFFM) printf(", %d fields", (int)r.num_fields);
    printf("; %lld nonzeros in train.h5", (long long)r.nnz[0]);
    if (a->svm.test_file || a->svm.test_fraction > 0)
        printf(", %lld in test.h5", (long long)r.nnz[1]);
    printf("\n");
    return 0;
}

static int run_ctr(const import_args *a)
{
    const pn_ctr_options *o = &a->ctr;
    printf("generating a click-through dataset into %s: %ld + %ld samples, %d fields of %ld "
           "ids, seed %llu\n", a->out, o->samples, o->test_samples, o->fields, o->vocab,
           (unsigned long long)o->seed);
    fflush(stdout);
    pn_ctr_score score[2];
    if (pn_import_synthetic_ctr(o, a->out, score, report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    for (int s = 0; s < 2; s++)
        printf("planted model on %s.h5: log-loss %.4f, AUC %.4f, positives %.3f\n",
               s ? "test" : "train", score[s].log_loss, score[s].auc, score[s].positive_rate);
    return 0;
}

/* The datasets: the name, whether FILE arguments follow it, the options it takes. */
typedef struct importer {
    const char *name;
    bool files;
    unsigned options;
    int (*run)(const import_args *a);
} importer;

static const importer importers[] = {
    {"fashion-mnist", false, BIT(OPT_SRC) | BIT(OPT_OUT), run_fashion},
    {"text", true, BIT(OPT_OUT) | BIT(OPT_SEQ) | BIT(OPT_EVAL) | BIT(OPT_RECORDS), run_text},
    {"libsvm", true,
     BIT(OPT_OUT) | BIT(OPT_TEST_FRACTION) | BIT(OPT_TEST) | BIT(OPT_FORMAT) |
         BIT(OPT_INDEX_BASE) | BIT(OPT_COLUMNS) | BIT(OPT_FIELDS) | BIT(OPT_CHUNK),
     run_libsvm},
    {"synthetic-ctr", false,
     BIT(OPT_OUT) | BIT(OPT_SAMPLES) | BIT(OPT_TEST_SAMPLES) | BIT(OPT_FIELDS) |
         BIT(OPT_VOCAB) | BIT(OPT_SEED) | BIT(OPT_ZIPF) | BIT(OPT_RANK) | BIT(OPT_BIAS) |
         BIT(OPT_LOGIT_SCALE) | BIT(OPT_CHUNK),
     run_ctr},
};
enum { N_IMPORTERS = sizeof importers / sizeof *importers };

/* After the options: the dataset argument, its files, and the options it takes. */
static int run_import(int argc, char **argv, import_args *a)
{
    char message[512], known[256] = "";
    for (int i = 0; i < N_IMPORTERS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 importers[i].name);
    if (optind >= argc) {
        snprintf(message, sizeof message, "which dataset? (known: %s)", known);
        return misuse(message);
    }
    const importer *imp = NULL;
    for (int i = 0; i < N_IMPORTERS; i++)
        if (!strcmp(argv[optind], importers[i].name)) imp = &importers[i];
    if (!imp) {
        snprintf(message, sizeof message, "unknown dataset '%s' (known: %s)", argv[optind], known);
        return misuse(message);
    }
    for (int o = 0; o < OPT_COUNT; o++)
        if ((a->given & BIT(o)) && !(imp->options & BIT(o))) {
            snprintf(message, sizeof message, "--%s is not an option of import %s",
                     long_options[o].name, imp->name);
            return misuse(message);
        }
    if (!a->out) {
        snprintf(message, sizeof message, "import %s needs --out DIR", imp->name);
        return misuse(message);
    }
    a->files = (const char *const *)argv + optind + 1;
    a->n_files = argc - optind - 1;
    if (imp->files && a->n_files < 1) {
        snprintf(message, sizeof message, "import %s needs at least one FILE", imp->name);
        return misuse(message);
    }
    if (!imp->files && a->n_files > 0) {
        snprintf(message, sizeof message, "unexpected argument '%s'", a->files[0]);
        return misuse(message);
    }
    double start = seconds_now();
    int rc = imp->run(a);
    if (rc == 0) printf("done in %.1f s\n", seconds_now() - start);
    return rc;
}

/* A fraction strictly inside (0, 1): both splits need samples. */
static int parse_fraction(const char *name, const char *text, double *out)
{
    if (pn_opt_double(name, text, 0, 1, out) < 0) return -1;
    if (*out > 0 && *out < 1) return 0;
    return pn_opt_report("--%s: expected a number in (0, 1): both splits need samples, "
                         "found '%s'", name, text);
}

/* One option's value into a; -1 after reporting a bad one. */
static int parse_option(import_args *a, int o, const char *v)
{
    const char *name = long_options[o].name;
    long n = 0;
    int i = 0;
    switch (o) {
    case OPT_SRC: a->src = v; return 0;
    case OPT_OUT: a->out = v; return 0;
    case OPT_SEQ: return pn_opt_int(name, v, 1, 1 << 20, &a->seq);
    case OPT_EVAL: return parse_fraction(name, v, &a->eval_fraction);
    case OPT_RECORDS:
        if (!v[0] || strchr(v, '\n'))
            return pn_opt_report("--records: expected the text of the line that separates "
                                 "records (such as %%), found '%.40s'", v);
        a->separator = v;
        return 0;
    case OPT_TEST_FRACTION: return parse_fraction(name, v, &a->svm.test_fraction);
    case OPT_TEST: a->svm.test_file = v; return 0;
    case OPT_FORMAT:
        if (pn_opt_choice(name, &pn_svm_forms, v, &i) < 0) return -1;
        a->svm.form = (pn_svm_form)i;
        return 0;
    case OPT_INDEX_BASE: return pn_opt_int(name, v, 0, 1, &a->svm.index_base);
    case OPT_COLUMNS:
        if (pn_opt_long(name, v, 1, (long)1 << 62, &n) < 0) return -1;
        a->svm.columns = n;
        return 0;
    case OPT_FIELDS:
        if (pn_opt_int(name, v, 1, INT32_MAX - 1, &i) < 0) return -1;
        a->svm.num_fields = i, a->ctr.fields = i;
        return 0;
    case OPT_CHUNK:
        if (pn_opt_long(name, v, 1, 1L << 26, &n) < 0) return -1;
        a->svm.chunk = a->ctr.chunk = n;
        return 0;
    case OPT_SAMPLES: return pn_opt_long(name, v, 1, 1L << 40, &a->ctr.samples);
    case OPT_TEST_SAMPLES: return pn_opt_long(name, v, 1, 1L << 40, &a->ctr.test_samples);
    case OPT_VOCAB: return pn_opt_long(name, v, 1, 1L << 40, &a->ctr.vocab);
    case OPT_SEED: return pn_opt_u64(name, v, &a->ctr.seed);
    case OPT_ZIPF: return pn_opt_double(name, v, 0, 100, &a->ctr.zipf);
    case OPT_RANK: return pn_opt_int(name, v, 1, 64, &a->ctr.rank);
    case OPT_BIAS: return pn_opt_double(name, v, -100, 100, &a->ctr.bias);
    case OPT_LOGIT_SCALE: return pn_opt_double(name, v, 0, 100, &a->ctr.logit_scale);
    default: return pn_opt_report("--%s: not handled", name);
    }
}

int pn_cmd_import(int argc, char **argv)
{
    import_args a = {.src = PN_FASHION_MNIST_SRC, .eval_fraction = PN_TEXT_EVAL_FRACTION,
                     .svm = {.index_base = -1}};
    pn_ctr_defaults(&a.ctr);
    optind = 1;
    for (int c; (c = pn_opt_next(argc, argv, long_options)) != -1;) {
        if (c == 'h') {
            usage(stdout);
            return 0;
        }
        if (c < 256 || c >= 256 + OPT_COUNT) return PN_EXIT_USAGE; /* pn_opt_next said why */
        if (parse_option(&a, c - 256, optarg) < 0) return PN_EXIT_USAGE;
        a.given |= BIT(c - 256);
    }
    return run_import(argc, argv, &a);
}
