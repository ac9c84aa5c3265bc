/* Reading configuration JSON (model files, their "train" section, layer attributes,
 * the optimizer) with every mistake reported in one shape:
 *     <file>: <path>: expected <what>, found <value>
 * where path is the field's place in the document ("train.optimizer.lr",
 * "layers[3].size"), what says what would be accepted, and value is the JSON found,
 * shown short ("nothing" when the field is missing). A place may carry a subject,
 * added at the end in parentheses ("layer 'fc1', fc"), so that a message about
 * layers[3] also names the layer. This is the only place that builds such
 * messages; it depends on libc and jansson only. */
#ifndef PN_JSON_READ_H
#define PN_JSON_READ_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "base/choices.h"
#include "base/names.h"

/* A place in a JSON document. */
typedef struct pn_json_at {
    const char *file;  /* the document's file, for messages (must outlive the place) */
    char path[PN_NAME_MAX + 64];    /* "" at the top level; "inputs.<name>.size" */
    char subject[PN_NAME_MAX + 64]; /* "" or what the place is about: "layer '<name>', fc" */
} pn_json_at;

/* The top level of file's document. */
pn_json_at pn_json_root(const char *file);

/* The field key of the object at parent; the element index of the list at parent.
 * The subject carries over. */
pn_json_at pn_json_field(const pn_json_at *parent, const char *key);
pn_json_at pn_json_item(const pn_json_at *parent, size_t index);

/* Sets what the place is about (printf-style). */
void pn_json_about(pn_json_at *at, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Records "<file>: <path>[.<key>]: expected <expected>, found <found> (<subject>)"
 * (found NULL: "nothing") and returns PN_ERR_INVALID. */
int pn_json_error(const pn_json_at *at, const char *key, const char *found,
                  const char *expected_fmt, ...) __attribute__((format(printf, 4, 5)));

/* The same with found = the JSON value v shown short (NULL: "nothing"). */
int pn_json_error_value(const pn_json_at *at, const char *key, const json_t *v,
                        const char *expected_fmt, ...) __attribute__((format(printf, 4, 5)));

/* A short rendering of v ("wide", 2.5, [1, 2], cut with "..." to fit cap bytes). */
const char *pn_json_show(const json_t *v, char *buf, size_t cap);

/* Refuses a key of obj that is in none of the NULL-terminated lists allowed and
 * more (more may be NULL; its keys are accepted but not listed in the message). */
int pn_json_known_keys(const json_t *obj, const pn_json_at *at, const char *const *allowed,
                       const char *const *more);

/* Readers of the field key of obj (at is obj's place). A missing field is an
 * error when required, otherwise *out gets def. */

/* An integer in [min, max]. */
int pn_json_int(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                long min, long max, long def, long *out);

/* A number between lo and hi, each end excluded when its flag says open (hi may be
 * INFINITY). */
int pn_json_number(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   double lo, bool lo_open, double hi, bool hi_open, double def, double *out);

int pn_json_bool(const json_t *obj, const pn_json_at *at, const char *key, bool def, bool *out);

/* A non-empty string; *out points into obj. */
int pn_json_string(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const char *def, const char **out);

/* Refuses a name longer than PN_NAME_MAX bytes (base/names.h), found at the field
 * key of at (or at at itself when key is NULL): "expected <what> of at most 200
 * bytes, found "<its start>..." (<n> bytes)". */
int pn_json_name_length(const pn_json_at *at, const char *key, const char *name,
                        const char *what);

/* One of names[0 .. n) (what names the kind in messages: "optimizer"); *out is its index. */
int pn_json_choice(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const char *what, const char *const *names, int n, int def, int *out);

/* The same from a table of choices (base/choices.h), named by its what. */
int pn_json_choice_of(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                      const pn_choices *choices, int def, int *out);

/* An object (*out NULL when missing and not required). */
int pn_json_object(const json_t *obj, const pn_json_at *at, const char *key, bool required,
                   const json_t **out);

#endif
