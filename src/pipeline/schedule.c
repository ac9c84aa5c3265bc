/* Pipeline schedules: builds the gpipe and 1f1b action lists of every stage as a pure
 * function of (kind, P, M), checks any set of lists by simulating all stages together
 * (dependencies, one forward and one backward per stage and micro-batch, deadlock),
 * and measures a schedule's peak activations in flight and its bubble in a model
 * where a forward costs 1, a backward 2 and transfers are free. */
#include "pipeline/schedule.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum { COST_FORWARD = 1, COST_BACKWARD = 2 };

int pn_schedule_kind_from_name(const char *name)
{
    if (!name) return -1;
    if (strcmp(name, "gpipe") == 0) return PN_SCHEDULE_GPIPE;
    if (strcmp(name, "1f1b") == 0) return PN_SCHEDULE_1F1B;
    return -1;
}

const char *pn_schedule_kind_name(pn_schedule_kind kind)
{
    switch (kind) {
    case PN_SCHEDULE_GPIPE: return "gpipe";
    case PN_SCHEDULE_1F1B: return "1f1b";
    }
    return "unknown";
}

void pn_schedule_free(pn_schedule *s)
{
    if (!s) return;
    if (s->actions)
        for (int i = 0; i < s->stages; i++) free(s->actions[i]);
    free(s->actions);
    free(s->count);
    free(s);
}

static pn_action act(pn_pass_kind pass, int micro)
{
    pn_action a = {pass, micro};
    return a;
}

/* gpipe: F0 .. F(M-1), then B0 .. B(M-1). Backwards run in micro-batch order, as
 * under 1f1b, so both schedules add the micro-batches' gradients in one order and
 * follow the same trajectory (adam turns a different rounding of a near-zero
 * gradient into a full-size step of the other sign). */
static void build_gpipe(pn_action *a, int micro)
{
    int n = 0;
    for (int m = 0; m < micro; m++) a[n++] = act(PN_PASS_FORWARD, m);
    for (int m = 0; m < micro; m++) a[n++] = act(PN_PASS_BACKWARD, m);
}

/* 1f1b at stage s: w = min(P - s, M) warm-up forwards, then B(i) F(i + w) pairs, then
 * the last w backwards. The last stage (w = 1) runs F0 B0 F1 B1 ... */
static void build_1f1b(pn_action *a, int stages, int stage, int micro)
{
    int w = stages - stage < micro ? stages - stage : micro;
    int n = 0;
    for (int m = 0; m < w; m++) a[n++] = act(PN_PASS_FORWARD, m);
    for (int i = 0; i + w < micro; i++) {
        a[n++] = act(PN_PASS_BACKWARD, i);
        a[n++] = act(PN_PASS_FORWARD, i + w);
    }
    for (int m = micro - w; m < micro; m++) a[n++] = act(PN_PASS_BACKWARD, m);
}

int pn_schedule_build(pn_schedule **out, pn_schedule_kind kind, int stages, int micro)
{
    *out = NULL;
    if (kind != PN_SCHEDULE_GPIPE && kind != PN_SCHEDULE_1F1B)
        return pn_error_set(PN_ERR_INVALID, "schedule: unknown kind %d", (int)kind);
    if (stages < 1 || micro < 1 || micro > INT_MAX / 2)
        return pn_error_set(PN_ERR_INVALID,
                            "schedule %s: needs at least one stage and one micro-batch "
                            "(got P=%d M=%d)",
                            pn_schedule_kind_name(kind), stages, micro);
    pn_schedule *s = calloc(1, sizeof *s);
    if (!s) return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    s->kind = kind;
    s->stages = stages;
    s->micro = micro;
    s->count = calloc((size_t)stages, sizeof *s->count);
    s->actions = calloc((size_t)stages, sizeof *s->actions);
    if (!s->count || !s->actions) {
        pn_schedule_free(s);
        return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    }
    for (int st = 0; st < stages; st++) {
        s->actions[st] = malloc(2 * (size_t)micro * sizeof **s->actions);
        if (!s->actions[st]) {
            pn_schedule_free(s);
            return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
        }
        s->count[st] = 2 * micro;
        if (kind == PN_SCHEDULE_GPIPE)
            build_gpipe(s->actions[st], micro);
        else
            build_1f1b(s->actions[st], stages, st, micro);
    }
    *out = s;
    return PN_OK;
}

