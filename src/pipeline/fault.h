/* Fault injection for the failure tests: PIPENET_FAULT=rank:step[:kill] makes that
 * rank fail with an error (or die by SIGKILL) when it reaches that step, so tests
 * can check that the job ends on every rank, reported once, without hanging. */
#ifndef PN_FAULT_H
#define PN_FAULT_H

#include <stdbool.h>

typedef struct pn_fault {
    long step; /* -1: none for this rank */
    bool kill;
} pn_fault;

/* The fault $PIPENET_FAULT asks of rank, if any. */
pn_fault pn_fault_for_rank(int rank);

/* 0, or at the fault's step the injected error (or death). */
int pn_fault_check(const pn_fault *f, long step);

#endif
