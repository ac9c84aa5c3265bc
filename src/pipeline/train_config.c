/* Reading the "train" object of a model file. */
#include "pipeline/train_config.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "pipeline/schedule.h"

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
    cfg->device = pn_device_host();
    pn_optimizer_config_default(&cfg->optimizer, PN_OPT_SGD, 0.01);
}

static int field_error(const char *file, const char *key, const char *what)
{
    return pn_error_set(PN_ERR_INVALID, "%s: train.%s: %s", file, key, what);
}

static int read_count(const json_t *train, const char *file, const char *key, long min,
                      long *out)
{
    const json_t *v = json_object_get(train, key);
    if (!v) return PN_OK;
    if (!json_is_integer(v) || json_integer_value(v) < min) {
        char what[64];
        snprintf(what, sizeof what, "expected an integer >= %ld", min);
        return field_error(file, key, what);
    }
    *out = (long)json_integer_value(v);
    return PN_OK;
}

static int read_path(const json_t *train, const char *file, const char *key, char *out)
{
    const json_t *v = json_object_get(train, key);
    if (!v) return PN_OK;
    if (!json_is_string(v) || !json_string_length(v))
        return field_error(file, key, "expected a file path (a string)");
    if (json_string_length(v) >= PN_PATH_MAX) return field_error(file, key, "path too long");
    strcpy(out, json_string_value(v));
    return PN_OK;
}

int pn_train_config_from_json(const json_t *train, const char *file, pn_train_config *cfg)
{
    static const char *const keys[] = {"batch", "epochs", "steps", "seed", "data",
                                       "eval", "optimizer", NULL};
    if (!train) return PN_OK;
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)train, key, value) {
        bool known = false;
        (void)value;
        for (const char *const *k = keys; *k; k++) known |= !strcmp(*k, key);
        if (!known)
            return field_error(file, key, "unknown key (train takes batch, epochs, steps, "
                                          "seed, data, eval, optimizer)");
    }
    long batch = cfg->batch, epochs = cfg->epochs, steps = cfg->steps, seed = (long)cfg->seed;
    PN_TRY(read_count(train, file, "batch", 1, &batch));
    PN_TRY(read_count(train, file, "epochs", 1, &epochs));
    PN_TRY(read_count(train, file, "steps", 1, &steps));
    PN_TRY(read_count(train, file, "seed", 0, &seed));
    if (batch > 1 << 24) return field_error(file, "batch", "larger than 16777216");
    if (epochs > 1 << 24) return field_error(file, "epochs", "larger than 16777216");
    cfg->batch = (int)batch;
    cfg->epochs = (int)epochs;
    cfg->steps = steps;
    cfg->seed = (uint64_t)seed;
    PN_TRY(read_path(train, file, "data", cfg->data));
    PN_TRY(read_path(train, file, "eval", cfg->eval));
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
