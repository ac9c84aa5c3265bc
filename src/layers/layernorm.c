/* layernorm: normalize each row to zero mean and unit variance, then scale by
 * gamma and shift by beta (both [1, width], learned, no weight decay). */
#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct layernorm_state {
    float eps;
    pn_buffer mean, rstd; /* [rows, 1] each, kept for backward */
} layernorm_state;

enum { GAMMA, BETA };

static const char *const layernorm_attrs[] = {"eps", NULL};

static int layernorm_parse(pn_layer *l, const json_t *spec)
{
    layernorm_state *s = l->state;
    return pn_attr_float(l, spec, "eps", false, 1e-12, 1.0, false, 1e-5, &s->eps);
}

static int layernorm_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids) return pn_attr_error(l, "input", "needs float values, got ids");
    if (l->in_shapes[0].width < 2)
        return pn_attr_error(l, "input", "needs rows of at least 2 values, got %d",
                             l->in_shapes[0].width);
    l->out_shape = l->in_shapes[0];
    return PN_OK;
}

static void layernorm_declare(pn_layer *l)
{
    int w = l->in_shapes[0].width;
    pn_layer_add_param(l, "gamma", 1, w, (pn_init){PN_INIT_ONES, 0}, false);
    pn_layer_add_param(l, "beta", 1, w, (pn_init){PN_INIT_ZEROS, 0}, false);
}

static int layernorm_forward(pn_layer *l, const pn_pass *pass, pn_params *params,
                             pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    layernorm_state *s = l->state;
    pn_matrix gamma = pn_layer_param(l, params, GAMMA), beta = pn_layer_param(l, params, BETA);
    pn_matrix mean, rstd;
    int rows = out->value.rows;
    PN_TRY(pn_layer_scratch(&s->mean, out->value.device, rows, 1, &mean));
    PN_TRY(pn_layer_scratch(&s->rstd, out->value.device, rows, 1, &rstd));
    return pn_layernorm_forward(&in[0]->value, &gamma, &beta, s->eps, &out->value, &mean,
                                &rstd);
}

static int layernorm_backward(pn_layer *l, const pn_pass *pass, pn_params *params,
                              pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    layernorm_state *s = l->state;
    int rows = out->value.rows;
    pn_matrix gamma = pn_layer_param(l, params, GAMMA);
    pn_matrix dgamma = pn_layer_param_grad(l, params, GAMMA);
    pn_matrix dbeta = pn_layer_param_grad(l, params, BETA);
    pn_matrix mean = pn_matrix_on(&s->mean, rows, 1), rstd = pn_matrix_on(&s->rstd, rows, 1);
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

static void layernorm_release(pn_layer *l)
{
    layernorm_state *s = l->state;
    pn_buffer_release(&s->mean);
    pn_buffer_release(&s->rstd);
}

const pn_layer_type pn_layer_layernorm = {
    .name = "layernorm",
    .summary = "per-row normalization with learned gamma and beta; attr eps",
    .min_inputs = 1,
    .max_inputs = 1,
    .state_size = sizeof(layernorm_state),
    .attrs = layernorm_attrs,
    .parse = layernorm_parse,
    .infer = layernorm_infer,
    .declare = layernorm_declare,
    .forward = layernorm_forward,
    .backward = layernorm_backward,
    .flops = layernorm_flops,
    .saved_bytes = layernorm_saved_bytes,
    .release = layernorm_release,
};
