/*
 * cli_calibrate.h - what the two halves of `pyramidkv calibrate` share: one
 * allocation compared (a schedule and a head mode) and its results.
 * cli_calibrate.c owns the flags, the profile and the output;
 * cli_calibrate_measure.c replays the trace's prefill records through one
 * layer group per (layer, prompt) under every allocation.
 */
#ifndef PB_CLI_CALIBRATE_H
#define PB_CLI_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

#include "cli_trace_common.h"

/* Heavy hitters per record: the positions before the window that its rows
 * attend to most (the top 32, as replay's recall). */
#define PB_CAL_TOP_K 32u

/* How a layer's share is spread over its KV heads. */
enum {
    PB_CAL_HEADS_UNIFORM = 0,  /* every head keeps the share */
    PB_CAL_HEADS_ADAPTIVE = 1  /* one pool of heads x share (docs/spec.md
                                  §16, Ada-KV's floor of 200 permille) */
};

typedef struct cal_sched {
    pb_cli_sched s;
    int heads;          /* PB_CAL_HEADS_UNIFORM or _ADAPTIVE */
    uint32_t *shares;   /* per layer: the per-head share */
    double *mass_sum;   /* per layer, over its prefill records */
    double *head_sum;   /* per (layer, KV head), over its records */
    double *recall_sum; /* per (layer, KV head): heavy-hitter recall */
    uint64_t total;     /* the shares' sum */
    uint64_t held;      /* the positions held: max(share, window + 1) each */
    uint32_t used;      /* the budget the schedule ran at (equal memory) */
    double mass;        /* retained mass: mean over (layer, KV head) */
    double recall;      /* heavy-hitter recall: mean over (layer, KV head) */
    double worst;       /* the lowest (layer, KV head) mean recall */
    uint32_t worst_layer, worst_head;
} cal_sched;

/* Every prefill record of the trace at `path` under every allocation:
 * consecutive records of one layer with the same rows, query and length
 * (one prompt's KV heads) are compressed together by one layer group
 * (pb_kvcache_group_prefill; per-head uniform is the group with a floor of
 * 1000 permille), and each record's retained mass - the attention its
 * window rows put on its head's kept positions over their attention on
 * every position they see - is added to mass_sum[layer] and
 * head_sum[layer * kv_heads + head], and its heavy-hitter recall - the
 * share of its PB_CAL_TOP_K heavy hitters kept - to recall_sum[layer *
 * kv_heads + head]. records[layer * kv_heads + head] counts the records.
 * Returns 0, or -1 with a message. */
int pb_cli_calibrate_measure(const char *path, const pb_cli_scan *scan,
                             cal_sched *sc, size_t n_sched,
                             uint64_t *records, char *err, size_t err_len);

#endif /* PB_CLI_CALIBRATE_H */
