/* The schedule's makespan with times (plan/schedule_time.h): with a core per rank
 * and a forward costing 1, a backward 2, every gpipe, 1f1b and interleaved layout
 * takes 3 M V / (1 - its analytic bubble), and hour-long passes the same scaled;
 * uneven stages, messages and updates give the times worked out by hand below; ranks
 * sharing one core take turns (the total work when nothing else waits), and
 * contention slows only ranks that run at once. */
#include <math.h>
#include <stdlib.h>

#include "base/error.h"
#include "plan/schedule.h"
#include "plan/schedule_time.h"
#include "testutil.h"

enum { MAX_CHUNKS = 32 };

/* Forward 1 and backward 2 for every chunk; no messages, no updates. */
typedef struct unit_costs {
    double fwd[MAX_CHUNKS], bwd[MAX_CHUNKS];
    pn_chunk_times ct;
} unit_costs;

static void unit_costs_init(unit_costs *u)
{
    for (int c = 0; c < MAX_CHUNKS; c++) u->fwd[c] = 1.0, u->bwd[c] = 2.0;
    u->ct = (pn_chunk_times){.forward_s = u->fwd, .backward_s = u->bwd};
}

static double makespan_of(pn_schedule_kind kind, int P, int V, int M, const pn_chunk_times *ct)
{
    pn_schedule *s = NULL;
    ck_assert_msg(pn_schedule_build_virtual(&s, kind, P, V, M) == 0, "%s", pn_error_message());
    double t = -1.0;
    ck_assert_msg(pn_schedule_makespan(s, ct, &t) == 0, "%s", pn_error_message());
    pn_schedule_free(s);
    return t;
}

START_TEST(own_cores_give_the_analytic_bubble)
{
    unit_costs u;
    unit_costs_init(&u);
    for (int kind = PN_SCHEDULE_GPIPE; kind <= PN_SCHEDULE_INTERLEAVED; kind++)
        for (int P = kind == PN_SCHEDULE_INTERLEAVED ? 2 : 1; P <= 4; P++)
            for (int V = 1; V <= (kind == PN_SCHEDULE_INTERLEAVED ? 3 : 1); V++) {
                if (kind == PN_SCHEDULE_INTERLEAVED && V < 2) continue;
                for (int M = kind == PN_SCHEDULE_INTERLEAVED ? P : 1; M <= 8;
                     M += kind == PN_SCHEDULE_INTERLEAVED ? P : 1) {
                    double t = makespan_of(kind, P, V, M, &u.ct);
                    double want = 3.0 * M * V /
                                  (1.0 - pn_schedule_bubble_formula(kind, P, V, M));
                    ck_assert_msg(fabs(t - want) < 1e-9, "%s P=%d V=%d M=%d: %.12g, want %.12g",
                                  pn_schedule_kind_name(kind), P, V, M, t, want);
                }
            }
}
END_TEST

/* Long passes (hours) and ranks sharing a core end where short ones do, scaled: the
 * rounding of shares does not stall or drift the run. */
START_TEST(long_passes_scale)
{
    unit_costs u;
    unit_costs_init(&u);
    u.ct.slots = 1.5;
    u.ct.contention = 1.3;
    double short_run = makespan_of(PN_SCHEDULE_1F1B, 4, 1, 8, &u.ct);
    for (int c = 0; c < MAX_CHUNKS; c++) u.fwd[c] *= 3600.0, u.bwd[c] *= 3600.0;
    double long_run = makespan_of(PN_SCHEDULE_1F1B, 4, 1, 8, &u.ct);
    ck_assert_double_eq_tol(long_run / 3600.0, short_run, 1e-9 * short_run);
}
END_TEST

/* 1f1b, P = 2, M = 4; stage 0 passes cost 1, stage 1's 2. Stage 0: F0 [0,1] F1 [1,2]
 * B0 [5,6] F2 [6,7] B1 [9,10] F3 [10,11] B2 [13,14] B3 [17,18]; stage 1: F0 [1,3]
 * B0 [3,5] F1 [5,7] B1 [7,9] F2 [9,11] B2 [11,13] F3 [13,15] B3 [15,17]: 18, where
 * (M + P - 1) slots of the slower stage say 20. */
static double uneven_fwd[2] = {1, 2}, uneven_bwd[2] = {1, 2};

