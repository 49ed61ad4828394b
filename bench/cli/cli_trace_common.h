/*
 * cli_trace_common.h - what `pyramidkv trace`, `calibrate` and `replay`
 * share: the one-line error for a trace that cannot be read (exit status
 * 2, nothing on stdout), the two passes over a trace (a scan of its shape
 * and sizes, then the attention profile of its rows), the records in
 * stream order, and the schedules by
 * name with their per-layer shares at an average budget.
 */
#ifndef PB_CLI_TRACE_COMMON_H
#define PB_CLI_TRACE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli_options.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

/* Prints "pyramidkv <cmd>: <path>: <message>" on stderr; returns 2. */
int pb_cli_trace_error(const char *cmd, const char *path, const char *msg);

/* The arguments every command that reads one trace shares. */
typedef struct pb_cli_trace_args {
    const char *path; /* the one TRACE (a bare argument) */
    int json;         /* --json */
    int per_layer;    /* --per-layer */
} pb_cli_trace_args;

/* pb_cli_trace_walk's result for a flag the caller handles. */
#define PB_CLI_WALK_FLAG 3

/* Advances `w` over the arguments `a` holds (the TRACE, --json,
 * --per-layer) and --help, which it prints with `help` on stdout. Returns
 * 0 at the end of the arguments (a missing TRACE is a usage error there),
 * 1 after --help, PB_CLI_USAGE after a message, or PB_CLI_WALK_FLAG with
 * w->flag and *value set for any other flag: every other flag of these
 * commands takes a value, and the caller refuses the ones it does not
 * know. */
int pb_cli_trace_walk(pb_cli_walk *w, pb_cli_trace_args *a,
                      void (*help)(FILE *), const char **value);

/* What a first pass over a trace finds. */
typedef struct pb_cli_scan {
    pb_tr_shape shape;
    uint64_t prefill, decode, future, preference; /* records */
    uint64_t rows;            /* rows of both kinds */
    uint32_t max_len;         /* longest row, in keys */
    uint32_t max_window;      /* most rows in a prefill record */
    uint32_t max_prompt;      /* longest prefill prompt */
    uint32_t layers_present;  /* layers with at least one record */
} pb_cli_scan;

/* Reads the whole trace, checking it. 0, or -1 with a message. */
int pb_cli_scan_trace(const char *path, pb_cli_scan *out, char *err,
                      size_t err_len);

/* A record handed to a pass: 0 to go on, -1 to stop with a message in
 * err naming the record. */
typedef int (*pb_cli_record_fn)(void *ctx, const pb_tr_record *rec,
                                const float *v, char *err, size_t err_len);

/* The records of the kinds in `kinds` (bit 1 << kind) to fn in stream
 * order: ascending layer, KV head, query head (the reduced group last),
 * each stream's records in file order (cli_trace_order.c). Any
 * interleaving of the streams gives fn the same sequence. 0, or -1 with
 * the reader's message or fn's. */
int pb_cli_visit_stream_order(const char *path, uint32_t kinds,
                              pb_cli_record_fn fn, void *ctx, char *err,
                              size_t err_len);

/* A second pass: every row of the trace (each prefill window row over the
 * keys its query sees, each decode row) into a new profile of the trace's
 * layers and longest row, in stream order. 0, or -1 with a message. */
int pb_cli_profile_trace(const char *path, const pb_cli_scan *scan,
                         pb_profile **out, char *err, size_t err_len);

/* ------------------------------------------------------------------------ */
/* Schedules                                                                */

/* A schedule by name: a pb_schedule_kind of the library
 * (pyramidkv_schedule.h, docs/spec.md §12) and, for arithmetic, curve and
 * geometric, its ratio. */
typedef struct pb_cli_sched {
    uint32_t kind;  /* a pb_schedule_kind */
    uint32_t ratio; /* arithmetic, curve, geometric */
    char name[32];  /* "uniform", "arithmetic:4", "kvfactory", "profile" */
} pb_cli_sched;

/* Parses a schedule name or alias (pb_cli_lookup_schedule), optionally
 * ":R" for the ratio of arithmetic, curve and geometric (default
 * PB_CLI_DEFAULT_RATIO). 0 or -1. */
int pb_cli_sched_parse(const char *text, pb_cli_sched *out);

/* The schedules `calibrate` compares, in its order: uniform,
 * arithmetic:2, :4, :8, kvfactory, kvfactory-balanced, taper, curve:4,
 * profile, cake. */
size_t pb_cli_sched_all(pb_cli_sched *out, size_t cap);

/* What a schedule needs beyond its kind: the average budget, the layers,
 * the window (kvfactory's and cake's w), the prompt length (kvfactory's
 * and cake's q, 0 if unknown), the profile weights, the profile's
 * min_share, the floor: the fewest positions a layer holds whatever its
 * share (the policy's recent window + 1, docs/spec.md §3.2; 0 for none),
 * and cake's weights (NULL: cake is refused). */
typedef struct pb_cli_sched_ctx {
    uint32_t budget, layers, window, prompt_len;
    const uint32_t *weights;
    uint32_t min_share;
    uint32_t floor;
    const uint32_t *cake_weights;
} pb_cli_sched_ctx;

/* Every layer's share by pb_kvcache_schedule_shares, written to
 * shares[0 .. layers-1], their sum to *share_total and the positions the
 * layers hold, the sum of max(share, floor), to *held, at equal total
 * memory: when the held total at the budget exceeds what uniform budgets
 * hold (layers x max(budget, floor)) - kvfactory adds the window to every
 * layer, the floor lifts taper's deep layers - the largest budget whose
 * held total fits is used instead, written to *used (else *used =
 * budget). 0, or -1 with a message (the schedule's status: e.g. kvfactory
 * with a budget not above the window). */
int pb_cli_sched_shares(const pb_cli_sched *s, const pb_cli_sched_ctx *c,
                        uint32_t *shares, uint64_t *share_total,
                        uint64_t *held, uint32_t *used, char *err,
                        size_t err_len);

#endif /* PB_CLI_TRACE_COMMON_H */
