/* Validated attribute readers for layer JSON specs, over base/json_read.h with the
 * layer's place in the model file. */
#include "layers/attrs.h"

#include <stdarg.h>
#include <stdio.h>

#include "base/error.h"

int pn_attr_error(const pn_layer *l, const char *key, const char *found,
                  const char *expected_fmt, ...)
{
    char expected[512];
    va_list ap;
    va_start(ap, expected_fmt);
    vsnprintf(expected, sizeof expected, expected_fmt, ap);
    va_end(ap);
    return pn_json_error(&l->where, key, found, "%s", expected);
}

int pn_attr_int(const pn_layer *l, const json_t *spec, const char *key, bool required, int min,
                int def, int *out)
{
    long v;
    PN_TRY(pn_json_int(spec, &l->where, key, required, min, 1L << 30, def, &v));
    *out = (int)v;
    return PN_OK;
}

int pn_attr_float(const pn_layer *l, const json_t *spec, const char *key, bool required,
                  double min, double max, bool max_open, double def, float *out)
{
    double v;
    PN_TRY(pn_json_number(spec, &l->where, key, required, min, false, max, max_open, def, &v));
    *out = (float)v;
    return PN_OK;
}

int pn_attr_bool(const pn_layer *l, const json_t *spec, const char *key, bool def, bool *out)
{
    return pn_json_bool(spec, &l->where, key, def, out);
}

int pn_attr_act(const pn_layer *l, const json_t *spec, const char *key, bool required,
                pn_act def, pn_act *out)
{
    static const char *const names[] = {"none", "relu", "tanh", "sigmoid", "gelu", "softmax"};
    int act;
    PN_TRY(pn_json_choice(spec, &l->where, key, required, "an activation", names,
                          (int)(sizeof names / sizeof *names), (int)def, &act));
    *out = (pn_act)pn_act_from_name(names[act]);
    return PN_OK;
}

int pn_attr_string(const pn_layer *l, const json_t *spec, const char *key, bool required,
                   const char *def, const char **out)
{
    return pn_json_string(spec, &l->where, key, required, def, out);
}

int pn_attr_shard(const pn_layer *l, const json_t *spec, bool *rows)
{
    static const char *const names[] = {"none", "rows"};
    int v;
    PN_TRY(pn_json_choice(spec, &l->where, "shard", false, "a table sharding", names, 2, 0, &v));
    *rows = v == 1;
    return PN_OK;
}
