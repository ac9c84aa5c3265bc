/* Pipeline schedules: gpipe and 1f1b lists for every P in 1..8 and M in 1..16 pass the
 * checker, give each (stage, micro-batch) one forward then one backward, hold at most
 * min(P - s, M) (1f1b) or M (gpipe) micro-batches, and have the analytic bubble;
 * hand-made lists that deadlock or lose or repeat a pass are refused by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "pipeline/schedule.h"
#include "testutil.h"

enum { MAX_P = 8, MAX_M = 16, HAND_STAGES = 8, HAND_ACTIONS = 64, LIST_CHARS = 4096 };

/* "F0 F1 B0 ..." for one stage. */
static void format_stage(const pn_schedule *s, int stage, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->count[stage] && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%c%d", i ? " " : "",
                         s->actions[stage][i].pass == PN_PASS_FORWARD ? 'F' : 'B',
                         s->actions[stage][i].micro);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* "  stage 0: F0 ...\n  stage 1: ...\n" for every stage, for failure messages. */
static void format_all(const pn_schedule *s, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int st = 0; st < s->stages && len < n; st++) {
        char line[LIST_CHARS];
        format_stage(s, st, line, sizeof line);
        int w = snprintf(buf + len, n - len, "  stage %d: %s\n", st, line);
        if (w < 0) break;
        len += (size_t)w;
    }
}

/* A schedule written by hand, one "F0 B0 ..." string per stage. */
typedef struct hand {
    pn_schedule s;
    int count[HAND_STAGES];
    pn_action *rows[HAND_STAGES];
    pn_action buf[HAND_STAGES][HAND_ACTIONS];
} hand;

static void parse_list(const char *text, pn_action *out, int *count)
{
    int n = 0;
    const char *p = text;
    while (*p) {
        while (*p == ' ') p++;
        if (!*p) break;
        ck_assert_msg((*p == 'F' || *p == 'B') && n < HAND_ACTIONS, "bad test list: %s", text);
        pn_pass_kind pass = *p == 'F' ? PN_PASS_FORWARD : PN_PASS_BACKWARD;
        char *end;
        long m = strtol(p + 1, &end, 10);
        ck_assert_msg(end != p + 1, "bad test list: %s", text);
        out[n].pass = pass;
        out[n].micro = (int)m;
        n++;
        p = end;
    }
    *count = n;
}

static pn_schedule *hand_make(hand *h, pn_schedule_kind kind, int stages, int micro,
                              const char *const *lists)
{
    ck_assert_int_le(stages, HAND_STAGES);
    memset(h, 0, sizeof *h);
    h->s.kind = kind;
    h->s.stages = stages;
    h->s.micro = micro;
    h->s.count = h->count;
    h->s.actions = h->rows;
    for (int st = 0; st < stages; st++) {
        h->rows[st] = h->buf[st];
        parse_list(lists[st], h->buf[st], &h->count[st]);
    }
    return &h->s;
}

/* Asserts the checker refuses s with a message containing every non-NULL want[i]. */
static void assert_refused(const pn_schedule *s, const char *const *want, int n_want)
{
    char lists[LIST_CHARS];
    format_all(s, lists, sizeof lists);
    pn_error_clear();
    ck_assert_msg(pn_schedule_check(s) == PN_ERR_INVALID, "checker accepted:\n%s", lists);
    const char *msg = pn_error_message();
    for (int i = 0; i < n_want; i++)
        ck_assert_msg(strstr(msg, want[i]) != NULL, "no '%s' in: %s\nlists:\n%s", want[i], msg,
                      lists);
}

START_TEST(names_round_trip_and_unknown_is_minus_one)
{
    ck_assert_int_eq(pn_schedule_kind_from_name("gpipe"), PN_SCHEDULE_GPIPE);
    ck_assert_int_eq(pn_schedule_kind_from_name("1f1b"), PN_SCHEDULE_1F1B);
    ck_assert_str_eq(pn_schedule_kind_name(PN_SCHEDULE_GPIPE), "gpipe");
    ck_assert_str_eq(pn_schedule_kind_name(PN_SCHEDULE_1F1B), "1f1b");
    const char *const unknown[] = {"GPipe", "1F1B", "pipedream", "gpipe ", "", "1f1b2"};
    for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++)
        ck_assert_msg(pn_schedule_kind_from_name(unknown[i]) == -1, "'%s' was accepted", unknown[i]);
    ck_assert_int_eq(pn_schedule_kind_from_name(NULL), -1);
}
END_TEST

START_TEST(build_refuses_empty_pipelines)
{
    pn_schedule *s = (pn_schedule *)&s;
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_1F1B, 0, 4), PN_ERR_INVALID);
    ck_assert_ptr_null(s);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "P=0 M=4"));
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_GPIPE, 2, 0), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "P=2 M=0"));
    ck_assert_int_eq(pn_schedule_build(&s, (pn_schedule_kind)7, 2, 2), PN_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "unknown kind 7"));
}
END_TEST

