/* The math that layers call. Each op checks shapes and devices, then dispatches to
 * the backend of its operands' device (math/backend.h); layers never branch on the
 * device. Matrices are row-major views (math/matrix.h); "beta" means the output is
 * scaled by beta before the result is added (0 overwrites, 1 accumulates).
 * Integer arrays (labels, ids) live on the same device as the matrices. */
#ifndef PN_OPS_H
#define PN_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "math/matrix.h"

typedef enum pn_act {
    PN_ACT_NONE = 0,
    PN_ACT_RELU,
    PN_ACT_TANH,
    PN_ACT_SIGMOID,
    PN_ACT_GELU, /* tanh approximation */
    PN_ACT_SOFTMAX /* over each row */
} pn_act;

/* "relu" -> PN_ACT_RELU...; -1 for an unknown name. */
int pn_act_from_name(const char *name);
const char *pn_act_name(pn_act act);

/* Sets the threads the CPU backend's BLAS may use in this process. */
void pn_math_set_threads(int threads);

/* Asks every backend for ops whose result does not depend on timing (--deterministic):
 * the CUDA backend then adds scatter_add_rows' rows in index order instead of by
 * atomic adds. The CPU's ops are deterministic either way. */
void pn_math_set_deterministic(bool on);
bool pn_math_deterministic(void);

/* c = alpha * op(a) * op(b) + beta * c, op = transpose when trans_* is set. Under
 * PN_PRECISION_BF16 (math/precision.h) a and b enter rounded to bf16, c accumulates
 * in fp32 (the backend's gemm_bf16). */
int pn_gemm(bool trans_a, bool trans_b, float alpha, const pn_matrix *a, const pn_matrix *b,
            float beta, pn_matrix *c);

/* bfloat16 (math/precision.h, math/bf16_math.h): m = m rounded to bf16, in place; dst
 * (rows x cols bf16, dense, on src's device) = src narrowed; dst = src widened. */
int pn_round_bf16(pn_matrix *m);
int pn_to_bf16(const pn_matrix *src, uint16_t *dst);
int pn_from_bf16(const uint16_t *src, pn_matrix *dst);

int pn_fill(pn_matrix *m, float value);
int pn_copy(const pn_matrix *src, pn_matrix *dst);
int pn_scale(pn_matrix *m, float alpha);
/* y += alpha * x */
int pn_axpy(float alpha, const pn_matrix *x, pn_matrix *y);
/* c = beta * c + a .* b */
int pn_mul(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c);

/* y = act(x); x and y may be the same matrix except for PN_ACT_GELU's backward use. */
int pn_act_forward(pn_act act, const pn_matrix *x, pn_matrix *y);
/* dx = beta * dx + act'(x) * dy, given x (needed by gelu) and y = act(x) (the rest). */
int pn_act_backward(pn_act act, const pn_matrix *x, const pn_matrix *y, const pn_matrix *dy,
                    float beta, pn_matrix *dx);

/* y = x * mask with mask[i,j] = 0 (probability rate) or 1/(1-rate), drawn from
 * hash(key, row0 + i, j): the mask depends on the global row, not on who computes it. */
int pn_dropout_forward(const pn_matrix *x, float rate, uint64_t key, long row0,
                       pn_matrix *mask, pn_matrix *y);

/* m[i,:] += v[0,:] */
int pn_add_row_vector(const pn_matrix *v, pn_matrix *m);
/* out[0,:] = beta * out[0,:] + sum_i m[i,:] */
int pn_col_sums(const pn_matrix *m, float beta, pn_matrix *out);
/* *out = sum of squares of m (accumulated in double) */
int pn_sum_squares(const pn_matrix *m, double *out);

/* y[i,:] = softmax(scale * x[i,:]); with causal_period T > 0, row i only sees
 * columns 0..(i mod T) and the rest of the row is 0. */
int pn_softmax_rows(const pn_matrix *x, float scale, int causal_period, pn_matrix *y);

