/* The table of `pipenet plan` (plan.h): a row per stage (per chunk under virtual
 * stages) with its layers, parameters, FLOPs, activation memory at the schedule's
 * peak and bytes sent, and the activation bytes the stage runtime holds. */
#include "plan/plan.h"

#include <string.h>

#include "base/names.h"
#include "layers/params.h"

/* Width of the layers column before names are abbreviated to "first..last (n)". */
enum { LAYERS_COL = 26 };

/* "a, b, c" when it fits the column, else "first..last (n)": chunk c's layers. */
static void chunk_layers(const pn_plan *p, const pn_graph *g, int c, char *buf, size_t cap)
{
    int first = -1, last = -1, n = 0;
    size_t len = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        if (p->chunk_of[i] != c) continue;
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
        if (p->chunk_of[i] == c)
            snprintf(buf + strlen(buf), cap - strlen(buf), "%s%s", buf[0] ? ", " : "",
                     g->nodes[i].name);
}

/* Chunk c's micro-batches in flight at the peak: its networks in the stage runtime. */
static int chunk_peak(const pn_plan *p, const pn_schedule *s, int c)
{
    return pn_schedule_peak_in_flight_chunk(s, c % p->stages, c / p->stages);
}

static double chunk_activation_bytes(const pn_plan *p, const pn_schedule *s, int c,
                                     int micro_batch, bool recompute)
{
    const pn_stage_cost *x = &p->cost[c];
    double mb = (double)micro_batch, peak = chunk_peak(p, s, c);
    /* the kept inputs are floats, whatever the links carry */
    double kept = x->recv_bytes * (p->precision == PN_PRECISION_BF16 ? 2.0 : 1.0);
    return recompute ? x->activation_bytes * mb + kept * mb * peak
                     : x->activation_bytes * mb * peak;
}

double pn_plan_activation_bytes(const pn_plan *p, const pn_schedule *s, int stage,
                                int micro_batch, bool recompute)
{
    double sum = 0.0;
    for (int c = stage; c < p->chunks; c += p->stages)
        sum += chunk_activation_bytes(p, s, c, micro_batch, recompute);
    return sum;
}

static void print_header(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                         int micro_batch, FILE *out)
{
    int ranks = p->stages * replicas;
    char virt[96] = "";
    if (p->virtual_stages > 1)
        snprintf(virt, sizeof virt, " x V=%d virtual stages (%d chunks)", p->virtual_stages,
                 p->chunks);
    fprintf(out,
            "%s: P=%d stage%s%s x D=%d replica%s (%d rank%s), M=%d micro-batch%s of %d "
            "(batch %d), schedule %s, predicted bubble %.1f%%",
            g->name, p->stages, p->stages == 1 ? "" : "s", virt, replicas,
            replicas == 1 ? "" : "s", ranks, ranks == 1 ? "" : "s", s->micro,
            s->micro == 1 ? "" : "es", micro_batch, micro_batch * s->micro * replicas,
            pn_schedule_kind_name(s->kind), 100.0 * pn_schedule_bubble(s));
    if (p->virtual_stages > 1)
        fprintf(out, " (1f1b: %.1f%%)",
                100.0 * pn_schedule_bubble_formula(PN_SCHEDULE_1F1B, p->stages, 1, s->micro));
    fputc('\n', out);
}

/* Under virtual stages: what each stage (rank) holds, all its chunks together. */
static void print_stage_memory(const pn_plan *p, const pn_schedule *s, int micro_batch,
                               FILE *out)
{
    double mib = 1024.0 * 1024.0;
    fprintf(out, "\n%-5s  %-*s  %12s  %9s  %12s  %12s\n", "stage", LAYERS_COL, "chunks", "params",
            "in flight", "act MiB", "recomp MiB");
    for (int st = 0; st < p->stages; st++) {
        char chunks[LAYERS_COL + 1] = "";
        for (int c = st; c < p->chunks; c += p->stages)
            snprintf(chunks + strlen(chunks), sizeof chunks - strlen(chunks), "%s%d",
                     chunks[0] ? ", " : "", c);
        fprintf(out, "%-5d  %-*s  %12ld  %9d  %12.2f  %12.2f\n", st, LAYERS_COL, chunks,
                pn_plan_stage_cost(p, st).params, pn_schedule_peak_in_flight(s, st),
                pn_plan_activation_bytes(p, s, st, micro_batch, false) / mib,
                pn_plan_activation_bytes(p, s, st, micro_batch, true) / mib);
    }
}

