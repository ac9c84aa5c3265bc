/* seq_pool: one row per sample from its sequence, [batch*seq, width] -> [batch, width],
 * over the sample's real positions only (its length, layers/arg.h; padding is never
 * read and gets no gradient). Modes: "last" (the last real position; with a reversed
 * recurrent layer before it, "first" is what one wants, and is its last step),
 * "mean" (average of the real positions), "max" (per column; the gradient goes to
 * the position that held the maximum, the first on ties). */
#include <string.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "layers/layer_types.h"

typedef enum pool_mode { POOL_LAST, POOL_MEAN, POOL_MAX } pool_mode;

typedef struct pool_attrs {
    pool_mode mode;
} pool_attrs;

typedef struct pool_scratch {
    pn_buffer lens;  /* [batch] lengths, host */
    pn_buffer dlens; /* [batch] lengths on the device (max) */
    pn_buffer index; /* last: [batch] rows; max: [batch*width] argmax rows (device) */
    pn_buffer row;   /* [1, width] mean's scaled gradient */
} pool_scratch;

static const char *const pool_attr_names[] = {"mode", NULL};
static const char *const mode_names[] = {"last", "mean", "max"};

static int pool_parse(pn_layer *l, const json_t *spec)
{
    pool_attrs *s = l->attrs;
    const char *mode;
    PN_TRY(pn_attr_string(l, spec, "mode", true, NULL, &mode));
    for (int m = 0; m < 3; m++)
        if (!strcmp(mode, mode_names[m])) {
            s->mode = (pool_mode)m;
            return PN_OK;
        }
    return pn_attr_error(l, "mode", mode, "\"last\", \"mean\" or \"max\"");
}

static int pool_infer(pn_layer *l)
{
    if (l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float values");
    l->out_shape = pn_shape_dense(l->in_shapes[0].width, 1, false);
    return PN_OK;
}

/* The lengths of in as host ints in k->lens (all seq without lengths). */
static int pool_lengths(pool_scratch *k, const pn_arg *in, int seq, int **out)
{
    PN_TRY(pn_buffer_reserve(&k->lens, pn_device_host(),
                             (size_t)(in->batch > 0 ? in->batch : 1) * sizeof(int)));
    int *lens = k->lens.data;
    for (int b = 0; b < in->batch; b++) {
        lens[b] = in->lengths ? in->lengths[b] : seq;
        if (lens[b] < 1 || lens[b] > seq)
            return pn_error_set(PN_ERR_INVALID, "sample %d has length %d, outside [1, %d]", b,
                                lens[b], seq);
    }
    *out = lens;
    return PN_OK;
}

static int pool_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out)
{
    (void)pass;
    const pool_attrs *s = x->layer->attrs;
    pool_scratch *k = x->scratch;
    int seq = x->layer->in_shapes[0].seq, batch = in[0]->batch, w = out->value.cols;
    pn_device dev = out->value.device;
    int *lens = NULL;
    PN_TRY(pool_lengths(k, in[0], seq, &lens));
    if (batch == 0) return PN_OK;
    switch (s->mode) {
    case POOL_LAST:
        PN_TRY(pn_buffer_reserve(&k->index, dev, (size_t)batch * sizeof(int)));
        for (int b = 0; b < batch; b++) lens[b] = b * seq + lens[b] - 1; /* now rows */
        PN_TRY(pn_buffer_write(&k->index, 0, lens, (size_t)batch * sizeof(int)));
        for (int b = 0; b < batch; b++) lens[b] -= b * seq - 1; /* back to lengths */
        return pn_gather_rows(&in[0]->value, k->index.data, &out->value);
    case POOL_MEAN:
        for (int b = 0; b < batch; b++) {
            pn_matrix rows = pn_matrix_rows(in[0]->value, b * seq, lens[b]);
            pn_matrix o = pn_matrix_rows(out->value, b, 1);
            PN_TRY(pn_col_sums(&rows, 0.0f, &o));
            PN_TRY(pn_scale(&o, 1.0f / (float)lens[b]));
        }
        return PN_OK;
    case POOL_MAX:
        PN_TRY(pn_buffer_reserve(&k->dlens, dev, (size_t)batch * sizeof(int)));
        PN_TRY(pn_buffer_write(&k->dlens, 0, lens, (size_t)batch * sizeof(int)));
        PN_TRY(pn_buffer_reserve(&k->index, dev, (size_t)batch * (size_t)w * sizeof(int)));
        return pn_seq_max_forward(&in[0]->value, seq, k->dlens.data, &out->value,
                                  k->index.data);
    }
    return pn_error_set(PN_ERR_INTERNAL, "seq_pool: bad mode %d", (int)s->mode);
}

static int pool_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in,
                         pn_arg *out)
{
    (void)pass;
    const pool_attrs *s = x->layer->attrs;
    pool_scratch *k = x->scratch;
    int seq = x->layer->in_shapes[0].seq, batch = in[0]->batch;
    const int *lens = k->lens.data;
    if (!in[0]->grad.data || batch == 0) return PN_OK;
    switch (s->mode) {
    case POOL_LAST: return pn_scatter_add_rows(&out->grad, k->index.data, &in[0]->grad);
    case POOL_MAX: return pn_seq_max_backward(&out->grad, k->index.data, &in[0]->grad);
    case POOL_MEAN: {
        pn_matrix row;
        PN_TRY(pn_layer_scratch(&k->row, out->grad.device, 1, out->grad.cols, &row));
        for (int b = 0; b < batch; b++) {
            pn_matrix g = pn_matrix_rows(out->grad, b, 1);
            pn_matrix rows = pn_matrix_rows(in[0]->grad, b * seq, lens[b]);
            PN_TRY(pn_copy(&g, &row));
            PN_TRY(pn_scale(&row, 1.0f / (float)lens[b]));
            PN_TRY(pn_add_row_vector(&row, &rows));
        }
        return PN_OK;
    }
    }
    return pn_error_set(PN_ERR_INTERNAL, "seq_pool: bad mode %d", (int)s->mode);
}

static double pool_flops(const pn_layer *l)
{
    return 2.0 * l->in_shapes[0].seq * l->in_shapes[0].width;
}

static double pool_saved_bytes(const pn_layer *l)
{
    return (double)l->in_shapes[0].width * sizeof(int);
}

static void pool_release(pn_layer_inst *x)
{
    pool_scratch *k = x->scratch;
    pn_buffer_release(&k->lens);
    pn_buffer_release(&k->dlens);
    pn_buffer_release(&k->index);
    pn_buffer_release(&k->row);
}

const pn_layer_type pn_layer_seq_pool = {
    .name = "seq_pool",
    .summary = "one row per sample from its real positions; attr mode: last, mean, max",
    .min_inputs = 1,
    .max_inputs = 1,
    .attrs_size = sizeof(pool_attrs),
    .scratch_size = sizeof(pool_scratch),
    .attrs = pool_attr_names,
    .parse = pool_parse,
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
    .flops = pool_flops,
    .saved_bytes = pool_saved_bytes,
    .release = pool_release,
};
