/* pn_layer and the layer-type table. A layer type is one static const pn_layer_type
 * (in its own file, listed in layers/registry.c) that knows how to read its JSON
 * attributes, infer its output shape, declare its parameters, estimate its cost,
 * and run forward and backward.
 * A pn_layer is the immutable description a graph holds (type, name, shapes, parsed
 * attributes, parameter requests); a pn_layer_inst is one runnable instance of it in
 * one network: the parameter handles in an arena, the scratch buffers kept from
 * forward to backward, and loss statistics. Many instances (one per micro-batch in
 * flight) share one description. Conventions for forward/backward:
 *  - out->value is allocated by the caller with the inferred shape;
 *  - backward reads out->grad and ADDS into each input's grad (when its data is
 *    non-NULL) and into parameter gradients, so fan-out and micro-batches sum;
 *  - anything kept from forward for backward lives in the instance's scratch, in
 *    pooled buffers that are only reallocated when the batch grows. */
#ifndef PN_LAYER_H
#define PN_LAYER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/json_read.h"
#include "base/names.h"
#include "layers/arg.h"
#include "layers/auc.h"
#include "layers/params.h"

enum { PN_LAYER_MAX_PARAMS = 4 };

/* Where a layer gets the rows of a table sharded across its stage's replicas
 * (pn_params_set_sharded): out[k] = the table's row ids[k] for n distinct ids, from
 * whichever replica owns it. Every replica of the stage calls it for the same layers
 * in the same order (an exchange among them: Angel's pull); the stage provides it. */
typedef struct pn_row_puller {
    int (*pull)(void *ctx, const pn_params *arena, int param, const int *ids, int n,
                pn_matrix *out);
    void *ctx;
} pn_row_puller;

/* Per-pass facts a layer may need beyond its inputs. */
typedef struct pn_pass {
    bool training;    /* dropout active, stats collected */
    uint64_t seed;    /* run seed (dropout masks) */
    long step;        /* global optimizer step */
    long sample0;     /* global index, in the step's batch, of the arg's first sample */
    int micro;        /* the step's micro-batch, for traces (base/trace.h) */
    bool recompute;   /* a forward run again for its backward (--recompute): same
                         values and dropout masks; the network keeps loss stats as
                         they were, so the micro-batch counts once */
    const pn_row_puller *puller; /* sharded tables' rows (NULL: no sharded table) */
} pn_pass;

/* Loss-layer statistics, summed over forwards until reset by the caller. */
typedef struct pn_layer_stats {
    double loss_sum; /* sum of per-row losses */
    double correct;  /* rows predicted right (classification losses) */
    double rows;     /* rows seen */
} pn_layer_stats;

/* A parameter a layer asks for: "<layer>/<suffix>", rows x cols, init, decay. A tied
 * one (tie_layer set) is this layer's copy of parameter "<tie_layer>/<tie_suffix>"
 * (an fc's "tie" to an embedding's table): the graph checks that it exists with the
 * same shape and gives the copy its init and decay; the arena marks the copy
 * (pn_params_tie), and the trainer keeps both equal (pipeline/ties.h). */
typedef struct pn_param_decl {
    const char *suffix;
    int rows, cols;
    pn_init init;
    bool decay;
    const char *tie_layer;  /* NULL: the layer's own parameter */
    const char *tie_suffix;
    bool row_sparse;        /* gradient as touched rows (pn_layer_param_row_grad) */
    bool sharded;           /* rows split across the stage's replicas ("shard": "rows") */
} pn_param_decl;

typedef struct pn_layer pn_layer;
typedef struct pn_layer_inst pn_layer_inst;

/* What a loss type measures, so that every report (the metrics file, the epoch lines,
 * `pipenet infer`, pn_model_loss) asks its layer type instead of comparing names. */
