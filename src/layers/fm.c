/* fm: the second-order factorization-machine term over the F field embeddings of each
 * sample (its seq rows of width k, as an embedding of F ids gives them):
 * 0.5 * sum_k ((sum_f v_fk)^2 - sum_f v_fk^2), one value per sample, O(F k) as in
 * Rendle's identity (Angel's BiInnerSumCross). The gradient at v_f is
 * dy * (sum_f' v_f' - v_f). Every row of a sample is a field: an input with lengths
 * (padding) is refused. */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "layers/rowvec.h"

typedef struct fm_scratch {
    pn_buffer sum;   /* [batch, k]: sum over the fields, kept for backward */
    pn_buffer wide;  /* [batch, F k]: squares, then sum - v */
    pn_buffer wide2; /* [batch, F k]: dy broadcast */
    pn_buffer sq;    /* [batch, k] */
    pn_buffer ones;
} fm_scratch;

static int fm_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float field embeddings");
    l->out_shape = (pn_shape){.width = 1, .seq = 1};
    return PN_OK;
}

/* The input as [batch, F k]: sample b's fields side by side. */
static pn_matrix fields_flat(pn_matrix m, const pn_arg *a)
{
    return pn_matrix_reshape(m, a->batch, a->shape.seq * a->shape.width);
}

static int fm_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    fm_scratch *s = x->scratch;
    PN_TRY(pn_layer_refuse_lengths(x, in[0]));
    int batch = in[0]->batch, fields = in[0]->shape.seq, k = in[0]->shape.width;
    pn_matrix v = fields_flat(in[0]->value, in[0]), sum, sq, wide;
    pn_device dev = v.device;
    PN_TRY(pn_layer_scratch(&s->sum, dev, batch, k, &sum));
    PN_TRY(pn_layer_scratch(&s->sq, dev, batch, k, &sq));
    PN_TRY(pn_layer_scratch(&s->wide, dev, batch, fields * k, &wide));
    PN_TRY(pn_fill(&sum, 0.0f));
    for (int f = 0; f < fields; f++) {
        pn_matrix vf = pn_matrix_cols(v, f * k, k);
        PN_TRY(pn_axpy(1.0f, &vf, &sum));
    }
    PN_TRY(pn_mul(&sum, &sum, 0.0f, &sq));
    PN_TRY(pn_mul(&v, &v, 0.0f, &wide));
    PN_TRY(pn_row_sums(&sq, &s->ones, 0.5f, 0.0f, &out->value));
    return pn_row_sums(&wide, &s->ones, -0.5f, 1.0f, &out->value);
}

static int fm_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    fm_scratch *s = x->scratch;
    if (!in[0]->grad.data) return PN_OK;
    int batch = in[0]->batch, fields = in[0]->shape.seq, k = in[0]->shape.width;
    pn_matrix v = fields_flat(in[0]->value, in[0]), dv = fields_flat(in[0]->grad, in[0]);
    pn_matrix sum = pn_matrix_on(&s->sum, batch, k), diff, dy;
    PN_TRY(pn_layer_scratch(&s->wide, v.device, batch, fields * k, &diff));
    PN_TRY(pn_layer_scratch(&s->wide2, v.device, batch, fields * k, &dy));
    for (int f = 0; f < fields; f++) { /* diff = sum - v, field by field */
        pn_matrix df = pn_matrix_cols(diff, f * k, k);
        PN_TRY(pn_copy(&sum, &df));
    }
    PN_TRY(pn_axpy(-1.0f, &v, &diff));
    PN_TRY(pn_broadcast_col(&out->grad, &s->ones, 0.0f, &dy));
    return pn_mul(&dy, &diff, pn_arg_grad_beta(in[0]), &dv);
}

static double fm_flops(const pn_layer *l)
{
    return 12.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static double fm_saved_bytes(const pn_layer *l)
{
    return (double)l->in_shapes[0].width * sizeof(float);
}

static void fm_release(pn_layer_inst *x)
{
    fm_scratch *s = x->scratch;
    pn_buffer_release(&s->sum);
    pn_buffer_release(&s->wide);
    pn_buffer_release(&s->wide2);
    pn_buffer_release(&s->sq);
    pn_buffer_release(&s->ones);
}

const pn_layer_type pn_layer_fm = {
    .name = "fm",
    .summary = "factorization machine's pairwise term over a sample's field embeddings",
    .min_inputs = 1,
    .max_inputs = 1,
    .scratch_size = sizeof(fm_scratch),
    .infer = fm_infer,
    .forward = fm_forward,
    .backward = fm_backward,
    .writes_stale_grads = true,
    .flops = fm_flops,
    .saved_bytes = fm_saved_bytes,
    .release = fm_release,
};
