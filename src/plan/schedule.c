/* Pipeline schedules: builds the gpipe, 1f1b and interleaved action lists of every
 * stage as a pure function of (kind, P, V, M), checks any set of lists by simulating
 * all stages together over the model's chunks (dependencies, one forward and one
 * backward per chunk and micro-batch, deadlock), and measures a schedule's peak
 * activations in flight and its bubble in a model where a forward costs 1, a
 * backward 2 and transfers are free. */
#include "plan/schedule.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

enum { COST_FORWARD = 1, COST_BACKWARD = 2 };

static const pn_choice kind_items[] = {
    [PN_SCHEDULE_GPIPE] = {"gpipe", "every forward of a step, then every backward"},
    [PN_SCHEDULE_1F1B] = {"1f1b", "after a warm-up, one forward then one backward"},
    [PN_SCHEDULE_INTERLEAVED] = {"interleaved", "1f1b over V chunks per stage (--virtual-stages)"},
};
_Static_assert(sizeof kind_items / sizeof *kind_items == PN_SCHEDULE_INTERLEAVED + 1,
               "one line per pn_schedule_kind");
const pn_choices pn_schedule_kinds = {"a schedule", PN_SCHEDULE_INTERLEAVED + 1, kind_items};

int pn_schedule_kind_from_name(const char *name)
{
    return name ? pn_choice_find(&pn_schedule_kinds, name) : -1;
}

