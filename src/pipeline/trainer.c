/* The single-process training loop: setup, steps, per-epoch evaluation. */
#include "pipeline/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "io/reader.h"
#include "layers/layer_types.h"
#include "math/ops.h"
#include "pipeline/metrics.h"
#include "pipeline/network.h"
#include "pipeline/optimizer.h"
#include "pipeline/progress.h"

typedef struct trainer {
    const pn_graph *graph;
    const pn_train_config *cfg;
    pn_params *params;
    pn_network *net;
    pn_optimizer *opt;
    pn_reader *train_data, *eval_data;
    pn_reader_field *fields;
    int *field_nodes; /* graph node fed by each field */
    int n_fields;
    pn_metrics *metrics;
    pn_progress progress;
    pn_optimizer_config opt_cfg; /* cfg->optimizer with the run's length filled in */
    long total_steps;
} trainer;

/* Threads for BLAS: the setting, else $OPENBLAS_NUM_THREADS, else every core. */
static int blas_threads(const pn_train_config *cfg)
{
    if (cfg->threads > 0) return cfg->threads;
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > 0 ? (int)cores : 1;
}

static int collect_fields(trainer *t)
{
    const pn_graph *g = t->graph;
    t->fields = calloc((size_t)g->n_nodes, sizeof *t->fields);
    t->field_nodes = calloc((size_t)g->n_nodes, sizeof *t->field_nodes);
    if (!t->fields || !t->field_nodes) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        if (!g->nodes[i].is_input || !pn_network_arg(t->net, i)) continue;
        t->fields[t->n_fields] = (pn_reader_field){.dataset = pn_data_layer_dataset(g->nodes[i].layer),
                                                   .shape = g->nodes[i].layer->out_shape,
                                                   .input = g->nodes[i].name};
        t->field_nodes[t->n_fields++] = i;
    }
    return PN_OK;
}

static int open_data(trainer *t)
{
    const pn_train_config *cfg = t->cfg;
    if (!cfg->data[0])
        return pn_error_set(PN_ERR_INVALID, "%s: no training data: give --data FILE or "
                                            "\"train\": {\"data\": ...}", t->graph->file);
    size_t cache = (size_t)cfg->data_cache_mb << 20;
    pn_reader_options train_opts = {.global_batch = cfg->batch, .first = 0, .count = cfg->batch,
                                    .shuffle = true, .seed = cfg->seed, .drop_last = true,
                                    .cache_bytes = cache};
    PN_TRY(pn_reader_open(&t->train_data, cfg->data, t->fields, t->n_fields, &train_opts));
    if (pn_reader_batches_per_epoch(t->train_data) < 1)
        return pn_error_set(PN_ERR_INVALID, "%s: %ld samples, fewer than one batch of %d",
                            cfg->data, pn_reader_samples(t->train_data), cfg->batch);
    if (cfg->eval[0]) {
        pn_reader_options eval_opts = train_opts;
        eval_opts.shuffle = eval_opts.drop_last = false;
        PN_TRY(pn_reader_open(&t->eval_data, cfg->eval, t->fields, t->n_fields, &eval_opts));
    }
    return PN_OK;
}

static int setup(trainer *t)
{
    const pn_graph *g = t->graph;
    if (pn_graph_loss_count(g) != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: layers: training needs exactly one loss layer "
                                            "(softmax_xent or mse), found %d",
                            g->file, pn_graph_loss_count(g));
    pn_math_set_threads(blas_threads(t->cfg));
    pn_device host = pn_device_host();
    PN_TRY(pn_params_create(&t->params, host));
    PN_TRY(pn_network_create(&t->net, g, NULL, host));
    PN_TRY(pn_network_bind(t->net, t->params));
    PN_TRY(pn_params_finalize(t->params));
    PN_TRY(pn_params_init_values(t->params, t->cfg->seed));
    PN_TRY(pn_network_plan(t->net, t->cfg->batch));
    PN_TRY(collect_fields(t));
    PN_TRY(open_data(t));
    long per_epoch = pn_reader_batches_per_epoch(t->train_data);
    t->total_steps = t->cfg->steps > 0 ? t->cfg->steps : (long)t->cfg->epochs * per_epoch;
    t->opt_cfg = t->cfg->optimizer;
    if (t->opt_cfg.schedule == PN_LR_COSINE && t->opt_cfg.total_steps == 0)
        t->opt_cfg.total_steps = t->total_steps;
    PN_TRY(pn_optimizer_create(&t->opt, &t->opt_cfg, t->params));
    if (t->cfg->metrics[0]) PN_TRY(pn_metrics_open(&t->metrics, t->cfg->metrics, 0));
    return PN_OK;
}

static void teardown(trainer *t)
{
    pn_metrics_close(t->metrics);
    if (t->eval_data) pn_reader_close(t->eval_data);
    if (t->train_data) pn_reader_close(t->train_data);
    pn_optimizer_free(t->opt);
    pn_network_free(t->net);
    pn_params_free(t->params);
    free(t->fields);
    free(t->field_nodes);
}

/* Copies a batch into the network's data arguments. */
static int feed(trainer *t, const pn_batch *b)
{
    PN_TRY(pn_network_set_batch(t->net, b->rows));
    for (int f = 0; f < t->n_fields; f++) {
        pn_arg *a = pn_network_arg(t->net, t->field_nodes[f]);
        size_t rows = (size_t)pn_arg_rows(a);
        if (a->shape.ids)
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, b->ids[f], rows * sizeof(int)));
        else
            PN_TRY(pn_buffer_write(&a->value_buf, 0, b->values[f],
                                   rows * (size_t)a->shape.width * sizeof(float)));
    }
    return PN_OK;
}

