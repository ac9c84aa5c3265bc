/* Attributes, checks, parameters, input projection and generation state of the
 * recurrent layers (recurrent.h). */
#include "layers/recurrent.h"

#include <math.h>
#include <stdint.h>

#include "base/error.h"
#include "layers/attrs.h"
#include "math/ops.h"

const char *const pn_recurrent_attr_names[] = {"size", "reverse", NULL};

int pn_recurrent_parse(pn_layer *l, const json_t *spec)
{
    pn_recurrent_attrs *s = l->attrs;
    PN_TRY(pn_attr_bool(l, spec, "reverse", false, &s->reverse));
    return pn_attr_int(l, spec, "size", true, 1, 0, &s->size);
}

int pn_recurrent_infer(pn_layer *l, int gates)
{
    const pn_recurrent_attrs *s = l->attrs;
    if (l->in_shapes[0].ids)
        return pn_attr_error(l, "input", "integer ids (an embedding layer takes them)",
                             "float values");
    if ((int64_t)s->size * gates > INT32_MAX)
        return pn_attr_error(l, "size", "too large", "at most %d", INT32_MAX / gates);
    l->out_shape = pn_shape_dense(s->size, l->in_shapes[0].seq, false);
    return PN_OK;
}

void pn_recurrent_declare(pn_layer *l, int gates)
{
    const pn_recurrent_attrs *s = l->attrs;
    float in = (float)l->in_shapes[0].width, h = (float)s->size;
    pn_layer_add_param(l, "wx", l->in_shapes[0].width, gates * s->size,
                       (pn_init){PN_INIT_UNIFORM, sqrtf(6.0f / (in + h))}, true);
    pn_layer_add_param(l, "wh", s->size, gates * s->size,
                       (pn_init){PN_INIT_UNIFORM, sqrtf(3.0f / h)}, true);
    pn_layer_add_param(l, "b", 1, gates * s->size, (pn_init){PN_INIT_ZEROS, 0}, false);
}

int pn_recurrent_project(const pn_layer_inst *x, const pn_matrix *in, pn_matrix *gates)
{
    pn_matrix wx = pn_layer_param(x, PN_RECURRENT_WX), b = pn_layer_param(x, PN_RECURRENT_B);
    PN_TRY(pn_gemm(false, false, 1.0f, in, &wx, 0.0f, gates));
    return pn_add_row_vector(&b, gates);
}

int pn_recurrent_step_begin(const pn_layer_inst *x, pn_recurrent_state *st, int pos,
                            const pn_arg *out, int width, pn_matrix *prev, pn_matrix *next)
{
    const pn_layer *l = x->layer;
    int n = out->batch;
    if (((const pn_recurrent_attrs *)l->attrs)->reverse)
        return pn_error_set(PN_ERR_UNSUPPORTED,
                            "%s with \"reverse\": true cannot generate: its output at a "
                            "position depends on the positions after it, which are not "
                            "generated yet", l->type->name);
    if (pos > 0 && n > st->held)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': a step of %d sequences over a state "
                                             "of %d", l->name, n, st->held);
    *prev = pos > 0 ? pn_matrix_on(&st->buf[st->cur], n, width) : (pn_matrix){0};
    return pn_layer_scratch(&st->buf[1 - st->cur], out->value.device, n, width, next);
}

void pn_recurrent_step_end(pn_recurrent_state *st, int n)
{
    st->cur = 1 - st->cur;
    st->held = n;
}

int pn_recurrent_step_reorder(const pn_layer_inst *x, pn_recurrent_state *st, const int *from,
                              int n, int width)
{
    const pn_layer *l = x->layer;
    pn_buffer *src_buf = &st->buf[st->cur];
    if (!src_buf->data)
        return pn_error_set(PN_ERR_INTERNAL, "layer '%s': reorder before any step", l->name);
    pn_matrix src = pn_matrix_on(src_buf, st->held, width), dst;
    PN_TRY(pn_layer_scratch(&st->buf[1 - st->cur], src_buf->device, n, width, &dst));
    for (int i = 0; i < n; i++) {
        if (from[i] < 0 || from[i] >= st->held)
            return pn_error_set(PN_ERR_INTERNAL, "layer '%s': reorder from sequence %d of %d",
                                l->name, from[i], st->held);
        pn_matrix a = pn_matrix_rows(src, from[i], 1), b = pn_matrix_rows(dst, i, 1);
        PN_TRY(pn_copy(&a, &b));
    }
    pn_recurrent_step_end(st, n);
    return PN_OK;
}

void pn_recurrent_state_release(pn_recurrent_state *st)
{
    pn_buffer_release(&st->buf[0]);
    pn_buffer_release(&st->buf[1]);
    *st = (pn_recurrent_state){0};
}

int pn_recurrent_project_backward(const pn_layer_inst *x, const pn_matrix *xb,
                                  const pn_matrix *dg, const int *index, pn_buffer *dxb,
                                  pn_arg *in)
{
    pn_matrix dwx = pn_layer_param_grad(x, PN_RECURRENT_WX);
    pn_matrix db = pn_layer_param_grad(x, PN_RECURRENT_B);
    PN_TRY(pn_gemm(true, false, 1.0f, xb, dg, 1.0f, &dwx));
    PN_TRY(pn_col_sums(dg, 1.0f, &db));
    if (!in->grad.data) return PN_OK;
    pn_matrix wx = pn_layer_param(x, PN_RECURRENT_WX), d;
    PN_TRY(pn_layer_scratch(dxb, dg->device, dg->rows, in->value.cols, &d));
    PN_TRY(pn_gemm(false, true, 1.0f, dg, &wx, 0.0f, &d));
    return pn_scatter_add_rows(&d, index, &in->grad);
}

double pn_recurrent_flops(const pn_layer *l, int gates)
{
    double seq = l->in_shapes[0].seq, in = l->in_shapes[0].width;
    double h = ((const pn_recurrent_attrs *)l->attrs)->size;
    return seq * (6.0 * gates * h * (in + h) + 40.0 * h);
}

double pn_recurrent_saved_bytes(const pn_layer *l, int per_unit)
{
    double seq = l->in_shapes[0].seq, in = l->in_shapes[0].width;
    double h = ((const pn_recurrent_attrs *)l->attrs)->size;
    return seq * (in + per_unit * h) * sizeof(float);
}
