/* Fuzz target: the training configuration. The input is a "train" object (JSON), a
 * line "%%", then `pipenet train` options one per line; they are read and applied
 * with the program's own code (cli/train_options.c), and the result goes where the
 * trainer sends it: layout checks, micro-batches, schedule, optimizer and its
 * learning rate along the run. */
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cli/train_options.h"
#include "fuzz_util.h"
#include "layers/params.h"
#include "optim/optimizer.h"
#include "plan/schedule.h"
#include "train/train_config.h"

enum { MAX_ARGS = 64, MAX_SCHEDULE_MICRO = 4096, MAX_SCHEDULE_STAGES = 64 };

static const char *const FILE_NAME = "fuzz.json";

/* Splits text (modified) at "\n%%\n" into the JSON and the option lines. */
static int split_args(char *text, char **json, char **argv)
{
    int argc = 0;
    argv[argc++] = "train";
    *json = text;
    char *sep = strstr(text, "\n%%\n");
    if (!sep) return argc;
    *sep = '\0';
    for (char *line = sep + 4; line && argc < MAX_ARGS - 1;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        argv[argc++] = line;
        line = next;
    }
    argv[argc] = NULL;
    return argc;
}

/* What the trainer does with the configuration before it reads data (trainer.c
 * check_layout, setup): replicas and stages are taken small, as a model would. */
static void derive(const pn_train_config *cfg, int replicas, int stages, long per_epoch)
{
    if (cfg->batch % replicas) return;
    int replica_rows = cfg->batch / replicas;
    bool interleaved = cfg->schedule == PN_SCHEDULE_INTERLEAVED;
    int v = pn_train_virtual_stages(cfg);
    int micro = cfg->micro_batches > 0 ? cfg->micro_batches
                : interleaved         ? pn_default_micro_batches_interleaved(replica_rows, stages)
                                      : pn_default_micro_batches(replica_rows, stages);
    if (micro < 1 || replica_rows % micro) return;
    if ((long)micro * v <= MAX_SCHEDULE_MICRO) {
        pn_schedule *s = NULL;
        pn_error_clear();
        int rc = pn_schedule_build_virtual(&s, (pn_schedule_kind)cfg->schedule, stages, v, micro);
        fz_check_status(rc, "pn_schedule_build_virtual");
        if (rc == 0) fz_check_status(pn_schedule_check(s), "pn_schedule_check");
        if (rc == 0) pn_schedule_bubble(s);
        pn_schedule_free(s);
    }
    long total_steps = cfg->steps > 0 ? cfg->steps : (long)cfg->epochs * per_epoch;
    pn_optimizer_config oc = cfg->optimizer;
    if (oc.schedule == PN_LR_COSINE && oc.total_steps == 0) oc.total_steps = total_steps;

    pn_params *params = NULL;
    pn_optimizer *opt = NULL;
    int w, b;
    int rc = pn_params_create(&params, pn_device_host());
    if (rc == 0) rc = pn_params_declare(params, "fc/w", 3, 2, (pn_init){PN_INIT_UNIFORM, 1}, true, &w);
    if (rc == 0) rc = pn_params_declare(params, "fc/b", 1, 2, (pn_init){PN_INIT_ZEROS, 0}, false, &b);
    if (rc == 0) rc = pn_params_finalize(params);
    if (rc == 0) {
        pn_error_clear();
        rc = pn_optimizer_create(&opt, &oc, params);
        fz_check_status(rc, "pn_optimizer_create");
    }
    if (rc == 0) rc = pn_params_init_values(params, cfg->seed);
    const long steps[] = {0, 1, oc.warmup_steps - 1, oc.warmup_steps, oc.total_steps,
                          total_steps - 1, total_steps, LONG_MAX};
    for (size_t k = 0; rc == 0 && k < sizeof steps / sizeof *steps; k++) {
        double lr = pn_optimizer_lr(&oc, steps[k]);
        if (!(lr >= 0) || !isfinite(lr)) {
            fprintf(stderr, "fuzz: learning rate %g at step %ld\n", lr, steps[k]);
            abort();
        }
    }
    for (long step = 0; rc == 0 && step < 2; step++) {
        double scale = pn_optimizer_clip_scale(&oc, 12.5);
        pn_error_clear();
        rc = pn_optimizer_step(opt, params, step == 0 ? 0 : total_steps - 1, scale);
        fz_check_status(rc, "pn_optimizer_step");
    }
    pn_optimizer_free(opt);
    pn_params_free(params);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1), *json, *argv[MAX_ARGS];
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    int argc = split_args(text, &json, argv);

    pn_train_config cfg;
    pn_train_config_default(&cfg);
    json_error_t err;
    json_t *train = json_loads(json, JSON_REJECT_DUPLICATES, &err);
    int rc = 0;
    if (train && json_is_object(train)) { /* the graph refuses a "train" of another kind */
        pn_error_clear();
        rc = pn_train_config_from_json(train, FILE_NAME, &cfg);
        fz_check_status(rc, "pn_train_config_from_json");
    }
    json_decref(train);
    pn_train_overrides o;
    memset(&o, 0, sizeof o);
    if (rc == 0 && pn_train_options_parse(argc, argv, &o) == 0) {
        pn_train_options_apply(&o, &cfg);
        int stages = cfg.stages > 0 ? cfg.stages : 1;
        if (stages <= MAX_SCHEDULE_STAGES) {
            derive(&cfg, 1, stages, 937);
            derive(&cfg, 2, stages, 1);
        }
    }
    free(text);
    return 0;
}
