/* The stage runtime (stage.h): setup (networks over one arena, links to the
 * neighbour stages, the fields read), one micro-batch's forward and backward, the
 * step that runs them in schedule order, and the sum of the gradients over the
 * replicas. Every transfer goes through the communication seam (mpi/comm.h); every
 * touch of parameters, gradients or activations through math ops. */
#include "pipeline/stage.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/trace.h"
#include "layers/layer_types.h"
#include "math/ops.h"
#include "pipeline/grad_tree.h"
#include "pipeline/network.h"

struct pn_stage {
    pn_stage_config cfg;
    const pn_grid *grid;
    int micro;                  /* M */
    bool *member;               /* [n_nodes] layers computed on this stage */
    int n_slots;
    pn_network **nets;          /* [n_slots]: one network per micro-batch in flight */
    pn_params *params;
    pn_link **links;
    int n_links;
    pn_reader_field *fields;
    int *field_nodes, n_fields;
    bool fields_used;           /* false: the stage reads only to count rows */
    pn_grad_tree tree;          /* --deterministic: this step's micro-batch sums */
    pn_buffer replica_sums;     /* --deterministic, D > 1: every replica's sum [D, arena] */
};

/* --- setup --------------------------------------------------------------------------- */

static int build_networks(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    s->member = calloc((size_t)g->n_nodes, sizeof *s->member);
    if (!s->member) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) s->member[i] = s->cfg.plan->stage_of[i] == s->grid->stage;
    s->n_slots = pn_schedule_peak_in_flight(s->cfg.sched, s->grid->stage);
    if (s->n_slots < 1)
        return pn_error_set(PN_ERR_INTERNAL, "stage %d holds no micro-batch", s->grid->stage);
    if (!(s->nets = calloc((size_t)s->n_slots, sizeof *s->nets)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_network_options o = {.member = s->member, .device = s->cfg.device, .copies = s->n_slots,
                            .init = true, .seed = s->cfg.seed};
    PN_TRY(pn_network_build(g, &o, &s->params, s->nets));
    /* slot 0 also runs evaluation, a replica's whole slice at once */
    for (int k = 0; k < s->n_slots; k++)
        PN_TRY(pn_network_plan(s->nets[k], k == 0 ? s->cfg.eval_rows : s->cfg.micro_rows));
    return PN_OK;
}

static int add_link(pn_stage *s, pn_link_kind kind, bool sends, int node, int peer)
{
    const pn_graph_node *n = &s->cfg.graph->nodes[node];
    pn_shape shape = n->layer->out_shape;
    pn_link_spec spec = {kind, sends, node, n->name, peer, shape.width,
                         s->cfg.eval_rows * shape.seq, s->micro};
    return pn_link_create(s->cfg.comm, &spec, &s->links[s->n_links++]);
}

/* One link per direction and neighbour for every Argument that crosses stages. */
static int build_links(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    const int *stage_of = s->cfg.plan->stage_of;
    int self = s->grid->stage, cap = 0;
    for (int p = 0; p < g->n_nodes; p++) cap += 2 * g->nodes[p].n_consumers;
    if (!(s->links = calloc((size_t)(cap ? cap : 1), sizeof *s->links)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    bool *seen = calloc((size_t)s->grid->stages, sizeof *seen);
    if (!seen) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    int rc = PN_OK;
    for (int p = 0; rc == PN_OK && p < g->n_nodes; p++) {
        if (g->nodes[p].is_input) continue;
        int sp = stage_of[p];
        for (int k = 0; k < s->grid->stages; k++) seen[k] = false;
        for (int c = 0; rc == PN_OK && c < g->n_nodes; c++)
            for (int k = 0; rc == PN_OK && k < g->nodes[c].n_inputs; k++) {
                int sc = stage_of[c];
                if (g->nodes[c].inputs[k] != p || sc == sp || seen[sc]) continue;
                seen[sc] = true;
                if (self != sp && self != sc) continue;
                bool producer = self == sp;
                int peer = producer ? sc : sp;
                rc = add_link(s, PN_LINK_VALUE, producer, p, peer);
                if (rc == PN_OK && g->nodes[p].needs_grad)
                    rc = add_link(s, PN_LINK_GRAD, !producer, p, peer);
            }
    }
    free(seen);
    return rc;
}

/* The data inputs this stage consumes; a stage that consumes none still reads the
 * first one, so that every stage of a replica sees the same batch sizes. */
static int collect_fields(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    s->fields = calloc((size_t)g->n_nodes, sizeof *s->fields);
    s->field_nodes = calloc((size_t)g->n_nodes, sizeof *s->field_nodes);
    if (!s->fields || !s->field_nodes) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int pass = 0; pass < 2 && s->n_fields == 0; pass++)
        for (int i = 0; i < g->n_nodes; i++) {
            if (!g->nodes[i].is_input || (pass == 0 && !pn_network_arg(s->nets[0], i))) continue;
            const pn_graph_node *user;
            int limit = pn_graph_id_limit(g, i, &user);
            s->fields[s->n_fields] = (pn_reader_field){
                .dataset = pn_data_layer_dataset(g->nodes[i].layer),
                .shape = g->nodes[i].layer->out_shape, .input = g->nodes[i].name,
                .id_limit = limit, .id_user = user ? user->name : NULL};
            s->field_nodes[s->n_fields++] = i;
            s->fields_used = pass == 0;
            if (pass == 1) break;
        }
    return PN_OK;
}

int pn_stage_create(pn_stage **out, const pn_stage_config *cfg)
{
    *out = NULL;
    pn_stage *s = calloc(1, sizeof *s);
    if (!s) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    *out = s;
    s->cfg = *cfg;
    s->grid = pn_comm_grid(cfg->comm);
    s->micro = cfg->sched->micro;
    PN_TRY(build_networks(s));
    PN_TRY(build_links(s));
    PN_TRY(collect_fields(s));
    if (cfg->deterministic) {
        int n = (int)pn_params_size(s->params);
        PN_TRY(pn_grad_tree_init(&s->tree, cfg->device, n, s->micro));
        size_t bytes = (size_t)s->grid->replicas * (size_t)(n ? n : 1) * sizeof(float);
        if (s->grid->replicas > 1)
            PN_TRY(pn_buffer_acquire(&s->replica_sums, cfg->device, bytes));
    }
    return PN_OK;
}

void pn_stage_free(pn_stage *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_links; i++) pn_link_free(s->links[i]);
    free(s->links);
    for (int k = 0; s->nets && k < s->n_slots; k++) pn_network_free(s->nets[k]);
    free(s->nets);
    pn_params_free(s->params);
    free(s->member);
    free(s->fields);
    free(s->field_nodes);
    pn_grad_tree_free(&s->tree);
    pn_buffer_release(&s->replica_sums);
    free(s);
}

pn_params *pn_stage_params(const pn_stage *s) { return s->params; }

const pn_reader_field *pn_stage_fields(const pn_stage *s, int *n)
{
    *n = s->n_fields;
    return s->fields;
}

/* --- one micro-batch ------------------------------------------------------------------- */

/* Copies rows [first, first + rows) of the batch into the network's data arguments. */
static int feed(pn_stage *s, pn_network *net, const pn_batch *b, int first, int rows)
{
    PN_TRY(pn_network_set_batch(net, rows));
    if (!s->fields_used) return PN_OK;
    for (int f = 0; f < s->n_fields; f++) {
        pn_arg *a = pn_network_arg(net, s->field_nodes[f]);
        size_t per = (size_t)a->shape.seq * (a->shape.ids ? 1 : (size_t)a->shape.width);
        size_t bytes = (size_t)rows * per * 4;
        if (a->shape.ids)
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, b->ids[f] + (size_t)first * per, bytes));
        else
            PN_TRY(pn_buffer_write(&a->value_buf, 0, b->values[f] + (size_t)first * per, bytes));
    }
    return PN_OK;
}

