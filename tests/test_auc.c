/* The histogram AUC (layers/auc.h) against the exact one (a sort, ties counting
 * half): its error on scores of a model of moderate confidence is measured and
 * bounded, ties and merged parts give exactly what one histogram does, a set without
 * one of the labels gives NaN, and the limit of a fixed probability resolution
 * (logits beyond about +-11 share the end bins) is measured, not hidden. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/rng.h"
#include "layers/auc.h"
#include "testutil.h"

typedef struct scored {
    float z;
    int y;
} scored;

static int by_logit(const void *a, const void *b)
{
    float x = ((const scored *)a)->z, y = ((const scored *)b)->z;
    return (x > y) - (x < y);
}

/* Mann-Whitney: the fraction of (positive, negative) pairs ordered right, ties half. */
static double exact_auc(scored *s, int n)
{
    qsort(s, (size_t)n, sizeof *s, by_logit);
    double below = 0.0, pairs = 0.0, pos = 0.0;
    for (int i = 0; i < n;) {
        int j = i;
        double neg_here = 0.0, pos_here = 0.0;
        for (; j < n && s[j].z == s[i].z; j++) *(s[j].y ? &pos_here : &neg_here) += 1.0;
        pairs += pos_here * (below + 0.5 * neg_here);
        below += neg_here;
        pos += pos_here;
        i = j;
    }
    return pairs / (pos * (n - pos));
}

static double normal(pn_rng *r)
{
    double u = pn_rng_uniform(r) + 1e-12, v = pn_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* n rows: positives' logits ~ N(shift, spread), negatives' ~ N(0, spread). */
static scored *draw(int n, double shift, double spread, uint64_t seed)
{
    scored *s = malloc(sizeof *s * (size_t)n);
    pn_rng r;
    pn_rng_init(&r, seed, 0);
    for (int i = 0; i < n; i++) {
        s[i].y = pn_rng_uniform(&r) < 0.3;
        s[i].z = (float)((s[i].y ? shift : 0.0) + spread * normal(&r) - 1.0);
    }
    return s;
}

static double histogram_auc(const scored *s, int n)
{
    pn_auc *a = calloc(1, sizeof *a);
    for (int i = 0; i < n; i++) pn_auc_add(a, s[i].z, s[i].y);
    double v = pn_auc_value(a);
    free(a);
    return v;
}

START_TEST(matches_the_exact_auc_of_moderate_scores)
{
    enum { N = 200000 };
    static const double shift[] = {0.5, 1.0, 2.0}, spread[] = {1.0, 2.0, 3.0};
    double worst = 0.0;
    for (int i = 0; i < 3; i++) {
        scored *s = draw(N, shift[i], spread[i], 7 + (uint64_t)i);
        double h = histogram_auc(s, N), e = exact_auc(s, N), err = fabs(h - e);
        printf("logits N(%.1f|0, %.1f), %d rows: histogram AUC %.8f, exact %.8f, error %.2e\n",
               shift[i], spread[i], N, h, e, err);
        worst = err > worst ? err : worst;
        free(s);
    }
    ck_assert_msg(worst < 1e-5, "histogram AUC is %.3g from the exact one", worst);
}
END_TEST

START_TEST(saturated_scores_lose_resolution)
{
    enum { N = 20000 };
    scored *s = draw(N, 4.0, 1.0, 3);
    for (int i = 0; i < N; i++) s[i].z += 14.0f; /* every probability within 1e-5 of 1 */
    double h = histogram_auc(s, N), e = exact_auc(s, N);
    printf("logits shifted by +14: histogram AUC %.4f, exact %.4f\n", h, e);
    ck_assert(e > 0.95);
    ck_assert(h < e); /* documented: the end bins hold them all */
    free(s);
}
END_TEST

START_TEST(ties_merges_and_missing_labels)
{
    scored tie[4] = {{0.3f, 0}, {0.3f, 1}, {-2.0f, 0}, {2.0f, 1}};
    ck_assert(fabs(histogram_auc(tie, 4) - 0.875) < 1e-12);
    ck_assert(fabs(exact_auc(tie, 4) - 0.875) < 1e-12);

    enum { N = 5000 };
    scored *s = draw(N, 1.0, 1.0, 5);
    pn_auc *whole = calloc(1, sizeof *whole), *part = calloc(1, sizeof *part),
           *sum = calloc(1, sizeof *sum);
    for (int i = 0; i < N; i++) pn_auc_add(whole, s[i].z, s[i].y);
    for (int k = 0; k < 3; k++) { /* three "ranks" with their own rows */
        pn_auc_reset(part);
        for (int i = k; i < N; i += 3) pn_auc_add(part, s[i].z, s[i].y);
        pn_auc_merge(sum, part);
    }
    ck_assert(sum->rows == N);
    ck_assert(pn_auc_value(sum) == pn_auc_value(whole));

    pn_auc_reset(part);
    pn_auc_add(part, 1.0f, 1);
    ck_assert(isnan(pn_auc_value(part)));
    ck_assert_int_eq(pn_auc_bin(1.0), PN_AUC_BINS - 1);
    ck_assert_int_eq(pn_auc_bin(0.0), 0);
    free(whole), free(part), free(sum), free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("auc");
    TCase *tc = tcase_create("histogram");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, matches_the_exact_auc_of_moderate_scores);
    tcase_add_test(tc, saturated_scores_lose_resolution);
    tcase_add_test(tc, ties_merges_and_missing_labels);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
