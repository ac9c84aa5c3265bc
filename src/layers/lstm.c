/* lstm: a long short-term memory layer over each sample's sequence (Hochreiter and
 * Schmidhuber, without peepholes), Paddle's LstmLayer on SequenceToBatch.
 * Per step, gates [i f o g] = x Wx + h_prev Wh + b; i, f, o = sigmoid, g = tanh;
 * c = f .* c_prev + i .* g; h = o .* tanh(c); h_prev = c_prev = 0 at the first step.
 * The input's real rows are gathered time-major (layers/seq_batch.h) and projected by
 * one GEMM; each step then adds one GEMM over the samples still running. Outputs at
 * padded positions are zero and padded inputs get no gradient. With "reverse" every
 * sample is read from its last real position to its first.
 * Generation steps one position of every sequence at a time through the same cell,
 * carrying h and c from step to step (a reverse layer cannot). */
#include <math.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "layers/recurrent.h"
#include "layers/seq_batch.h"

typedef struct lstm_scratch {
    pn_seq_batch sb;
    pn_buffer xb;     /* [total, in] inputs in batch order */
    pn_buffer gates;  /* [total, 4H] activated gates i f o g */
    pn_buffer cell;   /* [total, H] c */
    pn_buffer tcell;  /* [total, H] tanh(c) */
    pn_buffer hid;    /* [total, H] h */
    pn_buffer dgates, dcell, dhid, tmp, dxb;
    pn_recurrent_state state; /* generation: [h c] of every sequence */
} lstm_scratch;

enum { WH = PN_RECURRENT_WH };

static int lstm_infer(pn_layer *l) { return pn_recurrent_infer(l, 4); }

static void lstm_declare(pn_layer *l) { pn_recurrent_declare(l, 4); }

/* One step of n sequences, the same in the forward and in generation: gt holds
 * x wx + b and becomes the activated gates [i f o g]; hp, cp (the previous h and c,
 * data NULL at a sequence's first step) give ct, tct = tanh(ct) and ht. */
static int lstm_cell(const pn_matrix *wh, pn_matrix gt, const pn_matrix *hp,
                     const pn_matrix *cp, pn_matrix *ct, pn_matrix *tct, pn_matrix *ht)
{
    int H = ct->cols;
    if (hp->data) PN_TRY(pn_gemm(false, false, 1.0f, hp, wh, 1.0f, &gt));
    pn_matrix sig = pn_matrix_cols(gt, 0, 3 * H), gi = pn_matrix_cols(gt, 0, H);
    pn_matrix gf = pn_matrix_cols(gt, H, H), go = pn_matrix_cols(gt, 2 * H, H);
    pn_matrix gg = pn_matrix_cols(gt, 3 * H, H);
    PN_TRY(pn_act_forward(PN_ACT_SIGMOID, &sig, &sig));
    PN_TRY(pn_act_forward(PN_ACT_TANH, &gg, &gg));
    if (cp->data) {
        PN_TRY(pn_mul(&gf, cp, 0.0f, ct));
        PN_TRY(pn_mul(&gi, &gg, 1.0f, ct));
    } else {
        PN_TRY(pn_mul(&gi, &gg, 0.0f, ct));
    }
    PN_TRY(pn_act_forward(PN_ACT_TANH, ct, tct));
    return pn_mul(&go, tct, 0.0f, ht);
}

