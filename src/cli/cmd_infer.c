/* `pipenet infer MODEL.h5 --data FILE`: runs a model file (pipenet-model or
 * snapshot) forward over a dataset file in file order, in one process on the host
 * or one GPU (--device), through the C API (pipenet.h), or under mpirun across
 * pipeline stages (cli/infer_staged.c). When the file holds the inputs the loss
 * layer needs, prints the mean loss with the accuracy (a classification), the RMSE
 * (mse) or the AUC; --out writes the output's raw values and, for a classification's
 * logits only, argmax predictions and softmax scores (cli/infer_common.h). */
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
#include "cli/infer_common.h"
#include "cli/options.h"
#include "io/predictions.h"
#include "io/reader.h"
#include "model/model.h"
#include "train/train_config.h"

enum { OPT_DATA = 256, OPT_OUT, OPT_BATCH, OPT_OUTPUT, OPT_DEVICE, OPT_STAGES, OPT_IN_FLIGHT };

static const struct option longopts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"out", required_argument, NULL, OPT_OUT},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"output", required_argument, NULL, OPT_OUTPUT},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"in-flight", required_argument, NULL, OPT_IN_FLIGHT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

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
        case OPT_STAGES: rc = pn_opt_int("stages", optarg, 1, 4096, &o->stages); break;
        case OPT_IN_FLIGHT: rc = pn_opt_int("in-flight", optarg, 1, 4096, &o->in_flight); break;
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
        infer_usage(stderr);
        return -1;
    }
    o->model = argv[optind];
    if (o->out && strlen(o->out) >= PN_PATH_MAX)
        return pn_opt_report("--out: expected a shorter path, got '%s'", o->out);
    return 0;
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

/* One run's buffers, a batch of each: the inputs the reader gives and the output's
 * raw values; the --out file's writer. */
typedef struct infer_run {
    infer_data d;
    infer_writer w;
    long n;               /* samples in the file */
    const void **inputs;
    const int **lengths;
    pn_sparse_rows *sparse; /* [inputs] the rows a sparse input's data points at */
    float *outputs;
} infer_run;

/* Opens the data and the --out file, and allocates a batch's buffers. */
static int start_run(const pn_model *m, const infer_options *o, const infer_output *out,
                     infer_run *r)
{
    PN_TRY(open_data(m, o, out->node, &r->d));
    r->n = pn_reader_samples(r->d.reader);
    PN_TRY(infer_writer_open(&r->w, o, out, r->n));
    size_t values = (size_t)o->batch * (size_t)out->seq * (size_t)out->width;
    int inputs = pn_model_input_count(m);
    if (!(r->outputs = malloc(values * sizeof *r->outputs)) ||
        !(r->inputs = calloc((size_t)inputs, sizeof *r->inputs)) ||
        !(r->lengths = calloc((size_t)inputs, sizeof *r->lengths)) ||
        !(r->sparse = calloc((size_t)inputs, sizeof *r->sparse)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a batch of %d", o->batch);
    return PN_OK;
}

/* Runs every batch of the file forward and writes it to the --out file, if any. */
static int run_batches(pn_model *m, const infer_options *o, const infer_output *out,
                       infer_run *r)
{
    for (long row0 = 0; row0 < r->n; row0 += o->batch) {
        const pn_batch *b;
        PN_TRY(pn_reader_next(r->d.reader, &b));
        for (int i = 0; i < pn_model_input_count(m); i++) {
            int f = r->d.field_of[i];
            r->inputs[i] = f < 0 ? NULL : b->values[f] ? (const void *)b->values[f]
                                                       : (const void *)b->ids[f];
            if (f >= 0 && r->d.fields[f].shape.sparse) { /* the batch's rows, as the API takes */
                r->sparse[i] = (pn_sparse_rows){b->csr[f].offsets, b->csr[f].cols,
                                                b->csr[f].vals, b->csr[f].fields};
                r->inputs[i] = &r->sparse[i];
            }
            r->lengths[i] = r->d.lengths_of[i] < 0 ? NULL : b->ids[r->d.lengths_of[i]];
        }
        PN_TRY(pn_model_forward_lengths(m, b->rows, r->inputs, r->lengths, out->name,
                                        r->outputs));
        PN_TRY(infer_writer_put(&r->w, row0, b->rows, r->outputs));
    }
    return PN_OK;
}

static void free_run(infer_run *r)
{
    free(r->outputs);
    free(r->inputs);
    free(r->lengths);
    free(r->sparse);
    close_data(&r->d);
}

static int infer(const infer_options *o)
{
    pn_model *m;
    PN_TRY(pn_model_load_on(&m, o->model, pn_device_request_name((pn_device_request)o->device)));
    infer_output out = {.loss = -1};
    infer_run r = {.d = {.skipped = -1}};
    int rc = infer_find_output(pn_model_graph(m), pn_model_output_node(m), o, true, &out);
    if (rc == PN_OK) rc = start_run(m, o, &out, &r);
    double t0 = pn_now();
    if (rc == PN_OK) rc = run_batches(m, o, &out, &r);
    double seconds = pn_now() - t0;
    int rc_close = infer_writer_close(&r.w, rc == PN_OK);
    if (rc == PN_OK) rc = rc_close;
    if (rc == PN_OK) {
        const char *dev = pn_model_device(m);
        bool gpu = pn_model_device_of(m).kind != PN_DEVICE_HOST;
        printf("infer %s on %s: %ld samples, output '%s' (%d per sample), %.2f s "
               "(%.0f samples/s)%s%s\n", o->model, o->data, r.n, out.name,
               out.width * out.seq, seconds, seconds > 0 ? r.n / seconds : 0.0,
               gpu ? ", device " : "", gpu ? dev : "");
        pn_loss_summary sum;
        sum.rows = pn_model_loss(m, &sum.mean_loss, &sum.accuracy);
        sum.rmse = pn_model_rmse(m);
        sum.auc = pn_model_auc(m);
        int k = r.d.skipped;
        infer_print_loss(&sum, o, k >= 0 ? pn_model_input_dataset(m, k) : NULL,
                         k >= 0 ? pn_model_input_name(m, k) : NULL);
        if (o->out) infer_print_written(pn_model_graph(m), o, &out, r.n);
    }
    free_run(&r);
    pn_model_free(m);
    return rc;
}

int pn_cmd_infer(int argc, char **argv)
{
    infer_options o = {.batch = 256};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        infer_usage(stdout);
        return 0;
    }
    if (parsed < 0) return PN_EXIT_USAGE;
    if (pn_cli_launcher_ranks() > 1 || o.stages > 1) /* across stages, one rank each */
        return infer_staged(&o);
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
