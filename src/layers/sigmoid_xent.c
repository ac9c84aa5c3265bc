/* sigmoid_xent: binary cross-entropy of one logit z per row against a label y in
 * {0, 1} (ids), in the stable form: with u = (1 - 2y) z, the loss
 * -log sigmoid(-u) = max(u, 0) + log(1 + exp(-|u|)), which never takes the log of a
 * probability that underflowed (|z| of 100 gives 100, not an infinity or a cap).
 * The gradient at z is dy (sigmoid(z) - y) = dy (1 - 2y) sigmoid(u). Composed from
 * existing ops: the -log of sigmoid(|u|), which lies in [0.5, 1], is xent's -log.
 * Forwards that do not train count each row's sigmoid into the instance's AUC
 * histogram (layers/auc.h). With lengths, padded rows have loss 0, get no gradient
 * and are not counted. A label outside {0, 1} is refused by the data reader (which
 * names the file and the sample, through id_limit) and by the gather here. */
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "math/device.h"

typedef struct bxent_scratch {
    pn_buffer table;  /* [2, 2]: label y -> (1 - 2y, y) */
    pn_buffer labels; /* [rows, 2]: the table's rows of the labels */
    pn_buffer u;      /* [rows, 1]: (1 - 2y) z, kept for backward */
    pn_buffer work;   /* [rows, 1]: max(u, 0), then the gradient's factor */
    pn_buffer prob;   /* [rows, 1]: sigmoid(|u|), then sigmoid(u) */
    pn_buffer zeros;  /* [rows] int zeros: xent's label for its one column */
    pn_buffer host;   /* [rows, 3] host: logits and labels for the AUC */
    pn_buffer sum;
} bxent_scratch;

static int bxent_infer(pn_layer *l)
{
    pn_shape logits = l->in_shapes[0], labels = l->in_shapes[1];
    char found[64];
    if (logits.ids) return pn_attr_error(l, "input", "integer ids", "float logits as input 0");
    if (!labels.ids)
        return pn_attr_error(l, "input", "float values as input 1",
                             "0/1 labels as input 1 (a data input with \"ids\": true)");
    snprintf(found, sizeof found, "%d logits per row", logits.width);
    if (logits.width != 1) return pn_attr_error(l, "input", found, "one logit per row");
    snprintf(found, sizeof found, "%d labels per sample", labels.seq);
    if (labels.seq != logits.seq)
        return pn_attr_error(l, "input", found, "as many labels per sample as logits (%d)",
                             logits.seq);
    l->out_shape = (pn_shape){.width = 1, .seq = logits.seq};
    return PN_OK;
}

/* The labels' columns (1 - 2y) and y as floats, from the ids on the device. */
static int label_columns(bxent_scratch *s, const pn_arg *labels, int rows, pn_device dev,
                         pn_matrix *out)
{
    static const float rows_of[4] = {1.0f, 0.0f, -1.0f, 1.0f};
    pn_matrix table;
    PN_TRY(pn_layer_scratch(&s->table, dev, 2, 2, &table));
    PN_TRY(pn_matrix_write(&table, rows_of));
    PN_TRY(pn_layer_scratch(&s->labels, dev, rows, 2, out));
    return pn_gather_rows(&table, labels->ids, out);
}

/* Adds the real rows' logits and labels to the AUC histogram (read to the host). */
static int count_auc(pn_layer_inst *x, const pn_matrix *z, const pn_matrix *labels, int seq,
                     const int *lengths)
{
    bxent_scratch *s = x->scratch;
    pn_matrix host;
    PN_TRY(pn_layer_scratch(&s->host, pn_device_host(), z->rows, 3, &host));
    float *zh = host.data, *yh = host.data + z->rows;
    PN_TRY(pn_matrix_read(z, zh));
    PN_TRY(pn_matrix_read(labels, yh));
    for (int r = 0; r < z->rows; r++)
        if (!lengths || r % seq < lengths[r / seq])
            pn_auc_add(x->auc, zh[r], yh[2 * r + 1] > 0.5f);
    return PN_OK;
}

