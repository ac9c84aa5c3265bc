/* The waits of the communication seam, watched: every wait polls its requests on
 * the calling (main) thread, so a wait that outlasts the stall bound can end the job
 * with MPI_Abort from the only thread MPI_Init (MPI_THREAD_SINGLE) lets call MPI; a
 * watchdog thread could not, while the main thread sits in MPI_Wait. Long waits
 * sleep between polls, so ranks left waiting on a stalled peer stop burning CPU.
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

/* A wait spins this long before it sleeps: the waits of a healthy step (a
 * neighbour's micro-batch, a sum) end sooner, and pay no sleep's latency. */
static const double SPIN_S = 0.01;
/* Then it sleeps a sixteenth of the time waited so far, up to this long: at most
 * ~6% more latency on a long wait, about no CPU on a stalled one. */
static const double NAP_MAX_S = 0.001;
/* After a stall, how long the other ranks have to answer the census: a waiting rank
 * answers within a nap; one that does not in this time is stopped or hung. */
static const double CENSUS_S = 2.0;
/* How long a rank that is not the reporter waits for the reporter's abort before it
 * reports itself (the reporter could not). */
static const double DEFER_S = 10.0;

void pn_comm_watch(pn_comm *c, double seconds, const char *fmt, ...)
{
    c->stall_s = seconds > 0 ? seconds : 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->doing, sizeof c->doing, fmt, ap);
    va_end(ap);
}

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

static int rank_text(const pn_grid *g, int rank, char *out, size_t cap)
{
    return snprintf(out, cap, "rank %d (stage %d, replica %d)", rank, rank % g->stages,
                    rank / g->stages);
}

static void describe(const pn_comm *c, const pn_wait_for *w, char *out, size_t cap)
{
    const pn_grid *g = &c->grid;
    if (w->link) {
        const pn_link_spec *sp = &w->link->spec;
        char peer[64], micro[32] = "";
        rank_text(g, pn_grid_rank_of(g, g->replica, sp->peer), peer, sizeof peer);
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
 * and waits for its abort. The requests stay as they are: the job is about to end. */
static int stalled(pn_comm *c, int n, MPI_Request *reqs, const pn_wait_for *w, double waited)
{
    const pn_grid *g = &c->grid;
    bool *heard = calloc((size_t)g->size, sizeof *heard);
    for (int r = 0; heard && r < g->size; r++) {
        MPI_Request q;
        if (r != g->rank && MPI_Isend(NULL, 0, MPI_BYTE, r, TAG_PING, c->watch, &q) == MPI_SUCCESS)
            MPI_Request_free(&q);
    }
    int flag;
    for (double end = pn_now() + CENSUS_S; heard && pn_now() < end;) {
        MPI_Testall(n, reqs, &flag, MPI_STATUSES_IGNORE); /* keep this rank's part moving */
        census(c, heard);
        heard[g->rank] = true;
        int count = 0;
        for (int r = 0; r < g->size; r++) count += heard[r];
        if (count == g->size) break;
        nap(NAP_MAX_S);
    }
    for (double end = pn_now() + DEFER_S; c->lower_stalled && pn_now() < end;) {
        census(c, NULL);
        nap(NAP_MAX_S);
    }
    char what[256], silent[512] = "";
    describe(c, w, what, sizeof what);
    size_t at = 0;
    for (int r = 0, named = 0; heard && r < g->size && at < sizeof silent; r++) {
        if (heard[r]) continue;
        if (named++ == 8) {
            snprintf(silent + at, sizeof silent - at, ", ...");
            break;
        }
        at += (size_t)snprintf(silent + at, sizeof silent - at, named > 1 ? ", " : "");
        if (at < sizeof silent) at += (size_t)rank_text(g, r, silent + at, sizeof silent - at);
    }
    const char *outcome = !heard      ? "no census (out of memory)"
                          : silent[0] ? "stopped answering: "
                                      : "every rank still answers (ranks that wait on each "
                                        "other, or work outside MPI that takes longer)";
    free(heard);
    return pn_error_set(PN_ERR_STALL,
                        "%s: no progress for %.0f s (--stall-timeout) waiting for %s; %s%s",
                        c->doing, waited, what, outcome, silent);
}

int pn_comm_wait(pn_comm *c, int n, MPI_Request *reqs, MPI_Status *statuses,
                 const pn_wait_for *what)
{
    int done = 0;
    PN_MPI_CHECK(MPI_Testall(n, reqs, &done, statuses));
    for (double start = pn_now(); !done;) {
        double waited = pn_now() - start;
        if (c->stall_s > 0 && waited > c->stall_s) return stalled(c, n, reqs, what, waited);
        if (waited > SPIN_S) { /* a long wait: others may be asking who still answers */
            census(c, NULL);
            nap(waited / 16 < NAP_MAX_S ? waited / 16 : NAP_MAX_S);
        }
        PN_MPI_CHECK(MPI_Testall(n, reqs, &done, statuses));
    }
    return PN_OK;
}
