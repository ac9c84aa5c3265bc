/* Training-step benchmark: steady-state samples/s of a model (default
 * models/fashion_mlp.json) at batch 128 with 1 and with 2 BLAS threads, and beside
 * it, interleaved in the same run, the time of the step's GEMMs alone (same shapes,
 * same library). Prints medians and the step/GEMM ratio (target: <= 1.15), and the
 * share of the step spent outside GEMMs: every pn_gemm call of the step, attention's
 * included, is timed through the linker (-Wl,--wrap=pn_gemm, see Makefile.am).
 * Below each row, the ratio the step would have with nothing but its GEMMs and its
 * optimizer update (the floor that update sets: Adam moves 32 bytes per parameter).
 * Batches come from a dataset file when one is given (the reader prefetches in the
 * background, as in training), otherwise from random data in memory.
 *
 * With --trace, also the step with the timeline recorder on (base/trace.h: one event
 * per layer and pass) against off, in interleaved rounds: the cost of --trace.
 *
 * usage: bench_step [MODEL.json] [--data train.h5] [--batch B] [--steps N] [--rounds R]
 *                   [--threads 1|2] [--data-cache MB] [--trace] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "bench_util.h"
#include "base/rng.h"
#include "base/trace.h"
#include "io/reader.h"
#include "layers/layer_types.h"
#include "math/ops.h"
#include "net/graph.h"
#include "net/network.h"
#include "optim/optimizer.h"
#include "train/train_config.h"

#define CHECK(call)                                                                    \
    do {                                                                               \
        if ((call) < 0) {                                                              \
            fprintf(stderr, "bench_step: %s: %s\n", #call, pn_error_message());        \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* The wrapped pn_gemm: the real one, timed. */
int __real_pn_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                   const pn_matrix *b, float beta, pn_matrix *c);
int __wrap_pn_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                   const pn_matrix *b, float beta, pn_matrix *c);
static double gemm_seconds; /* inside pn_gemm since the start */

int __wrap_pn_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                   const pn_matrix *b, float beta, pn_matrix *c)
{
    double t0 = pn_now();
    int rc = __real_pn_gemm(trans_a, trans_b, alpha, a, b, beta, c);
    gemm_seconds += pn_now() - t0;
    return rc;
}

typedef struct gemm_call {
    bool ta, tb;
    float beta;
    pn_matrix a, b, c;
} gemm_call;

typedef struct bench {
    pn_graph *graph;
    pn_train_config cfg;
    pn_params *params;
    pn_network *net;
    pn_optimizer *opt;
    pn_reader *reader;
    int batch;
    int n_fields, field_nodes[8];
    gemm_call gemms[64];
    int n_gemms;
    pn_buffer gemm_bufs[192];
    int n_bufs;
} bench;

static pn_matrix scratch(bench *b, int rows, int cols)
{
    pn_buffer *buf = &b->gemm_bufs[b->n_bufs++];
    CHECK(pn_buffer_acquire(buf, pn_device_host(), (size_t)rows * cols * sizeof(float)));
    pn_matrix m = pn_matrix_on(buf, rows, cols);
    CHECK(pn_fill(&m, 0.01f));
    return m;
}

/* The GEMMs a forward+backward of the fc layers performs, on separate buffers. */
static void plan_gemms(bench *b)
{
    for (int i = 0; i < b->graph->n_nodes; i++) {
        const pn_graph_node *n = &b->graph->nodes[i];
        if (strcmp(n->layer->type->name, "fc")) continue;
        int rows = b->batch * n->layer->in_shapes[0].seq, k = n->layer->in_shapes[0].width;
        int m = n->layer->out_shape.width;
        pn_matrix x = scratch(b, rows, k), w = scratch(b, k, m), y = scratch(b, rows, m);
        pn_matrix dw = scratch(b, k, m), dy = scratch(b, rows, m), dx = scratch(b, rows, k);
        b->gemms[b->n_gemms++] = (gemm_call){false, false, 0.0f, x, w, y};  /* forward */
        b->gemms[b->n_gemms++] = (gemm_call){true, false, 1.0f, x, dy, dw}; /* weights */
        if (b->graph->nodes[n->inputs[0]].needs_grad)
            b->gemms[b->n_gemms++] = (gemm_call){false, true, 1.0f, dy, w, dx}; /* input */
    }
}

