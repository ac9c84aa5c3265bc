/* Pipeline schedules: gpipe and 1f1b lists for every P in 1..8 and M in 1..16 pass the
 * checker, give each (stage, micro-batch) one forward then one backward, hold at most
 * min(P - s, M) (1f1b) or M (gpipe) micro-batches, and have the analytic bubble;
 * interleaved lists for P in 2..6, V in 2..4 and M in P..4P likewise, with the
 * interleaved bubble (P - 1) / (V M + P - 1); hand-made lists that deadlock or lose
 * or repeat a pass are refused by name, interleaved ones included. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "plan/schedule.h"
#include "testutil.h"

enum { MAX_P = 8, MAX_M = 16, HAND_STAGES = 8, HAND_ACTIONS = 64, LIST_CHARS = 4096 };

/* "F0 F1 B0 ..." for one stage; "F0.1" is micro-batch 0 in virtual stage 1 (lists
 * with several virtual stages). */
static void format_stage(const pn_schedule *s, int stage, char *buf, size_t n)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->count[stage] && len < n; i++) {
        int w = snprintf(buf + len, n - len, "%s%c%d", i ? " " : "",
                         s->actions[stage][i].pass == PN_PASS_FORWARD ? 'F' : 'B',
                         s->actions[stage][i].micro);
        if (w >= 0 && s->virtual_stages > 1 && len + (size_t)w < n)
            w += snprintf(buf + len + w, n - len - w, ".%d", s->actions[stage][i].chunk);
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
        out[n].chunk = 0;
        if (*end == '.') {
            char *after;
            out[n].chunk = (int)strtol(end + 1, &after, 10);
            ck_assert_msg(after != end + 1, "bad test list: %s", text);
            end = after;
        }
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
    h->s.virtual_stages = kind == PN_SCHEDULE_INTERLEAVED ? 2 : 1;
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
    ck_assert_int_eq(pn_schedule_kind_from_name("interleaved"), PN_SCHEDULE_INTERLEAVED);
    ck_assert_str_eq(pn_schedule_kind_name(PN_SCHEDULE_INTERLEAVED), "interleaved");
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

/* Loop index -> (P, V, M): P in 2..IL_P, V in 2..IL_V, M = P, 2P, .., IL_K P. */
enum { IL_P = 6, IL_V = 4, IL_K = 4 };

START_TEST(interleaved_layouts_are_valid_ordered_and_have_the_interleaved_bubble)
{
    int P = _i / ((IL_V - 1) * IL_K) + 2, V = _i / IL_K % (IL_V - 1) + 2, M = (_i % IL_K + 1) * P;
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build_virtual(&s, PN_SCHEDULE_INTERLEAVED, P, V, M), 0);
    char lists[LIST_CHARS * 4];
    format_all(s, lists, sizeof lists);
    ck_assert_int_eq(s->virtual_stages, V);
    ck_assert_msg(pn_schedule_check(s) == 0, "interleaved P=%d V=%d M=%d refused: %s\n%s", P, V,
                  M, pn_error_message(), lists);
    for (int st = 0; st < P; st++) {
        ck_assert_int_eq(s->count[st], 2 * M * V);
        /* per chunk, forwards and backwards each go in micro-batch order (the stage
         * runtime gives micro-batch m the network m % peak of its chunk) */
        int next_f[IL_V], next_b[IL_V], held[IL_V] = {0}, peak[IL_V] = {0}, all = 0, all_peak = 0;
        for (int v = 0; v < V; v++) next_f[v] = next_b[v] = 0;
        for (int i = 0; i < s->count[st]; i++) {
            pn_action a = s->actions[st][i];
            ck_assert_int_ge(a.chunk, 0);
            ck_assert_int_lt(a.chunk, V);
            int *next = a.pass == PN_PASS_FORWARD ? next_f : next_b;
            ck_assert_msg(a.micro == next[a.chunk], "P=%d V=%d M=%d stage %d action %d: %c%d.%d, "
                          "want micro-batch %d\n%s", P, V, M, st, i,
                          a.pass == PN_PASS_FORWARD ? 'F' : 'B', a.micro, a.chunk,
                          next[a.chunk], lists);
            next[a.chunk]++;
            int d = a.pass == PN_PASS_FORWARD ? 1 : -1;
            held[a.chunk] += d, all += d;
            if (held[a.chunk] > peak[a.chunk]) peak[a.chunk] = held[a.chunk];
            if (all > all_peak) all_peak = all;
        }
        for (int v = 0; v < V; v++)
            ck_assert_int_eq(pn_schedule_peak_in_flight_chunk(s, st, v), peak[v]);
        ck_assert_int_eq(pn_schedule_peak_in_flight(s, st), all_peak);
    }
    double bubble = pn_schedule_bubble(s), want = (double)(P - 1) / (V * M + P - 1);
    ck_assert_msg(bubble >= want - 1e-12 && bubble <= want + 1e-12,
                  "interleaved P=%d V=%d M=%d: bubble %.15g, want %.15g\n%s", P, V, M, bubble,
                  want, lists);
    ck_assert_double_eq_tol(pn_schedule_bubble_formula(PN_SCHEDULE_INTERLEAVED, P, V, M), want,
                            1e-15);
    /* smaller than 1f1b's at the same P and M */
    ck_assert(bubble < pn_schedule_bubble_formula(PN_SCHEDULE_1F1B, P, 1, M));
    pn_schedule_free(s);
}
END_TEST