START_TEST(uneven_stages_take_what_their_lists_take)
{
    pn_chunk_times ct = {.forward_s = uneven_fwd, .backward_s = uneven_bwd};
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_1F1B, 2, 1, 4, &ct), 18.0, 1e-12);
}
END_TEST

/* One core for both ranks: whenever one waits, the other has the core alone, and
 * one always can run, so the step is all the work, 4 x 2 + 4 x 4 = 24. With
 * contention, the turns cost more: the step is longer, but not longer than if the
 * ranks always ran together at the contended speed (twice 24 at contention 2). */
START_TEST(ranks_on_one_core_take_turns)
{
    pn_chunk_times ct = {.forward_s = uneven_fwd, .backward_s = uneven_bwd, .slots = 1.0};
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_1F1B, 2, 1, 4, &ct), 24.0, 1e-9);
    ct.contention = 2.0;
    double t = makespan_of(PN_SCHEDULE_1F1B, 2, 1, 4, &ct);
    ck_assert_msg(t > 24.0 + 1e-6 && t < 48.0, "contended: %.12g", t);
    ct.slots = 2.0; /* two cores: running together now costs only the contention */
    double two = makespan_of(PN_SCHEDULE_1F1B, 2, 1, 4, &ct);
    ck_assert_msg(two > 18.0 + 1e-6 && two < t, "two cores, contended: %.12g", two);
}
END_TEST

/* gpipe, P = 2, M = 1 runs one pass at a time: sharing a core and contention cost
 * nothing (1 + 1 + 2 + 2 = 6). Two replicas of one stage on one core always run
 * together: each at 1/2 for the turns and 1/1.5 for contention 1.5, so 3 x 3 = 9. */
START_TEST(contention_costs_only_ranks_that_run_together)
{
    unit_costs u;
    unit_costs_init(&u);
    u.ct.slots = 1.0;
    u.ct.contention = 3.0;
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_GPIPE, 2, 1, 1, &u.ct), 6.0, 1e-12);
    u.ct.copies = 2;
    u.ct.contention = 1.5;
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_GPIPE, 1, 1, 1, &u.ct), 9.0, 1e-9);
}
END_TEST

/* 1f1b, P = 2, M = 1, messages of 0.5: F0 [0,1], F0 [1.5,2.5], B0 [2.5,4.5], B0 [5,7];
 * with updates of 1 and 3 after each stage's last pass: stage 1 ends at 7.5, stage 0
 * at 8. */
START_TEST(messages_and_updates_are_on_the_path)
{
    unit_costs u;
    unit_costs_init(&u);
    double send[MAX_CHUNKS] = {0.5, 0.5}, update[2] = {1.0, 3.0};
    u.ct.send_s = send;
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_1F1B, 2, 1, 1, &u.ct), 7.0, 1e-12);
    u.ct.update_s = update;
    ck_assert_double_eq_tol(makespan_of(PN_SCHEDULE_1F1B, 2, 1, 1, &u.ct), 8.0, 1e-12);
}
END_TEST

/* Lists that cannot finish are refused as pn_schedule_check refuses them. */
START_TEST(a_deadlocked_list_is_refused)
{
    unit_costs u;
    unit_costs_init(&u);
    pn_schedule *s = NULL;
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_1F1B, 2, 2), 0);
    /* stage 1 (F0 B0 F1 B1) backwards micro-batch 0 before its forward */
    pn_action f0 = s->actions[1][0];
    s->actions[1][0] = s->actions[1][1];
    s->actions[1][1] = f0;
    double t = -1.0;
    ck_assert_int_lt(pn_schedule_makespan(s, &u.ct, &t), 0);
    ck_assert_double_eq(t, -1.0);
    pn_schedule_free(s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule_time");
    TCase *tc = tcase_create("makespan");
    tcase_add_test(tc, own_cores_give_the_analytic_bubble);
    tcase_add_test(tc, long_passes_scale);
    tcase_add_test(tc, uneven_stages_take_what_their_lists_take);
    tcase_add_test(tc, ranks_on_one_core_take_turns);
    tcase_add_test(tc, contention_costs_only_ranks_that_run_together);
    tcase_add_test(tc, messages_and_updates_are_on_the_path);
    tcase_add_test(tc, a_deadlocked_list_is_refused);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
