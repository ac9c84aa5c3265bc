/* A synthetic click-through dataset with a planted model (import_sparse.h,
 * docs/sparse.md). Sample i of a split draws, from that split's stream of the seed,
 * one id per field from the field's Zipf law (rank r of V with probability
 * proportional to r^-s; id r - 1, so id 0 is the most frequent) and then its label
 * from Bernoulli(sigmoid(logit)), where
 *   logit = bias + sum_f w[f, id_f] + sum_{f < g} <u[f, id_f], u[g, id_g]>.
 * The planted parameters are never stored: w and u of a feature come from a stream
 * keyed by (seed, global id), so memory does not grow with the vocabulary. Their
 * scales split the logit's variance (bias aside, logit_scale^2) evenly between the
 * weights (F w^2 = scale^2 / 2) and the pairs (F(F-1)/2 rank u^4 = scale^2 / 2).
 * Only each sample's logit and label are kept, for the planted model's exact AUC. */
#include "io/import_sparse.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/rng.h"
#include "io/csr_file.h"
#include "io/hdf5_util.h"

enum { MAX_RANK = 64 };

/* 100 ids a field by default: with 1M samples the rarest id is then seen ~4000 times,
 * enough to estimate its weight and factors, so a model can come near the planted
 * optimum (with 1000 ids, ~90 sightings: even the planted model's own form, wide + FM,
 * stays 0.04 AUC short; docs/sparse.md). */
void pn_ctr_defaults(pn_ctr_options *o)
{
    *o = (pn_ctr_options){.samples = 100000, .test_samples = 20000, .fields = 26,
                          .vocab = 100, .seed = 1, .zipf = 1.1, .rank = 4, .bias = -1.0,
                          .logit_scale = 1.5};
}

/* The scales of the planted weights and factors. */
typedef struct planted {
    const pn_ctr_options *o;
    double weight_scale, factor_scale;
    double *cdf; /* [vocab]: the Zipf law's cumulative probabilities */
} planted;

/* A feature's weight and factors (rank of them), from (seed, global id) alone. */
static double feature(const planted *m, int64_t id, double *u)
{
    pn_rng r;
    pn_rng_init(&r, m->o->seed, pn_hash_mix(pn_hash_string("synthetic-ctr feature"),
                                            (uint64_t)id));
    double w = m->weight_scale * pn_rng_normal(&r);
    for (int k = 0; k < m->o->rank; k++) u[k] = m->factor_scale * pn_rng_normal(&r);
    return w;
}

