/* pn_plan: places a graph's layers on pipeline stages, manually from "stage"
 * attributes or automatically by a DP over cut points of the topological order
 * (balancing estimated or, when given, measured layer times),
 * checks the placement (edges forward, no empty stage), sums what each stage costs,
 * and prints the per-stage table of `pipenet plan`. */
#include "pipeline/plan.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/names.h"

/* The partitioner's time model, per sample: a device that runs a layer's forward and
 * backward FLOPs at 50 GFLOP/s and moves its activation bytes at 10 GB/s. Only the
 * ratio between layers matters for the balance; the absolute values are rough. */
#define PLAN_FLOP_PER_S 50e9
#define PLAN_BYTES_PER_S 10e9
/* Stage times within this relative difference count as equal (summation order), so
 * that the tie-break on bytes sees equal-cost cuts as equal. */
#define PLAN_TIME_TOL 1e-9

/* Width of the layers column before names are abbreviated to "first..last (n)". */
enum { LAYERS_COL = 26 };

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

/* Stages from the attributes: a layer without one inherits the previous layer's.
 * Sets p->stages to the number they use, which must be p->stages when that is set. */
static int place_manual(pn_plan *p, const pn_graph *g)
{
    int prev = 0, max = 0, top = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *node = &g->nodes[i];
        if (node->is_input) {
            p->stage_of[i] = -1;
            continue;
        }
        prev = node->stage >= 0 ? node->stage : prev;
        p->stage_of[i] = prev;
        if (top < 0 || prev > max) max = prev, top = i;
    }
    if (p->stages > 0 && max + 1 != p->stages)
        return pn_error_set(PN_ERR_INVALID,
                            "%s: layer '%s' is on stage %d, so the \"stage\" attributes use "
                            "%d stages, but %d were requested",
                            g->file, g->nodes[top].name, max, max + 1, p->stages);
    p->stages = max + 1;
    return PN_OK;
}

