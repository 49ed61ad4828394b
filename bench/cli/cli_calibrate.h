/*
 * cli_calibrate.h - what the parts of `pyramidkv calibrate` share: one
 * allocation compared (a schedule and a head mode) with its results, and
 * what the preparing pass learns of the trace. cli_calibrate.c owns the
 * flags and the rows, cli_calibrate_output.c the tables, JSON and plot,
 * cli_calibrate_rank.c the summary and the order of the rows,
 * cli_calibrate_prep.c the read loop both passes share and the pass that
 * finds every stream's prompts, the per-(layer, KV head) profile and
 * CAKE's layer preference, and cli_calibrate_measure.c the pass that
 * compresses every prompt of every layer under every allocation
 * (docs/spec.md §18).
 */
#ifndef PB_CLI_CALIBRATE_H
#define PB_CLI_CALIBRATE_H

#include <stddef.h>
#include <stdint.h>

#include "cli_trace_common.h"

/* Heavy hitters per record: the positions before the window that its rows
 * attend to most (the top 32, as replay's recall). */
#define PB_CAL_TOP_K 32u

/* The prompt positions per (layer, KV head) the peak loss looks at: the
 * few the later queries attend to most (a needle's digits). */
#define PB_CAL_PEAK 8u

/* How a layer's share is spread over its heads. */
enum {
    PB_CAL_HEADS_UNIFORM = 0,  /* every head keeps the share */
    PB_CAL_HEADS_ADAPTIVE = 1, /* one pool of heads x share (docs/spec.md
                                  §16, Ada-KV's floor of 200 permille) */
    PB_CAL_HEADS_SHARES = 2    /* fixed per-head shares from the trace's
                                  per-(layer, KV head) profile (§17.3) */
};

typedef struct cal_sched {
    pb_cli_sched s;
    int heads;          /* PB_CAL_HEADS_* */
    uint32_t *shares;   /* per layer: the per-head share */
    uint32_t *head_shares; /* per (layer, KV head), PB_CAL_HEADS_SHARES */
    double *mass_sum;   /* per layer, over its prefill records */
    double *head_sum;   /* per (layer, KV head), over its records */
    double *recall_sum; /* per (layer, KV head): heavy-hitter recall */
    double *pmass;      /* per (prompt, layer, KV head): retained mass */
    double *precall;    /* per (prompt, layer, KV head): recall; the sums
                           above add these in prompt order */
    double *lost;       /* per (prompt, layer, KV head): future attention
                           on evicted prompt positions */
    double *seen;       /* per (prompt, layer, KV head): all future
                           attention (0: no future record) */
    double *peak_lost;  /* per (prompt, layer, KV head): the future rows'
                           attention on their PB_CAL_PEAK most attended
                           prompt positions, on those evicted */
    double *peak_all;   /* ... on all of those */
    double peak;        /* peak loss: per prompt, peak_lost over peak_all
                           pooled over (layer, KV head); mean over prompts;
                           the figure the rows are ranked by */
    double peak_se;
    size_t n_cells;     /* prompts x layers x KV heads */
    uint64_t total;     /* the shares' sum */
    uint64_t held;      /* the positions held: max(share, recent + 1) each */
    uint32_t used;      /* the budget the schedule ran at (equal memory) */
    double mass;        /* retained mass: mean over (layer, KV head) */
    double recall;      /* heavy-hitter recall: mean over (layer, KV head) */
    double worst;       /* the lowest (layer, KV head) mean recall */
    uint32_t worst_layer, worst_head;
    double loss;        /* worst-head loss: mean over prompts of the
                           prompt's largest (layer, KV head) lost / seen */
    double loss_mean;   /* lost / seen, mean over (prompt, layer, KV head) */
    double loss_se;     /* standard error of loss over the prompts */
    double *prompt_loss; /* per prompt: its peak loss (-1: no future rows) */
    double gap_se;      /* paired standard error against the top row */
    int tied;           /* within 2 gap_se of the top row */
} cal_sched;

/* calibrate's options (cli_calibrate.c parses them). */
typedef struct cal_opts {
    pb_cli_trace_args t; /* TRACE, --json, --per-layer */
    const char *plot;
    const char *cake_pref; /* --cake-pref: one preference per layer */
    uint32_t budget, fraction_ppm, floor_w, recent;
    double tau1, tau2;
    int have_budget, have_floor, have_recent, progress;
} cal_opts;

