/* `mpirun -np P pipenet infer MODEL --data FILE [--stages P]`: the model split into P
 * pipeline stages as training splits it, one rank each (pipeline/infer_stages.h).
 * The rank that computes the output writes --out; rank 0 prints the lines one
 * process prints (cli/infer_common.h), once every rank agrees the run succeeded. */
#include <stdio.h>
#include <stdlib.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/path.h"
#include "cli/commands.h"
#include "cli/infer_common.h"
#include "cli/options.h"
#include "mpi/job.h"
#include "pipeline/infer_stages.h"

/* The layout and the --out path, checked on rank 0 before any work: a wrong command
 * line (exit 2) on every rank. */
static int check_command(const infer_options *o, int size, int stages)
{
    if (stages != size)
        return pn_error_set(PN_ERR_INVALID, "--stages %d: infer across stages runs one rank per "
                            "stage, but %d rank%s started (mpirun -np %d)", stages, size,
                            size == 1 ? " was" : "s were", stages);
    const pn_named_path inputs[] = {{o->model, "the model file"}, {o->data, "the data file"}};
    return o->out ? pn_path_check_output("--out", o->out, inputs, 2, false) : PN_OK;
}

typedef struct staged_run {
    infer_writer w;
    int rc_open; /* the writer's start, on the output's rank */
} staged_run;

static int put(void *ctx, long row0, int rows, const float *values)
{
    return infer_writer_put(&((staged_run *)ctx)->w, row0, rows, values);
}

/* Rank 0's lines: the one-process lines, the layout added to the first. */
static void print_lines(pn_infer_stages *x, const infer_options *o, const infer_output *out,
                        double seconds, const pn_loss_summary *sum)
{
    long n = pn_infer_stages_samples(x);
    printf("infer %s on %s: %ld samples, output '%s' (%d per sample), %.2f s (%.0f samples/s), "
           "%d stages\n", o->model, o->data, n, out->name, out->width * out->seq, seconds,
           seconds > 0 ? n / seconds : 0.0, o->stages);
    infer_print_loss(sum, o, NULL, NULL);
    if (o->out) infer_print_written(pn_infer_stages_graph(x), o, out, n);
    fflush(stdout);
}

/* The run once the stages are up: the output, its writer on its rank, every batch,
 * the losses over the ranks. *together: whether a failure is known to every rank. */
static int run(pn_infer_stages *x, pn_job *job, const infer_options *o, bool *together)
{
    const pn_graph *g = pn_infer_stages_graph(x);
    infer_output out = {.loss = -1};
    *together = true;
    /* the same graph on every rank: the same outcome, said once (the lowest rank) */
    PN_TRY(pn_infer_stages_agree(x, infer_find_output(g, pn_model_default_output_of(g), o, false,
                                                      &out)));
    bool mine = pn_infer_stages_rank_of(x, out.node) == pn_job_rank(job);
    staged_run r = {0};
    int rc = mine ? infer_writer_open(&r.w, o, &out, pn_infer_stages_samples(x)) : PN_OK;
    rc = pn_infer_stages_agree(x, rc);
    double t0 = pn_now();
    if (rc == PN_OK) {
        *together = false; /* a failure now leaves peers waiting on links */
        rc = pn_infer_stages_run(x, out.node, mine ? put : NULL, &r);
        if (rc == PN_OK) *together = true;
    }
    double seconds = pn_now() - t0;
    int rc_close = infer_writer_close(&r.w, rc == PN_OK);
    if (rc < 0) return rc;
    PN_TRY(pn_infer_stages_agree(x, rc_close));
    pn_layer_stats *per_node = calloc((size_t)g->n_nodes, sizeof *per_node);
    pn_auc *auc = calloc(1, sizeof *auc);
    rc = per_node && auc ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    rc = pn_infer_stages_agree(x, rc);
    if (rc == PN_OK) rc = pn_infer_stages_losses(x, per_node, auc);
    if (rc == PN_OK && pn_job_rank(job) == 0) {
        pn_loss_summary sum;
        pn_loss_summarize(g, per_node, auc, &sum);
        print_lines(x, o, &out, seconds, &sum);
    }
    free(per_node);
    free(auc);
    return rc;
}

int infer_staged(const infer_options *given)
{
    infer_options o = *given;
    pn_job *job;
    if (pn_job_init(NULL, NULL, &job) < 0) return pn_cli_fail(pn_error_message());
    int rank = pn_job_rank(job), size = pn_job_size(job);
    if (o.stages == 0) o.stages = size; /* one stage per rank */
    int rc = pn_job_agree_root(job, rank == 0 ? check_command(&o, size, o.stages) : PN_OK);
    if (rc < 0) {
        if (rc != PN_ERR_PEER) pn_opt_report("%s", pn_error_message());
        pn_job_finalize(job);
        return rc == PN_ERR_MPI ? PN_EXIT_ERROR : PN_EXIT_USAGE;
    }
    pn_infer_stages_config cfg = {.model = o.model, .data = o.data, .stages = o.stages,
                                  .batch = o.batch, .in_flight = o.in_flight,
                                  .device_request = o.device};
    pn_infer_stages *x = NULL;
    bool together = true;
    rc = pn_infer_stages_open(&x, job, &cfg);
    if (rc == PN_OK) rc = run(x, job, &o, &together);
    if (rc < 0) {
        if (together) pn_infer_stages_free(x); /* else the job ends with what is in flight */
        return pn_cli_fail_job(job, rc, together, PN_EXIT_ERROR);
    }
    pn_infer_stages_free(x);
    pn_job_finalize(job);
    return 0;
}
