/* `pipenet train`'s options (train_options.h): the table, the parser with a message
 * naming the option for every bad value, applying what was given, and the check of
 * the outputs against the inputs. */
#include "cli/train_options.h"

#include <getopt.h>
#include <string.h>

#include "base/error.h"
#include "base/path.h"
#include "cli/options.h"
#include "io/snapshot_dir.h"
#include "io/snapshot_lock.h"
#include "mpi/comm.h"
#include "optim/optimizer.h"
#include "plan/schedule.h"

enum { OPT_DATA = 256, OPT_EVAL, OPT_EPOCHS, OPT_STEPS, OPT_BATCH, OPT_LR, OPT_SEED,
       OPT_METRICS, OPT_THREADS, OPT_LOG_EVERY, OPT_DATA_CACHE, OPT_STAGES, OPT_MICRO,
       OPT_SCHEDULE, OPT_DETERMINISTIC, OPT_SNAPSHOT_DIR, OPT_SNAPSHOT_EVERY, OPT_KEEP,
       OPT_RESUME, OPT_RESUME_OVERRIDE, OPT_STALL_TIMEOUT, OPT_EVAL_EVERY, OPT_TRACE,
       OPT_LAYER_TIMES, OPT_RECOMPUTE, OPT_SHARD_OPT, OPT_VIRTUAL, OPT_DEVICE, OPT_TRANSPORT,
       OPT_NO_SHARE, OPT_PRECISION, N_OPTS };
_Static_assert(N_OPTS - OPT_DATA <= PN_TRAIN_OPT_MAX, "pn_train_overrides.given is too small");

#define GIVEN(opt) o->given[(opt) - OPT_DATA]

