/* Measured layer times (plan_measure.h): the whole network for one micro-batch,
 * random inputs, per-layer medians; the ranks' link by ping-pong; how much slower
 * ranks train all at once than alone; the JSON file that carries them to
 * `pipenet plan --layer-times` and `pipenet train`. */
#include "plan/plan_measure.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/json_read.h"
#include "base/out_file.h"
#include "base/rng.h"
#include "math/buffer.h"
#include "math/matrix.h"
#include "net/network.h"

/* What the file says it is, and its version. */
#define TIMES_FORMAT "pipenet layer times"
enum { TIMES_VERSION = 1 };

int pn_plan_times_create(pn_plan_times **out, const pn_graph *g)
{
    pn_plan_times *t = calloc(1, sizeof *t);
    if (t) {
        t->n_nodes = g->n_nodes;
        t->forward_s = calloc((size_t)g->n_nodes, sizeof *t->forward_s);
        t->backward_s = calloc((size_t)g->n_nodes, sizeof *t->backward_s);
    }
    if (!t || !t->forward_s || !t->backward_s) {
        pn_plan_times_free(t);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    *out = t;
    return PN_OK;
}

void pn_plan_times_free(pn_plan_times *t)
{
    if (!t) return;
    free(t->forward_s);
    free(t->backward_s);
    free(t);
}

void pn_plan_times_layer_sum(const pn_plan_times *t, double *layer_s)
{
    for (int i = 0; i < t->n_nodes; i++) layer_s[i] = t->forward_s[i] + t->backward_s[i];
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, by_value);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Random values for every input the network holds: floats in [-1, 1), ids in
 * [0, limit) of their tightest consumer (2 when none bounds them). */
static int fill_inputs(pn_network *net, const pn_graph *g, uint64_t seed)
{
    pn_rng rng;
    pn_rng_init(&rng, seed, 0x706c616e); /* "plan" */
    int rc = PN_OK;
    for (int i = 0; rc == PN_OK && i < g->n_nodes; i++) {
        pn_arg *a = g->nodes[i].is_input ? pn_network_arg(net, i) : NULL;
        if (!a) continue;
        size_t rows = (size_t)pn_arg_rows(a);
        if (a->shape.sparse) { /* one feature a field (8 without fields): the data's vary */
            int per = a->shape.fields > 0 ? a->shape.fields : 8;
            PN_TRY(pn_arg_csr_reserve(a, (int)rows * per));
            a->csr.rows = (int)rows;
            for (size_t k = 0; k <= rows; k++) a->csr.offsets[k] = (int)k * per;
            for (int k = 0; k < a->csr.nnz; k++) {
                a->csr.cols[k] = (int64_t)(pn_rng_next(&rng) % (uint64_t)a->shape.columns);
                a->csr.vals[k] = 1.0f;
                if (a->csr.fields) a->csr.fields[k] = k % per;
            }
            continue;
        }
        if (a->shape.ids) {
            int limit = pn_graph_id_limit(g, i, NULL), *ids = malloc(rows * sizeof *ids);
            if (limit < 1) limit = 2;
            if (!ids) return pn_error_set(PN_ERR_NOMEM, "out of memory");
            for (size_t k = 0; k < rows; k++) ids[k] = (int)(pn_rng_next(&rng) % (uint64_t)limit);
            rc = pn_buffer_write(&a->ids_buf, 0, ids, rows * sizeof *ids);
            free(ids);
        } else {
            size_t n = rows * (size_t)a->shape.width;
            float *v = malloc((n ? n : 1) * sizeof *v);
            if (!v) return pn_error_set(PN_ERR_NOMEM, "out of memory");
            for (size_t k = 0; k < n; k++) v[k] = (float)(2.0 * pn_rng_uniform(&rng) - 1.0);
            rc = pn_matrix_write(&a->value, v);
            free(v);
        }
    }
    return rc;
}

/* Runs warmup + repetitions training steps of one micro-batch; samples[k * n + i]
 * holds layer i's forward (k < reps) ... see below. */
typedef struct samples {
    int n, reps;
    double *fwd, *bwd;  /* [reps * n] */
    double *opt;        /* [reps] */
    double *fwd_all, *bwd_all; /* [reps] the whole network's forward, backward */
} samples;

static int run_steps(pn_network *net, pn_params *arena, pn_optimizer *opt,
                     const pn_measure_options *o, samples *s, const pn_graph *g)
{
    double *fwd = calloc((size_t)g->n_nodes, sizeof *fwd);
    double *bwd = calloc((size_t)g->n_nodes, sizeof *bwd);
    if (!fwd || !bwd) {
        free(fwd), free(bwd);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    pn_network_time_layers(net, fwd, bwd);
    int rc = PN_OK;
    for (int k = 0; rc == PN_OK && k < o->warmup + o->repetitions; k++) {
        pn_pass pass = {.training = true, .seed = o->seed, .step = k, .micro = 0};
        double t0 = pn_now();
        rc = pn_network_forward(net, &pass);
        double t_fwd = pn_now() - t0;
        t0 = pn_now();
        if (rc == PN_OK) rc = pn_network_backward(net, &pass, o->micro_batch);
        double t_bwd = pn_now() - t0;
        t0 = pn_now();
        if (rc == PN_OK) rc = pn_optimizer_step(opt, arena, k, 1.0);
        double t_opt = pn_now() - t0;
        int r = k - o->warmup;
        if (r < 0) continue;
        memcpy(s->fwd + (size_t)r * s->n, fwd, (size_t)s->n * sizeof *fwd);
        memcpy(s->bwd + (size_t)r * s->n, bwd, (size_t)s->n * sizeof *bwd);
        s->opt[r] = t_opt;
        s->fwd_all[r] = t_fwd;
        s->bwd_all[r] = t_bwd;
    }
    pn_network_time_layers(net, NULL, NULL);
    free(fwd), free(bwd);
    return rc;
}

/* Scales v[0 .. n) so that it sums to total (when it sums to more than 0). */
static void scale_to(double *v, int n, double total)
{
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += v[i];
    for (int i = 0; sum > 0.0 && i < n; i++) v[i] *= total / sum;
}

/* Per-layer medians of the samples into t. The network's passes take longer than
 * their layers (clearing the arguments' gradients, the loss's seed, the loop): that
 * rest, measured as the median whole pass less the layers, is shared among the
 * layers in proportion to their times, so that a stage's sum is what its pass takes. */
static int take_medians(pn_plan_times *t, const samples *s, long params)
{
    double *col = malloc((size_t)s->reps * sizeof *col);
    if (!col) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->n; i++) {
        for (int r = 0; r < s->reps; r++) col[r] = s->fwd[(size_t)r * s->n + i];
        t->forward_s[i] = median(col, s->reps);
        for (int r = 0; r < s->reps; r++) col[r] = s->bwd[(size_t)r * s->n + i];
        t->backward_s[i] = median(col, s->reps);
    }
    memcpy(col, s->fwd_all, (size_t)s->reps * sizeof *col);
    scale_to(t->forward_s, s->n, median(col, s->reps));
    memcpy(col, s->bwd_all, (size_t)s->reps * sizeof *col);
    scale_to(t->backward_s, s->n, median(col, s->reps));
    memcpy(col, s->opt, (size_t)s->reps * sizeof *col);
    t->optimizer_s_per_param = params > 0 ? median(col, s->reps) / (double)params : 0.0;
    free(col);
    return PN_OK;
}

/* One micro-batch's network with random inputs, its parameters and optimizer: what
 * every measurement runs. */
typedef struct bench {
    pn_optimizer_config cfg;
    pn_params *arena;
    pn_network *net;
    pn_optimizer *opt;
    long step; /* the next step's number (the optimizer's schedule) */
} bench;

static void bench_close(bench *b)
{
    pn_optimizer_free(b->opt);
    pn_network_free(b->net);
    pn_params_free(b->arena);
    *b = (bench){0};
}

static int bench_open(bench *b, const pn_graph *g, const pn_measure_options *o, long steps)
{
    *b = (bench){0};
    if (o->optimizer) b->cfg = *o->optimizer;
    else pn_optimizer_config_default(&b->cfg, PN_OPT_SGD, 0.01);
    if (b->cfg.schedule == PN_LR_COSINE && b->cfg.total_steps == 0)
        b->cfg.total_steps = b->cfg.warmup_steps + steps + 1;
    pn_network_options no = {.device = pn_device_host(), .copies = 1, .init = true,
                             .seed = o->seed};
    int rc = pn_network_build(g, &no, &b->arena, &b->net);
    if (rc == PN_OK) rc = pn_network_plan(b->net, o->micro_batch);
    if (rc == PN_OK) rc = pn_network_set_batch(b->net, o->micro_batch);
    if (rc == PN_OK) rc = fill_inputs(b->net, g, o->seed);
    if (rc == PN_OK) rc = pn_optimizer_create(&b->opt, &b->cfg, b->arena);
    if (rc < 0) bench_close(b);
    return rc;
}

static int check_options(const pn_measure_options *o)
{
    if (o->micro_batch < 1 || o->repetitions < 1 || o->warmup < 0)
        return pn_error_set(PN_ERR_INVALID, "measuring needs a micro-batch and repetitions of "
                            "at least 1, got %d and %d", o->micro_batch, o->repetitions);
    return PN_OK;
}

int pn_plan_measure_layers(pn_plan_times *t, const pn_graph *g, const pn_measure_options *o)
{
    PN_TRY(check_options(o));
    bench b = {0};
    samples s = {.n = g->n_nodes, .reps = o->repetitions};
    s.fwd = calloc((size_t)s.n * (size_t)s.reps, sizeof *s.fwd);
    s.bwd = calloc((size_t)s.n * (size_t)s.reps, sizeof *s.bwd);
    s.opt = calloc((size_t)s.reps, sizeof *s.opt);
    s.fwd_all = calloc((size_t)s.reps, sizeof *s.fwd_all);
    s.bwd_all = calloc((size_t)s.reps, sizeof *s.bwd_all);
    int rc = s.fwd && s.bwd && s.opt && s.fwd_all && s.bwd_all ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK) rc = bench_open(&b, g, o, o->warmup + o->repetitions);
    if (rc == PN_OK) rc = run_steps(b.net, b.arena, b.opt, o, &s, g);
    if (rc == PN_OK) rc = take_medians(t, &s, (long)pn_params_elements(b.arena));
    if (rc == PN_OK) {
        t->micro_batch = o->micro_batch;
        t->threads = o->threads;
        t->repetitions = o->repetitions;
    }
    bench_close(&b);
    free(s.fwd), free(s.bwd), free(s.opt), free(s.fwd_all), free(s.bwd_all);
    return rc < 0 ? pn_error_wrap(rc, "%s: measuring the layers", g->file) : PN_OK;
}

