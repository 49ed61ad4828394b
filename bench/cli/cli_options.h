/*
 * cli_options.h - the one command-line vocabulary of every pyramidkv
 * subcommand: walking "--flag value" / "--flag=value" arguments (flag
 * aliases resolved to one canonical spelling, a flag given twice refused),
 * the names of policies, scorers and schedules with their aliases, the
 * shared defaults, the exit statuses, strict unsigned integers and comma
 * lists, and the one-line usage error (exit status 2) that names the flag.
 * docs/cli.md is the reference built from these tables.
 *
 * Owns the vocabulary and argument syntax; each subcommand owns which
 * flags it reads and its help.
 */
#ifndef PB_CLI_OPTIONS_H
#define PB_CLI_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The exit statuses of every subcommand: 0 success; 1 a run that failed
 * (a failing golden vector, out of memory, gnuplot failing); 2 a usage or
 * input error (an unknown, repeated or conflicting flag, a bad value or
 * name, a file that cannot be read or is malformed). */
#define PB_CLI_OK 0
#define PB_CLI_FAILED 1
#define PB_CLI_USAGE 2

/* The defaults every subcommand shares: a flag means the same thing, with
 * the same default, wherever it is accepted. */
#define PB_CLI_DEFAULT_BUDGET 512u
#define PB_CLI_DEFAULT_LAYERS 32u
#define PB_CLI_DEFAULT_RATIO 4u
#define PB_CLI_DEFAULT_RECENT 32u
#define PB_CLI_DEFAULT_OBS 16u
#define PB_CLI_DEFAULT_KERNEL 7u
#define PB_CLI_DEFAULT_SINKS 4u /* streaming-llm's and taper's */

/* The policies by --policy, in this order everywhere. */
typedef enum pb_cli_policy_id {
    PB_CLI_POLICY_PYRAMIDKV,
    PB_CLI_POLICY_SNAPKV,
    PB_CLI_POLICY_H2O,
    PB_CLI_POLICY_SCISSORHANDS,
    PB_CLI_POLICY_TOVA,
    PB_CLI_POLICY_STREAMING_LLM,
    PB_CLI_POLICY_SLIDING_WINDOW,
    PB_CLI_POLICY_COUNT
} pb_cli_policy_id;

/* --policy NAME (canonical or alias) into *id; --scorer NAME into a
 * pb_scorer. Return 0, or PB_CLI_USAGE with a message naming the flag and
 * listing the canonical names. */
int pb_cli_lookup_policy(const char *cmd, const char *text, int *id);
int pb_cli_lookup_scorer(const char *cmd, const char *text, uint32_t *scorer);

/* A schedule name (canonical, as pb_schedule_kind_name, or an alias such
 * as "pyramid" for arithmetic), `len` bytes of `text`, into a
 * pb_schedule_kind. 0 or -1 (no message: the caller names the flag). */
int pb_cli_lookup_schedule(const char *text, size_t len, uint32_t *kind);

/* The canonical names. */
const char *pb_cli_policy_canonical(int id);
const char *pb_cli_scorer_canonical(uint32_t scorer);

/* "pyramidkv, snapkv, ... or sliding-window": the canonical names for a
 * message or a help line. */
extern const char pb_cli_policy_list[];
extern const char pb_cli_schedule_list[];

/* Prints the lines every subcommand's --help ends with: the aliases (flags
 * and names) and the exit statuses. */
void pb_cli_help_common(FILE *out);

/* A walk over argv[1 .. argc-1] of one subcommand named `cmd`. */
typedef struct pb_cli_walk {
    int argc;
    char **argv;
    int next;           /* index of the next argument */
    const char *cmd;    /* "bench", "plan": used in messages */
    const char *flag;   /* the current flag, without "=value" */
    char flag_buf[64];
    const char *inline_value; /* the text after '=', or NULL */
    char seen[32][24];  /* canonical flags given so far */
    size_t n_seen;
} pb_cli_walk;

void pb_cli_walk_init(pb_cli_walk *w, const char *cmd, int argc, char **argv);

/* Advances to the next argument. Returns 1 with w->flag set to the
 * canonical spelling (an alias such as --recent-window becomes --recent),
 * 0 at the end, or PB_CLI_USAGE (message printed) for an argument that is
 * not a flag or a flag given before (under any of its spellings). */
int pb_cli_walk_next(pb_cli_walk *w);

/* pb_cli_walk_next for a subcommand with a help text: after --help (or
 * -h), prints help(stdout) and returns PB_CLI_WALK_HELP instead of 1. */
#define PB_CLI_WALK_HELP 4
int pb_cli_walk_flag(pb_cli_walk *w, void (*help)(FILE *out));

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
