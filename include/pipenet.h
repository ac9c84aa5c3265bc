/* pipenet.h: the embedding API. A C program loads a model that pipenet trained
 * (a "pipenet-model" file from `pipenet export`, or a training snapshot) and runs it
 * forward on batches of host arrays, on the host, in one process. Link with mpicc:
 *     mpicc prog.c $(pkg-config --cflags --libs pipenet)
 * (pipenet's HDF5 is the MPI build; the API itself makes no MPI call). docs/inference.md. */
#ifndef PIPENET_H
#define PIPENET_H

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded model: its graph, its parameter values and the buffers of its forward. */
typedef struct pn_model pn_model;

/* Functions that return int return 0 on success and a negative status on failure;
 * pn_model_error() then says what went wrong and where. Calls on one pn_model must
 * not overlap. */

/* Loads path, a pipenet-model file or a snapshot (whose optimizer state is ignored):
 * builds the network from the config it holds and sets every parameter from the
 * file's values. Errors name the file and, when one is missing or has another shape,
 * the parameter. */
int pn_model_load(pn_model **out, const char *path);

/* Releases the model (NULL is ignored). */
void pn_model_free(pn_model *m);

/* The message of the last failed call of this thread ("" when none). */
const char *pn_model_error(void);

/* The model's name (its config's "name"). */
const char *pn_model_name(const pn_model *m);

/* Number of the model's inputs; they are indexed 0 .. count - 1 in every call. */
int pn_model_input_count(const pn_model *m);

/* Name of input i (the config's "inputs" key, e.g. "x"), or NULL when out of range. */
const char *pn_model_input_name(const pn_model *m, int i);

/* Name of the dataset that input i reads in a dataset HDF5 file (e.g. "features"),
 * or NULL when out of range. */
const char *pn_model_input_dataset(const pn_model *m, int i);

/* Values per sample of input i: floats for a float input (size times seq), ids for
 * an ids input (seq); -1 when out of range. */
int pn_model_input_size(const pn_model *m, int i);

/* 1 when input i holds integer ids (labels, tokens), 0 for floats, -1 out of range. */
int pn_model_input_is_ids(const pn_model *m, int i);

/* The default output: the layer that feeds the (first) loss layer, e.g. the logits
 * "out"; without a loss layer, the last layer that nothing consumes. */
const char *pn_model_output_name(const pn_model *m);

/* Floats per sample of layer output (NULL: the default output); -1 when the model
 * has no such layer or input. */
int pn_model_output_size(const pn_model *m, const char *output);

/* Runs batch samples forward and writes output's values (NULL: the default output)
 * to out, batch * pn_model_output_size floats, sample after sample.
 * inputs[i] is input i's data, batch * pn_model_input_size values, sample after
 * sample: const float * for float inputs, const int * for ids inputs. An input that
 * output does not depend on may be NULL: labels are not needed for a prediction.
 * When every input of a loss layer is given, it runs too and its loss and accuracy
 * count in pn_model_loss. Any batch size works: large batches run in chunks that
 * bound the memory, the same values as one call per chunk. */
int pn_model_forward(pn_model *m, int batch, const void *const *inputs, const char *output,
                     float *out);

/* Rows the loss layers saw in pn_model_forward calls since the load or the last
 * pn_model_reset_loss, with their mean loss and the fraction of rows whose largest
 * logit was the label (NaN when a loss is not a classification, or no row ran). */
long pn_model_loss(const pn_model *m, double *mean_loss, double *accuracy);

/* Forgets the rows counted by pn_model_loss. */
void pn_model_reset_loss(pn_model *m);

#ifdef __cplusplus
}
#endif

#endif