/* Runs the evaluation set through the network; returns mean loss and accuracy. */
static int evaluate(trainer *t, long step, double *loss, double *accuracy)
{
    long samples = pn_reader_samples(t->eval_data);
    long batches = (samples + t->cfg->batch - 1) / t->cfg->batch;
    PN_TRY(pn_reader_seek(t->eval_data, 0, 0));
    pn_network_reset_stats(t->net);
    pn_pass pass = {false, t->cfg->seed, step, 0};
    for (long i = 0; i < batches; i++) {
        const pn_batch *b;
        PN_TRY(pn_reader_next(t->eval_data, &b));
        PN_TRY(feed(t, b));
        pass.sample0 = b->sample0;
        PN_TRY(pn_network_forward(t->net, &pass, t->params));
    }
    pn_layer_stats s;
    pn_network_stats(t->net, &s);
    pn_network_reset_stats(t->net);
    *loss = s.rows > 0 ? s.loss_sum / s.rows : NAN;
    *accuracy = s.rows > 0 ? s.correct / s.rows : NAN;
    return PN_OK;
}

/* One optimizer step on batch b; returns its mean loss. */
static int train_step(trainer *t, const pn_batch *b, long step, double *loss)
{
    PN_TRY(feed(t, b));
    pn_pass pass = {true, t->cfg->seed, step, b->sample0};
    pn_network_reset_stats(t->net);
    PN_TRY(pn_network_forward(t->net, &pass, t->params));
    PN_TRY(pn_network_backward(t->net, &pass, t->params, t->cfg->batch));
    double scale = 1.0;
    if (t->opt_cfg.clip_norm > 0) {
        double sq;
        pn_matrix grads = pn_params_all_grads(t->params);
        PN_TRY(pn_sum_squares(&grads, &sq));
        scale = pn_optimizer_clip_scale(&t->opt_cfg, sq);
    }
    PN_TRY(pn_optimizer_step(t->opt, t->params, step, scale));
    pn_layer_stats s;
    pn_network_stats(t->net, &s);
    *loss = s.loss_sum / s.rows;
    if (!isfinite(*loss))
        return pn_error_set(PN_ERR_INVALID, "step %ld: the loss is %g: training diverged "
                                            "(lower the learning rate or set clip_norm)",
                            step, *loss);
    return PN_OK;
}

static int end_of_epoch(trainer *t, long step, long epoch, double epoch_loss, double seconds,
                        long samples, pn_train_result *r)
{
    char eval_text[96] = "";
    if (t->eval_data) {
        PN_TRY(evaluate(t, step, &r->eval_loss, &r->eval_accuracy));
        snprintf(eval_text, sizeof eval_text, "  eval loss %.4f  eval accuracy %.2f%%",
                 r->eval_loss, 100.0 * r->eval_accuracy);
        if (t->metrics) PN_TRY(pn_metrics_eval(t->metrics, step, epoch, r->eval_loss, r->eval_accuracy));
    }
    pn_progress_print(&t->progress, "epoch %ld: train loss %.4f%s  (%.1f s, %.0f samples/s)",
                      epoch + 1, epoch_loss, eval_text, seconds, samples / seconds);
    return PN_OK;
}

static int run(trainer *t, pn_train_result *r)
{
    const pn_train_config *cfg = t->cfg;
    long per_epoch = pn_reader_batches_per_epoch(t->train_data);
    long total = t->total_steps;
    pn_progress_start(&t->progress, stdout, 0, total, cfg->log_every_s);
    pn_progress_print(&t->progress,
                      "training %s: %ld parameters, %ld samples, batch %d, %ld steps/epoch, "
                      "%ld steps, %d BLAS thread(s)",
                      t->graph->name, (long)pn_params_elements(t->params),
                      pn_reader_samples(t->train_data), cfg->batch, per_epoch, total,
                      blas_threads(cfg));
    PN_TRY(pn_reader_seek(t->train_data, 0, 0));
    double start = pn_now(), epoch_start = start, epoch_loss = 0.0;
    long epoch_steps = 0, step = 0, epoch = 0;
    while (step < total) {
        const pn_batch *b;
        double t0 = pn_now();
        PN_TRY(pn_reader_next(t->train_data, &b));
        epoch = b->epoch;
        double loss;
        PN_TRY(train_step(t, b, step, &loss));
        double lr = pn_optimizer_lr(&t->opt_cfg, step), dt = pn_now() - t0;
        step++;
        epoch_loss += loss;
        epoch_steps++;
        r->last_loss = loss;
        if (t->metrics)
            PN_TRY(pn_metrics_step(t->metrics, step, epoch, loss, lr, cfg->batch / dt));
        pn_progress_step(&t->progress, step, epoch + 1, loss,
                         (double)step * cfg->batch / (pn_now() - start));
        if (b->index == per_epoch - 1 || step == total) {
            double now = pn_now();
            PN_TRY(end_of_epoch(t, step, epoch, epoch_loss / epoch_steps, now - epoch_start,
                                epoch_steps * cfg->batch, r));
            epoch_start = pn_now();
            start += epoch_start - now; /* evaluation time is not training time */
            epoch_loss = 0.0;
            epoch_steps = 0;
        }
    }
    pn_progress_finish(&t->progress);
    r->steps = step;
    r->seconds = pn_now() - start;
    r->samples_per_s = r->seconds > 0 ? (double)step * cfg->batch / r->seconds : 0.0;
    return PN_OK;
}

int pn_train(const pn_graph *g, const pn_train_config *cfg, pn_train_result *result)
{
    trainer t = {.graph = g, .cfg = cfg};
    pn_train_result r = {0, NAN, NAN, NAN, 0, 0};
    int rc = setup(&t);
    if (rc == PN_OK) rc = run(&t, &r);
    teardown(&t);
    if (result) *result = r;
    return rc;
}