typedef enum pn_loss_kind {
    PN_LOSS_OTHER = 0,      /* not a loss, or one reported by its mean loss alone */
    PN_LOSS_CLASSIFICATION, /* logits and a label id per row: a row is right when its
                               largest logit is the label (accuracy), and the softmax
                               of the logits is the classes' probabilities */
    PN_LOSS_SQUARED_ERROR,  /* a regression whose per-row loss is a mean squared error:
                               the root of the mean loss is the RMSE */
    PN_LOSS_BINARY,         /* one logit and a 0/1 label per row: the mean loss is the
                               log-loss, the sigmoid of the logit the probability of
                               1, and the evaluation's rows give an AUC (x->auc) */
} pn_loss_kind;

typedef struct pn_layer_type {
    const char *name;     /* "fc" */
    const char *summary;  /* one line for `pipenet layers` */
    int min_inputs;
    int max_inputs;       /* -1: any number */
    bool is_loss;         /* output is a per-row loss [rows, 1] */
    pn_loss_kind loss_kind; /* a loss's kind; its first input is the prediction */
    size_t attrs_size;    /* bytes of zeroed parsed attributes given to parse */
    size_t scratch_size;  /* bytes of zeroed per-instance scratch */
    const char *const *attrs; /* attribute names the type accepts (NULL-terminated) */

    /* Reads and validates attributes from spec into l->attrs. */
    int (*parse)(pn_layer *l, const json_t *spec);
    /* Checks l->in_shapes and sets l->out_shape. */
    int (*infer)(pn_layer *l);
    /* Fills l->param_decls / l->n_params from attributes and shapes (optional). */
    void (*declare)(pn_layer *l);
    int (*forward)(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out);
    int (*backward)(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out);
    /* Backward writes each stale input gradient whole (pn_arg_grad_beta, arg.h)
     * instead of adding into it; for other types pn_layer_backward zeroes stale
     * input gradients first. */
    bool writes_stale_grads;
    /* Its one input is a sparse (CSR) edge (shape.sparse, pn_arg.csr); no other type
     * may take one (pn_layer_create refuses it). */
    bool takes_sparse;
    /* Forward plus backward FLOPs for one sample. */
    double (*flops)(const pn_layer *l);
    /* Whether its backward reads the value of input k (k >= 0) or of its output
     * (k = -1): the memory planner (net/arg_plan.h) keeps those to the backward
     * and lets others share storage once the forwards are past them. NULL: it reads
     * them all. */
    bool (*backward_reads)(const pn_layer *l, int k);
    /* Its forward may write the output over input 0 (same shape, each element read
     * before it is written, as its backward reads only the output) (optional). */
    bool (*in_place)(const pn_layer *l);
    /* Bytes kept per sample from forward to backward beyond the output itself. */
    double (*saved_bytes)(const pn_layer *l);
    /* Writes into buf a line the run logs once about the layer (an embedding_bag
     * hashing its ids), or leaves buf empty (optional). */
    void (*note)(const pn_layer *l, char *buf, size_t cap);
    /* The distinct rows, increasing, of its sharded table that its forward pulls
     * (pn_layer_pull_rows) for samples [first, first + rows) of the CSR batch in, in
     * host memory *work holds: so that a stage can pull them ahead (optional). */
    int (*pull_ids)(const pn_layer *l, const pn_csr *in, int first, int rows, pn_buffer *work,
                    const int **ids, int *n);
    /* Releases the buffers an instance holds in its scratch (optional). */
    void (*release)(pn_layer_inst *x);
    /* Rows per sample of the tallest matrix the layer makes, scratch included
     * (optional: its inputs' and output's seq); a batch's rows of it must fit an int. */
    int64_t (*rows_per_sample)(const pn_layer *l);
    /* Integer ids on input k must lie in [0, this); 0: no bound (optional). The data
     * reader checks them against it, so a bad label is named by file and sample. */
    int (*id_limit)(const pn_layer *l, int k);

    /* Generation, one position at a time (pn_layer_step): */
    /* The forward computes each output row from the same rows of the inputs only, so
     * it runs unchanged on one row per sequence (fc, act, layernorm, add...). */
    bool per_row;
    /* Incremental forward of a layer that is not per_row (optional): in and out hold
     * one row per sequence, row i being position pos of sequence i (out->batch
     * sequences); what the layer needs of positions 0..pos-1 it kept from the steps
     * at those positions (attention's key/value cache). */
    int (*step)(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out);
    /* Makes sequence i (i < n) continue what sequence from[i] held at positions
     * 0..len-1 (beam search reorders its hypotheses); optional, for types that keep
     * state between steps. */
    int (*step_reorder)(pn_layer_inst *x, const int *from, int n, int len);
} pn_layer_type;

