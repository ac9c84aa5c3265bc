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
#include "pipeline/kept_inputs.h"
#include "pipeline/network.h"
#include "pipeline/ties.h"

struct pn_stage {
    pn_stage_config cfg;
    const pn_grid *grid;
    int micro;                  /* M */
    bool *member;               /* [n_nodes] layers computed on this stage */
    int n_slots;                /* micro-batches in flight at the peak */
    int n_nets;                 /* n_slots, or 1 under --recompute */
    pn_network **nets;          /* [n_nets]: a network per micro-batch in flight */
    pn_kept_inputs kept;        /* --recompute: received inputs per micro-batch in flight */
    int held;                   /* --recompute: the micro-batch nets[0] holds, or -1 */
    size_t scratch_bytes;       /* pool growth during passes: layer scratch */
    pn_params *params;
    pn_link **links;
    int n_links;
    pn_reader_field *fields;
    int *field_nodes, n_fields; /* the input node each field feeds */
    bool *field_is_lengths;     /* the field holds its node's sample lengths */
    int count_field;            /* the lengths that count the loss's positions, or -1 */
    bool fields_used;           /* false: the stage reads only to count rows */
    pn_grad_tree tree;          /* --deterministic: this step's micro-batch sums */
    pn_buffer replica_sums;     /* --deterministic, D > 1: every replica's sum [D, arena] */
    pn_ties *ties;              /* tied tables with a use here, or NULL */
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
    s->n_nets = s->cfg.recompute ? 1 : s->n_slots;
    s->held = -1;
    if (!(s->nets = calloc((size_t)s->n_nets, sizeof *s->nets)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_network_options o = {.member = s->member, .device = s->cfg.device, .copies = s->n_nets,
                            .init = true, .seed = s->cfg.seed};
    PN_TRY(pn_network_build(g, &o, &s->params, s->nets));
    /* slot 0 also runs evaluation: a replica's whole slice at once, or under
     * --recompute micro-batch by micro-batch (pn_stage_evaluate) */
    for (int k = 0; k < s->n_nets; k++)
        PN_TRY(pn_network_plan(s->nets[k], k == 0 && !s->cfg.recompute ? s->cfg.eval_rows
                                                                        : s->cfg.micro_rows));
    return PN_OK;
}

/* --recompute: a slot per micro-batch in flight for each value this stage receives. */
static int keep_inputs(pn_stage *s)
{
    pn_kept_inputs_init(&s->kept, s->cfg.device, s->n_slots);
    if (!s->cfg.recompute) return PN_OK;
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind != PN_LINK_VALUE || l->sends) continue;
        const pn_arg *a = pn_network_arg(s->nets[0], l->node);
        PN_TRY(pn_kept_inputs_add(&s->kept, l->node, s->cfg.micro_rows * a->shape.seq,
                                  a->shape.width));
    }
    return PN_OK;
}

static int add_link(pn_stage *s, pn_link_kind kind, bool sends, int node, int peer,
                    bool lengths)
{
    const pn_graph_node *n = &s->cfg.graph->nodes[node];
    pn_shape shape = n->layer->out_shape;
    pn_link_spec spec = {kind, sends, node, n->name, peer, shape.width,
                         s->cfg.eval_rows * shape.seq, s->micro,
                         lengths && kind == PN_LINK_VALUE ? shape.seq : 0};
    return pn_link_create(s->cfg.comm, &spec, &s->links[s->n_links++]);
}

/* Which nodes' outputs carry sample lengths (graph nodes are in topological order):
 * an input with a lengths dataset, or a layer with an input of the same seq that
 * carries them (network.c's rule). */
static void mark_lengths(const pn_graph *g, bool *carries)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *n = &g->nodes[i];
        carries[i] = n->is_input && pn_data_layer_lengths(n->layer) != NULL;
        for (int k = 0; k < n->n_inputs; k++)
            if (carries[n->inputs[k]] &&
                g->nodes[n->inputs[k]].layer->out_shape.seq == n->layer->out_shape.seq)
                carries[i] = true;
    }
}

/* One link per direction and neighbour for every Argument that crosses stages; a
 * value that carries lengths takes them along. */