static const struct option longopts[] = {
    {"data", required_argument, NULL, OPT_DATA},
    {"eval", required_argument, NULL, OPT_EVAL},
    {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
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
    {"virtual-stages", required_argument, NULL, OPT_VIRTUAL},
    {"deterministic", no_argument, NULL, OPT_DETERMINISTIC},
    {"recompute", no_argument, NULL, OPT_RECOMPUTE},
    {"shard-optimizer", no_argument, NULL, OPT_SHARD_OPT},
    {"no-share-memory", no_argument, NULL, OPT_NO_SHARE},
    {"snapshot-dir", required_argument, NULL, OPT_SNAPSHOT_DIR},
    {"snapshot-every", required_argument, NULL, OPT_SNAPSHOT_EVERY},
    {"keep", required_argument, NULL, OPT_KEEP},
    {"resume", required_argument, NULL, OPT_RESUME},
    {"resume-override", no_argument, NULL, OPT_RESUME_OVERRIDE},
    {"stall-timeout", required_argument, NULL, OPT_STALL_TIMEOUT},
    {"trace", required_argument, NULL, OPT_TRACE},
    {"layer-times", required_argument, NULL, OPT_LAYER_TIMES},
    {"device", required_argument, NULL, OPT_DEVICE},
    {"transport", required_argument, NULL, OPT_TRANSPORT},
    {"precision", required_argument, NULL, OPT_PRECISION},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int pn_train_options_parse(int argc, char **argv, pn_train_overrides *o)
{
    pn_train_config *v = &o->v;
    int c, rc = 0;
    optind = 0; /* glibc starts over, even after a parse that stopped inside "-hh" */
    pn_opt_quiet_unless_first_rank();
    while (rc == 0 && (c = pn_opt_next(argc, argv, longopts)) != -1) {
        switch (c) {
        case OPT_DATA: rc = pn_opt_path("data", optarg, v->data, PN_PATH_MAX); break;
        case OPT_EVAL: rc = pn_opt_path("eval", optarg, v->eval, PN_PATH_MAX); break;
        case OPT_EVAL_EVERY:
            rc = pn_opt_long("eval-every", optarg, 0, 1L << 40, &v->eval_every);
            break;
        case OPT_METRICS: rc = pn_opt_path("metrics", optarg, v->metrics, PN_PATH_MAX); break;
        case OPT_TRACE: rc = pn_opt_path("trace", optarg, v->trace, PN_PATH_MAX); break;
        case OPT_LAYER_TIMES:
            rc = pn_opt_path("layer-times", optarg, v->layer_times, PN_PATH_MAX);
            break;
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
            rc = pn_opt_choice("schedule", &pn_schedule_kinds, optarg, &v->schedule);
            break;
        case OPT_VIRTUAL:
            rc = pn_opt_int("virtual-stages", optarg, 1, 1 << 16, &v->virtual_stages);
            break;
        case OPT_DEVICE:
            rc = pn_opt_choice("device", &pn_device_requests, optarg, &v->device_request);
            break;
        case OPT_TRANSPORT:
            rc = pn_opt_choice("transport", &pn_transport_requests, optarg, &v->transport_request);
            break;
        case OPT_PRECISION:
            rc = pn_opt_choice("precision", &pn_precisions, optarg, &v->precision);
            break;
        case OPT_DETERMINISTIC: v->deterministic = true; break;
        case OPT_RECOMPUTE: v->recompute = true; break;
        case OPT_SHARD_OPT: v->shard_optimizer = true; break;
        case OPT_NO_SHARE: v->share_memory = false; break;
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
        default: return -1; /* pn_opt_next said why */
        }
        if (c >= OPT_DATA && c < N_OPTS) GIVEN(c) = true;
    }
    if (rc == 0 && GIVEN(OPT_VIRTUAL) && GIVEN(OPT_SCHEDULE) &&
        v->schedule != PN_SCHEDULE_INTERLEAVED)
        rc = pn_opt_report("--virtual-stages: only with --schedule interleaved (got --schedule "
                           "%s)", pn_schedule_kind_name((pn_schedule_kind)v->schedule));
    if (rc == 0 && GIVEN(OPT_RESUME_OVERRIDE) && !GIVEN(OPT_RESUME))
        rc = pn_opt_report("--resume-override: only with --resume (it lets a resume change "
                           "the seed, the batch or the model)");
    return rc;
}

void pn_train_options_apply(const pn_train_overrides *o, pn_train_config *cfg)
{
    const pn_train_config *v = &o->v;
    if (GIVEN(OPT_DATA)) strcpy(cfg->data, v->data);
    if (GIVEN(OPT_EVAL)) strcpy(cfg->eval, v->eval);
    if (GIVEN(OPT_EVAL_EVERY)) cfg->eval_every = v->eval_every;
    if (GIVEN(OPT_METRICS)) strcpy(cfg->metrics, v->metrics);
    if (GIVEN(OPT_TRACE)) strcpy(cfg->trace, v->trace);
    if (GIVEN(OPT_LAYER_TIMES)) strcpy(cfg->layer_times, v->layer_times);
    /* --epochs on the command line means passes, even when the model's file sets
     * train.steps (which would otherwise win); --steps beside it still wins. */
    if (GIVEN(OPT_EPOCHS)) cfg->epochs = v->epochs, cfg->steps = 0;
    if (GIVEN(OPT_STEPS)) cfg->steps = v->steps;
    if (GIVEN(OPT_BATCH)) cfg->batch = v->batch, cfg->batch_given = true;
    if (GIVEN(OPT_LR)) cfg->optimizer.lr = v->optimizer.lr;
    if (GIVEN(OPT_SEED)) cfg->seed = v->seed, cfg->seed_given = true;
    if (GIVEN(OPT_THREADS)) cfg->threads = v->threads;
    if (GIVEN(OPT_LOG_EVERY)) cfg->log_every_s = v->log_every_s;
    if (GIVEN(OPT_DATA_CACHE)) cfg->data_cache_mb = v->data_cache_mb;
    if (GIVEN(OPT_STAGES)) cfg->stages = v->stages;
    if (GIVEN(OPT_MICRO)) cfg->micro_batches = v->micro_batches;
    if (GIVEN(OPT_SCHEDULE)) cfg->schedule = v->schedule;
    if (GIVEN(OPT_VIRTUAL)) cfg->virtual_stages = v->virtual_stages;
    if (GIVEN(OPT_DETERMINISTIC)) cfg->deterministic = true;
    if (GIVEN(OPT_DEVICE)) cfg->device_request = v->device_request;
    if (GIVEN(OPT_TRANSPORT)) cfg->transport_request = v->transport_request;
    if (GIVEN(OPT_PRECISION)) cfg->precision = v->precision;
    if (GIVEN(OPT_RECOMPUTE)) cfg->recompute = true;
    if (GIVEN(OPT_SHARD_OPT)) cfg->shard_optimizer = true;
    if (GIVEN(OPT_NO_SHARE)) cfg->share_memory = false;
    if (GIVEN(OPT_SNAPSHOT_DIR)) strcpy(cfg->snapshot_dir, v->snapshot_dir);
    if (GIVEN(OPT_SNAPSHOT_EVERY)) cfg->snapshot_every = v->snapshot_every;
    if (GIVEN(OPT_KEEP)) cfg->keep = v->keep;
    if (GIVEN(OPT_RESUME)) strcpy(cfg->resume, v->resume);
    if (GIVEN(OPT_RESUME_OVERRIDE)) cfg->resume_override = true;
    if (GIVEN(OPT_STALL_TIMEOUT)) cfg->stall_timeout_s = v->stall_timeout_s;
}

int pn_train_outputs_check(const pn_train_config *cfg, const char *model)
{
    const char *resumed = strcmp(cfg->resume, "auto") ? cfg->resume : NULL;
    const pn_named_path inputs[] = {
        {model, "the model file"},
        {cfg->data, "the training data file"},
        {cfg->eval, "the evaluation data file"},
        {cfg->layer_times, "the --layer-times file"},
        {resumed, "the snapshot resumed from"},
        {cfg->snapshot_dir, "the snapshot directory"},
        {cfg->metrics, "the --metrics file"}, /* for --trace */
    };
    const struct {
        const char *option, *path;
        int inputs; /* how many of the list above it must not be */
    } outputs[] = {{"--metrics", cfg->metrics, 6}, {"--trace", cfg->trace, 7}};
    for (int i = 0; i < 2; i++) {
        const char *option = outputs[i].option, *path = outputs[i].path;
        if (!path[0]) continue;
        PN_TRY(pn_path_check_output(option, path, inputs, outputs[i].inputs, true));
        /* the run's own files there: its snapshots (written, pruned) and its lock */
        if (pn_path_in_dir(path, cfg->snapshot_dir, PN_SNAPSHOT_PREFIX) ||
            pn_path_in_dir(path, cfg->snapshot_dir, PN_SNAPSHOT_LOCK_NAME))
            return pn_error_set(PN_ERR_INVALID, "%s '%s' is a name the run uses for its own "
                                "files in the snapshot directory %s (%s*, %s); choose another "
                                "name", option, path, cfg->snapshot_dir, PN_SNAPSHOT_PREFIX,
                                PN_SNAPSHOT_LOCK_NAME);
    }
    return PN_OK;
}

int pn_train_settings_check(const pn_train_overrides *o, const pn_train_config *cfg,
                            const char *model)
{
    static const char where[] = "give --snapshot-dir DIR, or \"snapshot_dir\" in the model's "
                                "train section";
    if (!cfg->snapshot_dir[0] && !strcmp(cfg->resume, "auto"))
        return pn_error_set(PN_ERR_INVALID, "--resume auto: no snapshot directory to look in (%s)",
                            where);
    if (!cfg->snapshot_dir[0] && (GIVEN(OPT_SNAPSHOT_EVERY) || GIVEN(OPT_KEEP)))
        return pn_error_set(PN_ERR_INVALID, "--%s: no snapshot directory to write to (%s)",
                            GIVEN(OPT_SNAPSHOT_EVERY) ? "snapshot-every" : "keep", where);
    return pn_train_outputs_check(cfg, model);
}