/* Training steps of b, back to back, for at least `seconds` and SHARING_MIN_STEPS
 * steps: the mean seconds per step (throughput, not a median: a rank that shares a
 * core loses whole time slices, which a median of short steps would not see). */
enum { SHARING_MIN_STEPS = 5 };
static const double SHARING_S = 0.5;
/* Steps the sharing probe's optimizer schedule allows (it never runs out). */
static const long SHARING_STEPS_MAX = 1L << 30;

static int steps_for(bench *b, const pn_measure_options *o, double seconds, double *step_s)
{
    long k = 0;
    double t0 = pn_now(), now = t0;
    int rc = PN_OK;
    for (; rc == PN_OK && (k < SHARING_MIN_STEPS || now - t0 < seconds); k++, b->step++) {
        pn_pass pass = {.training = true, .seed = o->seed, .step = b->step, .micro = 0};
        rc = pn_network_forward(b->net, &pass);
        if (rc == PN_OK) rc = pn_network_backward(b->net, &pass, o->micro_batch);
        if (rc == PN_OK) rc = pn_optimizer_step(b->opt, b->arena, b->step, 1.0);
        now = pn_now();
    }
    *step_s = (now - t0) / (double)k;
    return rc;
}

/* Before rank 0 times anything alone: the other ranks wait, and a wait polls
 * without pause at first; this long, and their waits nap instead. */
