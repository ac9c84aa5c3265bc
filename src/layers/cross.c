/* cross: one DCN cross layer on each row, y = x0 (x . w) + b + x, with inputs
 * [x0, x] of one shape, or one input that is both (the first layer of a stack);
 * stacked cross layers, each taking the same x0, are DCN's cross network. w and b
 * are [1, d]. */
#include <math.h>
#include <stdio.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"
#include "layers/rowvec.h"

typedef struct cross_scratch {
    pn_buffer dot;   /* [rows, 1]: x . w, then its gradient */
    pn_buffer bcast; /* [rows, d]: x . w broadcast, kept for backward */
    pn_buffer prod;  /* [rows, d] */
    pn_buffer ones;
} cross_scratch;

enum { W, B };

static int cross_infer(pn_layer *l)
{
    pn_shape x0 = l->in_shapes[0];
    for (int i = 0; i < l->n_inputs; i++) {
        pn_shape s = l->in_shapes[i];
        char a[32], b[32], found[96];
        snprintf(found, sizeof found, "integer ids as input %d", i);
        if (s.ids) return pn_attr_error(l, "input", found, "float inputs");
        snprintf(found, sizeof found, "x0 of shape %s and x of shape %s",
                 pn_shape_format(x0, a, sizeof a), pn_shape_format(s, b, sizeof b));
        if (s.width != x0.width || s.seq != x0.seq)
            return pn_attr_error(l, "input", found, "x0 and x of one shape");
    }
    l->out_shape = x0;
    return PN_OK;
}

static void cross_declare(pn_layer *l)
{
    int d = l->in_shapes[0].width;
    pn_layer_add_param(l, "w", 1, d, (pn_init){PN_INIT_UNIFORM, sqrtf(6.0f / ((float)d + 1.0f))},
                       true);
    pn_layer_add_param(l, "b", 1, d, (pn_init){PN_INIT_ZEROS, 0}, false);
}

static int cross_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    cross_scratch *s = x->scratch;
    const pn_matrix *x0 = &in[0]->value, *xl = &in[x->layer->n_inputs - 1]->value;
    pn_matrix w = pn_layer_param(x, W), b = pn_layer_param(x, B), dot, bcast;
    PN_TRY(pn_layer_scratch(&s->dot, x0->device, x0->rows, 1, &dot));
    PN_TRY(pn_layer_scratch(&s->bcast, x0->device, x0->rows, x0->cols, &bcast));
    PN_TRY(pn_gemm(false, true, 1.0f, xl, &w, 0.0f, &dot));
    PN_TRY(pn_broadcast_col(&dot, &s->ones, 0.0f, &bcast));
    PN_TRY(pn_copy(xl, &out->value));
    PN_TRY(pn_mul(x0, &bcast, 1.0f, &out->value));
    return pn_add_row_vector(&b, &out->value);
}

/* With dy: db += col sums of dy; d(x.w) = rows of dy .* x0 summed; dw += d(x.w)^T x;
 * dx0 += dy .* (x.w); dx += dy + d(x.w) w. One input gets both of the last two. */
static int cross_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                          pn_arg *out)
{
    (void)pass;
    cross_scratch *s = x->scratch;
    pn_arg *a0 = in[0], *al = in[x->layer->n_inputs - 1];
    int rows = a0->value.rows, d = a0->value.cols;
    pn_matrix w = pn_layer_param(x, W), dw = pn_layer_param_grad(x, W);
    pn_matrix db = pn_layer_param_grad(x, B), dot = pn_matrix_on(&s->dot, rows, 1);
    pn_matrix bcast = pn_matrix_on(&s->bcast, rows, d), prod;
    PN_TRY(pn_layer_scratch(&s->prod, a0->value.device, rows, d, &prod));
    PN_TRY(pn_col_sums(&out->grad, 1.0f, &db));
    PN_TRY(pn_mul(&out->grad, &a0->value, 0.0f, &prod));
    PN_TRY(pn_row_sums(&prod, &s->ones, 1.0f, 0.0f, &dot)); /* x . w is no longer needed */
    PN_TRY(pn_gemm(true, false, 1.0f, &dot, &al->value, 1.0f, &dw));
    if (a0->grad.data) PN_TRY(pn_mul(&out->grad, &bcast, 1.0f, &a0->grad));
    if (!al->grad.data) return PN_OK;
    PN_TRY(pn_axpy(1.0f, &out->grad, &al->grad));
    return pn_gemm(false, false, 1.0f, &dot, &w, 1.0f, &al->grad);
}

static double cross_flops(const pn_layer *l)
{
    return 14.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static double cross_saved_bytes(const pn_layer *l)
{
    return (double)l->in_shapes[0].seq * (l->in_shapes[0].width + 1) * sizeof(float);
}

static void cross_release(pn_layer_inst *x)
{
    cross_scratch *s = x->scratch;
    pn_buffer_release(&s->dot);
    pn_buffer_release(&s->bcast);
    pn_buffer_release(&s->prod);
    pn_buffer_release(&s->ones);
}

const pn_layer_type pn_layer_cross = {
    .name = "cross",
    .summary = "DCN cross layer x0 (x . w) + b + x per row; inputs [x0, x] or one",
    .min_inputs = 1,
    .max_inputs = 2,
    .scratch_size = sizeof(cross_scratch),
    .infer = cross_infer,
    .declare = cross_declare,
    .forward = cross_forward,
    .backward = cross_backward,
    .flops = cross_flops,
    .saved_bytes = cross_saved_bytes,
    .release = cross_release,
    .per_row = true,
};
