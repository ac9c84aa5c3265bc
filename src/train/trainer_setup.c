/* The trainer's setup (trainer_setup.h): BLAS threads, the layout and its checks, the
 * placement (measured layer times or FLOPs), the schedule, the stage runtime, data,
 * metrics and optimizer, and their release. */
#include "train/trainer_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "math/ops.h"
#include "plan/plan_measure.h"
#include "train/resume.h"

/* Threads for BLAS: the setting, else $OPENBLAS_NUM_THREADS, else the node's cores
 * shared among this job's ranks on the node. */
static int blas_threads(const trainer *t)
{
    if (t->cfg.threads > 0) return t->cfg.threads;
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long per_rank = cores / (t->grid->local_ranks > 0 ? t->grid->local_ranks : 1);
    return per_rank > 0 ? (int)per_rank : 1;
}

static int check_layout(trainer *t)
{
    const pn_train_config *cfg = &t->cfg;
    int d = t->grid->replicas;
    if (cfg->batch % d)
        return pn_error_set(PN_ERR_INVALID, "the global batch %d does not split into %d replicas "
                                            "(choose a batch that %d divides)",
                            cfg->batch, d, d);
    t->replica_rows = cfg->batch / d;
    bool interleaved = cfg->schedule == PN_SCHEDULE_INTERLEAVED;
    t->micro = cfg->micro_batches > 0 ? cfg->micro_batches
               : interleaved ? pn_default_micro_batches_interleaved(t->replica_rows,
                                                                    t->grid->stages)
                             : pn_default_micro_batches(t->replica_rows, t->grid->stages);
    if (t->micro < 1 || t->replica_rows % t->micro)
        return pn_error_set(PN_ERR_INVALID,
                            "%d micro-batches do not divide a replica's %d samples (global "
                            "batch %d over %d replicas)",
                            t->micro, t->replica_rows, cfg->batch, d);
    t->micro_rows = t->replica_rows / t->micro;
    return pn_schedule_check_layout((pn_schedule_kind)cfg->schedule, t->plan->stages,
                                    t->plan->virtual_stages, t->micro);
}

static int open_data(trainer *t)
{
    const pn_train_config *cfg = &t->cfg;
    if (!cfg->data[0])
        return pn_error_set(PN_ERR_INVALID, "%s: no training data: give --data FILE or "
                                            "\"train\": {\"data\": ...}", t->graph->file);
    PN_TRY(pn_fault_at(&t->fault, "data"));
    int n_fields;
    const pn_reader_field *fields = pn_stage_fields(t->stage, &n_fields);
    pn_reader_options opts = {.global_batch = cfg->batch,
                              .first = t->grid->replica * t->replica_rows,
                              .count = t->replica_rows,
                              .shuffle = true,
                              .seed = cfg->seed,
                              .drop_last = true,
                              .cache_bytes = (size_t)cfg->data_cache_mb << 20};
    PN_TRY(pn_reader_open(&t->train_data, cfg->data, fields, n_fields, &opts));
    if (cfg->eval[0]) {
        opts.shuffle = opts.drop_last = false;
        PN_TRY(pn_reader_open(&t->eval_data, cfg->eval, fields, n_fields, &opts));
    }
    return PN_OK;
}

/* Places the layers: by the FLOP estimate, or by the times of --layer-times, which
 * every rank reads from the same file, so that every rank places alike. */
static int place(trainer *t)
{
    const pn_graph *g = t->graph;
    int v;
    PN_TRY(pn_train_schedule_chunks(&t->cfg, &v));
    if (!t->cfg.layer_times[0])
        return pn_plan_build_virtual(&t->plan, g, t->cfg.stages, v, NULL);
    pn_plan_times *times = NULL;
    double *layer_s = malloc((size_t)g->n_nodes * sizeof *layer_s);
    int rc = layer_s ? pn_plan_times_load(&times, g, t->cfg.layer_times)
                     : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK) {
        pn_plan_times_layer_sum(times, layer_s);
        rc = pn_plan_build_virtual(&t->plan, g, t->cfg.stages, v, layer_s);
    }
    pn_plan_times_free(times);
    free(layer_s);
    return rc;
}

