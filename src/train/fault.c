/* PIPENET_FAULT parsing and the injected failure (fault.h). */
#include "train/fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

#include "base/error.h"

pn_fault pn_fault_for_rank(int rank)
{
    pn_fault f = {-1, "", 0};
    const char *v = getenv("PIPENET_FAULT");
    int at_rank;
    char when[16] = "", what[16] = "error";
    if (!v || sscanf(v, "%d:%15[^:]:%15s", &at_rank, when, what) < 2 || at_rank != rank)
        return f;
    char *end;
    long step = strtol(when, &end, 10);
    if (*end == '\0' && end != when)
        f.step = step;
    else
        snprintf(f.point, sizeof f.point, "%s", when);
    f.signal = !strcmp(what, "kill") ? SIGKILL
               : !strcmp(what, "stop") ? SIGSTOP
               : !strcmp(what, "usr1") ? SIGUSR1
               : !strcmp(what, "term") ? SIGTERM
                                       : 0;
    return f;
}

static int act(const pn_fault *f, const char *where)
{
    struct timeval now;
    gettimeofday(&now, NULL);
    fprintf(stderr, "PIPENET_FAULT at %s: %ld.%06ld\n", where, (long)now.tv_sec,
            (long)now.tv_usec);
    fflush(stderr);
    if (f->signal) {
        raise(f->signal);
        return PN_OK;
    }
    return pn_error_set(PN_ERR_INTERNAL, "%s: fault injected by PIPENET_FAULT", where);
}

int pn_fault_check(const pn_fault *f, long step)
{
    if (step != f->step) return PN_OK;
    char where[32];
    snprintf(where, sizeof where, "step %ld", step);
    return act(f, where);
}

int pn_fault_at(const pn_fault *f, const char *point)
{
    return f->point[0] && !strcmp(f->point, point) ? act(f, point) : PN_OK;
}
