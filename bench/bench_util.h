/* Helpers shared by the benchmarks in bench/. */
#ifndef PN_BENCH_UTIL_H
#define PN_BENCH_UTIL_H

/* The median of v[0..n), n >= 1; sorts v in place. */
double bench_median(double *v, int n);

#endif
