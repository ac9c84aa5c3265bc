/* mse: mean squared error between a prediction and a target of one shape. The
 * output is the per-row loss mean_j (p - t)^2 as [rows, 1]; gradients reach both
 * inputs where they carry one. With lengths (either input's) padded rows have loss 0
 * and get no gradient. */
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct mse_scratch {
    pn_buffer sum;
} mse_scratch;

static int mse_infer(pn_layer *l)
{
    pn_shape p = l->in_shapes[0], t = l->in_shapes[1];
    if (p.ids || t.ids) return pn_attr_error(l, "input", "integer ids", "float inputs");
    if (p.width != t.width || p.seq != t.seq) {
        char a[32], b[32], found[96];
        snprintf(found, sizeof found, "a prediction of shape %s and a target of shape %s",
                 pn_shape_format(p, a, sizeof a), pn_shape_format(t, b, sizeof b));
        return pn_attr_error(l, "input", found, "a prediction and a target of one shape");
    }
    l->out_shape = pn_shape_dense(1, p.seq, false);
    return PN_OK;
}

static int mse_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    mse_scratch *s = x->scratch;
    PN_TRY(pn_mse_forward(&in[0]->value, &in[1]->value, &out->value));
    const int *lengths = pn_loss_lengths(in);
    if (lengths) PN_TRY(pn_zero_padded_rows(&out->value, out->shape.seq, lengths));
    return pn_layer_record_loss(x, &s->sum, &out->value, out->shape.seq, lengths, 0.0);
}

static int mse_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)x, (void)pass;
    const int *lengths = pn_loss_lengths(in), seq = out->shape.seq;
    if (!lengths)
        return pn_mse_backward(&in[0]->value, &in[1]->value, &out->grad,
                               in[0]->grad.data ? &in[0]->grad : NULL,
                               in[1]->grad.data ? &in[1]->grad : NULL);
    for (int b = 0; b < out->value.rows / seq; b++) { /* padded rows get no gradient */
        int r0 = b * seq, n = lengths[b];
        pn_matrix p = pn_matrix_rows(in[0]->value, r0, n), t = pn_matrix_rows(in[1]->value, r0, n);
        pn_matrix dl = pn_matrix_rows(out->grad, r0, n), dp, dt;
        if (in[0]->grad.data) dp = pn_matrix_rows(in[0]->grad, r0, n);
        if (in[1]->grad.data) dt = pn_matrix_rows(in[1]->grad, r0, n);
        PN_TRY(pn_mse_backward(&p, &t, &dl, in[0]->grad.data ? &dp : NULL,
                               in[1]->grad.data ? &dt : NULL));
    }
    return PN_OK;
}

static double mse_flops(const pn_layer *l)
{
    return 6.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static void mse_release(pn_layer_inst *x)
{
    mse_scratch *s = x->scratch;
    pn_buffer_release(&s->sum);
}

const pn_layer_type pn_layer_mse = {
    .name = "mse",
    .summary = "mean squared error of a prediction against a target of one shape",
    .min_inputs = 2,
    .max_inputs = 2,
    .is_loss = true,
    .loss_kind = PN_LOSS_SQUARED_ERROR,
    .scratch_size = sizeof(mse_scratch),
    .infer = mse_infer,
    .forward = mse_forward,
    .backward = mse_backward,
    .flops = mse_flops,
    .release = mse_release,
};
