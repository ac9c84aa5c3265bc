/* pn_optimizer: configuration (defaults, JSON, checks), learning-rate schedules,
 * clipping factor, and the per-step update, which resolves this step's
 * hyper-parameters once and calls the fused pn_optimizer_update op on each
 * parameter's slice of the arena (weight decay only where the parameter decays). */
#include "optim/optimizer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/json_read.h"
#include "math/ops.h"
#include "optim/optimizer_shard.h"

struct pn_optimizer {
    pn_optimizer_config cfg;
    pn_params *params; /* the arena whose slots were added */
    int slot1, slot2;  /* slot handles, -1 when unused */
    pn_opt_shard *shard; /* --shard-optimizer: this replica's part of the slots, or NULL */
};

static const char *const kind_names[] = {"sgd", "momentum", "adam", "adamw"};
static const char *const schedule_names[] = {"constant", "step", "cosine"};
enum { N_KINDS = 4, N_SCHEDULES = 3 };

const char *pn_opt_kind_name(pn_opt_kind kind)
{
    return (int)kind >= 0 && (int)kind < N_KINDS ? kind_names[kind] : "?";
}

int pn_opt_kind_from_name(const char *name)
{
    for (int k = 0; k < N_KINDS; k++)
        if (!strcmp(name, kind_names[k])) return k;
    return -1;
}

void pn_optimizer_config_default(pn_optimizer_config *cfg, pn_opt_kind kind, double lr)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->kind = kind;
    cfg->lr = lr;
    cfg->momentum = 0.9;
    cfg->beta1 = 0.9;
    cfg->beta2 = 0.999;
    cfg->eps = 1e-8;
    cfg->schedule = PN_LR_CONSTANT;
    cfg->gamma = 0.1;
}

/* ---- JSON -------------------------------------------------------------------------- */

/* A key that the chosen type does not use is an error, not silently ignored. */
static int reject_unused(const json_t *obj, const pn_json_at *at, const char *key,
                         const char *kind, const char *users)
{
    const json_t *v = json_object_get(obj, key);
    return v ? pn_json_error_value(at, key, v, "no %s with %s (%s only)", key, kind, users)
             : PN_OK;
}

static int read_schedule(const json_t *obj, const pn_json_at *at, pn_optimizer_config *cfg)
{
    static const char *const keys[] = {"type",  "warmup_steps", "step_size", "gamma",
                                       "total_steps", "min_lr", NULL};
    PN_TRY(pn_json_known_keys(obj, at, keys, NULL));
    int type;
    PN_TRY(pn_json_choice(obj, at, "type", false, "a schedule", schedule_names, N_SCHEDULES,
                          PN_LR_CONSTANT, &type));
    cfg->schedule = (pn_lr_kind)type;
    const char *name = schedule_names[type];
    if (type != PN_LR_STEP) {
        PN_TRY(reject_unused(obj, at, "step_size", name, "the step schedule"));
        PN_TRY(reject_unused(obj, at, "gamma", name, "the step schedule"));
    }
    if (type != PN_LR_COSINE) {
        PN_TRY(reject_unused(obj, at, "total_steps", name, "the cosine schedule"));
        PN_TRY(reject_unused(obj, at, "min_lr", name, "the cosine schedule"));
    }
    PN_TRY(pn_json_int(obj, at, "warmup_steps", false, 0, (long)1e15, cfg->warmup_steps,
                       &cfg->warmup_steps));
    if (type == PN_LR_STEP) {
        PN_TRY(pn_json_int(obj, at, "step_size", true, 1, (long)1e15, 0, &cfg->step_size));
        PN_TRY(pn_json_number(obj, at, "gamma", false, 0.0, true, 1.0, false, cfg->gamma,
                              &cfg->gamma));
    }
    if (type == PN_LR_COSINE) {
        /* absent: 0, the run's length, filled in by the trainer */
        PN_TRY(pn_json_int(obj, at, "total_steps", false, 1, (long)1e15, 0, &cfg->total_steps));
        const json_t *total = json_object_get(obj, "total_steps");
        if (total && cfg->total_steps <= cfg->warmup_steps)
            return pn_json_error_value(at, "total_steps", total,
                                       "an integer > warmup_steps (%ld)", cfg->warmup_steps);
        PN_TRY(pn_json_number(obj, at, "min_lr", false, 0.0, false, cfg->lr, false, cfg->min_lr,
                              &cfg->min_lr));
    }
    return PN_OK;
}

