/* JSON-lines metrics writer (jansson encodes reals with 17 digits). */
#include "pipeline/metrics.h"

#include <errno.h>
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
    fclose(m->file);
    free(m->path);
    free(m);
}

static int write_line(pn_metrics *m, json_t *obj)
{
    int rc = PN_OK;
    if (!obj || json_dumpf(obj, m->file, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) < 0 ||
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
