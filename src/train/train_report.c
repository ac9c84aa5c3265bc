/* What a training run says about itself beyond its steps: the run and its layout at
 * the start, and at the end what the activations took and what the ranks sent each
 * other (the figures --precision, --shard-optimizer and sharded tables change). */
#include "train/train_report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void pn_train_announce(trainer *t)
{
    const pn_train_config *cfg = &t->cfg;
    if (!is_root(t)) return;
    pn_progress_print(&t->progress,
                      "training %s: %ld parameters, %ld samples, batch %d, %ld steps/epoch, "
                      "%ld steps, %d BLAS thread(s) per rank%s",
                      t->graph->name, pn_graph_param_count(t->graph),
                      pn_reader_samples(t->train_data), cfg->batch,
                      pn_reader_batches_per_epoch(t->train_data), t->total_steps,
                      t->threads, cfg->precision == PN_PRECISION_BF16 ? ", precision bf16" : "");
    char chunks[64] = "";
    if (t->plan->virtual_stages > 1)
        snprintf(chunks, sizeof chunks, " x %d virtual stages (%d chunks)",
                 t->plan->virtual_stages, t->plan->chunks);
    if (t->grid->size > 1)
        pn_progress_print(&t->progress,
                          "layout: %d replica(s) x %d stage(s)%s, %d micro-batches of %d, "
                          "schedule %s, transport %s, device %s",
                          t->grid->replicas, t->grid->stages, chunks, t->micro, t->micro_rows,
                          pn_schedule_kind_name(t->sched->kind),
                          pn_comm_transport_name(t->comm), t->devices);
    else if (t->cfg.device.kind != PN_DEVICE_HOST) /* one process on the CPU: as before */
        pn_progress_print(&t->progress, "device: %s", t->devices);
    const pn_params *arena = pn_stage_params(t->stage);
    const char *names[2];
    int slots = pn_optimizer_slot_names(cfg->optimizer.kind, names);
    if (cfg->shard_optimizer && t->grid->replicas > 1 && slots > 0) /* rank 0's stage */
        pn_progress_print(&t->progress, "optimizer slots: sharded over %d replicas, %.2f MiB "
                          "per rank instead of %.2f MiB (stage 0); gradients %s",
                          t->grid->replicas,
                          4.0 * slots * (double)pn_optimizer_slot_floats(t->opt) / 1048576.0,
                          4.0 * slots * (double)pn_params_size(arena) / 1048576.0,
                          pn_stage_grads_in_pieces(t->stage) ? "reduced to their pieces' replicas"
                          : cfg->deterministic ? "added in the fixed tree piece by piece"
                                               : "summed whole");
    else if (cfg->shard_optimizer && slots > 0)
        pn_progress_print(&t->progress, "optimizer slots: whole (--shard-optimizer shards "
                          "them over 2 or more replicas; this stage has 1)");
}

int pn_train_report_memory(trainer *t)
{
    int p = t->grid->stages, at = 0;
    enum { N = 5 };
    double *v = calloc((size_t)p * N, sizeof *v), mib = 1024.0 * 1024.0;
    char line[2048], work[48] = "";
    if (!v) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    pn_stage_mem m;
    pn_stage_memory(t->stage, &m);
    if (t->grid->replica == 0)
        memcpy(&v[N * t->grid->stage],
               (double[N]){m.networks, (double)m.arg_bytes, (double)m.kept_bytes,
                           (double)m.scratch_bytes, (double)m.work_bytes},
               sizeof(double[N]));
    int rc = pn_comm_sum(t->comm, PN_SCOPE_WORLD, v, N * p);
    for (int s = 0; rc == PN_OK && is_root(t) && s < p && at < (int)sizeof line - 240; s++) {
        const double *x = &v[N * s];
        work[0] = '\0'; /* a stage without one says nothing of the previous stage's */
        if (x[4] > 0) snprintf(work, sizeof work, " + bf16 work area %.2f", x[4] / mib);
        at += snprintf(line + at, sizeof line - (size_t)at,
                       "%s stage %d %.2f MiB (%d network%s %.2f + kept inputs %.2f + scratch "
                       "%.2f%s)", s ? "," : "", s, (x[1] + x[2] + x[3] + x[4]) / mib, (int)x[0],
                       x[0] == 1 ? "" : "s", x[1] / mib, x[2] / mib, x[3] / mib, work);
    }
    if (rc == PN_OK && is_root(t))
        pn_progress_print(&t->progress, "activation memory%s:%s",
                          t->cfg.recompute ? " (--recompute)" : "", line);
    free(v);
    return rc;
}

/* One exchange's bytes per step: the mean and the largest of the ranks' sent (a
 * figure of this rank, summed over all), said when any moved. */
static int report_sent(trainer *t, long steps, double mine, const char *what, const char *note)
{
    int n = t->grid->size;
    double *v = calloc((size_t)n, sizeof *v), kib = 1024.0, sum = 0.0, most = 0.0;
    if (!v) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    v[t->grid->rank] = mine;
    int rc = pn_comm_sum(t->comm, PN_SCOPE_WORLD, v, n);
    for (int r = 0; r < n; r++) {
        sum += v[r];
        if (v[r] > most) most = v[r];
    }
    if (rc == PN_OK && is_root(t) && sum > 0.0 && steps > 0)
        pn_progress_print(&t->progress,
                          "%s: %.1f KiB sent per step per rank (mean of %d ranks; the most "
                          "%.1f KiB%s)",
                          what, sum / n / steps / kib, n, most / steps / kib, note);
    free(v);
    return rc;
}

int pn_train_report_traffic(trainer *t, long steps)
{
    char note[64];
    snprintf(note, sizeof note, "; %s", pn_choice_name(&pn_precisions, t->cfg.precision));
    PN_TRY(report_sent(t, steps, pn_comm_link_bytes_sent(t->comm) - t->eval_link_bytes,
                       "stage links", note));
    return report_sent(t, steps, pn_comm_row_bytes_sent(t->comm), "row-sparse exchange",
                       "; evaluations' pulls included");
}
