/* The predictions file that `pipenet infer --out` writes (docs/inference.md):
 * /predictions int32 [N] ([N, seq] for sequence outputs), the argmax of each row of
 * the output, and /scores float32 [N, classes] ([N, seq, classes]), its softmax;
 * root attributes source, model and data. It is written under a temporary name and
 * renamed when complete, so a failed run leaves no partial file behind. */
#ifndef PN_PREDICTIONS_H
#define PN_PREDICTIONS_H

#include <stdbool.h>

typedef struct pn_predictions pn_predictions;

/* Starts path's temporary file for n samples of seq rows of classes scores, chunked
 * by chunk_rows samples; model and data name the files the predictions came from. */
int pn_predictions_create(pn_predictions **out, const char *path, long n, int seq, int classes,
                          int chunk_rows, const char *model, const char *data);

/* Writes samples [row0, row0 + rows): rows * seq predictions and their scores. */
int pn_predictions_write(pn_predictions *w, long row0, int rows, const int *predictions,
                         const float *scores);

/* Closes the file and, when keep, renames it to its final name; otherwise (or when
 * closing fails) deletes it. Frees w. */
int pn_predictions_close(pn_predictions *w, bool keep);

#endif