int pn_optimizer_config_from_json(const json_t *obj, const char *file,
                                  pn_optimizer_config *cfg)
{
    static const char *const keys[] = {"type", "lr",           "momentum",  "nesterov",
                                       "beta1", "beta2",       "eps",       "weight_decay",
                                       "clip_norm", "schedule", NULL};
    pn_json_at top = pn_json_root(file), train = pn_json_field(&top, "train");
    pn_json_at at = pn_json_field(&train, "optimizer");
    if (!json_is_object(obj)) return pn_json_error_value(&at, NULL, obj, "an object");
    PN_TRY(pn_json_known_keys(obj, &at, keys, NULL));
    int kind;
    PN_TRY(pn_json_choice(obj, &at, "type", true, "an optimizer", kind_names, N_KINDS, 0, &kind));
    const char *name = kind_names[kind];
    if (kind != PN_OPT_MOMENTUM) {
        PN_TRY(reject_unused(obj, &at, "momentum", name, "momentum"));
        PN_TRY(reject_unused(obj, &at, "nesterov", name, "momentum"));
    }
    if (kind != PN_OPT_ADAM && kind != PN_OPT_ADAMW) {
        PN_TRY(reject_unused(obj, &at, "beta1", name, "adam, adamw"));
        PN_TRY(reject_unused(obj, &at, "beta2", name, "adam, adamw"));
        PN_TRY(reject_unused(obj, &at, "eps", name, "adam, adamw"));
    }
    pn_optimizer_config c;
    pn_optimizer_config_default(&c, (pn_opt_kind)kind, 0.0);
    PN_TRY(pn_json_number(obj, &at, "lr", true, PN_LR_MIN, false, PN_LR_MAX, false, 0.0, &c.lr));
    PN_TRY(pn_json_number(obj, &at, "momentum", false, 0.0, false, 1.0, true, c.momentum,
                          &c.momentum));
    PN_TRY(pn_json_bool(obj, &at, "nesterov", false, &c.nesterov));
    PN_TRY(pn_json_number(obj, &at, "beta1", false, 0.0, false, 1.0, true, c.beta1, &c.beta1));
    PN_TRY(pn_json_number(obj, &at, "beta2", false, 0.0, false, 1.0, true, c.beta2, &c.beta2));
    PN_TRY(pn_json_number(obj, &at, "eps", false, 0.0, true, INFINITY, false, c.eps, &c.eps));
    PN_TRY(pn_json_number(obj, &at, "weight_decay", false, 0.0, false, INFINITY, false,
                          c.weight_decay, &c.weight_decay));
    PN_TRY(pn_json_number(obj, &at, "clip_norm", false, 0.0, false, INFINITY, false, c.clip_norm,
                          &c.clip_norm));
    const json_t *schedule;
    PN_TRY(pn_json_object(obj, &at, "schedule", false, &schedule));
    if (schedule) {
        pn_json_at at_schedule = pn_json_field(&at, "schedule");
        PN_TRY(read_schedule(schedule, &at_schedule, &c));
    }
    *cfg = c;
    return PN_OK;
}

/* ---- checks of a config however it was built ---------------------------------------- */

static int config_error(const char *field, const char *fmt, double got)
{
    return pn_error_set(PN_ERR_INVALID, "optimizer: %s: expected %s, found %g", field, fmt, got);
}

static int check_config(const pn_optimizer_config *c)
{
    if ((int)c->kind < 0 || c->kind > PN_OPT_ADAMW)
        return pn_error_set(PN_ERR_INVALID, "optimizer: unknown kind %d", (int)c->kind);
    if (!(c->lr >= PN_LR_MIN && c->lr <= PN_LR_MAX))
        return config_error("lr", "a number in [1e-12, 1e6]", c->lr);
    if (!(c->momentum >= 0.0 && c->momentum < 1.0))
        return config_error("momentum", "a number in [0, 1)", c->momentum);
    if (!(c->beta1 >= 0.0 && c->beta1 < 1.0))
        return config_error("beta1", "a number in [0, 1)", c->beta1);
    if (!(c->beta2 >= 0.0 && c->beta2 < 1.0))
        return config_error("beta2", "a number in [0, 1)", c->beta2);
    if (!(c->eps > 0.0) || !isfinite(c->eps)) return config_error("eps", "a number > 0", c->eps);
    if (!(c->weight_decay >= 0.0) || !isfinite(c->weight_decay))
        return config_error("weight_decay", "a number >= 0", c->weight_decay);
    if (!(c->clip_norm >= 0.0) || !isfinite(c->clip_norm))
        return config_error("clip_norm", "a number >= 0", c->clip_norm);
    if ((int)c->schedule < 0 || c->schedule > PN_LR_COSINE)
        return pn_error_set(PN_ERR_INVALID, "optimizer: unknown schedule %d", (int)c->schedule);
    if (c->warmup_steps < 0)
        return config_error("schedule.warmup_steps", "an integer >= 0", (double)c->warmup_steps);
    if (c->schedule == PN_LR_STEP && c->step_size < 1)
        return config_error("schedule.step_size", "an integer >= 1", (double)c->step_size);
    if (c->schedule == PN_LR_STEP && !(c->gamma > 0.0 && c->gamma <= 1.0))
        return config_error("schedule.gamma", "a number in (0, 1]", c->gamma);
    if (c->schedule == PN_LR_COSINE && c->total_steps <= c->warmup_steps)
        return config_error("schedule.total_steps", "an integer > warmup_steps",
                            (double)c->total_steps);
    if (c->schedule == PN_LR_COSINE && !(c->min_lr >= 0.0 && c->min_lr <= c->lr))
        return config_error("schedule.min_lr", "a number in [0, lr]", c->min_lr);
    return PN_OK;
}