/* Receives the values this stage consumes, runs its layers forward, sends its
 * outputs on; rows from first of the batch, in network slot micro % n_slots. */
static int forward_pass(pn_stage *s, const pn_batch *b, long step, int micro, int first,
                        int rows, bool training)
{
    pn_network *net = s->nets[micro % s->n_slots];
    PN_TRY(feed(s, net, b, first, rows));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_VALUE && !l->sends)
            PN_TRY(pn_link_recv(s->links[i], step, micro, &pn_network_arg(net, l->node)->value,
                                false));
    }
    pn_pass pass = {training, s->cfg.seed, step, b->sample0 + first, micro};
    PN_TRY(pn_network_forward(net, &pass));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_VALUE && l->sends)
            PN_TRY(pn_link_send(s->links[i], step, micro, &pn_network_arg(net, l->node)->value));
    }
    return PN_OK;
}

/* forward_pass as one event of the trace: a micro-batch's, or an evaluation batch's. */
static int forward_micro(pn_stage *s, const pn_batch *b, long step, int micro, int first,
                         int rows, bool training)
{
    double t0 = PN_TRACE_T0();
    int rc = forward_pass(s, b, step, micro, first, rows, training);
    PN_TRACE(training ? "forward" : "eval forward", training ? "micro-batch" : "eval", NULL,
             training ? step : -1, micro, t0);
    return rc;
}

