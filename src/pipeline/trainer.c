/* The training loop of one rank: setup (grid, placement, schedule, per-slot
 * networks, arena, links, readers), steps that run this stage's schedule, the
 * reductions across replicas and stages, and per-epoch evaluation. */
#include "pipeline/trainer.h"

#include <math.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "base/rng.h"
#include "io/reader.h"
#include "layers/layer_types.h"
#include "math/ops.h"
#include "mpi/grid.h"
#include "mpi/link.h"
#include "mpi/mpi_check.h"
#include "pipeline/checkpoint.h"
#include "pipeline/grad_tree.h"
#include "pipeline/metrics.h"
#include "pipeline/network.h"
#include "pipeline/optimizer.h"
#include "pipeline/plan.h"
#include "pipeline/progress.h"
#include "pipeline/schedule.h"


typedef struct trainer {
    const pn_graph *graph;
    const pn_train_config *cfg;
    const pn_train_hooks *hooks;
    pn_grid *grid;
    pn_plan *plan;
    pn_schedule *sched;
    int micro, micro_rows, replica_rows; /* M, samples per micro-batch, per replica */
    int n_slots;
    pn_network **slots;                  /* [n_slots]: one network per micro-batch in flight */
    bool *member;                        /* [n_nodes] layers computed on this stage */
    pn_params *params;
    pn_optimizer *opt;
    pn_optimizer_config opt_cfg;          /* with the run's length filled in */
    pn_reader *train_data, *eval_data;
    pn_reader_field *fields;
    int *field_nodes, n_fields;
    bool fields_used;                    /* false: the stage reads only to count rows */
    pn_link *links;
    int n_links;
    pn_metrics *metrics;
    pn_progress progress;
    long total_steps;
    long fault_step;                     /* PIPENET_FAULT for this rank, or -1 */
    bool fault_kill;
    MPI_Request *buckets;                /* gradient all-reduces in flight, one per layer */
    int n_buckets;
    pn_progress_mark start;              /* where the run starts (a resumed snapshot) */
    char *config;                        /* the model's JSON text, for snapshots */
    pn_grad_tree tree;                   /* --deterministic: this step's micro-batch sums */
    float *replica_sums;                 /* --deterministic, D > 1: every replica's sum */
    int n_global_params;                 /* parameters of the whole graph */
    int *local_param;                    /* [n_global_params]: handle here, or -1 */
    double *norm_parts;                  /* [n_global_params]: per-parameter squared norms */
} trainer;

static bool is_root(const trainer *t) { return t->grid->rank == 0; }

/* --- setup ------------------------------------------------------------------------ */

/* Threads for BLAS: the setting, else $OPENBLAS_NUM_THREADS, else the node's cores
 * shared among this job's ranks on the node. */
static int blas_threads(const trainer *t)
{
    if (t->cfg->threads > 0) return t->cfg->threads;
    const char *env = getenv("OPENBLAS_NUM_THREADS");
    if (env && atoi(env) > 0) return atoi(env);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    long per_rank = cores / (t->grid->local_ranks > 0 ? t->grid->local_ranks : 1);
    return per_rank > 0 ? (int)per_rank : 1;
}

/* PIPENET_FAULT=rank:step[:kill] makes that rank fail (or die) at that step: the
 * failure tests use it. */
static void read_fault(trainer *t)
{
    t->fault_step = -1;
    const char *v = getenv("PIPENET_FAULT");
    int rank;
    long step;
    char how[16] = "";
    if (v && sscanf(v, "%d:%ld:%15s", &rank, &step, how) >= 2 && rank == t->grid->rank) {
        t->fault_step = step;
        t->fault_kill = !strcmp(how, "kill");
    }
}


static int check_layout(trainer *t)
{
    const pn_train_config *cfg = t->cfg;
    int d = t->grid->replicas;
    if (cfg->batch % d)
        return pn_error_set(PN_ERR_INVALID, "the global batch %d does not split into %d replicas "
                                            "(choose a batch that %d divides)",
                            cfg->batch, d, d);
    t->replica_rows = cfg->batch / d;
    t->micro = cfg->micro_batches > 0 ? cfg->micro_batches
                                      : pn_default_micro_batches(t->replica_rows, t->grid->stages);
    if (t->micro < 1 || t->replica_rows % t->micro)
        return pn_error_set(PN_ERR_INVALID,
                            "%d micro-batches do not divide a replica's %d samples (global "
                            "batch %d over %d replicas)",
                            t->micro, t->replica_rows, cfg->batch, d);
    t->micro_rows = t->replica_rows / t->micro;
    return PN_OK;
}