/* Refuses an edge into an earlier stage and a stage with no layers. */
static int check_placement(const pn_plan *p, const pn_graph *g)
{
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_graph_node *node = &g->nodes[i];
        for (int k = 0; k < node->n_inputs; k++) {
            int from = node->inputs[k];
            if (p->stage_of[from] > p->stage_of[i])
                return pn_error_set(PN_ERR_INVALID,
                                    "%s: layer '%s' (stage %d) takes input '%s' from stage %d: "
                                    "edges must go forward",
                                    g->file, node->name, p->stage_of[i], g->nodes[from].name,
                                    p->stage_of[from]);
        }
    }
    for (int s = 0; s < p->stages; s++) {
        bool used = false;
        for (int i = 0; i < g->n_nodes && !used; i++) used = p->stage_of[i] == s;
        if (used) continue;
        int before = -1, after = -1; /* the first layer past stage s, the layer before it */
        for (int i = 0; i < g->n_nodes && after < 0; i++) {
            if (p->stage_of[i] > s) after = i;
            else if (p->stage_of[i] >= 0) before = i;
        }
        if (before >= 0)
            return pn_error_set(PN_ERR_INVALID,
                                "%s: stage %d has no layers: layer '%s' (stage %d) is followed "
                                "by '%s' (stage %d); number the stages 0..%d without gaps",
                                g->file, s, g->nodes[before].name, p->stage_of[before],
                                g->nodes[after].name, p->stage_of[after], p->stages - 1);
        return pn_error_set(PN_ERR_INVALID,
                            "%s: stage %d has no layers: the first layer, '%s', is on stage %d; "
                            "number the stages 0..%d without gaps",
                            g->file, s, g->nodes[after].name, p->stage_of[after],
                            p->stages - 1);
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

/* Cuts the layers into p->stages contiguous runs: the smallest largest run time, then
 * among those the fewest bytes crossing the cuts. */
static int place_auto(pn_plan *p, const pn_graph *g, const double *layer_s)
{
    chain c = {.n = count_layers(g)};
    dp_state d = {.stages = p->stages};
    size_t cells = (size_t)(p->stages + 1) * (size_t)(c.n + 1);
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
    double bottleneck = d.best[p->stages * (c.n + 1) + c.n];
    dp_solve(g, &c, &d, bottleneck * (1.0 + PLAN_TIME_TOL));
    if (d.best[p->stages * (c.n + 1) + c.n] < 0.0) {
        rc = pn_error_set(PN_ERR_INTERNAL, "%s: the partitioner found no split into %d stages",
                          g->file, p->stages);
        goto done;
    }
    for (int j = p->stages, i = c.n; j > 0; j--) {
        int k = d.from[j * (c.n + 1) + i];
        for (int q = k; q < i; q++) p->stage_of[c.node[q]] = j - 1;
        i = k;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (g->nodes[i].is_input) p->stage_of[i] = -1;
done:
    free(c.node), free(c.pos), free(c.time), free(c.stamp), free(d.best), free(d.from);
    return rc;
}

/* Sums layers, parameters, FLOPs and activations per stage; an output that crosses
 * stages counts once for each stage that consumes it, and a tied copy (an fc's
 * "tie") counts on its stage, which holds it, updates it and keeps its slots. */
static int compute_costs(pn_plan *p, const pn_graph *g)
{
    int *mark = malloc((size_t)p->stages * sizeof *mark);
    if (!mark) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int s = 0; s < p->stages; s++) mark[s] = -1;
    for (int i = 0; i < g->n_nodes; i++) {
        int s = p->stage_of[i];
        if (s < 0) continue;
        const pn_layer *l = g->nodes[i].layer;
        pn_stage_cost *c = &p->cost[s];
        c->layers++;
        c->params += layer_params(l);
        c->flops += pn_layer_flops(l);
        c->activation_bytes += pn_layer_activation_bytes(l);
        for (int j = i + 1; j < g->n_nodes; j++) {
            int t = p->stage_of[j];
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
    return pn_plan_build_timed(out, g, stages, NULL);
}

int pn_plan_build_timed(pn_plan **out, const pn_graph *g, int stages, const double *layer_s)
{
    if (stages < 0)
        return pn_error_set(PN_ERR_INVALID, "%s: %d stages requested (expected 0 or more)",
                            g->file, stages);
    int layers = count_layers(g);
    if (stages > layers)
        return pn_error_set(PN_ERR_INVALID, "%s: %d layer%s cannot fill %d stages", g->file,
                            layers, layers == 1 ? "" : "s", stages);
    PN_TRY(check_times(g, layer_s));
    bool manual = false;
    for (int i = 0; i < g->n_nodes; i++) manual |= !g->nodes[i].is_input && g->nodes[i].stage >= 0;
    pn_plan *p = calloc(1, sizeof *p);
    if (!p) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    p->stages = stages;
    p->stage_of = malloc((size_t)g->n_nodes * sizeof *p->stage_of);
    int rc = p->stage_of ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (rc == PN_OK && manual) {
        rc = place_manual(p, g);
    } else if (rc == PN_OK) {
        if (p->stages == 0) p->stages = 1;
        rc = place_auto(p, g, layer_s);
    }
    if (rc == PN_OK) rc = check_placement(p, g);
    if (rc == PN_OK) {
        p->cost = calloc((size_t)p->stages, sizeof *p->cost);
        rc = p->cost ? compute_costs(p, g) : pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    for (int s = 0; rc == PN_OK && s < p->stages; s++) /* one arena, views of int length */
        if (p->cost[s].params > INT_MAX)
            rc = pn_error_set(PN_ERR_UNSUPPORTED, "%s: stage %d would hold %ld parameters, at "
                              "most %d fit one stage (split the model into more stages)",
                              g->file, s, p->cost[s].params, INT_MAX);
    if (rc < 0) {
        pn_plan_free(p);
        return rc;
    }
    *out = p;
    return PN_OK;
}

void pn_plan_free(pn_plan *p)
{
    if (!p) return;
    free(p->stage_of);
    free(p->cost);
    free(p);
}

/* "a, b, c" when it fits the column, else "first..last (n)". */
static void stage_layers(const pn_plan *p, const pn_graph *g, int s, char *buf, size_t cap)
{
    int first = -1, last = -1, n = 0;
    size_t len = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (p->stage_of[i] != s) continue;
        if (first < 0) first = i;
        last = i;
        len += strlen(g->nodes[i].name) + (n ? 2 : 0);
        n++;
    }
    buf[0] = '\0';
    if (n == 0) return;
    if (len > LAYERS_COL) {
        snprintf(buf, cap, "%s..%s (%d)", g->nodes[first].name, g->nodes[last].name, n);
        return;
    }
    for (int i = 0; i < g->n_nodes; i++)
        if (p->stage_of[i] == s)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "",
                     g->nodes[i].name);
}

double pn_plan_activation_bytes(const pn_plan *p, const pn_schedule *s, int stage,
                                int micro_batch, bool recompute)
{
    const pn_stage_cost *c = &p->cost[stage];
    double mb = (double)micro_batch, peak = pn_schedule_peak_in_flight(s, stage);
    return recompute ? c->activation_bytes * mb + c->recv_bytes * mb * peak
                     : c->activation_bytes * mb * peak;
}

void pn_plan_print(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                   int micro_batch, FILE *out)
{
    double mb = (double)micro_batch, mib = 1024.0 * 1024.0, kib = 1024.0;
    int ranks = p->stages * replicas;
    fprintf(out,
            "%s: P=%d stage%s x D=%d replica%s (%d rank%s), M=%d micro-batch%s of %d "
            "(batch %d), schedule %s, predicted bubble %.1f%%\n",
            g->name, p->stages, p->stages == 1 ? "" : "s", replicas, replicas == 1 ? "" : "s",
            ranks, ranks == 1 ? "" : "s", s->micro, s->micro == 1 ? "" : "es", micro_batch,
            micro_batch * s->micro * replicas, pn_schedule_kind_name(s->kind),
            100.0 * pn_schedule_bubble(s));
    fprintf(out, "%-5s  %-*s  %12s  %12s  %9s  %12s  %12s  %12s  %12s\n", "stage", LAYERS_COL,
            "layers", "params", "MFLOP/sample", "in flight", "act MiB", "recomp MiB",
            "sent KiB", "recv KiB");
    pn_stage_cost total = {0};
    double total_act = 0.0, total_re = 0.0;
    for (int st = 0; st < p->stages; st++) {
        const pn_stage_cost *c = &p->cost[st];
        char names[2 * PN_NAME_MAX + 32]; /* "first..last (n)" */
        stage_layers(p, g, st, names, sizeof names);
        int peak = pn_schedule_peak_in_flight(s, st);
        double act = pn_plan_activation_bytes(p, s, st, micro_batch, false);
        double re = pn_plan_activation_bytes(p, s, st, micro_batch, true);
        fprintf(out, "%-5d  %-*s  %12ld  %12.2f  %9d  %12.2f  %12.2f  %12.2f  %12.2f\n", st,
                LAYERS_COL, names, c->params, c->flops / 1e6, peak, act / mib, re / mib,
                c->send_bytes * mb / kib, c->recv_bytes * mb / kib);
        total_re += re;
        total.layers += c->layers;
        total.params += c->params;
        total.flops += c->flops;
        total.send_bytes += c->send_bytes;
        total.recv_bytes += c->recv_bytes;
        total_act += act;
    }
    long stage_params = total.params;
    total.params = pn_graph_param_count(g); /* a tied table once */
    char count[32];
    snprintf(count, sizeof count, "%d layers", total.layers);
    fprintf(out, "%-5s  %-*s  %12ld  %12.2f  %9s  %12.2f  %12.2f  %12.2f  %12.2f\n", "total",
            LAYERS_COL, count, total.params, total.flops / 1e6, "", total_act / mib,
            total_re / mib, total.send_bytes * mb / kib, total.recv_bytes * mb / kib);
    fprintf(out,
            "FLOPs: forward + backward. act MiB: activations held at the schedule's peak\n"
            "(in flight x %d samples). recomp MiB: the same under `train --recompute` (one\n"
            "micro-batch's, plus the received values of those in flight). KiB: forward\n"
            "values per micro-batch.\n",
            micro_batch);
    if (stage_params != total.params)
        fprintf(out, "params: a stage counts the copy of a tied table it holds (an fc's \"tie\");\n"
                     "the total counts the table once.\n");
}
