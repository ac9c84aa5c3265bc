/* The file that `pipenet infer --out` writes (docs/formats.md): /outputs float32
 * [N, width] ([N, seq, width] for sequence outputs), the output layer's values as it
 * computes them; and, only when they are a classification's logits, /predictions
 * int32 [N] ([N, seq]), each row's largest value's index, and /scores float32 of
 * /outputs' shape, their softmax. Root attributes source, model, data and output.
 * It is written under a temporary name and renamed when complete, so a failed run
 * leaves no partial file behind. */
#ifndef PN_PREDICTIONS_H
#define PN_PREDICTIONS_H

#include <stdbool.h>

typedef struct pn_predictions pn_predictions;

/* What a predictions file holds. */
typedef struct pn_predictions_spec {
    long n;                /* samples */
    int seq, width;        /* rows per sample, values per row */
    bool classes;          /* the values are logits: /predictions and /scores too */
    int chunk_rows;        /* samples per chunk */
    const char *model, *data, *output; /* the files and the layer they came from */
} pn_predictions_spec;

/* Starts path's temporary file as spec says. */
int pn_predictions_create(pn_predictions **out, const char *path, const pn_predictions_spec *spec);

/* Writes samples [row0, row0 + rows): rows * seq rows of outputs and, for classes,
 * their predictions and scores (ignored, may be NULL, otherwise). */
int pn_predictions_write(pn_predictions *w, long row0, int rows, const float *outputs,
                         const int *predictions, const float *scores);

/* Closes the file and, when keep, renames it to its final name; otherwise (or when
 * closing fails) deletes it. Frees w. */
int pn_predictions_close(pn_predictions *w, bool keep);

#endif
