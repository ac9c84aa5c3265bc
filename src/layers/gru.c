/* gru: a gated recurrent unit over each sample's sequence (Cho et al.), Paddle's
 * GatedRecurrentLayer on SequenceToBatch. Per step, with Wh = [Wh_zr Wh_n]:
 * [z r] = sigmoid(x Wx_zr + h_prev Wh_zr + b_zr); n = tanh(x Wx_n + (r .* h_prev) Wh_n
 * + b_n); h = z .* n + (1 - z) .* h_prev; h_prev = 0 at the first step.
 * The input's real rows are gathered time-major (layers/seq_batch.h) and projected by
 * one GEMM; each step adds two GEMMs over the samples still running. Outputs at
 * padded positions are zero and padded inputs get no gradient; "reverse" reads every
 * sample from its last real position to its first.
 * Generation steps one position of every sequence at a time through the same cell,
 * carrying h from step to step (a reverse layer cannot). */
#include <math.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "layers/recurrent.h"
#include "layers/seq_batch.h"

typedef struct gru_scratch {
    pn_seq_batch sb;
    pn_buffer xb;    /* [total, in] inputs in batch order */
    pn_buffer gates; /* [total, 3H] activated z r n */
    pn_buffer rh;    /* [total, H] r .* h_prev */
    pn_buffer hid;   /* [total, H] h */
    pn_buffer dgates, dhid, tmp, tmp2, dxb;
    pn_recurrent_state state; /* generation: h of every sequence */
} gru_scratch;

enum { WH = PN_RECURRENT_WH };

static int gru_infer(pn_layer *l) { return pn_recurrent_infer(l, 3); }

static void gru_declare(pn_layer *l) { pn_recurrent_declare(l, 3); }

/* One step of n sequences, the same in the forward and in generation: gt holds
 * x wx + b and becomes the activated gates [z r n]; hp (the previous h, data NULL at
 * a sequence's first step) gives rht = r .* hp (kept for backward) and ht. */
static int gru_cell(const pn_matrix *wh, pn_matrix gt, const pn_matrix *hp, pn_matrix *rht,
                    pn_matrix *ht)
{
    int H = ht->cols;
    pn_matrix wh_zr = pn_matrix_cols(*wh, 0, 2 * H), wh_n = pn_matrix_cols(*wh, 2 * H, H);
    pn_matrix gzr = pn_matrix_cols(gt, 0, 2 * H), gz = pn_matrix_cols(gt, 0, H);
    pn_matrix gr = pn_matrix_cols(gt, H, H), gn = pn_matrix_cols(gt, 2 * H, H);
    if (hp->data) PN_TRY(pn_gemm(false, false, 1.0f, hp, &wh_zr, 1.0f, &gzr));
    PN_TRY(pn_act_forward(PN_ACT_SIGMOID, &gzr, &gzr));
    if (hp->data) {
        PN_TRY(pn_mul(&gr, hp, 0.0f, rht));
        PN_TRY(pn_gemm(false, false, 1.0f, rht, &wh_n, 1.0f, &gn));
    }
    PN_TRY(pn_act_forward(PN_ACT_TANH, &gn, &gn));
    if (!hp->data) return pn_mul(&gz, &gn, 0.0f, ht);
    /* h = h_prev + z .* (n - h_prev) */
    PN_TRY(pn_copy(&gn, ht));
    PN_TRY(pn_axpy(-1.0f, hp, ht));
    PN_TRY(pn_mul(&gz, ht, 0.0f, ht));
    return pn_axpy(1.0f, hp, ht);
}

