/* `pipenet export SNAPSHOT --out MODEL.h5`: a training snapshot (or the newest one
 * of a snapshot directory) as a pipenet-model file, the config and the parameter
 * values without optimizer state, for `pipenet infer` and the C API (pipenet.h).
 * The snapshot is checked first: its config must build and every parameter fit. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/path.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "model/model.h"
#include "train/train_config.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet export SNAPSHOT --out MODEL.h5\n"
            "\n"
            "Writes the model of a training snapshot (`pipenet train --snapshot-dir`) as a\n"
            "pipenet-model file: the model's JSON config and every parameter's values,\n"
            "without optimizer state. SNAPSHOT is a snapshot file, or a snapshot directory\n"
            "whose newest valid snapshot is taken. `pipenet infer` and programs using\n"
            "pipenet.h load the result (docs/inference.md). Runs on one process.\n"
            "\n"
            "options:\n"
            "  --out FILE   the model file to write (required; not SNAPSHOT, nor a\n"
            "               directory or a stream)\n"
            "  -h, --help   this text\n");
}

enum { OPT_OUT = 256 };

static const struct option longopts[] = {
    {"out", required_argument, NULL, OPT_OUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Reads src (a snapshot or model file), checks that it makes a model, and writes that
 * model to out. */
static int export_model(const char *src, const char *out)
{
    struct stat sb;
    pn_train_state *st;
    PN_TRY(pn_snapshot_read(src, NULL, &st));
    pn_model *check = NULL;
    long floats = 0;
    for (int i = 0; i < st->n_params; i++) floats += (long)st->params[i].rows * st->params[i].cols;
    int rc = pn_model_from_state(&check, st, src);
    pn_model_free(check);
    if (rc == PN_OK) rc = pn_snapshot_write(out, st, PN_FORMAT_MODEL); /* values, no slots */
    if (rc == PN_OK && stat(out, &sb) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot stat '%s' after writing it", out);
    if (rc == PN_OK)
        printf("exported %s (%s, step %ld) to %s: %d parameters, %ld floats, %lld bytes\n",
               src, st->format, st->step, out, st->n_params, floats, (long long)sb.st_size);
    pn_train_state_free(st);
    return rc;
}

int pn_cmd_export(int argc, char **argv)
{
    const char *out = NULL;
    int c;
    optind = 1;
    while ((c = pn_opt_next(argc, argv, longopts)) != -1) {
        switch (c) {
        case OPT_OUT: out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: return PN_EXIT_USAGE; /* pn_opt_next said why */
        }
    }
    if (optind != argc - 1 || !out) {
        if (optind != argc - 1)
            pn_opt_report("export takes exactly one SNAPSHOT (got %d)\n", argc - optind);
        else
            pn_opt_report("export needs --out FILE\n");
        usage(stderr);
        return PN_EXIT_USAGE;
    }
    char src[PN_PATH_MAX + 64];
    if (pn_snapshot_resolve(argv[optind], src, sizeof src) < 0) return pn_cli_fail(pn_error_message());
    const pn_named_path input = {src, "the file exported from"};
    if (pn_path_check_output("--out", out, &input, 1, false) < 0)
        return pn_cli_misuse("%s", pn_error_message()); /* a wrong command line */
    if (export_model(src, out) < 0) return pn_cli_fail(pn_error_message());
    return 0;
}
