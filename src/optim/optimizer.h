/* pn_optimizer: Paddle's ParameterUpdater. Updates a stage's parameter arena from
 * its gradients: sgd, momentum (optionally Nesterov), adam, adamw; L2 weight decay
 * (decoupled for adamw) on parameters marked for decay; global-norm gradient
 * clipping; learning-rate schedules (constant, step, cosine with linear warm-up).
 * Optimizer state lives in arena slots, so it is snapshotted by name like values.
 * After an update the gradients are zero, ready for the next step. */
#ifndef PN_OPTIMIZER_H
#define PN_OPTIMIZER_H

#include <jansson.h>
#include <stdbool.h>

#include "layers/params.h"
#include "mpi/comm.h"

typedef enum pn_opt_kind { PN_OPT_SGD, PN_OPT_MOMENTUM, PN_OPT_ADAM, PN_OPT_ADAMW } pn_opt_kind;
typedef enum pn_lr_kind { PN_LR_CONSTANT, PN_LR_STEP, PN_LR_COSINE } pn_lr_kind;

/* The learning rates a run accepts, from the model file or --lr: beyond them training
 * can only diverge or stand still. */
#define PN_LR_MIN 1e-12
#define PN_LR_MAX 1e6

typedef struct pn_optimizer_config {
    pn_opt_kind kind;
    double lr;            /* base learning rate */
    double momentum;      /* momentum: mu (default 0.9) */
    bool nesterov;
    double beta1, beta2, eps; /* adam/adamw (0.9, 0.999, 1e-8) */
    double weight_decay;  /* 0: none */
    double clip_norm;     /* > 0: scale gradients so their global L2 norm is at most this */
    pn_lr_kind schedule;
    long warmup_steps;    /* linear warm-up to lr over these steps (any schedule) */
    long step_size;       /* step schedule: multiply by gamma every step_size steps */
    double gamma;
    long total_steps;     /* cosine: min_lr is reached at this step (warm-up included) */
    double min_lr;
} pn_optimizer_config;

/* Update number step (0-based), t = step + 1, lr_t = pn_optimizer_lr(cfg, step),
 * g = grad * grad_scale, wd = weight_decay on parameters with decay set, else 0:
 *   sgd:      g += wd * w;  w -= lr_t * g
 *   momentum: g += wd * w;  v = mu * v + g;  w -= lr_t * v
 *             (nesterov: w -= lr_t * (g + mu * v), v already updated)
 *   adam:     g += wd * w;  m = b1 * m + (1 - b1) * g;  v = b2 * v + (1 - b2) * g^2;
 *             w -= lr_t * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
 *   adamw:    adam without the g += wd * w, and w -= lr_t * wd * w (old w) instead.
 * Slots, in the arena (pn_params_add_slot): "momentum" (v) for momentum; "adam_m"
 * and "adam_v" for adam and adamw; none for sgd. All start at zero.
 * A row-sparse parameter (an embedding_bag's table, a sparse_fc's W) takes the same
 * step on the rows its gradient touched only (pn_optimizer_update_rows): the same
 * as the dense step for sgd without decay; for momentum and adam the lazy update
 * (slots of other rows are not decayed, adam's t is the global step), and weight
 * decay on the touched rows only. Its gradient is merged first and reset after. */
typedef struct pn_optimizer pn_optimizer;

/* "sgd", "momentum", "adam", "adamw" ("?" for anything else). */
const char *pn_opt_kind_name(pn_opt_kind kind);
/* The kind named name, or -1. */
int pn_opt_kind_from_name(const char *name);

/* Defaults for kind: momentum 0.9, adam betas (0.9, 0.999), eps 1e-8, constant lr. */
void pn_optimizer_config_default(pn_optimizer_config *cfg, pn_opt_kind kind, double lr);

