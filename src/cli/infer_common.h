/* What `pipenet infer` shares between its two ways to run (cli/cmd_infer.c): in one
 * process through the C API, and across pipeline stages under mpirun
 * (cli/infer_staged.c over pipeline/infer_stages.h): its options, the layer it
 * writes, the --out file's writer and the lines it prints, so that both print and
 * write the same. */
#ifndef PN_CLI_INFER_COMMON_H
#define PN_CLI_INFER_COMMON_H

#include <stdbool.h>
#include <stdio.h>

#include "io/predictions.h"
#include "model/model.h"

typedef struct infer_options {
    const char *model, *data, *out, *output;
    int batch;
    int device;    /* pn_device_request */
    int stages;    /* --stages: 0 unset (the ranks' count under mpirun, else one process) */
    int in_flight; /* --in-flight: batches in the pipe at once; 0: 2 x stages */
} infer_options;

/* The layer infer writes and what its values are. */
typedef struct infer_output {
    const char *name;
    int node, seq, width; /* seq rows of width values per sample */
    int loss;             /* the loss layer it is the prediction of, or -1 */
    bool classes;         /* a classification's logits: predictions and scores too */
    bool binary;          /* ... one logit per row (sigmoid_xent): sigmoid, not softmax */
} infer_output;

/* The output --output names in g (default: default_node), refused when it is no
 * layer of floats (or, unless inputs_ok, a data input). */
int infer_find_output(const pn_graph *g, int default_node, const infer_options *o,
                      bool inputs_ok, infer_output *out);

/* The --out file of n samples and a batch's scores and argmax for it. */
typedef struct infer_writer {
    pn_predictions *w;
    infer_output out;
    float *scores;
    int *predictions;
} infer_writer;

/* Starts o->out's file for n samples of out (nothing without --out). */
int infer_writer_open(infer_writer *w, const infer_options *o, const infer_output *out, long n);

/* Writes samples [row0, row0 + rows) of the output (values: rows x seq x width). */
int infer_writer_put(infer_writer *w, long row0, int rows, const float *values);

/* Puts the file in place when keep (else deletes it) and frees the buffers. */
int infer_writer_close(infer_writer *w, bool keep);

/* The loss line (the accuracy, RMSE or AUC by the loss's kind); without rows, why
 * there is none when an input was skipped (its dataset and name; NULL: none was). */
void infer_print_loss(const pn_loss_summary *s, const infer_options *o, const char *skipped_dataset,
                      const char *skipped_input);

/* The line naming what --out holds, and why a file has no predictions. */
void infer_print_written(const pn_graph *g, const infer_options *o, const infer_output *out,
                         long n);

/* The usage text of `pipenet infer`. */
void infer_usage(FILE *out);

/* `pipenet infer` across pipeline stages under mpirun: the exit status. */
int infer_staged(const infer_options *o);

#endif
