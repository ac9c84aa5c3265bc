/* The seam between the ops that layers call (math/ops.h) and the code that runs
 * them: one const table per device kind. The CPU table (math/cpu) fills every slot;
 * so does the CUDA table (math/cuda, built into the CUDA module that
 * math/cuda_module.h opens); a backend that leaves a slot empty makes the
 * dispatch report the op as unsupported on that device instead of crashing.
 * Shapes and devices are checked by the dispatch before a slot is called. */
#ifndef PN_BACKEND_H
#define PN_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#include "math/matrix.h"
#include "math/memory_backend.h"
#include "math/ops.h"

typedef struct pn_backend {
    const char *name;

    /* Memory: raw blocks for the pool, and copies (memory_backend.h). */
    pn_memory_backend memory;

    /* Dense algebra. */
    int (*gemm)(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                const pn_matrix *b, float beta, pn_matrix *c);

    /* bfloat16 (math/precision.h): gemm with both operands rounded to bf16 and fp32
     * accumulation (what pn_gemm runs under PN_PRECISION_BF16), and the conversions
     * between float matrices and dense bf16 arrays on the same device. */
    int (*gemm_bf16)(bool trans_a, bool trans_b, float alpha, const pn_matrix *a,
                     const pn_matrix *b, float beta, pn_matrix *c);
    int (*round_bf16)(pn_matrix *m);
    int (*to_bf16)(const pn_matrix *src, uint16_t *dst);
    int (*from_bf16)(const uint16_t *src, pn_matrix *dst);

    /* Elementwise. */
    int (*fill)(pn_matrix *m, float value);
    int (*copy)(const pn_matrix *src, pn_matrix *dst);
    int (*scale)(pn_matrix *m, float alpha);
    int (*axpy)(float alpha, const pn_matrix *x, pn_matrix *y);
    int (*mul)(const pn_matrix *a, const pn_matrix *b, float beta, pn_matrix *c);
    int (*act_forward)(pn_act act, const pn_matrix *x, pn_matrix *y);
    int (*act_backward)(pn_act act, const pn_matrix *x, const pn_matrix *y,
                        const pn_matrix *dy, float beta, pn_matrix *dx);
    int (*dropout_forward)(const pn_matrix *x, float rate, uint64_t key, long row0,
                           pn_matrix *mask, pn_matrix *y);

    /* Reductions and row-wise. */
    int (*add_row_vector)(const pn_matrix *v, pn_matrix *m);
    int (*col_sums)(const pn_matrix *m, float beta, pn_matrix *out);
    int (*sum_squares)(const pn_matrix *m, double *out);
    int (*softmax_rows)(const pn_matrix *x, float scale, int causal_period, pn_matrix *y);
    int (*xent_forward)(const pn_matrix *probs, const int *labels, pn_matrix *loss,
                        double *correct);
    int (*xent_backward)(const pn_matrix *probs, const int *labels, const pn_matrix *dloss,
                         float beta, pn_matrix *dlogits);
    int (*mse_forward)(const pn_matrix *p, const pn_matrix *t, pn_matrix *loss);
    int (*mse_backward)(const pn_matrix *p, const pn_matrix *t, const pn_matrix *dloss,
                        pn_matrix *dp, pn_matrix *dt);
    int (*layernorm_forward)(const pn_matrix *x, const pn_matrix *gamma,
                             const pn_matrix *beta, float eps, pn_matrix *y,
                             pn_matrix *mean, pn_matrix *rstd);
    int (*layernorm_backward)(const pn_matrix *x, const pn_matrix *gamma,
                              const pn_matrix *mean, const pn_matrix *rstd,
                              const pn_matrix *dy, pn_matrix *dx, pn_matrix *dgamma,
                              pn_matrix *dbeta);
    int (*gather_rows)(const pn_matrix *table, const int *ids, pn_matrix *out);
    int (*scatter_add_rows)(const pn_matrix *dout, const int *ids, pn_matrix *dtable);
    int (*seq_max_forward)(const pn_matrix *x, int period, const int *lengths, pn_matrix *y,
                           int *arg);
    int (*seq_max_backward)(const pn_matrix *dy, const int *arg, pn_matrix *dx);

    /* Optimizer: the fused parameter update (see pn_optimizer_update). */
    int (*optimizer_update)(const pn_update_hparams *hp, pn_matrix *w, pn_matrix *g,
                            pn_matrix *slot1, pn_matrix *slot2);
    int (*optimizer_update_rows)(const pn_update_hparams *hp, pn_matrix *w, const int *ids,
                                 pn_matrix *g, pn_matrix *slot1, pn_matrix *slot2);
} pn_backend;

/* Every slot of pn_backend, in order: what tests/test_backend_ops.c enumerates (it
 * fails when this list and the struct disagree, or when a slot has no case). */
#define PN_BACKEND_SLOTS(X)                                                          \
    X(memory.alloc) X(memory.free) X(memory.zero) X(memory.copy_from_host)           \
    X(memory.copy_to_host) X(gemm) X(gemm_bf16) X(round_bf16) X(to_bf16)             \
    X(from_bf16) X(fill) X(copy) X(scale) X(axpy) X(mul) X(act_forward)              \
    X(act_backward) X(dropout_forward) X(add_row_vector) X(col_sums) X(sum_squares)  \
    X(softmax_rows) X(xent_forward) X(xent_backward) X(mse_forward) X(mse_backward)  \
    X(layernorm_forward) X(layernorm_backward) X(gather_rows) X(scatter_add_rows)    \
    X(seq_max_forward) X(seq_max_backward) X(optimizer_update) X(optimizer_update_rows)

extern const pn_backend pn_cpu_backend;

/* The table for dev: the CPU's, or the CUDA module's (math/cuda_module.h), opened on
 * the first call for a GPU; an error when that module cannot be had. */
int pn_backend_for(pn_device dev, const pn_backend **out);

#endif
