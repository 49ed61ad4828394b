/*
 * cli_options.h - command-line parsing shared by `pyramidkv bench` and
 * `pyramidkv plan`: walking "--flag value" / "--flag=value" arguments,
 * strict unsigned integers and comma lists, and the one-line usage error
 * (exit status 2) that names the flag.
 *
 * Owns argument syntax only; each subcommand owns its flags and help.
 */
#ifndef PB_CLI_OPTIONS_H
#define PB_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

/* The exit status of every usage error. */
#define PB_CLI_USAGE 2

/* A walk over argv[1 .. argc-1] of one subcommand named `cmd`. */
typedef struct pb_cli_walk {
    int argc;
    char **argv;
    int next;           /* index of the next argument */
    const char *cmd;    /* "bench", "plan": used in messages */
    const char *flag;   /* the current flag, without "=value" */
    char flag_buf[64];
    const char *inline_value; /* the text after '=', or NULL */
} pb_cli_walk;

void pb_cli_walk_init(pb_cli_walk *w, const char *cmd, int argc, char **argv);

/* Advances to the next argument. Returns 1 with w->flag set, 0 at the end,
 * or PB_CLI_USAGE (message printed) for an argument that is not a flag. */
int pb_cli_walk_next(pb_cli_walk *w);

/* The value of the current flag (inline or the next argument). Returns 0,
 * or PB_CLI_USAGE (message printed) if there is none. */
int pb_cli_walk_value(pb_cli_walk *w, const char **value);

/* Fails a flag that takes no value but was given "=value": returns 0 or
 * PB_CLI_USAGE (message printed). */
int pb_cli_walk_no_value(pb_cli_walk *w);

/* Prints "pyramidkv <cmd>: <message>" and a newline on stderr; returns
 * PB_CLI_USAGE. */
int pb_cli_usage_error(const char *cmd, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Parses `text` as a decimal integer in [lo, hi] (digits only, no sign, no
 * spaces). Returns 0, or PB_CLI_USAGE with a message naming `flag`. */
int pb_cli_parse_u32(const char *cmd, const char *flag, const char *text,
                     uint32_t lo, uint32_t hi, uint32_t *out);

/* Parses a comma-separated list of such integers into out[0 .. cap-1];
 * *n is the count. Empty items and more than cap items are refused. */
int pb_cli_parse_u32_list(const char *cmd, const char *flag, const char *text,
                          uint32_t lo, uint32_t hi, uint32_t *out, size_t cap,
                          size_t *n);

#endif /* PB_CLI_OPTIONS_H */
