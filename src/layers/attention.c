/* attention: causal multi-head self-attention over sequences of fixed length T.
 * Rows are batch x T (position t of sample b is row b*T + t). Per layer:
 *   qkv = x Wqkv + bqkv                       [rows, 3C]
 *   per (sample, head): P = softmax(Q K^T / sqrt(C/H)) with causal mask   [T, T]
 *                       ctx = P V             [T, C/H] placed at the head's columns
 *   y = ctx Wo + bo                           [rows, C]
 * With lengths, keys past a sample's length are masked: the causal mask already
 * hides them from real queries, and padded queries attend to nothing (their rows
 * of P are 0), so the outputs at padded rows are 0 and padding gets no gradient.
 * qkv, P and ctx are kept for backward. Generation runs it one position at a time
 * over a key/value cache instead (attention_cache.c). */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "base/error.h"
#include "layers/attention.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

enum { QKV_W = ATTN_QKV_W, QKV_B = ATTN_QKV_B, OUT_W = ATTN_OUT_W, OUT_B = ATTN_OUT_B };

static const char *const attention_attr_names[] = {"heads", NULL};

static int attention_parse(pn_layer *l, const json_t *spec)
{
    attention_attrs *s = l->attrs;
    return pn_attr_int(l, spec, "heads", true, 1, 0, &s->heads);
}

static int attention_infer(pn_layer *l)
{
    const attention_attrs *s = l->attrs;
    pn_shape in = l->in_shapes[0];
    if (in.ids) return pn_attr_error(l, "input", "integer ids", "float values");
    if (in.width > INT_MAX / 3) { /* qkv has 3 C columns */
        char found[32];
        snprintf(found, sizeof found, "a width of %d", in.width);
        return pn_attr_error(l, "input", found, "a width of at most %d", INT_MAX / 3);
    }
    if (in.width % s->heads) {
        char found[32];
        snprintf(found, sizeof found, "%d", s->heads);
        return pn_attr_error(l, "heads", found, "a number of heads that divides the width %d",
                             in.width);
    }
    l->out_shape = in;
    return PN_OK;
}

static void attention_declare(pn_layer *l)
{
    int c = l->in_shapes[0].width;
    float limit_qkv = sqrtf(6.0f / (float)(c + 3 * c)), limit_out = sqrtf(6.0f / (float)(2 * c));
    pn_layer_add_param(l, "qkv_w", c, 3 * c, (pn_init){PN_INIT_UNIFORM, limit_qkv}, true);
    pn_layer_add_param(l, "qkv_b", 1, 3 * c, (pn_init){PN_INIT_ZEROS, 0}, false);
    pn_layer_add_param(l, "out_w", c, c, (pn_init){PN_INIT_UNIFORM, limit_out}, true);
    pn_layer_add_param(l, "out_b", 1, c, (pn_init){PN_INIT_ZEROS, 0}, false);
}

/* Views of one (sample, head): Q, K, V (or their gradients) inside qkv [rows, 3C],
 * the head's columns of ctx [rows, C], and its T x T probabilities. */
typedef struct head_views {
    pn_matrix q, k, v, ctx, p;
} head_views;

static head_views head(pn_matrix qkv, pn_matrix ctx, pn_matrix probs, int b, int h, int t,
                       int dh, int heads)
{
    int c = dh * heads;
    pn_matrix rows = pn_matrix_rows(qkv, b * t, t);
    head_views v;
    v.q = pn_matrix_cols(rows, h * dh, dh);
    v.k = pn_matrix_cols(rows, c + h * dh, dh);
    v.v = pn_matrix_cols(rows, 2 * c + h * dh, dh);
    v.ctx = pn_matrix_cols(pn_matrix_rows(ctx, b * t, t), h * dh, dh);
    v.p = pn_matrix_rows(probs, (b * heads + h) * t, t);
    return v;
}

