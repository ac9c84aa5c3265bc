/* Reading a layer's JSON attributes with validation, through base/json_read.h: a
 * failure names the file, the attribute's path and the layer ("models/x.json:
 * layers[3].size: expected an integer >= 1, found \"wide\" (layer 'fc1', fc)"). A
 * missing optional attribute leaves *out at the default given. */
#ifndef PN_ATTRS_H
#define PN_ATTRS_H

#include <jansson.h>
#include <stdbool.h>

#include "base/json_read.h"
#include "layers/layer.h"
#include "math/ops.h"

/* Integer >= min. */
int pn_attr_int(const pn_layer *l, const json_t *spec, const char *key, bool required, int min,
                int def, int *out);
/* Number in [min, max] (max_open: max itself excluded). */
int pn_attr_float(const pn_layer *l, const json_t *spec, const char *key, bool required,
                  double min, double max, bool max_open, double def, float *out);
int pn_attr_bool(const pn_layer *l, const json_t *spec, const char *key, bool def, bool *out);
/* "shard": "none" (default: every replica holds the whole table) or "rows" (*rows:
 * the table's rows split across its stage's replicas). */
int pn_attr_shard(const pn_layer *l, const json_t *spec, bool *rows);
/* An activation name from pn_act_from_name. */
int pn_attr_act(const pn_layer *l, const json_t *spec, const char *key, bool required,
                pn_act def, pn_act *out);

/* A string; *out points into spec. */
int pn_attr_string(const pn_layer *l, const json_t *spec, const char *key, bool required,
                   const char *def, const char **out);

/* An error about attribute key of layer l (also one that is no JSON field, like its
 * inputs): what was expected and what was found. */
int pn_attr_error(const pn_layer *l, const char *key, const char *found,
                  const char *expected_fmt, ...) __attribute__((format(printf, 4, 5)));

#endif