static int lstm_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const pn_recurrent_attrs *s = x->layer->attrs;
    lstm_scratch *k = x->scratch;
    pn_seq_batch *sb = &k->sb;
    int H = s->size, seq = x->layer->out_shape.seq;
    pn_device dev = out->value.device;
    PN_TRY(pn_seq_batch_plan(sb, dev, in[0]->batch, seq, in[0]->lengths, s->reverse));
    PN_TRY(pn_fill(&out->value, 0.0f));
    if (sb->total == 0) return PN_OK;
    pn_matrix xb, g, c, tc, h;
    pn_matrix wh = pn_layer_param(x, WH);
    PN_TRY(pn_layer_scratch(&k->xb, dev, sb->total, in[0]->value.cols, &xb));
    PN_TRY(pn_layer_scratch(&k->gates, dev, sb->total, 4 * H, &g));
    PN_TRY(pn_layer_scratch(&k->cell, dev, sb->total, H, &c));
    PN_TRY(pn_layer_scratch(&k->tcell, dev, sb->total, H, &tc));
    PN_TRY(pn_layer_scratch(&k->hid, dev, sb->total, H, &h));
    PN_TRY(pn_gather_rows(&in[0]->value, sb->index, &xb));
    PN_TRY(pn_recurrent_project(x, &xb, &g));
    for (int t = 0; t < sb->steps; t++) {
        int n = sb->count[t], off = sb->offset[t], prev = t > 0 ? sb->offset[t - 1] : 0;
        pn_matrix ct = pn_matrix_rows(c, off, n), tct = pn_matrix_rows(tc, off, n);
        pn_matrix ht = pn_matrix_rows(h, off, n), hp = {0}, cp = {0};
        if (t > 0) hp = pn_matrix_rows(h, prev, n), cp = pn_matrix_rows(c, prev, n);
        PN_TRY(lstm_cell(&wh, pn_matrix_rows(g, off, n), &hp, &cp, &ct, &tct, &ht));
    }
    return pn_scatter_add_rows(&h, sb->index, &out->value);
}

/* Generation: position pos of every sequence, one row each, from the [h c] state the
 * step at pos - 1 left (pn_recurrent_state); the output is h. */
static int lstm_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out)
{
    lstm_scratch *k = x->scratch;
    int H = ((const pn_recurrent_attrs *)x->layer->attrs)->size, n = out->batch;
    pn_device dev = out->value.device;
    pn_matrix prev, next, g, tc, wh = pn_layer_param(x, WH);
    PN_TRY(pn_recurrent_step_begin(x, &k->state, pos, out, 2 * H, &prev, &next));
    PN_TRY(pn_layer_scratch(&k->gates, dev, n, 4 * H, &g));
    PN_TRY(pn_layer_scratch(&k->tcell, dev, n, H, &tc));
    PN_TRY(pn_recurrent_project(x, &in[0]->value, &g));
    pn_matrix hp = {0}, cp = {0};
    if (prev.data) hp = pn_matrix_cols(prev, 0, H), cp = pn_matrix_cols(prev, H, H);
    pn_matrix h = pn_matrix_cols(next, 0, H), c = pn_matrix_cols(next, H, H);
    PN_TRY(lstm_cell(&wh, g, &hp, &cp, &c, &tc, &h));
    PN_TRY(pn_copy(&h, &out->value));
    pn_recurrent_step_end(&k->state, n);
    return PN_OK;
}

static int lstm_step_reorder(pn_layer_inst *x, const int *from, int n, int len)
{
    (void)len;
    lstm_scratch *k = x->scratch;
    int H = ((const pn_recurrent_attrs *)x->layer->attrs)->size;
    return pn_recurrent_step_reorder(x, &k->state, from, n, 2 * H);
}

