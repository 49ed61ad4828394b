/*
 * vector_runner_internal.h - what the files of the golden vector runner
 * share: the state of a run and of a case, the failure messages, typed JSON
 * field access, and the two tables that make the runner extensible.
 *
 * The runner is split by concern:
 *   vector_runner.c        documents: reading, the top level, the case loop,
 *                          the report and the closing counts
 *   vector_families.c      THE FAMILY TABLE: document "policy" -> family
 *   vector_fields.c        status names, messages, typed field access
 *   vector_budget.c        the allocation family (kv-cache/pyramid-budget)
 *   vector_policy_case.c   the shape every per-layer policy case shares:
 *                          params, options, surface, create, THE CALL TABLE
 *                          and the step loop
 *   vector_policy_pyramidkv.c  the kv-cache/pyramidkv and kv-cache/snapkv
 *                          families (their params, their two surfaces)
 *   vector_policy_family.c the rest of the policybook family: h2o,
 *                          scissorhands, tova, streaming-llm, sliding-window
 *   vector_steps.c         the common step helpers and the decode, evict,
 *                          read-back and reset steps
 *   vector_steps_prefill.c the prefill step
 *   vector_steps_family.c  sinkCount and the scorers' read-backs (scoreOf,
 *                          votesOf, lastAttentionOf)
 *
 * Adding a per-layer policy family (one that takes params, options and
 * steps like kv-cache/pyramidkv): write vector_policy_NAME.c defining a
 * pb__vr_policy (its param keys and parser, its vtable and create
 * functions, and any step calls of its own in its `calls` table), declare
 * it below, and add one entry to pb__vr_families in vector_families.c.
 * Adding a step call every policy family takes: one entry in
 * pb__vr_common_calls (vector_policy_case.c) and its function. A family
 * whose cases have a different shape altogether (as the allocation cases
 * do) gives its own run_case function in its table entry.
 *
 * Nothing here is part of the library; names are pb__vr_ because the
 * runner is linked statically into the program and the tests.
 */
#ifndef PB_BENCH_VECTOR_RUNNER_INTERNAL_H
#define PB_BENCH_VECTOR_RUNNER_INTERNAL_H

#include <cJSON.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pyramidkv/pyramidkv.h"
#include "vector_runner.h"

#if defined(__GNUC__)
#define PB__VR_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define PB__VR_PRINTF(f, a)
#endif

/* Lists longer than this are shortened with "..." in messages. */
#define VR_MAX_LISTED 48u
/* Case names are shortened to this many bytes in messages. */
#define VR_MAX_NAME 120u

/* ------------------------------------------------------------------------ */
/* The state of one run and of one case (vector_fields.c).                  */

/* A message buffer that truncates instead of overflowing. */
typedef struct msgbuf {
    char text[3072];
    size_t len;
} msgbuf;

typedef struct run_state {
    FILE *report;
    int verbose;
    size_t max_bytes;
    const char *label;
    pb_vector_totals *totals;
} run_state;

typedef struct case_state {
    run_state *run;
    char name[VR_MAX_NAME + 8u];
    int failed;
    msgbuf msg;
} case_state;

/* The enum name of a status ("PB_ERR_PARAM"), from the same table as the
 * enum. */
const char *pb__vr_status_name(pb_status s);

void pb__vr_msg_add(msgbuf *m, const char *fmt, ...) PB__VR_PRINTF(2, 3);
void pb__vr_msg_add_u32_list(msgbuf *m, const uint32_t *v, size_t n);
/* Adds "[want...], got [got...]" (the tail of an "expected" message). */
void pb__vr_msg_add_expected_got(msgbuf *m, const uint32_t *want,
                                 size_t n_want, const uint32_t *got,
                                 size_t n_got);

/* Formats d with the fewest significant digits that read back as the same
 * double, so 0.1 prints as 0.1 and not 0.10000000000000001. */
const char *pb__vr_shortest(double d, char *buf, size_t size);

/* Records the first failure of the case, after `prefix`; return -1 so
 * callers can `return pb__vr_fail(...)`. */
int pb__vr_vfail(case_state *c, const char *prefix, const char *fmt,
                 va_list ap);
int pb__vr_fail(case_state *c, const char *fmt, ...) PB__VR_PRINTF(2, 3);

/* Copies a case name for messages: control characters and quotes become
 * '?', so a hostile name cannot forge report lines. */
void pb__vr_set_case_name(case_state *c, const cJSON *name, size_t index);

/* Typed field access: each returns 1 and writes *out, or 0 (nothing
 * written, nothing reported) when the item is absent or not of the type. */
