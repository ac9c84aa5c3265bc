/* JSON-lines metrics writer (jansson encodes reals with 17 digits), and the trim of a
 * resumed run's file. */
#include "pipeline/metrics.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/error.h"

struct pn_metrics {
    FILE *file;
    char *path;
};

int pn_metrics_open(pn_metrics **out, const char *path, int append)
{
    FILE *f = fopen(path, append ? "a" : "w");
    if (!f) return pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", path, strerror(errno));
    pn_metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        fclose(f);
        free(m);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    m->file = f;
    *out = m;
    return PN_OK;
}

void pn_metrics_close(pn_metrics *m)
{
    if (!m) return;
    if (m->file) fclose(m->file);
    free(m->path);
    free(m);
}

/* Whether line (one line of the file, its newline included) is a whole JSON object
 * whose "step" is at most step. */
static bool keeps(const char *line, long step)
{
    json_t *obj = json_loads(line, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *at = json_object_get(obj, "step");
    bool keep = json_is_object(obj) && json_is_integer(at) && json_integer_value(at) <= step &&
                strchr(line, '\n') != NULL;
    json_decref(obj);
    return keep;
}

/* Copies the lines of from that keep(step) to to; counts the others. */
static int copy_kept(FILE *from, FILE *to, long step, long *dropped)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = PN_OK;
    while (rc == PN_OK && getline(&line, &cap, from) > 0) {
        if (!keeps(line, step)) (*dropped)++;
        else if (fputs(line, to) == EOF) rc = PN_ERR_IO;
    }
    free(line);
    return rc == PN_OK && ferror(from) ? PN_ERR_IO : rc;
}

int pn_metrics_forget_after(pn_metrics *m, long step, long *dropped)
{
    *dropped = 0;
    int closed = fclose(m->file);
    m->file = NULL;
    if (closed != 0)
        return pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", m->path,
                            strerror(errno));
    size_t n = strlen(m->path) + 8;
    char *tmp = malloc(n);
    if (!tmp) return pn_error_set(PN_ERR_NOMEM, "out of memory");
    snprintf(tmp, n, "%s.trim", m->path);
    FILE *from = fopen(m->path, "r"), *to = from ? fopen(tmp, "w") : NULL;
    int rc = from && to ? copy_kept(from, to, step, dropped) : PN_ERR_IO;
    if (to && fclose(to) != 0) rc = PN_ERR_IO;
    if (from) fclose(from);
    if (rc == PN_OK && rename(tmp, m->path) != 0) rc = PN_ERR_IO;
    if (rc != PN_OK) {
        rc = pn_error_set(PN_ERR_IO, "cannot trim metrics file '%s' to step %ld: %s", m->path,
                          step, strerror(errno));
        remove(tmp);
    }
    free(tmp);
    m->file = fopen(m->path, "a");
    if (!m->file && rc == PN_OK)
        rc = pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", m->path,
                          strerror(errno));
    return rc;
}

static int write_line(pn_metrics *m, json_t *obj)
{
    int rc = PN_OK;
    if (!m->file) rc = pn_error_set(PN_ERR_IO, "metrics file '%s' is not open", m->path);
    else if (!obj || json_dumpf(obj, m->file, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) < 0 ||
        fputc('\n', m->file) == EOF || fflush(m->file) != 0)
        rc = pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", m->path,
                          strerror(errno));
    json_decref(obj);
    return rc;
}

int pn_metrics_step(pn_metrics *m, long step, long epoch, double loss, double lr,
                    double samples_per_s, int tokens_per_sample)
{
    json_t *line = json_pack("{sIsIsfsfsf}", "step", (json_int_t)step, "epoch",
                             (json_int_t)epoch, "loss", loss, "lr", lr, "samples_per_s",
                             samples_per_s);
    if (line && tokens_per_sample > 1)
        json_object_set_new(line, "tokens_per_s", json_real(samples_per_s * tokens_per_sample));
    return write_line(m, line);
}

int pn_metrics_eval(pn_metrics *m, long step, long epoch, double eval_loss,
                    double eval_accuracy)
{
    return write_line(m, json_pack("{sIsIsfsf}", "step", (json_int_t)step, "epoch",
                                   (json_int_t)epoch, "eval_loss", eval_loss, "eval_accuracy",
                                   eval_accuracy));
}
