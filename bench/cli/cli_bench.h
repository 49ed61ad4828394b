/*
 * cli_bench.h - what the two halves of `pyramidkv bench` share: the options,
 * the per-trace results, and the table helpers. cli_bench.c owns the flags
 * and the runs, cli_bench_output.c the output (JSON, tables, reading),
 * cli_bench_schedule.c the schedule comparison (--schedule).
 */
#ifndef PB_CLI_BENCH_H
#define PB_CLI_BENCH_H

#include <stddef.h>
#include <stdint.h>

#include "cli_bench_policy.h"
#include "cli_schedule.h"
#include "pyramidkv/pyramidkv.h"
#include "workload_harness.h"

#define MAX_LIST 16u
#define MAX_BUDGET PB_WL_POSITIONS
#define MAX_RATIO 4096u

typedef struct bench_opts {
    pb_wl_profile traces[PB_WL_PROFILE_COUNT];
    size_t n_traces;
    uint32_t layers;
    int layers_set;
    uint32_t budgets[MAX_LIST];
    size_t n_budgets;
    uint32_t ratios[MAX_LIST];
    size_t n_ratios;
    int ratios_set;
    uint32_t recent, obs, kernel;
    pb_cli_policy pol;
    int per_layer, json;
    /* --schedule: the kinds compared (instead of ratios) and their flags */
    pb_cli_schedule_flags sched;
    uint32_t kinds[PB_CLI_MAX_SCHEDULES];
    size_t n_kinds;
    int schedule_mode;
} bench_opts;

/* What one trace produced. */
typedef struct trace_run {
    pb_wl_profile profile;
    uint32_t layers;
    pb_wl_config configs[MAX_LIST * MAX_LIST];
    pb_wl_result results[MAX_LIST * MAX_LIST];
    size_t n;
    /* schedule mode: configuration i is kinds[i]'s shares[i] */
    uint32_t kinds[MAX_LIST * MAX_LIST];
    uint32_t *shares[MAX_LIST * MAX_LIST];
    pb_wl_layer_info *info;
    uint32_t sinks; /* the sinks the run used */
} trace_run;

/* Every (configuration, layer) pair is a policy instance plus the
 * harness's own copy of its held positions; all are alive at once. A run
 * that would need more than MAX_RUN_MIB is refused up front instead of
 * failing (or being killed) half-way. */
#define MAX_RUN_MIB 2048u

/* Configuration lists */

/* After the flags: with --schedule, the kinds and their flags checked, and
 * schedule mode set. 0 or PB_CLI_USAGE. */
int pb_cli_bench_schedule_setup(bench_opts *o);

/* Schedule mode: tr's configurations, one per (budget, kind), each with its
 * shares (tr->shares, freed with the trace). 0, PB_CLI_USAGE or 1. */
int pb_cli_bench_schedule_configs(const bench_opts *o, trace_run *tr);

/* The ratio a schedule's configuration shows (and arithmetic, curve and
 * geometric use): the one --ratio value, or 4. 1 for the other kinds. */
uint32_t pb_cli_bench_schedule_ratio(const bench_opts *o, uint32_t kind);

/* The shares of `kind` at `budget` over `layers` into a new array (*out,
 * the caller frees it). Returns 0, PB_CLI_USAGE (the schedule is refused,
 * the reason printed) or 1 (out of memory). */
int pb_cli_bench_schedule_shares(const bench_opts *o, uint32_t kind,
                                 uint32_t budget, uint32_t layers,
                                 uint32_t **out);

/* The memory guard of a schedule run (see MAX_RUN_MIB): 0 or PB_CLI_USAGE. */
int pb_cli_bench_check_memory_schedules(const bench_opts *o);

/* Tables */

/* The uniform result (ratio 1, or the uniform schedule) of the trace at
 * budget, or NULL. */
const pb_wl_result *pb_cli_bench_uniform_of(const trace_run *tr,
                                            uint32_t budget);

/* What configuration i is called in tables: its ratio, or its schedule. */
void pb_cli_bench_label(const trace_run *tr, size_t i, char *buf, size_t len);

/* Indices of the results of `budget`, best first; returns the count. */
size_t pb_cli_bench_ranked(const trace_run *tr, uint32_t budget, size_t *idx);

/* Prints "  %+9.6f" of v - uv, or "-" when there is no uniform result. */
void pb_cli_bench_delta(double v, const pb_wl_result *u, double uv);

/* The rows of a comparison table, per trace and budget best first with a
 * blank line between groups: head(tr, i) prints the row's first columns,
 * then mass, recall (each with its difference from uniform), evictions and
 * peak held. Returns whether a floor binds in any row. */
int pb_cli_bench_rows(const bench_opts *o, const trace_run *runs,
                      size_t n_runs,
                      void (*head)(const trace_run *tr, size_t i));

/* What prints a table or a reading of n_runs runs. */
typedef void pb_cli_bench_printer(const bench_opts *o, const trace_run *runs,
                                  size_t n_runs);

/* Schedule mode's table (returns whether a floor binds anywhere) and its
 * one-line reading. */
int pb_cli_bench_schedule_table(const bench_opts *o, const trace_run *runs,
                                size_t n_runs);
pb_cli_bench_printer pb_cli_bench_schedule_reading;

/* Output (cli_bench_output.c) */

/* The JSON document of the runs on stdout: 0, or 1 if out of memory. */
int pb_cli_bench_print_json(const bench_opts *o, const trace_run *runs,
                            size_t n);

/* The comparison table, its one-line reading, and the per-layer table. */
pb_cli_bench_printer pb_cli_bench_print_table, pb_cli_bench_print_reading,
    pb_cli_bench_print_per_layer;

#endif /* PB_CLI_BENCH_H */
