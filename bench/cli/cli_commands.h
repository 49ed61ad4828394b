/*
 * cli_commands.h - the subcommands of the pyramidkv program. Each takes the
 * arguments after its own name (argv[0] is the subcommand name) and returns
 * the process exit status: 0 success, 1 a failed run (e.g. a failing
 * vector), 2 a usage error (unknown flag, bad value).
 */
#ifndef PB_CLI_COMMANDS_H
#define PB_CLI_COMMANDS_H

int pb_cli_vectors(int argc, char **argv);
int pb_cli_bench(int argc, char **argv);
int pb_cli_plan(int argc, char **argv);
int pb_cli_trace(int argc, char **argv);
int pb_cli_calibrate(int argc, char **argv);
int pb_cli_replay(int argc, char **argv);

#endif /* PB_CLI_COMMANDS_H */