static int build_links(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    const int *stage_of = s->cfg.plan->stage_of;
    int self = s->grid->stage, cap = 0;
    for (int p = 0; p < g->n_nodes; p++) cap += 2 * g->nodes[p].n_consumers;
    if (!(s->links = calloc((size_t)(cap ? cap : 1), sizeof *s->links)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    bool *seen = calloc((size_t)s->grid->stages, sizeof *seen);
    bool *carries = calloc((size_t)g->n_nodes, sizeof *carries);
    if (!seen || !carries) {
        free(seen);
        free(carries);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    mark_lengths(g, carries);
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
                rc = add_link(s, PN_LINK_VALUE, producer, p, peer, carries[p]);
                if (rc == PN_OK && g->nodes[p].needs_grad)
                    rc = add_link(s, PN_LINK_GRAD, !producer, p, peer, false);
            }
    }
    free(seen);
    free(carries);
    return rc;
}

/* The lengths that count the real positions a loss averages over: the graph's first
 * input with lengths (what one process counts by). Every stage reads them, also one
 * that gets its lengths over a link or reads only to count rows; such a field feeds
 * no argument (node -1). */
static int add_count_field(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    s->count_field = -1;
    int first = 0;
    while (first < g->n_nodes &&
           !(g->nodes[first].is_input && pn_data_layer_lengths(g->nodes[first].layer)))
        first++;
    if (first == g->n_nodes) return PN_OK;
    for (int f = 0; f < s->n_fields; f++)
        if (s->fields_used && s->field_is_lengths[f] && s->field_nodes[f] == first) {
            s->count_field = f;
            return PN_OK;
        }
    const pn_layer *in = g->nodes[first].layer;
    s->fields[s->n_fields] = (pn_reader_field){
        .dataset = pn_data_layer_lengths(in), .shape = {0, 1, true},
        .input = g->nodes[first].name, .id_user = g->nodes[first].name,
        .length_max = in->out_shape.seq};
    s->field_is_lengths[s->n_fields] = true;
    s->field_nodes[s->n_fields] = -1;
    s->count_field = s->n_fields++;
    return PN_OK;
}

/* The data inputs this stage consumes; a stage that consumes none still reads the
 * first one, so that every stage of a replica sees the same batch sizes. */
static int collect_fields(pn_stage *s)
{
    const pn_graph *g = s->cfg.graph;
    size_t cap = 2 * (size_t)g->n_nodes + 1; /* an input and its lengths; the count's */
    s->fields = calloc(cap, sizeof *s->fields);
    s->field_nodes = calloc(cap, sizeof *s->field_nodes);
    s->field_is_lengths = calloc(cap, sizeof *s->field_is_lengths);
    if (!s->fields || !s->field_nodes || !s->field_is_lengths)
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
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
            const char *lengths = pn_data_layer_lengths(g->nodes[i].layer);
            if (!lengths) continue;
            s->fields[s->n_fields] = (pn_reader_field){
                .dataset = lengths, .shape = {0, 1, true}, .input = g->nodes[i].name,
                .id_user = g->nodes[i].name,
                .length_max = g->nodes[i].layer->out_shape.seq};
            s->field_is_lengths[s->n_fields] = true;
            s->field_nodes[s->n_fields++] = i;
        }
    return add_count_field(s);
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
    PN_TRY(keep_inputs(s));
    PN_TRY(collect_fields(s));
    PN_TRY(pn_ties_create(&s->ties, cfg->graph, cfg->plan->stage_of, s->grid->stage, s->params,
                          cfg->comm));
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
    for (int k = 0; s->nets && k < s->n_nets; k++) pn_network_free(s->nets[k]);
    pn_kept_inputs_free(&s->kept);
    free(s->nets);
    pn_params_free(s->params);
    free(s->member);
    free(s->fields);
    free(s->field_nodes);
    free(s->field_is_lengths);
    pn_grad_tree_free(&s->tree);
    pn_buffer_release(&s->replica_sums);
    pn_ties_free(s->ties);
    free(s);
}

pn_params *pn_stage_params(const pn_stage *s) { return s->params; }

