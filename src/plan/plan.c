/* pn_plan: places a graph's layers on pipeline stages, manually from "stage"
 * attributes or automatically by a DP over cut points of the topological order
 * (balancing estimated or, when given, measured layer times),
 * checks the placement (edges forward, no empty stage), sums what each stage costs
 * (plan_print.c prints the table of `pipenet plan`). With virtual stages the same cut
 * makes P x V chunks, chunk c on stage c mod P. */
#include "plan/plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "layers/params.h"

/* The partitioner's time model, per sample: a device that runs a layer's forward and
 * backward FLOPs at 50 GFLOP/s and moves its activation bytes at 10 GB/s. Only the
 * ratio between layers matters for the balance; the absolute values are rough. */
#define PLAN_FLOP_PER_S 50e9
#define PLAN_BYTES_PER_S 10e9
/* Stage times within this relative difference count as equal (summation order), so
 * that the tie-break on bytes sees equal-cost cuts as equal. */
#define PLAN_TIME_TOL 1e-9

double pn_plan_stage_time(const pn_stage_cost *c)
{
    return c->flops / PLAN_FLOP_PER_S + c->activation_bytes / PLAN_BYTES_PER_S;
}

static long layer_params(const pn_layer *l)
{
    long n = 0;
    for (int p = 0; p < l->n_params; p++)
        n += (long)l->param_decls[p].rows * l->param_decls[p].cols;
    return n;
}

/* Floats a rank of stage holds of parameter decl d when its stage has `replicas`
 * replicas: a table sharded by rows keeps its largest shard's (shard 0: ceil of
 * rows / D, params.h), any other parameter all of it. */
static long decl_held(const pn_param_decl *d, int replicas)
{
    int rows = d->sharded && d->row_sparse ? pn_shard_row_count(d->rows, replicas, 0) : d->rows;
    return (long)rows * d->cols;
}

void pn_plan_stage_held(const pn_plan *p, const pn_graph *g, int stage, int replicas,
                        long *values, long *grads)
{
    *values = *grads = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (p->stage_of[i] != stage) continue;
        const pn_layer *l = g->nodes[i].layer;
        for (int k = 0; k < l->n_params; k++) {
            const pn_param_decl *d = &l->param_decls[k];
            *values += decl_held(d, replicas);
            /* a row-sparse table's gradient is the rows a step touches, not a dense slice */
            if (!d->row_sparse) *grads += (long)d->rows * d->cols;
        }
    }
}

static double layer_time(const pn_layer *l)
{
    pn_stage_cost c = {.flops = pn_layer_flops(l),
                       .activation_bytes = pn_layer_activation_bytes(l)};
    return pn_plan_stage_time(&c);
}

/* Measured times are refused unless finite and non-negative: the DP's -1 marks
 * "no split" and a NaN would make every comparison false. */
static int check_times(const pn_graph *g, const double *layer_s)
{
    for (int i = 0; layer_s && i < g->n_nodes; i++)
        if (!g->nodes[i].is_input && !(layer_s[i] >= 0.0 && layer_s[i] < 1e30))
            return pn_error_set(PN_ERR_INVALID, "%s: layer '%s': time %g s is not a "
                                "non-negative number", g->file, g->nodes[i].name, layer_s[i]);
    return PN_OK;
}

static double out_bytes(const pn_graph *g, int node)
{
    return (double)pn_shape_bytes(g->nodes[node].layer->out_shape);
}

static int count_layers(const pn_graph *g)
{
    int n = 0;
    for (int i = 0; i < g->n_nodes; i++) n += !g->nodes[i].is_input;
    return n;
}

/* What placement cuts the model into: stages, or chunks under virtual stages. */
static const char *unit(const pn_plan *p) { return p->virtual_stages > 1 ? "chunk" : "stage"; }

/* Stages from the attributes: a layer without one inherits the previous layer's.
 * Sets p->chunks to the number they use, which must be p->chunks when that is set. */
