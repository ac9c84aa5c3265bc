/* The timeline recorder behind `pipenet train --trace`: this process's events (a
 * name, a category, a start and an end on the monotonic clock, the step and
 * micro-batch they belong to) in one in-memory buffer, written out as the objects of
 * a Chrome trace-event file (docs/running.md). It needs nothing but libc: the
 * gather of every rank's events and the file are train/tracing.c's.
 * When no trace records, an event site costs one predictable branch on pn_trace_on. */
#ifndef PN_TRACE_H
#define PN_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "base/clock.h"

/* True between pn_trace_start and pn_trace_stop. Read it, never write it. */
extern bool pn_trace_on;

/* The time an event site starts at: pn_now() while recording, else 0. */
#define PN_TRACE_T0() (__builtin_expect(pn_trace_on, 0) ? pn_now() : 0.0)

/* Records an event from t0 (PN_TRACE_T0) to now when recording: name and cat
 * are fixed strings or names that outlive the recording (a layer's); node may be
 * NULL, step and micro -1 for none. */
#define PN_TRACE(name, cat, node, step, micro, t0)                            \
    do {                                                                     \
        if (__builtin_expect(pn_trace_on, 0))                                \
            pn_trace_add((name), (cat), (node), (step), (micro), (t0));      \
    } while (0)

/* Default cap on the events one process keeps (56 bytes each); later ones are
 * counted as dropped. */
enum { PN_TRACE_DEFAULT_CAP = 1 << 20 };

/* Starts recording with room for a first few thousand events, growing by doubling
 * up to max_events (0: PN_TRACE_DEFAULT_CAP). Forgets earlier events. Errors: no
 * memory. */
int pn_trace_start(size_t max_events);

/* Stops recording (the events stay until pn_trace_reset). */
void pn_trace_stop(void);

/* Frees the events and stops recording. */
void pn_trace_reset(void);

/* Where this process's clock stands against the timeline's: an event at local time
 * t is written at (t + offset - origin) microseconds (offset: rank 0's clock minus
 * this one's; origin: the start, on rank 0's clock). */
void pn_trace_set_clock(double offset, double origin);

/* Records one event ending now (the body of PN_TRACE). */
void pn_trace_add(const char *name, const char *cat, const char *node, long step, int micro,
                  double t0);

/* Events recorded, and events dropped at the cap (or when the buffer could not grow). */
size_t pn_trace_count(void);
size_t pn_trace_dropped(void);

/* Writes this process's events as trace-event objects separated by commas, without
 * brackets: metadata naming process pid ("process_name" = label, its sort index),
 * then one "X" event each (ts and dur in microseconds, tid 1), then an instant
 * event saying how many were dropped when any were. Returns 0, or -1 when out
 * fails. */
int pn_trace_write_events(FILE *out, int pid, const char *label);

/* Writes s as a JSON string, quotes included, escaping what JSON requires. */
void pn_trace_write_string(FILE *out, const char *s);

#endif
