/* The waits of the communication seam, watched: every wait polls its requests on
 * the calling (main) thread, so a wait that outlasts the stall bound can end the job
 * with MPI_Abort from the only thread MPI_Init (MPI_THREAD_SINGLE) lets call MPI; a
 * watchdog thread could not, while the main thread sits in MPI_Wait. Long waits
 * nap between polls, so ranks left waiting on a stalled peer stop burning CPU.
 * When a wait stalls, this rank asks every rank whether it answers (a census on its
 * own communicator): the message names the ranks that do not, and the lowest rank
 * that timed out reports, once. */
#include "mpi/comm_impl.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/error.h"
#include "mpi/mpi_check.h"

enum { TAG_PING = 1, TAG_ANSWER = 2 };

/* A watched wait polls without pause this long before it naps: Open MPI moves a
 * non-blocking collective or a large transfer only inside an MPI call, so the waits
 * of a healthy step (a neighbour's micro-batch, a bucket sum, even a slow one) must
 * not sleep between the rounds of their progress. */
static const double SPIN_S = 0.5;
/* Then it naps this long between polls: little latency on a wait that long, about no
 * CPU on ranks left waiting on a stalled peer. */
static const double NAP_S = 1e-4;
/* A gap this long between two polls of one wait means this process was not running
 * (the whole job suspended by the scheduler, or SIGSTOP and SIGCONT): that time is not
 * a peer's stall, and the wait's clock skips it. */
static const double SUSPENDED_S = 1.0;
/* After a stall, how long the other ranks have to answer the census (at least): a
 * waiting rank answers within SPIN_S and a nap, a computing one when its work is done
 * and it waits again, well within a quarter of the bound (20 step times by default). */
static const double CENSUS_MIN_S = 2.0;
/* How long a rank that is not the reporter waits for the reporter's abort before it
 * reports itself (the reporter could not). An abort that works ends the job within
 * 1-3 s; one that cannot (the reporter cut off from mpirun with this rank, on a host
 * whose link is down) leaves this rank to end itself, and 10 s here measured 17 s from
 * a cut to the last rank's end with --stall-timeout 5: 5 s keeps it within the
 * bound + 10 s (tests/test_host_faults.sh). */
static const double DEFER_S = 5.0;

static void watch(pn_comm *c, double seconds, const char *bound, const char *fmt, va_list ap)
{
    c->stall_s = seconds > 0 ? seconds : 0;
    snprintf(c->bound, sizeof c->bound, "%s", bound);
    vsnprintf(c->doing, sizeof c->doing, fmt, ap);
}

void pn_comm_watch(pn_comm *c, double seconds, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    watch(c, seconds, "--stall-timeout", fmt, ap);
    va_end(ap);
}

void pn_comm_watch_as(pn_comm *c, double seconds, const char *bound, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    watch(c, seconds, bound, fmt, ap);
    va_end(ap);
}

double pn_comm_spin_seconds(void) { return SPIN_S; }

static void nap(double seconds)
{
    struct timespec ts = {0, (long)(seconds * 1e9)};
    nanosleep(&ts, NULL); /* a signal cuts it short: the poll comes sooner, no harm */
}

/* Answers the census pings that have arrived and collects answers to this rank's;
 * marks who was heard of (when heard is not NULL). Best effort: a failed call
 * leaves a rank unheard, which the message then names. */
static void census(pn_comm *c, bool *heard)
{
    for (int tag = TAG_PING; tag <= TAG_ANSWER; tag++)
        for (;;) {
            int flag = 0;
            MPI_Status st;
            if (MPI_Iprobe(MPI_ANY_SOURCE, tag, c->watch, &flag, &st) != MPI_SUCCESS || !flag)
                break;
            int from = st.MPI_SOURCE;
            if (MPI_Recv(NULL, 0, MPI_BYTE, from, tag, c->watch, MPI_STATUS_IGNORE) !=
                MPI_SUCCESS)
                break;
            if (heard) heard[from] = true;
            if (tag == TAG_PING) { /* only a rank whose wait stalled pings */
                if (from < c->grid.rank) c->lower_stalled = true;
                MPI_Request r;
                if (MPI_Isend(NULL, 0, MPI_BYTE, from, TAG_ANSWER, c->watch, &r) == MPI_SUCCESS)
                    MPI_Request_free(&r);
            }
        }
}

/* A rank as the messages name it, with its host: across hosts, the host is what an
 * operator looks at first (a node lost, a link down). */
static int rank_text(const pn_comm *c, int rank, char *out, size_t cap)
{
    const pn_grid *g = &c->grid;
    return snprintf(out, cap, "rank %d (stage %d, replica %d) on host %s", rank,
                    rank % g->stages, rank / g->stages,
                    c->hosts ? c->hosts + (size_t)rank * PN_HOST_CAP : "?");
}

