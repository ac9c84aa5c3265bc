/* Validated attribute readers for layer JSON specs. */
#include "layers/attrs.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

int pn_layer_error(const pn_layer *l, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pn_error_set(PN_ERR_INVALID, "layer '%s' (%s): %s", l->name, l->type->name, what);
}

int pn_attr_error(const pn_layer *l, const char *key, const char *fmt, ...)
{
    char what[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return pn_error_set(PN_ERR_INVALID, "layer '%s' (%s): attribute '%s': %s", l->name,
                        l->type->name, key, what);
}

const char *pn_json_show(const json_t *v, char *buf, size_t cap)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, cap, "%s", text ? text : "?");
    if (strlen(buf) == cap - 1 && cap > 4) strcpy(buf + cap - 4, "...");
    free(text);
    return buf;
}

/* The value of key, NULL if absent; a missing required one is an error. */
static int lookup(const pn_layer *l, const json_t *spec, const char *key, bool required,
                  const json_t **out)
{
    *out = spec ? json_object_get(spec, key) : NULL;
    if (!*out && required) return pn_attr_error(l, key, "missing (required)");
    return PN_OK;
}

int pn_attr_int(const pn_layer *l, const json_t *spec, const char *key, bool required, int min,
                int def, int *out)
{
    const json_t *v;
    char buf[64];
    PN_TRY(lookup(l, spec, key, required, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > 1 << 30)
        return pn_attr_error(l, key, "expected an integer >= %d, got %s", min,
                             pn_json_show(v, buf, sizeof buf));
    *out = (int)json_integer_value(v);
    return PN_OK;
}

int pn_attr_float(const pn_layer *l, const json_t *spec, const char *key, bool required,
                  double min, double max, bool max_open, double def, float *out)
{
    const json_t *v;
    char buf[64];
    PN_TRY(lookup(l, spec, key, required, &v));
    if (!v) {
        *out = (float)def;
        return PN_OK;
    }
    double x = json_is_number(v) ? json_number_value(v) : 0.0;
    if (!json_is_number(v) || x < min || x > max || (max_open && x == max))
        return pn_attr_error(l, key, "expected a number in [%g, %g%c, got %s", min, max,
                             max_open ? ')' : ']', pn_json_show(v, buf, sizeof buf));
    *out = (float)x;
    return PN_OK;
}

int pn_attr_bool(const pn_layer *l, const json_t *spec, const char *key, bool def, bool *out)
{
    const json_t *v;
    char buf[64];
    PN_TRY(lookup(l, spec, key, false, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_boolean(v))
        return pn_attr_error(l, key, "expected true or false, got %s", pn_json_show(v, buf, sizeof buf));
    *out = json_is_true(v);
    return PN_OK;
}

int pn_attr_act(const pn_layer *l, const json_t *spec, const char *key, pn_act def,
                pn_act *out)
{
    const json_t *v;
    char buf[64];
    PN_TRY(lookup(l, spec, key, false, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    int act = json_is_string(v) ? pn_act_from_name(json_string_value(v)) : -1;
    if (act < 0)
        return pn_attr_error(l, key,
                             "expected one of \"none\", \"relu\", \"tanh\", \"sigmoid\", "
                             "\"gelu\", \"softmax\", got %s",
                             pn_json_show(v, buf, sizeof buf));
    *out = (pn_act)act;
    return PN_OK;
}

int pn_attr_string(const pn_layer *l, const json_t *spec, const char *key, bool required,
                   const char *def, const char **out)
{
    const json_t *v;
    char buf[64];
    PN_TRY(lookup(l, spec, key, required, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_string(v) || !json_string_length(v))
        return pn_attr_error(l, key, "expected a non-empty string, got %s",
                             pn_json_show(v, buf, sizeof buf));
    *out = json_string_value(v);
    return PN_OK;
}
