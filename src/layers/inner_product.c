/* inner_product: the pairwise inner products <v_i, v_j>, i < j, of the F field
 * embeddings of each sample (its seq rows of width k), in the order (0,1), (0,2)...
 * (0,F-1), (1,2)...: F(F-1)/2 values per sample (PNN's inner-product layer; Angel's
 * BiInnerCross). One elementwise product and one row sum per pair, so its cost is
 * O(F^2 k) per sample as the output asks. An input with lengths is refused. */
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "layers/rowvec.h"

typedef struct ip_scratch {
    pn_buffer prod; /* [batch, k] */
    pn_buffer ones;
} ip_scratch;

static int ip_infer(pn_layer *l)
{
    pn_shape in = l->in_shapes[0];
    if (in.ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float field embeddings");
    char found[48];
    snprintf(found, sizeof found, "%d field%s per sample", in.seq, in.seq == 1 ? "" : "s");
    if (in.seq < 2) return pn_attr_error(l, "input", found, "at least 2 fields (seq >= 2)");
    int64_t pairs = (int64_t)in.seq * (in.seq - 1) / 2;
    if (pairs > INT32_MAX)
        return pn_attr_error(l, "input", found, "at most 65536 fields");
    l->out_shape = (pn_shape){.width = (int)pairs, .seq = 1};
    return PN_OK;
}

static pn_matrix field(const pn_matrix *m, const pn_arg *a, int f)
{
    int k = a->shape.width;
    return pn_matrix_cols(pn_matrix_reshape(*m, a->batch, a->shape.seq * k), f * k, k);
}

static int ip_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    ip_scratch *s = x->scratch;
    PN_TRY(pn_layer_refuse_lengths(x, in[0]));
    int fields = in[0]->shape.seq, p = 0;
    pn_matrix prod;
    PN_TRY(pn_layer_scratch(&s->prod, out->value.device, in[0]->batch, in[0]->shape.width,
                            &prod));
    for (int i = 0; i < fields; i++)
        for (int j = i + 1; j < fields; j++, p++) {
            pn_matrix vi = field(&in[0]->value, in[0], i), vj = field(&in[0]->value, in[0], j);
            pn_matrix col = pn_matrix_cols(out->value, p, 1);
            PN_TRY(pn_mul(&vi, &vj, 0.0f, &prod));
            PN_TRY(pn_row_sums(&prod, &s->ones, 1.0f, 0.0f, &col));
        }
    return PN_OK;
}

/* d v_i += dy_ij v_j and d v_j += dy_ij v_i, pair by pair (the input gradient is
 * zeroed first when stale: the type does not write it whole). */
static int ip_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    ip_scratch *s = x->scratch;
    if (!in[0]->grad.data) return PN_OK;
    int fields = in[0]->shape.seq, p = 0;
    pn_matrix dy;
    PN_TRY(pn_layer_scratch(&s->prod, in[0]->value.device, in[0]->batch, in[0]->shape.width,
                            &dy));
    for (int i = 0; i < fields; i++)
        for (int j = i + 1; j < fields; j++, p++) {
            pn_matrix vi = field(&in[0]->value, in[0], i), vj = field(&in[0]->value, in[0], j);
            pn_matrix di = field(&in[0]->grad, in[0], i), dj = field(&in[0]->grad, in[0], j);
            pn_matrix col = pn_matrix_cols(out->grad, p, 1);
            PN_TRY(pn_broadcast_col(&col, &s->ones, 0.0f, &dy));
            PN_TRY(pn_mul(&dy, &vj, 1.0f, &di));
            PN_TRY(pn_mul(&dy, &vi, 1.0f, &dj));
        }
    return PN_OK;
}

static double ip_flops(const pn_layer *l)
{
    return 8.0 * l->out_shape.width * l->in_shapes[0].width;
}

static void ip_release(pn_layer_inst *x)
{
    ip_scratch *s = x->scratch;
    pn_buffer_release(&s->prod);
    pn_buffer_release(&s->ones);
}

const pn_layer_type pn_layer_inner_product = {
    .name = "inner_product",
    .summary = "pairwise inner products of a sample's field embeddings, F(F-1)/2 values",
    .min_inputs = 1,
    .max_inputs = 1,
    .scratch_size = sizeof(ip_scratch),
    .infer = ip_infer,
    .forward = ip_forward,
    .backward = ip_backward,
    .flops = ip_flops,
    .release = ip_release,
};
