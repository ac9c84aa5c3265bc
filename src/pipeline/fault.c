/* PIPENET_FAULT parsing and the injected failure (fault.h). */
#include "pipeline/fault.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

pn_fault pn_fault_for_rank(int rank)
{
    pn_fault f = {-1, false};
    const char *v = getenv("PIPENET_FAULT");
    int at_rank;
    long step;
    char how[16] = "";
    if (v && sscanf(v, "%d:%ld:%15s", &at_rank, &step, how) >= 2 && at_rank == rank)
        f = (pn_fault){step, !strcmp(how, "kill")};
    return f;
}

int pn_fault_check(const pn_fault *f, long step)
{
    if (step != f->step) return PN_OK;
    if (f->kill) raise(SIGKILL);
    return pn_error_set(PN_ERR_INTERNAL, "step %ld: fault injected by PIPENET_FAULT", step);
}
