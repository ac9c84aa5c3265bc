/* `pipenet plan MODEL.json --stages P`: where each layer runs and what each stage
 * costs for a layout of D replicas, M micro-batches and a schedule, without running
 * anything (no MPI, no data). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "pipeline/graph.h"
#include "pipeline/plan.h"
#include "pipeline/schedule.h"
#include "pipeline/train_config.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet plan MODEL.json [options]\n"
            "\n"
            "Places the layers of MODEL.json on pipeline stages (from their \"stage\"\n"
            "attributes, or balanced by the partitioner when there are none) and prints\n"
            "per stage: layers, parameters, FLOPs per sample, activation memory at the\n"
            "schedule's peak, bytes sent and received per micro-batch, and the schedule's\n"
            "predicted bubble. Runs on one process; needs no MPI and no data.\n"
            "\n"
            "options:\n"
            "  --stages P         pipeline stages          [the \"stage\" attributes, else 1]\n"
            "  --replicas D       data-parallel copies of the pipeline                 [1]\n"
            "  --micro-batches M  micro-batches per step and replica  [as `pipenet train`:\n"
            "                     the largest divisor of B / D up to 4 P]\n"
            "  --schedule NAME    gpipe or 1f1b                                     [1f1b]\n"
            "  --batch B          global batch; B / (D M) samples per micro-batch\n"
            "                                                          [train.batch, 64]\n"
            "  -h, --help         this text\n");
}

enum { OPT_STAGES = 256, OPT_REPLICAS, OPT_MICRO, OPT_SCHEDULE, OPT_BATCH };

static const struct option longopts[] = {
    {"stages", required_argument, NULL, OPT_STAGES},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct plan_options {
    int stages;    /* 0: from the attributes */
    int replicas;
    int micro;     /* 0: chosen like the trainer does */
    int batch;     /* 0: from the model */
    pn_schedule_kind schedule;
} plan_options;

/* Parses argv; returns 0, 1 for --help, -1 on misuse (already reported). */
static int parse_options(int argc, char **argv, plan_options *o)
{
    int c, rc = 0, kind;
    optind = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_STAGES: rc = pn_opt_int("stages", optarg, 1, 1 << 16, &o->stages); break;
        case OPT_REPLICAS: rc = pn_opt_int("replicas", optarg, 1, 1 << 20, &o->replicas); break;
        case OPT_MICRO: rc = pn_opt_int("micro-batches", optarg, 1, 1 << 20, &o->micro); break;
        case OPT_BATCH: rc = pn_opt_int("batch", optarg, 1, 1 << 24, &o->batch); break;
        case OPT_SCHEDULE:
            kind = pn_schedule_kind_from_name(optarg);
            if (kind < 0) {
                fprintf(stderr, "pipenet: error: --schedule: expected gpipe or 1f1b, got '%s'\n",
                        optarg);
                return -1;
            }
            o->schedule = (pn_schedule_kind)kind;
            break;
        case 'h': return 1;
        default: return -1; /* getopt printed why */
        }
    }
    return rc;
}

/* Fills in the batch and M; fails when B / (D M) is not a whole number, naming
 * where B came from. */
static int resolve_layout(const pn_graph *g, const char *path, int stages, plan_options *o)
{
    char from[64 + PN_PATH_MAX];
    snprintf(from, sizeof from, "--batch");
    if (!o->batch) {
        pn_train_config cfg;
        pn_train_config_default(&cfg);
        PN_TRY(pn_train_config_from_json(pn_graph_train_spec(g), path, &cfg));
        o->batch = cfg.batch;
        const json_t *train = pn_graph_train_spec(g);
        if (train && json_object_get(train, "batch"))
            snprintf(from, sizeof from, "train.batch in %s", path);
        else
            snprintf(from, sizeof from, "the default; set it with --batch");
    }
    if (o->batch % o->replicas)
        return pn_error_set(PN_ERR_INVALID,
                            "the batch %d (%s) does not split into %d replicas (choose a "
                            "batch that %d divides)",
                            o->batch, from, o->replicas, o->replicas);
    if (!o->micro) o->micro = pn_default_micro_batches(o->batch / o->replicas, stages);
    long parts = (long)o->replicas * o->micro;
    if (o->batch % parts)
        return pn_error_set(PN_ERR_INVALID,
                            "the batch %d (%s) does not split into %d replica%s x %d "
                            "micro-batches (%d / %ld is not a whole number of samples)",
                            o->batch, from, o->replicas, o->replicas == 1 ? "" : "s", o->micro,
                            o->batch, parts);
    return PN_OK;
}

int pn_cmd_plan(int argc, char **argv)
{
    plan_options o = {.replicas = 1, .schedule = PN_SCHEDULE_1F1B};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return 2;
    const char *path;
    if (pn_opt_model_argument(argc, argv, "plan", usage, &path)) return 2;
    pn_graph *g = NULL;
    pn_plan *plan = NULL;
    pn_schedule *sched = NULL;
    int rc = pn_graph_load(&g, path);
    if (rc == PN_OK) rc = pn_plan_build(&plan, g, o.stages);
    if (rc == PN_OK) rc = resolve_layout(g, path, plan->stages, &o);
    if (rc == PN_OK) rc = pn_graph_check_batch(g, o.batch / o.replicas); /* an evaluation's */
    if (rc == PN_OK) rc = pn_schedule_build(&sched, o.schedule, plan->stages, o.micro);
    if (rc == PN_OK)
        pn_plan_print(plan, g, sched, o.replicas, o.batch / (o.replicas * o.micro), stdout);
    pn_schedule_free(sched);
    pn_plan_free(plan);
    pn_graph_free(g);
    return rc < 0 ? pn_cli_fail(pn_error_message()) : 0;
}