/* A layer's gradients are final for the step: start summing them over the replicas
 * (its parameters are one contiguous run of the arena). */
static int start_bucket(void *ctx, const pn_layer_inst *x)
{
    pn_stage *s = ctx;
    size_t first = SIZE_MAX, end = 0;
    for (int i = 0; i < x->layer->n_params; i++) {
        const pn_param *p = pn_params_get(s->params, x->param_index[i]);
        size_t last = p->offset + (size_t)p->rows * (size_t)p->cols;
        if (p->offset < first) first = p->offset;
        if (last > end) end = last;
    }
    pn_matrix grads = pn_params_all_grads(s->params);
    pn_matrix bucket = pn_matrix_cols(grads, (int)first, (int)(end - first));
    double t0 = PN_TRACE_T0();
    int rc = pn_comm_bucket_start(s->cfg.comm, &bucket);
    PN_TRACE("bucket all-reduce start", "allreduce", x->layer->name, -1, -1, t0);
    return rc;
}

/* Receives the gradients of this stage's outputs, runs its layers backward, sends
 * the gradients of its inputs back. */
static int backward_pass(pn_stage *s, const pn_batch *b, long step, int micro, bool last)
{
    pn_network *net = s->nets[micro % s->n_slots];
    bool bucketed = last && s->grid->replicas > 1 && !s->cfg.deterministic;
    pn_network_on_grads_ready(net, bucketed ? start_bucket : NULL, s);
    if (s->cfg.deterministic) PN_TRY(pn_params_zero_grads(s->params)); /* one leaf each */
    PN_TRY(pn_network_backward_begin(net, s->cfg.global_batch));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_GRAD && !l->sends)
            PN_TRY(pn_link_recv(s->links[i], step, micro, &pn_network_arg(net, l->node)->grad,
                                true));
    }
    pn_pass pass = {true, s->cfg.seed, step, b->sample0 + (long)micro * s->cfg.micro_rows, micro};
    int rc = pn_network_backward_run(net, &pass);
    pn_network_on_grads_ready(net, NULL, NULL);
    PN_TRY(rc);
    if (s->cfg.deterministic) {
        pn_matrix grads = pn_params_all_grads(s->params);
        PN_TRY(pn_grad_tree_push(&s->tree, &grads));
    }
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_GRAD && l->sends)
            PN_TRY(pn_link_send(s->links[i], step, micro, &pn_network_arg(net, l->node)->grad));
    }
    return PN_OK;
}

