/* `mpirun -np P pipenet generate`: the model split into P pipeline stages, one rank
 * each (pipeline/gen_stages.h), and cmd_generate.c's generation run on every rank over
 * its part; rank 0 prints. */
#ifndef PN_CLI_GENERATE_STAGED_H
#define PN_CLI_GENERATE_STAGED_H

#include <stdbool.h>

#include "model/model.h"

/* Generates from m (whole or a part); print: this rank writes the text and the
 * summary line. */
typedef int (*generate_run_fn)(void *ctx, pn_model *m, bool print);

/* Runs generation across the job's ranks: the exit status. */
int generate_staged(const char *model, int device_request, generate_run_fn run, void *ctx);

#endif
