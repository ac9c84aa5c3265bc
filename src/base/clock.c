/* pn_now over clock_gettime(CLOCK_MONOTONIC). */
#include "base/clock.h"

#include <time.h>

double pn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
