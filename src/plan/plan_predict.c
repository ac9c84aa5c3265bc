/* The plan's prediction from measured times (plan_predict.h), its table and its
 * JSON. */
#include "plan/plan_predict.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "plan/schedule_time.h"

/* Seconds to move bytes over the measured link (0 when it was not measured). */
static double link_time(const pn_plan_times *t, double bytes)
{
    if (!t->link_measured || bytes <= 0.0) return 0.0;
    return t->link_latency_s + bytes / t->link_bytes_per_s;
}

/* How much slower each rank trains when all the layout's ranks train at once than
 * alone: measured when the job measured as many ranks (pn_plan_measure_job),
 * else what their count says: ranks x threads / cores when that is over 1, else 1. */
static double sharing_slowdown(const pn_plan_times *t, const pn_plan_prediction *pr,
                               bool *measured)
{
    double nominal = (double)pr->ranks * pr->threads / pr->cores;
    *measured = t->shared_ranks == pr->ranks && t->alone_step_s > 0.0 && t->shared_step_s > 0.0;
    double f = *measured ? t->shared_step_s / t->alone_step_s : nominal;
    return f > 1.0 ? f : 1.0;
}

/* The schedule's lists run with each chunk's measured passes and messages
 * (schedule_time.h); as the step runs (`as_run`): with each stage's update, the
 * ranks sharing the cores when they outnumber them; else on a core each, without
 * updates (the schedule's own idle time: the bubble). */
static int simulate_pipeline(const pn_plan *p, const pn_graph *g, const pn_schedule *s,
                             const pn_plan_times *t, const pn_plan_prediction *pr,
                             bool as_run, double *makespan)
{
    size_t n = (size_t)p->chunks;
    double *fwd = calloc(n, sizeof *fwd), *bwd = calloc(n, sizeof *bwd);
    double *send = calloc(n, sizeof *send), *update = calloc((size_t)p->stages, sizeof *update);
    int rc = fwd && bwd && send && update ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; rc == PN_OK && i < g->n_nodes; i++) {
        int ch = p->chunk_of[i];
        if (ch < 0) continue;
        fwd[ch] += t->forward_s[i] * pr->scale;
        bwd[ch] += t->backward_s[i] * pr->scale;
    }
    for (int ch = 0; rc == PN_OK && ch < p->chunks; ch++)
        send[ch] = link_time(t, p->cost[ch].send_bytes * pr->micro_batch);
    for (int st = 0; rc == PN_OK && st < p->stages; st++) update[st] = pr->stage[st].optimizer_s;
    pn_chunk_times ct = {.forward_s = fwd, .backward_s = bwd, .send_s = send};
    if (as_run) {
        ct.update_s = update;
        ct.copies = pr->replicas;
        ct.contention = pr->contention;
        if (pr->oversubscribed) ct.slots = (double)pr->cores / pr->threads;
    }
    if (rc == PN_OK) rc = pn_schedule_makespan(s, &ct, makespan);
    free(fwd), free(bwd), free(send), free(update);
    return rc;
}