/* Loop index -> (kind, P, M) over both kinds, P in 1..MAX_P, M in 1..MAX_M. */
START_TEST(every_layout_is_valid_bounded_and_has_the_analytic_bubble)
{
    pn_schedule_kind kind = _i / (MAX_P * MAX_M) ? PN_SCHEDULE_1F1B : PN_SCHEDULE_GPIPE;
    int P = _i / MAX_M % MAX_P + 1, M = _i % MAX_M + 1;
    const char *name = pn_schedule_kind_name(kind);
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build(&s, kind, P, M), 0);
    char lists[LIST_CHARS];
    format_all(s, lists, sizeof lists);
    ck_assert_int_eq(s->kind, kind);
    ck_assert_int_eq(s->stages, P);
    ck_assert_int_eq(s->micro, M);
    ck_assert_msg(pn_schedule_check(s) == 0, "%s P=%d M=%d refused: %s\n%s", name, P, M,
                  pn_error_message(), lists);
    for (int st = 0; st < P; st++) {
        ck_assert_int_eq(s->count[st], 2 * M);
        int fwd_at[MAX_M], bwd_at[MAX_M], held = 0, peak = 0;
        for (int m = 0; m < M; m++) fwd_at[m] = bwd_at[m] = -1;
        for (int i = 0; i < s->count[st]; i++) {
            pn_action a = s->actions[st][i];
            ck_assert_int_ge(a.micro, 0);
            ck_assert_int_lt(a.micro, M);
            int *at = a.pass == PN_PASS_FORWARD ? fwd_at : bwd_at;
            ck_assert_msg(at[a.micro] < 0, "%s P=%d M=%d stage %d: two %c%d\n%s", name, P, M, st,
                          a.pass == PN_PASS_FORWARD ? 'F' : 'B', a.micro, lists);
            at[a.micro] = i;
            held += a.pass == PN_PASS_FORWARD ? 1 : -1;
            if (held > peak) peak = held;
        }
        for (int m = 0; m < M; m++)
            ck_assert_msg(fwd_at[m] >= 0 && bwd_at[m] > fwd_at[m],
                          "%s P=%d M=%d stage %d micro %d: forward at %d, backward at %d\n%s",
                          name, P, M, st, m, fwd_at[m], bwd_at[m], lists);
        int want = kind == PN_SCHEDULE_1F1B ? (P - st < M ? P - st : M) : M;
        ck_assert_msg(peak == want && pn_schedule_peak_in_flight(s, st) == want,
                      "%s P=%d M=%d stage %d: peak in flight %d (library %d), want %d\n%s", name,
                      P, M, st, peak, pn_schedule_peak_in_flight(s, st), want, lists);
    }
    double bubble = pn_schedule_bubble(s), want = (double)(P - 1) / (M + P - 1);
    ck_assert_msg(bubble >= want - 1e-12 && bubble <= want + 1e-12,
                  "%s P=%d M=%d: bubble %.15g, want %.15g\n%s", name, P, M, bubble, want, lists);
    pn_schedule_free(s);
}
END_TEST

static void assert_lists(pn_schedule_kind kind, int P, int M, const char *const *want)
{
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build(&s, kind, P, M), 0);
    char lists[LIST_CHARS];
    format_all(s, lists, sizeof lists);
    for (int st = 0; st < P; st++) {
        char got[LIST_CHARS];
        format_stage(s, st, got, sizeof got);
        ck_assert_msg(strcmp(got, want[st]) == 0,
                      "%s P=%d M=%d stage %d:\n  got  %s\n  want %s\nall stages:\n%s",
                      pn_schedule_kind_name(kind), P, M, st, got, want[st], lists);
    }
    pn_schedule_free(s);
}

START_TEST(exact_lists_for_small_pipelines)
{
    static const char *const one_f_one_b_p4_m6[] = {
        "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
        "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
        "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
        "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5",
    };
    assert_lists(PN_SCHEDULE_1F1B, 4, 6, one_f_one_b_p4_m6);
    static const char *const gpipe_p2_m3[] = {"F0 F1 F2 B0 B1 B2", "F0 F1 F2 B0 B1 B2"};
    assert_lists(PN_SCHEDULE_GPIPE, 2, 3, gpipe_p2_m3);
    static const char *const one_f_one_b_p3_m2[] = {"F0 F1 B0 B1", "F0 F1 B0 B1", "F0 B0 F1 B1"};
    assert_lists(PN_SCHEDULE_1F1B, 3, 2, one_f_one_b_p3_m2);
}
END_TEST

/* Stage 0 waits at B0 for stage 1's B0; stage 1 first needs F1, which stage 0 runs
 * only after B0: a circular wait between two otherwise well-formed lists. */