static void let_waits_nap(const pn_grid *grid)
{
    if (grid->size > 1) pn_sleep(pn_comm_spin_seconds() + 0.1);
}

/* How much slower a rank trains when the first `ranks` ranks of c (at most all) train
 * at once than when rank 0 trains alone: each steps the whole network back to back
 * for SHARING_S, rank 0 first alone (the others asleep in a wait), then all together.
 * Collective over c; the result is valid on rank 0 (nothing is measured with fewer
 * than 2 ranks). */
static int measure_sharing(pn_plan_times *t, const pn_graph *g, const pn_measure_options *o,
                           pn_comm *c, int ranks)
{
    const pn_grid *grid = pn_comm_grid(c);
    int n = ranks < grid->size ? ranks : grid->size;
    if (n < 2) return PN_OK;
    PN_TRY(check_options(o));
    bool mine = grid->rank < n;
    bench b = {0};
    double alone_s = 0.0, sum[2] = {0.0, 0.0}; /* seconds per step, ranks */
    int rc = mine ? bench_open(&b, g, o, SHARING_STEPS_MAX) : PN_OK;
    if (rc == PN_OK && mine) rc = steps_for(&b, o, 0.0, &alone_s); /* warm-up */
    rc = pn_comm_agree(c, rc);
    /* Alone: rank 0 steps while the others' waits have turned to naps. */
    if (rc == PN_OK && grid->rank == 0) {
        let_waits_nap(grid);
        rc = steps_for(&b, o, SHARING_S, &alone_s);
    }
    rc = pn_comm_agree(c, rc);
    /* Then the n ranks at once, for the same time. */
    if (rc == PN_OK && mine) {
        rc = steps_for(&b, o, SHARING_S, &sum[0]);
        sum[1] = 1.0;
    }
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = pn_comm_sum(c, PN_SCOPE_WORLD, sum, 2);
    if (rc == PN_OK && grid->rank == 0) {
        t->alone_step_s = alone_s;
        t->shared_ranks = n;
        t->shared_step_s = sum[0] / sum[1];
    }
    bench_close(&b);
    return rc < 0 && rc != PN_ERR_PEER
               ? pn_error_wrap(rc, "%s: measuring %d ranks at once", g->file, n)
               : rc;
}

