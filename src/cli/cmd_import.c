/* `pipenet import`: converts a public dataset into dataset HDF5 files
 * (DESIGN.md section 3). Only Fashion-MNIST so far; progress goes to stdout.
 * Exit 0 on success, 1 on bad data or I/O errors, 2 on misuse. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "cli/commands.h"
#include "io/import_fashion.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet import fashion-mnist [--src DIR] --out DIR\n"
            "\n"
            "Converts Fashion-MNIST's gzip IDX files into DIR/train.h5 (60000 samples)\n"
            "and DIR/test.h5 (10000 samples): /features float32 [N, 784] scaled to\n"
            "[0, 1], /labels int32 [N] in 0..9, root attributes `source` and\n"
            "`num_classes`. Each file is written under a temporary name and renamed\n"
            "when complete; DIR is created if missing.\n"
            "\n"
            "options:\n"
            "  --src DIR   where train-images-idx3-ubyte.gz and the three other IDX\n"
            "              files are (default %s, from Debian's\n"
            "              dataset-fashion-mnist package)\n"
            "  --out DIR   where to write train.h5 and test.h5\n"
            "  -h, --help  this text\n",
            PN_FASHION_MNIST_SRC);
}

static int misuse(const char *message)
{
    fprintf(stderr, "pipenet: error: %s (see `pipenet import --help`)\n", message);
    return 2;
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

int pn_cmd_import(int argc, char **argv)
{
    static const struct option long_options[] = {
        {"src", required_argument, NULL, 's'},
        {"out", required_argument, NULL, 'o'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *src = PN_FASHION_MNIST_SRC, *out = NULL;
    char message[256];
    opterr = 0;
    optind = 1;
    for (int c; (c = getopt_long(argc, argv, ":h", long_options, NULL)) != -1;) {
        switch (c) {
        case 's': src = optarg; break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
            snprintf(message, sizeof message, "option '%s' needs a value", argv[optind - 1]);
            return misuse(message);
        default:
            snprintf(message, sizeof message, "unknown option '%s'", argv[optind - 1]);
            return misuse(message);
        }
    }
    if (optind >= argc) return misuse("which dataset? `pipenet import fashion-mnist --out DIR`");
    if (strcmp(argv[optind], "fashion-mnist") != 0) {
        snprintf(message, sizeof message, "unknown dataset '%s' (known: fashion-mnist)",
                 argv[optind]);
        return misuse(message);
    }
    if (optind + 1 < argc) {
        snprintf(message, sizeof message, "unexpected argument '%s'", argv[optind + 1]);
        return misuse(message);
    }
    if (!out) return misuse("import fashion-mnist needs --out DIR");

    printf("importing Fashion-MNIST from %s into %s\n", src, out);
    fflush(stdout);
    double start = seconds_now();
    if (pn_import_fashion_mnist(src, out, report, NULL) < 0)
        return pn_cli_fail(pn_error_message());
    printf("done in %.1f s\n", seconds_now() - start);
    return 0;
}
