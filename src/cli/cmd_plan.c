/* `pipenet plan MODEL.json --stages P`: where each layer runs and what each stage
 * costs for a layout of D replicas, M micro-batches and a schedule, without running
 * anything (no MPI, no data). With --measure (or --layer-times FILE) the layers are
 * timed on this machine (or the times read back), the partitioner balances those
 * times, and the step time, bubble and memory are predicted; under mpirun, --measure
 * also times the link between ranks 0 and 1 and how much slower the layout's ranks
 * train all at once than alone, and rank 0 alone prints. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "base/path.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "math/ops.h"
#include "mpi/comm.h"
#include "mpi/job.h"
#include "net/graph.h"
#include "plan/plan.h"
#include "plan/plan_measure.h"
#include "plan/plan_predict.h"
#include "plan/schedule.h"
#include "train/train_config.h"

static void usage(FILE *out)
{
    char schedules[128];
    pn_train_config d; /* the defaults, for [train.schedule, default] */
    pn_train_config_default(&d);
    fprintf(out,
            "usage: pipenet plan MODEL.json [options]\n"
            "\n"
            "Places the layers of MODEL.json on pipeline stages (from their \"stage\"\n"
            "attributes, or balanced by the partitioner when there are none) and prints\n"
            "per stage: layers, parameters, FLOPs per sample, activation memory at the\n"
            "schedule's peak, bytes sent and received per micro-batch, and the schedule's\n"
            "predicted bubble; then each stage's argument memory (values and gradients)\n"
            "with every one in its own block (`train --no-share-memory`) and as the\n"
            "activation memory planner shares them. Runs on one process; needs no MPI\n"
            "and no data.\n"
            "\n"
            "With --measure, also times every layer's forward and backward and one optimizer\n"
            "update on this machine (the whole model for one micro-batch of random inputs,\n"
            "median of --repeat steps after 3 warm-up steps), balances the stages by those\n"
            "times instead of FLOPs, and predicts per stage its time per micro-batch, link\n"
            "transfers, update and memory (parameters, gradients, optimizer slots,\n"
            "activations in flight), and the step: every stage's list of passes run with\n"
            "those times, the link's, and its update, ranks that outnumber the cores\n"
            "sharing them; with its bubble. Under `mpirun -np 2` (or more) it also times\n"
            "the link between ranks 0 and 1 and how much slower the layout's ranks train\n"
            "all at once than alone (run it with as many ranks as the layout has).\n"
            "--save-times FILE keeps the times; `pipenet train --layer-times FILE` and\n"
            "`pipenet plan --layer-times FILE` balance (and predict) by them.\n"
            "\n"
            "options:\n"
            "  --stages P         pipeline stages          [the \"stage\" attributes, else 1]\n"
            "  --replicas D       data-parallel copies of the pipeline                 [1]\n"
            "  --micro-batches M  micro-batches per step and replica  [as `pipenet train`:\n"
            "                     the largest divisor of B / D up to 4 P]\n"
            "  --schedule NAME    %-32s[train.schedule, %s]\n"
            "  --virtual-stages V with --schedule interleaved: cut the model into P x V\n"
            "                     chunks, chunk c on stage c mod P (V >= 2; M a multiple\n"
            "                     of P)                            [train.virtual_stages, 2]\n"
            "  --batch B          global batch; B / (D M) samples per micro-batch\n"
            "                                                          [train.batch, 64]\n"
            "  --measure          time the layers (and under mpirun the link and the\n"
            "                     ranks' sharing) here\n"
            "  --layer-times FILE balance and predict by times saved earlier\n"
            "  --save-times FILE  with --measure: write the times to FILE (JSON; not the\n"
            "                     model file, nor a directory)\n"
            "  --threads N        with --measure: BLAS threads                         [1]\n"
            "  --repeat N         with --measure: timed steps (medians)               [11]\n"
            "  --shard-optimizer  opt slots as --shard-optimizer keeps them: the dense\n"
            "                     parameters' divided by D        [train.shard_optimizer]\n"
            "  --precision P      the links' bytes and the planned arguments in P (fp32\n"
            "                     or bf16; --measure times fp32)  [train.precision, %s]\n"
            "  --json             print the plan as JSON instead of tables\n"
            "  -h, --help         this text\n",
            pn_choice_list(&pn_schedule_kinds, schedules, sizeof schedules),
            pn_schedule_kind_name((pn_schedule_kind)d.schedule),
            pn_choice_name(&pn_precisions, d.precision));
}

