/* The training loop of one rank (its setup is trainer_setup.c's): epochs of steps
 * (the stage's passes, clipping, the update, metrics and progress), evaluations,
 * snapshots, and stopping cleanly on SIGTERM or SIGUSR1 (base/stop_signal.h) at any
 * safe point. Everything that crosses ranks goes through the communication seam
 * (mpi/comm.h); the passes themselves are pipeline/stage.c's. */
#include "train/trainer_setup.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/log.h"
#include "base/stop_signal.h"
#include "base/trace.h"
#include "train/tracing.h"
#include "train/train_report.h"

/* --- the stall watchdog ----------------------------------------------------------- */

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* How long a wait of this rank may last in a step or an evaluation before the job
 * ends (mpi/comm.h: pn_comm_watch): --stall-timeout S, by default max(20 s, 20 x the
 * median of the last 31 steps' times): a wait in a step never lasts longer than a
 * step, and a step at its usual pace is far from 20 times the median. An evaluation
 * batch gets the same bound: its longest wait, the last stage's for P - 1 forward
 * passes of a replica's batch, stays under 20 steps for pipelines up to ~60 stages.
 * Until this run has timed a step, at least 5 minutes, S given or not: the first
 * step does one-time work (memory pools grow, device kernels load). Set-up and resume
 * are not watched (snapshots by a bound of their own: snapshot_bound). */
static double stall_bound(const trainer *t)
{
    double given = t->cfg.stall_timeout_s, bound = given;
    if (given == 0) return 0;
    if (given < 0 && t->timed > 0) {
        int n = t->timed < STEP_TIMES ? (int)t->timed : STEP_TIMES;
        double s[STEP_TIMES];
        memcpy(s, t->step_s, (size_t)n * sizeof *s);
        qsort(s, (size_t)n, sizeof *s, by_value);
        bound = 20.0 * s[n / 2] > 20.0 ? 20.0 * s[n / 2] : 20.0;
    }
    return t->timed == 0 && bound < 300.0 ? 300.0 : bound;
}

/* A slow shared file system's rate, bytes/s: what the size term of snapshot_bound
 * allows for writing a snapshot. */
static const double SLOW_FS_BYTES_S = 20e6;

/* How long a wait in a snapshot may last: its length follows the model's size and the
 * file system's speed, which no step time predicts, so the bound is one that a healthy
 * snapshot never reaches but that ends a stuck one (a writer stopped, its host cut
 * off): the largest of the step's bound, a floor plus the whole snapshot's bytes at
 * SLOW_FS_BYTES_S (its parts share one file system; rank 0's index and the pruning
 * come after them, small), and 10 x the longest snapshot this run has written. The
 * floor is 300 s, or S with --stall-timeout S: the operator's word for a stall.
 * Whole seconds; 0 (never) with --stall-timeout 0. */
static double snapshot_bound(const trainer *t)
{
    double given = t->cfg.stall_timeout_s, bound = stall_bound(t);
    if (given == 0) return 0;
    double sized = (given > 0 ? given : 300.0) + t->snapshot_bytes / SLOW_FS_BYTES_S;
    if (sized > bound) bound = sized;
    if (10.0 * t->longest_snapshot_s > bound) bound = 10.0 * t->longest_snapshot_s;
    return ceil(bound);
}

/* --- a step, an evaluation ----------------------------------------------------------- */

/* The loss statistics of every stage since the last call, summed over all ranks:
 * {loss sum, rows predicted right, rows}; with auc, the binary losses' AUC
 * histograms too (an evaluation's: a training forward counts none). */
static int reduce_stats(trainer *t, double s[3], pn_auc *auc)
{
    pn_stage_take_stats(t->stage, s, auc);
    PN_TRY(pn_comm_sum(t->comm, PN_SCOPE_WORLD, s, 3));
    return auc ? pn_comm_sum(t->comm, PN_SCOPE_WORLD, (double *)auc, PN_AUC_DOUBLES) : PN_OK;
}

/* Every rank knows (the gradient norm's parts are the same everywhere): they stop
 * together, before the update, so no parameter and no snapshot is touched. */
static int diverged(trainer *t, long step)
{
    t->failed_together = true;
    if (!is_root(t)) return pn_error_set(PN_ERR_PEER, "rank 0 reports a diverged gradient");
    int node, decl;
    pn_global_first_nonfinite(t->sums, &node, &decl);
    const pn_graph_node *n = &t->graph->nodes[node];
    return pn_error_set(PN_ERR_INVALID, "step %ld: the gradient of '%s/%s' (stage %d) is NaN or "
                                        "infinite: training diverged (lower the learning rate "
                                        "or set clip_norm); the parameters before this step "
                                        "are kept",
                        step, n->name, n->layer->param_decls[decl].suffix,
                        t->plan->stage_of[node]);
}

static int train_step(trainer *t, const pn_batch *b, long step, double *loss)
{
    PN_TRY(pn_fault_check(&t->fault, step));
    PN_TRY(pn_stage_step(t->stage, b, step));
    double sq = 0.0, t0 = PN_TRACE_T0(); /* every step: for clipping, and to stop before
                                            a NaN is applied */
    PN_TRY(pn_global_grad_norm2(t->sums, &sq));
    PN_TRACE("gradient norm", "sync", NULL, step, -1, t0);
    if (!isfinite(sq)) return diverged(t, step);
    double scale = t->opt_cfg.clip_norm > 0 ? pn_optimizer_clip_scale(&t->opt_cfg, sq) : 1.0;
    t0 = PN_TRACE_T0();
    PN_TRY(pn_optimizer_step(t->opt, pn_stage_params(t->stage), step, scale));
    PN_TRACE("optimizer", "optimizer", NULL, step, -1, t0);
    double s[3];
    t0 = PN_TRACE_T0();
    PN_TRY(reduce_stats(t, s, NULL));
    PN_TRACE("loss sum", "sync", NULL, step, -1, t0);
    *loss = s[0] / s[2];
    return PN_OK;
}

/* Runs the evaluation set forward through the pipeline, a replica's slice of each
 * batch at once; into r: the mean loss over the whole set, and the accuracy, the
 * RMSE or the AUC as the loss layer's kind has one (layers/layer.h), the others NaN. */
static int evaluate(trainer *t, pn_train_result *r)
{
    long samples = pn_reader_samples(t->eval_data);
    long batches = (samples + t->cfg.batch - 1) / t->cfg.batch;
    double started = pn_now(), sent = pn_comm_link_bytes_sent(t->comm);
    PN_TRY(pn_reader_seek(t->eval_data, 0, 0));
    for (long i = 0; i < batches; i++) {
        const pn_batch *b;
        PN_TRY(pn_reader_next(t->eval_data, &b));
        long left = samples - i * t->cfg.batch; /* the first replica's rows: the most */
        int most = (int)(left < t->replica_rows ? left : t->replica_rows);
        /* never a step's tag; a short last batch may end before this replica */
        PN_TRY(pn_stage_evaluate(t->stage, b, -(i + 1), most));
        if (is_root(t)) /* a long set shows it is moving, as steps do */
            pn_progress_eval(&t->progress, started, (i + 1) * t->cfg.batch, samples);
    }
    t->eval_link_bytes += pn_comm_link_bytes_sent(t->comm) - sent; /* not a step's */
    double s[3];
    pn_loss_kind kind = pn_graph_loss_kind(t->graph);
    pn_auc *auc = NULL; /* 1 MiB, for an evaluation only */
    if (kind == PN_LOSS_BINARY && !(auc = calloc(1, sizeof *auc)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory for the evaluation's AUC");
    int rc = reduce_stats(t, s, auc);
    r->eval_loss = s[2] > 0 ? s[0] / s[2] : NAN;
    r->eval_accuracy = s[2] > 0 && kind == PN_LOSS_CLASSIFICATION ? s[1] / s[2] : NAN;
    r->eval_rmse = kind == PN_LOSS_SQUARED_ERROR ? sqrt(r->eval_loss) : NAN;
    r->eval_auc = auc && rc == PN_OK ? pn_auc_value(auc) : NAN;
    free(auc);
    return rc;
}

/* The figure the loss's kind is judged by, for the metrics file. */
static double eval_metric(const pn_train_result *r, pn_loss_kind kind)
{
    switch (kind) {
    case PN_LOSS_CLASSIFICATION: return r->eval_accuracy;
    case PN_LOSS_SQUARED_ERROR: return r->eval_rmse;
    case PN_LOSS_BINARY: return r->eval_auc;
    default: return NAN;
    }
}

/* The evaluation's part of a progress line: the loss, and the accuracy, the RMSE or
 * the AUC where the loss has one (an accuracy of an mse model would be a meaningless
 * 0%). */
static void format_eval(const pn_train_result *r, char *text, size_t cap)
{
    int n = snprintf(text, cap, "  eval loss %.4f", r->eval_loss);
    if (n < 0 || (size_t)n >= cap) return;
    if (!isnan(r->eval_accuracy))
        snprintf(text + n, cap - (size_t)n, "  eval accuracy %.2f%%", 100.0 * r->eval_accuracy);
    else if (!isnan(r->eval_rmse))
        snprintf(text + n, cap - (size_t)n, "  eval RMSE %.4f", r->eval_rmse);
    else if (!isnan(r->eval_auc))
        snprintf(text + n, cap - (size_t)n, "  eval AUC %.4f", r->eval_auc);
}

/* Evaluates after step (of epoch, counted from 0) when there is an evaluation set:
 * the result goes to r, the metrics and text ("" without a set). */
static int evaluation(trainer *t, long step, long epoch, pn_train_result *r, char *text,
                      size_t cap)
{
    text[0] = '\0';
    if (!t->eval_data) return PN_OK;
    pn_comm_watch(t->comm, stall_bound(t), "the evaluation after step %ld", step);
    double t0 = PN_TRACE_T0();
    PN_TRY(evaluate(t, r));
    PN_TRACE("evaluation", "eval", NULL, step, -1, t0);
    format_eval(r, text, cap);
    pn_loss_kind kind = pn_graph_loss_kind(t->graph);
    if (t->metrics)
        PN_TRY(pn_metrics_eval(t->metrics, step, epoch + 1, r->eval_loss, kind,
                               eval_metric(r, kind)));
    return PN_OK;
}

/* The epoch line: the mean of the step losses of the epoch's steps in this run, the
 * evaluation's figures, and what those steps took (seconds: from the epoch's first
 * step in this run to the end of its last, evaluations and snapshots left out) with
 * samples / seconds. */
static int end_of_epoch(trainer *t, long step, long epoch, double epoch_loss, double seconds,
                        long samples, pn_train_result *r)
{
    char eval_text[96], tokens[48] = "", took[32];
    PN_TRY(evaluation(t, step, epoch, r, eval_text, sizeof eval_text));
    if (t->tokens > 1)
        snprintf(tokens, sizeof tokens, ", %.0f tokens/s", (double)samples * t->tokens / seconds);
    pn_progress_duration(seconds, took, sizeof took);
    if (is_root(t))
        pn_progress_print(&t->progress, "epoch %ld: train loss %.4f%s  (%s, %.0f samples/s%s)",
                          epoch + 1, epoch_loss, eval_text, took, samples / seconds, tokens);
    return PN_OK;
}

/* --eval-every N: an evaluation between epoch ends. */
static int evaluation_between(trainer *t, long step, long epoch, pn_train_result *r)
{
    char eval_text[96];
    PN_TRY(evaluation(t, step, epoch, r, eval_text, sizeof eval_text));
    if (is_root(t) && eval_text[0])
        pn_progress_print(&t->progress, "step %ld, epoch %ld: %s", step, epoch + 1, eval_text + 2);
    return PN_OK;
}

/* --- signals and snapshots ---------------------------------------------------------- */

/* The stop signal any rank has received, else 0 (collective: every rank learns it,
 * though the launcher may have delivered it to some ranks only so far). */
static int stop_requested(trainer *t, int *sig)
{
    return pn_comm_max(t->comm, pn_stop_signal(), sig);
}

static bool opt_slot_part(void *ctx, int i, int k, size_t *at, size_t *n, pn_matrix *slot)
{
    return pn_optimizer_slot_part(ctx, i, k, at, n, slot);
}

/* A sharded optimizer's slots as a snapshot writes and reads them, each replica its
 * own part (NULL: the slots are the arena's). */
static const pn_slot_parts *slot_parts(trainer *t, pn_slot_parts *out)
{
    if (!pn_optimizer_sharded(t->opt)) return NULL;
    *out = (pn_slot_parts){0, {NULL, NULL}, opt_slot_part, t->opt};
    out->n_slots = pn_optimizer_slot_names(t->opt_cfg.kind, out->names);
    return out;
}

/* Collective. A failure is known to every rank (they stop together) and leaves the
 * snapshots already in the directory as they were. */
static int snapshot(trainer *t, pn_progress_mark mark)
{
    char path[PN_PATH_MAX + 32] = "";
    double t0 = pn_now();
    pn_comm_watch_as(t->comm, snapshot_bound(t), "the bound of a snapshot, docs/running.md",
                     "writing the snapshot of step %ld", mark.step);
    pn_run_settings run = {t->config, t->cfg.seed, t->cfg.batch};
    pn_slot_parts parts; /* a sharded optimizer's: each replica writes its own */
    int rc = pn_checkpoint_save(t->comm, pn_stage_params(t->stage), slot_parts(t, &parts), run,
                                mark, t->cfg.snapshot_dir, t->cfg.keep, path, sizeof path);
    PN_TRACE("snapshot", "snapshot", NULL, mark.step, -1, t0);
    if (rc == PN_ERR_STALL) return rc; /* not agreed: the job ends (pn_job_abort) */
    if (rc < 0) {
        t->failed_together = true;
        return rc == PN_ERR_PEER ? rc
                                 : pn_error_wrap(rc, "snapshot at step %ld (the snapshots "
                                                     "already in %s are kept)",
                                                 mark.step, t->cfg.snapshot_dir);
    }
    if (is_root(t))
        pn_progress_print(&t->progress, "snapshot at step %ld: %s (%.2f s)", mark.step, path,
                          pn_now() - t0);
    snprintf(t->newest_path, sizeof t->newest_path, "%s", path);
    t->newest_step = mark.step;
    if (pn_now() - t0 > t->longest_snapshot_s) t->longest_snapshot_s = pn_now() - t0;
    return PN_OK;
}

/* On a stop signal: a snapshot when steps were trained since the last one on disk,
 * then one line saying so. Without a snapshot directory nothing is saved, and the
 * line and the result say that instead. */
static int stop_now(trainer *t, int signal, long step, long saved, pn_progress_mark next,
                    pn_train_result *r)
{
    const pn_train_config *cfg = &t->cfg;
    const char *sig = pn_stop_signal_name(signal);
    bool save = cfg->snapshot_dir[0] && step > saved;
    if (save) PN_TRY(snapshot(t, next));
    r->stopped_by_signal = 1;
    r->stopped_unsaved = !cfg->snapshot_dir[0];
    long trained = step - t->start.step;
    if (!is_root(t)) return PN_OK;
    if (r->stopped_unsaved && trained == 0)
        pn_progress_print(&t->progress, "stopping on %s before the first step, with nothing "
                                        "saved (no --snapshot-dir)", sig);
    else if (r->stopped_unsaved)
        pn_progress_print(&t->progress, "stopping at step %ld on %s with nothing saved (no "
                                        "--snapshot-dir): the %ld step%s trained here %s lost",
                          step, sig, trained, trained == 1 ? "" : "s", trained == 1 ? "is" : "are");
    else if (trained == 0)
        pn_progress_print(&t->progress, "stopping on %s before the first step: nothing new "
                                        "to save", sig);
    else
        pn_progress_print(&t->progress, "stopping at step %ld on %s%s", step, sig,
                          save ? " after writing a snapshot"
                               : " (its snapshot is already written)");
    return PN_OK;
}

/* The snapshot's data position in this run's batches, with a note (into note) when
 * it moved. The snapshot counts batches of its own run's size: with another batch
 * (--resume-override) the run goes on at the batch that holds the epoch's first
 * sample not yet trained (the samples before it in that batch are trained again);
 * a position that no batch of this epoch reaches (the rest no longer fills one, or
 * another data file is smaller) starts the next epoch. */
static void place_in_epoch(trainer *t, char *note, size_t cap)
{
    long per_epoch = pn_reader_batches_per_epoch(t->train_data), batch = t->cfg.batch;
    long done = t->start.batch_index * (t->resume_batch > 0 ? t->resume_batch : batch);
    char moved[128] = "", again[64] = "", past[128] = "";
    if (t->resume_batch > 0 && t->resume_batch != batch) {
        t->start.batch_index = done / batch;
        snprintf(moved, sizeof moved, "; its run had batches of %ld and had trained %ld "
                 "samples of epoch %ld", t->resume_batch, done, t->start.epoch + 1);
        if (t->start.batch_index < per_epoch)
            snprintf(again, sizeof again, ", %ld of them trained again",
                     done - t->start.batch_index * batch);
    }
    if (t->start.batch_index >= per_epoch) {
        snprintf(past, sizeof past, "%s: no batch of %ld left in the epoch",
                 moved[0] ? "" : "; its position is past this epoch's end", batch);
        t->start.epoch++;
        t->start.batch_index = 0;
    }
    snprintf(note, cap, "%s%s%s", moved, again, past);
}

static int resume(trainer *t)
{
    PN_TRY(pn_fault_at(&t->fault, "resume"));
    if (!t->resume_path[0]) { /* --resume auto before any snapshot */
        if (is_root(t))
            printf("no snapshot in %s yet: starting at step 0\n", t->cfg.snapshot_dir);
        return PN_OK;
    }
    double t0 = PN_TRACE_T0();
    pn_slot_parts parts; /* a sharded optimizer's: each replica reads only its own */
    PN_TRY(pn_checkpoint_load(t->comm, pn_stage_params(t->stage), slot_parts(t, &parts),
                              t->resume_path, &t->start));
    PN_TRACE("resume", "snapshot", NULL, t->start.step, -1, t0);
    snprintf(t->newest_path, sizeof t->newest_path, "%s", t->resume_path);
    t->newest_step = t->start.step; /* the run's parameters until it trains a step */
    char placed[320];
    place_in_epoch(t, placed, sizeof placed);
    if (is_root(t)) /* epochs and batches counted from 1, as progress lines count epochs */
        printf("resuming from %s: step %ld, epoch %ld, next batch %ld of %ld, seed %llu%s\n",
               t->resume_path, t->start.step, t->start.epoch + 1, t->start.batch_index + 1,
               pn_reader_batches_per_epoch(t->train_data), (unsigned long long)t->cfg.seed,
               placed);
    long dropped = 0;
    if (t->metrics && pn_metrics_is_stream(t->metrics)) /* once, on stderr: not in the stream */
        pn_log_info("metrics: %s is not a regular file: appending to it without dropping "
                    "the interrupted run's lines past step %ld", t->cfg.metrics, t->start.step);
    int rc = t->metrics ? pn_metrics_forget_after(t->metrics, t->start.step, &dropped) : PN_OK;
    if (rc == PN_OK && dropped > 0)
        printf("metrics: dropped %ld line%s past step %ld from %s (the interrupted run's; "
               "they are done again)\n", dropped, dropped == 1 ? "" : "s", t->start.step,
               t->cfg.metrics);
    return rc;
}

/* --- the run ------------------------------------------------------------------------ */

/* After the last step: the final snapshot, the parameter hash, the result. */
static int finish(trainer *t, long step, pn_progress_mark next, double start, pn_train_result *r)
{
    const pn_train_config *cfg = &t->cfg;
    if (cfg->snapshot_dir[0] && !r->stopped_by_signal && step > t->start.step)
        PN_TRY(snapshot(t, next));
    pn_comm_watch(t->comm, stall_bound(t), "the end of the run after step %ld", step);
    if (is_root(t)) pn_progress_finish(&t->progress);
    PN_TRY(pn_train_report_memory(t));
    PN_TRY(pn_train_report_traffic(t, step - t->start.step));
    PN_TRY(pn_global_param_hash(t->sums, &r->param_hash));
    if (is_root(t) && !(r->stopped_by_signal && step == t->start.step)) /* trained */
        pn_progress_print(&t->progress, "parameter hash after %ld steps: %016llx", step,
                          r->param_hash);
    if (t->newest_step == step) /* else the parameters are newer than any snapshot */
        snprintf(r->snapshot, sizeof r->snapshot, "%s", t->newest_path);
    r->steps = step;
    r->seconds = pn_now() - start;
    r->samples_per_s =
        r->seconds > 0 ? (double)(step - t->start.step) * cfg->batch / r->seconds : 0.0;
    if (t->hooks && t->hooks->on_params)
        PN_TRY(t->hooks->on_params(t->hooks->ctx, pn_stage_params(t->stage)));
    return PN_OK;
}

/* The trace at the end of a run: gathered into one file when every rank gets here
 * together (finished, stopped by a signal, or after a failure they agreed on), else
 * this rank's own events alone (train/tracing.h). The run's status and message
 * come first; the trace's failure is reported only after a good run. */
static int end_trace(trainer *t, int rc, bool together)
{
    if (!t->tracing) return rc;
    char *why = rc < 0 ? strdup(pn_error_message()) : NULL;
    int wrote = rc >= 0 || together ? pn_tracing_finish(t->comm, t->cfg.trace)
                                              : pn_tracing_write_alone(t->grid, t->cfg.trace);
    if (rc < 0 && wrote < 0) pn_error_set(rc, "%s", why ? why : "out of memory");
    free(why);
    return rc < 0 ? rc : wrote;
}

static int run(trainer *t, pn_train_result *r)
{
    const pn_train_config *cfg = &t->cfg;
    long per_epoch = pn_reader_batches_per_epoch(t->train_data), total = t->total_steps;
    long step = t->start.step;
    pn_progress_start(&t->progress, stdout, step, total, cfg->log_every_s, t->grid->size == 1);
    pn_train_announce(t);
    if (t->hooks && t->hooks->collect_losses &&
        !(r->losses = calloc((size_t)(total ? total : 1), sizeof *r->losses)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    if (step >= total && is_root(t))
        pn_progress_print(&t->progress, "already at step %ld of %ld: nothing to train", step,
                          total);
    /* within the epoch: resume() placed it (place_in_epoch) */
    PN_TRY(pn_reader_seek(t->train_data, t->start.epoch, t->start.batch_index));
    double start = pn_now(), epoch_start = start, epoch_loss = 0.0;
    long epoch_steps = 0, saved = step; /* saved: the newest step on disk (or the start) */
    pn_progress_mark next = t->start; /* the batch after the last one trained */
    while (step < total) {
        pn_comm_watch(t->comm, stall_bound(t), "step %ld", step);
        int stop = 0;
        double t0 = pn_now();
        PN_TRY(stop_requested(t, &stop));
        PN_TRACE("stop check", "sync", NULL, step, -1, t0);
        if (stop) {
            PN_TRY(stop_now(t, stop, step, saved, next, r));
            break;
        }
        const pn_batch *b;
        t0 = pn_now();
        PN_TRY(pn_reader_next(t->train_data, &b));
        PN_TRACE("data", "data", NULL, step, -1, t0);
        long epoch = b->epoch;
        double loss = NAN;
        PN_TRY(train_step(t, b, step, &loss));
        PN_TRACE("step", "step", NULL, step, -1, t0);
        if (!isfinite(loss)) { /* every rank sees the reduced loss: rank 0 reports */
            t->failed_together = true;
            return is_root(t) ? pn_error_set(PN_ERR_INVALID,
                                             "step %ld: the loss is %g: training diverged "
                                             "(lower the learning rate or set clip_norm)",
                                             step, loss)
                              : pn_error_set(PN_ERR_PEER, "rank 0 reports a diverged loss");
        }
        if (r->losses) r->losses[step] = loss;
        next = (pn_progress_mark){step + 1, b->index + 1 < per_epoch ? b->epoch : b->epoch + 1,
                                  b->index + 1 < per_epoch ? b->index + 1 : 0};
        double lr = pn_optimizer_lr(&t->opt_cfg, step), dt = pn_now() - t0;
        t->step_s[t->timed++ % STEP_TIMES] = dt;
        step++;
        epoch_loss += loss;
        epoch_steps++;
        r->last_loss = loss;
        if (t->metrics)
            PN_TRY(pn_metrics_step(t->metrics, step, epoch + 1, loss, lr, cfg->batch / dt,
                                   t->tokens));
        if (is_root(t)) /* the rate of this run's steps, not those before a resume */
            pn_progress_step(&t->progress, step, epoch + 1, loss,
                             (double)(step - t->start.step) * cfg->batch / (pn_now() - start),
                             t->tokens);
        if (b->index == per_epoch - 1 || step == total) {
            double now = pn_now();
            PN_TRY(end_of_epoch(t, step, epoch, epoch_loss / epoch_steps, now - epoch_start,
                                epoch_steps * cfg->batch, r));
            epoch_start = pn_now();
            start += epoch_start - now; /* evaluation time is not training time */
            epoch_loss = 0.0;
            epoch_steps = 0;
        } else if (cfg->eval_every > 0 && step % cfg->eval_every == 0) {
            double now = pn_now();
            PN_TRY(evaluation_between(t, step, epoch, r));
            double spent = pn_now() - now; /* not training time either */
            epoch_start += spent;
            start += spent;
        }
        if (cfg->snapshot_dir[0] && cfg->snapshot_every > 0 && step % cfg->snapshot_every == 0 &&
            step < total) {
            double now = pn_now();
            PN_TRY(snapshot(t, next));
            double spent = pn_now() - now; /* not training time, as evaluations are not */
            epoch_start += spent;
            start += spent;
            saved = step;
        }
    }
    return finish(t, step, next, start, r);
}

int pn_train(const pn_graph *g, const pn_train_config *cfg, pn_job *job,
             const pn_train_hooks *hooks, pn_train_result *result)
{
    trainer t = {.graph = g, .cfg = *cfg, .hooks = hooks, .newest_step = -1};
    pn_stop_signals_catch(); /* the program has done so already; a library caller may not */
    pn_train_result r = {.last_loss = NAN, .eval_loss = NAN, .eval_accuracy = NAN,
                         .eval_rmse = NAN, .eval_auc = NAN};
    int rc = pn_trainer_setup(&t, job);
    if (t.comm) {
        rc = pn_comm_agree(t.comm, rc);
        if (rc == PN_OK) /* every rank has made its links: the transport connects them */
            rc = pn_comm_agree(t.comm, pn_comm_links_ready(t.comm));
    } else if (rc < 0 && pn_job_rank(job) != 0) { /* no layout yet: every rank failed alike */
        rc = pn_error_set(PN_ERR_PEER, "rank 0 failed");
    }
    if (rc == PN_OK && cfg->trace[0])
        t.tracing = (rc = pn_tracing_start(t.comm, cfg->trace)) == PN_OK;
    int stop = 0; /* a stop signal during set-up: no resume to read */
    if (rc == PN_OK && cfg->resume[0]) rc = stop_requested(&t, &stop);
    if (rc == PN_OK && cfg->resume[0] && !stop) rc = pn_comm_agree(t.comm, resume(&t));
    r.failed_together = rc < 0;
    if (rc == PN_OK) rc = run(&t, &r);
    rc = end_trace(&t, rc, r.failed_together || t.failed_together);
    pn_snapshot_lock_release(t.snapshot_lock); /* whatever the end: the directory is free */
    if (t.failed_together) r.failed_together = 1;
    if (rc < 0 && rc != PN_ERR_PEER && t.grid && t.grid->size > 1)
        rc = pn_error_wrap(rc, "rank %d (stage %d, replica %d)", t.grid->rank, t.grid->stage,
                           t.grid->replica);
    if (rc != PN_ERR_STALL) /* else the job ends now, and MPI may still write into what
                               the abandoned wait handed it: nothing is freed */
        pn_trainer_teardown(&t);
    if (result)
        *result = r;
    else
        free(r.losses);
    return rc;
}