int pn_plan_predict(pn_plan_prediction *out, const pn_plan *p, const pn_graph *g,
                    const pn_schedule *s, const pn_plan_times *t, int replicas,
                    int micro_batch, int slots, int threads, int cores)
{
    pn_plan_prediction pr = {.stages = p->stages, .replicas = replicas, .micro = s->micro,
                             .micro_batch = micro_batch, .threads = threads > 0 ? threads : 1,
                             .cores = cores > 0 ? cores : 1, .ranks = p->stages * replicas};
    pr.scale = (double)micro_batch / (double)t->micro_batch;
    pr.oversubscribed = (long)pr.ranks * pr.threads > pr.cores;
    pr.slowdown = sharing_slowdown(t, &pr, &pr.slowdown_measured);
    double turns = (double)pr.ranks * pr.threads / pr.cores; /* the count's own slowdown */
    pr.contention = pr.slowdown / (turns > 1.0 ? turns : 1.0);
    if (pr.contention < 1.0) pr.contention = 1.0;
    pr.stage = calloc((size_t)p->stages, sizeof *pr.stage);
    if (!pr.stage) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (int i = 0; i < g->n_nodes; i++) {
        int st = p->stage_of[i];
        if (st < 0) continue;
        pr.stage[st].forward_s += t->forward_s[i] * pr.scale;
        pr.stage[st].backward_s += t->backward_s[i] * pr.scale;
    }
    double busy = 0.0, mb = (double)micro_batch, d = (double)replicas, allreduce_s = 0.0;
    for (int st = 0; st < p->stages; st++) {
        pn_stage_prediction *sp = &pr.stage[st];
        pn_stage_cost cost = pn_plan_stage_cost(p, st);
        const pn_stage_cost *c = &cost;
        /* memory per rank: a sharded table's shard (its largest), no dense gradient
         * for row-sparse tables; the optimizer's time and the all-reduce as before,
         * by every parameter of the stage */
        long held, dense;
        pn_plan_stage_held(p, g, st, replicas, &held, &dense);
        double params = (double)c->params, bytes = 4.0 * params;
        /* values, then gradients; a chunk's sends are its own messages */
        sp->link_s = 0.0;
        for (int ch = st; ch < p->chunks; ch += p->stages)
            sp->link_s += 2.0 * link_time(t, p->cost[ch].send_bytes * mb);
        sp->optimizer_s = params * t->optimizer_s_per_param;
        if (replicas > 1) { /* a ring: 2 (D - 1) steps of bytes / D each */
            sp->allreduce_s = 2.0 * (d - 1.0) * link_time(t, bytes / d);
            if (sp->allreduce_s > allreduce_s) allreduce_s = sp->allreduce_s;
        }
        sp->param_bytes = 4.0 * (double)held;
        sp->grad_bytes = 4.0 * (double)dense;
        sp->slot_bytes = sp->param_bytes * slots;
        sp->activation_bytes = pn_plan_activation_bytes(p, s, st, micro_batch, false);
        double fb = sp->forward_s + sp->backward_s;
        if (st == 0 || fb > pr.slot_s) pr.slot_s = fb, pr.slowest = st;
        if (sp->optimizer_s > pr.optimizer_s) pr.optimizer_s = sp->optimizer_s;
        pr.link_s += sp->link_s;
        busy += fb;
    }
    /* The textbook figure: M slots of the slowest stage over 1 - the schedule's
     * bubble, (M + P - 1) slots (interleaved: M + (P - 1) / V); counted apart from
     * the slot's time, which may be 0 */
    pr.formula_slots = s->micro / (1.0 - pn_schedule_bubble_formula(s->kind, p->stages,
                                                                    p->virtual_stages, s->micro));
    pr.formula_s = pr.formula_slots * pr.slot_s;
    /* The prediction: the lists run (updates included), then the replicas' sums */
    double own_cores_s = 0.0;
    int rc = simulate_pipeline(p, g, s, t, &pr, true, &pr.pipeline_s);
    if (rc == PN_OK) rc = simulate_pipeline(p, g, s, t, &pr, false, &own_cores_s);
    if (rc < 0) {
        free(pr.stage);
        return rc;
    }
    pr.allreduce_s = allreduce_s;
    pr.step_s = pr.pipeline_s + allreduce_s;
    pr.bubble = own_cores_s > 0.0 ? 1.0 - s->micro * busy / (p->stages * own_cores_s) : 0.0;
    pr.samples_per_s = pr.step_s > 0.0 ? mb * s->micro * d / pr.step_s : 0.0;
    *out = pr;
    return PN_OK;
}

void pn_plan_prediction_release(pn_plan_prediction *pr)
{
    free(pr->stage);
    pr->stage = NULL;
}

