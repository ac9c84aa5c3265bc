/* pn_now over clock_gettime(CLOCK_MONOTONIC); pn_sleep over nanosleep. */
#include "base/clock.h"

#include <time.h>

double pn_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void pn_sleep(double seconds)
{
    if (seconds <= 0.0) return;
    struct timespec ts = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&ts, &ts) != 0) {} /* a signal cut it short: sleep the rest */
}
