/* `pipenet infer MODEL.h5 --data FILE`: runs a model file (pipenet-model or
 * snapshot) forward over a dataset file in file order, in one process on the host
 * or one GPU (--device), through the C API (pipenet.h). Prints accuracy and mean loss when the file holds
 * the labels the loss layer needs; --out writes argmax predictions and softmax
 * scores of the output. */
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/path.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "io/predictions.h"
#include "io/reader.h"
#include "model/model.h"
#include "pipeline/train_config.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet infer MODEL.h5 --data FILE [options]\n"
            "\n"
            "Runs MODEL.h5 (from `pipenet export`, a training snapshot, or a snapshot\n"
            "directory: its newest snapshot that verifies) forward over the samples of a\n"
            "dataset file in order. When the file holds the labels of the\n"
            "model's loss layer, prints the accuracy and the mean loss. Runs in one process,\n"
            "on the host or one GPU: pipelined inference across ranks is not supported, and\n"
            "it refuses to start as one of several MPI ranks.\n"
            "\n"
            "options:\n"
            "  --data FILE     dataset HDF5 file with the model's inputs (required)\n"
            "  --out FILE      write /predictions int32 [N] (argmax of the output) and\n"
            "                  /scores float32 [N, classes] (its softmax)\n"
            "  --batch B       samples per forward                              [256]\n"
            "  --output LAYER  the layer to predict from   [the layer feeding the loss]\n"
            "  --device D      where the model runs (cuda: the first GPU visible)  [cpu]\n");
    pn_choice_help(out, &pn_device_requests, 18);
    fprintf(out, "  -h, --help      this text\n");
}

enum { OPT_DATA = 256, OPT_OUT, OPT_BATCH, OPT_OUTPUT, OPT_DEVICE };

static const struct option longopts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"out", required_argument, NULL, OPT_OUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct infer_options {
    const char *model, *data, *out, *output;
    int batch;
    int device; /* pn_device_request */
} infer_options;

/* The open inputs of a run: reader fields, and the model input each one feeds. */
typedef struct infer_data {
    pn_reader *reader;
    int n_fields;
    pn_reader_field *fields;
    int *field_of;       /* [model inputs] field index, or -1 (not read) */
    int *lengths_of;     /* [model inputs] field of the input's lengths, or -1 */
    int skipped;         /* an input whose dataset the file lacks (labels), or -1 */
} infer_data;

/* Parses argv; returns 0, 1 for --help, -1 on misuse (already reported). */
static int parse_options(int argc, char **argv, infer_options *o)
{
    int c, rc = 0;
    optind = 1;
    while (rc == 0 && (c = pn_opt_next(argc, argv, longopts)) != -1) {
        switch (c) {
        case OPT_DATA: o->data = optarg; break;
        case OPT_OUT: o->out = optarg; break;
        case OPT_OUTPUT: o->output = optarg; break;
        case OPT_BATCH: rc = pn_opt_int("batch", optarg, 1, 1 << 20, &o->batch); break;
        case OPT_DEVICE:
            rc = pn_opt_choice("device", &pn_device_requests, optarg, &o->device);
            break;
        case 'h': return 1;
        default: return -1; /* pn_opt_next said why */
        }
    }
    if (rc < 0) return rc;
    if (optind != argc - 1 || !o->data) {
        if (optind != argc - 1)
            pn_opt_report("infer takes exactly one MODEL.h5 (got %d)\n", argc - optind);
        else
            pn_opt_report("infer needs --data FILE\n");
        usage(stderr);
        return -1;
    }
    o->model = argv[optind];
    if (o->out && strlen(o->out) >= PN_PATH_MAX)
        return pn_opt_report("--out: expected a shorter path, got '%s'", o->out);
    return 0;
}

/* The number of ranks when started by mpirun or srun, else 1 (MPI is never called). */
static long launcher_ranks(void)
{
    const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && atol(v) > 1) return atol(v);
    }
    return 1;
}

/* True when node output depends on graph node input. */
static bool depends_on(const pn_graph *g, int output, int input)
{
    bool *reach = calloc((size_t)g->n_nodes, sizeof *reach);
    if (!reach) return true;
    reach[output] = true;
    for (int i = output; i > input; i--)
        if (reach[i])
            for (int k = 0; k < g->nodes[i].n_inputs; k++) reach[g->nodes[i].inputs[k]] = true;
    bool r = reach[input];
    free(reach);
    return r;
}

