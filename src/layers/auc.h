/* The area under the ROC curve of a binary classifier, from a histogram of its
 * predicted probabilities (the sigmoid of its logits) per label at a fixed
 * resolution: histograms of micro-batches, stages and replicas add up (the trainer
 * sums them over the ranks as one array of doubles), so the AUC of a whole
 * evaluation set needs no sort and no gathering of its predictions. A positive and a
 * negative in one bin count as a tie (half a pair ordered right); tests/test_auc.c
 * measures the difference from the exact AUC. */
#ifndef PN_AUC_H
#define PN_AUC_H

#include <stdbool.h>

enum { PN_AUC_BINS = 1 << 16 };

typedef struct pn_auc {
    double counts[2 * PN_AUC_BINS]; /* [label * PN_AUC_BINS + bin]: rows */
    double rows;                    /* rows counted */
} pn_auc;

/* Doubles in a pn_auc, for sums over ranks. */
enum { PN_AUC_DOUBLES = (int)(sizeof(pn_auc) / sizeof(double)) };

/* The bin of probability p in [0, 1] (floor(p * bins), 1 in the last bin). */
int pn_auc_bin(double p);

/* Counts one row: its logit and its label (0 or 1). */
void pn_auc_add(pn_auc *a, float logit, int label);

void pn_auc_merge(pn_auc *into, const pn_auc *from);
void pn_auc_reset(pn_auc *a);

/* The AUC: the fraction of (positive, negative) pairs whose positive has the higher
 * bin, ties counting half; NaN when either label has no row. */
double pn_auc_value(const pn_auc *a);

#endif
