/* The subcommands of the pipenet program (one list, PN_COMMANDS) and what they share
 * to end in failure. */
#ifndef PN_COMMANDS_H
#define PN_COMMANDS_H

#include <stdbool.h>

#include "mpi/job.h"

/* The one list of the subcommands, in the order --help lists them: X(name, summary),
 * each run by pn_cmd_<name> (cli/cmd_<name>.c), which returns the exit status. main.c
 * makes its table of this list, and tests/test_commands.sh reads it back from --help. */
#define PN_COMMANDS(X)                                                                  \
    X(import, "convert Fashion-MNIST or text files into dataset HDF5")                  \
    X(train, "train a model JSON on a dataset HDF5 file")                               \
    X(plan, "place a model's layers on pipeline stages and show their costs")           \
    X(layers, "list the layer types a model can use")                                   \
    X(inspect, "show what a dataset, snapshot or model file holds")                     \
    X(export, "write a snapshot's model (config and values) as a model file")           \
    X(infer, "run a model file over a dataset file: outputs, accuracy or RMSE")         \
    X(generate, "continue a text with a byte-level language model file")

#define PN_COMMAND_DECLARE(name, summary) int pn_cmd_##name(int argc, char **argv);
PN_COMMANDS(PN_COMMAND_DECLARE)
#undef PN_COMMAND_DECLARE

/* Prints "pipenet: error: <message>" to stderr and returns 1. */
int pn_cli_fail(const char *message);

/* Ends an MPI job after a failure and returns status: the rank that owns the error
 * (rc is not PN_ERR_PEER) prints it once. When every rank knows of the failure
 * (together) all leave cleanly; otherwise peers may be waiting on this rank, so it
 * ends the job (pn_job_abort). */
int pn_cli_fail_job(pn_job *job, int rc, bool together, int status);

#endif