/* ---- life cycle ----------------------------------------------------------------------- */

int pn_optimizer_slot_names(pn_opt_kind kind, const char *names[2])
{
    if (kind == PN_OPT_MOMENTUM) {
        names[0] = "momentum";
        return 1;
    }
    if (kind == PN_OPT_ADAM || kind == PN_OPT_ADAMW) {
        names[0] = "adam_m";
        names[1] = "adam_v";
        return 2;
    }
    return 0;
}

/* An optimizer over params, its slots named in names (*n of them) but not yet made. */
static int make(pn_optimizer **out, const pn_optimizer_config *cfg, pn_params *params,
                const char *names[2], int *n)
{
    *out = NULL;
    PN_TRY(check_config(cfg));
    pn_optimizer *o = calloc(1, sizeof *o);
    if (!o) return pn_error_set(PN_ERR_NOMEM, "out of memory creating the optimizer");
    *o = (pn_optimizer){*cfg, params, -1, -1, NULL};
    *n = pn_optimizer_slot_names(cfg->kind, names);
    *out = o;
    return PN_OK;
}

int pn_optimizer_create(pn_optimizer **out, const pn_optimizer_config *cfg, pn_params *params)
{
    pn_optimizer *o;
    const char *names[2];
    int n, rc = PN_OK;
    PN_TRY(make(&o, cfg, params, names, &n));
    if (n > 0) rc = pn_params_add_slot(params, names[0], &o->slot1);
    if (n > 1 && rc == PN_OK) rc = pn_params_add_slot(params, names[1], &o->slot2);
    if (rc < 0) {
        free(o);
        return rc;
    }
    *out = o;
    return PN_OK;
}

int pn_optimizer_create_sharded(pn_optimizer **out, const pn_optimizer_config *cfg,
                                pn_params *params, pn_comm *comm)
{
    pn_optimizer *o;
    const char *names[2];
    int n;
    PN_TRY(make(&o, cfg, params, names, &n));
    if (n > 0) o->slot1 = 0; /* which slots there are; the arena holds none of them */
    if (n > 1) o->slot2 = 1;
    int rc = pn_opt_shard_create(&o->shard, params, comm, n, names);
    if (rc < 0) {
        free(o);
        return rc;
    }
    *out = o;
    return PN_OK;
}

void pn_optimizer_free(pn_optimizer *o)
{
    if (!o) return;
    pn_opt_shard_free(o->shard);
    free(o);
}

bool pn_optimizer_sharded(const pn_optimizer *o) { return o->shard && o->slot1 >= 0; }

bool pn_optimizer_slot_part(const pn_optimizer *o, int i, int k, size_t *at, size_t *n,
                            pn_matrix *slot)
{
    return o->shard && pn_opt_shard_slot(o->shard, i, k, at, n, slot);
}

size_t pn_optimizer_slot_floats(const pn_optimizer *o)
{
    if (o->shard) return pn_opt_shard_floats(o->shard);
    return o->slot1 >= 0 ? pn_params_size(o->params) : 0;
}

const pn_optimizer_config *pn_optimizer_config_of(const pn_optimizer *o) { return &o->cfg; }

/* ---- schedule, clipping, step --------------------------------------------------------- */