static void setup(bench *b, const char *model, const char *data)
{
    CHECK(pn_graph_load(&b->graph, model));
    CHECK(pn_train_config_from_json(pn_graph_train_spec(b->graph), model, &b->cfg));
    pn_network_options o = {.device = pn_device_host(), .init = true, .seed = 1};
    CHECK(pn_network_build(b->graph, &o, &b->params, &b->net));
    if (b->cfg.optimizer.schedule == PN_LR_COSINE && b->cfg.optimizer.total_steps == 0)
        b->cfg.optimizer.total_steps = 1L << 30; /* the benchmark's run has no end */
    CHECK(pn_optimizer_create(&b->opt, &b->cfg.optimizer, b->params));
    CHECK(pn_network_plan(b->net, b->batch));
    pn_reader_field fields[8];
    pn_rng rng;
    pn_rng_init(&rng, 5, 0);
    for (int i = 0; i < b->graph->n_nodes; i++) {
        if (!b->graph->nodes[i].is_input) continue;
        pn_arg *a = pn_network_arg(b->net, i);
        fields[b->n_fields] = (pn_reader_field){.dataset = pn_data_layer_dataset(b->graph->nodes[i].layer),
                                                .shape = a->shape,
                                                .input = b->graph->nodes[i].name};
        b->field_nodes[b->n_fields++] = i;
        if (a->shape.ids)
            for (int k = 0; k < pn_arg_rows(a); k++) a->ids[k] = (int)(pn_rng_next(&rng) % 10);
        else
            for (size_t k = 0; k < pn_matrix_count(a->value); k++)
                a->value.data[k] = (float)pn_rng_uniform(&rng);
    }
    if (data) {
        pn_reader_options o = {.global_batch = b->batch, .first = 0, .count = b->batch,
                               .shuffle = true, .seed = 1, .drop_last = true,
                               .cache_bytes = (size_t)b->cfg.data_cache_mb << 20};
        CHECK(pn_reader_open(&b->reader, data, fields, b->n_fields, &o));
        CHECK(pn_reader_seek(b->reader, 0, 0));
    }
    plan_gemms(b);
}

static void feed(bench *b)
{
    if (!b->reader) return;
    const pn_batch *batch;
    CHECK(pn_reader_next(b->reader, &batch));
    for (int f = 0; f < b->n_fields; f++) {
        pn_arg *a = pn_network_arg(b->net, b->field_nodes[f]);
        size_t rows = (size_t)pn_arg_rows(a);
        if (a->shape.ids)
            CHECK(pn_buffer_write(&a->ids_buf, 0, batch->ids[f], rows * sizeof(int)));
        else
            CHECK(pn_buffer_write(&a->value_buf, 0, batch->values[f],
                                  rows * (size_t)a->shape.width * sizeof(float)));
    }
}

enum { PHASE_DATA, PHASE_FORWARD, PHASE_BACKWARD, PHASE_UPDATE, N_PHASES };
static const char *const phase_names[N_PHASES] = {"data", "forward", "backward", "update"};

/* Mean seconds per step, and per phase in phase[] (accumulated). */
static double time_steps(bench *b, int steps, long *step, double *phase)
{
    double t0 = pn_now(), t[N_PHASES + 1];
    for (int s = 0; s < steps; s++, (*step)++) {
        pn_pass pass = {.training = true, .seed = 1, .step = *step};
        t[0] = pn_now();
        feed(b);
        pn_network_reset_stats(b->net);
        t[1] = pn_now();
        CHECK(pn_network_forward(b->net, &pass));
        t[2] = pn_now();
        CHECK(pn_network_backward(b->net, &pass, b->batch));
        t[3] = pn_now();
        CHECK(pn_optimizer_step(b->opt, b->params, *step, 1.0));
        t[4] = pn_now();
        for (int p = 0; phase && p < N_PHASES; p++) phase[p] += (t[p + 1] - t[p]) / steps;
    }
    return (pn_now() - t0) / steps;
}