static int bxent_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    bxent_scratch *s = x->scratch;
    const pn_matrix *z = &in[0]->value;
    int rows = z->rows, seq = out->shape.seq;
    pn_device dev = z->device;
    pn_matrix labels, u, work, prob, zeros, *loss = &out->value;
    double ignored;
    PN_TRY(label_columns(s, in[1], rows, dev, &labels));
    pn_matrix sign = pn_matrix_cols(labels, 0, 1);
    PN_TRY(pn_layer_scratch(&s->u, dev, rows, 1, &u));
    PN_TRY(pn_layer_scratch(&s->work, dev, rows, 1, &work));
    PN_TRY(pn_layer_scratch(&s->prob, dev, rows, 1, &prob));
    PN_TRY(pn_layer_scratch(&s->zeros, dev, rows, 1, &zeros));
    PN_TRY(pn_fill(&zeros, 0.0f)); /* +0.0f has the bits of the int 0 */
    PN_TRY(pn_mul(z, &sign, 0.0f, &u));
    PN_TRY(pn_act_forward(PN_ACT_RELU, &u, &work));             /* max(u, 0) */
    PN_TRY(pn_copy(&u, &prob));
    PN_TRY(pn_scale(&prob, -1.0f));
    PN_TRY(pn_axpy(2.0f, &work, &prob));                        /* |u| */
    PN_TRY(pn_act_forward(PN_ACT_SIGMOID, &prob, &prob));       /* in [0.5, 1] */
    PN_TRY(pn_xent_forward(&prob, (const int *)zeros.data, loss, &ignored));
    PN_TRY(pn_axpy(1.0f, &work, loss));
    const int *lengths = pn_loss_lengths(in);
    if (lengths) PN_TRY(pn_zero_padded_rows(loss, seq, lengths));
    if (!pass->training) PN_TRY(count_auc(x, z, &labels, seq, lengths));
    return pn_layer_record_loss(x, &s->sum, loss, seq, lengths, 0.0);
}

static int bxent_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                          pn_arg *out)
{
    (void)pass;
    bxent_scratch *s = x->scratch;
    if (!in[0]->grad.data) return PN_OK;
    int rows = in[0]->value.rows;
    pn_matrix u = pn_matrix_on(&s->u, rows, 1), work = pn_matrix_on(&s->work, rows, 1);
    pn_matrix prob = pn_matrix_on(&s->prob, rows, 1);
    pn_matrix sign = pn_matrix_cols(pn_matrix_on(&s->labels, rows, 2), 0, 1);
    PN_TRY(pn_act_forward(PN_ACT_SIGMOID, &u, &prob));
    PN_TRY(pn_mul(&prob, &sign, 0.0f, &work)); /* sigmoid(z) - y */
    const int *lengths = pn_loss_lengths(in);
    if (lengths) PN_TRY(pn_zero_padded_rows(&work, out->shape.seq, lengths));
    return pn_mul(&out->grad, &work, pn_arg_grad_beta(in[0]), &in[0]->grad);
}

static double bxent_flops(const pn_layer *l) { return 16.0 * l->in_shapes[0].seq; }

static double bxent_saved_bytes(const pn_layer *l)
{
    return 3.0 * l->in_shapes[0].seq * sizeof(float);
}

static int bxent_id_limit(const pn_layer *l, int k)
{
    (void)l;
    return k == 1 ? 2 : 0;
}

static void bxent_release(pn_layer_inst *x)
{
    bxent_scratch *s = x->scratch;
    pn_buffer_release(&s->table);
    pn_buffer_release(&s->labels);
    pn_buffer_release(&s->u);
    pn_buffer_release(&s->work);
    pn_buffer_release(&s->prob);
    pn_buffer_release(&s->zeros);
    pn_buffer_release(&s->host);
    pn_buffer_release(&s->sum);
}

const pn_layer_type pn_layer_sigmoid_xent = {
    .name = "sigmoid_xent",
    .summary = "binary cross-entropy of one logit per row against 0/1 labels; AUC",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = true,
    .loss_kind = PN_LOSS_BINARY,
    .scratch_size = sizeof(bxent_scratch),
    .infer = bxent_infer,
    .forward = bxent_forward,
    .backward = bxent_backward,
    .writes_stale_grads = true,
    .flops = bxent_flops,
    .saved_bytes = bxent_saved_bytes,
    .release = bxent_release,
    .id_limit = bxent_id_limit,
};