/* The warm-up of stage s is 2 (P - s - 1) + (V - 1) P forwards, in groups of P
 * micro-batches per chunk; backwards take the chunks in reverse. */
START_TEST(exact_interleaved_lists)
{
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build_virtual(&s, PN_SCHEDULE_INTERLEAVED, 2, 2, 4), 0);
    static const char *const want[] = {
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0",
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0"};
    for (int st = 0; st < 2; st++) {
        char got[LIST_CHARS];
        format_stage(s, st, got, sizeof got);
        ck_assert_msg(strcmp(got, want[st]) == 0, "stage %d:\n  got  %s\n  want %s", st, got,
                      want[st]);
    }
    pn_schedule_free(s);
}
END_TEST

START_TEST(interleaved_layouts_that_cannot_work_are_refused_by_name)
{
    static const struct {
        pn_schedule_kind kind;
        int P, V, M;
        const char *want;
    } bad[] = {
        {PN_SCHEDULE_INTERLEAVED, 1, 2, 4, "needs at least 2 stages"},
        {PN_SCHEDULE_INTERLEAVED, 2, 1, 4, "needs at least 2 virtual stages"},
        {PN_SCHEDULE_INTERLEAVED, 4, 2, 6, "P=4 V=2 M=6: the micro-batches must be a multiple"},
        {PN_SCHEDULE_1F1B, 2, 2, 4, "2 virtual stages need the interleaved schedule"},
        {PN_SCHEDULE_GPIPE, 2, 3, 4, "3 virtual stages need the interleaved schedule"},
        {PN_SCHEDULE_INTERLEAVED, 2, 0, 4, "needs at least one stage, virtual stage"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pn_schedule *s = (pn_schedule *)&s;
        pn_error_clear();
        ck_assert_int_eq(pn_schedule_build_virtual(&s, bad[i].kind, bad[i].P, bad[i].V, bad[i].M),
                         PN_ERR_INVALID);
        ck_assert_ptr_null(s);
        ck_assert_msg(strstr(pn_error_message(), bad[i].want), "case %zu: no '%s' in: %s", i,
                      bad[i].want, pn_error_message());
        ck_assert_int_eq(pn_schedule_check_layout(bad[i].kind, bad[i].P, bad[i].V, bad[i].M),
                         PN_ERR_INVALID);
    }
    pn_schedule *s;
    ck_assert_int_eq(pn_schedule_build(&s, PN_SCHEDULE_INTERLEAVED, 2, 4), PN_ERR_INVALID);
}
END_TEST

/* Stage 0 runs chunk 2's forward of micro-batch 0 before chunk 0's: chunk 2 needs chunk
 * 1 (stage 1), which needs chunk 0, which stage 0 reaches only later. */
START_TEST(broken_interleaved_list_deadlocks_by_chunk)
{
    static const char *const lists[] = {
        "F0.1 F0.0 F1.0 F1.1 B0.1 B1.1 B0.0 B1.0",
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0"};
    hand h;
    pn_schedule *s = hand_make(&h, PN_SCHEDULE_INTERLEAVED, 2, 2, lists);
    static const char *const want[] = {
        "schedule interleaved P=2 V=2 M=2: deadlock: ",
        "stage 0 waits at forward 0 of chunk 2, stage 1 waits at forward 0 of chunk 1"};
    assert_refused(s, want, 2);
    ck_assert(pn_schedule_bubble(s) < 0);
    /* the same lists in a good order pass */
    static const char *const good[] = {
        "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0",
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 B0.0 B1.0"};
    s = hand_make(&h, PN_SCHEDULE_INTERLEAVED, 2, 2, good);
    ck_assert_msg(pn_schedule_check(s) == 0, "%s", pn_error_message());
    /* a chunk out of range, and a chunk's backward before its forward */
    static const char *const range[] = {
        "F0.0 F1.0 F0.2 F1.1 B0.1 B1.1 B0.0 B1.0", good[1]};
    static const char *const want_range[] = {"stage 0 action 2: virtual stage 2 out of range 0..1"};
    assert_refused(hand_make(&h, PN_SCHEDULE_INTERLEAVED, 2, 2, range), want_range, 1);
    static const char *const early[] = {
        "F0.0 F1.0 B0.1 F0.1 F1.1 B1.1 B0.0 B1.0", good[1]};
    static const char *const want_early[] = {"stage 0 runs backward 0 of chunk 2 before its forward"};
    assert_refused(hand_make(&h, PN_SCHEDULE_INTERLEAVED, 2, 2, early), want_early, 1);
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
    tcase_add_loop_test(tc, interleaved_layouts_are_valid_ordered_and_have_the_interleaved_bubble,
                        0, (IL_P - 1) * (IL_V - 1) * IL_K);
    tcase_add_test(tc, exact_interleaved_lists);
    tcase_add_test(tc, interleaved_layouts_that_cannot_work_are_refused_by_name);
    tcase_add_test(tc, broken_interleaved_list_deadlocks_by_chunk);
    suite_add_tcase(s, tc);
    return tu_run_suite(s);
}
