/* `pipenet train --trace FILE` over the ranks: every rank records its timeline
 * (base/trace.h) on a clock aligned with rank 0's, and at the end rank 0 gathers
 * the ranks' events (mpi/comm.h) into one Chrome trace-event file, one process
 * per rank, put in place whole (base/out_file.h: a temporary name, fsync, rename; a
 * stream such as /dev/stdout is written in place). */
#ifndef PN_TRACING_H
#define PN_TRACING_H

#include "mpi/comm.h"

/* Collective: rank 0 checks that it can write next to path, every rank compares
 * its clock with rank 0's and starts recording (up to $PIPENET_TRACE_EVENTS events
 * per rank, else base/trace.h's default). Rank 0's failure is every rank's. */
int pn_tracing_start(pn_comm *c, const char *path);

/* Collective: stops recording, gathers every rank's events to rank 0, which writes
 * path; frees the events. Rank 0's status for every rank. */
int pn_tracing_finish(pn_comm *c, const char *path);

/* After a failure the other ranks may not know of: writes this rank's events alone
 * to "<path>.rank<N>" without talking to any rank; frees the events. */
int pn_tracing_write_alone(const pn_grid *g, const char *path);

#endif