double pn_optimizer_lr(const pn_optimizer_config *cfg, long step)
{
    if (step < 0) step = 0;
    if (step < cfg->warmup_steps) return cfg->lr * (double)(step + 1) / (double)cfg->warmup_steps;
    long after = step - cfg->warmup_steps;
    switch (cfg->schedule) {
    case PN_LR_STEP:
        return cfg->step_size > 0 ? cfg->lr * pow(cfg->gamma, (double)(after / cfg->step_size))
                                  : cfg->lr;
    case PN_LR_COSINE: {
        long span = cfg->total_steps - cfg->warmup_steps;
        double p = span > 0 ? fmin(1.0, (double)after / (double)span) : 1.0;
        return cfg->min_lr + 0.5 * (cfg->lr - cfg->min_lr) * (1.0 + cos(M_PI * p));
    }
    case PN_LR_CONSTANT:
    default:
        return cfg->lr;
    }
}

double pn_optimizer_clip_scale(const pn_optimizer_config *cfg, double grad_sq_sum)
{
    if (!(cfg->clip_norm > 0.0) || !isfinite(grad_sq_sum)) return 1.0;
    double norm = sqrt(grad_sq_sum);
    return norm > cfg->clip_norm ? cfg->clip_norm / norm : 1.0;
}

int pn_optimizer_update_params(pn_optimizer *o, pn_params *params, long step,
                               double grad_scale, const int *indices, int n)
{
    const pn_optimizer_config *c = &o->cfg;
    if (params != o->params)
        return pn_error_set(PN_ERR_INTERNAL, "optimizer: stepped on another arena than its own");
    if (step < 0) return pn_error_set(PN_ERR_INTERNAL, "optimizer: negative step %ld", step);
    if (!isfinite(grad_scale))
        return pn_error_set(PN_ERR_INTERNAL, "optimizer: gradient scale %g", grad_scale);
    pn_update_hparams hp = {
        .rule = c->kind == PN_OPT_SGD        ? PN_UPDATE_SGD
                : c->kind == PN_OPT_MOMENTUM ? PN_UPDATE_MOMENTUM
                                             : PN_UPDATE_ADAM,
        .lr = (float)pn_optimizer_lr(c, step),
        .momentum = (float)c->momentum,
        .nesterov = c->nesterov,
        .beta1 = (float)c->beta1,
        .beta2 = (float)c->beta2,
        .eps = (float)c->eps,
        .decoupled = c->kind == PN_OPT_ADAMW,
        .grad_scale = (float)grad_scale,
    };
    if (hp.rule == PN_UPDATE_ADAM) {
        double t = (double)step + 1.0;
        hp.bias1 = (float)(1.0 - pow(c->beta1, t));
        hp.bias2 = (float)(1.0 - pow(c->beta2, t));
    }
    for (int k = 0; k < n; k++) {
        int i = indices ? indices[k] : k;
        hp.weight_decay = pn_params_get(params, i)->decay ? (float)c->weight_decay : 0.0f;
        pn_matrix w = pn_params_value(params, i), g = pn_params_grad(params, i);
        pn_matrix s1 = {0}, s2 = {0}, part[2] = {{0}};
        if (o->shard) { /* this replica's run of the parameter only */
            if (!pn_opt_shard_part(o->shard, i, &w, &g, part)) continue;
            s1 = part[0], s2 = part[1];
        } else {
            if (o->slot1 >= 0) s1 = pn_params_slot(params, o->slot1, i);
            if (o->slot2 >= 0) s2 = pn_params_slot(params, o->slot2, i);
        }
        pn_matrix *p1 = o->slot1 >= 0 ? &s1 : NULL, *p2 = o->slot2 >= 0 ? &s2 : NULL;
        pn_row_grad *rg = pn_params_row_grad(params, i);
        if (!rg) {
            PN_TRY(pn_optimizer_update(&hp, &w, &g, p1, p2));
            continue;
        }
        /* the touched rows only (lazy: other rows' slots are not decayed) */
        PN_TRY(pn_row_grad_merge(rg));
        pn_matrix rows = pn_row_grad_rows(rg);
        PN_TRY(pn_optimizer_update_rows(&hp, &w, pn_row_grad_dev_ids(rg), &rows, p1, p2));
        pn_row_grad_reset(rg);
    }
    return PN_OK;
}

int pn_optimizer_step(pn_optimizer *o, pn_params *params, long step, double grad_scale)
{
    PN_TRY(pn_optimizer_update_params(o, params, step, grad_scale, NULL, pn_params_count(params)));
    return o->shard ? pn_opt_shard_finish(o->shard) : PN_OK;
}