/* Message sizes of the link probe: the smallest gives the latency, the two largest
 * the bandwidth. */
static const size_t PROBE_BYTES[] = {8, 64 << 10, 4 << 20};
enum { PROBE_SIZES = 3, PROBE_ROUNDS = 21 };

int pn_plan_measure_link(pn_plan_times *t, pn_comm *c)
{
    const pn_grid *grid = pn_comm_grid(c);
    if (grid->size < 2) return PN_OK;
    double s[PROBE_SIZES];
    for (int k = 0; k < PROBE_SIZES; k++)
        PN_TRY(pn_comm_pingpong(c, PROBE_BYTES[k], PROBE_ROUNDS, &s[k]));
    if (grid->rank != 0) return PN_OK;
    t->link_measured = true;
    t->link_latency_s = s[0];
    double dt = s[2] - s[1];
    t->link_bytes_per_s = dt > 0.0 ? (double)(PROBE_BYTES[2] - PROBE_BYTES[1]) / dt
                                   : (double)PROBE_BYTES[2] / (s[2] > 0.0 ? s[2] : 1e-9);
    return PN_OK;
}

int pn_plan_measure_job(pn_plan_times *t, const pn_graph *g, const pn_measure_options *o,
                        pn_comm *c, int ranks)
{
    const pn_grid *grid = pn_comm_grid(c);
    int rc = pn_plan_measure_link(t, c);
    if (rc == PN_OK && grid->rank == 0) {
        let_waits_nap(grid);
        rc = pn_plan_measure_layers(t, g, o);
    }
    rc = pn_comm_agree(c, rc);
    if (rc == PN_OK) rc = measure_sharing(t, g, o, c, ranks);
    return rc;
}

/* --- the file ---------------------------------------------------------------------- */