/* A Zipf rank's id: the first whose cumulative probability exceeds x. */
static long zipf_id(const planted *m, double x)
{
    long lo = 0, hi = m->o->vocab - 1;
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (m->cdf[mid] > x) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

/* log(1 + e^z) without overflow. */
static double softplus(double z) { return (z > 0 ? z : 0) + log1p(exp(-fabs(z))); }

static int cmp_score(const void *a, const void *b)
{
    double x = ((const pn_scored *)a)->score, y = ((const pn_scored *)b)->score;
    return (x > y) - (x < y);
}

double pn_ctr_auc(pn_scored *s, long n)
{
    qsort(s, (size_t)n, sizeof *s, cmp_score);
    /* the positives' mean rank among all (ties share the mean of their ranks) */
    double rank_sum = 0, pos = 0;
    for (long i = 0; i < n;) {
        long j = i, p = 0;
        while (j < n && s[j].score == s[i].score) p += s[j++].label != 0;
        rank_sum += (double)p * 0.5 * (double)(i + 1 + j); /* ranks i+1 .. j */
        pos += (double)p;
        i = j;
    }
    double neg = (double)n - pos;
    if (pos == 0 || neg == 0) return NAN;
    return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

/* Writes one split of n samples into tmp from the stream keyed by split. */
static int write_split(const planted *m, const char *tmp, const char *split, long n,
                       pn_scored *scored, pn_ctr_score *score)
{
    const pn_ctr_options *o = m->o;
    int F = o->fields, R = o->rank;
    pn_csr_file f;
    int rc = pn_csr_file_create(&f, tmp, false, true, o->chunk);
    int64_t *ids = malloc((size_t)F * sizeof *ids);
    int32_t *fields = malloc((size_t)F * sizeof *fields);
    if (rc == PN_OK && (!ids || !fields))
        rc = pn_error_set(PN_ERR_NOMEM, "%s: out of memory", tmp);
    pn_rng r;
    char key[64];
    snprintf(key, sizeof key, "synthetic-ctr %s", split);
    pn_rng_init(&r, o->seed, pn_hash_string(key));
    double loss = 0, positives = 0, u[MAX_RANK], sum_u[MAX_RANK];
    for (long i = 0; rc == PN_OK && i < n; i++) {
        double logit = o->bias, self = 0; /* self: sum of |u|^2, taken out of |sum u|^2 */
        for (int k = 0; k < R; k++) sum_u[k] = 0;
        for (int g = 0; g < F; g++) {
            fields[g] = g;
            ids[g] = (int64_t)g * o->vocab + zipf_id(m, pn_rng_uniform(&r));
            logit += feature(m, ids[g], u);
            for (int k = 0; k < R; k++) sum_u[k] += u[k], self += u[k] * u[k];
        }
        double pairs = -self;
        for (int k = 0; k < R; k++) pairs += sum_u[k] * sum_u[k];
        logit += 0.5 * pairs;
        double p = 1 / (1 + exp(-logit));
        int label = pn_rng_uniform(&r) < p;
        loss += softplus(logit) - label * logit;
        positives += label;
        scored[i] = (pn_scored){logit, label};
        rc = pn_csr_file_add_row(&f, label, F, ids, NULL, fields);
    }
    free(ids);
    free(fields);
    if (rc == PN_OK)
        *score = (pn_ctr_score){loss / (double)n, pn_ctr_auc(scored, n), positives / (double)n};
    rc = pn_csr_file_finish(&f, (int64_t)F * o->vocab, F, rc);
    const struct { const char *name; double value; } reals[] = {
        {"planted_log_loss", score->log_loss}, {"planted_auc", score->auc},
        {"positive_rate", score->positive_rate}, {"zipf_exponent", o->zipf},
        {"bias", o->bias}, {"logit_scale", o->logit_scale}, {"weight_scale", m->weight_scale},
        {"factor_scale", m->factor_scale}};
    const struct { const char *name; long value; } ints[] = {
        {"fields", F}, {"vocab", o->vocab}, {"rank", R}, {"samples", n},
        {"num_classes", 2}};
    char source[128];
    snprintf(source, sizeof source, "synthetic-ctr: the %s split of seed %llu", split,
             (unsigned long long)o->seed);
    if (rc == PN_OK) rc = pn_hdf5_write_attr_string(f.file, tmp, "source", source, false);
    if (rc == PN_OK) rc = pn_hdf5_write_attr_uint(f.file, tmp, "seed", o->seed, 64);
    for (size_t k = 0; rc == PN_OK && k < sizeof reals / sizeof *reals; k++)
        rc = pn_hdf5_write_attr_double(f.file, tmp, reals[k].name, reals[k].value);
    for (size_t k = 0; rc == PN_OK && k < sizeof ints / sizeof *ints; k++)
        rc = pn_hdf5_write_attr_int(f.file, tmp, ints[k].name, ints[k].value);
    return pn_csr_file_close(&f, rc);
}

static int check_options(const pn_ctr_options *o)
{
    if (o->samples < 1 || o->test_samples < 1)
        return pn_error_set(PN_ERR_INVALID, "--samples and --test-samples: expected 1 or more, "
                            "found %ld and %ld", o->samples, o->test_samples);
    if (o->fields < 1 || o->vocab < 1 || o->fields > (1 << 20) ||
        (double)o->fields * (double)o->vocab > 0x1p62)
        return pn_error_set(PN_ERR_INVALID, "--fields %d, --vocab %ld: expected 1 or more each, "
                            "fields x vocab below 2^62", o->fields, o->vocab);
    if (o->rank < 1 || o->rank > MAX_RANK)
        return pn_error_set(PN_ERR_INVALID, "--rank: expected 1..%d, found %d", MAX_RANK, o->rank);
    if (!(o->zipf >= 0) || !isfinite(o->zipf) || !(o->logit_scale >= 0) ||
        !isfinite(o->logit_scale) || !isfinite(o->bias))
        return pn_error_set(PN_ERR_INVALID, "--zipf, --logit-scale: expected finite numbers "
                            "0 or more, --bias a finite number");
    return PN_OK;
}

int pn_import_synthetic_ctr(const pn_ctr_options *o, const char *out_dir, pn_ctr_score *score,
                            pn_import_progress progress, void *ctx)
{
    PN_TRY(check_options(o));
    planted m = {.o = o};
    double pairs = 0.5 * o->fields * (o->fields - 1.0), var = o->logit_scale * o->logit_scale;
    m.weight_scale = sqrt((pairs > 0 ? var / 2 : var) / o->fields);
    m.factor_scale = pairs > 0 ? pow(var / 2 / (pairs * o->rank), 0.25) : 0;
    long most = o->samples > o->test_samples ? o->samples : o->test_samples;
    m.cdf = malloc((size_t)o->vocab * sizeof *m.cdf);
    pn_scored *scored = malloc((size_t)most * sizeof *scored);
    int rc = m.cdf && scored ? PN_OK
                             : pn_error_set(PN_ERR_NOMEM, "out of memory for the Zipf law of "
                                            "%ld ids and %ld samples' scores", o->vocab, most);
    double total = 0;
    for (long r = 0; rc == PN_OK && r < o->vocab; r++)
        m.cdf[r] = total += pow((double)(r + 1), -o->zipf);
    for (long r = 0; rc == PN_OK && r < o->vocab; r++) m.cdf[r] /= total;
    if (rc == PN_OK) m.cdf[o->vocab - 1] = 2; /* every uniform below it, whatever rounding */
    if (rc == PN_OK) rc = pn_import_make_dirs(out_dir);
    pn_ctr_score scores[2];
    for (int s = 0; s < 2 && rc == PN_OK; s++) {
        char out[PATH_MAX], tmp[PATH_MAX + 32];
        rc = pn_import_output(out_dir, s, out, sizeof out);
        if (rc == PN_OK) rc = pn_import_tmp_name(out, tmp, sizeof tmp);
        long n = s ? o->test_samples : o->samples;
        if (rc == PN_OK)
            rc = pn_import_finish(tmp, out,
                                  write_split(&m, tmp, pn_import_splits[s], n, scored, &scores[s]));
        if (rc == PN_OK && progress) progress(out, n, ctx);
        if (rc == PN_OK && score) score[s] = scores[s];
    }
    free(m.cdf);
    free(scored);
    return rc;
}
