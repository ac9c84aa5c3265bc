/* Inference across pipeline stages (infer_stages.h): the same placement, stage runtime
 * and links as training, forward-only; each rank reads its own parameters and the
 * inputs its layers take. */
#include "pipeline/infer_stages.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "io/reader.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_file.h"
#include "math/ops.h"
#include "mpi/comm.h"
#include "plan/plan.h"
#include "pipeline/stage.h"

/* A wait on another stage longer than this ends the job (a lost or failed rank):
 * far beyond any one batch's forward. */
enum { STALL_SECONDS = 300 };

struct pn_infer_stages {
    pn_infer_stages_config cfg;
    char path[4096];          /* the model file (a directory's newest snapshot) */
    pn_comm *comm;
    const pn_grid *grid;
    pn_graph *graph;
    pn_plan *plan;
    pn_schedule *sched;
    pn_stage *stage;
    pn_device device;
    pn_reader *reader;
    long samples;
    pn_layer_stats *loss;     /* [n_nodes] what this rank's loss layers saw */
    pn_auc *auc;              /* the binary losses' histogram, or NULL: none */
    /* during a run */
    int out_node;
    float *out_host;          /* a piece of the output, host memory */
    long row0;                /* the batch's first sample */
    pn_infer_out_fn fn;
    void *ctx;
};

const pn_graph *pn_infer_stages_graph(const pn_infer_stages *x) { return x->graph; }
const char *pn_infer_stages_model(const pn_infer_stages *x) { return x->path; }
long pn_infer_stages_samples(const pn_infer_stages *x) { return x->samples; }

int pn_infer_stages_agree(pn_infer_stages *x, int rc) { return pn_comm_agree(x->comm, rc); }

int pn_infer_stages_rank_of(const pn_infer_stages *x, int node)
{
    return x->plan->stage_of[node]; /* one replica: rank == stage */
}

/* Rank 0 resolves a snapshot directory to its newest snapshot that verifies, and every
 * rank takes its answer (one view of the directory, one read of that file). */
static int resolve_model(pn_infer_stages *x)
{
    int rc = PN_OK;
    if (x->grid->rank == 0) rc = pn_snapshot_resolve(x->cfg.model, x->path, sizeof x->path);
    PN_TRY(pn_comm_agree_root(x->comm, rc, "finding the model file"));
    return pn_comm_broadcast(x->comm, x->path, sizeof x->path);
}

/* The graph of the file's config (its header only: attributes and the config text). */
static int load_graph(pn_infer_stages *x)
{
    pn_train_state *st;
    PN_TRY(pn_snapshot_read_header(x->path, NULL, &st));
    int rc = PN_OK;
    json_error_t err;
    json_t *root = NULL;
    if (!st->config || !st->config[0])
        rc = pn_error_set(PN_ERR_INVALID, "%s: holds no model config", x->path);
    else if (!(root = json_loads(st->config, JSON_REJECT_DUPLICATES, &err)))
        rc = pn_error_set(PN_ERR_INVALID, "%s: config:%d:%d: invalid JSON: %s", x->path, err.line,
                          err.column, err.text);
    if (rc == PN_OK) rc = pn_graph_from_json(&x->graph, root, x->path);
    json_decref(root);
    pn_train_state_free(st);
    return rc;
}

int pn_infer_place_device(pn_comm *comm, pn_job *job, int request, pn_device *dev)
{
    int node_rank = 0, node_size = 1;
    *dev = pn_device_host();
    int rc = pn_job_node_rank(job, &node_rank, &node_size);
    if (rc == PN_OK) rc = pn_device_resolve((pn_device_request)request, node_rank, dev);
    if (rc == PN_OK) rc = pn_device_select(*dev);
    PN_TRY(pn_comm_agree(comm, rc));
    rc = pn_comm_use_transport(comm, PN_TRANSPORT_REQUEST_AUTO, *dev);
    return pn_comm_agree(comm, rc);
}

