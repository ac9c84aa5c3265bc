/* `pipenet train MODEL.json`: training defaults from the model's "train" object,
 * overridden by options, then the trainer. */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "mpi/job.h"
#include "pipeline/graph.h"
#include "pipeline/optimizer.h"
#include "pipeline/schedule.h"
#include "pipeline/trainer.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet train MODEL.json [options]\n"
            "\n"
            "Trains the model described by MODEL.json. Defaults come from the model's\n"
            "\"train\" object; options override them.\n"
            "\n"
            "options:\n"
            "  --data FILE      training set (dataset HDF5)           [train.data]\n"
            "  --eval FILE      evaluated after every epoch           [train.eval]\n"
            "  --epochs N       passes over the training set          [train.epochs, 1]\n"
            "  --steps N        stop when the global step count reaches N (overrides\n"
            "                   --epochs)                             [train.steps]\n"
            "  --batch B        samples per step                      [train.batch, 64]\n"
            "  --lr X           base learning rate                    [train.optimizer.lr]\n"
            "  --seed S         seeds initialization, shuffling, dropout [train.seed, 1]\n"
            "  --metrics FILE   write JSON lines: one per step, one per evaluation\n"
            "  --threads N      BLAS threads per rank (default: $OPENBLAS_NUM_THREADS, else\n"
            "                   the node's cores divided among this job's ranks on it)\n"
            "  --log-every S    seconds between progress lines when not on a terminal [10]\n"
            "  --data-cache MB  read a dataset file into memory when it fits in MB [1024];\n"
            "                   0 reads every batch from the file\n"
            "\n"
            "pipeline and data parallelism (under mpirun or srun; D = ranks / P):\n"
            "  --stages P       pipeline stages (default: the layers' \"stage\" attributes, else 1)\n"
            "  --micro-batches M  micro-batches per step and replica (default: the largest\n"
            "                   divisor of the replica's batch up to 4 P)\n"
            "  --schedule S     gpipe or 1f1b [1f1b]\n"
            "\n"
            "snapshots (HDF5, one file per snapshot, layout independent):\n"
            "  --snapshot-dir DIR  write DIR/snapshot-<step>.h5 at the end, every\n"
            "                   --snapshot-every steps, and on SIGTERM or SIGUSR1 (then exit 3)\n"
            "  --snapshot-every N  steps between snapshots [0: end and signals only]\n"
            "  --keep K         snapshots kept in DIR [3]\n"
            "  --resume PATH    continue from a snapshot file, or `auto`: the newest valid\n"
            "                   one in --snapshot-dir (none yet: start at step 0). Any layout\n"
            "                   resumes any other's; the seed and batch are the snapshot's\n"
            "  --resume-override  resume even when --seed, --batch or the model's inputs and\n"
            "                   layers differ from the snapshot's (refused without it; warned)\n"
            "\n"
            "  --stall-timeout S  end the job when a rank waits S seconds on others during a\n"
            "                   step or an evaluation (a stalled rank); 0: never [max(20 s,\n"
            "                   20 x the median step time)]; given or not, at least 300 s\n"
            "                   until the first step is done\n"
            "  --deterministic  add gradients in a fixed tree over micro-batches of a fixed\n"
            "                   size: every layout with that size gives identical bits\n"
            "                   (M must be a power of two)\n"
            "  -h, --help       this text\n"
            "\n"
            "exit status: 0 finished; 1 error (snapshots already written are kept);\n"
            "2 wrong command line; 3 stopped early by SIGTERM or SIGUSR1 (resume to finish)\n");
}

enum { OPT_DATA = 256, OPT_EVAL, OPT_EPOCHS, OPT_STEPS, OPT_BATCH, OPT_LR, OPT_SEED,
       OPT_METRICS, OPT_THREADS, OPT_LOG_EVERY, OPT_DATA_CACHE, OPT_STAGES, OPT_MICRO,
       OPT_SCHEDULE, OPT_DETERMINISTIC, OPT_SNAPSHOT_DIR, OPT_SNAPSHOT_EVERY, OPT_KEEP,
       OPT_RESUME, OPT_RESUME_OVERRIDE, OPT_STALL_TIMEOUT, N_OPTS };

/* Option values, and which ones were given (they override the model's "train"). */
typedef struct overrides {
    pn_train_config v;
    bool given[N_OPTS];
} overrides;

