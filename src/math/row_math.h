/* The per-row and per-element math of softmax, the losses and layer norm, one text
 * for the CPU loops and the CUDA kernels. What each backend does its own way is the
 * order of a row's sums (lanes on the CPU, a tree of threads on the GPU); what a
 * value is computed from those sums is here, so the two differ only by the sums'
 * rounding. */
#ifndef PN_ROW_MATH_H
#define PN_ROW_MATH_H

#include <float.h>
#include <math.h>

#include "math/kernel_fn.h"

/* Columns row i of a softmax sees: all, or with a causal period T, 0..(i mod T). */
PN_KERNEL_FN int pn_rm_causal_cols(int row, int period, int cols)
{
    return period > 0 ? row % period + 1 : cols;
}

/* Cross-entropy: the loss of a row whose label has probability p (p clamped to the
 * smallest normal float, so a zero gives a large finite loss, not inf). */
PN_KERNEL_FN float pn_rm_xent_loss(float p) { return -logf(fmaxf(p, FLT_MIN)); }

/* The gradient of the logits at one column: dloss * (p - onehot). */
PN_KERNEL_FN float pn_rm_xent_grad(float dloss, float p, int is_label)
{
    return dloss * (p - (is_label ? 1.0f : 0.0f));
}

/* mse: the factor of (p - t) in a row's gradient, dloss * 2 / cols. */
PN_KERNEL_FN float pn_rm_mse_factor(float dloss, int cols) { return dloss * 2.0f / (float)cols; }

/* Layer norm, forward: 1 / sqrt(var + eps) from the sum of squared deviations ss of
 * n values (in double, as accumulated), and a normalized, scaled and shifted value. */
PN_KERNEL_FN float pn_rm_rstd(double ss, int n, float eps)
{
    return (float)(1.0 / sqrt(ss / n + eps));
}

PN_KERNEL_FN float pn_rm_layernorm_y(float x, float mu, float rs, float gamma, float beta)
{
    return (x - mu) * rs * gamma + beta;
}

/* Layer norm, backward: x normalized, and the input gradient from a row's means of
 * g = dy * gamma (mg) and of g * xhat (mgx). */
PN_KERNEL_FN float pn_rm_xhat(float x, float mu, float rs) { return (x - mu) * rs; }

PN_KERNEL_FN float pn_rm_layernorm_dx(float rs, float g, float mg, float xhat, float mgx)
{
    return rs * (g - mg - xhat * mgx);
}

#endif