/* Every rank's device: cpu, or GPU (node-local rank mod visible GPUs) for cuda and for
 * auto where a GPU is visible; then the transport (mpi/comm.h: pn_comm_use_transport),
 * which needs every rank's device. A rank that cannot have what was asked for fails
 * setup on every rank (agreed), before training and before the data is opened.
 * t->devices gets the list rank 0 prints in the layout line. */
static int place_devices(trainer *t, pn_job *job)
{
    int node_rank = 0, node_size = 1, rc;
    rc = pn_job_node_rank(job, &node_rank, &node_size);
    if (rc == PN_OK) rc = pn_device_resolve((pn_device_request)t->cfg.device_request, node_rank,
                                            &t->cfg.device);
    if (rc == PN_OK) rc = pn_device_select(t->cfg.device);
    PN_TRY(pn_comm_agree(t->comm, rc));
    int n = t->grid->size;
    double *code = calloc(2 * (size_t)n, sizeof *code); /* each rank's device: kind, index */
    if (!code) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    code[2 * t->grid->rank] = t->cfg.device.kind;
    code[2 * t->grid->rank + 1] = t->cfg.device.index;
    rc = pn_comm_sum(t->comm, PN_SCOPE_WORLD, code, 2 * n);
    size_t at = 0;
    bool any_gpu = false;
    for (int r = 0; r < n; r++) any_gpu |= code[2 * r] != PN_DEVICE_HOST;
    t->devices[0] = '\0';
    for (int r = 0; rc == PN_OK && r < n && at + 48 < sizeof t->devices; r++) {
        if (!any_gpu) { /* all on the host: one word */
            pn_device_label(pn_device_host(), t->devices, (int)sizeof t->devices);
            break;
        }
        char name[32];
        pn_device dev = {(pn_device_kind)code[2 * r], (int)code[2 * r + 1]};
        at += (size_t)snprintf(t->devices + at, sizeof t->devices - at, "%s%s", r ? ", " : "",
                               pn_device_name(dev, name, sizeof name));
        if (n > 1)
            at += (size_t)snprintf(t->devices + at, sizeof t->devices - at, " (rank %d, stage %d)",
                                   r, r % t->grid->stages);
    }
    free(code);
    PN_TRY(rc);
    rc = pn_comm_use_transport(t->comm, (pn_transport_request)t->cfg.transport_request,
                               t->cfg.device);
    return pn_comm_agree(t->comm, rc);
}

/* A cosine schedule's warm-up must leave steps to decay over. */
static int check_warmup(const trainer *t, long total_steps)
{
    const pn_optimizer_config *o = &t->cfg.optimizer;
    if (o->schedule != PN_LR_COSINE || o->total_steps != 0 || total_steps > o->warmup_steps)
        return PN_OK;
    return pn_error_set(PN_ERR_INVALID, "%s: the cosine schedule's warmup_steps (%ld) leave "
                        "nothing of a run of %ld steps: give more --steps or epochs, or fewer "
                        "warmup_steps", t->graph->file, o->warmup_steps, total_steps);
}

