/* What lstm and gru share: their attributes ("size", "reverse"), the checks of their
 * input, and their parameters wx [in, G*H], wh [H, G*H], b [1, G*H] for G gates of H
 * units each (lstm: 4, gru: 3). */
#ifndef PN_RECURRENT_H
#define PN_RECURRENT_H

#include <jansson.h>
#include <stdbool.h>

#include "layers/layer.h"

typedef struct pn_recurrent_attrs {
    int size;     /* H */
    bool reverse; /* read every sample from its last real position to its first */
} pn_recurrent_attrs;

extern const char *const pn_recurrent_attr_names[];

int pn_recurrent_parse(pn_layer *l, const json_t *spec);

/* Float input; the output has H floats per position of the input's seq. */
int pn_recurrent_infer(pn_layer *l, int gates);

/* wx and wh uniform in ±sqrt(6/(in+H)) and ±sqrt(3/H), weight-decayed; b zeros. */
void pn_recurrent_declare(pn_layer *l, int gates);

#endif
