/* Text files into one buffer (text_source.h). */
#include "io/text_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Appends all of path to t. */
static int read_file(pn_text *t, size_t *cap, const char *path)
{
    errno = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pn_error_set(PN_ERR_IO, "cannot open '%s': %s", path,
                            errno ? strerror(errno) : "out of memory");
    size_t start = t->len;
    int rc = 0;
    for (;;) {
        if (*cap - t->len < 65536) {
            size_t grown = *cap ? 2 * *cap : 1 << 20;
            unsigned char *p = grown > *cap ? realloc(t->bytes, grown) : NULL;
            if (!p) {
                rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory after %zu bytes of text",
                                  path, t->len);
                break;
            }
            t->bytes = p, *cap = grown;
        }
        size_t got = fread(t->bytes + t->len, 1, *cap - t->len, f);
        t->len += got;
        if (got == 0) {
            if (ferror(f))
                rc = pn_error_set(PN_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
    }
    fclose(f);
    if (rc == 0 && t->len == start)
        rc = pn_error_set(PN_ERR_INVALID, "%s: empty file, no text to import", path);
    return rc;
}

int pn_text_read(pn_text *t, const char *const *files, int n_files)
{
    *t = (pn_text){.files = files, .n_files = n_files};
    if (n_files < 1) return pn_error_set(PN_ERR_INVALID, "no text file to import");
    if (n_files == 1)
        snprintf(t->label, sizeof t->label, "%s", files[0]);
    else
        snprintf(t->label, sizeof t->label, "%s and %d more file%s", files[0], n_files - 1,
                 n_files > 2 ? "s" : "");
    if (!(t->ends = calloc((size_t)n_files, sizeof *t->ends)))
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    size_t cap = 0;
    int rc = 0;
    for (int i = 0; i < n_files && rc == 0; i++) {
        rc = read_file(t, &cap, files[i]);
        t->ends[i] = t->len;
    }
    if (rc < 0) pn_text_free(t);
    return rc;
}

void pn_text_free(pn_text *t)
{
    free(t->bytes);
    free(t->ends);
    t->bytes = NULL;
    t->ends = NULL;
    t->len = 0;
}

int pn_text_check_split(int seq, double eval_fraction)
{
    if (seq < 1 || seq > PN_TEXT_MAX_SEQ)
        return pn_error_set(PN_ERR_INVALID, "--seq %d: expected 1..%d positions per sample",
                            seq, PN_TEXT_MAX_SEQ);
    if (!(eval_fraction > 0 && eval_fraction < 1))
        return pn_error_set(PN_ERR_INVALID, "--eval-fraction %g: expected a number in (0, 1)",
                            eval_fraction);
    return PN_OK;
}
