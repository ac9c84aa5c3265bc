/* dropout: in training, zero each value with probability rate and scale the rest by
 * 1/(1-rate); identity in evaluation. The mask is a hash of (seed, layer, step,
 * global row, column), so it is the same whichever rank or micro-batch computes it. */
#include "base/error.h"
#include "base/rng.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef struct dropout_attrs {
    float rate;
} dropout_attrs;

typedef struct dropout_scratch {
    bool masked;     /* the last forward applied a mask */
    pn_buffer mask;  /* [rows, width]: 0 or 1/(1-rate) */
} dropout_scratch;

static const char *const dropout_attr_names[] = {"rate", NULL};

static int dropout_parse(pn_layer *l, const json_t *spec)
{
    dropout_attrs *s = l->attrs;
    return pn_attr_float(l, spec, "rate", true, 0.0, 1.0, true, 0.0, &s->rate);
}

static int dropout_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids) return pn_attr_error(l, "input", "integer ids", "float values");
    l->out_shape = l->in_shapes[0];
    return PN_OK;
}

static int dropout_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                           pn_arg *out)
{
    const pn_layer *l = x->layer;
    const dropout_attrs *s = l->attrs;
    dropout_scratch *k = x->scratch;
    k->masked = pass->training && s->rate > 0.0f;
    if (!k->masked) return pn_copy(&in[0]->value, &out->value);
    pn_matrix mask;
    PN_TRY(pn_layer_scratch(&k->mask, out->value.device, out->value.rows, out->value.cols,
                            &mask));
    uint64_t key = pn_hash_mix(pn_hash_mix(pass->seed, pn_hash_string(l->name)),
                               (uint64_t)pass->step);
    long row0 = pass->sample0 * l->out_shape.seq;
    return pn_dropout_forward(&in[0]->value, s->rate, key, row0, &mask, &out->value);
}

static int dropout_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                            pn_arg *out)
{
    (void)pass;
    dropout_scratch *k = x->scratch;
    if (!in[0]->grad.data) return PN_OK;
    if (!k->masked) return pn_axpy(1.0f, &out->grad, &in[0]->grad);
    pn_matrix mask = pn_matrix_on(&k->mask, out->grad.rows, out->grad.cols);
    return pn_mul(&out->grad, &mask, 1.0f, &in[0]->grad);
}

static double dropout_flops(const pn_layer *l)
{
    return 4.0 * l->out_shape.seq * l->out_shape.width;
}

static double dropout_saved_bytes(const pn_layer *l)
{
    return (double)l->out_shape.seq * l->out_shape.width * sizeof(float);
}

static void dropout_release(pn_layer_inst *x)
{
    dropout_scratch *k = x->scratch;
    pn_buffer_release(&k->mask);
}

/* The mask is in scratch: no value is read. */
static bool dropout_backward_reads(const pn_layer *l, int k)
{
    (void)l, (void)k;
    return false;
}

const pn_layer_type pn_layer_dropout = {
    .name = "dropout",
    .summary = "random zeroing in training, rank-independent mask; attr rate",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(dropout_attrs),
    .scratch_size = sizeof(dropout_scratch),
    .attrs = dropout_attr_names,
    .parse = dropout_parse,
    .infer = dropout_infer,
    .forward = dropout_forward,
    .backward = dropout_backward,
    .backward_reads = dropout_backward_reads,
    .flops = dropout_flops,
    .saved_bytes = dropout_saved_bytes,
    .release = dropout_release,
    .per_row = true,
};