static int place_manual(pn_plan *p, const pn_graph *g)
{
    int prev = 0, max = 0, top = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *node = &g->nodes[i];
        if (node->is_input) {
            p->chunk_of[i] = -1;
            continue;
        }
        prev = node->stage >= 0 ? node->stage : prev;
        p->chunk_of[i] = prev;
        if (top < 0 || prev > max) max = prev, top = i;
    }
    if (p->chunks > 0 && max + 1 != p->chunks)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: layer '%s' is on %s %d, so the \"stage\" attributes use "
                            "%d %ss, but %d were requested",
                            g->file, g->nodes[top].name, unit(p), max, max + 1, unit(p),
                            p->chunks);
    if (p->virtual_stages > 1 && (max + 1) % p->virtual_stages)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: the \"stage\" attributes number %d chunks (layer '%s' is on "
                            "chunk %d), which do not make %d virtual stages per stage",
                            g->file, max + 1, g->nodes[top].name, max, p->virtual_stages);
    p->chunks = max + 1;
    return PN_OK;
}

/* Refuses an edge into an earlier stage (chunk) and a stage (chunk) with no layers. */
static int check_placement(const pn_plan *p, const pn_graph *g)
{
    const char *u = unit(p);
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *node = &g->nodes[i];
        for (int k = 0; k < node->n_inputs; k++) {
            int from = node->inputs[k];
            if (p->chunk_of[from] > p->chunk_of[i])
                return pn_error_set(PN_ERR_INVALID,
                                    "%s: layer '%s' (%s %d) takes input '%s' from %s %d: "
                                    "edges must go forward",
                                    g->file, node->name, u, p->chunk_of[i], g->nodes[from].name,
                                    u, p->chunk_of[from]);
        }
    }
    for (int s = 0; s < p->chunks; s++) {
        bool used = false;
        for (int i = 0; i < g->n_nodes && !used; i++) used = p->chunk_of[i] == s;
        if (used) continue;
        int before = -1, after = -1; /* the first layer past stage s, the layer before it */
        for (int i = 0; i < g->n_nodes && after < 0; i++) {
            if (p->chunk_of[i] > s) after = i;
            else if (p->chunk_of[i] >= 0) before = i;
        }
        if (before >= 0)
            return pn_error_set(PN_ERR_INVALID,
                                "%s: %s %d has no layers: layer '%s' (%s %d) is followed "
                                "by '%s' (%s %d); number the %ss 0..%d without gaps",
                                g->file, u, s, g->nodes[before].name, u, p->chunk_of[before],
                                g->nodes[after].name, u, p->chunk_of[after], u, p->chunks - 1);
        return pn_error_set(PN_ERR_INVALID,
                            "%s: %s %d has no layers: the first layer, '%s', is on %s %d; "
                            "number the %ss 0..%d without gaps",
                            g->file, u, s, g->nodes[after].name, u, p->chunk_of[after], u,
                            p->chunks - 1);
    }
    return PN_OK;
}

/* The partitioner's view of the graph: non-input layers in topological order. */
typedef struct chain {
    int n;          /* layers */
    int *node;      /* [n] graph index of the layer at each position */
    int *pos;       /* [n_nodes] position of each node, -1 for data inputs */
    double *time;   /* [n] estimated seconds per sample */
    int *stamp;     /* [n] scratch: producers already counted for one run */
} chain;

/* best[j * (n + 1) + i]: best value of a split of the first i layers into j runs,
 * -1 when none was found; from[...]: where its last run starts. */
typedef struct dp_state {
    int stages;
    double *best;   /* [(stages + 1) * (n + 1)] */
    int *from;      /* [(stages + 1) * (n + 1)] */
} dp_state;

/* Bytes that the run [k, ...) receives for its layer at position layer: outputs of
 * layers before k it has not yet counted under token (each producer once per run). */
static double run_recv(const pn_graph *g, chain *c, int k, int layer, int token)
{
    const pn_graph_node *node = &g->nodes[c->node[layer]];
    double bytes = 0.0;
    for (int j = 0; j < node->n_inputs; j++) {
        int q = c->pos[node->inputs[j]];
        if (q < 0 || q >= k || c->stamp[q] == token) continue;
        c->stamp[q] = token;
        bytes += out_bytes(g, node->inputs[j]);
    }
    return bytes;
}

/* One DP over cut points: best[j][i] is the best value of a split of the first i
 * layers into j runs. Minimizing the largest run time when limit < 0; otherwise
 * minimizing the bytes received by all runs among splits whose every run takes at
 * most limit. */
