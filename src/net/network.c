/* Forward/backward over a set of graph nodes: one layer instance per computed node,
 * arguments planned once. */
#include "net/network.h"

#include <stdlib.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/trace.h"
#include "math/ops.h"
#include "net/arg_bf16.h"

enum { MAX_INPUTS = 64 };

typedef struct net_node {
    int node;           /* index in the graph */
    bool computed;      /* a member layer (else: an input supplied by the caller) */
} net_node;

struct pn_network {
    const pn_graph *graph;
    pn_device device;
    pn_params *params;
    bool forward_only;
    int n;              /* nodes held here, in topological order */
    net_node *nodes;
    pn_layer_inst *inst;/* [graph->n_nodes]; set up for computed nodes only */
    pn_arg *args;       /* [graph->n_nodes]; only held nodes are used */
    int *slot;          /* graph index -> position in nodes, or -1 */
    pn_arg **in_ptrs;   /* scratch for a layer's input list */
    int batch, max_batch;
    pn_grads_ready_fn grads_ready;
    void *grads_ready_ctx;
    double *forward_s, *backward_s; /* [graph->n_nodes] or NULL: pn_network_time_layers */
    double loss_positions; /* real positions of the global batch, or 0: pn_network_set_positions */
    int *pulls, n_pulls;   /* pn_network_pulls, once asked */
    int *pull_nodes;       /* the graph node of each pull */
    bool pulls_known;
    /* options.share_memory: the plan, the value slots (this network's) and the
     * gradient slots (grads: shared, or own_grads) */
    bool share;
    pn_arg_plan plan;
    pn_buffer *value_slots;
    pn_grad_store *grads, own_grads;
    bool bf16;             /* options.precision: arguments in bf16 (arg_bf16.h) */
    pn_bf16_frame frame;   /* the call running now */
};

/* Marks the nodes held: the members, and whatever they consume (supplied). */
static int hold_nodes(pn_network *net, const bool *member)
{
    const pn_graph *g = net->graph;
    bool *held = calloc((size_t)g->n_nodes, sizeof *held);
    if (!held) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        if (member && !member[i]) continue;
        held[i] = true;
        for (int k = 0; k < g->nodes[i].n_inputs; k++) held[g->nodes[i].inputs[k]] = true;
    }
    for (int i = 0; i < g->n_nodes; i++) {
        net->slot[i] = -1;
        if (!held[i]) continue;
        net->slot[i] = net->n;
        bool is_member = !member || member[i];
        net->nodes[net->n++] = (net_node){i, is_member && !g->nodes[i].is_input};
    }
    free(held);
    return PN_OK;
}

