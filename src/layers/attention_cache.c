/* attention, one position at a time: the incremental forward of generation. The keys
 * and values of every position a sequence has stepped through stay in the instance's
 * cache (attention.h), so position p costs one row of the projections and a 1 x (p+1)
 * score row per head instead of the whole window:
 *   qkv = x Wqkv + bqkv                         [n, 3C], one row per sequence
 *   K, V of row i -> cache rows i*T + p
 *   per (sequence, head): s = softmax(q K[0..p]^T / sqrt(C/H))  [1, p+1]
 *                         ctx = s V[0..p]
 *   y = ctx Wo + bo
 * which is the full forward's row p (its causal mask hides positions after p). A beam
 * search reorders the sequences between steps (pn_attention_step_reorder). */
#include <math.h>

#include "base/error.h"
#include "layers/attention.h"
#include "math/ops.h"

int pn_attention_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out)
{
    const pn_layer *l = x->layer;
    const attention_attrs *s = l->attrs;
    attention_cache *c = &((attention_scratch *)x->scratch)->cache;
    int t = l->in_shapes[0].seq, width = l->in_shapes[0].width, dh = width / s->heads;
    int n = out->batch;
    pn_device dev = out->value.device;
    if (pos == 0) {
        PN_TRY(pn_buffer_reserve(&c->kv, dev, (size_t)n * t * 2 * width * sizeof(float)));
        c->n = n;
    } else if (n > c->n) {
        return pn_error_set(PN_ERR_INTERNAL, "a step of %d sequences over a cache of %d", n,
                            c->n);
    }
    pn_matrix kv = pn_matrix_on(&c->kv, c->n * t, 2 * width), qkv, scores, ctx;
    PN_TRY(pn_layer_scratch(&c->qkv, dev, n, 3 * width, &qkv));
    PN_TRY(pn_layer_scratch(&c->scores, dev, 1, t, &scores));
    PN_TRY(pn_layer_scratch(&c->ctx, dev, n, width, &ctx));

    pn_matrix wqkv = pn_layer_param(x, ATTN_QKV_W), bqkv = pn_layer_param(x, ATTN_QKV_B);
    PN_TRY(pn_gemm(false, false, 1.0f, &in[0]->value, &wqkv, 0.0f, &qkv));
    PN_TRY(pn_add_row_vector(&bqkv, &qkv));
    float scale = 1.0f / sqrtf((float)dh);
    pn_matrix p = pn_matrix_cols(scores, 0, pos + 1);
    for (int i = 0; i < n; i++) {
        pn_matrix row = pn_matrix_rows(qkv, i, 1);
        pn_matrix new_kv = pn_matrix_cols(row, width, 2 * width);
        pn_matrix slot = pn_matrix_rows(kv, i * t + pos, 1);
        PN_TRY(pn_copy(&new_kv, &slot));
        pn_matrix seen = pn_matrix_rows(kv, i * t, pos + 1);
        for (int h = 0; h < s->heads; h++) {
            pn_matrix q = pn_matrix_cols(row, h * dh, dh);
            pn_matrix keys = pn_matrix_cols(seen, h * dh, dh);
            pn_matrix values = pn_matrix_cols(seen, width + h * dh, dh);
            pn_matrix head_ctx = pn_matrix_cols(pn_matrix_rows(ctx, i, 1), h * dh, dh);
            PN_TRY(pn_gemm(false, true, 1.0f, &q, &keys, 0.0f, &p));
            PN_TRY(pn_softmax_rows(&p, scale, 0, &p));
            PN_TRY(pn_gemm(false, false, 1.0f, &p, &values, 0.0f, &head_ctx));
        }
    }
    pn_matrix wo = pn_layer_param(x, ATTN_OUT_W), bo = pn_layer_param(x, ATTN_OUT_B);
    PN_TRY(pn_gemm(false, false, 1.0f, &ctx, &wo, 0.0f, &out->value));
    return pn_add_row_vector(&bo, &out->value);
}

/* Sequence i takes sequence from[i]'s first len cached positions, into the spare
 * buffer, which then becomes the cache (so n may differ from the sequences held). */
int pn_attention_step_reorder(pn_layer_inst *x, const int *from, int n, int len)
{
    const pn_layer *l = x->layer;
    attention_cache *c = &((attention_scratch *)x->scratch)->cache;
    int t = l->in_shapes[0].seq, width = l->in_shapes[0].width;
    if (len > t || !c->kv.data)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': reorder of %d positions of a cache "
                                             "of %d", l->name, len, c->kv.data ? t : 0);
    PN_TRY(pn_buffer_reserve(&c->spare, c->kv.device,
                             (size_t)n * t * 2 * width * sizeof(float)));
    pn_matrix kv = pn_matrix_on(&c->kv, c->n * t, 2 * width);
    pn_matrix spare = pn_matrix_on(&c->spare, n * t, 2 * width);
    for (int i = 0; i < n; i++) {
        if (from[i] < 0 || from[i] >= c->n)
            return pn_error_set(PN_ERR_INTERNAL, "layer '%s': reorder from sequence %d of %d",
                                l->name, from[i], c->n);
        pn_matrix src = pn_matrix_rows(kv, from[i] * t, len);
        pn_matrix dst = pn_matrix_rows(spare, i * t, len);
        PN_TRY(pn_copy(&src, &dst));
    }
    pn_buffer held = c->kv;
    c->kv = c->spare;
    c->spare = held;
    c->n = n;
    return PN_OK;
}

void pn_attention_cache_release(attention_cache *c)
{
    pn_buffer *bufs[] = {&c->kv, &c->spare, &c->qkv, &c->scores, &c->ctx};
    for (int i = 0; i < 5; i++) pn_buffer_release(bufs[i]);
    c->n = 0;
}
