/* Metrics file: one JSON object per line, per optimizer step and per evaluation.
 * Floats are written with 17 significant digits, so they read back exactly. */
#ifndef PN_METRICS_H
#define PN_METRICS_H

#include <stdbool.h>

#include "layers/layer.h"

typedef struct pn_metrics pn_metrics;

/* Creates (truncates) path; append keeps existing lines (resumed runs). A path that is
 * a stream (base/path.h: a FIFO, a device, this program's stdout) is always appended
 * to, never truncated, read or replaced. */
int pn_metrics_open(pn_metrics **out, const char *path, int append);
void pn_metrics_close(pn_metrics *m);

/* Whether m writes to a stream, whose lines pn_metrics_forget_after leaves alone. */
bool pn_metrics_is_stream(const pn_metrics *m);

/* For a run resumed at step: drops the lines past it (the interrupted run's steps after
 * its snapshot, which the resumed run does again) and any line that is not a whole
 * JSON object (a run killed mid-line leaves one), through a copy put in place whole
 * (base/out_file.h: a link stays a link); *dropped gets how many went. A stream is
 * left as it is (*dropped 0): only a regular file can be read back and replaced. */
int pn_metrics_forget_after(pn_metrics *m, long step, long *dropped);

/* step counts the steps done, epoch counts from 1 (as the progress lines do);
 * tokens_per_sample > 1 (a sequence model) adds "tokens_per_s". */
int pn_metrics_step(pn_metrics *m, long step, long epoch, double loss, double lr,
                    double samples_per_s, int tokens_per_sample);
/* An evaluation's line: eval_loss, and by the kind of the model's loss layer
 * eval_accuracy (a classification: eval_metric is the fraction of rows right),
 * eval_rmse (a mean squared error: eval_metric is its root) or eval_auc (a binary
 * loss: eval_metric is the AUC over the evaluation set); another kind writes
 * neither key, never an accuracy that means nothing. A value that is NaN or infinite
 * is written null (JSON has no NaN). */
int pn_metrics_eval(pn_metrics *m, long step, long epoch, double eval_loss, pn_loss_kind kind,
                    double eval_metric);

#endif
