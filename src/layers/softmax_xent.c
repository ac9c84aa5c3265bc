/* softmax_xent: softmax over each row of logits and cross-entropy against integer
 * labels. The output is the per-row loss [rows, 1]; backward scales each row's
 * gradient by the output gradient, so the caller decides the mean (1/global rows).
 * With lengths (the logits' or the labels') only real positions count: padded rows
 * have loss 0, are never counted right and get no gradient. */
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct xent_scratch {
    pn_buffer probs; /* [rows, classes], kept for backward */
    pn_buffer sum;
} xent_scratch;

static int xent_infer(pn_layer *l)
{
    pn_shape logits = l->in_shapes[0], labels = l->in_shapes[1];
    char found[64];
    if (logits.ids) return pn_attr_error(l, "input", "integer ids", "float logits as input 0");
    if (!labels.ids)
        return pn_attr_error(l, "input", "float values as input 1",
                             "integer labels as input 1 (a data input with \"ids\": true)");
    if (logits.width < 2) return pn_attr_error(l, "input", "1 class", "at least 2 classes");
    snprintf(found, sizeof found, "%d labels per sample", labels.seq);
    if (labels.seq != logits.seq)
        return pn_attr_error(l, "input", found, "as many labels per sample as rows of logits (%d)",
                             logits.seq);
    l->out_shape = pn_shape_dense(1, logits.seq, false);
    return PN_OK;
}

static int xent_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    xent_scratch *s = x->scratch;
    pn_matrix probs;
    double correct;
    pn_matrix *logits = &in[0]->value;
    PN_TRY(pn_layer_scratch(&s->probs, logits->device, logits->rows, logits->cols, &probs));
    PN_TRY(pn_softmax_rows(logits, 1.0f, 0, &probs));
    const int *lengths = pn_loss_lengths(in), seq = out->shape.seq;
    if (!lengths) {
        PN_TRY(pn_xent_forward(&probs, in[1]->ids, &out->value, &correct));
        return pn_layer_record_loss(x, &s->sum, &out->value, seq, NULL, correct);
    }
    correct = 0.0; /* each sample's real rows, so that padding is never counted right */
    for (int b = 0; b < out->value.rows / seq; b++) {
        pn_matrix p = pn_matrix_rows(probs, b * seq, lengths[b]);
        pn_matrix l = pn_matrix_rows(out->value, b * seq, lengths[b]);
        double hits;
        PN_TRY(pn_xent_forward(&p, in[1]->ids + (size_t)b * seq, &l, &hits));
        correct += hits;
    }
    PN_TRY(pn_zero_padded_rows(&out->value, seq, lengths));
    return pn_layer_record_loss(x, &s->sum, &out->value, seq, lengths, correct);
}

static int xent_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                         pn_arg *out)
{
    (void)pass;
    xent_scratch *s = x->scratch;
    if (!in[0]->grad.data) return PN_OK;
    pn_matrix probs = pn_matrix_on(&s->probs, in[0]->value.rows, in[0]->value.cols);
    const int *lengths = pn_loss_lengths(in), seq = out->shape.seq;
    if (!lengths)
        return pn_xent_backward(&probs, in[1]->ids, &out->grad, pn_arg_grad_beta(in[0]),
                                &in[0]->grad);
    PN_TRY(pn_arg_grad_zero_stale(in[0])); /* padded rows are not written below */
    for (int b = 0; b < out->value.rows / seq; b++) { /* padded rows get no gradient */
        pn_matrix p = pn_matrix_rows(probs, b * seq, lengths[b]);
        pn_matrix dl = pn_matrix_rows(out->grad, b * seq, lengths[b]);
        pn_matrix dx = pn_matrix_rows(in[0]->grad, b * seq, lengths[b]);
        PN_TRY(pn_xent_backward(&p, in[1]->ids + (size_t)b * seq, &dl, 1.0f, &dx));
    }
    return PN_OK;
}

static double xent_flops(const pn_layer *l)
{
    return 8.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static double xent_saved_bytes(const pn_layer *l)
{
    return (double)l->in_shapes[0].seq * l->in_shapes[0].width * sizeof(float);
}

static int xent_id_limit(const pn_layer *l, int k) { return k == 1 ? l->in_shapes[0].width : 0; }

static void xent_release(pn_layer_inst *x)
{
    xent_scratch *s = x->scratch;
    pn_buffer_release(&s->probs);
    pn_buffer_release(&s->sum);
}

/* The probabilities kept in scratch and the labels, not the logits' values. */
static bool xent_backward_reads(const pn_layer *l, int k)
{
    (void)l;
    return k != 0;
}

const pn_layer_type pn_layer_softmax_xent = {
    .name = "softmax_xent",
    .summary = "softmax cross-entropy of logits against integer labels; counts hits",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = true,
    .loss_kind = PN_LOSS_CLASSIFICATION,
    .scratch_size = sizeof(xent_scratch),
    .infer = xent_infer,
    .forward = xent_forward,
    .backward = xent_backward,
    .writes_stale_grads = true,
    .backward_reads = xent_backward_reads,
    .flops = xent_flops,
    .saved_bytes = xent_saved_bytes,
    .release = xent_release,
    .id_limit = xent_id_limit,
};
