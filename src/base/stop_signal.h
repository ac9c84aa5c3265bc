/* Stop requests from a scheduler or a user: SIGTERM and SIGUSR1 ask a training run
 * to finish its step, write a snapshot and exit (with PN_EXIT_STOPPED; without a
 * snapshot directory, PN_EXIT_STOPPED_UNSAVED), whenever they arrive once pipenet's
 * first instruction has run (src/cli/main.c: before that, only a launcher that keeps
 * them blocked across exec makes them a stop). The handlers only record the signal;
 * the trainer looks at its safe points (after set-up, after a resume, after every
 * step). */
#ifndef PN_STOP_SIGNAL_H
#define PN_STOP_SIGNAL_H

/* Exit statuses of `pipenet train`, for schedulers and wrappers (docs/running.md). */
enum {
    PN_EXIT_FINISHED = 0, /* trained every step */
    PN_EXIT_ERROR = 1,    /* stopped by an error; snapshots already written are intact */
    PN_EXIT_USAGE = 2,    /* a wrong command line */
    PN_EXIT_STOPPED = 3,  /* stopped early by SIGTERM or SIGUSR1, where the snapshot
                           * directory holds where it stopped: resume to finish */
    PN_EXIT_STOPPED_UNSAVED = 4 /* stopped early by SIGTERM or SIGUSR1 with no snapshot
                                 * directory: nothing saved, the steps trained are lost */
};

/* Installs the handlers (idempotent; system calls restart after them). Also makes
 * an exceeded file-size limit an error of the write (EFBIG) rather than a death
 * by SIGXFSZ. The pipenet program calls it before main (src/cli/main.c). */
void pn_stop_signals_catch(void);

/* The program's start: the handlers, then SIGTERM and SIGUSR1 unblocked, so that one
 * that a launcher kept blocked across exec (the one way to cover the dynamic
 * loader's moment before any code of the program runs) and that is pending since is
 * a stop too. Not for a library caller, whose signal mask is its own. */
void pn_stop_signals_catch_at_start(void);

/* The stop signal received so far (the first one), or 0. */
int pn_stop_signal(void);

/* "SIGTERM", "SIGUSR1", or "a signal". */
const char *pn_stop_signal_name(int sig);

#endif
