/*
 * cli_input.h - how every pyramidkv subcommand reads an input file and
 * reports one it cannot use: the same words for a missing file and a
 * directory in every command, on one stderr line
 * "pyramidkv <cmd>: <path>: <message>" with nothing on stdout, and exit
 * status 2 (docs/cli.md).
 */
#ifndef PB_CLI_INPUT_H
#define PB_CLI_INPUT_H

#include <stddef.h>

/* Prints "pyramidkv <cmd>: <path>: <msg>" on stderr; returns 2. */
int pb_cli_input_error(const char *cmd, const char *path, const char *msg);

/* Whether `path` names a file the command can read ("-", standard input,
 * always can): 0, or 2 after the one line ("cannot open the file", "a
 * directory, not a regular file"). */
int pb_cli_input_check(const char *cmd, const char *path);

/* Reads the whole of `path` ("-": standard input) into a new buffer
 * (free it), NUL-terminated, its length without the NUL in *len. 0, or 2
 * after the one line (pb_cli_input_check's, "cannot read the file", "the
 * file is larger than N MiB" for more than `max` bytes), or 1 after
 * "out of memory". */
int pb_cli_input_read(const char *cmd, const char *path, size_t max,
                      char **buf, size_t *len);

#endif /* PB_CLI_INPUT_H */