/* Which of the file's datasets exist: *exists[i] for model input i. */
static int probe_datasets(const pn_model *m, const char *path, bool *exists)
{
    int n = pn_model_input_count(m);
    const char **names = calloc((size_t)n, sizeof *names);
    if (!names) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n; i++) names[i] = pn_model_input_dataset(m, i);
    int rc = pn_reader_probe(path, names, n, exists);
    free(names);
    return rc;
}

/* Opens the data file with a field for every input it holds, and for every input
 * the output needs (a missing one is then reported naming the file and dataset). */
static int open_data(const pn_model *m, const infer_options *o, int out_node, infer_data *d)
{
    const pn_graph *g = pn_model_graph(m);
    int n = pn_model_input_count(m);
    bool *exists = calloc((size_t)n, sizeof *exists);
    d->fields = calloc(2 * (size_t)n, sizeof *d->fields); /* an input and its lengths */
    d->field_of = calloc((size_t)n, sizeof *d->field_of);
    d->lengths_of = calloc((size_t)n, sizeof *d->lengths_of);
    int rc = exists && d->fields && d->field_of && d->lengths_of
                 ? PN_OK
                 : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK) rc = probe_datasets(m, o->data, exists);
    for (int i = 0; rc == PN_OK && i < n; i++) {
        int node = pn_graph_find(g, pn_model_input_name(m, i));
        d->field_of[i] = d->lengths_of[i] = -1;
        if (!exists[i] && !depends_on(g, out_node, node)) {
            d->skipped = i;
            continue;
        }
        d->field_of[i] = d->n_fields;
        const pn_graph_node *user;
        int limit = pn_graph_id_limit(g, node, &user);
        d->fields[d->n_fields++] = (pn_reader_field){
            .dataset = pn_model_input_dataset(m, i),
            .shape = g->nodes[node].layer->out_shape,
            .input = pn_model_input_name(m, i),
            .id_limit = limit,
            .id_user = user ? user->name : NULL};
        const char *lengths = pn_model_input_lengths(m, i);
        if (!lengths) continue;
        d->lengths_of[i] = d->n_fields;
        d->fields[d->n_fields++] = pn_reader_lengths_field(
            pn_model_input_name(m, i), lengths, g->nodes[node].layer->out_shape.seq);
    }
    free(exists);
    pn_reader_options opts = {.global_batch = o->batch, .first = 0, .count = o->batch,
                              .shuffle = false, .drop_last = false};
    if (rc == PN_OK) rc = pn_reader_open(&d->reader, o->data, d->fields, d->n_fields, &opts);
    return rc;
}

static void close_data(infer_data *d)
{
    if (d->reader) pn_reader_close(d->reader);
    free(d->fields);
    free(d->field_of);
    free(d->lengths_of);
}

/* Replaces each row of scores [rows, classes] with its softmax; predictions[r] is
 * the row's largest entry. */
static void softmax_rows(float *scores, int *predictions, long rows, int classes)
{
    for (long r = 0; r < rows; r++) {
        float *s = scores + r * classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (s[j] > s[best]) best = j;
        predictions[r] = best;
        float max = s[best];
        double sum = 0.0;
        for (int j = 0; j < classes; j++) sum += s[j] = expf(s[j] - max);
        for (int j = 0; j < classes; j++) s[j] = (float)(s[j] / sum);
    }
}

