/* The subcommands of the pipenet program; each returns the process exit status. */
#ifndef PN_COMMANDS_H
#define PN_COMMANDS_H

#include <stdbool.h>

#include "mpi/job.h"

int pn_cmd_layers(int argc, char **argv);
int pn_cmd_import(int argc, char **argv);
int pn_cmd_train(int argc, char **argv);
int pn_cmd_plan(int argc, char **argv);
int pn_cmd_inspect(int argc, char **argv);
int pn_cmd_export(int argc, char **argv);
int pn_cmd_infer(int argc, char **argv);
int pn_cmd_generate(int argc, char **argv);

/* Prints "pipenet: error: <message>" to stderr and returns 1. */
int pn_cli_fail(const char *message);

/* Ends an MPI job after a failure and returns status: the rank that owns the error
 * (rc is not PN_ERR_PEER) prints it once. When every rank knows of the failure
 * (together) all leave cleanly; otherwise peers may be waiting on this rank, so it
 * ends the job (pn_job_abort). */
int pn_cli_fail_job(pn_job *job, int rc, bool together, int status);

#endif