int pn_infer_load_params(pn_params *arena, const char *path)
{
    int n = pn_params_count(arena);
    const char **names = calloc(n ? (size_t)n : 1, sizeof *names);
    if (!names) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int k = 0; k < n; k++) {
        const pn_param *p = pn_params_get(arena, k);
        names[k] = p->tie ? p->tie : p->name;
    }
    pn_name_list want = {names, n};
    pn_train_state *st = NULL;
    int rc = pn_snapshot_read_values(path, NULL, &want, &st);
    for (int k = 0; rc == PN_OK && k < n; k++) {
        const pn_param *p = pn_params_get(arena, k);
        const pn_state_param *sp = pn_train_state_find(st, names[k]);
        if (!sp)
            rc = pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' (%dx%d) is missing from the "
                              "file", path, names[k], p->rows, p->cols);
        else if (sp->rows != p->rows || sp->cols != p->cols)
            rc = pn_error_set(PN_ERR_INVALID, "%s: parameter '%s' is %dx%d in the file, but the "
                              "config declares %dx%d", path, names[k], sp->rows, sp->cols,
                              p->rows, p->cols);
        pn_matrix v = pn_params_value(arena, k);
        if (rc == PN_OK) rc = pn_matrix_write(&v, sp->value);
    }
    pn_train_state_free(st);
    free(names);
    return rc;
}

/* The data file with the stage's fields, every one of which must be there. */
static int open_data(pn_infer_stages *x)
{
    int n;
    const pn_reader_field *fields = pn_stage_fields(x->stage, &n);
    const char **names = calloc(n ? (size_t)n : 1, sizeof *names);
    bool *exists = calloc(n ? (size_t)n : 1, sizeof *exists);
    int rc = names && exists ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int f = 0; rc == PN_OK && f < n; f++) names[f] = fields[f].dataset;
    if (rc == PN_OK) rc = pn_reader_probe(x->cfg.data, names, n, exists);
    for (int f = 0; rc == PN_OK && f < n; f++)
        if (!exists[f])
            rc = pn_error_set(PN_ERR_INVALID, "%s: has no dataset '%s' (input '%s', read by "
                              "stage %d): inference across stages reads every input its layers "
                              "take, labels included (run in one process to infer without them)",
                              x->cfg.data, names[f], fields[f].input, x->grid->stage);
    free(names);
    free(exists);
    PN_TRY(rc);
    int run = x->cfg.batch * x->cfg.in_flight;
    pn_reader_options opts = {.global_batch = run, .first = 0, .count = run,
                              .shuffle = false, .drop_last = false};
    PN_TRY(pn_reader_open(&x->reader, x->cfg.data, fields, n, &opts));
    x->samples = pn_reader_samples(x->reader);
    return PN_OK;
}

/* The stage, its parameters and its data, once the placement and devices are known. */
static int build_stage(pn_infer_stages *x)
{
    PN_TRY(pn_comm_agree(x->comm, pn_graph_check_batch(x->graph, x->cfg.batch)));
    PN_TRY(pn_comm_agree(x->comm, pn_schedule_build(&x->sched, PN_SCHEDULE_GPIPE,
                                                    x->grid->stages, x->cfg.in_flight)));
    pn_stage_config sc = {.graph = x->graph, .plan = x->plan, .sched = x->sched, .comm = x->comm,
                          .device = x->device, .global_batch = x->cfg.batch,
                          .micro_rows = x->cfg.batch, .eval_rows = x->cfg.batch,
                          .forward_only = true};
    PN_TRY(pn_comm_agree(x->comm, pn_stage_create(&x->stage, &sc)));
    PN_TRY(pn_comm_agree(x->comm, pn_infer_load_params(pn_stage_params(x->stage), x->path)));
    PN_TRY(pn_comm_agree(x->comm, open_data(x)));
    bool binary = false;
    for (int i = 0; i < x->graph->n_nodes; i++)
        binary |= x->graph->nodes[i].layer->type->loss_kind == PN_LOSS_BINARY;
    x->loss = calloc((size_t)x->graph->n_nodes, sizeof *x->loss);
    x->auc = binary ? calloc(1, sizeof *x->auc) : NULL;
    int rc = x->loss && (!binary || x->auc) ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    PN_TRY(pn_comm_agree(x->comm, rc));
    return pn_comm_agree(x->comm, pn_comm_links_ready(x->comm));
}