static int build_slots(trainer *t)
{
    const pn_graph *g = t->graph;
    int stage = t->grid->stage;
    t->member = calloc((size_t)g->n_nodes, sizeof *t->member);
    if (!t->member) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) t->member[i] = t->plan->stage_of[i] == stage;
    t->n_slots = pn_schedule_peak_in_flight(t->sched, stage);
    t->slots = calloc((size_t)t->n_slots, sizeof *t->slots);
    if (!t->slots) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_network_options o = {.member = t->member, .device = pn_device_host(),
                            .copies = t->n_slots, .init = true, .seed = t->cfg->seed};
    PN_TRY(pn_network_build(g, &o, &t->params, t->slots));
    t->buckets = malloc((size_t)(g->n_nodes ? g->n_nodes : 1) * sizeof *t->buckets);
    if (!t->buckets) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    /* slot 0 also runs evaluation, a replica's whole slice at once */
    for (int k = 0; k < t->n_slots; k++)
        PN_TRY(pn_network_plan(t->slots[k], k == 0 ? t->replica_rows : t->micro_rows));
    return PN_OK;
}

/* One link per direction and neighbour for every Argument that crosses stages. */
static int build_links(trainer *t)
{
    const pn_graph *g = t->graph;
    const int *stage_of = t->plan->stage_of;
    int self = t->grid->stage, cap = 0;
    for (int p = 0; p < g->n_nodes; p++) cap += 2 * g->nodes[p].n_consumers;
    t->links = calloc((size_t)(cap ? cap : 1), sizeof *t->links);
    if (!t->links) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int p = 0; p < g->n_nodes; p++) {
        if (g->nodes[p].is_input) continue;
        int sp = stage_of[p];
        bool seen[4096] = {false};
        for (int c = 0; c < g->n_nodes; c++)
            for (int k = 0; k < g->nodes[c].n_inputs; k++) {
                int sc = stage_of[c];
                if (g->nodes[c].inputs[k] != p || sc == sp || sc >= 4096 || seen[sc]) continue;
                seen[sc] = true;
                if (self != sp && self != sc) continue;
                pn_shape shape = g->nodes[p].layer->out_shape;
                int rows = t->replica_rows * shape.seq, peer = self == sp ? sc : sp;
                bool producer = self == sp;
                PN_TRY(pn_link_init(&t->links[t->n_links++], PN_LINK_VALUE, producer, p,
                                    g->nodes[p].name, self, peer, shape.width, rows, t->micro));
                if (g->nodes[p].needs_grad)
                    PN_TRY(pn_link_init(&t->links[t->n_links++], PN_LINK_GRAD, !producer, p,
                                        g->nodes[p].name, self, peer, shape.width, rows,
                                        t->micro));
            }
    }
    return PN_OK;
}

/* The data inputs this stage consumes; a stage that consumes none still reads the
 * first one, so that every stage of a replica sees the same batch sizes. */
static int collect_fields(trainer *t)
{
    const pn_graph *g = t->graph;
    pn_network *net = t->slots[0];
    t->fields = calloc((size_t)g->n_nodes, sizeof *t->fields);
    t->field_nodes = calloc((size_t)g->n_nodes, sizeof *t->field_nodes);
    if (!t->fields || !t->field_nodes) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int pass = 0; pass < 2 && t->n_fields == 0; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            if (!g->nodes[i].is_input || (pass == 0 && !pn_network_arg(net, i))) continue;
            t->fields[t->n_fields] = (pn_reader_field){
                .dataset = pn_data_layer_dataset(g->nodes[i].layer),
                .shape = g->nodes[i].layer->out_shape, .input = g->nodes[i].name};
            t->field_nodes[t->n_fields++] = i;
            t->fields_used = pass == 0;
            if (pass == 1) break;
        }
    return PN_OK;
}