static int gru_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const pn_recurrent_attrs *s = x->layer->attrs;
    gru_scratch *k = x->scratch;
    pn_seq_batch *sb = &k->sb;
    int H = s->size, seq = x->layer->out_shape.seq;
    pn_device dev = out->value.device;
    PN_TRY(pn_seq_batch_plan(sb, dev, in[0]->batch, seq, in[0]->lengths, s->reverse));
    PN_TRY(pn_fill(&out->value, 0.0f));
    if (sb->total == 0) return PN_OK;
    pn_matrix xb, g, rh, h;
    pn_matrix wh = pn_layer_param(x, WH);
    PN_TRY(pn_layer_scratch(&k->xb, dev, sb->total, in[0]->value.cols, &xb));
    PN_TRY(pn_layer_scratch(&k->gates, dev, sb->total, 3 * H, &g));
    PN_TRY(pn_layer_scratch(&k->rh, dev, sb->total, H, &rh));
    PN_TRY(pn_layer_scratch(&k->hid, dev, sb->total, H, &h));
    PN_TRY(pn_gather_rows(&in[0]->value, sb->index, &xb));
    PN_TRY(pn_recurrent_project(x, &xb, &g));
    for (int t = 0; t < sb->steps; t++) {
        int n = sb->count[t], off = sb->offset[t];
        pn_matrix ht = pn_matrix_rows(h, off, n), rht = pn_matrix_rows(rh, off, n), hp = {0};
        if (t > 0) hp = pn_matrix_rows(h, sb->offset[t - 1], n);
        PN_TRY(gru_cell(&wh, pn_matrix_rows(g, off, n), &hp, &rht, &ht));
    }
    return pn_scatter_add_rows(&h, sb->index, &out->value);
}

/* Generation: position pos of every sequence, one row each, from the h the step at
 * pos - 1 left (pn_recurrent_state). */
static int gru_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out)
{
    gru_scratch *k = x->scratch;
    int H = ((const pn_recurrent_attrs *)x->layer->attrs)->size, n = out->batch;
    pn_device dev = out->value.device;
    pn_matrix prev, next, g, rh, wh = pn_layer_param(x, WH);
    PN_TRY(pn_recurrent_step_begin(x, &k->state, pos, out, H, &prev, &next));
    PN_TRY(pn_layer_scratch(&k->gates, dev, n, 3 * H, &g));
    PN_TRY(pn_layer_scratch(&k->rh, dev, n, H, &rh));
    PN_TRY(pn_recurrent_project(x, &in[0]->value, &g));
    PN_TRY(gru_cell(&wh, g, &prev, &rh, &next));
    PN_TRY(pn_copy(&next, &out->value));
    pn_recurrent_step_end(&k->state, n);
    return PN_OK;
}

static int gru_step_reorder(pn_layer_inst *x, const int *from, int n, int len)
{
    (void)len;
    gru_scratch *k = x->scratch;
    int H = ((const pn_recurrent_attrs *)x->layer->attrs)->size;
    return pn_recurrent_step_reorder(x, &k->state, from, n, H);
}

