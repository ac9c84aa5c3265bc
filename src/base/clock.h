/* Monotonic wall-clock time for rates, ETAs and benchmarks. */
#ifndef PN_CLOCK_H
#define PN_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC). */
double pn_now(void);

#endif