/* loss[i,0] = -log probs[i, labels[i]]; *correct = rows whose argmax is the label. */
int pn_xent_forward(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                    double *correct);
/* dlogits = beta * dlogits + dloss[i,0] * (probs[i,:] - onehot(labels[i])) */
int pn_xent_backward(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                     float beta, pn_matrix *dlogits);

/* loss[i,0] = mean_j (p[i,j] - t[i,j])^2 */
int pn_mse_forward(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss);
/* dp += dloss_i * 2 (p - t) / cols, dt -= the same; either may be NULL */
int pn_mse_backward(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                    pn_matrix *dp, pn_matrix *dt);

/* y = (x - mean) * rstd * gamma + beta over each row; mean, rstd are rows x 1 */
int pn_layernorm_forward(const pn_matrix *x, const pn_matrix *gamma, const pn_matrix *beta,
                         float eps, pn_matrix *y, pn_matrix *mean, pn_matrix *rstd);
/* dx, dgamma, dbeta accumulate (+=) */
int pn_layernorm_backward(const pn_matrix *x, const pn_matrix *gamma, const pn_matrix *mean,
                          const pn_matrix *rstd, const pn_matrix *dy, pn_matrix *dx,
                          pn_matrix *dgamma, pn_matrix *dbeta);

/* out[i,:] = table[ids[i],:] for i < out->rows; ids are checked against table->rows */
int pn_gather_rows(const pn_matrix *table, const int *ids, pn_matrix *out);
/* dtable[ids[i],:] += dout[i,:] */
int pn_scatter_add_rows(const pn_matrix *dout, const int *ids, pn_matrix *dtable);

/* Max over each sample's real rows (sequence max pooling): for b < y->rows,
 * y[b,j] = max of x[b*period + t, j] over t < lengths[b] (lengths: y->rows ints on
 * the device, each in [1, period]; NULL: all period), and arg[b*cols + j] = the row of
 * x that held it (the first on ties); x has y->rows * period rows. */
int pn_seq_max_forward(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                       int *arg);
/* dx[arg[b*cols + j], j] += dy[b, j] */
int pn_seq_max_backward(const pn_matrix *dy, const int *arg, pn_matrix *dx);

/* The update rules of pn_optimizer_update (adamw is ADAM with decoupled decay). */
typedef enum pn_update_rule {
    PN_UPDATE_SGD = 0, /* no slot */
    PN_UPDATE_MOMENTUM, /* slot1 = velocity */
    PN_UPDATE_ADAM      /* slot1 = first moment, slot2 = second moment */
} pn_update_rule;

/* Hyper-parameters of one fused update, already resolved for this step. */
typedef struct pn_update_hparams {
    pn_update_rule rule;
    float lr;           /* learning rate of this step (schedule applied) */
    float momentum;     /* MOMENTUM: mu */
    bool nesterov;      /* MOMENTUM: w -= lr * (g + mu * v) instead of lr * v */
    float beta1, beta2, eps;
    float bias1, bias2; /* ADAM: 1 - beta1^t and 1 - beta2^t, t = step + 1 (both > 0) */
    float weight_decay; /* 0 for a parameter that does not decay */
    bool decoupled;     /* decay as w -= lr * wd * w (adamw) instead of g += wd * w */
    float grad_scale;   /* g is multiplied by this first (clipping) */
} pn_update_hparams;

/* One pass over w, g and the slots: g' = grad_scale * g (+ wd * w unless decoupled),
 * then the rule updates the slots and w from g', and g is set to 0. slot2 is NULL
 * unless the rule is ADAM; slot1 is NULL for SGD. Formulas: optim/optimizer.h. */
int pn_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                        pn_matrix *slot1, pn_matrix *slot2);

/* The same step on some rows of w and of its slots (a row-sparse gradient): row k
 * of g [n, cols] is the gradient of row ids[k] (unique, a device array); other rows
 * and their slots are left as they are (the lazy update). g is set to 0. */
int pn_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                             pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2);

#endif