static void dp_solve(const pn_graph *g, chain *c, dp_state *d, double limit)
{
    int n = c->n, stride = n + 1, token = 0;
    for (int x = 0; x < (d->stages + 1) * stride; x++) d->best[x] = -1.0, d->from[x] = -1;
    d->best[0] = 0.0;
    for (int i = 0; i < n; i++) c->stamp[i] = -1;
    for (int j = 1; j <= d->stages; j++)
        for (int k = j - 1; k < n; k++) {
            double prev = d->best[(j - 1) * stride + k];
            if (prev < 0.0) continue;
            double time = 0.0, recv = 0.0;
            token++;
            for (int i = k + 1; i <= n - (d->stages - j); i++) {
                time += c->time[i - 1];
                if (limit >= 0.0 && time > limit) break;
                double value;
                if (limit < 0.0) {
                    value = time > prev ? time : prev;
                } else {
                    recv += run_recv(g, c, k, i - 1, token);
                    value = prev + recv;
                }
                double *cur = &d->best[j * stride + i];
                if (*cur < 0.0 || value < *cur) *cur = value, d->from[j * stride + i] = k;
            }
        }
}

/* Cuts the layers into p->chunks contiguous runs: the smallest largest run time, then
 * among those the fewest bytes crossing the cuts. */
static int place_auto(pn_plan *p, const pn_graph *g, const double *layer_s)
{
    chain c = {.n = count_layers(g)};
    dp_state d = {.stages = p->chunks};
    size_t cells = (size_t)(p->chunks + 1) * (size_t)(c.n + 1);
    c.node = malloc((size_t)c.n * sizeof *c.node);
    c.pos = malloc((size_t)g->n_nodes * sizeof *c.pos);
    c.time = malloc((size_t)c.n * sizeof *c.time);
    c.stamp = malloc((size_t)c.n * sizeof *c.stamp);
    d.best = malloc(cells * sizeof *d.best);
    d.from = malloc(cells * sizeof *d.from);
    int rc = PN_OK;
    if (!c.node || !c.pos || !c.time || !c.stamp || !d.best || !d.from) {
        rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0, n = 0; i < g->n_nodes; i++) {
        c.pos[i] = g->nodes[i].is_input ? -1 : n;
        if (g->nodes[i].is_input) continue;
        c.node[n] = i;
        c.time[n++] = layer_s ? layer_s[i] : layer_time(g->nodes[i].layer);
    }
    dp_solve(g, &c, &d, -1.0);
    double bottleneck = d.best[p->chunks * (c.n + 1) + c.n];
    dp_solve(g, &c, &d, bottleneck * (1.0 + PLAN_TIME_TOL));
    if (d.best[p->chunks * (c.n + 1) + c.n] < 0.0) {
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: the partitioner found no split into %d %ss",
                          g->file, p->chunks, unit(p));
        goto done;
    }
    for (int j = p->chunks, i = c.n; j > 0; j--) {
        int k = d.from[j * (c.n + 1) + i];
        for (int q = k; q < i; q++) p->chunk_of[c.node[q]] = j - 1;
        i = k;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].is_input) p->chunk_of[i] = -1;
done:
    free(c.node), free(c.pos), free(c.time), free(c.stamp), free(d.best), free(d.from);
    return rc;
}

/* Sums layers, parameters, FLOPs and activations per stage; an output that crosses
 * stages counts once for each stage that consumes it, and a tied copy (an fc's
 * "tie") counts on its stage, which holds it, updates it and keeps its slots. */
static int compute_costs(pn_plan *p, const pn_graph *g)
{
    int *mark = malloc((size_t)p->chunks * sizeof *mark);
    if (!mark) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int s = 0; s < p->chunks; s++) mark[s] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        int s = p->chunk_of[i];
        if (s < 0) continue;
        const pn_layer *l = g->nodes[i].layer;
        pn_stage_cost *c = &p->cost[s];
        c->layers++;
        c->params += layer_params(l);
        c->flops += pn_layer_flops(l);
        c->activation_bytes += pn_layer_activation_bytes(l);
        for (int j = i + 1; j < g->n_nodes; j++) {
            int t = p->chunk_of[j];
            if (t == s || mark[t] == i) continue;
            for (int k = 0; k < g->nodes[j].n_inputs; k++)
                if (g->nodes[j].inputs[k] == i) {
                    mark[t] = i;
                    c->send_bytes += out_bytes(g, i);
                    p->cost[t].recv_bytes += out_bytes(g, i);
                    break;
                }
        }
    }
    free(mark);
    return PN_OK;
}

int pn_plan_build(pn_plan **out, const pn_graph *g, int stages)
{
    return pn_plan_build_virtual(out, g, stages, 1, NULL);
}

