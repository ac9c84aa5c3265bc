/* A closed set of names that an option or a config key takes (--device, --transport):
 * one table per set, each name with a line saying what it means. Option parsing,
 * the model file's keys, --help and the messages that list what is accepted all read
 * the table, so a name is written down once. The table's order is its enum's. */
#ifndef PN_CHOICES_H
#define PN_CHOICES_H

#include <stddef.h>
#include <stdio.h>

typedef struct pn_choice {
    const char *name;
    const char *summary; /* one line, for --help */
} pn_choice;

typedef struct pn_choices {
    const char *what; /* the kind, in messages: "a device" */
    int n;
    const pn_choice *items;
} pn_choices;

/* The index of name, or -1. */
int pn_choice_find(const pn_choices *c, const char *name);

/* The name at index i, or "?" past the table. */
const char *pn_choice_name(const pn_choices *c, int i);

/* The names as words, "a, b or c", into buf (cap bytes); returns buf. */
const char *pn_choice_list(const pn_choices *c, char *buf, size_t cap);

/* One line per choice for --help: indent spaces, the name padded to the longest, its
 * summary. */
void pn_choice_help(FILE *out, const pn_choices *c, int indent);

#endif
