/* Configuration JSON readers with one message shape (json_read.h). */
#include "base/json_read.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

pn_json_at pn_json_root(const char *file)
{
    pn_json_at at = {.file = file};
    return at;
}

/* Paths longer than the buffer are cut: they only appear in messages. */
static void cut(char *path, int written, size_t cap)
{
    if (written >= (int)cap && cap > 4) strcpy(path + cap - 4, "...");
}

pn_json_at pn_json_field(const pn_json_at *parent, const char *key)
{
    pn_json_at at = *parent;
    cut(at.path, snprintf(at.path, sizeof at.path, "%s%s%s", parent->path,
                          parent->path[0] ? "." : "", key),
        sizeof at.path);
    return at;
}

pn_json_at pn_json_item(const pn_json_at *parent, size_t index)
{
    pn_json_at at = *parent;
    cut(at.path, snprintf(at.path, sizeof at.path, "%s[%zu]", parent->path, index),
        sizeof at.path);
    return at;
}

void pn_json_about(pn_json_at *at, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(at->subject, sizeof at->subject, fmt, ap);
    va_end(ap);
}

static int verror(const pn_json_at *at, const char *key, const char *found, const char *fmt,
                  va_list ap)
{
    char expected[512];
    vsnprintf(expected, sizeof expected, fmt, ap);
    const char *path = at->path[0] || key ? at->path : "top level";
    return pn_error_set(PN_ERR_INVALID, "%s: %s%s%s: expected %s, found %s%s%s%s", at->file, path,
                        key && at->path[0] ? "." : "", key ? key : "", expected,
                        found ? found : "nothing", at->subject[0] ? " (" : "", at->subject,
                        at->subject[0] ? ")" : "");
}

int pn_json_error(const pn_json_at *at, const char *key, const char *found,
                  const char *expected_fmt, ...)
{
    va_list ap;
    va_start(ap, expected_fmt);
    int rc = verror(at, key, found, expected_fmt, ap);
    va_end(ap);
    return rc;
}

int pn_json_error_value(const pn_json_at *at, const char *key, const json_t *v,
                        const char *expected_fmt, ...)
{
    char shown[64];
    va_list ap;
    va_start(ap, expected_fmt);
    int rc = verror(at, key, v ? pn_json_show(v, shown, sizeof shown) : NULL, expected_fmt, ap);
    va_end(ap);
    return rc;
}

const char *pn_json_show(const json_t *v, char *buf, size_t cap)
{
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(9));
    snprintf(buf, cap, "%s", text ? text : "?");
    if (strlen(buf) == cap - 1 && cap > 4) strcpy(buf + cap - 4, "...");
    free(text);
    return buf;
}

static bool in_list(const char *const *list, const char *key)
{
    for (; list && *list; list++)
        if (!strcmp(*list, key)) return true;
    return false;
}

int pn_json_known_keys(const json_t *obj, const pn_json_at *at, const char *const *allowed,
                       const char *const *more)
{
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)obj, key, value) {
        (void)value;
        if (in_list(allowed, key) || in_list(more, key)) continue;
        char list[256] = "";
        for (const char *const *k = allowed; k && *k; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", list[0] ? ", " : "",
                     *k);
        return pn_json_error(at, key, "an unknown key", "one of the keys %s",
                             list[0] ? list : "(none)");
    }
    return PN_OK;
}

/* The field key of obj, or NULL; a missing required one is an error (what: what
 * it should be, for the message). */
static int lookup(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                  const char *what, const json_t **out)
{
    *out = obj ? json_object_get(obj, key) : NULL;
    if (!*out && required) return pn_json_error(at, key, NULL, "%s (required)", what);
    return PN_OK;
}

int pn_json_int(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                long min, long max, long def, long *out)
{
    char what[96];
    if (max >= 1L << 30)
        snprintf(what, sizeof what, "an integer >= %ld", min);
    else
        snprintf(what, sizeof what, "an integer in [%ld, %ld]", min, max);
    const json_t *v;
    PN_TRY(lookup(obj, at, key, required, what, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return pn_json_error_value(at, key, v, "%s", what);
    *out = (long)json_integer_value(v);
    return PN_OK;
}

int pn_json_number(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   double lo, bool lo_open, double hi, bool hi_open, double def, double *out)
{
    char what[96];
    if (isinf(hi))
        snprintf(what, sizeof what, "a number %s %g", lo_open ? ">" : ">=", lo);
    else
        snprintf(what, sizeof what, "a number in %c%g, %g%c", lo_open ? '(' : '[', lo, hi,
                 hi_open ? ')' : ']');
    const json_t *v;
    PN_TRY(lookup(obj, at, key, required, what, &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || (lo_open ? !(x > lo) : !(x >= lo)) || (hi_open ? !(x < hi) : !(x <= hi)))
        return pn_json_error_value(at, key, v, "%s", what);
    *out = x;
    return PN_OK;
}

int pn_json_bool(const json_t *obj, const pn_json_at *at, const char *key, bool def, bool *out)
{
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_boolean(v)) return pn_json_error_value(at, key, v, "true or false");
    *out = json_is_true(v);
    return PN_OK;
}

int pn_json_string(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const char *def, const char **out)
{
    const json_t *v;
    PN_TRY(lookup(obj, at, key, required, "a non-empty string", &v));
    if (!v) {
        *out = def;
        return PN_OK;
    }
    if (!json_is_string(v) || !json_string_length(v))
        return pn_json_error_value(at, key, v, "a non-empty string");
    *out = json_string_value(v);
    return PN_OK;
}

int pn_json_choice(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const char *what, const char *const *names, int n, int def, int *out)
{
    char list[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s\"%s\"", i ? ", " : "",
                 names[i]);
    const json_t *v = obj ? json_object_get(obj, key) : NULL;
    if (!v && required) return pn_json_error(at, key, NULL, "%s: one of %s (required)", what, list);
    if (!v) {
        *out = def;
        return PN_OK;
    }
    for (int i = 0; json_is_string(v) && i < n; i++)
        if (!strcmp(json_string_value(v), names[i])) {
            *out = i;
            return PN_OK;
        }
    return pn_json_error_value(at, key, v, "%s: one of %s", what, list);
}

int pn_json_choice_of(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                      const pn_choices *choices, int def, int *out)
{
    const char *names[16];
    if (choices->n > 16)
        return pn_error_set(PN_ERR_INTERNAL, "%s: more than 16 choices", choices->what);
    for (int i = 0; i < choices->n; i++) names[i] = choices->items[i].name;
    return pn_json_choice(obj, at, key, required, choices->what, names, choices->n, def, out);
}

int pn_json_object(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const json_t **out)
{
    PN_TRY(lookup(obj, at, key, required, "an object", out));
    if (*out && !json_is_object(*out)) return pn_json_error_value(at, key, *out, "an object");
    return PN_OK;
}

int pn_json_name_length(const pn_json_at *at, const char *key, const char *name,
                        const char *what)
{
    size_t n = strlen(name);
    if (n <= PN_NAME_MAX) return PN_OK;
    char found[96];
    snprintf(found, sizeof found, "\"%.40s...\" (%zu bytes)", name, n);
    return pn_json_error(at, key, found, "%s of at most %d bytes", what, PN_NAME_MAX);
}