static int open_data(trainer *t)
{
    const pn_train_config *cfg = t->cfg;
    if (!cfg->data[0])
        return pn_error_set(PN_ERR_INVALID, "%s: no training data: give --data FILE or "
                                            "\"train\": {\"data\": ...}", t->graph->file);
    pn_reader_options opts = {.global_batch = cfg->batch,
                              .first = t->grid->replica * t->replica_rows,
                              .count = t->replica_rows,
                              .shuffle = true,
                              .seed = cfg->seed,
                              .drop_last = true,
                              .cache_bytes = (size_t)cfg->data_cache_mb << 20};
    PN_TRY(pn_reader_open(&t->train_data, cfg->data, t->fields, t->n_fields, &opts));
    if (cfg->eval[0]) {
        opts.shuffle = opts.drop_last = false;
        PN_TRY(pn_reader_open(&t->eval_data, cfg->eval, t->fields, t->n_fields, &opts));
    }
    return PN_OK;
}

/* Numbers the whole graph's parameters in graph order and records which this stage
 * holds, once, for the per-parameter reductions of every step. */
static int map_global_params(trainer *t)
{
    const pn_graph *g = t->graph;
    for (int i = 0; i < g->n_nodes; i++) t->n_global_params += g->nodes[i].layer->n_params;
    size_t n = (size_t)(t->n_global_params ? t->n_global_params : 1);
    t->local_param = malloc(n * sizeof *t->local_param);
    t->norm_parts = malloc(n * sizeof *t->norm_parts);
    if (!t->local_param || !t->norm_parts) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        for (int j = 0; j < l->n_params; j++) {
            char name[512];
            snprintf(name, sizeof name, "%s/%s", g->nodes[i].name, l->param_decls[j].suffix);
            t->local_param[k++] = pn_params_find(t->params, name);
        }
    }
    return PN_OK;
}

static int setup(trainer *t, MPI_Comm comm)
{
    const pn_graph *g = t->graph;
    const pn_train_config *cfg = t->cfg;
    if (pn_graph_loss_count(g) != 1)
        return pn_error_set(PN_ERR_INVALID, "%s: layers: training needs exactly one loss layer "
                                            "(softmax_xent or mse), found %d",
                            g->file, pn_graph_loss_count(g));
    PN_TRY(pn_plan_build(&t->plan, g, cfg->stages));
    PN_TRY(pn_grid_create(&t->grid, comm, t->plan->stages));
    if (t->grid->size > 1) pn_log_set_rank(t->grid->rank);
    read_fault(t);
    pn_math_set_threads(blas_threads(t));
    PN_TRY(check_layout(t));
    PN_TRY(pn_schedule_build(&t->sched, (pn_schedule_kind)cfg->schedule, t->plan->stages,
                             t->micro));
    PN_TRY(pn_schedule_check(t->sched));
    PN_TRY(build_slots(t));
    PN_TRY(build_links(t));
    PN_TRY(collect_fields(t));
    PN_TRY(open_data(t));
    long per_epoch = pn_reader_batches_per_epoch(t->train_data);
    t->total_steps = cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * per_epoch;
    t->opt_cfg = cfg->optimizer;
    if (t->opt_cfg.schedule == PN_LR_COSINE && t->opt_cfg.total_steps == 0)
        t->opt_cfg.total_steps = t->total_steps;
    PN_TRY(pn_optimizer_create(&t->opt, &t->opt_cfg, t->params));
    PN_TRY(map_global_params(t));
    if (cfg->deterministic) {
        size_t n = pn_params_size(t->params);
        PN_TRY(pn_grad_tree_init(&t->tree, n, t->micro));
        if (t->grid->replicas > 1 &&
            !(t->replica_sums = malloc((size_t)t->grid->replicas * (n ? n : 1) * sizeof(float))))
            return pn_error_set(PN_ERR_NOMEM, "out of memory for deterministic gradient sums");
    }
    if (cfg->metrics[0] && is_root(t))
        PN_TRY(pn_metrics_open(&t->metrics, cfg->metrics, cfg->resume[0] != '\0'));
    if (!(t->config = json_dumps(g->root, JSON_INDENT(2) | JSON_PRESERVE_ORDER)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    return PN_OK;
}

static void teardown(trainer *t)
{
    pn_metrics_close(t->metrics);
    for (int i = 0; i < t->n_links; i++) pn_link_free(&t->links[i]);
    free(t->links);
    if (t->eval_data) pn_reader_close(t->eval_data);
    if (t->train_data) pn_reader_close(t->train_data);
    pn_optimizer_free(t->opt);
    for (int k = 0; t->slots && k < t->n_slots; k++) pn_network_free(t->slots[k]);
    free(t->slots);
    pn_params_free(t->params);
    free(t->member);
    free(t->local_param);
    free(t->norm_parts);
    free(t->config);
    free(t->buckets);
    pn_grad_tree_free(&t->tree);
    free(t->replica_sums);
    free(t->fields);
    free(t->field_nodes);
    pn_schedule_free(t->sched);
    pn_plan_free(t->plan);
    pn_grid_free(t->grid);
}

/* --- one micro-batch ---------------------------------------------------------------- */

/* Copies rows [first, first + rows) of the batch into the slot's data arguments. */
static int feed(trainer *t, pn_network *net, const pn_batch *b, int first, int rows)
{
    PN_TRY(pn_network_set_batch(net, rows));
    if (!t->fields_used) return PN_OK;
    for (int f = 0; f < t->n_fields; f++) {
        pn_arg *a = pn_network_arg(net, t->field_nodes[f]);
        size_t per = (size_t)a->shape.seq * (a->shape.ids ? 1 : (size_t)a->shape.width);
        size_t bytes = (size_t)rows * per * 4;
        if (a->shape.ids)
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, b->ids[f] + (size_t)first * per, bytes));
        else
            PN_TRY(pn_buffer_write(&a->value_buf, 0, b->values[f] + (size_t)first * per, bytes));
    }
    return PN_OK;
}

