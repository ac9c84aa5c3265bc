/* What `pipenet infer` shares between one process and pipeline stages
 * (cli/infer_common.h): the usage text, the output layer, the --out writer and the
 * lines printed. */
#include "cli/infer_common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/choices.h"
#include "base/error.h"
#include "math/device.h"

void infer_usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet infer MODEL.h5 --data FILE [options]\n"
            "       mpirun -np P pipenet infer MODEL.h5 --data FILE [--stages P] [options]\n"
            "\n"
            "Runs MODEL.h5 (from `pipenet export`, a training snapshot, or a snapshot\n"
            "directory: its newest snapshot that verifies) forward over the samples of a\n"
            "dataset file in order. When the file holds the labels or targets of the\n"
            "model's loss layer, prints the mean loss and the accuracy (a classification),\n"
            "the RMSE (mse) or the AUC (sigmoid_xent). Alone it runs in one process, on the\n"
            "host or one GPU. Under mpirun (or srun) it splits the model into P pipeline\n"
            "stages as training does, one rank each: a rank reads only its stage's\n"
            "parameters and the inputs its layers take, and the batches are pipelined\n"
            "through the stages; outputs and printed numbers are one process's.\n"
            "\n"
            "options:\n"
            "  --data FILE     dataset HDF5 file with the model's inputs (required)\n"
            "  --out FILE      write /outputs float32 [N, k] (the output's values); for a\n"
            "                  classification's logits also /predictions int32 [N]\n"
            "                  (argmax) and /scores float32 [N, k] (softmax)\n"
            "  --batch B       samples per forward                              [256]\n"
            "  --output LAYER  the layer whose values to write [the loss's prediction]\n"
            "  --device D      where the model runs (cuda: the first GPU visible; under\n"
            "                  mpirun node-local rank mod visible GPUs)          [%s]\n",
            pn_device_request_name(PN_DEVICE_REQUEST_CPU));
    pn_choice_help(out, &pn_device_requests, 18);
    fprintf(out,
            "  --stages P      pipeline stages, one rank each: P must be the number of\n"
            "                  ranks (mpirun -np P) [under mpirun: the ranks; else 1]\n"
            "  --in-flight N   batches in the pipe at once across stages   [2 x stages]\n"
            "  -h, --help      this text\n");
}

int infer_find_output(const pn_graph *g, int default_node, const infer_options *o,
                      bool inputs_ok, infer_output *out)
{
    out->name = o->output ? o->output : g->nodes[default_node].name;
    out->node = pn_graph_find(g, out->name);
    const pn_graph_node *n = out->node >= 0 ? &g->nodes[out->node] : NULL;
    if (!n || n->layer->out_shape.ids || (n->is_input && !inputs_ok))
        return pn_error_set(PN_ERR_INVALID, "--output: %s has no float layer '%s'%s", o->model,
                            out->name, n && n->is_input && !n->layer->out_shape.ids
                                           ? " (a data input, which no stage computes)" : "");
    out->seq = n->layer->out_shape.seq;
    out->width = n->layer->out_shape.width;
    out->loss = pn_graph_loss_of(g, out->node);
    int classifies = pn_model_classifies_node(g, out->node);
    out->classes = classifies == 1 || classifies == 2;
    out->binary = classifies == 2;
    return PN_OK;
}

/* Sets scores [rows, classes] to the softmax of each row of logits; predictions[r] is
 * the row's largest entry (the first of equals). */
static void softmax_rows(const float *logits, float *scores, int *predictions, long rows,
                         int classes)
{
    for (long r = 0; r < rows; r++) {
        const float *l = logits + r * classes;
        float *s = scores + r * classes;
        int best = 0;
        for (int j = 1; j < classes; j++)
            if (l[j] > l[best]) best = j;
        predictions[r] = best;
        double sum = 0.0;
        for (int j = 0; j < classes; j++) sum += s[j] = expf(l[j] - l[best]);
        for (int j = 0; j < classes; j++) s[j] = (float)(s[j] / sum);
    }
}

