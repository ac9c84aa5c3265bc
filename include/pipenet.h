/* pipenet.h: the embedding API. A C program loads a model that pipenet trained
 * (a "pipenet-model" file from `pipenet export`, or a training snapshot) and runs it
 * forward on batches of host arrays, in one process, on the host or on a GPU
 * (pn_model_load_on; inputs are copied to it, outputs back). Link with mpicc:
 *     mpicc prog.c $(pkg-config --cflags --libs pipenet)
 * (pipenet's HDF5 is the MPI build; the API itself makes no MPI call). docs/inference.md. */
#ifndef PIPENET_H
#define PIPENET_H

#ifdef __cplusplus
extern "C" {
#endif

/* A loaded model: its graph, its parameter values and the buffers of its forward. */
#include <stdint.h>

typedef struct pn_model pn_model;

/* A sparse input's data for pn_model_forward (pn_model_input_is_sparse): the batch's
 * samples as rows of a CSR matrix, sample b's features at [offsets[b],
 * offsets[b+1]); each id lies in [0, the input's columns), each field in [0, its
 * fields) (fields NULL when the input has none). inputs[i] points at one. */
typedef struct pn_sparse_rows {
    const int *offsets;    /* [batch + 1], offsets[0] == 0, never decreasing */
    const int64_t *ids;
    const float *values;
    const int *fields;
} pn_sparse_rows;

/* Functions that return int return 0 on success and a negative status on failure;
 * pn_model_error() then says what went wrong and where. Calls on one pn_model must
 * not overlap. */

/* Loads path, a pipenet-model file, a snapshot (whose optimizer state is ignored) or a
 * snapshot directory (its newest snapshot that verifies):
 * builds the network from the config it holds and sets every parameter from the
 * file's values. Errors name the file and, when one is missing or has another shape,
 * the parameter. */
int pn_model_load(pn_model **out, const char *path);

/* pn_model_load onto a device: "cpu" (what pn_model_load does; NULL too), "cuda" (the
 * first GPU this process sees), "cuda:N" (the N-th), or "auto" (cuda when the CUDA
 * module loads and a GPU is visible, else cpu). A GPU is reached through the CUDA
 * module, pipenet-cuda.so, opened here on the first such call ($PIPENET_CUDA_MODULE,
 * else beside the program, else the installed one; the program links as pipenet.pc
 * says so that the module finds pipenet's functions in it). The network and the
 * parameters live on that device; pn_model_forward and generation copy inputs to it
 * and outputs back to the caller's host arrays. A GPU where the module cannot be
 * loaded (the path and the reason) or none is visible is an error saying which.
 * (Checked on one NVIDIA H200 against the host's outputs: tests/test_model.) */
int pn_model_load_on(pn_model **out, const char *path, const char *device);

/* Where the model runs: "cpu" or "cuda:N". */
const char *pn_model_device(const pn_model *m);

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

/* Name of the dataset of input i's per-sample sequence lengths (the input's
 * "lengths" in the model), or NULL when it has none or i is out of range. */
const char *pn_model_input_lengths(const pn_model *m, int i);

/* Values per sample of input i: floats for a float input (size times seq), ids for
 * an ids input (seq), 0 for a sparse input (its features vary); -1 when out of
 * range. */
int pn_model_input_size(const pn_model *m, int i);

/* 1 when input i holds integer ids (labels, tokens), 0 for floats, -1 out of range. */
int pn_model_input_is_ids(const pn_model *m, int i);

/* 1 when input i is sparse (its data a pn_sparse_rows), 0 when not, -1 out of range. */
int pn_model_input_is_sparse(const pn_model *m, int i);

/* The default output: the layer that feeds the (first) loss layer, e.g. the logits
 * "out"; without a loss layer, the last layer that nothing consumes. */
const char *pn_model_output_name(const pn_model *m);

/* Floats per sample of layer output (NULL: the default output); -1 when the model
 * has no such layer or input. */
int pn_model_output_size(const pn_model *m, const char *output);

/* Whether output's values (NULL: the default output) are the logits of a
 * classification: 1 when the layer is the prediction (first input) of a
 * classification loss layer (softmax_xent), so that its largest value per row is the
 * predicted class and its softmax the classes' probabilities; 2 when it is that of a
 * binary classification (sigmoid_xent): one logit per row, whose sigmoid is the
 * probability of label 1 (predicted where it is >= 0.5); 0 when it feeds a loss
 * of another kind (mse: the values are the regression's estimates) or none (a hidden
 * layer, a model without a loss layer); -1 when the model has no such layer. For the
 * default output this says whether the model's (first) loss is a classification. */
int pn_model_classifies(const pn_model *m, const char *output);

/* Runs batch samples forward and writes output's values (NULL: the default output)
 * to out, batch * pn_model_output_size floats, sample after sample: the raw values
 * the layer computes (logits, not probabilities: no softmax is applied).
 * inputs[i] is input i's data, batch * pn_model_input_size values, sample after
 * sample: const float * for float inputs, const int * for ids inputs, a const
 * pn_sparse_rows * for sparse inputs. An input that
 * output does not depend on may be NULL: labels are not needed for a prediction.
 * When every input of a loss layer is given, it runs too and its loss and accuracy
 * count in pn_model_loss. Any batch size works: large batches run in chunks that
 * bound the memory, the same values as one call per chunk. */
int pn_model_forward(pn_model *m, int batch, const void *const *inputs, const char *output,
                     float *out);

/* pn_model_forward over padded sequences: lengths[i], for an input with lengths
 * (pn_model_input_lengths), holds batch ints in 1 .. seq, each sample's real
 * positions (the rest is padding: masked in attention, skipped by lstm/gru, not
 * counted by the losses); lengths or lengths[i] NULL: every sample is full length.
 * Lengths for an input without them, or out of range, are an error naming the input
 * and the sample. */
int pn_model_forward_lengths(pn_model *m, int batch, const void *const *inputs,
                             const int *const *lengths, const char *output, float *out);

/* Rows the loss layers saw in pn_model_forward calls since the load or the last
 * pn_model_reset_loss, with their mean loss and the fraction of rows whose largest
 * logit was the label (NaN when a loss that counted rows is not a classification
 * over softmax_xent, or no row ran: a binary one reports pn_model_auc). mean_loss
 * and accuracy may be NULL. */
long pn_model_loss(const pn_model *m, double *mean_loss, double *accuracy);

/* The root mean squared error over the rows pn_model_loss counts, when every loss
 * layer that counted them is a mean squared error (mse): the square root of the mean
 * loss. NaN when one of them is not (a classification), or no row ran. */
double pn_model_rmse(const pn_model *m);

/* The area under the ROC curve over the rows pn_model_loss counts, when every loss
 * layer that counted them is a binary classification (sigmoid_xent; its mean loss is
 * the log-loss): from a histogram of the predicted probabilities at 2^16 bins per
 * label, ties within a bin counting half (within 1e-6 of the exact AUC unless the
 * probabilities crowd within 1e-5 of 0 or 1). NaN when one of them is not binary,
 * either label has no row, or no row ran. */
double pn_model_auc(const pn_model *m);

/* Forgets the rows counted by pn_model_loss. */
void pn_model_reset_loss(pn_model *m);

/* Text generation from a byte-level language model: a model whose output (the default
 * one) holds 256 logits per position of its one input of byte ids (vocab 256, a window
 * of T positions), such as models/char_gpt.json trained on `pipenet import text`
 * data. The model reads the window of the last tokens; when a window of T tokens
 * grows by one more, it is cut to its newest T/2 (which run through the model again),
 * so generation never stops at T. Each token's log-probability is that of the model's
 * distribution (temperature 1) given the window it was chosen from. */

/* How tokens are chosen. Zeroed, it means greedy sampling with the cache. */
typedef struct pn_gen_options {
    double temperature;      /* 0: the most likely byte (argmax); else softmax(logits / t) */
    int top_k;               /* draw among the k most likely bytes only; 0: all 256 */
    int beam;                /* 0: sample as above; B >= 1: beam search of width B, which
                              * ignores temperature, top_k and seed (B = 1 is greedy) */
    unsigned long long seed; /* sampling: the same seed gives the same tokens */
    int no_cache;            /* 1: recompute the whole window for every token instead of
                              * one position over the attention layers' key/value cache:
                              * the same tokens, slower (a reference) */
} pn_gen_options;

/* The model's window T (positions of its byte input), or -1 (with a message naming
 * the file and what is missing) when the model is not a byte-level language model. */
int pn_model_gen_window(const pn_model *m);

/* Starts a generation from prompt (len >= 1 bytes; a longer prompt than the window
 * keeps its last T bytes). Forgets any generation in progress on m. */
int pn_model_gen_start(pn_model *m, const unsigned char *prompt, int len,
                       const pn_gen_options *o);

/* The 256 logits from which the next byte will be chosen. */
int pn_model_gen_logits(pn_model *m, float *logits);

/* Chooses the next byte into *byte and appends it (logprob, may be NULL: its
 * log-probability). Sampling only: a beam search runs in pn_model_generate. */
int pn_model_gen_next(pn_model *m, int *byte, double *logprob);

/* Appends a byte of the caller's choice (0..255) as if it had been generated: a text
 * that mixes given and generated parts, or a replay of a continuation to score it. */
int pn_model_gen_append(pn_model *m, int byte);

/* Generates n bytes after prompt into out (n bytes, not terminated): pn_model_gen_start
 * and n pn_model_gen_next, or a beam search when o->beam >= 1 (the hypothesis of the
 * largest sum of log-probabilities; all have n bytes, so no length normalization).
 * *logprob (may be NULL): the sum over the n bytes. */
int pn_model_generate(pn_model *m, const unsigned char *prompt, int len, int n,
                      const pn_gen_options *o, unsigned char *out, double *logprob);

#ifdef __cplusplus
}
#endif

#endif