static int attention_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    (void)pass;
    const pn_layer *l = x->layer;
    const attention_attrs *s = l->attrs;
    attention_scratch *k = x->scratch;
    int t = l->in_shapes[0].seq, c = l->in_shapes[0].width, dh = c / s->heads;
    int rows = out->value.rows, batch = out->batch;
    const int *lengths = in[0]->lengths;
    pn_device dev = out->value.device;
    pn_matrix qkv, probs, ctx;
    PN_TRY(pn_layer_scratch(&k->qkv, dev, rows, 3 * c, &qkv));
    PN_TRY(pn_layer_scratch(&k->probs, dev, batch * s->heads * t, t, &probs));
    PN_TRY(pn_layer_scratch(&k->ctx, dev, rows, c, &ctx));

    pn_matrix wqkv = pn_layer_param(x, QKV_W), bqkv = pn_layer_param(x, QKV_B);
    PN_TRY(pn_gemm(false, false, 1.0f, &in[0]->value, &wqkv, 0.0f, &qkv));
    PN_TRY(pn_add_row_vector(&bqkv, &qkv));
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < s->heads; h++) {
            head_views v = head(qkv, ctx, probs, b, h, t, dh, s->heads);
            PN_TRY(pn_gemm(false, true, 1.0f, &v.q, &v.k, 0.0f, &v.p));
            PN_TRY(pn_softmax_rows(&v.p, scale, t, &v.p));
            if (lengths && lengths[b] < t) { /* padded queries attend to nothing */
                pn_matrix pad = pn_matrix_rows(v.p, lengths[b], t - lengths[b]);
                PN_TRY(pn_fill(&pad, 0.0f));
            }
            PN_TRY(pn_gemm(false, false, 1.0f, &v.p, &v.v, 0.0f, &v.ctx));
        }
    pn_matrix wo = pn_layer_param(x, OUT_W), bo = pn_layer_param(x, OUT_B);
    PN_TRY(pn_gemm(false, false, 1.0f, &ctx, &wo, 0.0f, &out->value));
    PN_TRY(pn_add_row_vector(&bo, &out->value));
    return lengths ? pn_zero_padded_rows(&out->value, t, lengths) : PN_OK;
}

static int attention_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                              pn_arg *out)
{
    (void)pass;
    const pn_layer *l = x->layer;
    const attention_attrs *s = l->attrs;
    attention_scratch *k = x->scratch;
    int t = l->in_shapes[0].seq, c = l->in_shapes[0].width, dh = c / s->heads;
    int rows = out->value.rows, batch = out->batch;
    pn_device dev = out->value.device;
    pn_matrix qkv = pn_matrix_on(&k->qkv, rows, 3 * c);
    pn_matrix probs = pn_matrix_on(&k->probs, batch * s->heads * t, t);
    pn_matrix ctx = pn_matrix_on(&k->ctx, rows, c);
    pn_matrix dqkv, dctx, dscore;
    PN_TRY(pn_layer_scratch(&k->dqkv, dev, rows, 3 * c, &dqkv));
    PN_TRY(pn_layer_scratch(&k->dctx, dev, rows, c, &dctx));
    PN_TRY(pn_layer_scratch(&k->dscore, dev, 2 * t, t, &dscore));
    if (in[0]->lengths) /* outputs at padded positions are constant zeros */
        PN_TRY(pn_zero_padded_rows(&out->grad, t, in[0]->lengths));
    pn_matrix dp = pn_matrix_rows(dscore, 0, t), ds = pn_matrix_rows(dscore, t, t);

    /* Output projection. */
    pn_matrix wo = pn_layer_param(x, OUT_W);
    pn_matrix dwo = pn_layer_param_grad(x, OUT_W);
    pn_matrix dbo = pn_layer_param_grad(x, OUT_B);
    PN_TRY(pn_gemm(true, false, 1.0f, &ctx, &out->grad, 1.0f, &dwo));
    PN_TRY(pn_col_sums(&out->grad, 1.0f, &dbo));
    PN_TRY(pn_gemm(false, true, 1.0f, &out->grad, &wo, 0.0f, &dctx));

    /* Per (sample, head): through P V, the softmax and Q K^T. */
    float scale = 1.0f / sqrtf((float)dh);
    for (int b = 0; b < batch; b++)
        for (int h = 0; h < s->heads; h++) {
            head_views v = head(qkv, ctx, probs, b, h, t, dh, s->heads);
            head_views d = head(dqkv, dctx, probs, b, h, t, dh, s->heads);
            PN_TRY(pn_gemm(false, true, 1.0f, &d.ctx, &v.v, 0.0f, &dp));  /* dP = dctx V^T */
            PN_TRY(pn_gemm(true, false, 1.0f, &v.p, &d.ctx, 0.0f, &d.v));  /* dV = P^T dctx */
            PN_TRY(pn_act_backward(PN_ACT_SOFTMAX, NULL, &v.p, &dp, 0.0f, &ds));
            PN_TRY(pn_gemm(false, false, scale, &ds, &v.k, 0.0f, &d.q)); /* dQ = s dS K */
            PN_TRY(pn_gemm(true, false, scale, &ds, &v.q, 0.0f, &d.k));  /* dK = s dS^T Q */
        }

    /* Input projection. */
    pn_matrix wqkv = pn_layer_param(x, QKV_W);
    pn_matrix dwqkv = pn_layer_param_grad(x, QKV_W);
    pn_matrix dbqkv = pn_layer_param_grad(x, QKV_B);
    PN_TRY(pn_gemm(true, false, 1.0f, &in[0]->value, &dqkv, 1.0f, &dwqkv));
    PN_TRY(pn_col_sums(&dqkv, 1.0f, &dbqkv));
    if (in[0]->grad.data)
        PN_TRY(pn_gemm(false, true, 1.0f, &dqkv, &wqkv, pn_arg_grad_beta(in[0]), &in[0]->grad));
    return PN_OK;
}