/* A binary classifier's one logit per row: scores = its sigmoid, the probability of
 * label 1, and predictions 1 where that is >= 0.5. */
static void sigmoid_rows(const float *logits, float *scores, int *predictions, long rows)
{
    for (long r = 0; r < rows; r++) {
        scores[r] = (float)(1.0 / (1.0 + exp(-(double)logits[r])));
        predictions[r] = scores[r] >= 0.5f;
    }
}

int infer_writer_open(infer_writer *w, const infer_options *o, const infer_output *out, long n)
{
    *w = (infer_writer){.out = *out};
    if (!o->out) return PN_OK;
    pn_predictions_spec spec = {.n = n, .seq = out->seq, .width = out->width,
                                .classes = out->classes, .chunk_rows = o->batch,
                                .model = o->model, .data = o->data, .output = out->name};
    PN_TRY(pn_predictions_create(&w->w, o->out, &spec));
    size_t rows = (size_t)o->batch * (size_t)out->seq, values = rows * (size_t)out->width;
    if (out->classes && (!(w->scores = malloc(values * sizeof *w->scores)) ||
                         !(w->predictions = malloc(rows * sizeof *w->predictions))))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a batch of %d", o->batch);
    return PN_OK;
}

int infer_writer_put(infer_writer *w, long row0, int rows, const float *values)
{
    if (!w->w) return PN_OK;
    long n = (long)rows * w->out.seq;
    if (w->out.binary)
        sigmoid_rows(values, w->scores, w->predictions, n);
    else if (w->out.classes)
        softmax_rows(values, w->scores, w->predictions, n, w->out.width);
    return pn_predictions_write(w->w, row0, rows, values, w->predictions, w->scores);
}

int infer_writer_close(infer_writer *w, bool keep)
{
    int rc = w->w ? pn_predictions_close(w->w, keep) : PN_OK;
    free(w->scores);
    free(w->predictions);
    *w = (infer_writer){0};
    return rc;
}

void infer_print_loss(const pn_loss_summary *s, const infer_options *o, const char *skipped_dataset,
                      const char *skipped_input)
{
    long rows = s->rows;
    if (rows > 0 && !isnan(s->accuracy))
        printf("accuracy %.2f%% (%.0f of %ld), mean loss %.4f\n", 100.0 * s->accuracy,
               s->accuracy * rows, rows, s->mean_loss);
    else if (rows > 0 && !isnan(s->rmse))
        printf("RMSE %.4f (%ld rows), mean loss %.4f\n", s->rmse, rows, s->mean_loss);
    else if (rows > 0 && !isnan(s->auc))
        printf("AUC %.4f (%ld rows), log-loss %.4f\n", s->auc, rows, s->mean_loss);
    else if (rows > 0)
        printf("mean loss %.4f over %ld rows\n", s->mean_loss, rows);
    else if (skipped_dataset)
        printf("no loss: %s has no dataset '%s' for input '%s'\n", o->data, skipped_dataset,
               skipped_input);
}

void infer_print_written(const pn_graph *g, const infer_options *o, const infer_output *out,
                         long n)
{
    char shape[64], rows[64];
    snprintf(shape, sizeof shape, "[%ld, %s%d]", n, out->seq > 1 ? "seq, " : "", out->width);
    snprintf(rows, sizeof rows, "[%ld%s]", n, out->seq > 1 ? ", seq" : "");
    printf("wrote %s: /outputs float32 %s", o->out, shape);
    if (out->classes) {
        printf(", /predictions int32 %s, /scores float32 %s\n", rows, shape);
    } else if (out->loss >= 0) {
        const pn_graph_node *loss = &g->nodes[out->loss];
        printf(" (no /predictions or /scores: '%s' is the prediction of loss '%s' (%s), "
               "not a classification's logits)\n", out->name, loss->name,
               loss->layer->type->name);
    } else {
        printf(" (no /predictions or /scores: '%s' is no classification loss's logits)\n",
               out->name);
    }
}