int pn_plan_times_save(const pn_plan_times *t, const pn_graph *g, const char *path)
{
    json_t *root = json_object(), *layers = json_object();
    int bad = !root || !layers;
    bad |= json_object_set_new(root, "format", json_string(TIMES_FORMAT));
    bad |= json_object_set_new(root, "version", json_integer(TIMES_VERSION));
    bad |= json_object_set_new(root, "model", json_string(g->name));
    bad |= json_object_set_new(root, "micro_batch", json_integer(t->micro_batch));
    bad |= json_object_set_new(root, "threads", json_integer(t->threads));
    bad |= json_object_set_new(root, "repetitions", json_integer(t->repetitions));
    bad |= json_object_set_new(root, "optimizer_s_per_param",
                               json_real(t->optimizer_s_per_param));
    if (t->link_measured) {
        json_t *link = json_object();
        bad |= !link;
        bad |= json_object_set_new(link, "latency_s", json_real(t->link_latency_s));
        bad |= json_object_set_new(link, "bytes_per_s", json_real(t->link_bytes_per_s));
        bad |= json_object_set_new(root, "link", link);
    }
    if (t->shared_ranks > 0) {
        json_t *sharing = json_object();
        bad |= !sharing;
        bad |= json_object_set_new(sharing, "ranks", json_integer(t->shared_ranks));
        bad |= json_object_set_new(sharing, "alone_step_s", json_real(t->alone_step_s));
        bad |= json_object_set_new(sharing, "shared_step_s", json_real(t->shared_step_s));
        bad |= json_object_set_new(root, "sharing", sharing);
    }
    for (int i = 0; !bad && i < g->n_nodes; i++) {
        if (g->nodes[i].is_input) continue;
        json_t *l = json_object();
        bad |= !l;
        bad |= json_object_set_new(l, "forward_s", json_real(t->forward_s[i]));
        bad |= json_object_set_new(l, "backward_s", json_real(t->backward_s[i]));
        bad |= json_object_set_new(layers, g->nodes[i].name, l);
    }
    bad |= json_object_set(root, "layers", layers);
    json_decref(layers);
    int rc = PN_OK;
    pn_out_file out;
    if (bad) rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
    else rc = pn_out_open(&out, path, "--save-times");
    if (rc == PN_OK && json_dumpf(root, out.f, JSON_INDENT(1) | JSON_PRESERVE_ORDER |
                                                   JSON_REAL_PRECISION(17)) < 0) {
        pn_out_abandon(&out);
        rc = pn_error_set(PN_ERR_IO, "%s: cannot write the layer times", path);
    } else if (rc == PN_OK) {
        rc = pn_out_commit(&out);
    }
    json_decref(root);
    return rc;
}

static const char *const TOP_KEYS[] = {"format", "version", "model", "micro_batch", "threads",
                                       "repetitions", "optimizer_s_per_param", "link",
                                       "sharing", "layers", NULL};
static const char *const LINK_KEYS[] = {"latency_s", "bytes_per_s", NULL};
static const char *const SHARING_KEYS[] = {"ranks", "alone_step_s", "shared_step_s", NULL};
static const char *const LAYER_KEYS[] = {"forward_s", "backward_s", NULL};

