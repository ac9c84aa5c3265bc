/* The fused optimizer update's per-element step (pn_optimizer_update), one text for
 * the CPU loops and the CUDA kernel: the hyper-parameters resolved once per call
 * into pn_update_coefs (on the host, in double where the CPU did), then one
 * function per rule that takes an element's w, g and slots and returns the new ones
 * (the gradient becomes 0). Formulas: optim/optimizer.h. */
#ifndef PN_UPDATE_MATH_H
#define PN_UPDATE_MATH_H

#include <math.h>

#include "math/kernel_fn.h"
#include "math/ops.h"

/* Per-call constants, so that the per-element step is arithmetic only. */
typedef struct pn_update_coefs {
    float scale; /* gradient multiplier (clipping) */
    float l2;    /* coupled decay: g += l2 * w */
    float keep;  /* decoupled decay: w *= keep before the step */
    float lr;
    float mu, ng, nv;     /* momentum: w -= lr * (ng * g + nv * v) */
    float b1, c1, b2, c2; /* adam: beta1, 1 - beta1, beta2, 1 - beta2 */
    float step, rs2, eps; /* adam: lr / bias1, 1 / sqrt(bias2), eps */
} pn_update_coefs;

static inline pn_update_coefs pn_update_coefs_of(const pn_update_hparams *hp)
{
    double wd = hp->weight_decay, lr = hp->lr;
    pn_update_coefs c = {0};
    c.scale = hp->grad_scale;
    c.l2 = hp->decoupled ? 0.0f : (float)wd;
    c.keep = hp->decoupled ? (float)(1.0 - lr * wd) : 1.0f;
    c.lr = hp->lr;
    c.mu = hp->momentum;
    c.ng = hp->nesterov ? 1.0f : 0.0f;
    c.nv = hp->nesterov ? hp->momentum : 1.0f;
    c.b1 = hp->beta1;
    c.c1 = (float)(1.0 - (double)hp->beta1);
    c.b2 = hp->beta2;
    c.c2 = (float)(1.0 - (double)hp->beta2);
    if (hp->rule == PN_UPDATE_ADAM) {
        c.step = (float)(lr / hp->bias1);
        c.rs2 = (float)(1.0 / sqrt((double)hp->bias2));
    }
    c.eps = hp->eps;
    return c;
}

/* The gradient the rules see: scaled, plus coupled L2 decay. */
PN_KERNEL_FN float pn_update_grad(const pn_update_coefs *c, float w, float g)
{
    return c->scale * g + c->l2 * w;
}

/* Each returns the new w; *v, *m are the slots, updated in place. */
PN_KERNEL_FN float pn_update_sgd(const pn_update_coefs *c, float w, float g)
{
    float gj = pn_update_grad(c, w, g);
    return c->keep * w - c->lr * gj;
}

PN_KERNEL_FN float pn_update_momentum(const pn_update_coefs *c, float w, float g, float *v)
{
    float gj = pn_update_grad(c, w, g);
    float vj = c->mu * *v + gj;
    *v = vj;
    return c->keep * w - c->lr * (c->ng * gj + c->nv * vj);
}

PN_KERNEL_FN float pn_update_adam(const pn_update_coefs *c, float w, float g, float *m, float *v)
{
    float gj = pn_update_grad(c, w, g);
    float mj = c->b1 * *m + c->c1 * gj, vj = c->b2 * *v + c->c2 * gj * gj;
    *m = mj;
    *v = vj;
    return c->keep * w - c->step * mj / (sqrtf(vj) * c->rs2 + c->eps);
}

#endif