/* The description: set up by pn_layer_create, read-only afterwards. */
struct pn_layer {
    const pn_layer_type *type;
    char *name;
    int n_inputs;
    pn_shape *in_shapes;
    pn_shape out_shape;
    int n_params;
    pn_param_decl param_decls[PN_LAYER_MAX_PARAMS];
    void *attrs; /* type-private parsed attributes */
    pn_json_at where; /* its place in the model file, for messages */
};

/* One runnable instance of a layer in one network. */
struct pn_layer_inst {
    const pn_layer *layer;
    pn_params *params;                    /* the arena holding the parameters */
    int param_index[PN_LAYER_MAX_PARAMS]; /* their handles in params */
    pn_layer_stats stats;                 /* loss layers: summed until reset */
    pn_auc *auc; /* binary losses: the histogram of the forwards that do not train,
                    summed until reset as stats are; NULL for other types */
    void *scratch;                        /* type-private buffers */
};

/* The registered types, in listing order. */
int pn_layer_type_count(void);
const pn_layer_type *pn_layer_type_at(int i);
const pn_layer_type *pn_layer_type_find(const char *name);

/* Creates a layer of type type_name from its JSON spec (the object in the model's
 * "layers" list; keys name/type/input/stage are the graph's and are not checked
 * here) and its input shapes; at is the spec's place in the model file (NULL: a
 * spec of no file). Errors name the file, the attribute's path and the layer. */
int pn_layer_create(pn_layer **out, const pn_json_at *at, const char *name,
                    const char *type_name, const json_t *spec, const pn_shape *in_shapes,
                    int n_inputs);
void pn_layer_free(pn_layer *l);

/* Refuses (PN_ERR_UNSUPPORTED, naming the layer and its place) a batch of `batch`
 * samples whose matrices would have more rows than an int holds. pn_layer_create
 * has already refused an output of more values per sample, or a parameter of more
 * floats, than that. */
int pn_layer_check_batch(const pn_layer *l, int batch);

/* Parameter i's name, "<layer>/<suffix>", into buf; PN_ERR_INVALID when the layer's
 * name or the suffix is longer than base/names.h allows (so no name is ever cut). */
int pn_layer_param_name(const pn_layer *l, int i, char buf[PN_PARAM_NAME_MAX + 1]);

/* Parameter i is a tied copy: true, and the name of the parameter it copies,
 * "<tie_layer>/<tie_suffix>", into buf; false for a parameter of the layer's own. */
bool pn_layer_param_tie(const pn_layer *l, int i, char buf[PN_PARAM_NAME_MAX + 1]);

/* Makes x an instance of l over params: declares l's parameters there (an existing
 * name gives its handle, so instances share them) and zeroes scratch and stats. */
int pn_layer_inst_init(pn_layer_inst *x, const pn_layer *l, pn_params *params);

/* Releases the instance's scratch buffers (a zeroed instance is ignored). */
void pn_layer_inst_release(pn_layer_inst *x);

/* Runs the type's forward / backward after checking the args' shapes. */
int pn_layer_forward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out);
int pn_layer_backward(pn_layer_inst *x, const pn_pass *pass, pn_arg *const *in, pn_arg *out);

