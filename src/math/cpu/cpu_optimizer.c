/* The fused optimizer update on the CPU (pn_optimizer_update): one pass over memory
 * that scales each gradient, adds L2 decay, updates the slots and the value, and
 * zeroes the gradient. Rows are cut into blocks of a fixed size so that GCC
 * vectorizes the inner loops at plain -O2 (its default cost model skips loops that
 * need a scalar epilogue); the rest of a row runs the same code with a short count. */
#include <math.h>
#include <stddef.h>
#if defined(__SSE__)
#include <immintrin.h>
#endif

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"

enum { BLOCK = 16 };

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

static inline void sgd_block(int n, coefs c, float *restrict w, float *restrict g)
{
    for (int j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        w[j] = c.keep * w[j] - c.lr * gj;
        g[j] = 0.0f;
    }
}

static inline void momentum_block(int n, coefs c, float *restrict w, float *restrict g,
                                  float *restrict v)
{
    for (int j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        float vj = c.mu * v[j] + gj;
        v[j] = vj;
        w[j] = c.keep * w[j] - c.lr * (c.ng * gj + c.nv * vj);
        g[j] = 0.0f;
    }
}

/* x[j] = sqrt(x[j]) for j < n. sqrtf may set errno, which keeps GCC from vectorizing
 * it without -fno-math-errno, so full blocks use the vector instruction directly
 * (AVX when the build targets it, e.g. CFLAGS=-march=native, else SSE). */
static inline void sqrt_block(int n, float *x)
{
#if defined(__AVX__)
    if (n == BLOCK) {
        for (int j = 0; j < BLOCK; j += 8)
            _mm256_storeu_ps(x + j, _mm256_sqrt_ps(_mm256_loadu_ps(x + j)));
        return;
    }
#elif defined(__SSE__)
    if (n == BLOCK) {
        for (int j = 0; j < BLOCK; j += 4) _mm_storeu_ps(x + j, _mm_sqrt_ps(_mm_loadu_ps(x + j)));
        return;
    }
#endif
    for (int j = 0; j < n; j++) x[j] = sqrtf(x[j]);
}

static inline void adam_block(int n, coefs c, float *restrict w, float *restrict g,
                              float *restrict m, float *restrict v)
{
    float s[BLOCK];
    for (int j = 0; j < n; j++) {
        float gj = c.scale * g[j] + c.l2 * w[j];
        m[j] = c.b1 * m[j] + c.c1 * gj;
        v[j] = c.b2 * v[j] + c.c2 * gj * gj;
        s[j] = v[j];
        g[j] = 0.0f;
    }
    sqrt_block(n, s);
    for (int j = 0; j < n; j++) w[j] = c.keep * w[j] - c.step * m[j] / (s[j] * c.rs2 + c.eps);
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
    coefs c = coefs_of(hp);
    size_t rows = (size_t)w->rows, len = (size_t)w->cols;
    if (dense(w) && dense(g) && dense(slot1) && dense(slot2)) {
        len *= rows; /* one long row: blocks run across row ends */
        rows = len ? 1 : 0;
    }
    for (size_t i = 0; i < rows; i++) {
        float *wr = row_of(w, i), *gr = row_of(g, i);
        float *s1 = row_of(slot1, i), *s2 = row_of(slot2, i);
        size_t j = 0, full = len / BLOCK * BLOCK;
        int rest = (int)(len - full);
        switch (hp->rule) {
        case PN_UPDATE_SGD:
            for (; j < full; j += BLOCK) sgd_block(BLOCK, c, wr + j, gr + j);
            sgd_block(rest, c, wr + j, gr + j);
            break;
        case PN_UPDATE_MOMENTUM:
            for (; j < full; j += BLOCK) momentum_block(BLOCK, c, wr + j, gr + j, s1 + j);
            momentum_block(rest, c, wr + j, gr + j, s1 + j);
            break;
        case PN_UPDATE_ADAM:
            for (; j < full; j += BLOCK) adam_block(BLOCK, c, wr + j, gr + j, s1 + j, s2 + j);
            adam_block(rest, c, wr + j, gr + j, s1 + j, s2 + j);
            break;
        default:
            return pn_error_set(PN_ERR_INTERNAL, "optimizer_update: bad rule %d", (int)hp->rule);
        }
    }
    return PN_OK;
}
