/* The schedule's makespan with measured times (schedule_time.h): an event-driven run
 * of every stage's list. Between two events (a pass or update ends, a message
 * arrives) the set of ranks that can run is fixed, and so is the speed each runs at;
 * the next event is the earliest of those ends and arrivals. */
#include "plan/schedule_time.h"

#include <stdbool.h>
#include <stdlib.h>

#include "base/error.h"

/* Where a stage is: the action at pos (pos == count: its update, then done). */
typedef struct stage_state {
    int pos;
    double left;  /* seconds of work left of the current action, at full speed */
    double ready; /* when its inputs are there; < 0: not known yet (a pass not done) */
    bool done;
} stage_state;

typedef struct sim {
    const pn_schedule *s;
    const pn_chunk_times *ct;
    int P, M, C;
    double *fwd, *bwd; /* [C M] when each pass finished; -1 before */
    stage_state *st;
} sim;

static int virtual_of(const pn_schedule *s) { return s->virtual_stages > 0 ? s->virtual_stages : 1; }

static double send_of(const sim *m, int c) { return m->ct->send_s ? m->ct->send_s[c] : 0.0; }

/* When stage i's current action can start (its inputs' arrival), or -1 when a pass
 * it needs has not finished. */
static double ready_at(const sim *m, int i)
{
    const stage_state *x = &m->st[i];
    if (x->pos == m->s->count[i]) return 0.0; /* the update needs nothing */
    pn_action a = m->s->actions[i][x->pos];
    int c = a.chunk * m->P + i;
    size_t at = (size_t)c * m->M + a.micro;
    if (a.pass == PN_PASS_FORWARD) {
        if (c == 0) return 0.0;
        return m->fwd[at - m->M] < 0 ? -1.0 : m->fwd[at - m->M] + send_of(m, c - 1);
    }
    if (m->fwd[at] < 0) return -1.0;
    if (c + 1 == m->C) return m->fwd[at];
    if (m->bwd[at + m->M] < 0) return -1.0;
    double back = m->bwd[at + m->M] + send_of(m, c);
    return back > m->fwd[at] ? back : m->fwd[at];
}

/* Makes stage i's next action current (or marks it done). */
static void start_next(sim *m, int i)
{
    stage_state *x = &m->st[i];
    if (x->pos < m->s->count[i]) {
        pn_action a = m->s->actions[i][x->pos];
        int c = a.chunk * m->P + i;
        x->left = a.pass == PN_PASS_FORWARD ? m->ct->forward_s[c] : m->ct->backward_s[c];
    } else if (x->pos == m->s->count[i] && m->ct->update_s) {
        x->left = m->ct->update_s[i];
    } else {
        x->done = true;
    }
    x->ready = -1.0;
}

/* Stage i's current action is over at time now. */
static void finish(sim *m, int i, double now)
{
    stage_state *x = &m->st[i];
    if (x->pos < m->s->count[i]) {
        pn_action a = m->s->actions[i][x->pos];
        int c = a.chunk * m->P + i;
        (a.pass == PN_PASS_FORWARD ? m->fwd : m->bwd)[(size_t)c * m->M + a.micro] = now;
    }
    x->pos++;
    start_next(m, i);
}

/* Work left below this (seconds) counts as done: actions that end at the same time
 * as the first leave rounding crumbs. */
static const double CRUMB_S = 1e-15;

static int run(sim *m, double *makespan)
{
    const pn_chunk_times *ct = m->ct;
    double now = 0.0, contention = ct->contention > 1.0 ? ct->contention : 1.0;
    int copies = ct->copies > 1 ? ct->copies : 1, ranks = m->P * copies;
    for (int i = 0; i < m->P; i++) start_next(m, i);
    for (;;) {
        int running = 0, left = 0;
        double next_arrival = -1.0;
        for (int i = 0; i < m->P; i++) {
            stage_state *x = &m->st[i];
            if (x->done) continue;
            left++;
            if (x->ready < 0) x->ready = ready_at(m, i);
            if (x->ready < 0) continue;
            if (x->ready <= now) running++;
            else if (next_arrival < 0 || x->ready < next_arrival) next_arrival = x->ready;
        }
        if (left == 0) break;
        if (running == 0) {
            if (next_arrival < 0) /* pn_schedule_check passed, so this cannot happen */
                return pn_error_set(PN_ERR_INTERNAL, "schedule: no stage can move");
            now = next_arrival;
            continue;
        }
        double k = (double)running * copies, speed = 1.0;
        if (ct->slots > 0.0 && k > ct->slots) speed = ct->slots / k;
        if (ranks > 1) speed /= 1.0 + (contention - 1.0) * (k - 1.0) / (ranks - 1.0);
        /* the next event: an arrival, or the first running action to end (which ends
         * then whatever rounding leaves of it) */
        double dt = next_arrival >= 0.0 ? next_arrival - now : -1.0, from = now;
        int first = -1;
        for (int i = 0; i < m->P; i++) {
            const stage_state *x = &m->st[i];
            if (!x->done && x->ready >= 0 && x->ready <= now && (dt < 0 || x->left / speed < dt))
                dt = x->left / speed, first = i;
        }
        now += dt;
        for (int i = 0; i < m->P; i++) {
            stage_state *x = &m->st[i];
            if (x->done || x->ready < 0 || x->ready > from) continue;
            x->left -= dt * speed;
            if (i == first || x->left <= CRUMB_S) finish(m, i, now);
        }
    }
    *makespan = now;
    return PN_OK;
}

int pn_schedule_makespan(const pn_schedule *s, const pn_chunk_times *ct, double *makespan)
{
    PN_TRY(pn_schedule_check(s));
    sim m = {.s = s, .ct = ct, .P = s->stages, .M = s->micro, .C = s->stages * virtual_of(s)};
    size_t n = (size_t)m.C * (size_t)m.M;
    m.fwd = malloc(n * sizeof *m.fwd);
    m.bwd = malloc(n * sizeof *m.bwd);
    m.st = calloc((size_t)m.P, sizeof *m.st);
    int rc = m.fwd && m.bwd && m.st ? PN_OK : pn_error_set(PN_ERR_NOMEM, "out of memory");
    for (size_t i = 0; rc == PN_OK && i < n; i++) m.fwd[i] = m.bwd[i] = -1.0;
    if (rc == PN_OK) rc = run(&m, makespan);
    free(m.fwd), free(m.bwd), free(m.st);
    return rc;
}
