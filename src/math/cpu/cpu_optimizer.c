/* The fused optimizer update on the CPU (pn_optimizer_update): one pass over memory
 * that scales each gradient, adds L2 decay, updates the slots and the value, and
 * zeroes the gradient. The pass is bound by memory bandwidth (adam took as long
 * without its sqrt and division): its loops get AVX clones, and with
 * pn_math_set_threads(T > 1) a big parameter's run is split over T threads
 * (cpu_workers.c; that helps as far as the memory gives more to T cores than to
 * one); elementwise, so the split changes no result. The per-element step is
 * math/update_math.h, which the CUDA kernel runs too. */
#include <math.h>
#include <stddef.h>

#include "base/error.h"
#include "math/cpu/cpu_kernels.h"
#include "math/update_math.h"

PN_VECTOR_CLONES static void sgd_run(size_t n, pn_update_coefs c, float *restrict w, float *restrict g)
{
    for (size_t j = 0; j < n; j++) {
        w[j] = pn_update_sgd(&c, w[j], g[j]);
        g[j] = 0.0f;
    }
}

PN_VECTOR_CLONES static void momentum_run(size_t n, pn_update_coefs c, float *restrict w, float *restrict g,
                         float *restrict v)
{
    for (size_t j = 0; j < n; j++) {
        float vj = v[j];
        w[j] = pn_update_momentum(&c, w[j], g[j], &vj);
        v[j] = vj;
        g[j] = 0.0f;
    }
}

PN_VECTOR_CLONES static void adam_run(size_t n, pn_update_coefs c, float *restrict w, float *restrict g,
                     float *restrict m, float *restrict v)
{
    for (size_t j = 0; j < n; j++) {
        float mj = m[j], vj = v[j];
        w[j] = pn_update_adam(&c, w[j], g[j], &mj, &vj);
        m[j] = mj;
        v[j] = vj;
        g[j] = 0.0f;
    }
}

/* One contiguous run of a parameter: [w, g, s1, s2] + offset, n floats. */
static void update_run(pn_update_rule rule, pn_update_coefs c, size_t n, float *w, float *g, float *s1,
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

/* One dense parameter's run, cut into parts (pn_cpu_split). */
typedef struct dense_task {
    pn_update_rule rule;
    pn_update_coefs c;
    size_t n;
    float *w, *g, *s1, *s2;
} dense_task;

static float *offset(float *p, size_t k) { return p ? p + k : NULL; }

static void dense_part(void *ctx, int part, int parts)
{
    const dense_task *t = ctx;
    size_t a, b;
    pn_cpu_split_range(t->n, part, parts, &a, &b);
    if (b > a)
        update_run(t->rule, t->c, b - a, t->w + a, t->g + a, offset(t->s1, a), offset(t->s2, a));
}

int pn_cpu_optimizer_update(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                            pn_matrix *slot1, pn_matrix *slot2)
{
    if (hp->rule != PN_UPDATE_SGD && hp->rule != PN_UPDATE_MOMENTUM && hp->rule != PN_UPDATE_ADAM)
        return pn_error_set(PN_ERR_INTERNAL, "optimizer_update: bad rule %d", (int)hp->rule);
    pn_update_coefs c = pn_update_coefs_of(hp);
    if (dense(w) && dense(g) && dense(slot1) && dense(slot2)) { /* one run, no row ends */
        dense_task t = {hp->rule, c, pn_matrix_count(*w), w->data, g->data, row_of(slot1, 0),
                        row_of(slot2, 0)};
        pn_cpu_split(dense_part, &t, t.n);
        return PN_OK;
    }
    for (size_t i = 0; i < (size_t)w->rows; i++)
        update_run(hp->rule, c, (size_t)w->cols, row_of(w, i), row_of(g, i), row_of(slot1, i),
                   row_of(slot2, i));
    return PN_OK;
}

int pn_cpu_optimizer_update_rows(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                                 pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2)
{
    pn_update_coefs c = pn_update_coefs_of(hp);
    for (int k = 0; k < g->rows; k++)
        if (ids[k] < 0 || ids[k] >= w->rows)
            return pn_error_set(PN_ERR_INVALID, "id %d at row %d is outside [0, %d)", ids[k], k,
                                w->rows);
    for (int k = 0; k < g->rows; k++) {
        size_t i = (size_t)ids[k];
        update_run(hp->rule, c, (size_t)w->cols, row_of(w, i), row_of(g, (size_t)k),
                   row_of(slot1, i), row_of(slot2, i));
    }
    return PN_OK;
}