int pb__vr_get_u32(const cJSON *item, uint32_t *out);
/* A uint64: a JSON integer up to 2^53 or a string of decimal digits. */
int pb__vr_get_u64(const cJSON *item, uint64_t *out);
/* A list of uint32 values into a new malloc'd array (at least one slot). */
int pb__vr_get_u32_list(const cJSON *item, uint32_t **out, size_t *n);
/* A status name such as "PB_ERR_PARAM". */
int pb__vr_get_status(const cJSON *item, pb_status *out);
/* One attention weight: a number, or "NaN", "Infinity", "-Infinity". */
int pb__vr_get_weight(const cJSON *e, float *out);
/* A two-valued enum option by name (n0 -> 0, n1 -> 1) or its raw number. */
int pb__vr_get_named(const cJSON *v, const char *n0, const char *n1,
                     uint32_t *out);

/* Checks that every key of `obj` is in `allowed` (NULL-terminated, at most
 * 32 names) and appears once. Returns 0 and fails the case otherwise. */
int pb__vr_check_keys(case_state *c, const cJSON *obj, const char *what,
                      const char *const *allowed);

/* An optional object `what`: -1 when absent (NULL), 1 when an object
 * whose keys pass pb__vr_check_keys, 0 with the case failed otherwise. */
int pb__vr_object_keys(case_state *c, const cJSON *obj, const char *what,
                       const char *const *allowed);
/* Reads each of the n keys names[i] present in obj into *fields[i]; 0 with
 * the case failed ("malformed: prefix.name must be an integer
 * 0..4294967295") at the first that is not one. */
int pb__vr_read_u32s(case_state *c, const cJSON *obj, const char *prefix,
                     const char *const *names, uint32_t *const *fields,
                     size_t n);

/* ------------------------------------------------------------------------ */
/* Families (vector_families.c).                                            */

typedef struct pb__vr_policy pb__vr_policy;

/* One kind of vector document, named by its top-level "policy". */
typedef struct pb__vr_family {
    const char *policy; /* e.g. "kv-cache/pyramidkv" */
    /* Runs one case (already checked to be an object with a string
     * "name"); failures go to c. */
    int (*run_case)(case_state *c, const pb__vr_policy *policy,
                    const cJSON *cs);
    const pb__vr_policy *policy_family; /* passed to run_case; NULL for
                                           families that need none */
} pb__vr_family;

/* Terminated by an entry whose policy is NULL. */
extern const pb__vr_family pb__vr_families[];

/* The allocation cases (vector_budget.c). */
int pb__vr_run_budget_case(case_state *c, const pb__vr_policy *unused,
                           const cJSON *cs);

/* The schedule cases (vector_schedule.c). */
int pb__vr_run_schedule_case(case_state *c, const pb__vr_policy *unused,
                             const cJSON *cs);

/* The calibrate cases ("kv-cache/calibrate"): run by the pyramidkv
 * program's calibrate (cli_calibrate_vectors.c), which sets the hook
 * before running documents; without it (the runner library alone, a
 * fuzzer) every such case fails saying so. */
extern int (*pb__vr_calibrate_hook)(case_state *c, const cJSON *cs);
int pb__vr_run_calibrate_case(case_state *c, const pb__vr_policy *unused,
                              const cJSON *cs);

/* ------------------------------------------------------------------------ */
/* Per-layer policy cases (vector_policy_case.c).                           */

/* The params a policy case was given, read onto the family's defaults. A
 * family whose params do not fit pb_kvcache_pyramidkv_params adds a member
 * of its own here (its parser fills it, its create functions read it). */
typedef struct vr_params {
    pb_kvcache_pyramidkv_params pyramidkv;
    /* The rest of the policybook family (vector_policy_family.c): each
     * member reads the keys it takes and leaves the others at its
     * defaults. */
    struct {
        uint32_t budget, recent_window, sinks;
    } family;
} vr_params;

/* The instance a case drives, and where its step loop is. */
typedef struct policy_case policy_case;
struct policy_case {
    pb_kvcache *kv;
    const pb_kvcache_vtable *vt; /* NULL on the native surface */
    size_t step;                 /* index of the step being run */
    const char *call;            /* its call name */
    uint32_t prefill_max_len;    /* options.prefillMaxLen: nonzero means a
                                    prefill step uses the create-time
                                    reservation instead of a workspace */
    const pb__vr_policy *policy; /* the family, for its own calls */
};

/* One step call: its name in "call" and the function that runs it. */
typedef int (*pb__vr_step_fn)(case_state *c, policy_case *pc,
                              const cJSON *step);
typedef struct pb__vr_call {
    const char *name;
    pb__vr_step_fn run;
} pb__vr_call;

/* The calls every policy family takes, NULL-terminated. */
extern const pb__vr_call pb__vr_common_calls[];

/* A per-layer policy family: how its cases' params are read and its
 * instance is created on each surface. */