int pn_plan_build_timed(pn_plan **out, const pn_graph *g, int stages, const double *layer_s)
{
    return pn_plan_build_virtual(out, g, stages, 1, layer_s);
}

/* The layers' stages from their chunks, and the stages' parameters within an arena. */
static int finish_stages(pn_plan *p, const pn_graph *g)
{
    p->stages = p->chunks / p->virtual_stages;
    for (int i = 0; i < g->n_nodes; i++)
        p->stage_of[i] = p->chunk_of[i] < 0 ? -1 : p->chunk_of[i] % p->stages;
    for (int s = 0; s < p->stages; s++) { /* one arena, views of int length */
        long params = pn_plan_stage_cost(p, s).params;
        if (params > INT_MAX)
            return pn_error_set(PN_ERR_UNSUPPORTED, "%s: stage %d would hold %ld parameters, at "
                                "most %d fit one stage (split the model into more stages)",
                                g->file, s, params, INT_MAX);
    }
    return PN_OK;
}

void pn_plan_set_precision(pn_plan *p, pn_precision precision)
{
    double bytes[] = {[PN_PRECISION_FP32] = 4.0, [PN_PRECISION_BF16] = 2.0};
    double scale = bytes[precision] / bytes[p->precision];
    for (int c = 0; c < p->chunks; c++) {
        p->cost[c].send_bytes *= scale;
        p->cost[c].recv_bytes *= scale;
    }
    p->precision = precision;
}

int pn_plan_build_virtual(pn_plan **out, const pn_graph *g, int stages, int virtual_stages,
                          const double *layer_s)
{
    if (stages < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: %d stages requested (expected 0 or more)",
                            g->file, stages);
    if (virtual_stages < 1 || (long)stages * virtual_stages > INT_MAX)
        return pn_error_set(PN_ERR_INVALID, "%s: %d virtual stages requested (expected 1 or "
                            "more, and fewer chunks than an int counts)", g->file, virtual_stages);
    int layers = count_layers(g), chunks = stages * virtual_stages;
    if (chunks > layers && virtual_stages == 1)
        return pn_error_set(PN_ERR_INVALID, "%s: %d layer%s cannot fill %d stages", g->file,
                            layers, layers == 1 ? "" : "s", stages);
    if (chunks > layers)
        return pn_error_set(PN_ERR_INVALID, "%s: %d layer%s cannot fill %d stages x %d virtual "
                            "stages = %d chunks (each chunk needs a layer)", g->file, layers,
                            layers == 1 ? "" : "s", stages, virtual_stages, chunks);
    PN_TRY(check_times(g, layer_s));
    bool manual = false;
    for (int i = 0; i < g->n_nodes; i++) manual |= !g->nodes[i].is_input && g->nodes[i].stage >= 0;
    pn_plan *p = calloc(1, sizeof *p);
    if (!p) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    p->chunks = chunks;
    p->virtual_stages = virtual_stages;
    p->chunk_of = malloc((size_t)g->n_nodes * sizeof *p->chunk_of);
    p->stage_of = malloc((size_t)g->n_nodes * sizeof *p->stage_of);
    int rc = p->chunk_of && p->stage_of ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK && manual) {
        rc = place_manual(p, g);
    } else if (rc == PN_OK) {
        if (p->chunks == 0) p->chunks = virtual_stages;
        rc = place_auto(p, g, layer_s);
    }
    if (rc == PN_OK) rc = check_placement(p, g);
    if (rc == PN_OK) {
        p->cost = calloc((size_t)p->chunks, sizeof *p->cost);
        rc = p->cost ? compute_costs(p, g) : pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    if (rc == PN_OK) rc = finish_stages(p, g);
    if (rc < 0) {
        pn_plan_free(p);
        return rc;
    }
    *out = p;
    return PN_OK;
}

pn_stage_cost pn_plan_stage_cost(const pn_plan *p, int stage)
{
    pn_stage_cost sum = {0};
    for (int c = stage; c < p->chunks; c += p->stages) {
        const pn_stage_cost *x = &p->cost[c];
        sum.layers += x->layers;
        sum.params += x->params;
        sum.flops += x->flops;
        sum.activation_bytes += x->activation_bytes;
        sum.send_bytes += x->send_bytes;
        sum.recv_bytes += x->recv_bytes;
    }
    return sum;
}

void pn_plan_free(pn_plan *p)
{
    if (!p) return;
    free(p->chunk_of);
    free(p->stage_of);
    free(p->cost);
    free(p);
}
