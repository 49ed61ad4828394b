/*
 * vector_runner.h - runs golden vector documents (JSON, the schema in
 * docs/vectors.md) against libpyramidkv and reports each failing case.
 *
 * This is the engine of `pyramidkv vectors` and of the runner tests; it is a
 * tool, not part of the library. It never trusts its input: a malformed,
 * truncated, huge or wrongly typed document is reported as an error, never a
 * crash, so a fuzzer may call pb_vector_run_document directly. It owns no
 * global state and is reentrant.
 */
#ifndef PB_BENCH_VECTOR_RUNNER_H
#define PB_BENCH_VECTOR_RUNNER_H

#include <stddef.h>
#include <stdio.h>

/* Counts accumulated over every document run with the same totals. */
typedef struct pb_vector_totals {
    size_t passed;      /* cases whose every check held */
    size_t failed;      /* cases with a failed check or a malformed field */
    size_t documents;   /* documents that were read and understood */
    size_t unreadable;  /* files that could not be read, or documents that
                           are not JSON or not in the schema at top level */
    /* Steps executed, by call: how a run shows every step type ran. */
    size_t steps_decode, steps_evict, steps_effective, steps_window,
        steps_kept_count, steps_kept_positions, steps_capacity, steps_reset,
        steps_prefill, budget_layers, steps_sink_count, steps_score,
        steps_votes, steps_last_attention;
} pb_vector_totals;

#define PB_VECTOR_TOTALS_INIT \
    {0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u, 0u}

/* How a run reports. */
typedef struct pb_vector_options {
    FILE *report;              /* failures and errors go here; NULL: silent */
    int verbose;               /* also print one line per passing case */
    size_t max_instance_bytes; /* a case whose instance would need more is
                                  failed instead of run (keeps fuzzers and
                                  hostile files from exhausting memory);
                                  0: PB_VECTOR_DEFAULT_MAX_BYTES */
} pb_vector_options;

#define PB_VECTOR_DEFAULT_MAX_BYTES ((size_t)256u << 20)

/* Runs every case of the document text[0 .. len-1] (need not be
 * NUL-terminated). `label` names the document in the report (NULL:
 * "<memory>"). Adds to *totals. Returns 0 when the document was understood
 * (its cases may still have failed), -1 when it is not JSON or not a vector
 * document at top level (then totals->unreadable is incremented and no case
 * is counted). Never crashes on any input. */
int pb_vector_run_document(const char *text, size_t len, const char *label,
                           const pb_vector_options *options,
                           pb_vector_totals *totals);

/* Prints the closing line "N passed, M failed" (cases over all documents). */
void pb_vector_print_summary(FILE *out, const pb_vector_totals *totals);

/* Prints how many steps of each call ran (one line), for --verbose. */
void pb_vector_print_step_counts(FILE *out, const pb_vector_totals *totals);

/* 0 when every case passed and every document was readable; 2 when a
 * document could not be read (an input error); else 1 (a failing case). */
int pb_vector_exit_status(const pb_vector_totals *totals);

#endif /* PB_BENCH_VECTOR_RUNNER_H */