void pn_plan_predict_shard_slots(pn_plan_prediction *pr, const pn_plan *p, const pn_graph *g,
                                 int slots)
{
    long d = pr->replicas > 1 ? pr->replicas : 1;
    for (int st = 0; st < pr->stages; st++) {
        long held, dense;
        pn_plan_stage_held(p, g, st, pr->replicas, &held, &dense);
        pr->stage[st].slot_bytes = 4.0 * (double)(held - dense + (dense + d - 1) / d) * slots;
    }
}

void pn_plan_print_prediction(const pn_plan_prediction *pr, const pn_plan *p,
                              const pn_graph *g, const pn_plan_times *t, FILE *out)
{
    const double ms = 1e3, mib = 1024.0 * 1024.0;
    fprintf(out, "\nmeasured: per micro-batch of %d, ms; memory per rank, MiB\n",
            pr->micro_batch);
    fprintf(out, "%-5s  %9s  %9s  %9s  %9s  %9s  %9s  %9s  %9s  %9s\n", "stage", "forward",
            "backward", "fwd+bwd", "link", "update", "params", "grads", "opt slots",
            "act");
    pn_stage_prediction tot = {0};
    for (int st = 0; st < pr->stages; st++) {
        const pn_stage_prediction *sp = &pr->stage[st];
        fprintf(out, "%-5d  %9.3f  %9.3f  %9.3f  %9.3f  %9.3f  %9.2f  %9.2f  %9.2f  %9.2f%s\n",
                st, sp->forward_s * ms, sp->backward_s * ms,
                (sp->forward_s + sp->backward_s) * ms, sp->link_s * ms, sp->optimizer_s * ms,
                sp->param_bytes / mib, sp->grad_bytes / mib, sp->slot_bytes / mib,
                sp->activation_bytes / mib, st == pr->slowest && pr->stages > 1 ? "  slowest" : "");
        tot.forward_s += sp->forward_s, tot.backward_s += sp->backward_s;
        tot.link_s += sp->link_s, tot.optimizer_s += sp->optimizer_s;
        tot.param_bytes += sp->param_bytes, tot.grad_bytes += sp->grad_bytes;
        tot.slot_bytes += sp->slot_bytes, tot.activation_bytes += sp->activation_bytes;
    }
    fprintf(out, "%-5s  %9.3f  %9.3f  %9.3f  %9.3f  %9.3f  %9.2f  %9.2f  %9.2f  %9.2f\n",
            "total", tot.forward_s * ms, tot.backward_s * ms,
            (tot.forward_s + tot.backward_s) * ms, tot.link_s * ms, tot.optimizer_s * ms,
            tot.param_bytes / mib, tot.grad_bytes / mib, tot.slot_bytes / mib,
            tot.activation_bytes / mib);
    fprintf(out, "predicted step: %.3f ms = pipeline with updates %.3f ms", pr->step_s * ms,
            pr->pipeline_s * ms);
    if (pr->replicas > 1) fprintf(out, " + replica sums %.3f ms", pr->allreduce_s * ms);
    if (pr->step_s > 0.0)
        fprintf(out, "; bubble %.1f%%; %.0f samples/s\n", 100.0 * pr->bubble,
                pr->samples_per_s);
    else /* no bubble or rate follows from steps of no time */
        fprintf(out, "; every time measured is 0: no bubble or samples/s to predict\n");
    fprintf(out,
            "  the schedule's lists run with each stage's times, links and update (%s = "
            "%.4g slots of the slowest, stage %d's %.3f ms, would take %.3f ms)\n",
            p->virtual_stages > 1 ? "M + (P - 1) / V" : "M + P - 1", pr->formula_slots,
            pr->slowest, pr->slot_s * ms, pr->formula_s * ms);
    if (pr->oversubscribed)
        fprintf(out,
                "note: %d ranks x %d BLAS thread%s share %d cores: at most %.3g ranks run at "
                "once at full speed, more share them, each %.2fx slower than their count "
                "alone says (%s)\n",
                pr->ranks, pr->threads, pr->threads == 1 ? "" : "s", pr->cores,
                (double)pr->cores / pr->threads,
                pr->contention,
                pr->slowdown_measured ? "measured: all ranks at once took "
                                        "the slowdown below"
                                      : "not measured: run plan --measure under mpirun "
                                        "with as many ranks");
    if (pr->slowdown_measured)
        fprintf(out, "sharing: %d ranks training at once each took %.2fx their time alone\n",
                pr->ranks, pr->slowdown);
    if (pr->scale != 1.0)
        fprintf(out, "note: times measured for micro-batches of %d, scaled by %.3g\n",
                t->micro_batch, pr->scale);
    if (t->link_measured)
        fprintf(out, "link (ranks 0-1): %.1f us + %.2f GB/s\n", t->link_latency_s * 1e6,
                t->link_bytes_per_s / 1e9);
    else if (pr->stages > 1 || pr->replicas > 1)
        fprintf(out, "link: not measured (counted as free); measure it under "
                     "mpirun -np 2 pipenet plan ... --measure\n");
    char threads[48] = "BLAS threads not recorded", steps[48] = "steps not recorded";
    if (t->threads > 0)
        snprintf(threads, sizeof threads, "%d BLAS thread%s per rank", t->threads,
                 t->threads == 1 ? "" : "s");
    if (t->repetitions > 0) snprintf(steps, sizeof steps, "median of %d steps", t->repetitions);
    fprintf(out, "%s: %s, %s; update: optimizer step of the stage's parameters\n", g->name,
            threads, steps);
}

