/* Generation across pipeline stages under mpirun (cli/generate_staged.h): the layout,
 * each rank's part of the model and its links, agreed on by every rank before the
 * first token; the tokens are the same on every rank, and rank 0 prints them. */
#include "cli/generate_staged.h"

#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/log.h"
#include "cli/commands.h"
#include "io/snapshot_dir.h"
#include "mpi/comm.h"
#include "mpi/job.h"
#include "pipeline/gen_stages.h"
#include "pipeline/infer_stages.h"
#include "plan/plan.h"

/* A wait on another stage longer than this ends the job (a lost or failed rank). */
enum { STALL_SECONDS = 300 };

typedef struct staged {
    pn_comm *comm;
    pn_plan *plan;
    int stage;
} staged;

/* The part a rank holds: its stage's layers in the placement training would make. */
static int members(void *ctx, const pn_graph *g, bool *member)
{
    staged *s = ctx;
    PN_TRY(pn_plan_build(&s->plan, g, pn_comm_grid(s->comm)->stages));
    for (int i = 0; i < g->n_nodes; i++) member[i] = s->plan->stage_of[i] == s->stage;
    return PN_OK;
}

/* Everything up to the first token; then the run. *together: whether a failure is
 * known to every rank. */
static int run_staged(pn_job *job, staged *s, const char *model, int device, generate_run_fn run,
                      void *ctx, bool *together)
{
    *together = true;
    PN_TRY(pn_comm_create(&s->comm, job, pn_job_size(job)));
    const pn_grid *grid = pn_comm_grid(s->comm);
    s->stage = grid->stage;
    if (grid->size > 1) pn_log_set_rank(grid->rank);
    char path[4096], dev[32];
    int rc = grid->rank == 0 ? pn_snapshot_resolve(model, path, sizeof path) : PN_OK;
    PN_TRY(pn_comm_agree_root(s->comm, rc, "finding the model file"));
    PN_TRY(pn_comm_broadcast(s->comm, path, sizeof path));
    pn_device where;
    PN_TRY(pn_infer_place_device(s->comm, job, device, &where));
    pn_device_label(where, dev, sizeof dev);
    pn_model *m = NULL;
    rc = pn_comm_agree(s->comm, pn_model_load_part(&m, path, dev, members, s));
    int window = rc == PN_OK ? pn_model_gen_window(m) : -1;
    if (rc == PN_OK) rc = pn_comm_agree(s->comm, window < 0 ? -1 : PN_OK);
    pn_gen_stages *links = NULL;
    if (rc == PN_OK)
        rc = pn_gen_stages_create(&links, s->comm, pn_model_graph(m), s->plan,
                                  pn_model_output_node(m), 256 /* the widest beam */);
    if (rc == PN_OK) {
        pn_model_set_gen_hook(m, &(pn_gen_hook){pn_gen_stages_step, links});
        pn_comm_watch(s->comm, STALL_SECONDS, "generation");
        rc = run(ctx, m, grid->rank == 0);
        /* options are checked alike on every rank before any step (gen_create): such
         * a failure is agreed on and said once; one during the steps may leave peers
         * waiting */
        if (rc < 0) rc = pn_gen_stages_failed(links, rc, together);
    }
    pn_model_free(m);
    pn_gen_stages_free(links);
    return rc;
}

int generate_staged(const char *model, int device_request, generate_run_fn run, void *ctx)
{
    pn_job *job;
    if (pn_job_init(NULL, NULL, &job) < 0) return pn_cli_fail(pn_error_message());
    staged s = {0};
    bool together = true;
    int rc = run_staged(job, &s, model, device_request, run, ctx, &together);
    if (rc < 0 && !together) return pn_cli_fail_job(job, rc, false, 1); /* peers may wait */
    pn_plan_free(s.plan);
    pn_comm_free(s.comm);
    if (rc < 0) return pn_cli_fail_job(job, rc, true, 1);
    pn_job_finalize(job);
    return 0;
}