static const char *pass_name(pn_pass_kind pass)
{
    return pass == PN_PASS_FORWARD ? "forward" : "backward";
}

/* Records "schedule <kind> P=.. M=..: <what>" and returns PN_ERR_INVALID. */
#define SCHEDULE_FAIL(s, fmt, ...)                                                        \
    pn_error_set(PN_ERR_INVALID, "schedule %s P=%d M=%d: " fmt,                           \
                 pn_schedule_kind_name((s)->kind), (s)->stages, (s)->micro, __VA_ARGS__)

/* Everything but the deadlock: shapes, passes and micro-batches in range, and exactly
 * one forward then one backward of each micro-batch on each stage. */
static int validate(const pn_schedule *s)
{
    if (!s || s->stages < 1 || s->micro < 1 || !s->count || !s->actions)
        return pn_error_set(PN_ERR_INVALID, "schedule: empty (no stages, micro-batches or lists)");
    int P = s->stages, M = s->micro;
    unsigned char *seen = calloc((size_t)M, 1); /* bit 0: forward seen, bit 1: backward */
    if (!seen) return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    int rc = PN_OK;
    for (int st = 0; st < P && rc == PN_OK; st++) {
        memset(seen, 0, (size_t)M);
        if (s->count[st] < 0 || (s->count[st] > 0 && !s->actions[st])) {
            rc = SCHEDULE_FAIL(s, "stage %d has a broken action list (count %d)", st, s->count[st]);
            break;
        }
        for (int i = 0; i < s->count[st] && rc == PN_OK; i++) {
            pn_action a = s->actions[st][i];
            if (a.pass != PN_PASS_FORWARD && a.pass != PN_PASS_BACKWARD)
                rc = SCHEDULE_FAIL(s, "stage %d action %d: unknown pass %d", st, i, (int)a.pass);
            else if (a.micro < 0 || a.micro >= M)
                rc = SCHEDULE_FAIL(s, "stage %d action %d: micro-batch %d out of range 0..%d", st,
                                   i, a.micro, M - 1);
            else if (a.pass == PN_PASS_FORWARD && (seen[a.micro] & 1))
                rc = SCHEDULE_FAIL(s, "stage %d has two forwards of micro-batch %d", st, a.micro);
            else if (a.pass == PN_PASS_BACKWARD && (seen[a.micro] & 2))
                rc = SCHEDULE_FAIL(s, "stage %d has two backwards of micro-batch %d", st, a.micro);
            else if (a.pass == PN_PASS_BACKWARD && !(seen[a.micro] & 1))
                rc = SCHEDULE_FAIL(s, "stage %d runs backward %d before its forward", st, a.micro);
            else
                seen[a.micro] |= a.pass == PN_PASS_FORWARD ? 1 : 2;
        }
        for (int m = 0; m < M && rc == PN_OK; m++) {
            if (!(seen[m] & 1))
                rc = SCHEDULE_FAIL(s, "stage %d has no forward of micro-batch %d", st, m);
            else if (!(seen[m] & 2))
                rc = SCHEDULE_FAIL(s, "stage %d has no backward of micro-batch %d", st, m);
        }
    }
    free(seen);
    return rc;
}

/* Runs all stages' (validated) lists together. Each action starts when its stage is
 * free and its dependencies are done: forward (s, m) after forward (s-1, m); backward
 * (s, m) after forward (s, m) and backward (s+1, m). Sends never block; a forward costs
 * 1 and a backward 2. Returns 0 and the makespan (when asked for) once every stage
 * finished, or PN_ERR_INVALID naming the stuck stages. Dependencies only ever become
 * satisfied, so neither the times nor the stuck state depend on the order in which
 * stages are tried. */