/* Sets key to a new value; a failure (out of memory) sticks in *bad. */
static void put(json_t *obj, const char *key, json_t *v, int *bad)
{
    *bad |= !v || json_object_set_new(obj, key, v);
}

static json_t *stage_json(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int st,
                          int micro_batch, const pn_plan_prediction *pr, int *bad)
{
    pn_stage_cost cost = pn_plan_stage_cost(p, st);
    const pn_stage_cost *c = &cost;
    double mb = (double)micro_batch;
    json_t *o = json_object(), *names = json_array();
    *bad |= !o || !names;
    for (int i = 0; !*bad && i < g->n_nodes; i++)
        if (p->stage_of[i] == st) *bad |= json_array_append_new(names, json_string(g->nodes[i].name));
    if (*bad) {
        json_decref(o), json_decref(names);
        return NULL;
    }
    int peak = pn_schedule_peak_in_flight(s, st);
    put(o, "stage", json_integer(st), bad);
    put(o, "layers", names, bad);
    put(o, "params", json_integer(c->params), bad);
    put(o, "flops_per_sample", json_real(c->flops), bad);
    put(o, "in_flight", json_integer(peak), bad);
    put(o, "send_bytes", json_real(c->send_bytes * mb), bad);
    put(o, "recv_bytes", json_real(c->recv_bytes * mb), bad);
    put(o, "activation_bytes",
        json_real(pn_plan_activation_bytes(p, s, st, micro_batch, false)), bad);
    /* the activation memory planner's (plan_args.c), in the precision the links'
     * bytes above are in, as the text prints them */
    double own, shared, work;
    if (pn_plan_arg_bytes(p, g, s, st, micro_batch, false, &own, &shared, &work) < 0)
        *bad = 1;
    put(o, "arg_bytes_own", json_real(own), bad);
    put(o, "arg_bytes_shared", json_real(shared), bad);
    put(o, "arg_bytes_work", json_real(work), bad);
    if (pr) {
        const pn_stage_prediction *sp = &pr->stage[st];
        put(o, "forward_s", json_real(sp->forward_s), bad);
        put(o, "backward_s", json_real(sp->backward_s), bad);
        put(o, "link_s", json_real(sp->link_s), bad);
        put(o, "optimizer_s", json_real(sp->optimizer_s), bad);
        put(o, "allreduce_s", json_real(sp->allreduce_s), bad);
        put(o, "param_bytes", json_real(sp->param_bytes), bad);
        put(o, "grad_bytes", json_real(sp->grad_bytes), bad);
        put(o, "slot_bytes", json_real(sp->slot_bytes), bad);
    }
    return o;
}