int pn_trainer_setup(trainer *t, pn_job *job)
{
    const pn_graph *g = t->graph;
    const pn_train_config *cfg = &t->cfg;
    if (pn_graph_loss_count(g) != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: layers: training needs exactly one loss layer "
                                            "(softmax_xent or mse), found %d",
                            g->file, pn_graph_loss_count(g));
    if (cfg->steps > 0) /* known now: refused before any memory is taken (--steps) */
        PN_TRY(check_warmup(t, cfg->steps));
    PN_TRY(place(t));
    PN_TRY(pn_comm_create(&t->comm, job, t->plan->stages));
    t->grid = pn_comm_grid(t->comm);
    PN_TRY(place_devices(t, job)); /* before anything is made on a device */
    if (cfg->snapshot_dir[0]) /* before any work that a bad directory would lose */
        PN_TRY(pn_checkpoint_prepare(t->comm, cfg->snapshot_dir, &t->snapshot_lock));
    if (t->grid->size > 1) pn_log_set_rank(t->grid->rank);
    if (cfg->resume[0]) /* the snapshot's seed and batch, before anything uses them */
        PN_TRY(pn_resume_settings(t->comm, g, &t->cfg, t->resume_path, sizeof t->resume_path,
                                  &t->resume_batch));
    t->fault = pn_fault_for_rank(t->grid->rank);
    PN_TRY(pn_fault_at(&t->fault, "setup"));
    t->threads = blas_threads(t);
    pn_math_set_threads(t->threads);
    pn_math_set_deterministic(cfg->deterministic);
    pn_math_set_precision((pn_precision)cfg->precision);
    PN_TRY(check_layout(t));
    PN_TRY(pn_graph_check_batch(g, t->replica_rows)); /* evaluation takes a replica's slice */
    PN_TRY(pn_schedule_build_virtual(&t->sched, (pn_schedule_kind)cfg->schedule,
                                     t->plan->stages, t->plan->virtual_stages, t->micro));
    PN_TRY(pn_schedule_check(t->sched));
    pn_stage_config sc = {.graph = g, .plan = t->plan, .sched = t->sched, .comm = t->comm,
                          .device = cfg->device, .seed = cfg->seed, .global_batch = cfg->batch,
                          .micro_rows = t->micro_rows, .eval_rows = t->replica_rows,
                          .deterministic = cfg->deterministic, .recompute = cfg->recompute,
                          .share_memory = cfg->share_memory,
                          .shard_optimizer = cfg->shard_optimizer,
                          .precision = (pn_precision)cfg->precision};
    PN_TRY(pn_stage_create(&t->stage, &sc));
    if (!(t->config = json_dumps(g->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (cfg->snapshot_dir[0]) { /* a snapshot must fit: known before the data is read */
        const char *slots[2];
        int n_slots = pn_optimizer_slot_names(cfg->optimizer.kind, slots);
        bool sharded = cfg->shard_optimizer && t->grid->replicas > 1 && n_slots > 0;
        PN_TRY(pn_checkpoint_check_room(t->comm, pn_stage_params(t->stage), n_slots, slots,
                                        sharded, t->config, cfg->snapshot_dir,
                                        &t->snapshot_bytes));
    }
    PN_TRY(open_data(t));
    long per_epoch = pn_reader_batches_per_epoch(t->train_data);
    t->total_steps = cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * per_epoch;
    t->tokens = pn_graph_tokens_per_sample(g);
    t->opt_cfg = cfg->optimizer;
    PN_TRY(check_warmup(t, t->total_steps)); /* else "total_steps", never written */
    if (t->opt_cfg.schedule == PN_LR_COSINE && t->opt_cfg.total_steps == 0)
        t->opt_cfg.total_steps = t->total_steps;
    if (cfg->shard_optimizer && t->grid->replicas > 1) /* the slots never whole */
        PN_TRY(pn_optimizer_create_sharded(&t->opt, &t->opt_cfg, pn_stage_params(t->stage),
                                           t->comm));
    else
        PN_TRY(pn_optimizer_create(&t->opt, &t->opt_cfg, pn_stage_params(t->stage)));
    PN_TRY(pn_global_sums_create(&t->sums, g, pn_stage_params(t->stage), t->comm));
    if (pn_stage_grads_in_pieces(t->stage)) pn_global_sums_in_pieces(t->sums);
    if (cfg->metrics[0] && is_root(t))
        PN_TRY(pn_metrics_open(&t->metrics, cfg->metrics, t->resume_path[0] != '\0'));
    return PN_OK;
}

void pn_trainer_teardown(trainer *t)
{
    pn_metrics_close(t->metrics);
    if (t->eval_data) pn_reader_close(t->eval_data);
    if (t->train_data) pn_reader_close(t->train_data);
    pn_optimizer_free(t->opt);
    pn_global_sums_free(t->sums);
    pn_stage_free(t->stage);
    free(t->config);
    pn_schedule_free(t->sched);
    pn_plan_free(t->plan);
    pn_comm_free(t->comm);
}
