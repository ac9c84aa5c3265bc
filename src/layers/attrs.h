/* Reading a layer's JSON attributes with validation. Every failure names the layer
 * and the attribute ("layer 'fc1': attribute 'size': expected an integer >= 1, got
 * \"wide\""). A missing optional attribute leaves *out at the default given. */
#ifndef PN_ATTRS_H
#define PN_ATTRS_H

#include <jansson.h>
#include <stdbool.h>

#include "layers/layer.h"
#include "math/ops.h"

/* Integer >= min. */
int pn_attr_int(const pn_layer *l, const json_t *spec, const char *key, bool required, int min,
                int def, int *out);
/* Number in [min, max] (max_open: max itself excluded). */
int pn_attr_float(const pn_layer *l, const json_t *spec, const char *key, bool required,
                  double min, double max, bool max_open, double def, float *out);
int pn_attr_bool(const pn_layer *l, const json_t *spec, const char *key, bool def, bool *out);
/* An activation name from pn_act_from_name. */
int pn_attr_act(const pn_layer *l, const json_t *spec, const char *key, pn_act def,
                pn_act *out);

/* A string; *out points into spec. */
int pn_attr_string(const pn_layer *l, const json_t *spec, const char *key, bool required,
                   const char *def, const char **out);

/* A short JSON rendering of v for error messages ("wide", 2.5, [1, 2], cut with
 * "..." to fit cap bytes). */
const char *pn_json_show(const json_t *v, char *buf, size_t cap);

/* An error about attribute key of layer l. */
int pn_attr_error(const pn_layer *l, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* An error about layer l as a whole. */
int pn_layer_error(const pn_layer *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#endif