static int forward_micro(trainer *t, const pn_batch *b, long step, int micro, int rows,
                         bool training)
{
    pn_network *net = t->slots[micro % t->n_slots];
    PN_TRY(feed(t, net, b, micro * t->micro_rows, rows));
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (l->kind != PN_LINK_VALUE || l->sends) continue;
        pn_arg *a = pn_network_arg(net, l->node);
        pn_matrix payload;
        PN_TRY(pn_link_wait_recv(l, step, micro, pn_arg_rows(a), &payload));
        PN_TRY(pn_copy(&payload, &a->value));
    }
    pn_pass pass = {training, t->cfg->seed, step, b->sample0 + (long)micro * t->micro_rows};
    PN_TRY(pn_network_forward(net, &pass));
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (l->kind == PN_LINK_VALUE && l->sends)
            PN_TRY(pn_link_send(l, t->grid->pipe, step, micro, &pn_network_arg(net, l->node)->value));
    }
    return PN_OK;
}

/* A layer's gradients are final for the step: start summing them over the replicas
 * (its parameters are one contiguous run of the arena), and push the reductions
 * already in flight along. */
static int start_bucket(void *ctx, const pn_layer_inst *x)
{
    trainer *t = ctx;
    size_t first = SIZE_MAX, end = 0;
    for (int i = 0; i < x->layer->n_params; i++) {
        const pn_param *p = pn_params_get(t->params, x->param_index[i]);
        if (p->offset < first) first = p->offset;
        if (p->offset + (size_t)p->rows * p->cols > end) end = p->offset + (size_t)p->rows * p->cols;
    }
    float *grads = pn_params_all_grads(t->params).data;
    PN_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, grads + first, (int)(end - first), MPI_FLOAT,
                                MPI_SUM, t->grid->data, &t->buckets[t->n_buckets++]));
    int done;
    PN_MPI_CHECK(MPI_Testall(t->n_buckets, t->buckets, &done, MPI_STATUSES_IGNORE));
    return PN_OK;
}

static int backward_micro(trainer *t, const pn_batch *b, long step, int micro, bool last)
{
    pn_network *net = t->slots[micro % t->n_slots];
    bool bucketed = last && t->grid->replicas > 1 && !t->cfg->deterministic;
    pn_network_on_grads_ready(net, bucketed ? start_bucket : NULL, t);
    if (t->cfg->deterministic) PN_TRY(pn_params_zero_grads(t->params)); /* one leaf each */
    PN_TRY(pn_network_backward_begin(net, t->cfg->batch));
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (l->kind != PN_LINK_GRAD || l->sends) continue;
        pn_arg *a = pn_network_arg(net, l->node);
        pn_matrix payload;
        PN_TRY(pn_link_wait_recv(l, step, micro, pn_arg_rows(a), &payload));
        PN_TRY(pn_axpy(1.0f, &payload, &a->grad));
    }
    pn_pass pass = {true, t->cfg->seed, step, b->sample0 + (long)micro * t->micro_rows};
    int rc = pn_network_backward_run(net, &pass);
    pn_network_on_grads_ready(net, NULL, NULL);
    PN_TRY(rc);
    if (t->cfg->deterministic) pn_grad_tree_push(&t->tree, pn_params_all_grads(t->params).data);
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (l->kind == PN_LINK_GRAD && l->sends)
            PN_TRY(pn_link_send(l, t->grid->pipe, step, micro, &pn_network_arg(net, l->node)->grad));
    }
    return PN_OK;
}