enum { OPT_STAGES = 256, OPT_REPLICAS, OPT_MICRO, OPT_SCHEDULE, OPT_BATCH, OPT_MEASURE,
       OPT_TIMES, OPT_SAVE, OPT_THREADS, OPT_REPEAT, OPT_JSON, OPT_VIRTUAL,
       OPT_SHARD_OPT, OPT_PRECISION };

static const struct option longopts[] = {
    {"stages", required_argument, NULL, OPT_STAGES},
    {"replicas", required_argument, NULL, OPT_REPLICAS},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"virtual-stages", required_argument, NULL, OPT_VIRTUAL},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"measure", no_argument, NULL, OPT_MEASURE},
    {"layer-times", required_argument, NULL, OPT_TIMES},
    {"save-times", required_argument, NULL, OPT_SAVE},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"json", no_argument, NULL, OPT_JSON},
    {"shard-optimizer", no_argument, NULL, OPT_SHARD_OPT},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

typedef struct plan_options {
    int stages;    /* 0: from the attributes */
    int replicas;
    int micro;     /* 0: chosen like the trainer does */
    int batch;     /* 0: from the model */
    int schedule;  /* pn_schedule_kind; -1: the model's train.schedule, else 1f1b */
    int virtual_stages; /* 0: the model's train.virtual_stages, else 2 under
                           interleaved, 1 otherwise */
    bool measure, json, shard_optimizer;
    int precision; /* pn_precision; -1: the model's train.precision */
    int threads;   /* 0: 1 */
    int repeat;
    char times[PN_PATH_MAX], save[PN_PATH_MAX];
} plan_options;

/* Parses argv; returns 0, 1 for --help, -1 on misuse (already reported). */
static int parse_options(int argc, char **argv, plan_options *o)
{
    int c, rc = 0, kind;
    pn_opt_quiet_unless_first_rank();
    optind = 1;
    while (rc == 0 && (c = pn_opt_next(argc, argv, longopts)) != -1) {
        switch (c) {
        case OPT_STAGES: rc = pn_opt_int("stages", optarg, 1, 1 << 16, &o->stages); break;
        case OPT_REPLICAS: rc = pn_opt_int("replicas", optarg, 1, 1 << 20, &o->replicas); break;
        case OPT_MICRO: rc = pn_opt_int("micro-batches", optarg, 1, 1 << 20, &o->micro); break;
        case OPT_BATCH: rc = pn_opt_int("batch", optarg, 1, 1 << 24, &o->batch); break;
        case OPT_SCHEDULE:
            if (pn_opt_choice("schedule", &pn_schedule_kinds, optarg, &kind) < 0) return -1;
            o->schedule = kind;
            break;
        case OPT_VIRTUAL:
            rc = pn_opt_int("virtual-stages", optarg, 1, 1 << 16, &o->virtual_stages);
            break;
        case OPT_MEASURE: o->measure = true; break;
        case OPT_JSON: o->json = true; break;
        case OPT_SHARD_OPT: o->shard_optimizer = true; break;
        case OPT_PRECISION:
            rc = pn_opt_choice("precision", &pn_precisions, optarg, &o->precision);
            break;
        case OPT_TIMES: rc = pn_opt_path("layer-times", optarg, o->times, PN_PATH_MAX); break;
        case OPT_SAVE: rc = pn_opt_path("save-times", optarg, o->save, PN_PATH_MAX); break;
        case OPT_THREADS: rc = pn_opt_int("threads", optarg, 1, 4096, &o->threads); break;
        case OPT_REPEAT: rc = pn_opt_int("repeat", optarg, 1, 100000, &o->repeat); break;
        case 'h': return 1;
        default: return -1; /* pn_opt_next said why */
        }
    }
    if (rc == 0 && o->measure && o->times[0])
        rc = pn_opt_report("--measure and --layer-times: give one (measure now, or read "
                           "times measured before)");
    if (rc == 0 && o->virtual_stages && o->schedule >= 0 &&
        o->schedule != PN_SCHEDULE_INTERLEAVED)
        rc = pn_opt_report("--virtual-stages needs --schedule interleaved");
    if (rc == 0 && !o->measure && (o->save[0] || o->threads || o->repeat))
        rc = pn_opt_report("--save-times, --threads and --repeat need --measure");
    return rc;
}

/* Reads the model's train section into cfg and fills in what the command line left
 * to it: the schedule and V (as `pipenet train` would run them). */