static int read_header(const json_t *root, const pn_json_at *at, pn_plan_times *t)
{
    const char *format;
    long v;
    PN_TRY(pn_json_known_keys(root, at, TOP_KEYS, NULL));
    PN_TRY(pn_json_string(root, at, "format", true, NULL, &format));
    if (strcmp(format, TIMES_FORMAT))
        return pn_json_error_value(at, "format", json_object_get(root, "format"),
                                   "\"%s\" (write one with pipenet plan --measure "
                                   "--save-times FILE)", TIMES_FORMAT);
    PN_TRY(pn_json_int(root, at, "version", true, TIMES_VERSION, TIMES_VERSION, 0, &v));
    PN_TRY(pn_json_int(root, at, "micro_batch", true, 1, 1 << 24, 0, &v));
    t->micro_batch = (int)v;
    PN_TRY(pn_json_int(root, at, "threads", false, 0, 4096, 0, &v));
    t->threads = (int)v;
    PN_TRY(pn_json_int(root, at, "repetitions", false, 0, 1 << 24, 0, &v));
    t->repetitions = (int)v;
    PN_TRY(pn_json_number(root, at, "optimizer_s_per_param", false, 0.0, false, 1.0, false,
                          0.0, &t->optimizer_s_per_param));
    const json_t *link;
    PN_TRY(pn_json_object(root, at, "link", false, &link));
    if (link) {
        pn_json_at la = pn_json_field(at, "link");
        PN_TRY(pn_json_known_keys(link, &la, LINK_KEYS, NULL));
        PN_TRY(pn_json_number(link, &la, "latency_s", true, 0.0, false, 1e3, false, 0.0,
                              &t->link_latency_s));
        PN_TRY(pn_json_number(link, &la, "bytes_per_s", true, 0.0, true, INFINITY, true, 0.0,
                              &t->link_bytes_per_s));
        t->link_measured = true;
    }
    const json_t *sharing;
    PN_TRY(pn_json_object(root, at, "sharing", false, &sharing));
    if (sharing) {
        pn_json_at sa = pn_json_field(at, "sharing");
        PN_TRY(pn_json_known_keys(sharing, &sa, SHARING_KEYS, NULL));
        PN_TRY(pn_json_int(sharing, &sa, "ranks", true, 2, 1 << 24, 0, &v));
        t->shared_ranks = (int)v;
        PN_TRY(pn_json_number(sharing, &sa, "alone_step_s", true, 0.0, true, 1e6, false, 0.0,
                              &t->alone_step_s));
        PN_TRY(pn_json_number(sharing, &sa, "shared_step_s", true, 0.0, true, 1e6, false, 0.0,
                              &t->shared_step_s));
    }
    return PN_OK;
}

static int read_layers(const json_t *root, const pn_json_at *at, const pn_graph *g,
                       pn_plan_times *t)
{
    const json_t *layers;
    PN_TRY(pn_json_object(root, at, "layers", true, &layers));
    pn_json_at la = pn_json_field(at, "layers");
    const char *name;
    const json_t *l;
    json_object_foreach((json_t *)layers, name, l) {
        int i = pn_graph_find(g, name);
        if (i < 0 || g->nodes[i].is_input)
            return pn_json_error(&la, NULL, name, "only layers of %s (%s), measured for it",
                                 g->name, g->file);
        pn_json_at at_l = pn_json_field(&la, name);
        if (!json_is_object(l))
            return pn_json_error_value(&la, name, l, "an object {\"forward_s\": S, "
                                       "\"backward_s\": S}");
        PN_TRY(pn_json_known_keys(l, &at_l, LAYER_KEYS, NULL));
        PN_TRY(pn_json_number(l, &at_l, "forward_s", true, 0.0, false, 1e6, false, 0.0,
                              &t->forward_s[i]));
        PN_TRY(pn_json_number(l, &at_l, "backward_s", true, 0.0, false, 1e6, false, 0.0,
                              &t->backward_s[i]));
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].is_input && !json_object_get(layers, g->nodes[i].name))
            return pn_json_error(&la, g->nodes[i].name, NULL,
                                 "a time for every layer of %s (measure it again: pipenet "
                                 "plan %s --measure --save-times FILE)",
                                 g->file, g->file);
    return PN_OK;
}

int pn_plan_times_load(pn_plan_times **out, const pn_graph *g, const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return pn_error_set(PN_ERR_INVALID, "%s: cannot read layer times: %s (line %d)", path,
                            jerr.text, jerr.line);
    pn_plan_times *t = NULL;
    pn_json_at at = pn_json_root(path);
    int rc = json_is_object(root)
                 ? pn_plan_times_create(&t, g)
                 : pn_json_error_value(&at, NULL, root, "an object of layer times");
    if (rc == PN_OK) rc = read_header(root, &at, t);
    if (rc == PN_OK) rc = read_layers(root, &at, g, t);
    json_decref(root);
    if (rc < 0) {
        pn_plan_times_free(t);
        return rc;
    }
    *out = t;
    return PN_OK;
}