/* Posts the receives of a step on every incoming link. MPI matches messages of one
 * sender and tag to receives in posting order, so each link's receives are posted
 * in the order the peer sends: its schedule's forwards (values) or backwards
 * (gradients); each lands in its micro-batch's buffer. */
static int post_step_receives(trainer *t)
{
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (l->sends) continue;
        pn_pass_kind sent_in = l->kind == PN_LINK_VALUE ? PN_PASS_FORWARD : PN_PASS_BACKWARD;
        for (int k = 0; k < t->sched->count[l->peer]; k++) {
            pn_action a = t->sched->actions[l->peer][k];
            if (a.pass == sent_in) PN_TRY(pn_link_post_recv(l, t->grid->pipe, a.micro));
        }
    }
    return PN_OK;
}

/* Posts the receive of one evaluation batch (micro-batch slot 0) on value links. */
static int post_eval_receives(trainer *t)
{
    for (int i = 0; i < t->n_links; i++) {
        pn_link *l = &t->links[i];
        if (!l->sends && l->kind == PN_LINK_VALUE) PN_TRY(pn_link_post_recv(l, t->grid->pipe, 0));
    }
    return PN_OK;
}

static int wait_sends(trainer *t)
{
    for (int i = 0; i < t->n_links; i++)
        if (t->links[i].sends) PN_TRY(pn_link_wait_sends(&t->links[i]));
    return PN_OK;
}

/* Sums the loss statistics of every slot into s[3] = {loss sum, correct, rows},
 * resets them, and sums over all ranks. */
static int reduce_stats(trainer *t, double s[3])
{
    s[0] = s[1] = s[2] = 0.0;
    for (int k = 0; k < t->n_slots; k++) {
        pn_layer_stats st;
        pn_network_stats(t->slots[k], &st);
        pn_network_reset_stats(t->slots[k]);
        s[0] += st.loss_sum, s[1] += st.correct, s[2] += st.rows;
    }
    PN_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, s, 3, MPI_DOUBLE, MPI_SUM, t->grid->world));
    return PN_OK;
}

/* --- reductions that do not depend on the layout -------------------------------------- */

/* grads = the tree sum of every micro-batch of the step over all replicas. */
static int deterministic_sum(trainer *t, float *grads)
{
    size_t n = pn_params_size(t->params);
    const float *mine = pn_grad_tree_result(&t->tree);
    if (!mine || n == 0) return PN_OK;
    if (t->grid->replicas == 1) {
        memcpy(grads, mine, n * sizeof(float));
        return PN_OK;
    }
    PN_MPI_CHECK(MPI_Allgather(mine, (int)n, MPI_FLOAT, t->replica_sums, (int)n, MPI_FLOAT,
                               t->grid->data));
    pn_grad_tree_sum_blocks(t->replica_sums, t->grid->replicas, n, grads);
    return PN_OK;
}

/* Calls fn(ctx, k, p) for the k-th parameter of the whole graph (graph order) when
 * this stage holds it, p its handle here. */
static void for_each_global_param(trainer *t, void (*fn)(void *, int, int), void *ctx)
{
    for (int k = 0; k < t->n_global_params; k++)
        if (t->local_param[k] >= 0) fn(ctx, k, t->local_param[k]);
}

typedef struct per_param {
    trainer *t;
    double *sq;
    unsigned long long *hash;
} per_param;

static void param_sum_squares(void *arg, int k, int p)
{
    per_param *pp = arg;
    pn_matrix g = pn_params_grad(pp->t->params, p);
    double s = 0.0;
    for (size_t i = 0; i < pn_matrix_count(g); i++) s += (double)g.data[i] * g.data[i];
    pp->sq[k] = s;
}

static void param_hash(void *arg, int k, int p)
{
    per_param *pp = arg;
    const pn_param *q = pn_params_get(pp->t->params, p);
    pn_matrix v = pn_params_value(pp->t->params, p);
    uint64_t h = pn_hash_string(q->name);
    const unsigned char *bytes = (const unsigned char *)v.data;
    for (size_t i = 0; i < pn_matrix_count(v) * sizeof(float); i++) h = (h ^ bytes[i]) * 1099511628211ULL;
    pp->hash[k] = h;
}