static void describe(const pn_comm *c, const pn_wait_for *w, char *out, size_t cap)
{
    const pn_grid *g = &c->grid;
    if (w->link) {
        const pn_link_spec *sp = &w->link->spec;
        char peer[128], micro[32] = "";
        rank_text(c, pn_grid_rank_of(g, g->replica, sp->peer), peer, sizeof peer);
        if (w->micro >= 0) snprintf(micro, sizeof micro, " for micro-batch %d", w->micro);
        snprintf(out, cap, "%s the %s of '%s'%s %s %s", w->op,
                 sp->kind == PN_LINK_GRAD ? "gradient" : "activations", sp->name, micro,
                 sp->sends ? "to" : "from", peer);
    } else if (w->scope == PN_SCOPE_PIPE) {
        snprintf(out, cap, "%s the %d stages of replica %d", w->op, g->stages, g->replica);
    } else if (w->scope == PN_SCOPE_REPLICAS) {
        snprintf(out, cap, "%s the %d replicas of stage %d", w->op, g->replicas, g->stage);
    } else {
        snprintf(out, cap, "%s all %d ranks", w->op, g->size);
    }
}

/* The wait has lasted past the bound: the census, then the error (PN_ERR_STALL) on the
 * reporter. A rank that hears of a lower rank that stalled too leaves the report to it
 * and waits for its abort. When the wait completes during the census after all, the
 * peer was late, not stalled: PN_OK, and the step goes on. Otherwise the requests stay
 * as they are: the job is about to end. */
static int stalled(pn_comm *c, const pn_poll *p, const pn_wait_for *w)
{
    const pn_grid *g = &c->grid;
    bool *heard = calloc((size_t)g->size, sizeof *heard);
    for (int r = 0; heard && r < g->size; r++) {
        MPI_Request q;
        if (r != g->rank && MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_PING, c->watch, &q) == MPI_SUCCESS)
            MPI_Request_free(&q);
    }
    double window = c->stall_s / 4 > CENSUS_MIN_S ? c->stall_s / 4 : CENSUS_MIN_S;
    for (double end = pn_now() + window; heard && pn_now() < end;) {
        bool done = false;
        int polled = p->test(p->ctx, &done); /* keep this rank's part moving */
        if (polled < 0 || done) {
            free(heard);
            return polled;
        }
        census(c, heard);
        heard[g->rank] = true;
        int count = 0;
        for (int r = 0; r < g->size; r++) count += heard[r];
        if (count == g->size) break;
        nap(NAP_S);
    }
    for (double end = pn_now() + DEFER_S; c->lower_stalled && pn_now() < end;) {
        census(c, NULL);
        nap(NAP_S);
    }
    char what[320], silent[1024] = "";
    describe(c, w, what, sizeof what);
    size_t at = 0;
    for (int r = 0, named = 0; heard && r < g->size && at < sizeof silent; r++) {
        if (heard[r]) continue;
        if (named++ == 8) {
            snprintf(silent + at, sizeof silent - at, ", ...");
            break;
        }
        at += (size_t)snprintf(silent + at, sizeof silent - at, named > 1 ? ", " : "");
        if (at < sizeof silent) at += (size_t)rank_text(c, r, silent + at, sizeof silent - at);
    }
    char outcome[96];
    if (!heard)
        snprintf(outcome, sizeof outcome, "no census (out of memory)");
    else if (silent[0])
        snprintf(outcome, sizeof outcome, "no answer within %.0f s (stopped, or busy outside "
                 "MPI) from ", window);
    else
        snprintf(outcome, sizeof outcome, "every rank still answers (ranks that wait on each "
                 "other, or work outside MPI that takes longer)");
    free(heard);
    return pn_error_set(PN_ERR_STALL,
                        "%s: no progress for %g s (%s) waiting for %s; %s%s", c->doing,
                        c->stall_s, c->bound, what, outcome, silent);
}

int pn_comm_poll(pn_comm *c, const pn_poll *p, const pn_wait_for *what)
{
    bool done = false;
    PN_TRY(p->test(p->ctx, &done));
    for (double start = pn_now(), last = start; !done;) {
        double now = pn_now();
        if (now - last > SUSPENDED_S) start += now - last;
        last = now;
        if (c->stall_s > 0 && now - start > c->stall_s) {
            int rc = stalled(c, p, what);
            if (rc < 0 && p->give_up) p->give_up(p->ctx);
            PN_TRY(rc);
            break; /* completed late, during the census */
        }
        if (now - start > SPIN_S) { /* a long wait: others may be asking who still answers */
            census(c, NULL);
            nap(NAP_S);
        }
        PN_TRY(p->test(p->ctx, &done));
    }
    c->lower_stalled = false; /* progress: a lower rank's earlier stall is over */
    return PN_OK;
}

/* MPI requests as a poll. */
typedef struct requests {
    int n;
    MPI_Request *reqs;
    MPI_Status *statuses;
} requests;

static int test_requests(void *ctx, bool *done)
{
    requests *r = ctx;
    int flag = 0;
    PN_MPI_CHECK(MPI_Testall(r->n, r->reqs, &flag, r->statuses));
    *done = flag != 0;
    return PN_OK;
}

int pn_comm_wait(pn_comm *c, int n, MPI_Request *reqs, MPI_Status *statuses,
                 const pn_wait_for *what)
{
    if (c->stall_s == 0) { /* set-up, resume, --stall-timeout 0: MPI's own wait, at full speed */
        PN_MPI_CHECK(MPI_Waitall(n, reqs, statuses));
        return PN_OK;
    }
    requests r = {n, reqs, statuses};
    return pn_comm_poll(c, &(pn_poll){test_requests, NULL, &r}, what);
}
