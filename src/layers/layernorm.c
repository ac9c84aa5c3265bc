/* layernorm: normalize each row to zero mean and unit variance, then scale by
 * gamma and shift by beta (both [1, width], learned, no weight decay). */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct layernorm_attrs {
    float eps;
} layernorm_attrs;

typedef struct layernorm_scratch {
    pn_buffer mean, rstd; /* [rows, 1] each, kept for backward */
} layernorm_scratch;

enum { GAMMA, BETA };

static const char *const layernorm_attr_names[] = {"eps", NULL};

static int layernorm_parse(pn_layer *l, const json_t *spec)
{
    layernorm_attrs *s = l->attrs;
    return pn_attr_float(l, spec, "eps", false, 1e-12, 1.0, false, 1e-5, &s->eps);
}

static int layernorm_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids) return pn_attr_error(l, "input", "integer ids", "float values");
    if (l->in_shapes[0].width < 2)
        return pn_attr_error(l, "input", "rows of 1 value", "rows of at least 2 values");
    l->out_shape = l->in_shapes[0];
    return PN_OK;
}

static void layernorm_declare(pn_layer *l)
{
    int w = l->in_shapes[0].width;
    pn_layer_add_param(l, "gamma", 1, w, (pn_init){PN_INIT_ONES, 0}, false);
    pn_layer_add_param(l, "beta", 1, w, (pn_init){PN_INIT_ZEROS, 0}, false);
}

static int layernorm_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                             pn_arg *out)
{
    (void)pass;
    const layernorm_attrs *s = x->layer->attrs;
    layernorm_scratch *k = x->scratch;
    pn_matrix gamma = pn_layer_param(x, GAMMA), beta = pn_layer_param(x, BETA);
    pn_matrix mean, rstd;
    int rows = out->value.rows;
    PN_TRY(pn_layer_scratch(&k->mean, out->value.device, rows, 1, &mean));
    PN_TRY(pn_layer_scratch(&k->rstd, out->value.device, rows, 1, &rstd));
    return pn_layernorm_forward(&in[0]->value, &gamma, &beta, s->eps, &out->value, &mean,
                                &rstd);
}

static int layernorm_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                              pn_arg *out)
{
    (void)pass;
    layernorm_scratch *k = x->scratch;
    int rows = out->value.rows;
    pn_matrix gamma = pn_layer_param(x, GAMMA);
    pn_matrix dgamma = pn_layer_param_grad(x, GAMMA);
    pn_matrix dbeta = pn_layer_param_grad(x, BETA);
    pn_matrix mean = pn_matrix_on(&k->mean, rows, 1), rstd = pn_matrix_on(&k->rstd, rows, 1);
    return pn_layernorm_backward(&in[0]->value, &gamma, &mean, &rstd, &out->grad,
                                 in[0]->grad.data ? &in[0]->grad : NULL, &dgamma, &dbeta);
}

static double layernorm_flops(const pn_layer *l)
{
    return 20.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static double layernorm_saved_bytes(const pn_layer *l)
{
    return 2.0 * l->in_shapes[0].seq * sizeof(float);
}

static void layernorm_release(pn_layer_inst *x)
{
    layernorm_scratch *k = x->scratch;
    pn_buffer_release(&k->mean);
    pn_buffer_release(&k->rstd);
}

/* The input (with the mean and rstd kept in scratch), not the output. */
static bool layernorm_backward_reads(const pn_layer *l, int k)
{
    (void)l;
    return k == 0;
}

const pn_layer_type pn_layer_layernorm = {
    .name = "layernorm",
    .summary = "per-row normalization with learned gamma and beta; attr eps",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(layernorm_attrs),
    .scratch_size = sizeof(layernorm_scratch),
    .attrs = layernorm_attr_names,
    .parse = layernorm_parse,
    .infer = layernorm_infer,
    .declare = layernorm_declare,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .backward_reads = layernorm_backward_reads,
    .flops = layernorm_flops,
    .saved_bytes = layernorm_saved_bytes,
    .release = layernorm_release,
    .per_row = true,
};