/* The squared norm of all gradients: per parameter, then added in graph order, so
 * the same bits come out of every placement. */
static int global_sum_squares(trainer *t, double *out)
{
    double *sq = t->norm_parts;
    memset(sq, 0, (size_t)t->n_global_params * sizeof *sq);
    per_param pp = {t, sq, NULL};
    for_each_global_param(t, param_sum_squares, &pp);
    int rc = MPI_Allreduce(MPI_IN_PLACE, sq, t->n_global_params, MPI_DOUBLE, MPI_SUM, t->grid->pipe);
    double total = 0.0;
    for (int k = 0; k < t->n_global_params; k++) total += sq[k];
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, "MPI_Allreduce (gradient norm)", __FILE__, __LINE__);
    *out = total;
    return PN_OK;
}

/* A hash of every parameter's bits and name, combined in graph order (same on all ranks). */
static int parameter_hash(trainer *t, unsigned long long *out)
{
    unsigned long long *h = calloc((size_t)(t->n_global_params ? t->n_global_params : 1), sizeof *h);
    if (!h) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    per_param pp = {t, NULL, h};
    for_each_global_param(t, param_hash, &pp);
    int rc = MPI_Allreduce(MPI_IN_PLACE, h, t->n_global_params, MPI_UNSIGNED_LONG_LONG, MPI_BXOR,
                           t->grid->pipe);
    uint64_t total = 0;
    for (int k = 0; k < t->n_global_params; k++) total = pn_hash_mix(total, h[k]);
    free(h);
    if (rc != MPI_SUCCESS) return pn_mpi_fail(rc, "MPI_Allreduce (parameter hash)", __FILE__, __LINE__);
    *out = total;
    return PN_OK;
}

/* --- a step, an evaluation ----------------------------------------------------------- */

static int train_step(trainer *t, const pn_batch *b, long step, double *loss)
{
    if (step == t->fault_step) {
        if (t->fault_kill) raise(SIGKILL);
        return pn_error_set(PN_ERR_INTERNAL, "step %ld: fault injected by PIPENET_FAULT", step);
    }
    PN_TRY(post_step_receives(t));
    int stage = t->grid->stage, n = t->sched->count[stage];
    t->n_buckets = 0;
    pn_grad_tree_reset(&t->tree);
    for (int i = 0; i < n; i++) {
        pn_action a = t->sched->actions[stage][i];
        if (a.pass == PN_PASS_FORWARD)
            PN_TRY(forward_micro(t, b, step, a.micro, t->micro_rows, true));
        else /* every schedule ends with the step's last backward */
            PN_TRY(backward_micro(t, b, step, a.micro, i == n - 1));
    }
    PN_TRY(wait_sends(t));
    PN_MPI_CHECK(MPI_Waitall(t->n_buckets, t->buckets, MPI_STATUSES_IGNORE));
    pn_matrix grads = pn_params_all_grads(t->params);
    if (t->cfg->deterministic) PN_TRY(deterministic_sum(t, grads.data));
    double scale = 1.0;
    if (t->opt_cfg.clip_norm > 0) {
        double sq = 0.0;
        PN_TRY(global_sum_squares(t, &sq));
        scale = pn_optimizer_clip_scale(&t->opt_cfg, sq);
    }
    PN_TRY(pn_optimizer_step(t->opt, t->params, step, scale));
    double s[3];
    PN_TRY(reduce_stats(t, s));
    *loss = s[0] / s[2];
    return PN_OK;
}

/* Runs the evaluation set forward through the pipeline, a replica's slice of each
 * batch at once; returns mean loss and accuracy over the whole set. */
static int evaluate(trainer *t, double *loss, double *accuracy)
{
    long samples = pn_reader_samples(t->eval_data);
    long batches = (samples + t->cfg->batch - 1) / t->cfg->batch;
    PN_TRY(pn_reader_seek(t->eval_data, 0, 0));
    int saved_rows = t->micro_rows;
    for (long i = 0; i < batches; i++) {
        const pn_batch *b;
        PN_TRY(pn_reader_next(t->eval_data, &b));
        if (b->rows == 0) continue; /* a short last batch that ends before this replica */
        long tag = -(i + 1);        /* evaluation messages never match a step's */
        PN_TRY(post_eval_receives(t));
        t->micro_rows = b->rows;
        int rc = forward_micro(t, b, tag, 0, b->rows, false);
        t->micro_rows = saved_rows;
        PN_TRY(rc);
        PN_TRY(wait_sends(t));
    }
    double s[3];
    PN_TRY(reduce_stats(t, s));
    *loss = s[2] > 0 ? s[0] / s[2] : NAN;
    *accuracy = s[2] > 0 ? s[1] / s[2] : NAN;
    return PN_OK;
}