static int lstm_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                         pn_arg *out)
{
    (void)pass;
    const pn_recurrent_attrs *s = x->layer->attrs;
    lstm_scratch *k = x->scratch;
    pn_seq_batch *sb = &k->sb;
    int H = s->size, total = sb->total;
    if (total == 0) return PN_OK;
    pn_device dev = out->grad.device;
    pn_matrix xb = pn_matrix_on(&k->xb, total, in[0]->value.cols);
    pn_matrix g = pn_matrix_on(&k->gates, total, 4 * H), c = pn_matrix_on(&k->cell, total, H);
    pn_matrix tc = pn_matrix_on(&k->tcell, total, H), h = pn_matrix_on(&k->hid, total, H);
    pn_matrix dg, dc, dh, tmp;
    PN_TRY(pn_layer_scratch(&k->dgates, dev, total, 4 * H, &dg));
    PN_TRY(pn_layer_scratch(&k->dcell, dev, total, H, &dc));
    PN_TRY(pn_layer_scratch(&k->dhid, dev, total, H, &dh));
    PN_TRY(pn_layer_scratch(&k->tmp, dev, sb->batch, H, &tmp));
    PN_TRY(pn_gather_rows(&out->grad, sb->index, &dh));
    PN_TRY(pn_fill(&dc, 0.0f));
    pn_matrix wh = pn_layer_param(x, WH), dwh = pn_layer_param_grad(x, WH);
    for (int t = sb->steps - 1; t >= 0; t--) {
        int n = sb->count[t], off = sb->offset[t], prev = t > 0 ? sb->offset[t - 1] : 0;
        pn_matrix gt = pn_matrix_rows(g, off, n), dgt = pn_matrix_rows(dg, off, n);
        pn_matrix tct = pn_matrix_rows(tc, off, n), tm = pn_matrix_rows(tmp, 0, n);
        pn_matrix dht = pn_matrix_rows(dh, off, n), dct = pn_matrix_rows(dc, off, n);
        pn_matrix gi = pn_matrix_cols(gt, 0, H), gf = pn_matrix_cols(gt, H, H);
        pn_matrix go = pn_matrix_cols(gt, 2 * H, H), gg = pn_matrix_cols(gt, 3 * H, H);
        pn_matrix dgi = pn_matrix_cols(dgt, 0, H), dgf = pn_matrix_cols(dgt, H, H);
        pn_matrix dgo = pn_matrix_cols(dgt, 2 * H, H), dgg = pn_matrix_cols(dgt, 3 * H, H);
        /* dc += dh .* o .* tanh'(c); do = dh .* tanh(c) */
        PN_TRY(pn_mul(&dht, &go, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_TANH, NULL, &tct, &tm, 1.0f, &dct));
        PN_TRY(pn_mul(&dht, &tct, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_SIGMOID, NULL, &go, &tm, 0.0f, &dgo));
        PN_TRY(pn_mul(&dct, &gg, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_SIGMOID, NULL, &gi, &tm, 0.0f, &dgi));
        PN_TRY(pn_mul(&dct, &gi, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_TANH, NULL, &gg, &tm, 0.0f, &dgg));
        if (t == 0) {
            PN_TRY(pn_fill(&dgf, 0.0f));
            continue;
        }
        pn_matrix cp = pn_matrix_rows(c, prev, n), dcp = pn_matrix_rows(dc, prev, n);
        pn_matrix hp = pn_matrix_rows(h, prev, n), dhp = pn_matrix_rows(dh, prev, n);
        PN_TRY(pn_mul(&dct, &cp, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_SIGMOID, NULL, &gf, &tm, 0.0f, &dgf));
        PN_TRY(pn_mul(&dct, &gf, 1.0f, &dcp));
        PN_TRY(pn_gemm(false, true, 1.0f, &dgt, &wh, 1.0f, &dhp));
        PN_TRY(pn_gemm(true, false, 1.0f, &hp, &dgt, 1.0f, &dwh));
    }
    return pn_recurrent_project_backward(x, &xb, &dg, sb->index, &k->dxb, in[0]);
}

static double lstm_flops(const pn_layer *l) { return pn_recurrent_flops(l, 4); }

/* Kept per position: the input row and 7 H floats (4 gates, c, tanh(c), h). */
static double lstm_saved_bytes(const pn_layer *l) { return pn_recurrent_saved_bytes(l, 7); }

static void lstm_release(pn_layer_inst *x)
{
    lstm_scratch *k = x->scratch;
    pn_seq_batch_release(&k->sb);
    pn_recurrent_state_release(&k->state);
    pn_buffer *bufs[] = {&k->xb,     &k->gates, &k->cell, &k->tcell, &k->hid, &k->dgates,
                         &k->dcell, &k->dhid,  &k->tmp,  &k->dxb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pn_buffer_release(bufs[i]);
}

const pn_layer_type pn_layer_lstm = {
    .name = "lstm",
    .summary = "LSTM over each sample's sequence (respects lengths); attrs size, reverse",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(pn_recurrent_attrs),
    .scratch_size = sizeof(lstm_scratch),
    .attrs = pn_recurrent_attr_names,
    .parse = pn_recurrent_parse,
    .infer = lstm_infer,
    .declare = lstm_declare,
    .forward = lstm_forward,
    .backward = lstm_backward,
    .flops = lstm_flops,
    .saved_bytes = lstm_saved_bytes,
    .release = lstm_release,
    .step = lstm_step,
    .step_reorder = lstm_step_reorder,
};