static const struct option longopts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"eval", required_argument, NULL, OPT_EVAL},
    {"epochs", required_argument, NULL, OPT_EPOCHS},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"batch", required_argument, NULL, OPT_BATCH},
    {"lr", required_argument, NULL, OPT_LR},
    {"seed", required_argument, NULL, OPT_SEED},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"log-every", required_argument, NULL, OPT_LOG_EVERY},
    {"data-cache", required_argument, NULL, OPT_DATA_CACHE},
    {"stages", required_argument, NULL, OPT_STAGES},
    {"micro-batches", required_argument, NULL, OPT_MICRO},
    {"schedule", required_argument, NULL, OPT_SCHEDULE},
    {"deterministic", no_argument, NULL, OPT_DETERMINISTIC},
    {"snapshot-dir", required_argument, NULL, OPT_SNAPSHOT_DIR},
    {"snapshot-every", required_argument, NULL, OPT_SNAPSHOT_EVERY},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"resume-override", no_argument, NULL, OPT_RESUME_OVERRIDE},
    {"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* Parses argv; returns 0, 1 for --help, -1 on misuse (already reported). */
static int parse_options(int argc, char **argv, overrides *o)
{
    pn_train_config *v = &o->v;
    int c, rc = 0;
    optind = 1;
    pn_opt_quiet_unless_first_rank();
    while (rc == 0 && (c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_DATA: rc = pn_opt_path("data", optarg, v->data, PN_PATH_MAX); break;
        case OPT_EVAL: rc = pn_opt_path("eval", optarg, v->eval, PN_PATH_MAX); break;
        case OPT_METRICS: rc = pn_opt_path("metrics", optarg, v->metrics, PN_PATH_MAX); break;
        case OPT_EPOCHS: rc = pn_opt_int("epochs", optarg, 1, 1 << 24, &v->epochs); break;
        case OPT_STEPS: rc = pn_opt_long("steps", optarg, 1, 1L << 40, &v->steps); break;
        case OPT_BATCH: rc = pn_opt_int("batch", optarg, 1, 1 << 24, &v->batch); break;
        case OPT_LR: rc = pn_opt_double("lr", optarg, PN_LR_MIN, PN_LR_MAX, &v->optimizer.lr); break;
        case OPT_SEED: rc = pn_opt_u64("seed", optarg, &v->seed); break;
        case OPT_THREADS: rc = pn_opt_int("threads", optarg, 1, 4096, &v->threads); break;
        case OPT_LOG_EVERY:
            rc = pn_opt_double("log-every", optarg, 0.0, 1e9, &v->log_every_s);
            break;
        case OPT_DATA_CACHE:
            rc = pn_opt_long("data-cache", optarg, 0, 1L << 30, &v->data_cache_mb);
            break;
        case OPT_STAGES: rc = pn_opt_int("stages", optarg, 1, 1 << 16, &v->stages); break;
        case OPT_MICRO: rc = pn_opt_int("micro-batches", optarg, 1, 1 << 20, &v->micro_batches); break;
        case OPT_SCHEDULE:
            v->schedule = pn_schedule_kind_from_name(optarg);
            if (v->schedule < 0)
                rc = pn_opt_report("--schedule: expected gpipe or 1f1b, got '%s'", optarg);
            break;
        case OPT_DETERMINISTIC: v->deterministic = true; break;
        case OPT_SNAPSHOT_DIR:
            rc = pn_opt_path("snapshot-dir", optarg, v->snapshot_dir, PN_PATH_MAX);
            break;
        case OPT_SNAPSHOT_EVERY:
            rc = pn_opt_long("snapshot-every", optarg, 0, 1L << 40, &v->snapshot_every);
            break;
        case OPT_KEEP: rc = pn_opt_int("keep", optarg, 1, 1 << 20, &v->keep); break;
        case OPT_RESUME: rc = pn_opt_path("resume", optarg, v->resume, PN_PATH_MAX); break;
        case OPT_RESUME_OVERRIDE: v->resume_override = true; break;
        case OPT_STALL_TIMEOUT:
            rc = pn_opt_double("stall-timeout", optarg, 0.0, 1e9, &v->stall_timeout_s);
            break;
        case 'h': return 1;
        default: return -1; /* getopt printed why */
        }
        if (c >= OPT_DATA && c < N_OPTS) o->given[c] = true;
    }
    if (rc == 0 && o->given[OPT_RESUME_OVERRIDE] && !o->given[OPT_RESUME])
        rc = pn_opt_report("--resume-override: only with --resume (it lets a resume change "
                           "the seed, the batch or the model)");
    return rc;
}

static void apply(const overrides *o, pn_train_config *cfg)
{
    const pn_train_config *v = &o->v;
    if (o->given[OPT_DATA]) strcpy(cfg->data, v->data);
    if (o->given[OPT_EVAL]) strcpy(cfg->eval, v->eval);
    if (o->given[OPT_METRICS]) strcpy(cfg->metrics, v->metrics);
    if (o->given[OPT_EPOCHS]) cfg->epochs = v->epochs;
    if (o->given[OPT_STEPS]) cfg->steps = v->steps;
    if (o->given[OPT_BATCH]) cfg->batch = v->batch, cfg->batch_given = true;
    if (o->given[OPT_LR]) cfg->optimizer.lr = v->optimizer.lr;
    if (o->given[OPT_SEED]) cfg->seed = v->seed, cfg->seed_given = true;
    if (o->given[OPT_THREADS]) cfg->threads = v->threads;
    if (o->given[OPT_LOG_EVERY]) cfg->log_every_s = v->log_every_s;
    if (o->given[OPT_DATA_CACHE]) cfg->data_cache_mb = v->data_cache_mb;
    if (o->given[OPT_STAGES]) cfg->stages = v->stages;
    if (o->given[OPT_MICRO]) cfg->micro_batches = v->micro_batches;
    if (o->given[OPT_SCHEDULE]) cfg->schedule = v->schedule;
    if (o->given[OPT_DETERMINISTIC]) cfg->deterministic = true;
    if (o->given[OPT_SNAPSHOT_DIR]) strcpy(cfg->snapshot_dir, v->snapshot_dir);
    if (o->given[OPT_SNAPSHOT_EVERY]) cfg->snapshot_every = v->snapshot_every;
    if (o->given[OPT_KEEP]) cfg->keep = v->keep;
    if (o->given[OPT_RESUME]) strcpy(cfg->resume, v->resume);
    if (o->given[OPT_RESUME_OVERRIDE]) cfg->resume_override = true;
    if (o->given[OPT_STALL_TIMEOUT]) cfg->stall_timeout_s = v->stall_timeout_s;
}

/* Ends the job after a failure: the rank that owns the error prints it once. When
 * every rank knows of the failure (model, options, setup) they all leave cleanly;
 * otherwise peers may be waiting on this rank, so it aborts the job. */
static int fail_job(pn_job *job, int rc, bool together)
{
    if (rc != PN_ERR_PEER) {
        pn_cli_fail(pn_error_message());
        fflush(stderr);
        if (pn_job_size(job) > 1 && !together) pn_job_abort(job, 1);
    }
    pn_job_finalize(job);
    return PN_EXIT_ERROR;
}

int pn_cmd_train(int argc, char **argv)
{
    overrides o = {0};
    int parsed = parse_options(argc, argv, &o);
    if (parsed > 0) {
        usage(stdout);
        return 0;
    }
    if (parsed < 0) return 2;
    const char *path;
    if (pn_opt_model_argument(argc, argv, "train", usage, &path)) return 2;
    pn_job *job;
    if (pn_job_init(NULL, NULL, &job) < 0) return pn_cli_fail(pn_error_message());
    int rank = pn_job_rank(job);
    pn_graph *g;
    int rc = pn_graph_load(&g, path); /* the same file, so the same outcome on every rank */
    if (rc < 0) return fail_job(job, rank == 0 ? rc : PN_ERR_PEER, true);
    pn_train_config cfg;
    pn_train_config_default(&cfg);
    rc = pn_train_config_from_json(pn_graph_train_spec(g), path, &cfg);
    pn_train_result result = {.failed_together = 1};
    if (rc < 0 && rank != 0) rc = PN_ERR_PEER;
    if (rc == PN_OK) {
        apply(&o, &cfg);
        rc = pn_train(g, &cfg, job, NULL, &result);
        free(result.losses);
    }
    pn_graph_free(g);
    if (rc < 0) return fail_job(job, rc, result.failed_together);
    pn_job_finalize(job);
    return result.stopped_by_signal ? PN_EXIT_STOPPED : PN_EXIT_FINISHED;
}
