/* The subcommands of the pipenet program; each returns the process exit status. */
#ifndef PN_COMMANDS_H
#define PN_COMMANDS_H

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

#endif