/* One layer's profile figures and its prefill records. */
typedef struct cal_layer {
    uint64_t rows, records;
    double bits, support;
    uint32_t k50, k90, k99;
    double cake_pref; /* CAKE's P_l (measured, or --cake-pref) */
    const char *cake_from; /* "preference", "prompts" or "option" */
} cal_layer;

/* The preparing pass's findings (cli_calibrate_prep.c). A stream is one
 * (layer, KV head, query head slot) of the trace; slot G stands for the
 * reduced group (query head 0xFFFFFFFF). */
typedef struct cal_prep {
    uint32_t layers, kv_heads, slots; /* slots = group size + 1 */
    uint32_t *n_pre, *n_fut; /* per stream: prefill and future records */
    uint32_t *n_prf;         /* per stream: preference records */
    uint32_t prompts;        /* the most prefill records of one stream */
    uint32_t pref_texts;     /* the most preference records of one stream */
    pb_profile *head_prof;   /* profile layer l * kv_heads + h: the window
                                rows of KV head h of layer l */
    double *cake_pref;       /* per layer: CAKE's preference, the mean over
                                the layer's preference texts, or its
                                prompts where it has none */
    uint8_t *pref_from_texts; /* per layer: 1 if from preference records */
} cal_prep;

/* The measuring options. */
typedef struct cal_measure_opts {
    uint32_t recent;  /* the recent window every head keeps */
    uint32_t kernel;  /* pooling width */
    int progress;     /* a progress line on stderr */
} cal_measure_opts;

/* One record of the trace handed to a pass: 0 to go on, -1 to stop with a
 * message in err naming the record. */
typedef int (*cal_visit_fn)(void *ctx, const pb_tr_record *rec,
                            const float *v, char *err, size_t err_len);

/* The read loop both passes share: every record of the trace at path, in
 * file order, to fn. 0 after the end record; -1 with the reader's message
 * (a corrupt or truncated file) or fn's. */
int pb_cli_calibrate_visit(const char *path, cal_visit_fn fn, void *ctx,
                           char *err, size_t err_len);

/* Reads the trace: stream counts, the head profile (every prefill row of
 * KV head h of layer l, over the keys its query sees, into profile layer l
 * * H + h) and CAKE's preference with temperatures tau1, tau2. 0, or -1
 * with a message naming the record. */
int pb_cli_calibrate_prep(const char *path, const pb_cli_scan *scan,
                          double tau1, double tau2, cal_prep *out, char *err,
                          size_t err_len);
void pb_cli_calibrate_prep_free(cal_prep *p);

/* The stream of a record: ((layer * KV heads + head) * slots + slot). */
uint32_t pb_cli_calibrate_stream(const cal_prep *p, const pb_tr_record *rec);

/* Every prompt of every layer - prompt k of layer l is the k-th prefill
 * record of each of the layer's streams - compressed together by one
 * layer group under every allocation, with the window figures (recall,
 * mass) and, where the streams have future records, the future loss
 * added to each allocation's sums. records[layer * kv_heads + head]
 * counts the prefill records. Returns 0, or -1 with a message. */
int pb_cli_calibrate_measure(const char *path, const pb_cli_scan *scan,
                             const cal_prep *prep,
                             const cal_measure_opts *mo, cal_sched *sc,
                             size_t n_sched, uint64_t *records, char *err,
                             size_t err_len);

/* The figures of every allocation from its sums, then the rows in their
 * order (docs/spec.md §18.5): by peak loss when the trace has future
 * records, else by recall. */
void pb_cli_calibrate_rank(cal_sched *sc, size_t n_sched, const uint64_t *recs,
                           const cal_prep *prep, int have_future);

const char *pb_cli_calibrate_heads_name(int heads);

/* Prints the tables (or with --json the JSON document) and draws --plot.
 * 0, 1 when the JSON cannot be built, PB_CLI_FAILED when gnuplot fails. */
int pb_cli_calibrate_report(const cal_opts *o, const pb_cli_scan *scan,
                            const cal_layer *ly, const uint32_t *weights,
                            uint32_t fit, const cal_sched *sc,
                            size_t n_sched, const char *skipped);

/* One "kv-cache/calibrate" golden-vector case (docs/vectors.md): writes
 * the case's trace to a temporary file, runs `calibrate --json` on it
 * with the case's flags and compares the rows' figures; the runner's hook
 * (cli_calibrate_vectors.c). 0, or -1 with the case failed. */
struct case_state;
struct cJSON;
int pb_cli_calibrate_vector_case(struct case_state *c,
                                 const struct cJSON *cs);

#endif /* PB_CLI_CALIBRATE_H */
