/* The optimizer's formulas (optim/optimizer.h) in double, written from the
 * formulas and not from the kernel: the reference test_optimizer and test_row_grad
 * compare the fused update and the row-sparse update with. */
#ifndef PN_TEST_OPTIMIZER_REF_H
#define PN_TEST_OPTIMIZER_REF_H

#include <math.h>
#include <stdbool.h>

#include "optim/optimizer.h"

/* Learning rate the test expects at step: constant, with an optional linear warm-up. */
static inline double ref_lr(const pn_optimizer_config *c, long step)
{
    return step < c->warmup_steps ? c->lr * (double)(step + 1) / (double)c->warmup_steps : c->lr;
}

/* One update of one element, written from the formulas (not from the kernel). */
static inline void ref_update(const pn_optimizer_config *c, long step, double scale, bool decays,
                       double g_raw, double *w, double *s1, double *s2)
{
    double lr = ref_lr(c, step), wd = decays ? c->weight_decay : 0.0;
    double g = g_raw * scale;
    int t = (int)step + 1;
    switch (c->kind) {
    case PN_OPT_SGD:
        g += wd * *w;
        *w -= lr * g;
        break;
    case PN_OPT_MOMENTUM:
        g += wd * *w;
        *s1 = c->momentum * *s1 + g;
        *w -= c->nesterov ? lr * (g + c->momentum * *s1) : lr * *s1;
        break;
    case PN_OPT_ADAM:
    case PN_OPT_ADAMW: {
        if (c->kind == PN_OPT_ADAM) g += wd * *w;
        *s1 = c->beta1 * *s1 + (1 - c->beta1) * g;
        *s2 = c->beta2 * *s2 + (1 - c->beta2) * g * g;
        double mhat = *s1 / (1 - pow(c->beta1, t)), vhat = *s2 / (1 - pow(c->beta2, t));
        double decay = c->kind == PN_OPT_ADAMW ? lr * wd * *w : 0.0;
        *w -= lr * mhat / (sqrt(vhat) + c->eps) + decay;
        break;
    }
    }
}

#endif