START_TEST(circular_wait_is_a_deadlock)
{
    static const char *const lists[] = {"F0 B0 F1 B1", "F0 F1 B0 B1"};
    hand h;
    pn_schedule *s = hand_make(&h, PN_SCHEDULE_1F1B, 2, 2, lists);
    static const char *const want[] = {"schedule 1f1b P=2 M=2: deadlock: ",
                                       "stage 0 waits at backward 0, stage 1 waits at forward 1"};
    assert_refused(s, want, 2);
    ck_assert(pn_schedule_bubble(s) < 0);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "deadlock"));
}
END_TEST

/* 1f1b P=4 M=8 with stage 0's warm-up cut from 4 forwards to 2: stage 1 wants its third
 * forward before stage 0 reaches it, and every later stage waits behind. */
START_TEST(short_warm_up_deadlocks_and_names_every_stuck_stage)
{
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_1F1B, 4, 8), 0);
    int n;
    parse_list("F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 F6 B5 F7 B6 B7", s->actions[0], &n);
    ck_assert_int_eq(n, s->count[0]);
    static const char *const want[] = {
        "schedule 1f1b P=4 M=8: deadlock: stage 0 waits at backward 0, stage 1 waits at forward "
        "2, stage 2 waits at forward 2, stage 3 waits at forward 2"};
    assert_refused(s, want, 1);
    pn_schedule_free(s);
}
END_TEST

typedef struct malformed {
    const char *lists[2];
    const char *want;
} malformed;

/* gpipe P=2 M=3 with stage 0 or 1 spoiled. */
static const malformed malformed_lists[] = {
    {{"F0 F1 F2 B2 B1 B0", "F0 F1 F1 B2 B1 B0"}, "stage 1 has two forwards of micro-batch 1"},
    {{"F0 F1 F2 B2 B1", "F0 F1 F2 B2 B1 B0"}, "stage 0 has no backward of micro-batch 0"},
    {{"F0 F1 F2 B2 B1 B0", "F0 F1 B1 B0"}, "stage 1 has no forward of micro-batch 2"},
    {{"F0 F1 F2 B2 B1 B1", "F0 F1 F2 B2 B1 B0"}, "stage 0 has two backwards of micro-batch 1"},
    {{"F0 F1 F2 B2 B1 B0", "B0 F0 F1 F2 B2 B1"}, "stage 1 runs backward 0 before its forward"},
    {{"F0 F1 F3 B2 B1 B0", "F0 F1 F2 B2 B1 B0"}, "stage 0 action 2: micro-batch 3 out of range 0..2"},
    {{"F0 F1 F2 B2 B1 B0", "F0 F-1 F2 B2 B1 B0"}, "micro-batch -1 out of range"},
};
enum { N_MALFORMED = sizeof malformed_lists / sizeof *malformed_lists };

START_TEST(malformed_lists_are_refused_by_name)
{
    hand h;
    pn_schedule *s = hand_make(&h, PN_SCHEDULE_GPIPE, 2, 3, malformed_lists[_i].lists);
    const char *want[] = {"schedule gpipe P=2 M=3: ", malformed_lists[_i].want};
    assert_refused(s, want, 2);
    ck_assert_int_lt(pn_schedule_peak_in_flight(s, 0), 0);
    ck_assert(pn_schedule_bubble(s) < 0);
}
END_TEST

/* A valid but poor order measures a bigger bubble. Stage 1 runs F0 [1,2] F1 [2,3]
 * B1 [3,5] B0 [5,7]; stage 0 runs F0 [0,1] F1 [1,2] then must wait for B0 [7,9] and
 * B1 [9,11]: 6 busy of 11 per stage, bubble 5/11 (gpipe's is 1/3). */
START_TEST(bubble_is_simulated_not_assumed)
{
    static const char *const lists[] = {"F0 F1 B0 B1", "F0 F1 B1 B0"};
    hand h;
    pn_schedule *s = hand_make(&h, PN_SCHEDULE_GPIPE, 2, 2, lists);
    ck_assert_int_eq(pn_schedule_check(s), 0);
    ck_assert_double_eq_tol(pn_schedule_bubble(s), 5.0 / 11.0, 1e-12);
    ck_assert_int_eq(pn_schedule_peak_in_flight(s, 1), 2);
    ck_assert_int_lt(pn_schedule_peak_in_flight(s, 2), 0);
    ck_assert_ptr_nonnull(strstr(pn_error_message(), "stage 2 out of range"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *tc = tcase_create("schedules");
    tcase_add_test(tc, names_round_trip_and_unknown_is_minus_one);
    tcase_add_test(tc, build_refuses_empty_pipelines);
    tcase_add_loop_test(tc, every_layout_is_valid_bounded_and_has_the_analytic_bubble, 0,
                        2 * MAX_P * MAX_M);
    tcase_add_test(tc, exact_lists_for_small_pipelines);
    tcase_add_test(tc, circular_wait_is_a_deadlock);
    tcase_add_test(tc, short_warm_up_deadlocks_and_names_every_stuck_stage);
    tcase_add_loop_test(tc, malformed_lists_are_refused_by_name, 0, N_MALFORMED);
    tcase_add_test(tc, bubble_is_simulated_not_assumed);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