/* The activation memory plan (arg_plan.h) and its slots, filled by pn_network_plan. */
static int plan_memory(pn_network *net, const pn_network_options *o)
{
    net->share = true;
    pn_grad_store_init(&net->own_grads, o->device);
    net->grads = o->grads ? o->grads : &net->own_grads;
    PN_TRY(pn_arg_plan_make(&net->plan, net->graph, o->member, !o->forward_only,
                            o->precision));
    int n = net->plan.n_value_slots;
    if (!(net->value_slots = calloc((size_t)(n ? n : 1), sizeof *net->value_slots)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    return PN_OK;
}

int pn_network_create(pn_network **out, const pn_graph *g, const pn_network_options *o,
                      pn_params *params)
{
    *out = NULL;
    pn_network *net = calloc(1, sizeof *net);
    if (!net) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    net->graph = g;
    net->device = o->device;
    net->params = params;
    net->forward_only = o->forward_only;
    net->bf16 = o->precision == PN_PRECISION_BF16;
    net->nodes = calloc((size_t)g->n_nodes, sizeof *net->nodes);
    net->inst = calloc((size_t)g->n_nodes, sizeof *net->inst);
    net->args = calloc((size_t)g->n_nodes, sizeof *net->args);
    net->slot = malloc((size_t)g->n_nodes * sizeof *net->slot);
    net->in_ptrs = calloc(MAX_INPUTS, sizeof *net->in_ptrs);
    int rc = net->nodes && net->inst && net->args && net->slot && net->in_ptrs
                 ? hold_nodes(net, o->member)
                 : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK && o->share_memory) rc = plan_memory(net, o);
    for (int i = 0; rc == PN_OK && i < net->n; i++)
        if (net->nodes[i].computed) {
            int gi = net->nodes[i].node;
            rc = pn_layer_inst_init(&net->inst[gi], g->nodes[gi].layer, params);
        }
    if (rc < 0) {
        pn_network_free(net);
        return rc;
    }
    *out = net;
    return PN_OK;
}

void pn_network_free(pn_network *net)
{
    if (!net) return;
    for (int i = 0; net->args && net->inst && i < net->graph->n_nodes; i++) {
        pn_arg_release(&net->args[i]);
        pn_layer_inst_release(&net->inst[i]);
    }
    if (net->value_slots)
        for (int k = 0; k < net->plan.n_value_slots; k++) pn_buffer_release(&net->value_slots[k]);
    free(net->value_slots);
    pn_grad_store_free(&net->own_grads);
    pn_arg_plan_free(&net->plan);
    free(net->nodes);
    free(net->inst);
    free(net->args);
    free(net->slot);
    free(net->pulls);
    free(net->pull_nodes);
    free(net->in_ptrs);
    free(net);
}

int pn_network_build(const pn_graph *g, const pn_network_options *o, pn_params **arena,
                     pn_network **nets)
{
    int copies = o->copies > 0 ? o->copies : 1, built = 0;
    *arena = NULL;
    int rc = pn_params_create(arena, o->device);
    for (; rc == PN_OK && built < copies; built++)
        if ((rc = pn_network_create(&nets[built], g, o, *arena)) < 0) break;
    if (rc == PN_OK) rc = pn_params_finalize(*arena);
    if (rc == PN_OK && o->init) rc = pn_params_init_values(*arena, o->seed);
    if (rc < 0) {
        for (int k = 0; k < built; k++) {
            pn_network_free(nets[k]);
            nets[k] = NULL;
        }
        pn_params_free(*arena);
        *arena = NULL;
    }
    return rc;
}

pn_params *pn_network_params(const pn_network *net) { return net->params; }

/* Node gi's planned value and gradient storage for batch samples (NULL: its own). */
static int planned_storage(pn_network *net, int gi, int batch, const pn_buffer **value,
                           const pn_buffer **grad)
{
    *value = *grad = NULL;
    if (!net->share) return PN_OK;
    int v = net->plan.value_slot[gi], d = net->plan.grad_slot[gi];
    if (v >= 0) {
        size_t need = net->plan.value_slot_bytes[v] * (size_t)batch;
        pn_buffer *b = &net->value_slots[v];
        if (!b->data || b->bytes < need) PN_TRY(pn_buffer_reserve(b, net->device, need));
        *value = b;
    }
    if (d >= 0) {
        PN_TRY(pn_grad_store_reserve(net->grads, d, net->plan.grad_slot_bytes[d] * (size_t)batch));
        *grad = &net->grads->bufs[d];
    }
    return PN_OK;
}

/* Points the gradients planned in the shared store at its blocks again: another
 * network may have grown one since this network was planned. */
static void take_grad_views(pn_network *net)
{
    if (!net->share) return;
    for (int i = 0; i < net->n; i++) {
        int gi = net->nodes[i].node, d = net->plan.grad_slot[gi];
        if (d < 0) continue;
        pn_arg *a = &net->args[gi];
        a->grad.data = net->grads->bufs[d].data;
    }
}

int pn_network_plan(pn_network *net, int max_batch)
{
    for (int i = 0; i < net->n; i++) {
        const pn_graph_node *gn = &net->graph->nodes[net->nodes[i].node];
        PN_TRY(pn_layer_check_batch(gn->layer, max_batch));
        const pn_buffer *value_on, *grad_on;
        int gi = net->nodes[i].node;
        int rc = planned_storage(net, gi, max_batch, &value_on, &grad_on);
        bool value_bf16 = net->share && net->plan.value_bf16[gi];
        bool grad_bf16 = net->share && net->plan.grad_bf16[gi];
        if (rc == PN_OK)
            rc = pn_arg_reserve_on_bf16(&net->args[gi], net->device, gn->layer->out_shape,
                                        max_batch, gn->needs_grad && !net->forward_only,
                                        value_on, grad_on, value_bf16, grad_bf16);
        const pn_json_at *at = &gn->layer->where;
        if (rc < 0)
            return pn_error_wrap(rc, "%s: %s: the output of %d samples (layer '%s')", at->file,
                                 at->path, max_batch, gn->name);
    }
    if (net->bf16 && net->share) {
        size_t work = pn_arg_plan_work_bytes(&net->plan, net->graph, max_batch);
        if (work > 0) PN_TRY(pn_grad_store_reserve_work(net->grads, work));
    }
    net->max_batch = max_batch;
    net->batch = max_batch;
    return PN_OK;
}

pn_arg *pn_network_arg(pn_network *net, int node)
{
    return node >= 0 && node < net->graph->n_nodes && net->slot[node] >= 0 ? &net->args[node]
                                                                            : NULL;
}

int pn_network_set_batch(pn_network *net, int batch)
{
    if (batch < 1 || batch > net->max_batch)
        return pn_error_set(PN_ERR_INTERNAL, "batch %d outside the planned 1..%d", batch,
                            net->max_batch);
    for (int i = 0; i < net->n; i++) {
        pn_arg *a = &net->args[net->nodes[i].node];
        int rows = batch * a->shape.seq;
        a->batch = batch;
        a->value.rows = rows;
        a->grad.rows = rows;
    }
    net->batch = batch;
    return PN_OK;
}

/* The input argument list of graph node gi. */
static pn_arg *const *inputs_of(pn_network *net, int gi)
{
    const pn_graph_node *gn = &net->graph->nodes[gi];
    for (int k = 0; k < gn->n_inputs; k++) net->in_ptrs[k] = &net->args[gn->inputs[k]];
    return net->in_ptrs;
}

/* An output of the same seq as an input with lengths has that input's lengths (the
 * first such input's); any other output (seq_pool's, of seq 1) has none. */
static void inherit_lengths(pn_arg *out, pn_arg *const *in, int n_in)
{
    out->lengths = NULL;
    for (int k = 0; k < n_in && !out->lengths; k++)
        if (in[k]->lengths && in[k]->shape.seq == out->shape.seq) out->lengths = in[k]->lengths;
}

int pn_network_pulls(pn_network *net, const int **pulls, int *n)
{
    if (!net->pulls_known) {
        int cap = net->n * PN_LAYER_MAX_PARAMS;
        /* a replica that lost its list would pull less than the others: an error */
        if (!(net->pulls = malloc((size_t)(cap ? cap : 1) * sizeof *net->pulls)) ||
            !(net->pull_nodes = malloc((size_t)(cap ? cap : 1) * sizeof *net->pull_nodes)))
            return pn_error_set(PN_ERR_NOMEM, "out of memory listing the sharded tables");
        for (int i = 0; i < net->n; i++) {
            const pn_layer_inst *x = &net->inst[net->nodes[i].node];
            if (!net->nodes[i].computed) continue;
            for (int j = 0; j < x->layer->n_params; j++)
                if (pn_params_split(net->params, pn_params_get(net->params, x->param_index[j]))) {
                    net->pull_nodes[net->n_pulls] = net->nodes[i].node;
                    net->pulls[net->n_pulls++] = x->param_index[j];
                }
        }
    }
    net->pulls_known = true;
    *n = net->n_pulls;
    *pulls = net->pulls;
    return PN_OK;
}

int pn_network_pull_source(pn_network *net, int k, const pn_layer_inst **layer, int *input)
{
    const int *pulls;
    int n;
    PN_TRY(pn_network_pulls(net, &pulls, &n));
    if (k < 0 || k >= n)
        return pn_error_set(PN_ERR_INTERNAL, "pull %d of a network that pulls %d tables", k, n);
    int node = net->pull_nodes[k];
    *layer = &net->inst[node];
    *input = net->graph->nodes[node].n_inputs == 1 ? net->graph->nodes[node].inputs[0] : -1;
    return PN_OK;
}

/* Node gi's forward (backward) in a bf16 network: on fp32 views of its bf16-stored
 * arguments, what it wrote rounded to bf16 after (arg_bf16.h). */
static int bf16_call(pn_network *net, int gi, const pn_pass *pass, bool backward)
{
    pn_bf16_frame *f = &net->frame;
    PN_TRY(pn_bf16_call_begin(f, net->share ? &net->plan : NULL, net->graph, net->args, gi,
                              backward, net->share ? &net->grads->work : NULL));
    pn_arg *const *in = inputs_of(net, gi);
    int rc = backward ? pn_layer_backward(&net->inst[gi], pass, in, &net->args[gi])
                      : pn_layer_forward(&net->inst[gi], pass, in, &net->args[gi]);
    int end = pn_bf16_call_end(f, net->graph, net->args, gi, backward, rc == PN_OK);
    return rc < 0 ? rc : end;
}

int pn_network_forward(pn_network *net, const pn_pass *pass)
{
    for (int i = 0; i < net->n; i++) {
        if (!net->nodes[i].computed) continue;
        int gi = net->nodes[i].node;
        double t0 = PN_TRACE_T0(), start = net->forward_s ? pn_now() : 0.0;
        pn_layer_stats kept = net->inst[gi].stats;
        pn_arg *const *in = inputs_of(net, gi);
        inherit_lengths(&net->args[gi], in, net->graph->nodes[gi].n_inputs);
        if (net->bf16)
            PN_TRY(bf16_call(net, gi, pass, false));
        else
            PN_TRY(pn_layer_forward(&net->inst[gi], pass, in, &net->args[gi]));
        if (net->forward_s) net->forward_s[gi] = pn_now() - start;
        if (pass->recompute) net->inst[gi].stats = kept; /* counted by the first forward */
        PN_TRACE(net->graph->nodes[gi].name, pass->training ? "forward" : "eval forward", NULL,
                 pass->training ? pass->step : -1, pass->micro, t0);
    }
    return PN_OK;
}

int pn_network_step(pn_network *net, int pos, int n)
{
    if (net->bf16) /* generation runs forward-only networks, which stay fp32 */
        return pn_error_set(PN_ERR_UNSUPPORTED, "generation steps through a bf16 network");
    if (n < 1 || n > net->max_batch)
        return pn_error_set(PN_ERR_INTERNAL, "step of %d sequences outside the planned 1..%d",
                            n, net->max_batch);
    for (int i = 0; i < net->n; i++) {
        pn_arg *a = &net->args[net->nodes[i].node];
        a->batch = n;
        a->value.rows = n;
        a->grad.rows = a->value.rows;
    }
    net->batch = n;
    for (int i = 0; i < net->n; i++) {
        if (!net->nodes[i].computed) continue;
        int gi = net->nodes[i].node;
        PN_TRY(pn_layer_step(&net->inst[gi], pos, inputs_of(net, gi), &net->args[gi]));
    }
    return PN_OK;
}

int pn_network_step_reorder(pn_network *net, const int *from, int n, int len)
{
    for (int i = 0; i < net->n; i++)
        if (net->nodes[i].computed)
            PN_TRY(pn_layer_step_reorder(&net->inst[net->nodes[i].node], from, n, len));
    return PN_OK;
}

/* The real positions of the samples an argument with lengths holds now. */
static double batch_positions(const pn_arg *a)
{
    double n = 0.0;
    for (int b = 0; b < a->batch; b++) n += a->lengths[b];
    return n;
}

void pn_network_set_positions(pn_network *net, double global_positions)
{
    net->loss_positions = global_positions;
}

/* Seeds the losses' gradients; every other gradient is marked stale (arg.h) rather
 * than zeroed: its first producer writes it whole, so most are never zeroed (a
 * memset of every activation gradient was 2.4% of a small GPT's step). */
int pn_network_backward_begin(pn_network *net, long global_batch)
{
    if (net->forward_only)
        return pn_error_set(PN_ERR_INTERNAL, "backward through a forward-only network");
    take_grad_views(net);
    for (int i = 0; i < net->n; i++) {
        int gi = net->nodes[i].node;
        pn_arg *a = &net->args[gi];
        if (!a->grad.data) continue;
        const pn_layer *l = net->graph->nodes[gi].layer;
        a->grad_stale = !(l->type->is_loss && net->nodes[i].computed);
        if (a->grad_stale) continue;
        float seed = a->lengths ? 1.0f / (float)(net->loss_positions > 0 ? net->loss_positions
                                                                          : batch_positions(a))
                                : 1.0f / (float)((double)global_batch * a->shape.seq);
        PN_TRY(pn_fill(&a->grad, seed));
    }
    return PN_OK;
}

int pn_network_backward_run(pn_network *net, const pn_pass *pass)
{
    for (int i = net->n - 1; i >= 0; i--) {
        int gi = net->nodes[i].node;
        if (!net->nodes[i].computed || !net->graph->nodes[gi].needs_grad) continue;
        pn_layer_inst *x = &net->inst[gi];
        double t0 = PN_TRACE_T0(), start = net->backward_s ? pn_now() : 0.0;
        if (net->bf16)
            PN_TRY(bf16_call(net, gi, pass, true));
        else
            PN_TRY(pn_layer_backward(x, pass, inputs_of(net, gi), &net->args[gi]));
        if (net->backward_s) net->backward_s[gi] = pn_now() - start;
        PN_TRACE(net->graph->nodes[gi].name, "backward", NULL, pass->step, pass->micro, t0);
        if (net->grads_ready && x->layer->n_params > 0)
            PN_TRY(net->grads_ready(net->grads_ready_ctx, x));
    }
    for (int i = 0; i < net->n; i++) { /* what nothing produced is zeros, as before */
        int gi = net->nodes[i].node;
        if (net->bf16 && net->share && net->plan.grad_bf16[gi])
            net->args[gi].grad_stale = false; /* a slot, dead now: nothing reads it */
        else
            PN_TRY(pn_arg_grad_zero_stale(&net->args[gi]));
    }
    return PN_OK;
}

void pn_network_time_layers(pn_network *net, double *forward_s, double *backward_s)
{
    net->forward_s = forward_s;
    net->backward_s = backward_s;
}

void pn_network_on_grads_ready(pn_network *net, pn_grads_ready_fn fn, void *ctx)
{
    net->grads_ready = fn;
    net->grads_ready_ctx = ctx;
}

int pn_network_backward(pn_network *net, const pn_pass *pass, long global_batch)
{
    PN_TRY(pn_network_backward_begin(net, global_batch));
    return pn_network_backward_run(net, pass);
}

size_t pn_network_arg_bytes(const pn_network *net)
{
    size_t bytes = 0;
    for (int i = 0; i < net->n; i++) {
        const pn_arg *a = &net->args[net->nodes[i].node];
        bytes += a->value_buf.capacity + a->grad_buf.capacity + a->ids_buf.capacity +
                 a->csr_off_buf.capacity + a->csr_nz_buf.capacity;
    }
    for (int k = 0; net->share && k < net->plan.n_value_slots; k++)
        bytes += net->value_slots[k].capacity;
    if (net->grads == &net->own_grads) bytes += pn_grad_store_bytes(&net->own_grads);
    return bytes;
}

size_t pn_network_work_bytes(const pn_network *net)
{
    return net->bf16 && net->share ? pn_grad_store_work_bytes(net->grads) : 0;
}

const pn_layer_stats *pn_network_node_stats(const pn_network *net, int node)
{
    if (node < 0 || node >= net->graph->n_nodes || net->slot[node] < 0) return NULL;
    const pn_layer_inst *x = &net->inst[node];
    return x->layer && x->layer->type->is_loss ? &x->stats : NULL;
}

void pn_network_stats(const pn_network *net, pn_layer_stats *out)
{
    *out = (pn_layer_stats){0};
    for (int i = 0; i < net->n; i++) {
        const pn_layer_stats *s = pn_network_node_stats(net, net->nodes[i].node);
        if (!s) continue;
        out->loss_sum += s->loss_sum;
        out->correct += s->correct;
        out->rows += s->rows;
    }
}

void pn_network_auc(const pn_network *net, pn_auc *into)
{
    for (int i = 0; i < net->n; i++) {
        const pn_layer_inst *x = &net->inst[net->nodes[i].node];
        if (x->auc) pn_auc_merge(into, x->auc);
    }
}

void pn_network_reset_stats(pn_network *net)
{
    for (int i = 0; i < net->n; i++) {
        pn_layer_inst *x = &net->inst[net->nodes[i].node];
        x->stats = (pn_layer_stats){0};
        if (x->auc) pn_auc_reset(x->auc);
    }
}
