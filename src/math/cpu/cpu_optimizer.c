/* The fused optimizer update on the CPU (pn_optimizer_update): one pass over memory
 * that scales each gradient, adds L2 decay, updates the slots and the value, and
 * zeroes the gradient. The pass is bound by memory bandwidth: its loops get AVX
 * clones, and a second thread measured no faster on a 2-core node (see bench/). */
#include <math.h>
#include <stddef.h>

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"

/* Per-call constants, resolved once so the loops do arithmetic only. */
typedef struct coefs {
    float scale; /* gradient multiplier (clipping) */
    float l2;    /* coupled decay: g += l2 * w */
    float keep;  /* decoupled decay: w *= keep before the step */
    float lr;
    float mu, ng, nv;    /* momentum: w -= lr * (ng * g + nv * v) */
    float b1, c1, b2, c2; /* adam: beta1, 1 - beta1, beta2, 1 - beta2 */
    float step, rs2, eps; /* adam: lr / bias1, 1 / sqrt(bias2), eps */
} coefs;

static coefs coefs_of(const pn_update_hparams *hp)
{
    double wd = hp->weight_decay, lr = hp->lr;
    coefs c = {0};
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

PN_VECTOR_CLONES static void sgd_run(size_t n, coefs c, float *restrict w, float *restrict g)
{
    for (size_t j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        w[j] = c.keep * w[j] - c.lr * gj;
        g[j] = 0.0f;
    }
}

PN_VECTOR_CLONES static void momentum_run(size_t n, coefs c, float *restrict w, float *restrict g,
                         float *restrict v)
{
    for (size_t j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        float vj = c.mu * v[j] + gj;
        v[j] = vj;
        w[j] = c.keep * w[j] - c.lr * (c.ng * gj + c.nv * vj);
        g[j] = 0.0f;
    }
}

PN_VECTOR_CLONES static void adam_run(size_t n, coefs c, float *restrict w, float *restrict g,
                     float *restrict m, float *restrict v)
{
    for (size_t j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        float mj = c.b1 * m[j] + c.c1 * gj, vj = c.b2 * v[j] + c.c2 * gj * gj;
        m[j] = mj;
        v[j] = vj;
        g[j] = 0.0f;
        w[j] = c.keep * w[j] - c.step * mj / (sqrtf(vj) * c.rs2 + c.eps);
    }
}

/* One contiguous run of a parameter: [w, g, s1, s2] + offset, n floats. */
static void update_run(pn_update_rule rule, coefs c, size_t n, float *w, float *g, float *s1,
                       float *s2)
{
    switch (rule) {
    case PN_UPDATE_SGD: sgd_run(n, c, w, g); break;
    case PN_UPDATE_MOMENTUM: momentum_run(n, c, w, g, s1); break;
    case PN_UPDATE_ADAM: adam_run(n, c, w, g, s1, s2); break;
    }
}

/* Start of row i of m, or NULL for an absent slot. */
static float *row_of(const pn_matrix *m, size_t i)
{
    return m ? m->data + i * (size_t)m->ld : NULL;
}

static bool dense(const pn_matrix *m) { return !m || pn_matrix_dense(*m); }

int pn_cpu_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                            pn_matrix *slot1, pn_matrix *slot2)
{
    if (hp->rule != PN_UPDATE_SGD && hp->rule != PN_UPDATE_MOMENTUM && hp->rule != PN_UPDATE_ADAM)
        return pn_error_set(PN_ERR_INTERNAL, "optimizer_update: bad rule %d", (int)hp->rule);
    coefs c = coefs_of(hp);
    if (dense(w) && dense(g) && dense(slot1) && dense(slot2)) { /* one run, no row ends */
        update_run(hp->rule, c, pn_matrix_count(*w), w->data, g->data, row_of(slot1, 0),
                   row_of(slot2, 0));
        return PN_OK;
    }
    for (size_t i = 0; i < (size_t)w->rows; i++)
        update_run(hp->rule, c, (size_t)w->cols, row_of(w, i), row_of(g, i), row_of(slot1, i),
                   row_of(slot2, i));
    return PN_OK;
}