static int resolve_schedule(const pn_graph *g, const char *path, plan_options *o,
                            pn_train_config *cfg)
{
    pn_train_config_default(cfg);
    PN_TRY(pn_train_config_from_json(pn_graph_train_spec(g), path, cfg));
    if (o->schedule >= 0) cfg->schedule = o->schedule;
    if (o->virtual_stages) cfg->virtual_stages = o->virtual_stages;
    o->schedule = cfg->schedule;
    return pn_train_schedule_chunks(cfg, &o->virtual_stages);
}

/* Fills in the batch and M; fails when B / (D M) is not a whole number, naming
 * where B came from. */
static int resolve_layout(const pn_graph *g, const char *path, int stages, plan_options *o,
                          pn_train_config *cfg)
{
    char from[64 + PN_PATH_MAX];
    snprintf(from, sizeof from, "--batch");
    if (!o->batch) {
        o->batch = cfg->batch;
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
    if (!o->micro)
        o->micro = o->schedule == PN_SCHEDULE_INTERLEAVED
                       ? pn_default_micro_batches_interleaved(o->batch / o->replicas, stages)
                       : pn_default_micro_batches(o->batch / o->replicas, stages);
    long parts = (long)o->replicas * o->micro;
    if (o->batch % parts)
        return pn_error_set(PN_ERR_INVALID,
                            "the batch %d (%s) does not split into %d replica%s x %d "
                            "micro-batches (%d / %ld is not a whole number of samples)",
                            o->batch, from, o->replicas, o->replicas == 1 ? "" : "s", o->micro,
                            o->batch, parts);
    return PN_OK;
}

/* Optimizer slots per parameter (what the update keeps beside the values). */
static int optimizer_slots(pn_opt_kind kind)
{
    return kind == PN_OPT_SGD ? 0 : kind == PN_OPT_MOMENTUM ? 1 : 2;
}

/* The times of --layer-times, or measured now: the link under mpirun on every rank,
 * the layers on rank 0 alone, then how the layout's `ranks` ranks share the
 * machine (pn_plan_measure_job) on as many of the job's; *t stays NULL but on
 * rank 0. */
static int get_times(const pn_graph *g, const plan_options *o, const pn_train_config *cfg,
                     int micro_batch, int ranks, pn_comm *comm, pn_plan_times **t)
{
    *t = NULL;
    if (o->times[0]) return pn_plan_times_load(t, g, o->times);
    PN_TRY(pn_plan_times_create(t, g));
    bool root = pn_comm_grid(comm)->rank == 0;
    int threads = o->threads ? o->threads : 1;
    pn_math_set_threads(threads);
    pn_measure_options mo = {.micro_batch = micro_batch, .warmup = 3,
                             .repetitions = o->repeat ? o->repeat : 11, .threads = threads,
                             .seed = cfg->seed, .optimizer = &cfg->optimizer};
    int rc = pn_plan_measure_job(*t, g, &mo, comm, ranks);
    if (!root) {
        pn_plan_times_free(*t);
        *t = NULL;
    }
    return rc;
}

/* Prints the plan (tables or JSON) and, with times, its prediction. */
static int report(const pn_plan *plan, const pn_graph *g, const pn_schedule *sched,
                  const plan_options *o, const pn_train_config *cfg, const pn_plan_times *t)
{
    int mb = o->batch / (o->replicas * o->micro);
    pn_plan_prediction pr = {0};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (t)
        PN_TRY(pn_plan_predict(&pr, plan, g, sched, t, o->replicas, mb,
                               optimizer_slots(cfg->optimizer.kind), t->threads,
                               cores > 0 ? (int)cores : 1));
    if (t && (o->shard_optimizer || cfg->shard_optimizer))
        pn_plan_predict_shard_slots(&pr, plan, g, optimizer_slots(cfg->optimizer.kind));
    int rc = PN_OK;
    if (o->json) {
        json_t *j = pn_plan_json(plan, g, sched, o->replicas, mb, t ? &pr : NULL, t);
        if (!j || json_dumpf(j, stdout, JSON_INDENT(1) | JSON_PRESERVE_ORDER |
                                            JSON_REAL_PRECISION(9)) < 0)
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory writing the plan as JSON");
        else
            fputc('\n', stdout);
        json_decref(j);
    } else {
        pn_plan_print(plan, g, sched, o->replicas, mb, stdout);
        rc = pn_plan_print_arg_memory(plan, g, sched, mb, stdout);
        pn_plan_print_row_sparse(plan, g, optimizer_slots(cfg->optimizer.kind), o->replicas,
                                 stdout);
        if (t) pn_plan_print_prediction(&pr, plan, g, t, stdout);
    }
    if (rc == PN_OK && t && o->save[0]) rc = pn_plan_times_save(t, g, o->save);
    pn_plan_prediction_release(&pr);
    return rc;
}

/* Places, measures or reads the times when asked, places again by them, reports. */
static int plan_model(const char *path, plan_options *o, pn_comm *comm)
{
    pn_graph *g = NULL;
    pn_plan *plan = NULL;
    pn_schedule *sched = NULL;
    pn_plan_times *t = NULL;
    double *layer_s = NULL;
    pn_train_config cfg;
    int rc = pn_graph_load(&g, path);
    if (rc == PN_OK) rc = resolve_schedule(g, path, o, &cfg);
    if (rc == PN_OK) rc = pn_plan_build_virtual(&plan, g, o->stages, o->virtual_stages, NULL);
    if (rc == PN_OK) rc = resolve_layout(g, path, plan->stages, o, &cfg);
    if (rc == PN_OK) rc = pn_graph_check_batch(g, o->batch / o->replicas); /* an evaluation's */
    if (rc == PN_OK && (o->measure || o->times[0]))
        rc = get_times(g, o, &cfg, o->batch / (o->replicas * o->micro),
                       plan->stages * o->replicas, comm, &t);
    if (rc == PN_OK && comm && pn_comm_grid(comm)->rank != 0) goto done; /* rank 0 reports */
    if (rc == PN_OK && t) {
        if (!(layer_s = malloc((size_t)g->n_nodes * sizeof *layer_s))) {
            rc = pn_error_set(PN_ERR_NOMEM, "out of memory");
        } else {
            pn_plan_times_layer_sum(t, layer_s);
            pn_plan_free(plan);
            plan = NULL;
            rc = pn_plan_build_virtual(&plan, g, o->stages, o->virtual_stages, layer_s);
        }
    }
    if (rc == PN_OK)
        rc = pn_schedule_build_virtual(&sched, o->schedule, plan->stages, plan->virtual_stages,
                                       o->micro);
    if (rc == PN_OK)
        pn_plan_set_precision(plan, (pn_precision)(o->precision >= 0 ? o->precision
                                                                     : cfg.precision));
    if (rc == PN_OK) rc = report(plan, g, sched, o, &cfg, t);
done:
    free(layer_s);
    pn_plan_times_free(t);
    pn_schedule_free(sched);
    pn_plan_free(plan);
    pn_graph_free(g);
    return rc;
}

int pn_cmd_plan(int argc, char **argv)
{
    plan_options o = {.replicas = 1, .schedule = -1, .precision = -1};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return PN_EXIT_USAGE;
    const char *path;
    if (pn_opt_model_argument(argc, argv, "plan", usage, &path)) return PN_EXIT_USAGE;
    if (!o.measure) {
        int rc = plan_model(path, &o, NULL);
        return rc < 0 ? pn_cli_fail(pn_error_message()) : 0;
    }
    /* --measure: every rank of the job takes part in the link probe and the sharing
     * probe, rank 0 alone in the layers' times and the report. */
    pn_job *job;
    pn_comm *comm = NULL;
    if (pn_job_init(NULL, NULL, &job) < 0) return pn_cli_fail(pn_error_message());
    /* rank 0 alone writes the times: its view of the path decides, before measuring */
    const pn_named_path model = {path, "the model file"};
    bool root = pn_job_rank(job) == 0;
    int rc = pn_job_agree_root(
        job, root && o.save[0] ? pn_path_check_output("--save-times", o.save, &model, 1, true)
                               : PN_OK);
    if (rc < 0) {
        if (rc != PN_ERR_PEER) pn_cli_fail(pn_error_message());
        pn_job_finalize(job);
        return rc == PN_ERR_MPI ? PN_EXIT_ERROR : PN_EXIT_USAGE;
    }
    rc = pn_comm_create(&comm, job, 1);
    /* A watched wait naps between polls: ranks waiting on rank 0's measurement must
     * leave the cores to it (an unwatched wait is MPI's own, which spins). */
    if (rc == PN_OK) pn_comm_watch(comm, 3600.0, "pipenet plan --measure");
    if (rc == PN_OK) rc = plan_model(path, &o, comm);
    if (comm) rc = pn_comm_agree(comm, rc);
    if (rc < 0 && rc != PN_ERR_PEER) pn_cli_fail(pn_error_message());
    pn_comm_free(comm);
    pn_job_finalize(job);
    return rc < 0 ? 1 : 0;
}