void pn_plan_print(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                   int micro_batch, FILE *out)
{
    double mb = (double)micro_batch, mib = 1024.0 * 1024.0, kib = 1024.0;
    bool chunked = p->virtual_stages > 1;
    print_header(p, g, s, replicas, micro_batch, out);
    if (chunked) fprintf(out, "%-5s  ", "chunk");
    fprintf(out, "%-5s  %-*s  %12s  %12s  %9s  %12s  %12s  %12s  %12s\n", "stage", LAYERS_COL,
            "layers", "params", "MFLOP/sample", "in flight", "act MiB", "recomp MiB",
            "sent KiB", "recv KiB");
    pn_stage_cost total = {0};
    double total_act = 0.0, total_re = 0.0;
    for (int c = 0; c < p->chunks; c++) {
        const pn_stage_cost *x = &p->cost[c];
        char names[2 * PN_NAME_MAX + 32]; /* "first..last (n)" */
        chunk_layers(p, g, c, names, sizeof names);
        double act = chunk_activation_bytes(p, s, c, micro_batch, false);
        double re = chunk_activation_bytes(p, s, c, micro_batch, true);
        if (chunked) fprintf(out, "%-5d  ", c);
        fprintf(out, "%-5d  %-*s  %12ld  %12.2f  %9d  %12.2f  %12.2f  %12.2f  %12.2f\n",
                c % p->stages, LAYERS_COL, names, x->params, x->flops / 1e6,
                chunk_peak(p, s, c), act / mib, re / mib, x->send_bytes * mb / kib,
                x->recv_bytes * mb / kib);
        total_re += re;
        total.layers += x->layers;
        total.params += x->params;
        total.flops += x->flops;
        total.send_bytes += x->send_bytes;
        total.recv_bytes += x->recv_bytes;
        total_act += act;
    }
    long chunk_params = total.params;
    total.params = pn_graph_param_count(g); /* a tied table once */
    char count[32];
    snprintf(count, sizeof count, "%d layers", total.layers);
    if (chunked) fprintf(out, "%-5s  ", "total");
    fprintf(out, "%-5s  %-*s  %12ld  %12.2f  %9s  %12.2f  %12.2f  %12.2f  %12.2f\n",
            chunked ? "" : "total", LAYERS_COL, count, total.params, total.flops / 1e6, "",
            total_act / mib, total_re / mib, total.send_bytes * mb / kib,
            total.recv_bytes * mb / kib);
    if (chunked) print_stage_memory(p, s, micro_batch, out);
    fprintf(out,
            "FLOPs: forward + backward. act MiB: activations held at the schedule's peak\n"
            "(in flight x %d samples). recomp MiB: the same under `train --recompute` (one\n"
            "micro-batch's, plus the received values of those in flight). KiB: forward\n"
            "values per micro-batch%s.\n",
            micro_batch, p->precision == PN_PRECISION_BF16
                             ? " in bf16 (MiB: fp32's; the planner's lines below: bf16)" : "");
    if (chunk_params != total.params)
        fprintf(out, "params: a %s counts the copy of a tied table it holds (an fc's \"tie\");\n"
                     "the total counts the table once.\n", chunked ? "chunk" : "stage");
    if (chunked)
        fprintf(out,
                "Interleaved: chunk c runs on stage c mod P=%d; each stage sends and receives\n"
                "V=%d times as many messages (a micro-batch passes it V times).\n",
                p->stages, p->virtual_stages);
}

/* A sharded table's share per rank: D ranks hold ceil or floor of rows / D rows each
 * (replica r the ids r mod D), beside the whole table every rank holds unsharded. */
static void print_shard(const pn_param_decl *d, int replicas, int slots, FILE *out)
{
    double mib = 1024.0 * 1024.0, row = (double)d->cols * sizeof(float);
    int most = pn_shard_row_count(d->rows, replicas, 0);
    int least = pn_shard_row_count(d->rows, replicas, replicas - 1);
    char held[64];
    if (most == least)
        snprintf(held, sizeof held, "%d rows", most);
    else
        snprintf(held, sizeof held, "%d or %d rows", most, least);
    fprintf(out,
            "    sharded by rows over D=%d replica%s: per rank %s, values %.2f MiB + "
            "slots %.2f MiB\n    (unsharded: %d rows, values %.2f MiB + slots %.2f MiB on "
            "every rank)\n",
            replicas, replicas == 1 ? "" : "s", held, most * row / mib, slots * most * row / mib,
            d->rows, d->rows * row / mib, slots * d->rows * row / mib);
}

void pn_plan_print_row_sparse(const pn_plan *p, const pn_graph *g, int slots, int replicas,
                              FILE *out)
{
    double mib = 1024.0 * 1024.0;
    bool any = false;
    for (int i = 0; i < g->n_nodes; i++) {
        const pn_layer *l = g->nodes[i].layer;
        for (int k = 0; k < l->n_params; k++) {
            const pn_param_decl *d = &l->param_decls[k];
            if (!d->row_sparse) continue;
            if (!any)
                fprintf(out, "row-sparse tables (their gradient: the rows a step touches, "
                             "never the table):\n");
            any = true;
            double values = (double)d->rows * d->cols * sizeof(float);
            fprintf(out,
                    "  %s/%s on stage %d: %d x %d, values %.2f MiB + %d optimizer slot%s "
                    "%.2f MiB; gradient per step %zu B per feature of the global batch\n"
                    "    (an id and a row, entries and merged sums; rows touched <= features)\n",
                    l->name, d->suffix, p->stage_of[i], d->rows, d->cols, values / mib, slots,
                    slots == 1 ? "" : "s", slots * values / mib,
                    2 * (sizeof(int) + (size_t)d->cols * sizeof(float)));
            if (d->sharded) print_shard(d, replicas, slots, out);
        }
    }
}