/* Median step time with the recorder off and on, rounds interleaved. */
static void compare_trace(bench *b, int steps, int rounds, long *step)
{
    double *off = calloc((size_t)rounds, sizeof *off), *on = calloc((size_t)rounds, sizeof *on);
    size_t events = 0;
    for (int r = 0; r < rounds; r++) {
        off[r] = time_steps(b, steps, step, NULL);
        CHECK(pn_trace_start(0));
        on[r] = time_steps(b, steps, step, NULL);
        events = pn_trace_count();
        pn_trace_reset();
    }
    double moff = bench_median(off, rounds), mon = bench_median(on, rounds);
    printf("trace    step ms off %.3f, on %.3f (%zu events per step): on/off %.4f\n", 1e3 * moff,
           1e3 * mon, events / (size_t)steps, mon / moff);
    free(off), free(on);
}

static double time_gemms(bench *b, int steps)
{
    double t0 = pn_now();
    for (int s = 0; s < steps; s++)
        for (int g = 0; g < b->n_gemms; g++) {
            gemm_call *c = &b->gemms[g];
            CHECK(pn_gemm(c->ta, c->tb, 1.0f, &c->a, &c->b, c->beta, &c->c));
        }
    return (pn_now() - t0) / steps;
}

int main(int argc, char **argv)
{
    const char *model = "models/fashion_mlp.json", *data = NULL;
    int batch = 128, steps = 20, rounds = 9, only_threads = 0, trace = 0;
    long data_cache_mb = -1; /* -1: the training default */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--data") && i + 1 < argc) data = argv[++i];
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc) batch = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) only_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--data-cache") && i + 1 < argc) data_cache_mb = atol(argv[++i]);
        else if (!strcmp(argv[i], "--trace")) trace = 1;
        else if (argv[i][0] != '-') model = argv[i];
        else {
            fprintf(stderr, "usage: bench_step [MODEL.json] [--data FILE] [--batch B] "
                            "[--steps N] [--rounds R] [--threads 1|2] [--data-cache MB] [--trace]\n");
            return 2;
        }
    }
    bench b = {.batch = batch};
    pn_train_config_default(&b.cfg);
    if (data_cache_mb >= 0) b.cfg.data_cache_mb = data_cache_mb;
    setup(&b, model, data);
    printf("model %s, batch %d, %s data%s, %d GEMMs per step, median of %d rounds x %d steps\n",
           model, batch, data ? data : "in-memory random",
           data ? (b.cfg.data_cache_mb > 0 ? " (cached in memory when it fits)" : " (read per batch)") : "",
           b.n_gemms, rounds, steps);
    printf("%-8s %12s %10s %10s %12s %10s\n", "threads", "samples/s", "step ms", "GEMM ms",
           "step/GEMM", "non-GEMM");
    long step = 0;
    for (int threads = 1; threads <= 2; threads++) {
        if (only_threads && threads != only_threads) continue;
        pn_math_set_threads(threads);
        time_steps(&b, 3, &step, NULL); /* warm-up: first-touch, thread start */
        time_gemms(&b, 3);
        double *st = calloc((size_t)rounds, sizeof *st), *gt = calloc((size_t)rounds, sizeof *gt);
        double *ratio = calloc((size_t)rounds, sizeof *ratio), phase[N_PHASES] = {0};
        double *other = calloc((size_t)rounds, sizeof *other); /* step share outside GEMMs */
        for (int r = 0; r < rounds; r++) { /* interleaved, so noise hits both alike */
            double g0 = gemm_seconds;
            st[r] = time_steps(&b, steps, &step, phase);
            other[r] = 1.0 - (gemm_seconds - g0) / steps / st[r];
            gt[r] = time_gemms(&b, steps);
            ratio[r] = st[r] / gt[r];
        }
        double ms = bench_median(st, rounds), mg = bench_median(gt, rounds);
        double mr = bench_median(ratio, rounds), mo = bench_median(other, rounds);
        printf("%-8d %12.0f %10.2f %10.2f %12.3f %9.1f%%   (mean ms:", threads, batch / ms,
               1e3 * ms, 1e3 * mg, mr, 100.0 * mo);
        for (int p = 0; p < N_PHASES; p++) printf(" %s %.2f", phase_names[p], 1e3 * phase[p] / rounds);
        printf(")\n");
        /* The optimizer's update is memory-bound work no schedule hides: with it, the
         * step cannot beat this even if everything else were free. */
        printf("%-8s %12s %10s %10s %12.3f %10s   (GEMMs + the update alone)\n", "", "", "", "",
               (mg + phase[PHASE_UPDATE] / rounds) / mg, "");
        if (trace) compare_trace(&b, steps, rounds, &step);
        free(st), free(gt), free(ratio), free(other);
    }
    return 0;
}
