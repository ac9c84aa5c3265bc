/* Forward/backward over a set of graph nodes with arguments planned once. */
#include "pipeline/network.h"

#include <stdlib.h>

#include "base/error.h"
#include "math/ops.h"

enum { MAX_INPUTS = 64 };

typedef struct net_node {
    int node;           /* index in the graph */
    bool computed;      /* a member layer (else: an input supplied by the caller) */
} net_node;

struct pn_network {
    const pn_graph *graph;
    pn_device device;
    int n;              /* nodes held here, in topological order */
    net_node *nodes;
    pn_arg *args;       /* [graph->n_nodes]; only held nodes are used */
    int *slot;          /* graph index -> position in nodes, or -1 */
    pn_arg **in_ptrs;   /* scratch for a layer's input list */
    int batch, max_batch;
    pn_grads_ready_fn grads_ready;
    void *grads_ready_ctx;
};

int pn_network_create(pn_network **out, const pn_graph *g, const bool *member, pn_device dev)
{
    pn_network *net = calloc(1, sizeof *net);
    if (!net) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    net->graph = g;
    net->device = dev;
    net->nodes = calloc((size_t)g->n_nodes, sizeof *net->nodes);
    net->args = calloc((size_t)g->n_nodes, sizeof *net->args);
    net->slot = malloc((size_t)g->n_nodes * sizeof *net->slot);
    net->in_ptrs = calloc(MAX_INPUTS, sizeof *net->in_ptrs);
    if (!net->nodes || !net->args || !net->slot || !net->in_ptrs) {
        pn_network_free(net);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    /* Held nodes: the members, and whatever they consume (supplied from outside). */
    bool *held = calloc((size_t)g->n_nodes, sizeof *held);
    if (!held) {
        pn_network_free(net);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
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
    *out = net;
    return PN_OK;
}

void pn_network_free(pn_network *net)
{
    if (!net) return;
    if (net->args)
        for (int i = 0; i < net->graph->n_nodes; i++) pn_arg_release(&net->args[i]);
    free(net->nodes);
    free(net->args);
    free(net->slot);
    free(net->in_ptrs);
    free(net);
}

int pn_network_bind(pn_network *net, pn_params *params)
{
    for (int i = 0; i < net->n; i++)
        if (net->nodes[i].computed)
            PN_TRY(pn_layer_bind(net->graph->nodes[net->nodes[i].node].layer, params));
    return PN_OK;
}

int pn_network_plan(pn_network *net, int max_batch)
{
    for (int i = 0; i < net->n; i++) {
        const pn_graph_node *gn = &net->graph->nodes[net->nodes[i].node];
        PN_TRY(pn_arg_reserve(&net->args[net->nodes[i].node], net->device, gn->layer->out_shape,
                              max_batch, gn->needs_grad));
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

int pn_network_forward(pn_network *net, const pn_pass *pass, pn_params *params)
{
    for (int i = 0; i < net->n; i++) {
        if (!net->nodes[i].computed) continue;
        int gi = net->nodes[i].node;
        PN_TRY(pn_layer_forward(net->graph->nodes[gi].layer, pass, params, inputs_of(net, gi),
                                &net->args[gi]));
    }
    return PN_OK;
}

int pn_network_backward_begin(pn_network *net, long global_batch)
{
    for (int i = 0; i < net->n; i++) {
        int gi = net->nodes[i].node;
        pn_arg *a = &net->args[gi];
        if (!a->grad.data) continue;
        const pn_layer *l = net->graph->nodes[gi].layer;
        float seed = 0.0f;
        if (l->type->is_loss && net->nodes[i].computed)
            seed = 1.0f / (float)((double)global_batch * a->shape.seq);
        PN_TRY(pn_fill(&a->grad, seed));
    }
    return PN_OK;
}

int pn_network_backward_run(pn_network *net, const pn_pass *pass, pn_params *params)
{
    for (int i = net->n - 1; i >= 0; i--) {
        int gi = net->nodes[i].node;
        if (!net->nodes[i].computed || !net->graph->nodes[gi].needs_grad) continue;
        pn_layer *l = net->graph->nodes[gi].layer;
        PN_TRY(pn_layer_backward(l, pass, params, inputs_of(net, gi), &net->args[gi]));
        if (net->grads_ready && l->n_params > 0) PN_TRY(net->grads_ready(net->grads_ready_ctx, l));
    }
    return PN_OK;
}

void pn_network_on_grads_ready(pn_network *net, pn_grads_ready_fn fn, void *ctx)
{
    net->grads_ready = fn;
    net->grads_ready_ctx = ctx;
}

int pn_network_backward(pn_network *net, const pn_pass *pass, pn_params *params,
                        long global_batch)
{
    PN_TRY(pn_network_backward_begin(net, global_batch));
    return pn_network_backward_run(net, pass, params);
}

void pn_network_stats(const pn_network *net, pn_layer_stats *out)
{
    *out = (pn_layer_stats){0};
    for (int i = 0; i < net->n; i++) {
        const pn_layer *l = net->graph->nodes[net->nodes[i].node].layer;
        if (!net->nodes[i].computed || !l->type->is_loss) continue;
        out->loss_sum += l->stats.loss_sum;
        out->correct += l->stats.correct;
        out->rows += l->stats.rows;
    }
}

void pn_network_reset_stats(pn_network *net)
{
    for (int i = 0; i < net->n; i++)
        net->graph->nodes[net->nodes[i].node].layer->stats = (pn_layer_stats){0};
}