static int end_of_epoch(trainer *t, long step, long epoch, double epoch_loss, double seconds,
                        long samples, pn_train_result *r)
{
    char eval_text[96] = "";
    if (t->eval_data) {
        PN_TRY(evaluate(t, &r->eval_loss, &r->eval_accuracy));
        snprintf(eval_text, sizeof eval_text, "  eval loss %.4f  eval accuracy %.2f%%",
                 r->eval_loss, 100.0 * r->eval_accuracy);
        if (t->metrics)
            PN_TRY(pn_metrics_eval(t->metrics, step, epoch, r->eval_loss, r->eval_accuracy));
    }
    if (is_root(t))
        pn_progress_print(&t->progress, "epoch %ld: train loss %.4f%s  (%.1f s, %.0f samples/s)",
                          epoch + 1, epoch_loss, eval_text, seconds, samples / seconds);
    return PN_OK;
}

/* SIGTERM and SIGUSR1 ask for a snapshot and a clean exit after the current step
 * (schedulers send them ahead of the wall-time limit). */
static volatile sig_atomic_t stop_signal;

static void on_stop_signal(int sig) { stop_signal = sig; }

static void catch_stop_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
}

/* True on every rank when any rank has received a stop signal. */
static int stop_requested(trainer *t, bool *stop)
{
    int mine = stop_signal != 0, any = 0;
    PN_MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, t->grid->world));
    *stop = any != 0;
    return PN_OK;
}

static int snapshot(trainer *t, pn_progress_mark mark)
{
    char path[PN_PATH_MAX + 32] = "";
    double t0 = pn_now();
    PN_TRY(pn_checkpoint_save(t->grid, t->params, t->config, t->cfg->seed, mark,
                              t->cfg->snapshot_dir, t->cfg->keep, path, sizeof path));
    if (is_root(t))
        pn_progress_print(&t->progress, "snapshot at step %ld: %s (%.2f s)", mark.step, path,
                          pn_now() - t0);
    return PN_OK;
}

static int resume(trainer *t)
{
    char path[PN_PATH_MAX + 32];
    PN_TRY(pn_checkpoint_load(t->grid, t->params, t->cfg->resume, t->cfg->snapshot_dir,
                              &t->start, path, sizeof path));
    if (is_root(t))
        printf("resuming from %s: step %ld, epoch %ld, batch %ld\n", path, t->start.step,
               t->start.epoch + 1, t->start.batch_index);
    return PN_OK;
}

static void announce(trainer *t)
{
    const pn_train_config *cfg = t->cfg;
    if (!is_root(t)) return;
    pn_progress_print(&t->progress,
                      "training %s: %ld parameters, %ld samples, batch %d, %ld steps/epoch, "
                      "%ld steps, %d BLAS thread(s) per rank",
                      t->graph->name, pn_graph_param_count(t->graph),
                      pn_reader_samples(t->train_data), cfg->batch,
                      pn_reader_batches_per_epoch(t->train_data), t->total_steps,
                      blas_threads(t));
    if (t->grid->size > 1)
        pn_progress_print(&t->progress,
                          "layout: %d replica(s) x %d stage(s), %d micro-batches of %d, %s",
                          t->grid->replicas, t->grid->stages, t->micro, t->micro_rows,
                          pn_schedule_kind_name(t->sched->kind));
}

