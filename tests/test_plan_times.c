/* Measured plans: the layer-times file round-trips (the link and the sharing of the
 * cores included) and bad files are refused naming the place; the prediction takes
 * the sharing measured for its own number of ranks only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "net/graph.h"
#include "plan/plan.h"
#include "plan/plan_measure.h"
#include "plan/plan_predict.h"
#include "plan/schedule.h"
#include "testutil.h"

/* Writes text to a temporary file; returns its path (static). */
static const char *write_temp(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/test_plan_times_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

static void expect_load_refused(const pn_graph *g, const char *text, const char *want)
{
    const char *path = write_temp(text);
    pn_plan_times *t = NULL;
    ck_assert_int_lt(pn_plan_times_load(&t, g, path), 0);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(pn_error_message(), want), "no \"%s\" in: %s", want,
                  pn_error_message());
    ck_assert_msg(strstr(pn_error_message(), path), "no file in: %s", pn_error_message());
    unlink(path);
}

START_TEST(times_file_round_trip_and_refusals)
{
    const int widths[] = {16, 4};
    pn_graph *g = tu_fc_chain(8, widths, 2, "models/x.json");
    pn_plan_times *t = NULL, *back = NULL;
    ck_assert_int_eq(pn_plan_times_create(&t, g), 0);
    pn_measure_options mo = {.micro_batch = 4, .warmup = 1, .repetitions = 3, .threads = 1,
                             .seed = 1};
    ck_assert_msg(pn_plan_measure_layers(t, g, &mo) == 0, "%s", pn_error_message());
    for (int i = 0; i < g->n_nodes; i++)
        ck_assert(t->forward_s[i] >= 0 && t->backward_s[i] >= 0);
    ck_assert_int_eq(t->micro_batch, 4);
    t->shared_ranks = 3, t->alone_step_s = 0.01, t->shared_step_s = 0.025;
    const char *path = write_temp("");
    ck_assert_int_eq(pn_plan_times_save(t, g, path), 0);
    ck_assert_msg(pn_plan_times_load(&back, g, path) == 0, "%s", pn_error_message());
    for (int i = 0; i < g->n_nodes; i++) {
        ck_assert_double_eq(back->forward_s[i], t->forward_s[i]);
        ck_assert_double_eq(back->backward_s[i], t->backward_s[i]);
    }
    ck_assert_double_eq(back->optimizer_s_per_param, t->optimizer_s_per_param);
    ck_assert_int_eq(back->shared_ranks, 3);
    ck_assert_double_eq(back->alone_step_s, 0.01);
    ck_assert_double_eq(back->shared_step_s, 0.025);
    unlink(path);
    pn_plan_times_free(t);
    pn_plan_times_free(back);

#define HEAD "{\"format\": \"pipenet layer times\", \"version\": 1, \"micro_batch\": 4, "
    expect_load_refused(g, "[1, 2]", "expected an object of layer times");
    expect_load_refused(g, "{\"format\": \"csv\"}", "format: expected \"pipenet layer times\"");
    expect_load_refused(g, HEAD "\"layers\": {\"l1\": {\"forward_s\": 1, \"backward_s\": 1}}}",
                        "layers.l2: expected a time for every layer");
    expect_load_refused(g, HEAD "\"layers\": {\"l1\": {\"forward_s\": 1, \"backward_s\": 1}, "
                           "\"l2\": {\"forward_s\": 1, \"backward_s\": 1}, \"fc9\": {}}}",
                        "expected only layers of");
    expect_load_refused(g, HEAD "\"layers\": {\"l1\": {\"forward_s\": -1, \"backward_s\": 1}, "
                           "\"l2\": {\"forward_s\": 1, \"backward_s\": 1}}}",
                        "layers.l1.forward_s: expected a number");
    expect_load_refused(g, "{\"format\": ", "cannot read layer times");
    expect_load_refused(g, HEAD "\"sharing\": {\"ranks\": 1, \"alone_step_s\": 1, "
                           "\"shared_step_s\": 1}, \"layers\": {}}",
                        "sharing.ranks: expected an integer");
#undef HEAD
    pn_graph_free(g);
}
END_TEST

/* Two stages of forward 1 s and backward 2 s on one core, M = 4, 1f1b: by their
 * count the ranks take turns and the step is all the work, 2 x 4 x 3 = 24 s; with
 * sharing measured for 2 ranks as 3x (1.5x beyond the turns) it is longer, though
 * not longer than always running together at that speed; measured for 3 ranks it is
 * not used. */
START_TEST(prediction_uses_the_sharing_measured_for_its_ranks)
{
    const int widths[] = {8, 8};
    pn_graph *g = tu_fc_chain(8, widths, 2, "models/x.json");
    pn_plan *p = NULL;
    pn_schedule *s = NULL;
    pn_plan_times *t = NULL;
    ck_assert_int_eq(pn_plan_build(&p, g, 2), 0);
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_1F1B, 2, 4), 0);
    ck_assert_int_eq(pn_plan_times_create(&t, g), 0);
    t->micro_batch = 2;
    for (int i = 0; i < g->n_nodes; i++)
        if (!g->nodes[i].is_input) t->forward_s[i] = 1.0, t->backward_s[i] = 2.0;
    pn_plan_prediction pr;
    ck_assert_int_eq(pn_plan_predict(&pr, p, g, s, t, 1, 2, 0, 1, 1), 0);
    ck_assert(pr.oversubscribed && !pr.slowdown_measured);
    ck_assert_double_eq_tol(pr.slowdown, 2.0, 1e-12);
    ck_assert_double_eq_tol(pr.step_s, 24.0, 1e-9);
    ck_assert_double_eq_tol(pr.formula_s, 15.0, 1e-9); /* (M + P - 1) x 3 */
    pn_plan_prediction_release(&pr);
    t->shared_ranks = 2, t->alone_step_s = 1.0, t->shared_step_s = 3.0;
    ck_assert_int_eq(pn_plan_predict(&pr, p, g, s, t, 1, 2, 0, 1, 1), 0);
    ck_assert(pr.slowdown_measured);
    ck_assert_double_eq_tol(pr.contention, 1.5, 1e-12);
    ck_assert_msg(pr.step_s > 24.0 + 1e-6 && pr.step_s < 36.0, "step %g", pr.step_s);
    pn_plan_prediction_release(&pr);
    t->shared_ranks = 3;
    ck_assert_int_eq(pn_plan_predict(&pr, p, g, s, t, 1, 2, 0, 1, 1), 0);
    ck_assert(!pr.slowdown_measured);
    ck_assert_double_eq_tol(pr.step_s, 24.0, 1e-9);
    pn_plan_prediction_release(&pr);
    pn_plan_times_free(t);
    pn_schedule_free(s);
    pn_plan_free(p);
    pn_graph_free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_times");
    TCase *tc = tcase_create("measured");
    tcase_add_test(tc, times_file_round_trip_and_refusals);
    tcase_add_test(tc, prediction_uses_the_sharing_measured_for_its_ranks);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