void pn_stage_memory(const pn_stage *s, pn_stage_mem *out)
{
    *out = (pn_stage_mem){.networks = s->n_nets, .kept_bytes = pn_kept_inputs_bytes(&s->kept),
                          .scratch_bytes = s->scratch_bytes};
    for (int k = 0; k < s->n_nets; k++) out->arg_bytes += pn_network_arg_bytes(s->nets[k]);
}

const pn_reader_field *pn_stage_fields(const pn_stage *s, int *n)
{
    *n = s->n_fields;
    return s->fields;
}

/* --- one micro-batch ------------------------------------------------------------------- */

/* Copies rows [first, first + rows) of the batch into the network's data arguments,
 * and points those with lengths at the rows' lengths. */
static int feed(pn_stage *s, pn_network *net, const pn_batch *b, int first, int rows)
{
    PN_TRY(pn_network_set_batch(net, rows));
    if (!s->fields_used) return PN_OK;
    for (int f = 0; f < s->n_fields; f++) {
        if (s->field_nodes[f] < 0) continue; /* read only to count positions */
        pn_arg *a = pn_network_arg(net, s->field_nodes[f]);
        if (s->field_is_lengths[f]) { /* host memory, valid until the next batch is read */
            a->lengths = b->ids[f] + first;
            continue;
        }
        size_t per = (size_t)a->shape.seq * (a->shape.ids ? 1 : (size_t)a->shape.width);
        size_t bytes = (size_t)rows * per * 4;
        if (a->shape.ids)
            PN_TRY(pn_buffer_write(&a->ids_buf, 0, b->ids[f] + (size_t)first * per, bytes));
        else
            PN_TRY(pn_buffer_write(&a->value_buf, 0, b->values[f] + (size_t)first * per, bytes));
    }
    return PN_OK;
}

/* Points the values received for micro at the lengths their messages carried. */
static void take_link_lengths(pn_stage *s, pn_network *net, int micro)
{
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_VALUE && !l->sends && l->seq > 0)
            pn_network_arg(net, l->node)->lengths = pn_link_lengths(s->links[i], micro);
    }
}

/* Receives the values this stage consumes, runs its layers forward, sends its
 * outputs on; rows from first of the batch, in network slot micro % n_slots. */
static int forward_pass(pn_stage *s, const pn_batch *b, long step, int micro, int first,
                        int rows, bool training)
{
    pn_network *net = s->nets[micro % s->n_nets];
    PN_TRY(feed(s, net, b, first, rows));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_VALUE && !l->sends)
            PN_TRY(pn_link_recv(s->links[i], step, micro, &pn_network_arg(net, l->node)->value,
                                false));
    }
    take_link_lengths(s, net, micro);
    if (s->cfg.recompute && training)
        PN_TRY(pn_kept_inputs_save(&s->kept, micro % s->n_slots, net));
    s->held = -1;
    pn_pass pass = {training, s->cfg.seed, step, b->sample0 + first, micro, false};
    PN_TRY(pn_network_forward(net, &pass));
    if (s->cfg.recompute && training) s->held = micro;
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->kind == PN_LINK_VALUE && l->sends) {
            const pn_arg *a = pn_network_arg(net, l->node);
            PN_TRY(pn_link_send(s->links[i], step, micro, &a->value, a->lengths));
        }
    }
    return PN_OK;
}

/* Bytes the device's pool hands out now; what a pass adds is its layers' scratch
 * (kept from forward to backward, grown only when a batch is larger). */
static size_t pool_in_use(const pn_stage *s)
{
    pn_pool_stats st;
    pn_pool_stats_get(s->cfg.device, &st);
    return st.bytes_in_use;
}

static void note_growth(pn_stage *s, size_t before)
{
    size_t now = pool_in_use(s);
    if (now > before) s->scratch_bytes += now - before;
}

/* --recompute: puts micro's inputs back into the one network (the batch's rows, the
 * values kept when they arrived) and runs its forward again, with the same pass as
 * the first time, so dropout draws the same masks; loss statistics stay as they are. */
