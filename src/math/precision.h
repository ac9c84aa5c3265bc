/* pn_precision: the number format a training run computes in (--precision, the
 * "precision" train key; docs/training.md). fp32: every value a float. bf16:
 *  - every GEMM takes its operands (weights, activations, gradients) rounded to
 *    bfloat16 and accumulates in fp32 (pn_gemm dispatches to the backend's gemm_bf16:
 *    OpenBLAS's sbgemm where the library has it, cuBLAS GemmEx on GPUs);
 *  - the values and gradients that flow between layers are bf16 (the network stores
 *    them so, net/network.h), and so is what stages send each other;
 *  - parameters, their gradients and the optimizer state stay fp32 (the masters), so
 *    snapshots are the same either way and a run may resume in the other precision;
 *  - element-wise math, layernorm, softmax and losses run in fp32 on those values.
 * The precision is one per process, set once before any math runs, as
 * pn_math_set_deterministic is (ops read it at dispatch). */
#ifndef PN_PRECISION_H
#define PN_PRECISION_H

#include "base/choices.h"

typedef enum pn_precision {
    PN_PRECISION_FP32 = 0,
    PN_PRECISION_BF16,
} pn_precision;

/* The names, in enum order: what --precision, the train key and --help read. */
extern const pn_choices pn_precisions;

void pn_math_set_precision(pn_precision p);
pn_precision pn_math_precision(void);

#endif
