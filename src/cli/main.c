/* The pipenet program: picks a subcommand and maps its outcome to an exit status. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/stop_signal.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config.h"

typedef struct command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv);
} command;

#define PN_COMMAND_ROW(name, summary) {#name, summary, pn_cmd_##name},
static const command commands[] = {PN_COMMANDS(PN_COMMAND_ROW)};
#undef PN_COMMAND_ROW
enum { N_COMMANDS = sizeof commands / sizeof *commands };

static void usage(FILE *out)
{
    fprintf(out,
            "usage: pipenet <command> [options]\n"
            "\n"
            "Trains neural networks split into pipeline stages across MPI ranks.\n"
            "\n"
            "commands:\n");
    for (int i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "`pipenet <command> --help` describes a command.\n"
            "options: --help, --version\n");
}

int pn_cli_fail(const char *message)
{
    fprintf(stderr, "pipenet: error: %s\n", message);
    return 1;
}

int pn_cli_fail_job(pn_job *job, int rc, bool together, int status)
{
    if (rc != PN_ERR_PEER) {
        pn_cli_fail(pn_error_message());
        fflush(stderr);
        if (pn_job_size(job) > 1 && !together) pn_job_abort(job, 1);
    }
    pn_job_finalize(job);
    return status;
}

/* A scheduler's stop signal may come at any moment, even while the libraries start:
 * `pipenet train` takes it as a request to stop cleanly from the first instruction
 * of pipenet's own code. glibc runs .preinit_array with main's arguments before any
 * shared library's constructor (OpenBLAS starts its threads there) and before main;
 * only the dynamic loader's mapping and relocation of the libraries (some 5 ms for
 * the ~60 that MPI and HDF5 bring) come earlier, which a launcher covers by blocking
 * the signals across exec. */
static void catch_stop_signals_early(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc >= 2 && !strcmp(argv[1], "train")) pn_stop_signals_catch_at_start();
}
__attribute__((section(".preinit_array"), used)) static void (*const early_stop_signals)(
    int, char **, char **) = catch_stop_signals_early;

int main(int argc, char **argv)
{
    /* again, for a C library that runs no .preinit_array (idempotent) */
    if (argc >= 2 && !strcmp(argv[1], "train")) pn_stop_signals_catch_at_start();
    if (argc < 2) {
        usage(stderr);
        return PN_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h") || !strcmp(name, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version")) {
        printf("pipenet %s\n", PACKAGE_VERSION);
        return 0;
    }
    for (int i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, commands[i].name)) return commands[i].run(argc - 1, argv + 1);
    pn_opt_report("unknown command '%s'\n", name);
    usage(stderr);
    return PN_EXIT_USAGE;
}