static int recompute_forward(pn_stage *s, const pn_batch *b, long step, int micro)
{
    double t0 = PN_TRACE_T0();
    pn_network *net = s->nets[0];
    int first = micro * s->cfg.micro_rows;
    PN_TRY(feed(s, net, b, first, s->cfg.micro_rows));
    PN_TRY(pn_kept_inputs_restore(&s->kept, micro % s->n_slots, net));
    take_link_lengths(s, net, micro); /* still in the link's slot: received this step */
    pn_pass pass = {true, s->cfg.seed, step, b->sample0 + first, micro, true};
    PN_TRY(pn_network_forward(net, &pass));
    s->held = micro;
    PN_TRACE("recompute", "micro-batch", NULL, step, micro, t0);
    return PN_OK;
}

/* forward_pass as one event of the trace: a micro-batch's, or an evaluation batch's. */
static int forward_micro(pn_stage *s, const pn_batch *b, long step, int micro, int first,
                         int rows, bool training)
{
    double t0 = PN_TRACE_T0();
    size_t used = pool_in_use(s);
    int rc = forward_pass(s, b, step, micro, first, rows, training);
    note_growth(s, used);
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
    pn_network *net = s->nets[micro % s->n_nets];
    if (s->cfg.recompute && s->held != micro) PN_TRY(recompute_forward(s, b, step, micro));
    s->held = -1; /* backward may reuse what forward left */
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
    pn_pass pass = {true, s->cfg.seed, step, b->sample0 + (long)micro * s->cfg.micro_rows, micro,
                    false};
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
            PN_TRY(pn_link_send(s->links[i], step, micro, &pn_network_arg(net, l->node)->grad,
                                NULL));
    }
    return PN_OK;
}

static int backward_micro(pn_stage *s, const pn_batch *b, long step, int micro, bool last)
{
    double t0 = PN_TRACE_T0();
    size_t used = pool_in_use(s);
    int rc = backward_pass(s, b, step, micro, last);
    note_growth(s, used);
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

/* Losses over padded samples are means over the real positions of the whole global
 * batch: this replica's rows' lengths (the graph's first input with lengths, which
 * every stage reads, add_count_field), summed over the stage's replicas, which all
 * read the same fields. */
static int count_positions(pn_stage *s, const pn_batch *b)
{
    int f = s->count_field;
    if (f < 0) return PN_OK;
    double n = 0.0;
    for (int k = 0; k < b->rows; k++) n += b->ids[f][k];
    if (s->grid->replicas > 1) PN_TRY(pn_comm_sum(s->cfg.comm, PN_SCOPE_REPLICAS, &n, 1));
    for (int k = 0; k < s->n_nets; k++) pn_network_set_positions(s->nets[k], n);
    return PN_OK;
}

int pn_stage_step(pn_stage *s, const pn_batch *b, long step)
{
    PN_TRY(count_positions(s, b));
    PN_TRY(post_step_receives(s));
    s->held = -1;
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
    if (s->cfg.deterministic) PN_TRY(deterministic_sum(s));
    return pn_ties_sum_grads(s->ties); /* a tied table's uses, in every layout alike */
}

int pn_stage_evaluate(pn_stage *s, const pn_batch *b, long tag)
{
    /* one batch in micro-batch slot 0; under --recompute, whose one network holds a
     * micro-batch, in pieces of a micro-batch in slots 0, 1, ... (at most M) */
    int piece = s->cfg.recompute ? s->cfg.micro_rows : b->rows;
    int pieces = (b->rows + piece - 1) / piece;
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (!l->sends && l->kind == PN_LINK_VALUE)
            for (int k = 0; k < pieces; k++) PN_TRY(pn_link_post_recv(s->links[i], k));
    }
    for (int k = 0; k < pieces; k++) {
        int first = k * piece, rows = b->rows - first < piece ? b->rows - first : piece;
        PN_TRY(forward_micro(s, b, tag, k, first, rows, false));
    }
    s->held = -1;
    return wait_sends(s);
}

void pn_stage_take_stats(pn_stage *s, double out[3])
{
    out[0] = out[1] = out[2] = 0.0;
    for (int k = 0; k < s->n_nets; k++) {
        pn_layer_stats st;
        pn_network_stats(s->nets[k], &st);
        pn_network_reset_stats(s->nets[k]);
        out[0] += st.loss_sum, out[1] += st.correct, out[2] += st.rows;
    }
}