int pn_infer_stages_open(pn_infer_stages **out, pn_job *job, const pn_infer_stages_config *cfg)
{
    *out = NULL;
    pn_infer_stages *x = calloc(1, sizeof *x);
    if (!x) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    *out = x;
    x->cfg = *cfg;
    if (x->cfg.in_flight < 1) x->cfg.in_flight = 2 * cfg->stages;
    PN_TRY(pn_comm_create(&x->comm, job, cfg->stages));
    x->grid = pn_comm_grid(x->comm);
    if (x->grid->replicas != 1)
        return pn_error_set(PN_ERR_INVALID, "infer across stages runs one pipeline: %d ranks for "
                            "%d stages", x->grid->size, cfg->stages);
    if (x->grid->size > 1) pn_log_set_rank(x->grid->rank);
    PN_TRY(resolve_model(x));
    PN_TRY(pn_comm_agree(x->comm, load_graph(x)));
    PN_TRY(pn_comm_agree(x->comm, pn_plan_build(&x->plan, x->graph, cfg->stages)));
    PN_TRY(pn_infer_place_device(x->comm, job, x->cfg.device_request, &x->device));
    const char *env = getenv("OPENBLAS_NUM_THREADS"); /* else the node's cores, shared */
    int local = x->grid->local_ranks > 0 ? x->grid->local_ranks : 1;
    long cores = sysconf(_SC_NPROCESSORS_ONLN) / local;
    pn_math_set_threads(env && atoi(env) > 0 ? atoi(env) : cores > 0 ? (int)cores : 1);
    PN_TRY(build_stage(x));
    pn_comm_watch(x->comm, STALL_SECONDS, "inference");
    return PN_OK;
}

void pn_infer_stages_free(pn_infer_stages *x)
{
    if (!x) return;
    if (x->reader) pn_reader_close(x->reader);
    pn_stage_free(x->stage);
    pn_schedule_free(x->sched);
    pn_plan_free(x->plan);
    pn_graph_free(x->graph);
    pn_comm_free(x->comm);
    free(x->loss);
    free(x->auc);
    free(x->out_host);
    free(x);
}

/* After a piece's forward on this rank: its output values to fn (where the output is
 * computed here), and what its loss layers saw, added up as one process adds them
 * (a forward's sums into the totals, forward after forward). */
static int on_piece(void *ctx, pn_network *net, int first, int rows)
{
    pn_infer_stages *x = ctx;
    if (x->fn && x->plan->stage_of[x->out_node] == x->grid->stage) {
        const pn_arg *a = pn_network_arg(net, x->out_node);
        PN_TRY(pn_matrix_read(&a->value, x->out_host));
        PN_TRY(x->fn(x->ctx, x->row0 + first, rows, x->out_host));
    }
    for (int i = 0; i < x->graph->n_nodes; i++) {
        const pn_layer_stats *s = x->plan->stage_of[i] == x->grid->stage
                                      ? pn_network_node_stats(net, i) : NULL;
        if (!s) continue;
        x->loss[i].loss_sum += s->loss_sum;
        x->loss[i].correct += s->correct;
        x->loss[i].rows += s->rows;
    }
    if (x->auc) pn_network_auc(net, x->auc);
    pn_network_reset_stats(net);
    return PN_OK;
}

int pn_infer_stages_run(pn_infer_stages *x, int out_node, pn_infer_out_fn fn, void *ctx)
{
    const pn_shape shape = x->graph->nodes[out_node].layer->out_shape;
    if (x->graph->nodes[out_node].is_input || shape.ids)
        return pn_error_set(PN_ERR_INVALID, "%s: '%s' is no float layer", x->path,
                            x->graph->nodes[out_node].name);
    x->out_node = out_node, x->fn = fn, x->ctx = ctx;
    size_t values = (size_t)x->cfg.batch * (size_t)shape.seq * (size_t)shape.width;
    if (fn && x->plan->stage_of[out_node] == x->grid->stage &&
        !(x->out_host = malloc(values * sizeof *x->out_host)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for a batch of %d", x->cfg.batch);
    long step = 0;
    for (x->row0 = 0; x->row0 < x->samples; step++) {
        const pn_batch *b;
        PN_TRY(pn_reader_next(x->reader, &b));
        PN_TRY(pn_stage_infer(x->stage, b, step, x->cfg.batch, on_piece, x));
        x->row0 += b->rows;
    }
    return PN_OK;
}

int pn_infer_stages_losses(pn_infer_stages *x, pn_layer_stats *per_node, pn_auc *auc)
{
    int n = x->graph->n_nodes;
    memcpy(per_node, x->loss, (size_t)n * sizeof *per_node);
    PN_TRY(pn_comm_sum(x->comm, PN_SCOPE_WORLD, (double *)per_node, 3 * n));
    if (!auc) return PN_OK;
    if (x->auc) *auc = *x->auc;
    else pn_auc_reset(auc);
    return pn_comm_sum(x->comm, PN_SCOPE_WORLD, (double *)auc, PN_AUC_DOUBLES);
}
