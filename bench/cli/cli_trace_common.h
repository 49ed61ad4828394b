/*
 * cli_trace_common.h - what `pyramidkv trace`, `calibrate` and `replay`
 * share: the one-line error for a trace that cannot be read (exit status
 * 2, nothing on stdout), the two passes over a trace (a scan of its shape
 * and sizes, then the attention profile of its rows) and the schedules by
 * name with their per-layer shares at an average budget.
 */
#ifndef PB_CLI_TRACE_COMMON_H
#define PB_CLI_TRACE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

/* Prints "pyramidkv <cmd>: <path>: <message>" on stderr; returns 2. */
int pb_cli_trace_error(const char *cmd, const char *path, const char *msg);

/* What a first pass over a trace finds. */
typedef struct pb_cli_scan {
    pb_tr_shape shape;
    uint64_t prefill, decode; /* records */
    uint64_t rows;            /* rows of both kinds */
    uint32_t max_len;         /* longest row, in keys */
    uint32_t max_window;      /* most rows in a prefill record */
    uint32_t max_prompt;      /* longest prefill prompt */
    uint32_t layers_present;  /* layers with at least one record */
} pb_cli_scan;

/* Reads the whole trace, checking it. 0, or -1 with a message. */
int pb_cli_scan_trace(const char *path, pb_cli_scan *out, char *err,
                      size_t err_len);

/* A second pass: every row of the trace (each prefill window row over the
 * keys its query sees, each decode row) into a new profile of the trace's
 * layers and longest row. 0, or -1 with a message. */
int pb_cli_profile_trace(const char *path, const pb_cli_scan *scan,
                         pb_profile **out, char *err, size_t err_len);

/* ------------------------------------------------------------------------ */
/* Schedules                                                                */

enum {
    PB_CLI_SCHED_UNIFORM = 0,
    PB_CLI_SCHED_ARITHMETIC = 1, /* with a ratio */
    PB_CLI_SCHED_PROFILE = 2     /* weights from the trace's profile */
};

typedef struct pb_cli_sched {
    int kind;
    uint32_t ratio;
    char name[32]; /* "uniform", "arithmetic:4", "profile" */
} pb_cli_sched;

/* Parses "uniform", "arithmetic:R" (R >= 1), "pyramid" (arithmetic:4, the
 * library's default ratio) or "profile". 0 or -1. */
int pb_cli_sched_parse(const char *text, pb_cli_sched *out);

/* The schedules `calibrate` compares, in its order. */
size_t pb_cli_sched_all(pb_cli_sched *out, size_t cap);

/* Every layer's share at average budget, written to shares[0 .. layers-1];
 * weights are the profile weights (needed by "profile" only). 0, or -1 with
 * a message. */
int pb_cli_sched_shares(const pb_cli_sched *s, uint32_t budget,
                        uint32_t layers, const uint32_t *weights,
                        uint32_t min_share, uint32_t *shares, char *err,
                        size_t err_len);

#endif /* PB_CLI_TRACE_COMMON_H */
