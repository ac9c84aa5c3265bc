/* `pipenet import`: converts a public dataset (Fashion-MNIST) or text files into
 * dataset HDF5 files (DESIGN.md section 3, docs/formats.md); progress goes to stdout.
 * Exit 0 on success, 1 on bad data or I/O errors, 2 on misuse. */
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
#include "io/import_text.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet import fashion-mnist [--src DIR] --out DIR\n"
            "       pipenet import text FILE... --out DIR --seq T [--eval-fraction F]\n"
            "                           [--records SEP]\n"
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
            "  -h, --help   this text\n",
            PN_FASHION_MNIST_SRC, PN_TEXT_EVAL_FRACTION);
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

/* Refuses (PN_ERR_INVALID) outputs DIR/train.h5 and DIR/test.h5 that are one of the
 * text files read (base/path.h), or a directory, before anything is read. */
static int check_text_outputs(const char *const *files, int n_files, const char *out)
{
    static const char *const names[] = {"train.h5", "test.h5"};
    pn_named_path *inputs = calloc((size_t)n_files, sizeof *inputs);
    if (!inputs) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_files; i++)
        inputs[i] = (pn_named_path){files[i], "one of the text files read"};
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < 2; i++) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", out, names[i]) >= sizeof path)
            rc = pn_error_set(PN_ERR_INVALID, "--out %s: the path is too long", out);
        else
            rc = pn_path_check_output("--out", path, inputs, n_files, false);
    }
    free(inputs);
    return rc;
}

/* After the options: the dataset argument and what it needs. */
/* import text: windows of the whole text, or samples of records (--records). */
static int import_text(const char *const *files, int n_files, const char *out, int seq,
                       double eval_fraction, const char *separator)
{
    printf("importing %d text file%s into %s (--seq %d, --eval-fraction %g", n_files,
           n_files > 1 ? "s" : "", out, seq, eval_fraction);
    if (separator) printf(", --records '%s'", separator);
    printf(")\n");
    fflush(stdout);
    if (!separator) {
        if (pn_import_text(files, n_files, out, seq, eval_fraction, report, NULL) < 0)
            return pn_cli_fail(pn_error_message());
        return 0;
    }
    pn_text_records rec = {.separator = separator};
    if (pn_import_text_records(files, n_files, out, seq, eval_fraction, &rec, report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    printf("records: %ld in train.h5, %ld in test.h5; %ld empty skipped\n", rec.records[0],
           rec.records[1], rec.empty);
    return 0;
}

static int run_import(int argc, char **argv, const char *src, bool src_given, const char *out,
                      int seq, bool eval_given, double eval_fraction, const char *separator)
{
    char message[256];
    if (optind >= argc)
        return misuse("which dataset? `pipenet import fashion-mnist --out DIR` or "
                      "`pipenet import text FILE... --out DIR --seq T`");
    const char *dataset = argv[optind];
    bool text = !strcmp(dataset, "text");
    if (!text && strcmp(dataset, "fashion-mnist") != 0) {
        snprintf(message, sizeof message, "unknown dataset '%s' (known: fashion-mnist, text)",
                 dataset);
        return misuse(message);
    }
    if (!out) {
        snprintf(message, sizeof message, "import %s needs --out DIR", dataset);
        return misuse(message);
    }
    double start = seconds_now();
    if (text) {
        if (optind + 1 >= argc) return misuse("import text needs at least one FILE");
        if (src_given) return misuse("--src is for fashion-mnist; name text FILEs instead");
        if (seq == 0) return misuse("import text needs --seq T (positions per sample)");
        const char *const *files = (const char *const *)argv + optind + 1;
        if (check_text_outputs(files, argc - optind - 1, out) < 0)
            return pn_cli_misuse("%s", pn_error_message()); /* a wrong command line */
        int rc = import_text(files, argc - optind - 1, out, seq, eval_fraction, separator);
        if (rc) return rc;
    } else {
        if (optind + 1 < argc) {
            snprintf(message, sizeof message, "unexpected argument '%s'", argv[optind + 1]);
            return misuse(message);
        }
        if (seq || eval_given || separator)
            return misuse("--seq, --eval-fraction and --records are for import text");
        printf("importing Fashion-MNIST from %s into %s\n", src, out);
        fflush(stdout);
        if (pn_import_fashion_mnist(src, out, report, NULL) < 0)
            return pn_cli_fail(pn_error_message());
    }
    printf("done in %.1f s\n", seconds_now() - start);
    return 0;
}

int pn_cmd_import(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"src", required_argument, NULL, 's'},
        {"out", required_argument, NULL, 'o'},
        {"seq", required_argument, NULL, 'T'},
        {"eval-fraction", required_argument, NULL, 'f'},
        {"records", required_argument, NULL, 'r'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *src = PN_FASHION_MNIST_SRC, *out = NULL, *separator = NULL;
    bool src_given = false, eval_given = false;
    int seq = 0;
    double eval_fraction = PN_TEXT_EVAL_FRACTION;
    char message[256];
    optind = 1;
    for (int c; (c = pn_opt_next(argc, argv, long_options)) != -1;) {
        switch (c) {
        case 's': src = optarg, src_given = true; break;
        case 'o': out = optarg; break;
        case 'T':
            if (pn_opt_int("seq", optarg, 1, 1 << 20, &seq) < 0) return PN_EXIT_USAGE;
            break;
        case 'f':
            if (pn_opt_double("eval-fraction", optarg, 0, 1, &eval_fraction) < 0)
                return PN_EXIT_USAGE;
            if (eval_fraction == 0 || eval_fraction == 1) {
                snprintf(message, sizeof message, "--eval-fraction: expected a number in "
                         "(0, 1): both splits need text, found '%s'", optarg);
                return misuse(message);
            }
            eval_given = true;
            break;
        case 'r':
            if (!optarg[0] || strchr(optarg, '\n')) {
                snprintf(message, sizeof message, "--records: expected the text of the line "
                         "that separates records (such as %%), found '%.40s'", optarg);
                return misuse(message);
            }
            separator = optarg;
            break;
        case 'h': usage(stdout); return 0;
        default: return PN_EXIT_USAGE; /* pn_opt_next said why */
        }
    }
    return run_import(argc, argv, src, src_given, out, seq, eval_given, eval_fraction,
                      separator);
}
