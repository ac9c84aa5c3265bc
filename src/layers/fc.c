/* fc: fully connected, y = act(x W + b), applied to every row (so to every position
 * of a sequence). W is [in, size]; the bias is optional ("bias": false).
 * With "tie": "<embedding>", the weight is that embedding's table [vocab, size] used
 * transposed, y = act(x tableᵀ + b) (GPT's output projection): the fc holds a tied
 * copy of it (layer.h), [size, in], named "<fc>/w", whose gradient the trainer adds
 * to the table's (pipeline/ties.h); the graph checks that the embedding's vocab is
 * the fc's size and its size the fc's input width. */
#include <math.h>
#include <stdio.h>

#include <string.h>

#include "base/error.h"
#include "base/names.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct fc_attrs {
    int size;
    bool bias;
    pn_act act;
    bool tied;
    char tie[PN_NAME_MAX + 1]; /* the embedding whose table is W transposed */
} fc_attrs;

typedef struct fc_scratch {
    pn_buffer pre;  /* x W + b, kept when act's derivative needs its input (gelu) */
    pn_buffer dpre; /* gradient at x W + b */
} fc_scratch;

enum { W, B };

static const char *const fc_attr_names[] = {"size", "bias", "act", "tie", NULL};

static int fc_parse(pn_layer *l, const json_t *spec)
{
    fc_attrs *s = l->attrs;
    const char *tie = NULL;
    PN_TRY(pn_attr_int(l, spec, "size", true, 1, 0, &s->size));
    PN_TRY(pn_attr_bool(l, spec, "bias", true, &s->bias));
    PN_TRY(pn_attr_string(l, spec, "tie", false, NULL, &tie));
    if (tie && strlen(tie) > PN_NAME_MAX) { /* no layer has such a name */
        char found[48];
        snprintf(found, sizeof found, "a name of %zu bytes", strlen(tie));
        return pn_attr_error(l, "tie", found, "the name of an embedding layer");
    }
    if (tie) {
        s->tied = true;
        memcpy(s->tie, tie, strlen(tie) + 1);
    }
    return pn_attr_act(l, spec, "act", false, PN_ACT_NONE, &s->act);
}

static int fc_infer(pn_layer *l)
{
    const fc_attrs *s = l->attrs;
    if (l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float values");
    l->out_shape = pn_shape_dense(s->size, l->in_shapes[0].seq, false);
    return PN_OK;
}

static void fc_declare(pn_layer *l)
{
    const fc_attrs *s = l->attrs;
    int in = l->in_shapes[0].width;
    bool rectifier = s->act == PN_ACT_RELU || s->act == PN_ACT_GELU;
    float limit = rectifier ? sqrtf(6.0f / (float)in)
                            : sqrtf(6.0f / ((float)in + (float)s->size)); /* no int sum */
    if (s->tied)
        pn_layer_add_tied_param(l, "w", s->size, in, s->tie, "table");
    else
        pn_layer_add_param(l, "w", in, s->size, (pn_init){PN_INIT_UNIFORM, limit}, true);
    if (s->bias) pn_layer_add_param(l, "b", 1, s->size, (pn_init){PN_INIT_ZEROS, 0}, false);
}

static bool keeps_pre(pn_act act) { return act == PN_ACT_GELU; }

/* The bias add and the activation stay two ops: a fused loop was 0.96x to 1.18x as
 * fast as the pair (bench_act, 1024 x 512, gelu), under 0.3% of a small GPT's step. */
static int fc_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const fc_attrs *s = x->layer->attrs;
    fc_scratch *k = x->scratch;
    pn_matrix w = pn_layer_param(x, W), z = out->value;
    if (keeps_pre(s->act))
        PN_TRY(pn_layer_scratch(&k->pre, z.device, z.rows, z.cols, &z));
    PN_TRY(pn_gemm(false, s->tied, 1.0f, &in[0]->value, &w, 0.0f, &z));
    if (s->bias) {
        pn_matrix b = pn_layer_param(x, B);
        PN_TRY(pn_add_row_vector(&b, &z));
    }
    if (s->act != PN_ACT_NONE) PN_TRY(pn_act_forward(s->act, &z, &out->value));
    return PN_OK;
}

static int fc_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const fc_attrs *s = x->layer->attrs;
    fc_scratch *k = x->scratch;
    pn_matrix dz = out->grad;
    if (s->act != PN_ACT_NONE) {
        pn_matrix pre = {0};
        if (keeps_pre(s->act)) pre = pn_matrix_on(&k->pre, dz.rows, dz.cols);
        PN_TRY(pn_layer_scratch(&k->dpre, dz.device, dz.rows, dz.cols, &dz));
        PN_TRY(pn_act_backward(s->act, keeps_pre(s->act) ? &pre : NULL, &out->value,
                               &out->grad, 0.0f, &dz));
    }
    pn_matrix w = pn_layer_param(x, W), dw = pn_layer_param_grad(x, W);
    if (s->tied) /* W is [size, in]: dW += dzᵀ x */
        PN_TRY(pn_gemm(true, false, 1.0f, &dz, &in[0]->value, 1.0f, &dw));
    else
        PN_TRY(pn_gemm(true, false, 1.0f, &in[0]->value, &dz, 1.0f, &dw));
    if (s->bias) {
        pn_matrix db = pn_layer_param_grad(x, B);
        PN_TRY(pn_col_sums(&dz, 1.0f, &db));
    }
    if (in[0]->grad.data)
        PN_TRY(pn_gemm(false, !s->tied, 1.0f, &dz, &w, pn_arg_grad_beta(in[0]), &in[0]->grad));
    return PN_OK;
}

static double fc_flops(const pn_layer *l)
{
    const fc_attrs *s = l->attrs;
    double rows = l->in_shapes[0].seq, k = l->in_shapes[0].width, n = s->size;
    return rows * (6.0 * k * n + (s->act != PN_ACT_NONE ? 8.0 * n : 0.0));
}

static double fc_saved_bytes(const pn_layer *l)
{
    const fc_attrs *s = l->attrs;
    return keeps_pre(s->act) ? (double)l->in_shapes[0].seq * s->size * sizeof(float) : 0.0;
}

static void fc_release(pn_layer_inst *x)
{
    fc_scratch *k = x->scratch;
    pn_buffer_release(&k->pre);
    pn_buffer_release(&k->dpre);
}

/* dW from the input; its activation's step from the output (gelu's from the
 * pre-activation, kept in scratch, but the op is handed the output too). */
static bool fc_backward_reads(const pn_layer *l, int k)
{
    return k >= 0 || ((const fc_attrs *)l->attrs)->act != PN_ACT_NONE;
}

const pn_layer_type pn_layer_fc = {
    .name = "fc",
    .summary = "fully connected: act(x W + b) per row; attrs size, bias, act, tie",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(fc_attrs),
    .scratch_size = sizeof(fc_scratch),
    .attrs = fc_attr_names,
    .parse = fc_parse,
    .infer = fc_infer,
    .declare = fc_declare,
    .forward = fc_forward,
    .backward = fc_backward,
    .writes_stale_grads = true,
    .backward_reads = fc_backward_reads,
    .flops = fc_flops,
    .saved_bytes = fc_saved_bytes,
    .release = fc_release,
    .per_row = true,
};
