/* Monotonic wall-clock time for rates, ETAs and benchmarks. */
#ifndef PN_CLOCK_H
#define PN_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double pn_now(void);

/* Sleeps this long (the rest of it when a signal interrupts). */
void pn_sleep(double seconds);

#endif
