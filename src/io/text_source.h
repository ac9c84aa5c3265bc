/* Text files read whole into memory, back to back, for the text importers
 * (import_text.c's windows, import_records.c's records): the bytes, where each
 * file's bytes end (a record never spans two files), and a label for messages. */
#ifndef PN_TEXT_SOURCE_H
#define PN_TEXT_SOURCE_H

#include <limits.h>
#include <stddef.h>

/* The most positions a sample of a text import may have. */
enum { PN_TEXT_MAX_SEQ = 1 << 20 };

typedef struct pn_text {
    unsigned char *bytes;
    size_t len;
    const char *const *files; /* [n_files] the names as given (the caller's) */
    int n_files;
    size_t *ends;             /* [n_files] offset just past each file's bytes */
    char label[PATH_MAX + 64]; /* "a.txt" or "a.txt and 3 more files" */
} pn_text;

/* Reads files[0 .. n_files) in order into t (emptied first). A missing,
 * unreadable or empty file is an error naming it; t is then freed. */
int pn_text_read(pn_text *t, const char *const *files, int n_files);

void pn_text_free(pn_text *t);

/* Refuses a --seq outside 1..PN_TEXT_MAX_SEQ or an --eval-fraction outside (0, 1),
 * the importers' common options. */
int pn_text_check_split(int seq, double eval_fraction);

#endif
