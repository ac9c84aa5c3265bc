/* How long the names of a model may be. A layer's or an input's name (and a dataset
 * name in "inputs") is at most PN_NAME_MAX bytes, checked when the model is read
 * (docs/training.md); a parameter is "<layer>/<suffix>" and an optimizer slot has a
 * name, each suffix and slot name at most PN_SUFFIX_MAX bytes. Every buffer that
 * holds such a name is sized from these, so no name is ever cut and every layout
 * writes the names one process writes. */
#ifndef PN_NAMES_H
#define PN_NAMES_H

enum {
    PN_NAME_MAX = 200,
    PN_SUFFIX_MAX = 15,
    PN_PARAM_NAME_MAX = PN_NAME_MAX + 1 + PN_SUFFIX_MAX /* "<layer>/<suffix>" */
};

#endif
