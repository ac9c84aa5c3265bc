/* The embedding API (pipenet.h) by the kind of the loss: a regression's raw outputs
 * and its RMSE, losses of mixed kinds reporting the mean loss alone, and a binary
 * classifier's AUC (the pairs of its outputs ordered right), each against the
 * network run directly (model_fixture.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/snapshot_file.h"
#include "model_fixture.h"
#include "model_files.h"
#include "testutil.h"

/* A regression: mse against float targets of two values per sample. */
#define REGRESSION mf_text("regression_mse")

/* Two heads, a classification and a regression: losses of mixed kinds. */
#define TWO_HEADS mf_text("two_heads_xent_mse")

/* A click-through model: a factorization machine and a linear part over the
 * embeddings of 3 fields, their sum a logit against 0/1 clicks. */
#define CTR mf_text("ctr_fm_deep")

/* An mse model: the outputs are the network's values as they are, its loss is no
 * classification (no accuracy: NaN) and reports its RMSE, the root of the mean loss. */
START_TEST(a_regression_gives_raw_outputs_and_an_rmse)
{
    direct d;
    direct_init(&d, REGRESSION, 5);
    write_file(&d, REGRESSION, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_output_name(m), "out");
    ck_assert_int_eq(pn_model_classifies(m, NULL), 0);
    ck_assert_int_eq(pn_model_classifies(m, "h"), 0);
    float out[5 * 2];
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    int rc = pn_model_forward(m, 5, inputs, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "out"), sizeof out), 0);
    double loss, accuracy;
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 5);
    ck_assert(loss == d.stats.loss_sum / d.stats.rows);
    ck_assert(isnan(accuracy));
    ck_assert(pn_model_rmse(m) == sqrt(loss));
    /* the RMSE of the outputs against the targets, as a reader would compute it */
    const float *t = d.inputs[1];
    double sq = 0.0;
    for (int i = 0; i < 5 * 2; i++) sq += ((double)out[i] - t[i]) * ((double)out[i] - t[i]);
    ck_assert(tu_close(pn_model_rmse(m), sqrt(sq / 10), 1e-5, 1e-7));
    pn_model_reset_loss(m);
    ck_assert(isnan(pn_model_rmse(m)));
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

/* Losses of mixed kinds: each output says what it is; the rows of both count in the
 * mean loss, and neither an accuracy nor an RMSE mixes them. One loss alone keeps its own. */
START_TEST(losses_of_mixed_kinds_report_the_mean_loss_alone)
{
    direct d;
    direct_init(&d, TWO_HEADS, 4);
    write_file(&d, TWO_HEADS, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_output_name(m), "logits");
    ck_assert_int_eq(pn_model_classifies(m, NULL), 1);
    ck_assert_int_eq(pn_model_classifies(m, "est"), 0);
    float out[4 * 4];
    const void *all[3] = {d.inputs[0], d.inputs[1], d.inputs[2]};
    ck_assert_int_eq(pn_model_forward(m, 4, all, NULL, out), 0);
    double loss, accuracy;
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 8);
    ck_assert(loss == d.stats.loss_sum / d.stats.rows);
    ck_assert(isnan(accuracy) && isnan(pn_model_rmse(m)));
    pn_model_reset_loss(m);
    const void *no_targets[3] = {d.inputs[0], d.inputs[1], NULL};
    ck_assert_int_eq(pn_model_forward(m, 4, no_targets, NULL, out), 0);
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 4);
    ck_assert(!isnan(accuracy) && isnan(pn_model_rmse(m)));
    pn_model_reset_loss(m);
    const void *no_labels[3] = {d.inputs[0], NULL, d.inputs[2]};
    ck_assert_int_eq(pn_model_forward(m, 4, no_labels, "est", out), 0);
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), 4);
    ck_assert(isnan(accuracy) && pn_model_rmse(m) == sqrt(loss));
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

/* A binary classifier (sigmoid_xent): its logits are raw outputs and classify (2:
 * one logit, sigmoid), its mean loss is the log-loss, no accuracy or RMSE, and its
 * AUC is that of the outputs against the labels, counted pair by pair here. */
START_TEST(a_binary_classifier_reports_its_auc)
{
    enum { N = 8 };
    direct d;
    direct_init(&d, CTR, N);
    write_file(&d, CTR, PN_FORMAT_MODEL, NULL, NULL, NULL);
    pn_model *m = load_ok();
    ck_assert_str_eq(pn_model_output_name(m), "logit");
    ck_assert_int_eq(pn_model_classifies(m, NULL), 2);
    ck_assert_int_eq(pn_model_classifies(m, "deep"), 0);
    ck_assert(isnan(pn_model_auc(m)));
    float out[N];
    const void *inputs[2] = {d.inputs[0], d.inputs[1]};
    int rc = pn_model_forward(m, N, inputs, NULL, out);
    ck_assert_msg(rc == 0, "%s", pn_model_error());
    ck_assert_int_eq(memcmp(out, direct_output(&d, "logit"), sizeof out), 0);
    double loss, accuracy;
    ck_assert_int_eq(pn_model_loss(m, &loss, &accuracy), N);
    ck_assert(loss == d.stats.loss_sum / d.stats.rows);
    ck_assert(isnan(accuracy) && isnan(pn_model_rmse(m)));
    const int *y = d.inputs[1];
    double pairs = 0.0, right = 0.0, log_loss = 0.0;
    for (int i = 0; i < N; i++) {
        log_loss += log1p(exp(-(2.0 * y[i] - 1.0) * out[i]));
        for (int j = 0; j < N; j++)
            if (y[i] == 1 && y[j] == 0)
                pairs += 1.0, right += out[i] > out[j] ? 1.0 : out[i] == out[j] ? 0.5 : 0.0;
    }
    ck_assert_msg(pairs > 0, "the random labels need both classes");
    ck_assert(tu_close(loss, log_loss / N, 1e-5, 1e-7));
    ck_assert_msg(pn_model_auc(m) == right / pairs, "AUC %g, pairs say %g", pn_model_auc(m),
                  right / pairs);
    pn_model_reset_loss(m);
    ck_assert(isnan(pn_model_auc(m)));
    pn_model_free(m);
    direct_free(&d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("model_losses");
    TCase *tc = tcase_create("model_losses");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, a_regression_gives_raw_outputs_and_an_rmse);
    tcase_add_test(tc, losses_of_mixed_kinds_report_the_mean_loss_alone);
    tcase_add_test(tc, a_binary_classifier_reports_its_auc);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
