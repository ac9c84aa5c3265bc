/* Parsing of command-line option values with messages that name the option. */
#ifndef PN_OPTIONS_H
#define PN_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#include "base/choices.h"

/* Under an MPI launcher, leaves command-line mistakes to rank 0 to report (every rank
 * parses the same command line before MPI starts). */
void pn_opt_quiet_unless_first_rank(void);

/* Prints "pipenet: error: <message>" unless another rank reports; returns -1. */
int pn_opt_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

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