const char *pn_schedule_kind_name(pn_schedule_kind kind)
{
    return pn_choice_name(&pn_schedule_kinds, (int)kind);
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

/* Virtual stages of s: hand-made lists may leave the field 0. */
static int virtual_of(const pn_schedule *s) { return s->virtual_stages > 0 ? s->virtual_stages : 1; }

static pn_action act(pn_pass_kind pass, int micro)
{
    pn_action a = {pass, micro, 0};
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

/* Interleaved at stage s: the k-th (chunk, micro-batch) pair of a pass walks groups
 * of P micro-batches through the chunks (forwards in chunk order, backwards in
 * reverse), w warm-up forwards, then F(k + w) B(k) pairs, then the last w
 * backwards. Within a chunk both passes go in micro-batch order, so the micro-batches
 * a chunk holds are consecutive and m % (its peak) names a free network. */
static pn_action interleaved_pair(pn_pass_kind pass, int k, int stages, int virtual_stages)
{
    int group = stages * virtual_stages, in_group = k % group;
    int chunk = in_group / stages;
    if (pass == PN_PASS_BACKWARD) chunk = virtual_stages - 1 - chunk;
    pn_action a = {pass, k / group * stages + k % stages, chunk};
    return a;
}

static void build_interleaved(pn_action *a, int stages, int stage, int virtual_stages, int micro)
{
    int total = micro * virtual_stages, n = 0;
    int w = 2 * (stages - stage - 1) + (virtual_stages - 1) * stages;
    if (w > total) w = total;
    for (int k = 0; k < w; k++) a[n++] = interleaved_pair(PN_PASS_FORWARD, k, stages, virtual_stages);
    for (int k = 0; k + w < total; k++) {
        a[n++] = interleaved_pair(PN_PASS_FORWARD, k + w, stages, virtual_stages);
        a[n++] = interleaved_pair(PN_PASS_BACKWARD, k, stages, virtual_stages);
    }
    for (int k = total - w; k < total; k++)
        a[n++] = interleaved_pair(PN_PASS_BACKWARD, k, stages, virtual_stages);
}

int pn_schedule_check_layout(pn_schedule_kind kind, int stages, int virtual_stages, int micro)
{
    const char *name = pn_schedule_kind_name(kind);
    if (kind != PN_SCHEDULE_GPIPE && kind != PN_SCHEDULE_1F1B && kind != PN_SCHEDULE_INTERLEAVED)
        return pn_error_set(PN_ERR_INVALID, "schedule: unknown kind %d", (int)kind);
    if (stages < 1 || micro < 1 || virtual_stages < 1 ||
        (long)micro * virtual_stages > INT_MAX / 2 || (long)stages * virtual_stages > INT_MAX)
        return virtual_stages == 1
                   ? pn_error_set(PN_ERR_INVALID,
                                  "schedule %s: needs at least one stage and one micro-batch "
                                  "(got P=%d M=%d)",
                                  name, stages, micro)
                   : pn_error_set(PN_ERR_INVALID,
                                  "schedule %s: needs at least one stage, virtual stage and "
                                  "micro-batch (got P=%d V=%d M=%d)",
                                  name, stages, virtual_stages, micro);
    if (kind != PN_SCHEDULE_INTERLEAVED && virtual_stages != 1)
        return pn_error_set(PN_ERR_INVALID,
                            "schedule %s P=%d M=%d: %d virtual stages need the interleaved "
                            "schedule (--schedule interleaved)",
                            name, stages, micro, virtual_stages);
    if (kind != PN_SCHEDULE_INTERLEAVED) return PN_OK;
    if (stages < 2)
        return pn_error_set(PN_ERR_INVALID,
                            "schedule interleaved P=%d V=%d M=%d: needs at least 2 stages "
                            "(with one, use 1f1b)",
                            stages, virtual_stages, micro);
    if (virtual_stages < 2)
        return pn_error_set(PN_ERR_INVALID,
                            "schedule interleaved P=%d V=%d M=%d: needs at least 2 virtual "
                            "stages per stage (--virtual-stages V, V >= 2)",
                            stages, virtual_stages, micro);
    if (micro % stages)
        return pn_error_set(PN_ERR_INVALID,
                            "schedule interleaved P=%d V=%d M=%d: the micro-batches must be a "
                            "multiple of the stages (it sends them round in groups of P=%d)",
                            stages, virtual_stages, micro, stages);
    return PN_OK;
}

int pn_schedule_build(pn_schedule **out, pn_schedule_kind kind, int stages, int micro)
{
    return pn_schedule_build_virtual(out, kind, stages, 1, micro);
}

int pn_schedule_build_virtual(pn_schedule **out, pn_schedule_kind kind, int stages,
                              int virtual_stages, int micro)
{
    *out = NULL;
    PN_TRY(pn_schedule_check_layout(kind, stages, virtual_stages, micro));
    pn_schedule *s = calloc(1, sizeof *s);
    if (!s) return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    s->kind = kind;
    s->stages = stages;
    s->micro = micro;
    s->virtual_stages = virtual_stages;
    s->count = calloc((size_t)stages, sizeof *s->count);
    s->actions = calloc((size_t)stages, sizeof *s->actions);
    if (!s->count || !s->actions) {
        pn_schedule_free(s);
        return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    }
    int n = 2 * micro * virtual_stages;
    for (int st = 0; st < stages; st++) {
        s->actions[st] = malloc((size_t)n * sizeof **s->actions);
        if (!s->actions[st]) {
            pn_schedule_free(s);
            return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
        }
        s->count[st] = n;
        if (kind == PN_SCHEDULE_GPIPE)
            build_gpipe(s->actions[st], micro);
        else if (kind == PN_SCHEDULE_1F1B)
            build_1f1b(s->actions[st], stages, st, micro);
        else
            build_interleaved(s->actions[st], stages, st, virtual_stages, micro);
    }
    *out = s;
    return PN_OK;
}

static const char *pass_name(pn_pass_kind pass)
{
    return pass == PN_PASS_FORWARD ? "forward" : "backward";
}

/* Records "schedule <kind> P=.. [V=..] M=..: <what>" and returns PN_ERR_INVALID. */
static int schedule_fail(const pn_schedule *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int schedule_fail(const pn_schedule *s, const char *fmt, ...)
{
    char what[1024], v[32] = "";
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (virtual_of(s) > 1) snprintf(v, sizeof v, " V=%d", virtual_of(s));
    return pn_error_set(PN_ERR_INVALID, "schedule %s P=%d%s M=%d: %s",
                        pn_schedule_kind_name(s->kind), s->stages, v, s->micro, what);
}

/* " of chunk c" for a stage's virtual stage v when there are several, else "". */
static const char *chunk_words(const pn_schedule *s, int stage, int v, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (virtual_of(s) > 1) snprintf(buf, cap, " of chunk %d", v * s->stages + stage);
    return buf;
}

/* Everything but the deadlock: shapes, passes, chunks and micro-batches in range, and
 * exactly one forward then one backward of each (chunk, micro-batch) on each stage. */
static int validate(const pn_schedule *s)
{
    if (!s || s->stages < 1 || s->micro < 1 || !s->count || !s->actions)
        return pn_error_set(PN_ERR_INVALID, "schedule: empty (no stages, micro-batches or lists)");
    int P = s->stages, M = s->micro, V = virtual_of(s);
    size_t n = (size_t)M * (size_t)V;
    unsigned char *seen = calloc(n, 1); /* [v * M + m] bit 0: forward seen, bit 1: backward */
    if (!seen) return pn_error_set(PN_ERR_NOMEM, "schedule: out of memory");
    int rc = PN_OK;
    char of[48];
    for (int st = 0; st < P && rc == PN_OK; st++) {
        memset(seen, 0, n);
        if (s->count[st] < 0 || (s->count[st] > 0 && !s->actions[st])) {
            rc = schedule_fail(s, "stage %d has a broken action list (count %d)", st, s->count[st]);
            break;
        }
        for (int i = 0; i < s->count[st] && rc == PN_OK; i++) {
            pn_action a = s->actions[st][i];
            if (a.pass != PN_PASS_FORWARD && a.pass != PN_PASS_BACKWARD) {
                rc = schedule_fail(s, "stage %d action %d: unknown pass %d", st, i, (int)a.pass);
                break;
            }
            if (a.micro < 0 || a.micro >= M) {
                rc = schedule_fail(s, "stage %d action %d: micro-batch %d out of range 0..%d", st,
                                   i, a.micro, M - 1);
                break;
            }
            if (a.chunk < 0 || a.chunk >= V) {
                rc = schedule_fail(s, "stage %d action %d: virtual stage %d out of range 0..%d",
                                   st, i, a.chunk, V - 1);
                break;
            }
            unsigned char *at = &seen[(size_t)a.chunk * M + a.micro];
            chunk_words(s, st, a.chunk, of, sizeof of);
            if (a.pass == PN_PASS_FORWARD && (*at & 1))
                rc = schedule_fail(s, "stage %d has two forwards of micro-batch %d%s", st,
                                   a.micro, of);
            else if (a.pass == PN_PASS_BACKWARD && (*at & 2))
                rc = schedule_fail(s, "stage %d has two backwards of micro-batch %d%s", st,
                                   a.micro, of);
            else if (a.pass == PN_PASS_BACKWARD && !(*at & 1))
                rc = schedule_fail(s, "stage %d runs backward %d%s before its forward", st,
                                   a.micro, of);
            else
                *at |= a.pass == PN_PASS_FORWARD ? 1 : 2;
        }
        for (size_t k = 0; k < n && rc == PN_OK; k++) {
            int m = (int)(k % (size_t)M), v = (int)(k / (size_t)M);
            chunk_words(s, st, v, of, sizeof of);
            if (!(seen[k] & 1))
                rc = schedule_fail(s, "stage %d has no forward of micro-batch %d%s", st, m, of);
            else if (!(seen[k] & 2))
                rc = schedule_fail(s, "stage %d has no backward of micro-batch %d%s", st, m, of);
        }
    }
    free(seen);
    return rc;
}

/* Runs all stages' (validated) lists together over the model's C = P V chunks. Each
 * action starts when its stage is free and its dependencies are done: forward (c, m)
 * after forward (c-1, m); backward (c, m) after forward (c, m) and backward (c+1, m).
 * Sends never block; a forward costs 1 and a backward 2. Returns 0 and the makespan
 * (when asked for) once every stage finished, or PN_ERR_INVALID naming the stuck
 * stages. Dependencies only ever become satisfied, so neither the times nor the stuck
 * state depend on the order in which stages are tried. */
static int simulate(const pn_schedule *s, double *makespan)
{
    int P = s->stages, M = s->micro, C = P * virtual_of(s);
    size_t n = (size_t)C * (size_t)M;
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
                int c = a.chunk * P + st;
                size_t at = (size_t)c * M + a.micro;
                double start = free_at[st], dep;
                if (a.pass == PN_PASS_FORWARD) {
                    dep = c > 0 ? fwd[at - M] : 0.0;
                    if (dep < 0) break;
                } else {
                    dep = fwd[at];
                    if (dep < 0 || (c + 1 < C && bwd[at + M] < 0)) break;
                    if (c + 1 < C && bwd[at + M] > dep) dep = bwd[at + M];
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
        char stuck[768], of[48];
        size_t len = 0;
        stuck[0] = '\0';
        for (int st = 0; st < P && len < sizeof stuck; st++) {
            if (pos[st] >= s->count[st]) continue;
            pn_action a = s->actions[st][pos[st]];
            int w = snprintf(stuck + len, sizeof stuck - len, "%sstage %d waits at %s %d%s",
                             len ? ", " : "", st, pass_name(a.pass), a.micro,
                             chunk_words(s, st, a.chunk, of, sizeof of));
            if (w < 0) break;
            len += (size_t)w;
        }
        rc = schedule_fail(s, "deadlock: %s", stuck);
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

/* Peak of (chunk, micro-batch) pairs held at stage, counting only chunk (or all: -1). */
static int peak_of(const pn_schedule *s, int stage, int chunk)
{
    PN_TRY(validate(s));
    if (stage < 0 || stage >= s->stages)
        return schedule_fail(s, "stage %d out of range 0..%d", stage, s->stages - 1);
    if (chunk >= virtual_of(s))
        return schedule_fail(s, "virtual stage %d out of range 0..%d", chunk, virtual_of(s) - 1);
    int held = 0, peak = 0;
    for (int i = 0; i < s->count[stage]; i++) {
        pn_action a = s->actions[stage][i];
        if (chunk >= 0 && a.chunk != chunk) continue;
        held += a.pass == PN_PASS_FORWARD ? 1 : -1;
        if (held > peak) peak = held;
    }
    return peak;
}

int pn_schedule_peak_in_flight(const pn_schedule *s, int stage) { return peak_of(s, stage, -1); }

int pn_schedule_peak_in_flight_chunk(const pn_schedule *s, int stage, int chunk)
{
    if (chunk < 0) return schedule_fail(s, "virtual stage %d out of range", chunk);
    return peak_of(s, stage, chunk);
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
    double busy = (double)s->micro * virtual_of(s) * (COST_FORWARD + COST_BACKWARD);
    return 1.0 - busy / makespan;
}

double pn_schedule_bubble_formula(pn_schedule_kind kind, int stages, int virtual_stages,
                                  int micro)
{
    double v = kind == PN_SCHEDULE_INTERLEAVED ? virtual_stages : 1.0;
    return (stages - 1.0) / (v * micro + stages - 1.0);
}
