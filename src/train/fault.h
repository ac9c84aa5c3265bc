/* Fault injection for the failure and signal tests: PIPENET_FAULT=RANK:WHEN[:WHAT]
 * makes that rank, at WHEN (a step number, one of the set-up points "setup", "data",
 * "resume", or a snapshot's "part", "parts", "index": train/checkpoint.c), fail
 * with an error (WHAT = error, the default), die by SIGKILL (kill), stall by SIGSTOP
 * (stop), or send itself SIGUSR1 or SIGTERM (usr1, term), so tests can check that the
 * job ends on every rank, reported once, without hanging, and that a stop signal at
 * any moment stops cleanly. Before it acts it prints the wall-clock time to stderr,
 * so a test can measure how long the job takes to end after it. */
#ifndef PN_FAULT_H
#define PN_FAULT_H

#include <stdbool.h>

typedef struct pn_fault {
    long step;      /* -1: none at a step */
    char point[8];  /* a set-up point, or "" */
    int signal;     /* 0: an error; else the signal to send itself */
} pn_fault;

/* The fault $PIPENET_FAULT asks of rank, if any. */
pn_fault pn_fault_for_rank(int rank);

/* 0, or at the fault's step the injected error (or death, or signal). */
int pn_fault_check(const pn_fault *f, long step);

/* The same at a named set-up point. */
int pn_fault_at(const pn_fault *f, const char *point);

#endif
