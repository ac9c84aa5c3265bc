/* Generation across pipeline stages (gen_stages.h): one step's links and the logits
 * every rank is given. */
#include "pipeline/gen_stages.h"

#include <stdlib.h>

#include "base/error.h"

struct pn_gen_stages {
    pn_comm *comm;
    const pn_graph *graph;
    int stage, out_node, out_stage, width, n_max;
    pn_link **links;
    int n_links;
    long steps;        /* positions stepped: each message's step number */
    int start;         /* the first step's agreement: 0 not yet, 1 failed, 2 passed */
    double *sums;      /* [n_max * width]: the logits, summed over the ranks */
};

/* Whether node is computed by the step network: an ancestor of out (or out). */
static bool *ancestors(const pn_graph *g, int out)
{
    bool *need = calloc((size_t)g->n_nodes, sizeof *need);
    if (!need) return NULL;
    need[out] = true;
    for (int i = out; i >= 0; i--)
        if (need[i])
            for (int k = 0; k < g->nodes[i].n_inputs; k++) need[g->nodes[i].inputs[k]] = true;
    return need;
}

/* A value link of node p between its stage and stage `consumer`, this rank's side. */
static int add_link(pn_gen_stages *s, int p, int peer, int consumer, bool sends)
{
    const pn_graph_node *n = &s->graph->nodes[p];
    pn_link_spec spec = {PN_LINK_VALUE, sends, p, n->name, peer, n->layer->out_shape.width,
                         s->n_max, 1, 0, consumer, 1, s->n_max, false /* fp32 */};
    return pn_link_create(s->comm, &spec, &s->links[s->n_links++]);
}

/* Every value one stage computes and a later one consumes, once per consuming stage. */
static int build_links(pn_gen_stages *s, const pn_plan *plan, const bool *need)
{
    const pn_graph *g = s->graph;
    int P = plan->stages;
    bool *seen = calloc((size_t)P, sizeof *seen);
    s->links = calloc((size_t)g->n_nodes * (size_t)P + 1, sizeof *s->links);
    if (!seen || !s->links) {
        free(seen);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    int rc = PN_OK;
    for (int p = 0; rc == PN_OK && p < g->n_nodes; p++) {
        if (!need[p] || g->nodes[p].is_input) continue;
        int from = plan->stage_of[p];
        for (int k = 0; k < P; k++) seen[k] = false;
        for (int c = 0; rc == PN_OK && c < g->n_nodes; c++) {
            int to = plan->stage_of[c];
            if (!need[c] || g->nodes[c].is_input || to == from || seen[to]) continue;
            for (int k = 0; k < g->nodes[c].n_inputs; k++)
                if (g->nodes[c].inputs[k] == p && !seen[to]) {
                    seen[to] = true;
                    if (from == s->stage) rc = add_link(s, p, to, to, true);
                    else if (to == s->stage) rc = add_link(s, p, from, to, false);
                }
        }
    }
    free(seen);
    return rc;
}

int pn_gen_stages_create(pn_gen_stages **out, pn_comm *comm, const pn_graph *g,
                         const pn_plan *plan, int out_node, int n_max)
{
    *out = NULL;
    pn_gen_stages *s = calloc(1, sizeof *s);
    if (!s) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    *out = s;
    s->comm = comm, s->graph = g, s->out_node = out_node, s->n_max = n_max;
    s->stage = pn_comm_grid(comm)->stage;
    s->out_stage = plan->stage_of[out_node];
    s->width = g->nodes[out_node].layer->out_shape.width;
    bool *need = ancestors(g, out_node);
    s->sums = malloc((size_t)n_max * (size_t)s->width * sizeof *s->sums);
    int rc = need && s->sums ? build_links(s, plan, need)
                             : pn_error_set(PN_ERR_NOMEM, "out of memory");
    free(need);
    PN_TRY(pn_comm_agree(comm, rc));
    return pn_comm_agree(comm, pn_comm_links_ready(comm));
}

int pn_gen_stages_failed(pn_gen_stages *s, int rc, bool *together)
{
    *together = s->start != 2;
    if (s->start == 0) { /* the others wait in the first step's agreement, or fail alike */
        s->start = 1;
        return pn_comm_agree(s->comm, rc);
    }
    return rc;
}

void pn_gen_stages_free(pn_gen_stages *s)
{
    if (!s) return;
    for (int i = 0; i < s->n_links; i++) pn_link_free(s->links[i]);
    free(s->links);
    free(s->sums);
    free(s);
}

int pn_gen_stages_step(void *ctx, pn_network *net, int pos, int n, float *logits)
{
    pn_gen_stages *s = ctx;
    if (s->start == 0) { /* every rank set up its part before any rank waits on a link */
        int rc = pn_comm_agree(s->comm, PN_OK);
        s->start = rc < 0 ? 1 : 2;
        PN_TRY(rc);
    }
    long step = s->steps++;
    for (int i = 0; i < s->n_links; i++)
        if (!pn_link_spec_of(s->links[i])->sends) PN_TRY(pn_link_post_recv(s->links[i], 0));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->sends) continue;
        pn_matrix rows = pn_network_arg(net, l->node)->value; /* its first n rows */
        rows.rows = n;
        PN_TRY(pn_link_recv(s->links[i], step, 0, &rows, false));
    }
    PN_TRY(pn_network_step(net, pos, n));
    for (int i = 0; i < s->n_links; i++) {
        const pn_link_spec *l = pn_link_spec_of(s->links[i]);
        if (l->sends)
            PN_TRY(pn_link_send(s->links[i], step, 0, &pn_network_arg(net, l->node)->value, NULL));
    }
    for (int i = 0; i < s->n_links; i++)
        if (pn_link_spec_of(s->links[i])->sends) PN_TRY(pn_link_wait_sends(s->links[i]));
    if (!logits) return PN_OK;
    /* the output's stage gives its values to every rank: a sum with zeros elsewhere,
     * in double, which changes no bit of a float */
    size_t count = (size_t)n * (size_t)s->width;
    if (s->stage == s->out_stage)
        PN_TRY(pn_matrix_read(&pn_network_arg(net, s->out_node)->value, logits));
    for (size_t k = 0; k < count; k++) s->sums[k] = s->stage == s->out_stage ? logits[k] : 0.0;
    PN_TRY(pn_comm_sum(s->comm, PN_SCOPE_WORLD, s->sums, (int)count));
    for (size_t k = 0; k < count; k++) logits[k] = (float)s->sums[k];
    return PN_OK;
}