/* Runs the layer at position pos of out->batch sequences, one row each (the type's
 * step, or its forward when it is per_row); PN_ERR_UNSUPPORTED, naming the layer,
 * for a type that can do neither. Steps at positions 0..pos-1 of the same sequences
 * must have run before (attention keeps their keys and values). */
int pn_layer_step(pn_layer_inst *x, int pos, pn_arg *const *in, pn_arg *out);

/* Makes sequence i continue sequence from[i]'s state at positions 0..len-1, for
 * i < n (a no-op for a type without state). */
int pn_layer_step_reorder(pn_layer_inst *x, const int *from, int n, int len);

/* Estimates per sample: forward+backward FLOPs; bytes held from forward to backward
 * (output plus saved state). */
double pn_layer_flops(const pn_layer *l);
double pn_layer_activation_bytes(const pn_layer *l);

/* Parameter i's value / gradient in the instance's arena. */
pn_matrix pn_layer_param(const pn_layer_inst *x, int i);
pn_matrix pn_layer_param_grad(const pn_layer_inst *x, int i);
/* Parameter i's row-sparse gradient (declared with pn_layer_add_row_sparse_param). */
pn_row_grad *pn_layer_param_row_grad(const pn_layer_inst *x, int i);

/* A rows x cols matrix over buf on dev, growing buf only when it is too small:
 * layers keep what backward needs in such scratch buffers. */
int pn_layer_scratch(pn_buffer *buf, pn_device dev, int rows, int cols, pn_matrix *out);

/* The lengths a loss layer masks by: its first input's, else its second's, or NULL. */
const int *pn_loss_lengths(pn_arg *const *in);

/* PN_ERR_INVALID, naming the layer, when in has samples shorter than its seq: for
 * the layers that take every row of a sample as one of its fields (fm, flatten...),
 * where padding would count as a field. */
int pn_layer_refuse_lengths(const pn_layer_inst *x, const pn_arg *in);

/* Rows of m past each sample's length (samples of seq rows) set to zero: the
 * per-row losses of padding, or a layer's outputs at padded positions. */
int pn_zero_padded_rows(pn_matrix *loss, int seq, const int *lengths);

/* Adds a loss layer's per-row losses [rows, 1] and its correct count to x->stats
 * (sum_buf holds the device-side sum); with lengths (loss rows of samples of seq
 * rows, padded rows zero) only the real rows count as rows. */
int pn_layer_record_loss(pn_layer_inst *x, pn_buffer *sum_buf, const pn_matrix *loss,
                         int seq, const int *lengths,
                         double correct);

/* Adds a parameter request to l (used by declare). */
void pn_layer_add_param(pn_layer *l, const char *suffix, int rows, int cols, pn_init init,
                        bool decay);

/* The same for a table whose backward touches few rows: its gradient is a
 * pn_row_grad of the touched rows, never a table-sized buffer (layers/row_grad.h). */
void pn_layer_add_row_sparse_param(pn_layer *l, const char *suffix, int rows, int cols,
                                   pn_init init, bool decay);

/* Marks l's last parameter request (a row-sparse table) sharded by rows across the
 * replicas of its stage (pn_params_set_sharded). */
void pn_layer_shard_last_param(pn_layer *l);

/* Parameter i, a table split across the stage's replicas (pn_params_split): its rows
 * ids[0..n) fetched through pass->puller into *scratch, *out's row k being id ids[k]. */
int pn_layer_pull_rows(const pn_layer_inst *x, int i, const pn_pass *pass, const int *ids,
                       int n, pn_buffer *scratch, pn_matrix *out);

/* Adds a tied parameter request: l's copy, named "<l>/<suffix>", of parameter
 * "<tie_layer>/<tie_suffix>" of rows x cols (both strings must outlive l). */
void pn_layer_add_tied_param(pn_layer *l, const char *suffix, int rows, int cols,
                             const char *tie_layer, const char *tie_suffix);

#endif
