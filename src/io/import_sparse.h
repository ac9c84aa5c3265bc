/* Sparse importers: text files in libsvm or libffm form (import_libsvm.c) and a
 * synthetic click-through dataset (import_ctr.c) become dataset HDF5 files holding
 * the CSR group /features and /labels (csr_file.h; docs/formats.md, "Sparse features
 * (CSR)"; docs/sparse.md). Both stream: memory does not grow with the data. */
#ifndef PN_IMPORT_SPARSE_H
#define PN_IMPORT_SPARSE_H

#include <stdint.h>

#include "base/choices.h"
#include "io/import_util.h"

/* --- libsvm and libffm text --------------------------------------------------------- */

/* A line's form: "label idx:val ..." (libsvm) or "label field:idx:val ..." (libffm). */
typedef enum pn_svm_form { PN_SVM_AUTO, PN_SVM_LIBSVM, PN_SVM_LIBFFM } pn_svm_form;

/* The names --format takes, in pn_svm_form order. */
extern const pn_choices pn_svm_forms;

typedef struct pn_libsvm_options {
    pn_svm_form form;      /* AUTO: the first feature of the input decides */
    int index_base;        /* 0 or 1; -1: the form's own (libsvm 1, libffm 0) */
    int64_t columns;       /* 0: the largest index + 1 */
    int32_t num_fields;    /* 0: the largest field + 1 */
    double test_fraction;  /* in (0, 1): the last share of the samples go to test.h5 */
    const char *test_file; /* or test.h5 from this file; neither: train.h5 alone */
    long chunk;            /* values per HDF5 chunk and per write; 0: PN_CSR_CHUNK */
} pn_libsvm_options;

typedef struct pn_libsvm_result {
    pn_svm_form form;      /* the form read (AUTO when no line had a feature) */
    int index_base;
    long rows[2];          /* samples in train.h5, test.h5 */
    int64_t nnz[2];
    int64_t columns;
    int32_t num_fields;    /* 0 for libsvm */
} pn_libsvm_result;

/* Reads files[n_files] (and o->test_file) line by line into out_dir/train.h5 (and
 * out_dir/test.h5), written under temporary names and renamed when both are whole.
 * A line is "label feature feature ...", separated by spaces or tabs, CRLF or LF;
 * the label is 0 or 1 (-1 reads as 0, +1 as 1); a feature is idx:val or
 * field:idx:val; an empty line, or one whose first non-blank byte is '#', is no
 * sample, and a feature token starting with '#' ends the line (a comment). Refused,
 * naming the file, line and column (the byte in the line, from 1): anything else. */
int pn_import_libsvm(const char *const *files, int n_files, const char *out_dir,
                     const pn_libsvm_options *o, pn_libsvm_result *res,
                     pn_import_progress progress, void *ctx);

/* --- a synthetic click-through dataset ---------------------------------------------- */

typedef struct pn_ctr_options {
    long samples, test_samples; /* >= 1 each */
    int fields;                 /* F >= 1 */
    long vocab;                 /* V >= 1: ids per field */
    uint64_t seed;
    double zipf;                /* the exponent s of each field's Zipf law */
    int rank;                   /* of the pairwise factors */
    double bias;                /* the planted logit's constant */
    double logit_scale;         /* the planted logit's standard deviation, bias aside */
    long chunk;                 /* values per HDF5 chunk and per write; 0: PN_CSR_CHUNK */
} pn_ctr_options;

/* The defaults: 26 fields (Criteo's categorical ones), vocab 1000, s 1.1, rank 4,
 * bias -1, logit scale 2.5, seed 1. */
void pn_ctr_defaults(pn_ctr_options *o);

/* What the planted model scores on one file's samples: the best any model can. */
typedef struct pn_ctr_score {
    double log_loss, auc, positive_rate;
} pn_ctr_score;

/* Writes out_dir/train.h5 and out_dir/test.h5 (docs/sparse.md): one feature per field
 * per sample, its id drawn from the field's Zipf law, global id field * V + id;
 * /features/fields present, no values (all 1); labels Bernoulli(sigmoid(planted
 * logit)). Root attributes: the generation parameters and the planted model's
 * log-loss and AUC on the file's own samples. score[2] receives them (may be NULL). */
int pn_import_synthetic_ctr(const pn_ctr_options *o, const char *out_dir, pn_ctr_score *score,
                            pn_import_progress progress, void *ctx);

/* A sample's score and label (0 or 1), as pn_ctr_auc takes them. */
typedef struct pn_scored {
    double score;
    int label;
} pn_scored;

/* The exact area under the ROC curve of s[n]: the chance that a random positive
 * scores above a random negative, ties counting half; NaN when either class is
 * missing. Sorts s by score (in place: no memory of its own). */
double pn_ctr_auc(pn_scored *s, long n);

#endif
