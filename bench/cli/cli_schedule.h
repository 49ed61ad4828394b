/*
 * cli_schedule.h - the schedule flags shared by `pyramidkv plan` and
 * `pyramidkv bench` (--schedule, --ratio, --window, --beta, --prompt-len,
 * --sinks, --gamma, --weights, --min-share): collecting their texts, turning
 * them into a pb_schedule for one kind, and the decimal conversions the
 * library's integer fields need (docs/spec.md §12).
 *
 * Owns flag syntax and conversion only; the shares are the library's.
 */
#ifndef PB_CLI_SCHEDULE_H
#define PB_CLI_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "cli_options.h"
#include "pyramidkv/pyramidkv.h"

#define PB_CLI_MAX_SCHEDULES 8u

/* The texts of the schedule flags as given (NULL: not given). */
typedef struct pb_cli_schedule_flags {
    const char *schedule, *ratio, *window, *beta, *prompt_len, *sinks, *gamma,
        *weights, *min_share;
} pb_cli_schedule_flags;

/* If the walk's current flag is a schedule flag, takes its value into f
 * and returns 1; returns 0 for any other flag, PB_CLI_USAGE (message
 * printed) for a missing value. */
int pb_cli_schedule_flag(pb_cli_walk *w, pb_cli_schedule_flags *f);

/* Parses f->schedule (a comma list of names; NULL means arithmetic) into
 * kinds[0 .. *n-1]. Returns 0 or PB_CLI_USAGE. */
int pb_cli_schedule_kinds(const char *cmd, const pb_cli_schedule_flags *f,
                          uint32_t *kinds, size_t *n);

/* Fails (PB_CLI_USAGE, message names the flag) a given flag that none of
 * kinds[0 .. n-1] reads. */
int pb_cli_schedule_check_used(const char *cmd,
                               const pb_cli_schedule_flags *f,
                               const uint32_t *kinds, size_t n);

/* Builds the pb_schedule of `kind` for budget and layers from the flags;
 * weights (num_layers entries) receives the profile's integer weights.
 * Returns 0 or PB_CLI_USAGE (a value out of range, a malformed decimal,
 * --weights with the wrong count). */
int pb_cli_schedule_build(const char *cmd, const pb_cli_schedule_flags *f,
                          uint32_t kind, uint32_t budget, uint32_t layers,
                          uint32_t *weights, pb_schedule *out);

/* Allocates the shares and the weights of `layers` layers for
 * pb_cli_schedule_build. Returns 0, or 1 (out of memory, "pyramidkv <cmd>:
 * out of memory" printed, both pointers NULL). */
int pb_cli_schedule_arrays(const char *cmd, uint32_t layers,
                           uint32_t **shares, uint32_t **weights);

/* A one-line description of the schedule's parameters, e.g.
 * "kvfactory C=64 window=8 beta=20". */
void pb_cli_schedule_describe(const pb_schedule *s, char *buf, size_t len);

#endif /* PB_CLI_SCHEDULE_H */