static int gru_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const pn_recurrent_attrs *s = x->layer->attrs;
    gru_scratch *k = x->scratch;
    pn_seq_batch *sb = &k->sb;
    int H = s->size, total = sb->total;
    if (total == 0) return PN_OK;
    pn_device dev = out->grad.device;
    pn_matrix xb = pn_matrix_on(&k->xb, total, in[0]->value.cols);
    pn_matrix g = pn_matrix_on(&k->gates, total, 3 * H), rh = pn_matrix_on(&k->rh, total, H);
    pn_matrix h = pn_matrix_on(&k->hid, total, H);
    pn_matrix dg, dh, tmp, tmp2;
    PN_TRY(pn_layer_scratch(&k->dgates, dev, total, 3 * H, &dg));
    PN_TRY(pn_layer_scratch(&k->dhid, dev, total, H, &dh));
    PN_TRY(pn_layer_scratch(&k->tmp, dev, sb->batch, H, &tmp));
    PN_TRY(pn_layer_scratch(&k->tmp2, dev, sb->batch, H, &tmp2));
    PN_TRY(pn_gather_rows(&out->grad, sb->index, &dh));
    pn_matrix wh = pn_layer_param(x, WH), dwh = pn_layer_param_grad(x, WH);
    pn_matrix wh_zr = pn_matrix_cols(wh, 0, 2 * H), wh_n = pn_matrix_cols(wh, 2 * H, H);
    pn_matrix dwh_zr = pn_matrix_cols(dwh, 0, 2 * H), dwh_n = pn_matrix_cols(dwh, 2 * H, H);
    for (int t = sb->steps - 1; t >= 0; t--) {
        int n = sb->count[t], off = sb->offset[t], prev = t > 0 ? sb->offset[t - 1] : 0;
        pn_matrix gt = pn_matrix_rows(g, off, n), dgt = pn_matrix_rows(dg, off, n);
        pn_matrix gz = pn_matrix_cols(gt, 0, H), gr = pn_matrix_cols(gt, H, H);
        pn_matrix gn = pn_matrix_cols(gt, 2 * H, H), dgzr = pn_matrix_cols(dgt, 0, 2 * H);
        pn_matrix dgz = pn_matrix_cols(dgt, 0, H), dgr = pn_matrix_cols(dgt, H, H);
        pn_matrix dgn = pn_matrix_cols(dgt, 2 * H, H), dht = pn_matrix_rows(dh, off, n);
        pn_matrix tm = pn_matrix_rows(tmp, 0, n), tm2 = pn_matrix_rows(tmp2, 0, n);
        pn_matrix hp = pn_matrix_rows(h, prev, n), dhp = pn_matrix_rows(dh, prev, n);
        /* dn = dh .* z; dz = dh .* (n - h_prev) */
        PN_TRY(pn_mul(&dht, &gz, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_TANH, NULL, &gn, &tm, 0.0f, &dgn));
        PN_TRY(pn_copy(&gn, &tm));
        if (t > 0) PN_TRY(pn_axpy(-1.0f, &hp, &tm));
        PN_TRY(pn_mul(&dht, &tm, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_SIGMOID, NULL, &gz, &tm, 0.0f, &dgz));
        if (t == 0) {
            PN_TRY(pn_fill(&dgr, 0.0f));
            continue;
        }
        pn_matrix rht = pn_matrix_rows(rh, off, n);
        /* dh_prev += dh .* (1 - z) */
        PN_TRY(pn_axpy(1.0f, &dht, &dhp));
        PN_TRY(pn_mul(&dht, &gz, 0.0f, &tm));
        PN_TRY(pn_axpy(-1.0f, &tm, &dhp));
        /* d(r .* h_prev) = dn Wh_n^T; dr = that .* h_prev; dh_prev += that .* r */
        PN_TRY(pn_gemm(false, true, 1.0f, &dgn, &wh_n, 0.0f, &tm2));
        PN_TRY(pn_gemm(true, false, 1.0f, &rht, &dgn, 1.0f, &dwh_n));
        PN_TRY(pn_mul(&tm2, &hp, 0.0f, &tm));
        PN_TRY(pn_act_backward(PN_ACT_SIGMOID, NULL, &gr, &tm, 0.0f, &dgr));
        PN_TRY(pn_mul(&tm2, &gr, 1.0f, &dhp));
        PN_TRY(pn_gemm(false, true, 1.0f, &dgzr, &wh_zr, 1.0f, &dhp));
        PN_TRY(pn_gemm(true, false, 1.0f, &hp, &dgzr, 1.0f, &dwh_zr));
    }
    return pn_recurrent_project_backward(x, &xb, &dg, sb->index, &k->dxb, in[0]);
}

static double gru_flops(const pn_layer *l) { return pn_recurrent_flops(l, 3); }

/* Kept per position: the input row and 5 H floats (3 gates, r h_prev, h). */
static double gru_saved_bytes(const pn_layer *l) { return pn_recurrent_saved_bytes(l, 5); }

static void gru_release(pn_layer_inst *x)
{
    gru_scratch *k = x->scratch;
    pn_seq_batch_release(&k->sb);
    pn_recurrent_state_release(&k->state);
    pn_buffer *bufs[] = {&k->xb,   &k->gates, &k->rh,   &k->hid, &k->dgates,
                         &k->dhid, &k->tmp,   &k->tmp2, &k->dxb};
    for (size_t i = 0; i < sizeof bufs / sizeof *bufs; i++) pn_buffer_release(bufs[i]);
}

const pn_layer_type pn_layer_gru = {
    .name = "gru",
    .summary = "GRU over each sample's sequence (respects lengths); attrs size, reverse",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(pn_recurrent_attrs),
    .scratch_size = sizeof(gru_scratch),
    .attrs = pn_recurrent_attr_names,
    .parse = pn_recurrent_parse,
    .infer = gru_infer,
    .declare = gru_declare,
    .forward = gru_forward,
    .backward = gru_backward,
    .flops = gru_flops,
    .saved_bytes = gru_saved_bytes,
    .release = gru_release,
    .step = gru_step,
    .step_reorder = gru_step_reorder,
};
