/* Parsing of command-line option values with messages that name the option. */
#ifndef PN_OPTIONS_H
#define PN_OPTIONS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include "base/choices.h"
#include "base/stop_signal.h" /* the exit statuses: PN_EXIT_USAGE */

/* Under an MPI launcher, leaves command-line mistakes to rank 0 to report (every rank
 * parses the same command line before MPI starts). */
void pn_opt_quiet_unless_first_rank(void);

/* Prints "pipenet: error: <message>" unless another rank reports; returns -1. Every
 * mistake of a command line is reported here (or by the parsers below, which call
 * it), and ends the command with PN_EXIT_USAGE (2). */
/* The number of ranks when started by mpirun or srun, else 1 (read from the
 * launcher's environment: MPI is not called). */
long pn_cli_launcher_ranks(void);

int pn_opt_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* pn_opt_report, then PN_EXIT_USAGE: `return pn_cli_misuse(...)` from a command. */
int pn_cli_misuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* getopt_long(argc, argv, "h", longopts) reporting its own mistakes through
 * pn_opt_report (an unknown option, an ambiguous abbreviation, a missing value, a
 * value given to an option that takes none), each then given as '?'. */
int pn_opt_next(int argc, char **argv, const struct option *longopts);

/* Each returns 0, or -1 after printing "pipenet: error: --name: ..." to stderr. */
int pn_opt_long(const char *name, const char *text, long min, long max, long *out);
int pn_opt_int(const char *name, const char *text, int min, int max, int *out);
int pn_opt_double(const char *name, const char *text, double min, double max, double *out);
int pn_opt_u64(const char *name, const char *text, uint64_t *out);
/* --name: one of choices (--device: pn_device_requests, --transport:
 * pn_transport_requests), its index into *out. */
int pn_opt_choice(const char *name, const pn_choices *choices, const char *text, int *out);
/* Copies text into out (cap bytes) or reports that it is too long. */
int pn_opt_path(const char *name, const char *text, char *out, int cap);

/* After getopt: the one MODEL.json argument of command in *path, or (after printing
 * why and the usage) the exit status 2. */
int pn_opt_model_argument(int argc, char **argv, const char *command,
                          void (*usage)(FILE *out), const char **path);

#endif
