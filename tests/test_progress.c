/* Progress lines: after a resume the ETA is predicted from this run's steps only
 * (steps done before the resume took no time here), and a plain (not live) report
 * prints at most every few seconds but always at the last step. The metrics file's
 * evaluation lines: the key the loss's kind has (eval_accuracy, eval_rmse or eval_auc, none
 * for another kind), and null for a value JSON cannot hold. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "train/metrics.h"
#include "train/progress.h"
#include "testutil.h"

static void nap(double seconds)
{
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL);
}

/* The ETA of the line in text, in seconds ("ETA 1m05s"). */
static long eta_of(const char *text)
{
    const char *e = strstr(text, "ETA ");
    ck_assert_msg(e != NULL, "no ETA in '%s'", text);
    long m = 0, s = 0;
    ck_assert_int_eq(sscanf(e, "ETA %ldm%lds", &m, &s), 2);
    return m * 60 + s;
}

START_TEST(eta_after_a_resume_counts_this_runs_steps_only)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ck_assert_ptr_nonnull(out);
    pn_progress p;
    /* resumed at step 900 of 1000; 10 steps take ~0.3 s here, so 90 more take ~2.7 s
     * (counting the 900 resumed steps as done here would predict ~0 s) */
    pn_progress_start(&p, out, 900, 1000, 0.0, false);
    nap(0.3);
    pn_progress_step(&p, 910, 1, 0.5, 100.0, 1);
    fflush(out);
    long eta = eta_of(text);
    /* a loaded machine only makes the ETA longer */
    ck_assert_msg(eta >= 2 && eta <= 3600, "ETA %ld s after a resume, expected ~3 s: %s", eta,
                  text);
    ck_assert_ptr_nonnull(strstr(text, "step 910/1000  epoch 1  loss 0.5000  100 samples/s  ETA"));
    /* a sequence model's line also counts tokens */
    pn_progress_step(&p, 1000, 1, 0.5, 100.0, 64);
    fflush(out);
    ck_assert_msg(strstr(text, "step 1000/1000  epoch 1  loss 0.5000  100 samples/s  6400 tokens/s  ETA"),
                  "no tokens/s: %s", text);
    fclose(out);
    free(text);
}
END_TEST

START_TEST(plain_lines_keep_their_cadence_and_the_last_step)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    ck_assert_ptr_nonnull(out);
    pn_progress p;
    pn_progress_start(&p, out, 0, 3, 3600.0, true); /* a memory stream is no terminal */
    pn_progress_step(&p, 1, 1, 1.0, 10.0, 1);
    pn_progress_step(&p, 2, 1, 1.0, 10.0, 1);
    pn_progress_step(&p, 3, 1, 1.0, 10.0, 1);
    pn_progress_finish(&p);
    fflush(out);
    ck_assert_msg(strstr(text, "step 1/3") == NULL && strstr(text, "step 2/3") == NULL,
                  "printed before its cadence: %s", text);
    ck_assert_ptr_nonnull(strstr(text, "step 3/3"));
    ck_assert_ptr_null(strchr(text, '\r'));
    fclose(out);
    free(text);
}
END_TEST

/* pn_metrics_eval by kind: the key that fits (never an accuracy of an mse model),
 * no key for another kind, null for NaN and infinity (JSON has neither). */
START_TEST(evaluation_lines_name_what_the_loss_measures)
{
    char dir[512], path[600];
    tu_make_temp_dir(dir, sizeof dir, "metrics");
    snprintf(path, sizeof path, "%s/m.jsonl", dir);
    pn_metrics *m;
    ck_assert_int_eq(pn_metrics_open(&m, path, 0), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 1, 1, 0.5, PN_LOSS_CLASSIFICATION, 0.75), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 2, 1, 0.25, PN_LOSS_SQUARED_ERROR, 0.5), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 3, 1, 0.5, PN_LOSS_OTHER, NAN), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 4, 2, NAN, PN_LOSS_SQUARED_ERROR, INFINITY), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 5, 2, 0.5, PN_LOSS_BINARY, 0.875), 0);
    ck_assert_int_eq(pn_metrics_eval(m, 6, 2, 0.5, PN_LOSS_BINARY, NAN), 0);
    pn_metrics_close(m);
    const char *want[] = {
        "{\"step\": 1, \"epoch\": 1, \"eval_loss\": 0.5, \"eval_accuracy\": 0.75}\n",
        "{\"step\": 2, \"epoch\": 1, \"eval_loss\": 0.25, \"eval_rmse\": 0.5}\n",
        "{\"step\": 3, \"epoch\": 1, \"eval_loss\": 0.5}\n",
        "{\"step\": 4, \"epoch\": 2, \"eval_loss\": null, \"eval_rmse\": null}\n",
        "{\"step\": 5, \"epoch\": 2, \"eval_loss\": 0.5, \"eval_auc\": 0.875}\n",
        "{\"step\": 6, \"epoch\": 2, \"eval_loss\": 0.5, \"eval_auc\": null}\n",
    };
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        ck_assert_ptr_nonnull(fgets(line, sizeof line, f));
        ck_assert_str_eq(line, want[i]);
    }
    ck_assert_ptr_null(fgets(line, sizeof line, f));
    fclose(f);
    tu_remove_tree(dir);
}
END_TEST

/* The epoch line's time keeps its digits: a short epoch is no "0.0 s". */
START_TEST(durations_keep_their_digits)
{
    static const struct {
        double seconds;
        const char *text;
    } cases[] = {{0.0, "0.00 ms"}, {0.00025, "0.25 ms"}, {0.0055, "5.50 ms"}, {0.012, "12 ms"},
                 {0.9994, "999 ms"}, {1.0, "1.0 s"}, {12.34, "12.3 s"}, {3600.0, "3600.0 s"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[32];
        pn_progress_duration(cases[i].seconds, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].text);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("progress");
    TCase *metrics = tcase_create("metrics");
    tcase_add_test(metrics, evaluation_lines_name_what_the_loss_measures);
    suite_add_tcase(s, metrics);
    TCase *tc = tcase_create("progress");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, eta_after_a_resume_counts_this_runs_steps_only);
    tcase_add_test(tc, plain_lines_keep_their_cadence_and_the_last_step);
    tcase_add_test(tc, durations_keep_their_digits);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