static int backward_micro(pn_stage *s, const pn_batch *b, long step, int micro, bool last)
{
    double t0 = PN_TRACE_T0();
    int rc = backward_pass(s, b, step, micro, last);
    PN_TRACE("backward", "micro-batch", NULL, step, micro, t0);
    return rc;
}

/* --- a step ---------------------------------------------------------------------------- */

/* Posts the receives of a step on every incoming link. MPI matches messages of one
 * sender and tag to receives in posting order, so each link's receives are posted
 * in the order the peer sends: its schedule's forwards (values) or backwards
 * (gradients); each lands in its micro-batch's buffer. */
static int post_step_receives(pn_stage *s)
{
    const pn_schedule *sched = s->cfg.sched;
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->sends) continue;
        pn_pass_kind sent_in = l->kind == PN_LINK_VALUE ? PN_PASS_FORWARD : PN_PASS_BACKWARD;
        for (int k = 0; k < sched->count[l->peer]; k++) {
            pn_action a = sched->actions[l->peer][k];
            if (a.pass == sent_in) PN_TRY(pn_link_post_recv(s->links[i], a.micro));
        }
    }
    return PN_OK;
}

static int wait_sends(pn_stage *s)
{
    for (int i = 0; i < s->n_links; i++)
        if (pn_link_spec_of(s->links[i])->sends) PN_TRY(pn_link_wait_sends(s->links[i]));
    return PN_OK;
}

/* The arena's gradients = the tree sum of every micro-batch of the step over all
 * replicas. */
static int deterministic_sum(pn_stage *s)
{
    pn_matrix mine = pn_grad_tree_result(&s->tree), grads = pn_params_all_grads(s->params);
    if (!mine.data || grads.cols == 0) return PN_OK;
    if (s->grid->replicas == 1) return pn_copy(&mine, &grads);
    pn_matrix all = pn_matrix_on(&s->replica_sums, s->grid->replicas, grads.cols);
    PN_TRY(pn_comm_gather_replicas(s->cfg.comm, &mine, &all));
    return pn_grad_tree_sum_blocks(&all, &grads);
}

int pn_stage_step(pn_stage *s, const pn_batch *b, long step)
{
    PN_TRY(post_step_receives(s));
    int stage = s->grid->stage, n = s->cfg.sched->count[stage];
    pn_grad_tree_reset(&s->tree);
    for (int i = 0; i < n; i++) {
        pn_action a = s->cfg.sched->actions[stage][i];
        if (a.pass == PN_PASS_FORWARD)
            PN_TRY(forward_micro(s, b, step, a.micro, a.micro * s->cfg.micro_rows,
                                 s->cfg.micro_rows, true));
        else /* every schedule ends with the step's last backward */
            PN_TRY(backward_micro(s, b, step, a.micro, i == n - 1));
    }
    PN_TRY(wait_sends(s));
    PN_TRY(pn_comm_buckets_wait(s->cfg.comm));
    return s->cfg.deterministic ? deterministic_sum(s) : PN_OK;
}

int pn_stage_evaluate(pn_stage *s, const pn_batch *b, long tag)
{
    for (int i = 0; i < s->n_links; i++) { /* one batch, in micro-batch slot 0 */
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (!l->sends && l->kind == PN_LINK_VALUE) PN_TRY(pn_link_post_recv(s->links[i], 0));
    }
    PN_TRY(forward_micro(s, b, tag, 0, 0, b->rows, false));
    return wait_sends(s);
}

void pn_stage_take_stats(pn_stage *s, double out[3])
{
    out[0] = out[1] = out[2] = 0.0;
    for (int k = 0; k < s->n_slots; k++) {
        pn_layer_stats st;
        pn_network_stats(s->nets[k], &st);
        pn_network_reset_stats(s->nets[k]);
        out[0] += st.loss_sum, out[1] += st.correct, out[2] += st.rows;
    }
}