static int simulate(const pn_schedule *s, double *makespan)
{
    int P = s->stages, M = s->micro;
    size_t n = (size_t)P * (size_t)M;
    double *fwd = malloc(n * sizeof *fwd), *bwd = malloc(n * sizeof *bwd); /* finish, or -1 */
    double *free_at = calloc((size_t)P, sizeof *free_at);
    int *pos = calloc((size_t)P, sizeof *pos);
    if (!fwd || !bwd || !free_at || !pos) {
        free(fwd), free(bwd), free(free_at), free(pos);
        return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    }
    for (size_t i = 0; i < n; i++) fwd[i] = bwd[i] = -1.0;
    int moved = 1, left = P;
    while (moved && left > 0) {
        moved = 0;
        left = 0;
        for (int st = 0; st < P; st++) {
            while (pos[st] < s->count[st]) {
                pn_action a = s->actions[st][pos[st]];
                size_t at = (size_t)st * M + a.micro;
                double start = free_at[st], dep;
                if (a.pass == PN_PASS_FORWARD) {
                    dep = st > 0 ? fwd[at - M] : 0.0;
                    if (dep < 0) break;
                } else {
                    dep = fwd[at];
                    if (dep < 0 || (st + 1 < P && bwd[at + M] < 0)) break;
                    if (st + 1 < P && bwd[at + M] > dep) dep = bwd[at + M];
                }
                if (dep > start) start = dep;
                free_at[st] = start + (a.pass == PN_PASS_FORWARD ? COST_FORWARD : COST_BACKWARD);
                (a.pass == PN_PASS_FORWARD ? fwd : bwd)[at] = free_at[st];
                pos[st]++;
                moved = 1;
            }
            if (pos[st] < s->count[st]) left++;
        }
    }
    int rc = PN_OK;
    if (left > 0) {
        char stuck[768];
        size_t len = 0;
        stuck[0] = '\0';
        for (int st = 0; st < P && len < sizeof stuck; st++) {
            if (pos[st] >= s->count[st]) continue;
            pn_action a = s->actions[st][pos[st]];
            int w = snprintf(stuck + len, sizeof stuck - len, "%sstage %d waits at %s %d",
                             len ? ", " : "", st, pass_name(a.pass), a.micro);
            if (w < 0) break;
            len += (size_t)w;
        }
        rc = SCHEDULE_FAIL(s, "deadlock: %s", stuck);
    } else if (makespan) {
        *makespan = 0.0;
        for (int st = 0; st < P; st++)
            if (free_at[st] > *makespan) *makespan = free_at[st];
    }
    free(fwd), free(bwd), free(free_at), free(pos);
    return rc;
}

int pn_schedule_check(const pn_schedule *s)
{
    PN_TRY(validate(s));
    return simulate(s, NULL);
}

int pn_schedule_peak_in_flight(const pn_schedule *s, int stage)
{
    PN_TRY(validate(s));
    if (stage < 0 || stage >= s->stages)
        return SCHEDULE_FAIL(s, "stage %d out of range 0..%d", stage, s->stages - 1);
    int held = 0, peak = 0;
    for (int i = 0; i < s->count[stage]; i++) {
        held += s->actions[stage][i].pass == PN_PASS_FORWARD ? 1 : -1;
        if (held > peak) peak = held;
    }
    return peak;
}

/* Both kinds give (P - 1) / (M + P - 1), with f = 1, b = 2 (so f + b = 3):
 * gpipe: forward m ends at stage s at s + m + 1, so the last stage's forwards end at
 *   M + P - 1; its backwards then run back to back, and each stage's backward of m
 *   starts 2 after the next stage's, exactly when the stage frees up, so stage 0
 *   ends at M + P - 1 + 2 (P - 1) + 2 M = 3 (M + P - 1).
 * 1f1b: the last stage runs F(i) on [P - 1 + 3i, P + 3i] and B(i) right after. Down
 *   the stages, stage s's B(i) starts as stage s + 1's ends, at 3P - 2s - 2 + 3i,
 *   just as stage s frees up from F(i - 1 + w); its F(i + w) then needs stage s - 1's,
 *   which follows that stage's B(i - 1) and ends at the same moment 3P - 2s + 3i: no
 *   stage ever waits longer. With M < P, stages s <= P - M run all forwards early and
 *   each backward starts as stage s + 1's ends. Stage 0's B(M - 1) ends at 3(M + P - 1).
 * Busy time is 3 M per stage, so the bubble is 1 - 3 M / (3 (M + P - 1)). */
double pn_schedule_bubble(const pn_schedule *s)
{
    double makespan = 0.0;
    if (validate(s) < 0 || simulate(s, &makespan) < 0) return -1.0;
    double busy = (double)s->micro * (COST_FORWARD + COST_BACKWARD);
    return 1.0 - busy / makespan;
}