/* Reads an "optimizer" object ({"type": "adam", "lr": 0.001, "schedule": {...}, ...}).
 * "type" and "lr" are required; cfg is replaced by the defaults of the type plus the
 * keys given (cfg is untouched on error). Unknown keys and keys the type does not
 * use (beta1 for sgd, gamma for cosine, ...) are errors. "schedule" takes "type"
 * (default "constant"), "warmup_steps"; "step_size" (required), "gamma" for step;
 * "total_steps" (> warmup_steps; absent: 0, which the trainer replaces by the
 * run's length), "min_lr" (<= lr) for cosine.
 * Errors name file and the field ("models/x.json: train.optimizer.beta1: ..."). */
int pn_optimizer_config_from_json(const json_t *obj, const char *file,
                                  pn_optimizer_config *cfg);

/* The names of the slots kind adds to the arena, in order, into names (at most 2);
 * returns how many (a snapshot's size is known before the optimizer is made). */
int pn_optimizer_slot_names(pn_opt_kind kind, const char *names[2]);

/* Checks cfg (the same ranges as the JSON reader) and adds the slots the kind needs
 * to params (already finalized); pn_optimizer_step must get this same params. */
int pn_optimizer_create(pn_optimizer **out, const pn_optimizer_config *cfg, pn_params *params);
void pn_optimizer_free(pn_optimizer *o);

/* Learning rate at step (0-based count of updates done before this one), W the warm-up:
 * step < W: lr * (step + 1) / W, whatever the schedule; after it, s = step - W:
 * constant: lr; step: lr * gamma^floor(s / step_size);
 * cosine: min_lr + (lr - min_lr) * (1 + cos(pi * min(1, s / (total_steps - W)))) / 2. */
double pn_optimizer_lr(const pn_optimizer_config *cfg, long step);

/* The factor that clipping applies given the global sum of squared gradients:
 * min(1, clip_norm / sqrt(sum)); 1 when clipping is off (clip_norm 0) or the sum is
 * not finite (the update then carries the inf/NaN into the loss, where it shows). */
double pn_optimizer_clip_scale(const pn_optimizer_config *cfg, double grad_sq_sum);

/* Applies update number `step` (0-based) with gradients multiplied by grad_scale
 * (the clip factor), then zeroes the gradients (in the same pass: no separate
 * zero-grad is needed). One fused op per parameter; no allocation. */
int pn_optimizer_step(pn_optimizer *o, pn_params *params, long step, double grad_scale);

/* The same update for the n parameters whose handles are in indices (NULL: the
 * first n), so a layer's parameters can be updated as soon as their gradients are
 * final, while they are still in cache. */
int pn_optimizer_update_params(pn_optimizer *o, pn_params *params, long step,
                               double grad_scale, const int *indices, int n);

/* The configuration o was created with. */
const pn_optimizer_config *pn_optimizer_config_of(const pn_optimizer *o);

/* --shard-optimizer (ZeRO stage 1): pn_optimizer_create, but the optimizer keeps
 * only this replica's part of the slots, zero (optimizer_shard.h: its piece of the
 * dense gradient buffer, whose arena must have been laid out in as many pieces as
 * comm's stage has replicas, plus the row-sparse parameters' slots); the arena gets
 * no slots. Each
 * pn_optimizer_step then updates that part and gathers every replica's values
 * (collective over the stage's replicas). It reads this replica's piece of the
 * gradients only, so the stage may sum them there alone (pn_stage_grads_in_pieces). */
int pn_optimizer_create_sharded(pn_optimizer **out, const pn_optimizer_config *cfg,
                                pn_params *params, pn_comm *comm);

/* Whether o keeps only this replica's part of its slots (created sharded, with slots). */
bool pn_optimizer_sharded(const pn_optimizer *o);

/* A sharded o's slot k of parameter i as this replica keeps it, as a snapshot writes
 * and reads it (train/checkpoint.h: pn_slot_parts): a dense parameter's run of *n
 * values from value *at (row-major) as a 1 x n view, a row-sparse one's whole rows x
 * cols (*at 0); false when it keeps none of it, or o is not sharded. */
bool pn_optimizer_slot_part(const pn_optimizer *o, int i, int k, size_t *at, size_t *n,
                            pn_matrix *slot);

/* Floats of optimizer state per slot this rank holds (0 without slots). */
size_t pn_optimizer_slot_floats(const pn_optimizer *o);

#endif