json_t *pn_plan_json(const pn_plan *p, const pn_graph *g, const pn_schedule *s, int replicas,
                     int micro_batch, const pn_plan_prediction *pr, const pn_plan_times *t)
{
    int bad = 0;
    json_t *root = json_object(), *stages = json_array();
    bad |= !root || !stages;
    put(root, "model", json_string(g->name), &bad);
    put(root, "stages", json_integer(p->stages), &bad);
    put(root, "virtual_stages", json_integer(p->virtual_stages), &bad);
    put(root, "replicas", json_integer(replicas), &bad);
    put(root, "micro_batches", json_integer(s->micro), &bad);
    put(root, "micro_batch", json_integer(micro_batch), &bad);
    put(root, "batch", json_integer((json_int_t)micro_batch * s->micro * replicas), &bad);
    put(root, "schedule", json_string(pn_schedule_kind_name(s->kind)), &bad);
    put(root, "precision", json_string(pn_choice_name(&pn_precisions, p->precision)), &bad);
    put(root, "bubble_equal_stages", json_real(pn_schedule_bubble(s)), &bad);
    put(root, "measured", json_boolean(pr != NULL), &bad);
    for (int st = 0; !bad && st < p->stages; st++)
        bad |= json_array_append_new(stages, stage_json(p, g, s, st, micro_batch, pr, &bad));
    put(root, "stage", stages, &bad);
    if (pr && !bad) {
        json_t *step = json_object();
        put(step, "step_s", json_real(pr->step_s), &bad);
        put(step, "pipeline_s", json_real(pr->pipeline_s), &bad);
        put(step, "slowest_stage", json_integer(pr->slowest), &bad);
        put(step, "slowest_fwd_bwd_s", json_real(pr->slot_s), &bad);
        put(step, "link_s", json_real(pr->link_s), &bad);
        put(step, "optimizer_s", json_real(pr->optimizer_s), &bad);
        put(step, "formula_slots", json_real(pr->formula_slots), &bad);
        put(step, "formula_s", json_real(pr->formula_s), &bad);
        put(step, "allreduce_s", json_real(pr->allreduce_s), &bad);
        put(step, "oversubscribed", json_boolean(pr->oversubscribed), &bad);
        put(step, "sharing_slowdown", json_real(pr->slowdown), &bad);
        put(step, "sharing_measured", json_boolean(pr->slowdown_measured), &bad);
        put(step, "bubble", json_real(pr->bubble), &bad);
        put(step, "samples_per_s", json_real(pr->samples_per_s), &bad);
        put(root, "prediction", step, &bad);
        json_t *m = json_object();
        put(m, "micro_batch", json_integer(t->micro_batch), &bad);
        put(m, "threads", json_integer(t->threads), &bad);
        put(m, "repetitions", json_integer(t->repetitions), &bad);
        put(m, "cores", json_integer(pr->cores), &bad);
        if (t->shared_ranks > 0) {
            put(m, "alone_step_s", json_real(t->alone_step_s), &bad);
            put(m, "shared_ranks", json_integer(t->shared_ranks), &bad);
            put(m, "shared_step_s", json_real(t->shared_step_s), &bad);
        }
        if (t->link_measured) {
            put(m, "link_latency_s", json_real(t->link_latency_s), &bad);
            put(m, "link_bytes_per_s", json_real(t->link_bytes_per_s), &bad);
        }
        put(root, "measurement", m, &bad);
    }
    if (bad) {
        json_decref(root);
        return NULL;
    }
    return root;
}
