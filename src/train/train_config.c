/* Reading the "train" object of a model file. */
#include "train/train_config.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/json_read.h"
#include "mpi/comm.h"
#include "plan/schedule.h"

void pn_train_config_default(pn_train_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->batch = 64;
    cfg->epochs = 1;
    cfg->seed = 1;
    cfg->log_every_s = 10.0;
    cfg->data_cache_mb = 1024;
    cfg->schedule = PN_SCHEDULE_1F1B;
    cfg->keep = 3;
    cfg->share_memory = true;
    cfg->stall_timeout_s = -1.0;
    cfg->device = pn_device_host();
    cfg->transport_request = PN_TRANSPORT_REQUEST_AUTO;
    pn_optimizer_config_default(&cfg->optimizer, PN_OPT_SGD, 0.01);
}

/* Copies the path at key into out: a string shorter than PN_PATH_MAX, relative to
 * the current directory as on the command line; "" is none, as --eval "" says (a
 * data file is then missing, which the trainer reports). */
static int read_path(const json_t *train, const pn_json_at *at, const char *key, char *out)
{
    const json_t *v = json_object_get(train, key);
    if (!v) return PN_OK;
    if (!json_is_string(v)) return pn_json_error_value(at, key, v, "a path (\"\": none)");
    const char *path = json_string_value(v);
    if (strlen(path) >= PN_PATH_MAX) {
        char found[48];
        snprintf(found, sizeof found, "a path of %zu characters", strlen(path));
        return pn_json_error(at, key, found, "a path shorter than %d characters", PN_PATH_MAX);
    }
    strcpy(out, path);
    return PN_OK;
}

/* The one list of the section's keys: the parser refuses any other, its message
 * lists these, and tests/test_cli.sh compares them with docs/training.md's table. */
const char *const pn_train_keys[] = {"batch", "epochs", "steps", "seed", "data", "eval",
                                     "eval_every", "recompute", "share_memory", "shard_optimizer",
                                     "schedule", "virtual_stages",
                                     "device", "transport", "precision", "snapshot_dir", "snapshot_every",
                                     "keep", "optimizer", NULL};

/* The snapshot keys, as --snapshot-dir, --snapshot-every and --keep take them. */
static int read_snapshots(const json_t *train, const pn_json_at *at, pn_train_config *cfg)
{
    long every, keep;
    PN_TRY(pn_json_int(train, at, "snapshot_every", false, 0, 1L << 40, cfg->snapshot_every,
                       &every));
    PN_TRY(pn_json_int(train, at, "keep", false, 1, 1 << 20, cfg->keep, &keep));
    cfg->snapshot_every = every;
    cfg->keep = (int)keep;
    return read_path(train, at, "snapshot_dir", cfg->snapshot_dir);
}

int pn_train_config_from_json(const json_t *train, const char *file, pn_train_config *cfg)
{
    if (!train) return PN_OK;
    pn_json_at top = pn_json_root(file), at = pn_json_field(&top, "train");
    PN_TRY(pn_json_known_keys(train, &at, pn_train_keys, NULL));
    long batch, epochs, steps, seed, eval_every;
    PN_TRY(pn_json_int(train, &at, "batch", false, 1, 1 << 24, cfg->batch, &batch));
    PN_TRY(pn_json_int(train, &at, "epochs", false, 1, 1 << 24, cfg->epochs, &epochs));
    PN_TRY(pn_json_int(train, &at, "steps", false, 1, LONG_MAX, cfg->steps, &steps));
    PN_TRY(pn_json_int(train, &at, "seed", false, 0, LONG_MAX, (long)cfg->seed, &seed));
    PN_TRY(pn_json_int(train, &at, "eval_every", false, 0, LONG_MAX, cfg->eval_every,
                       &eval_every));
    cfg->batch = (int)batch;
    cfg->epochs = (int)epochs;
    cfg->steps = steps;
    cfg->seed = (uint64_t)seed;
    cfg->eval_every = eval_every;
    PN_TRY(pn_json_bool(train, &at, "recompute", cfg->recompute, &cfg->recompute));
    PN_TRY(pn_json_bool(train, &at, "share_memory", cfg->share_memory, &cfg->share_memory));
    PN_TRY(pn_json_bool(train, &at, "shard_optimizer", cfg->shard_optimizer,
                        &cfg->shard_optimizer));
    PN_TRY(pn_json_choice_of(train, &at, "schedule", false, &pn_schedule_kinds, cfg->schedule,
                             &cfg->schedule));
    long virtual_stages;
    PN_TRY(pn_json_int(train, &at, "virtual_stages", false, 2, 1 << 16, cfg->virtual_stages,
                       &virtual_stages));
    cfg->virtual_stages = (int)virtual_stages; /* needs interleaved: the trainer checks */
    PN_TRY(pn_json_choice_of(train, &at, "device", false, &pn_device_requests,
                             cfg->device_request, &cfg->device_request));
    PN_TRY(pn_json_choice_of(train, &at, "transport", false, &pn_transport_requests,
                             cfg->transport_request, &cfg->transport_request));
    PN_TRY(pn_json_choice_of(train, &at, "precision", false, &pn_precisions, cfg->precision,
                             &cfg->precision));
    PN_TRY(read_path(train, &at, "data", cfg->data));
    PN_TRY(read_path(train, &at, "eval", cfg->eval));
    PN_TRY(read_snapshots(train, &at, cfg));
    const json_t *opt = json_object_get(train, "optimizer");
    if (opt) PN_TRY(pn_optimizer_config_from_json(opt, file, &cfg->optimizer));
    return PN_OK;
}

int pn_default_micro_batches(int replica_rows, int stages)
{
    int best = 1;
    for (int m = 1; m <= 4 * stages && m <= replica_rows; m++)
        if (replica_rows % m == 0) best = m;
    return best;
}

int pn_default_micro_batches_interleaved(int replica_rows, int stages)
{
    int best = stages; /* refused later, naming the batch, when it does not divide */
    for (int m = stages; m <= 4 * stages && m <= replica_rows; m += stages)
        if (replica_rows % m == 0) best = m;
    return best;
}

int pn_train_virtual_stages(const pn_train_config *cfg)
{
    if (cfg->virtual_stages > 0) return cfg->virtual_stages;
    return cfg->schedule == PN_SCHEDULE_INTERLEAVED ? 2 : 1;
}

int pn_train_schedule_chunks(const pn_train_config *cfg, int *v)
{
    *v = pn_train_virtual_stages(cfg);
    if (*v > 1 && cfg->schedule != PN_SCHEDULE_INTERLEAVED)
        return pn_error_set(PN_ERR_INVALID, "%d virtual stages need the interleaved schedule "
                            "(--schedule interleaved, or \"schedule\": \"interleaved\" in "
                            "\"train\"), not %s", *v,
                            pn_schedule_kind_name((pn_schedule_kind)cfg->schedule));
    return PN_OK;
}