static int run(trainer *t, pn_train_result *r)
{
    const pn_train_config *cfg = t->cfg;
    long per_epoch = pn_reader_batches_per_epoch(t->train_data), total = t->total_steps;
    long step = t->start.step;
    pn_progress_start(&t->progress, stdout, step, total, cfg->log_every_s, t->grid->size == 1);
    announce(t);
    if (t->hooks && t->hooks->collect_losses &&
        !(r->losses = calloc((size_t)(total ? total : 1), sizeof *r->losses)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (step >= total && is_root(t))
        pn_progress_print(&t->progress, "already at step %ld of %ld: nothing to train", step, total);
    PN_TRY(pn_reader_seek(t->train_data, t->start.epoch,
                          t->start.batch_index < per_epoch ? t->start.batch_index : 0));
    catch_stop_signals();
    double start = pn_now(), epoch_start = start, epoch_loss = 0.0;
    long epoch_steps = 0;
    pn_progress_mark next = t->start; /* the batch after the last one trained */
    while (step < total) {
        const pn_batch *b;
        double t0 = pn_now();
        PN_TRY(pn_reader_next(t->train_data, &b));
        long epoch = b->epoch;
        double loss = NAN;
        PN_TRY(train_step(t, b, step, &loss));
        if (!isfinite(loss)) /* every rank sees the reduced loss: rank 0 reports */
            return is_root(t) ? pn_error_set(PN_ERR_INVALID,
                                             "step %ld: the loss is %g: training diverged "
                                             "(lower the learning rate or set clip_norm)",
                                             step, loss)
                              : pn_error_set(PN_ERR_PEER, "rank 0 reports a diverged loss");
        if (r->losses) r->losses[step] = loss;
        next = (pn_progress_mark){step + 1, b->index + 1 < per_epoch ? b->epoch : b->epoch + 1,
                                  b->index + 1 < per_epoch ? b->index + 1 : 0};
        double lr = pn_optimizer_lr(&t->opt_cfg, step), dt = pn_now() - t0;
        step++;
        epoch_loss += loss;
        epoch_steps++;
        r->last_loss = loss;
        if (t->metrics)
            PN_TRY(pn_metrics_step(t->metrics, step, epoch, loss, lr, cfg->batch / dt));
        if (is_root(t))
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
        bool stop = false;
        PN_TRY(stop_requested(t, &stop));
        if (cfg->snapshot_dir[0] && (stop || (cfg->snapshot_every > 0 &&
                                              step % cfg->snapshot_every == 0 && step < total)))
            PN_TRY(snapshot(t, next));
        if (stop) {
            r->stopped_by_signal = 1;
            if (is_root(t))
                pn_progress_print(&t->progress, "stopping at step %ld on %s%s", step,
                                  stop_signal == SIGUSR1 ? "SIGUSR1" : "a signal",
                                  cfg->snapshot_dir[0] ? " after writing a snapshot" : "");
            break;
        }
    }
    if (cfg->snapshot_dir[0] && !r->stopped_by_signal && step > t->start.step)
        PN_TRY(snapshot(t, next));
    if (is_root(t)) pn_progress_finish(&t->progress);
    PN_TRY(parameter_hash(t, &r->param_hash));
    if (is_root(t)) pn_progress_print(&t->progress, "parameter hash after %ld steps: %016llx", step, r->param_hash);
    r->steps = step;
    r->seconds = pn_now() - start;
    r->samples_per_s = r->seconds > 0 ? (double)step * cfg->batch / r->seconds : 0.0;
    if (t->hooks && t->hooks->on_params) PN_TRY(t->hooks->on_params(t->hooks->ctx, t->params));
    return PN_OK;
}

int pn_train(const pn_graph *g, const pn_train_config *cfg, MPI_Comm comm,
             const pn_train_hooks *hooks, pn_train_result *result)
{
    trainer t = {.graph = g, .cfg = cfg, .hooks = hooks};
    pn_train_result r = {0, NAN, NAN, NAN, 0, 0, NULL, 0, 0, 0};
    int rc = setup(&t, comm);
    if (t.grid) {
        rc = pn_grid_agree(t.grid, rc);
    } else if (rc < 0) { /* no grid yet: every rank failed the same way */
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        if (rank != 0) rc = pn_error_set(PN_ERR_PEER, "rank 0 failed");
    }
    if (rc == PN_OK && cfg->resume[0]) rc = pn_grid_agree(t.grid, resume(&t));
    r.failed_together = rc < 0;
    if (rc == PN_OK) rc = run(&t, &r);
    if (rc < 0 && rc != PN_ERR_PEER && t.grid && t.grid->size > 1)
        rc = pn_error_wrap(rc, "rank %d (stage %d, replica %d)", t.grid->rank, t.grid->stage,
                           t.grid->replica);
    teardown(&t);
    if (result)
        *result = r;
    else
        free(r.losses);
    return rc;
}