static double attention_flops(const pn_layer *l)
{
    double t = l->in_shapes[0].seq, c = l->in_shapes[0].width;
    return 3.0 * (8.0 * t * c * c + 4.0 * t * t * c);
}

static double attention_saved_bytes(const pn_layer *l)
{
    const attention_attrs *s = l->attrs;
    double t = l->in_shapes[0].seq, c = l->in_shapes[0].width;
    return (t * 3.0 * c + s->heads * t * t + t * c) * sizeof(float);
}

/* The probabilities: heads x T rows per sample; the backward's work: 2 T. */
static int64_t attention_rows_per_sample(const pn_layer *l)
{
    const attention_attrs *s = l->attrs;
    return (int64_t)(s->heads > 2 ? s->heads : 2) * l->in_shapes[0].seq;
}

static void attention_release(pn_layer_inst *x)
{
    attention_scratch *k = x->scratch;
    pn_buffer *bufs[] = {&k->qkv, &k->probs, &k->ctx, &k->dqkv, &k->dctx, &k->dscore};
    for (int i = 0; i < 6; i++) pn_buffer_release(bufs[i]);
    pn_attention_cache_release(&k->cache);
}

/* The input (dWqkv) and its scratch (qkv, probabilities, context), not the output. */
static bool attention_backward_reads(const pn_layer *l, int k)
{
    (void)l;
    return k == 0;
}

const pn_layer_type pn_layer_attention = {
    .name = "attention",
    .summary = "causal multi-head self-attention over fixed-length sequences; attr heads",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(attention_attrs),
    .scratch_size = sizeof(attention_scratch),
    .attrs = attention_attr_names,
    .parse = attention_parse,
    .infer = attention_infer,
    .declare = attention_declare,
    .forward = attention_forward,
    .backward = attention_backward,
    .writes_stale_grads = true,
    .backward_reads = attention_backward_reads,
    .flops = attention_flops,
    .saved_bytes = attention_saved_bytes,
    .rows_per_sample = attention_rows_per_sample,
    .release = attention_release,
    .step = pn_attention_step,
    .step_reorder = pn_attention_step_reorder,
};
