/* The histogram AUC (layers/auc.h). */
#include "layers/auc.h"

#include <math.h>
#include <string.h>

int pn_auc_bin(double p)
{
    int bin = (int)(p * PN_AUC_BINS);
    return bin < 0 ? 0 : bin >= PN_AUC_BINS ? PN_AUC_BINS - 1 : bin;
}

void pn_auc_add(pn_auc *a, float logit, int label)
{
    double p = 1.0 / (1.0 + exp(-(double)logit));
    a->counts[(label ? PN_AUC_BINS : 0) + pn_auc_bin(p)] += 1.0;
    a->rows += 1.0;
}

void pn_auc_merge(pn_auc *into, const pn_auc *from)
{
    if (from->rows == 0) return;
    for (int i = 0; i < 2 * PN_AUC_BINS; i++) into->counts[i] += from->counts[i];
    into->rows += from->rows;
}

void pn_auc_reset(pn_auc *a)
{
    if (a->rows != 0) memset(a, 0, sizeof *a); /* every step resets; most are empty */
}

double pn_auc_value(const pn_auc *a)
{
    const double *neg = a->counts, *pos = a->counts + PN_AUC_BINS;
    double below = 0.0, pairs = 0.0, n_neg = 0.0, n_pos = 0.0;
    for (int b = 0; b < PN_AUC_BINS; b++) {
        pairs += pos[b] * (below + 0.5 * neg[b]);
        below += neg[b];
        n_neg += neg[b];
        n_pos += pos[b];
    }
    return n_neg > 0 && n_pos > 0 ? pairs / (n_neg * n_pos) : NAN;
}