struct pb__vr_policy {
    /* Reads "params" (jp, NULL when absent) onto the family's defaults.
     * Returns 1, or 0 with the case failed. */
    int (*parse_params)(case_state *c, const cJSON *jp, vr_params *p);
    /* Bytes the native instance would need (to refuse hostile params
     * before allocating); a status other than PB_OK skips the check. */
    pb_status (*size)(const vr_params *p, const pb_kvcache_options *o,
                      size_t *bytes);
    /* The native create, with options. */
    pb_status (*create)(const vr_params *p, const pb_kvcache_options *o,
                        pb_kvcache **out);
    /* The compatible surface: its vtable, and a create through it (NULL
     * when refused). */
    const pb_kvcache_vtable *vtable;
    pb_kvcache *(*create_compatible)(const vr_params *p);
    /* Step calls only this family takes, NULL-terminated (NULL: none). */
    const pb__vr_call *calls;
};

/* The families of vector_policy_pyramidkv.c. */
extern const pb__vr_policy pb__vr_policy_pyramidkv;
extern const pb__vr_policy pb__vr_policy_snapkv;
/* The families of vector_policy_family.c. */
extern const pb__vr_policy pb__vr_policy_h2o;
extern const pb__vr_policy pb__vr_policy_scissorhands;
extern const pb__vr_policy pb__vr_policy_tova;
extern const pb__vr_policy pb__vr_policy_streaming_llm;
extern const pb__vr_policy pb__vr_policy_sliding_window;

/* Runs one case of a per-layer policy family. */
int pb__vr_run_policy_case(case_state *c, const pb__vr_policy *policy,
                           const cJSON *cs);

/* ------------------------------------------------------------------------ */
/* Step helpers (vector_steps.c), for every step file.                      */

/* Fails the step, naming it ("step 3 (evict): ..."). */
int pb__vr_step_fail(case_state *c, const policy_case *pc, const char *fmt,
                     ...) PB__VR_PRINTF(3, 4);
/* The step's "args" as a list of want_min .. want_max items (an absent or
 * null "args" counts as []); NULL with the step failed otherwise. */
const cJSON *pb__vr_step_args(case_state *c, const policy_case *pc,
                              const cJSON *step, int want_min, int want_max);
/* pb__vr_step_args whose first item is a position, read into *pos; NULL
 * with the step failed otherwise. */
const cJSON *pb__vr_step_pos_args(case_state *c, const policy_case *pc,
                                  const cJSON *step, int want_min,
                                  int want_max, uint32_t *pos);
/* The optional "expectStatus" (default PB_OK); *given tells whether it was
 * there. */
int pb__vr_step_status(case_state *c, const policy_case *pc,
                       const cJSON *step, pb_status *st, int *given);
/* Refuses a field the call does not take (a null "expect" counts as
 * absent). */
int pb__vr_step_refuse(case_state *c, const policy_case *pc,
                       const cJSON *step, const char *key);
/* A buffer of n positions for a step's results; NULL after freeing
 * `expect` and failing the step ("out of memory"). */
uint32_t *pb__vr_step_positions(case_state *c, const policy_case *pc,
                                size_t n, uint32_t *expect);
/* The fields a step head may refuse. */
#define PB__VR_NO_EXPECT 1u
#define PB__VR_NO_TOLERANCE 2u
/* The head of a call step: refuses "expect" and then "tolerance" where
 * `refused` says so, then reads the optional "expectStatus" as
 * pb__vr_step_status does. 1, or 0 with the step failed. */
int pb__vr_step_head(case_state *c, const policy_case *pc, const cJSON *step,
                     unsigned refused, pb_status *want, int *given);
/* A step that reads an integer back (effectiveBudget, keptCount,
 * capacity, sinkCount): no args, "expect" an integer equal to got;
 * counts the step in *counter. */
int pb__vr_step_count(case_state *c, policy_case *pc, const cJSON *step,
                      uint64_t got, size_t *counter);
/* 1 when want == got, else 0 with the step failed. */
int pb__vr_check_status(case_state *c, const policy_case *pc, pb_status want,
                        pb_status got);

/* The common steps. */
int pb__vr_step_decode(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_evict(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_effective_budget(case_state *c, policy_case *pc,
                                 const cJSON *step);
int pb__vr_step_window_score(case_state *c, policy_case *pc,
                             const cJSON *step);
int pb__vr_step_kept_count(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_kept_positions(case_state *c, policy_case *pc,
                               const cJSON *step);
int pb__vr_step_capacity(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_reset(case_state *c, policy_case *pc, const cJSON *step);
/* vector_steps_prefill.c */
int pb__vr_step_prefill(case_state *c, policy_case *pc, const cJSON *step);
/* vector_steps_family.c */
int pb__vr_step_sink_count(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_score_of(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_votes_of(case_state *c, policy_case *pc, const cJSON *step);
int pb__vr_step_last_attention_of(case_state *c, policy_case *pc,
                                  const cJSON *step);

#endif /* PB_BENCH_VECTOR_RUNNER_INTERNAL_H */
