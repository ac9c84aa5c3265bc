/* The one table of layer types, made from layer_types.h's list (PN_LAYER_TYPES): a
 * new type is a file defining its pn_layer_type and its name in that list (and a case
 * in tests/test_layer_grad.c, whose suite fails for a registered type without one). */
#include <string.h>

#include "layers/layer_types.h"

#define PN_LAYER_TYPE_ADDRESS(name) &pn_layer_##name,
static const pn_layer_type *const registry[] = {PN_LAYER_TYPES(PN_LAYER_TYPE_ADDRESS)};
#undef PN_LAYER_TYPE_ADDRESS

int pn_layer_type_count(void) { return (int)(sizeof registry / sizeof *registry); }

const pn_layer_type *pn_layer_type_at(int i) { return registry[i]; }

const pn_layer_type *pn_layer_type_find(const char *name)
{
    for (int i = 0; i < pn_layer_type_count(); i++)
        if (!strcmp(registry[i]->name, name)) return registry[i];
    return NULL;
}
