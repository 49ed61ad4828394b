/*
 * bench_replay_plan.h - what the replays of bench_decode_replay share (its
 * default tables and its --scorer tables): the decode-4096 rows gathered at
 * the positions a reference run holds, the victims that run chose, and the
 * timed replay every implementation must reproduce them with.
 */
#ifndef PB_BENCH_REPLAY_PLAN_H
#define PB_BENCH_REPLAY_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

/* The attention and the expected victims of every step of one replay: the
 * instance holds {0} after reset; for t = 1 .. steps the token at t
 * attends to the held positions and is admitted; whenever budget + cadence
 * or more are held, evict(budget) runs. */
typedef struct bench_replay_plan {
    uint32_t steps, budget, cadence;
    size_t *off;       /* [steps] offset of step t's row in attn */
    uint32_t *len;     /* [steps] held count before step t; victims follow */
    float *attn;       /* all rows back to back */
    size_t n_victims;  /* victims over the whole replay */
    uint32_t *victims; /* [steps] in call order, ascending per call */
    size_t row_bytes;  /* sum of the rows' bytes */
} bench_replay_plan;

/* Runs the reference model once, untimed, created from *config (whose
 * budget is the plan's), building the rows (each the full trace row
 * gathered at the held positions, not renormalised, as the policybook
 * harness feeds it) and the victims. Checks the trace's FNV-1a hash when
 * all its steps run. Returns 0, or 1 after reporting a failure (the plan is
 * then empty). */
int bench_replay_plan_build(bench_replay_plan *pl,
                            const pb_kvcache_config *config, uint32_t steps,
                            uint32_t cadence);

void bench_replay_plan_free(bench_replay_plan *pl);

/* One implementation's calls, on an instance of it. */
typedef struct bench_replayer {
    void *self;
    int (*reset)(void *self); /* 0 on success */
    pb_status (*observe)(void *self, uint32_t pos, const float *attn,
                         size_t len);
    pb_status (*evict)(void *self, uint32_t budget, uint32_t *victims,
                       size_t cap, size_t *n);
} bench_replayer;

/* The library's calls on *policy, and the reference model's on *ref. */
bench_replayer bench_replayer_library(pb_kvcache *policy);
bench_replayer bench_replayer_reference(ref_policy *ref);

/* One timed replay of the plan; the victims go to out[0 .. out_cap-1].
 * Returns the wall seconds (the thread's CPU seconds in *cpu), or a
 * negative value if a call failed. */
double bench_replay_run(const bench_replayer *who, const bench_replay_plan *pl,
                        uint32_t *out, size_t out_cap, size_t *n_out,
                        double *cpu);

/* 0 when a run's victims are the plan's; otherwise reports the first
 * difference, naming the run (`what`) and the implementation (`who`), and
 * returns 1. */
int bench_replay_check(const bench_replay_plan *pl, const uint32_t *got,
                       size_t n_got, const char *what, const char *who);

#endif /* PB_BENCH_REPLAY_PLAN_H */
