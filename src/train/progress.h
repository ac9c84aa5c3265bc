/* Console progress of a training run and of its evaluations: on a terminal, one
 * live line rewritten in place (step, epoch, loss, samples/s, tokens/s for sequence
 * models, ETA); otherwise a
 * plain line at most every few seconds, so batch-job logs stay readable. */
#ifndef PN_PROGRESS_H
#define PN_PROGRESS_H

#include <stdbool.h>
#include <stdio.h>

typedef struct pn_progress {
    FILE *out;
    bool live;          /* out is a terminal */
    bool line_open;     /* a live line is on screen */
    long first_step, total_steps;
    double start, last_print, every_s;
} pn_progress;

/* Starts reporting a run that goes from first_step to total_steps; live only when
 * allowed and out is a terminal (MPI launchers give every rank a terminal, so a
 * multi-rank job reports in plain lines). */
void pn_progress_start(pn_progress *p, FILE *out, long first_step, long total_steps,
                       double every_s, bool allow_live);

/* Reports that `step` steps are done; with tokens_per_sample > 1 (a sequence model)
 * the line also gives tokens/s. */
void pn_progress_step(pn_progress *p, long step, long epoch, double loss, double samples_per_s,
                      int tokens_per_sample);

/* Reports that `done` of `total` samples of an evaluation that began at `started`
 * (pn_now()) are evaluated, at the cadence of steps counted from its start, so that
 * an evaluation shorter than that prints nothing. */
void pn_progress_eval(pn_progress *p, double started, long done, long total);

/* A time span as the epoch lines print it, with its digits where they count:
 * "12.3 s" from 1 s, "45 ms" below, "0.25 ms" below 10 ms. */
void pn_progress_duration(double seconds, char *buf, size_t cap);

/* Prints a whole line (clearing a live line first). */
void pn_progress_print(pn_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Ends the live line, if any. */
void pn_progress_finish(pn_progress *p);

#endif
