/* JSON-lines metrics writer (jansson encodes reals with 17 digits), and the trim of a
 * resumed run's file: a regular file only, rewritten through base/out_file.h; a
 * stream is never read back. */
#include "train/metrics.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/error.h"
#include "base/out_file.h"
#include "base/path.h"

struct pn_metrics {
    FILE *file;
    char *path;
    bool stream; /* a FIFO, a device, stdout...: appended to, never read or replaced */
};

int pn_metrics_open(pn_metrics **out, const char *path, int append)
{
    bool stream = pn_path_is_stream(path);
    /* a stream is appended to: a redirected stdout keeps what was printed before */
    FILE *f = stream ? pn_out_append_stream(path) : fopen(path, append ? "a" : "w");
    if (!f) return pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", path, strerror(errno));
    pn_metrics *m = calloc(1, sizeof *m);
    if (!m || !(m->path = strdup(path))) {
        fclose(f);
        free(m);
        return pn_error_set(PN_ERR_NOMEM, "out of memory");
    }
    m->file = f;
    m->stream = stream;
    *out = m;
    return PN_OK;
}

bool pn_metrics_is_stream(const pn_metrics *m) { return m->stream; }

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

/* Writes the lines of the closed file m->path that keep(step) through a new file put in
 * place whole: a failure leaves the file as it was. */
static int rewrite_kept(const pn_metrics *m, long step, long *dropped)
{
    FILE *from = fopen(m->path, "r");
    if (!from)
        return pn_error_set(PN_ERR_IO, "cannot read metrics file '%s' to trim it: %s", m->path,
                            strerror(errno));
    pn_out_file to;
    int rc = pn_out_open(&to, m->path, "--metrics");
    if (rc == PN_OK && copy_kept(from, to.f, step, dropped) != PN_OK) {
        rc = pn_error_set(PN_ERR_IO, "cannot trim metrics file '%s' to step %ld: %s", m->path,
                          step, strerror(errno));
        pn_out_abandon(&to);
    } else if (rc == PN_OK) {
        rc = pn_out_commit(&to);
    }
    fclose(from);
    return rc;
}

int pn_metrics_forget_after(pn_metrics *m, long step, long *dropped)
{
    *dropped = 0;
    if (m->stream) return PN_OK; /* reading it would wait on its own output, or another's */
    int closed = fclose(m->file);
    m->file = NULL;
    if (closed != 0)
        return pn_error_set(PN_ERR_IO, "cannot write metrics file '%s': %s", m->path,
                            strerror(errno));
    int rc = rewrite_kept(m, step, dropped);
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

/* value as a JSON number, or null where it is NaN or infinite (JSON has neither, and
 * jansson refuses them). */
static json_t *number_or_null(double value)
{
    return isfinite(value) ? json_real(value) : json_null();
}

int pn_metrics_eval(pn_metrics *m, long step, long epoch, double eval_loss, pn_loss_kind kind,
                    double eval_metric)
{
    json_t *line = json_pack("{sIsIso}", "step", (json_int_t)step, "epoch", (json_int_t)epoch,
                             "eval_loss", number_or_null(eval_loss));
    const char *key = kind == PN_LOSS_CLASSIFICATION  ? "eval_accuracy"
                      : kind == PN_LOSS_SQUARED_ERROR ? "eval_rmse"
                      : kind == PN_LOSS_BINARY        ? "eval_auc"
                                                      : NULL;
    if (line && key) json_object_set_new(line, key, number_or_null(eval_metric));
    return write_line(m, line);
}
