/* Attributes, checks and parameters of the recurrent layers (recurrent.h). */
#include "layers/recurrent.h"

#include <math.h>
#include <stdint.h>

#include "base/error.h"
#include "layers/attrs.h"

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
    l->out_shape = (pn_shape){s->size, l->in_shapes[0].seq, false};
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