static int infer(const infer_options *o)
{
    pn_model *m;
    PN_TRY(pn_model_load_on(&m, o->model, pn_device_request_name((pn_device_request)o->device)));
    const pn_graph *g = pn_model_graph(m);
    const char *output = o->output ? o->output : pn_model_output_name(m);
    int out_node = pn_graph_find(g, output);
    int classes = pn_model_output_size(m, output);
    infer_data d = {.skipped = -1};
    pn_predictions *w = NULL;
    float *scores = NULL;
    int *predictions = NULL;
    const void **inputs = NULL;
    const int **lengths = NULL;
    int rc = PN_OK;
    if (out_node < 0 || classes < 0)
        rc = pn_error_set(PN_ERR_INVALID, "--output: %s has no float layer '%s'", o->model,
                          output);
    int seq = rc == PN_OK ? g->nodes[out_node].layer->out_shape.seq : 1;
    if (rc == PN_OK) classes /= seq;
    if (rc == PN_OK) rc = open_data(m, o, out_node, &d);
    long n = rc == PN_OK ? pn_reader_samples(d.reader) : 0;
    if (rc == PN_OK && o->out)
        rc = pn_predictions_create(&w, o->out, n, seq, classes, o->batch, o->model, o->data);
    size_t rows = (size_t)o->batch * (size_t)seq;
    if (rc == PN_OK &&
        (!(scores = malloc(rows * (size_t)classes * sizeof *scores)) ||
         !(predictions = malloc(rows * sizeof *predictions)) ||
         !(inputs = calloc((size_t)pn_model_input_count(m), sizeof *inputs)) ||
         !(lengths = calloc((size_t)pn_model_input_count(m), sizeof *lengths))))
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory for a batch of %d", o->batch);
    double t0 = pn_now();
    for (long row0 = 0; rc == PN_OK && row0 < n; row0 += o->batch) {
        const pn_batch *b;
        rc = pn_reader_next(d.reader, &b);
        for (int i = 0; rc == PN_OK && i < pn_model_input_count(m); i++) {
            int f = d.field_of[i];
            inputs[i] = f < 0 ? NULL : b->values[f] ? (const void *)b->values[f]
                                                    : (const void *)b->ids[f];
            lengths[i] = d.lengths_of[i] < 0 ? NULL : b->ids[d.lengths_of[i]];
        }
        if (rc == PN_OK)
            rc = pn_model_forward_lengths(m, b->rows, inputs, lengths, output, scores);
        if (rc == PN_OK && o->out) {
            softmax_rows(scores, predictions, (long)b->rows * seq, classes);
            rc = pn_predictions_write(w, row0, b->rows, predictions, scores);
        }
    }
    double seconds = pn_now() - t0;
    if (w) {
        int rc_close = pn_predictions_close(w, rc == PN_OK);
        if (rc == PN_OK) rc = rc_close;
    }
    if (rc == PN_OK) {
        const char *dev = pn_model_device(m);
        printf("infer %s on %s: %ld samples, output '%s' (%d per sample), %.2f s "
               "(%.0f samples/s)%s%s\n", o->model, o->data, n, output, classes * seq, seconds,
               seconds > 0 ? n / seconds : 0.0, strcmp(dev, "cpu") ? ", device " : "",
               strcmp(dev, "cpu") ? dev : "");
        double loss, accuracy;
        long loss_rows = pn_model_loss(m, &loss, &accuracy);
        if (loss_rows > 0 && !isnan(accuracy))
            printf("accuracy %.2f%% (%.0f of %ld), mean loss %.4f\n", 100.0 * accuracy,
                   accuracy * loss_rows, loss_rows, loss);
        else if (loss_rows > 0)
            printf("mean loss %.4f over %ld rows\n", loss, loss_rows);
        else if (d.skipped >= 0)
            printf("no accuracy: %s has no dataset '%s' for input '%s'\n", o->data,
                   pn_model_input_dataset(m, d.skipped), pn_model_input_name(m, d.skipped));
        if (o->out)
            printf("wrote %s: /predictions int32 [%ld%s], /scores float32 [%ld, %s%d]\n", o->out,
                   n, seq > 1 ? ", seq" : "", n, seq > 1 ? "seq, " : "", classes);
    }
    free(scores);
    free(predictions);
    free(inputs);
    free(lengths);
    close_data(&d);
    pn_model_free(m);
    return rc;
}

int pn_cmd_infer(int argc, char **argv)
{
    infer_options o = {.batch = 256};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return PN_EXIT_USAGE;
    long ranks = launcher_ranks();
    if (ranks > 1) {
        char msg[160];
        snprintf(msg, sizeof msg, "infer runs in one process, but was started as one of %ld "
                                  "ranks (run it without mpirun/srun)", ranks);
        return pn_cli_fail(msg);
    }
    const pn_named_path inputs[] = {{o.model, "the model file"}, {o.data, "the data file"}};
    if (o.out && pn_path_check_output("--out", o.out, inputs, 2, false) < 0)
        return pn_cli_misuse("%s", pn_error_message()); /* a wrong command line */
    /* the device first: cuda that cannot run here fails before any file is read */
    pn_device dev;
    if (pn_device_resolve((pn_device_request)o.device, 0, &dev) < 0)
        return pn_cli_fail(pn_error_message());
    if (infer(&o) < 0) return pn_cli_fail(pn_error_message());
    return 0;
}
