/*
 * cli_replay.c - `pyramidkv replay TRACE --policy NAME --schedule NAME
 * --budget B`: feeds the decode rows recorded in a trace through a policy,
 * one instance per (layer, KV head, query head) stream, each layer held to
 * its share under the schedule, and prints the measures of `pyramidkv
 * bench`: retained attention mass, heavy-hitter recall (top 32), eviction
 * calls, the sum of shares and the peak positions held.
 *
 * Owns the flags (the policy choice is cli_bench_policy.c's, the names
 * cli_options.c's), the stream bookkeeping and the output. Up to four
 * passes over the file (scan, the profile when the schedule needs it, the
 * prefill records, the decode rows), so the figures do not depend on the
 * order of the records; nothing is printed before the last one has read
 * the whole file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_bench_policy.h"
#include "cli_commands.h"
#include "cli_options.h"
#include "cli_trace_common.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"
#include "workload_metrics.h"

#define MAX_STREAMS (1u << 22)

typedef struct rp_opts {
    pb_cli_trace_args t; /* TRACE, --json, --per-layer */
    pb_cli_policy pol;   /* --policy or --scorer, --sinks */
    uint32_t scorer, sinks; /* what the choice runs as */
    pb_cli_sched sched;
    uint32_t budget, recent, obs, kernel;
} rp_opts;

/* One (layer, KV head, query head) stream. */
typedef struct stream {
    pb_kvcache *kv;
    uint32_t *kept; /* held positions, ascending: mirrors the instance */
    size_t n_kept, cap;
    uint32_t layer;
    uint32_t last; /* the newest position admitted */
} stream;

typedef struct rp_layer {
    uint32_t share;
    double retained_sum;
    uint64_t steps, hits, hit_slots, evictions, peak;
} rp_layer;

typedef struct rp_state {
    const rp_opts *o;
    pb_tr_shape shape;
    uint32_t max_prompt;
    stream *streams;
    size_t n_streams;
    rp_layer *layers;
    uint32_t *victims;
    size_t victims_cap;
    float *attn;
    uint32_t top[PB_WL_TOPK];
    char *err;
    size_t err_len;
    int counting; /* evictions are counted during decode rows only */
} rp_state;

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv replay TRACE [--policy NAME | --scorer S] [--sinks N]\n"
        "                        [--schedule NAME] [--ratio R] [--budget B]\n"
        "                        [--recent N] [--obs N] [--kernel N] [--per-layer]\n"
        "                        [--json]\n"
        "\n"
        "Replays the decode rows of an attention trace (docs/trace_format.md)\n"
        "through a policy: one instance per (layer, KV head, query head) stream,\n"
        "layer l evicted down to its share under the schedule whenever it holds\n"
        "more. A stream's prefill record, wherever it is in the file, first\n"
        "compresses its prompt (pb_kvcache_prefill for the window scorer; the\n"
        "other scorers are fed its rows as decode steps); then its decode rows,\n"
        "in file order. Before each decode row the held positions are measured\n"
        "against it: the retained attention mass (the row's mass on held\n"
        "positions over its mass on all earlier positions) and the heavy-hitter\n"
        "recall (held positions among the row's top 32); then the row is observed,\n"
        "its position admitted, and the layer evicted if over its share.\n"
        "Positions no record covers are admitted without observation. Eviction\n"
        "calls are counted during decode rows. The measures are those of\n"
        "`pyramidkv bench`.\n"
        "\n"
        "Equal total memory: a layer holds at least --recent + 1 positions\n"
        "whatever its share; a schedule whose held total at B exceeds layers x B\n"
        "(kvfactory's window, taper's small deep layers) runs at the largest\n"
        "budget whose held total fits (\"scheduleBudget\", \"heldTotal\").\n"
        "\n"
        "options:\n"
        "%s"
        "  --schedule S   arithmetic, uniform, kvfactory, kvfactory-balanced,\n"
        "                 taper, curve, geometric or profile (docs/spec.md §12)\n"
        "                 [arithmetic]; S:R sets --ratio;\n"
        "                 kvfactory's window is the prefill rows, q the prompt;\n"
        "                 profile weights are k90 of this trace's own profile,\n"
        "                 each layer at least --recent + 1\n"
        "  --ratio R      arithmetic, curve, geometric: first layer's share over\n"
        "                 the last's, >= 1 [%u]\n"
        "  --budget B     average positions per layer, > --recent [%u]\n"
        "  --recent N     newest positions never evicted [%u]; tova,\n"
        "                 streaming-llm and sliding-window protect none\n"
        "  --obs N        observation window in decode steps [%u]\n"
        "  --kernel N     pooling width, odd [%u]\n"
        "  --per-layer    also print every layer\n"
        "  --json         one JSON document instead of the table\n"
        "  --help         this text\n",
        pb_cli_policy_help, PB_CLI_DEFAULT_RATIO,
        PB_CLI_DEFAULT_BUDGET, PB_CLI_DEFAULT_RECENT, PB_CLI_DEFAULT_OBS,
        PB_CLI_DEFAULT_KERNEL);
    pb_cli_help_common(out);
}

static int parse(int argc, char **argv, rp_opts *o) {
    memset(o, 0, sizeof *o);
    pb_cli_policy_init(&o->pol, "replay");
    o->budget = PB_CLI_DEFAULT_BUDGET;
    o->recent = PB_CLI_DEFAULT_RECENT;
    o->obs = PB_CLI_DEFAULT_OBS;
    o->kernel = PB_CLI_DEFAULT_KERNEL;
    (void)pb_cli_sched_parse("arithmetic", &o->sched);
    const char *ratio = NULL;
    int sched_ratio = 0;
    pb_cli_walk w;
    pb_cli_walk_init(&w, "replay", argc, argv);
    const char *v = NULL;
    int wrc;
    while ((wrc = pb_cli_trace_walk(&w, &o->t, help, &v)) ==
           PB_CLI_WALK_FLAG) {
        const char *f = w.flag;
        int prc = 0;
        if (strcmp(f, "--policy") == 0 || strcmp(f, "--scorer") == 0) {
            prc = pb_cli_policy_parse(&o->pol, f, v);
        } else if (strcmp(f, "--sinks") == 0) {
            prc = pb_cli_parse_u32("replay", f, v, 0u, 1u << 20, &o->pol.sinks);
            o->pol.sinks_set = 1;
        } else if (strcmp(f, "--schedule") == 0) {
            if (pb_cli_sched_parse(v, &o->sched) != 0)
                return pb_cli_usage_error("replay", "--schedule: '%s' is not "
                                          "%s, optionally NAME:R for the "
                                          "ratio-taking ones", v,
                                          pb_cli_schedule_list);
            sched_ratio = strchr(v, ':') != NULL;
        } else if (strcmp(f, "--ratio") == 0) {
            ratio = v;
        } else if (strcmp(f, "--budget") == 0) {
            prc = pb_cli_parse_u32("replay", f, v, 1u, UINT32_MAX - 1u,
                                   &o->budget);
        } else if (strcmp(f, "--recent") == 0) {
            prc = pb_cli_parse_u32("replay", f, v, 0u, 1u << 20, &o->recent);
            o->pol.recent_set = 1;
        } else if (strcmp(f, "--obs") == 0) {
            prc = pb_cli_parse_u32("replay", f, v, 1u, 1u << 16, &o->obs);
            o->pol.obs_set = 1;
        } else if (strcmp(f, "--kernel") == 0) {
            prc = pb_cli_parse_u32("replay", f, v, 1u, 1u << 16, &o->kernel);
            if (prc == 0 && o->kernel % 2u == 0u)
                return pb_cli_usage_error("replay", "--kernel: %u is not odd",
                                          o->kernel);
            o->pol.kernel_set = 1;
        } else {
            return pb_cli_usage_error("replay",
                                      "unknown option '%s' (see pyramidkv "
                                      "replay --help)", f);
        }
        if (prc != 0) return PB_CLI_USAGE;
    }
    if (wrc != 0) return wrc;
    const uint32_t k = o->sched.kind;
    const int takes_ratio = k == PB_SCHEDULE_ARITHMETIC ||
                            k == PB_SCHEDULE_CURVE ||
                            k == PB_SCHEDULE_GEOMETRIC;
    if (ratio != NULL) {
        if (!takes_ratio)
            return pb_cli_usage_error("replay", "--ratio does not apply to "
                                      "--schedule %s (see --help)",
                                      o->sched.name);
        if (sched_ratio)
            return pb_cli_usage_error("replay", "--ratio and --schedule "
                                      "NAME:R conflict: give the ratio once");
        uint32_t r = 0;
        if (pb_cli_parse_u32("replay", "--ratio", ratio, 1u, 999999u, &r))
            return PB_CLI_USAGE;
        char name[40];
        snprintf(name, sizeof name, "%s:%u", pb_schedule_kind_name(k), r);
        (void)pb_cli_sched_parse(name, &o->sched);
    }
    int reads_recent = 0;
    pb_cli_policy_native(&o->pol, &o->scorer, &o->sinks, &reads_recent);
    if (!reads_recent) o->recent = 0u;
    if (pb_cli_policy_check(&o->pol, &o->budget, 1u, o->recent) != 0)
        return PB_CLI_USAGE;
    if (o->budget <= o->recent)
        return pb_cli_usage_error("replay", "--budget must exceed --recent (%u)",
                                  o->recent);
    return 0;
}

static int say(rp_state *s, const char *fmt, unsigned long long a,
               const char *what) {
    snprintf(s->err, s->err_len, fmt, a, what);
    return -1;
}

/* Creates the stream's instance (pb_kvcache_create): the policy's scorer
 * and sinks, the layer's share from the schedule. */
static int stream_open(rp_state *s, stream *st, uint32_t layer) {
    const rp_opts *o = s->o;
    const uint32_t share = s->layers[layer].share ? s->layers[layer].share : 1u;
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.recent_window = o->recent;
    c.obs_window = o->obs;
    c.pool_kernel = o->kernel;
    c.budget = share > o->recent ? share : o->recent + 1u;
    c.share = share;
    c.scorer = o->scorer;
    c.sinks = o->sinks;
    if (c.scorer == PB_SCORER_WINDOW && c.sinks == 0u)
        c.prefill_max_len = s->max_prompt;
    const pb_status ps = pb_kvcache_create(&c, NULL, &st->kv);
    if (ps != PB_OK) return say(s, "layer %llu: create: %s", layer, pb_status_str(ps));
    st->cap = pb_kvcache_capacity(st->kv) + 1u;
    if (s->max_prompt + 1u > st->cap) st->cap = s->max_prompt + 1u;
    st->kept = (uint32_t *)malloc(st->cap * sizeof *st->kept);
    if (st->kept == NULL) return say(s, "layer %llu: %s", layer, "out of memory");
    st->kept[0] = 0u;
    st->n_kept = 1u;
    st->layer = layer;
    st->last = 0u;
    return 0;
}

/* Evicts the stream down to its share and mirrors the victims. */
static int stream_evict(rp_state *s, stream *st) {
    rp_layer *ly = &s->layers[st->layer];
    if (st->n_kept <= ly->share) return 0;
    size_t n = 0;
    const pb_status ps = pb_kvcache_evict(st->kv, ly->share, s->victims,
                                          s->victims_cap, &n);
    if (ps != PB_OK) return say(s, "layer %llu: evict: %s", st->layer, pb_status_str(ps));
    if (n == 0u) return 0; /* a floor above the share: nothing goes */
    if (s->counting) ly->evictions += 1u;
    size_t w = 0, v = 0;
    for (size_t i = 0; i < st->n_kept; ++i) {
        if (v < n && st->kept[i] == s->victims[v]) {
            ++v;
            continue;
        }
        st->kept[w++] = st->kept[i];
    }
    st->n_kept = w;
    return 0;
}

/* Admits pos without observation (a position no row covers). The last
 * scorer (TOVA) never evicts an unobserved position, so for it the step
 * observes zeros instead: every held position scores 0. */
static int stream_admit(rp_state *s, stream *st, uint32_t pos) {
    const float *zeros = NULL;
    if (s->o->scorer == PB_SCORER_LAST) {
        memset(s->attn, 0, st->n_kept * sizeof *s->attn);
        zeros = s->attn;
    }
    const pb_status ps = pb_kvcache_observe(st->kv, pos, zeros,
                                            zeros ? st->n_kept : 0u);
    if (ps != PB_OK) return say(s, "layer %llu: observe: %s", st->layer, pb_status_str(ps));
    st->kept[st->n_kept++] = pos;
    st->last = pos;
    return stream_evict(s, st);
}

/* A prefill record: the window scorer compresses the prompt in one call
 * (pb_kvcache_prefill); the other scorers, which take no prefill, are fed
 * the same steps one by one (positions before the first row admitted
 * without observation, then each row as the step admitting its query). */
static int on_decode(rp_state *s, stream *st, const pb_tr_record *r,
                     uint32_t q, const float *row, int measure);

static int on_prefill(rp_state *s, stream *st, const pb_tr_record *r,
                      const float *v) {
    if (pb_kvcache_reset(st->kv) != PB_OK) return -1;
    st->kept[0] = 0u;
    st->n_kept = 1u;
    st->last = 0u;
    if (s->o->scorer != PB_SCORER_WINDOW || s->o->sinks != 0u) {
        for (uint32_t j = 0; j < r->rows; ++j) {
            const uint32_t q = r->query + j;
            if (q == 0u) continue; /* position 0 is held already */
            if (on_decode(s, st, r, q, v + (size_t)j * r->length, 0) != 0)
                return -1;
        }
        return 0;
    }
    size_t n = 0;
    const pb_status ps = pb_kvcache_prefill(st->kv, v, r->rows, r->length,
                                            s->layers[r->layer].share, NULL, 0,
                                            st->kept, st->cap, NULL, 0, &n);
    if (ps != PB_OK)
        return say(s, "record %llu: prefill: %s", r->index, pb_status_str(ps));
    st->n_kept = n;
    st->last = r->length - 1u;
    return 0;
}

static int on_decode(rp_state *s, stream *st, const pb_tr_record *r,
                     uint32_t q, const float *row, int measure) {
    const uint32_t last = st->last;
    s->counting = measure;
    if (q <= last)
        return say(s, "record %llu: %s", r->index,
                   "a stream's decode rows must come in increasing query "
                   "positions");
    for (uint32_t pos = last + 1u; pos < q; ++pos)
        if (stream_admit(s, st, pos) != 0) return -1;
    rp_layer *ly = &s->layers[st->layer];
    double all = 0.0, held = 0.0;
    for (uint32_t p = 0; p < q; ++p) all += row[p];
    for (size_t i = 0; i < st->n_kept; ++i) {
        s->attn[i] = row[st->kept[i]];
        held += s->attn[i];
    }
    if (measure && q > 0u) {
        const uint32_t n_top = pb_wl_top_positions(row, q, PB_WL_TOPK, s->top);
        size_t i = 0;
        for (uint32_t j = 0; j < n_top; ++j) { /* both ascending */
            while (i < st->n_kept && st->kept[i] < s->top[j]) ++i;
            ly->hits += i < st->n_kept && st->kept[i] == s->top[j];
        }
        ly->hit_slots += n_top;
        ly->retained_sum += all > 0.0 ? held / all : 1.0;
        ly->steps += 1u;
    }
    const pb_status ps = pb_kvcache_observe(st->kv, q, s->attn, st->n_kept);
    if (ps != PB_OK) return say(s, "record %llu: observe: %s", r->index, pb_status_str(ps));
    st->kept[st->n_kept++] = q;
    st->last = q;
    if (st->n_kept > ly->peak) ly->peak = st->n_kept;
    return stream_evict(s, st);
}

/* One pass over the file feeding the records of one kind: the prefill
 * records first, then the decode rows, so a stream's prompt is compressed
 * before its decode rows wherever its prefill record lies in the file. */
static int replay_pass(rp_state *s, uint32_t kind) {
    pb_tr_reader *r = NULL;
    if (pb_tr_reader_open_file(s->o->t.path, &r, s->err, s->err_len) != 0)
        return -1;
    const size_t groups = (size_t)s->shape.group_size + 1u;
    pb_tr_record rec;
    const float *v;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, s->err, s->err_len)) == 1) {
        if (rec.kind != kind) continue;
        const size_t g = rec.qhead == PB_TR_GROUP_REDUCED ? s->shape.group_size
                                                         : rec.qhead;
        stream *st = &s->streams[((size_t)rec.layer * s->shape.num_kv_heads +
                                  rec.head) * groups + g];
        if (st->kv == NULL && stream_open(s, st, rec.layer) != 0) got = -1;
        else if (rec.kind == PB_TR_PREFILL) got = on_prefill(s, st, &rec, v);
        else got = on_decode(s, st, &rec, rec.query, v, 1);
        if (got < 0) break;
    }
    pb_tr_reader_close(r);
    return got < 0 ? -1 : 0;
}

static int replay(rp_state *s, const pb_cli_scan *scan) {
    if (scan->prefill > 0u && replay_pass(s, PB_TR_PREFILL) != 0) return -1;
    return replay_pass(s, PB_TR_DECODE);
}

static void report(const rp_state *s, uint64_t share_total,
                   uint64_t held_total, uint32_t used_budget) {
    const rp_opts *o = s->o;
    const uint32_t L = s->shape.num_layers;
    double mass = 0.0;
    uint32_t measured = 0;
    uint64_t hits = 0, slots = 0, ev = 0, peak = 0, steps = 0;
    for (uint32_t l = 0; l < L; ++l) {
        const rp_layer *ly = &s->layers[l];
        hits += ly->hits;
        slots += ly->hit_slots;
        ev += ly->evictions;
        peak += ly->peak;
        steps += ly->steps;
        if (ly->steps == 0u) continue;
        mass += ly->retained_sum / (double)ly->steps;
        measured += 1u;
    }
    mass = measured ? pb_wl_round6(mass / measured) : 0.0;
    const double recall = slots ? pb_wl_round6((double)hits / (double)slots) : 0.0;
    if (o->t.json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "trace", o->t.path);
        cJSON_AddStringToObject(doc, "policy", pb_cli_policy_name(&o->pol));
        cJSON_AddStringToObject(doc, "schedule", o->sched.name);
        cJSON_AddNumberToObject(doc, "budget", o->budget);
        cJSON_AddNumberToObject(doc, "scheduleBudget", used_budget);
        cJSON_AddNumberToObject(doc, "layers", L);
        cJSON_AddNumberToObject(doc, "decodeRows", (double)steps);
        cJSON_AddNumberToObject(doc, "retainedAttentionMass", mass);
        cJSON_AddNumberToObject(doc, "heavyHitterRecall", recall);
        cJSON_AddNumberToObject(doc, "evictionCalls", (double)ev);
        cJSON_AddNumberToObject(doc, "shareTotal", (double)share_total);
        cJSON_AddNumberToObject(doc, "heldTotal", (double)held_total);
        cJSON_AddNumberToObject(doc, "peakHeldSum", (double)peak);
        cJSON *arr = cJSON_AddArrayToObject(doc, "perLayer");
        for (uint32_t l = 0; l < L; ++l) {
            const rp_layer *ly = &s->layers[l];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "layer", l);
            cJSON_AddNumberToObject(e, "share", ly->share);
            cJSON_AddNumberToObject(e, "rows", (double)ly->steps);
            if (ly->steps) {
                cJSON_AddNumberToObject(e, "mass", pb_wl_round6(ly->retained_sum / (double)ly->steps));
                cJSON_AddNumberToObject(e, "recall", pb_wl_round6((double)ly->hits / (double)ly->hit_slots));
            }
            cJSON_AddNumberToObject(e, "evictionCalls", (double)ly->evictions);
            cJSON_AddItemToArray(arr, e);
        }
        char *text = cJSON_Print(doc);
        cJSON_Delete(doc);
        if (text != NULL) printf("%s\n", text);
        cJSON_free(text);
        return;
    }
    printf("replay %s: %u layers, %u KV heads, group %u; %llu decode rows\n",
           o->t.path, L, s->shape.num_kv_heads, s->shape.group_size,
           (unsigned long long)steps);
    printf("%-10s %-14s %7s %10s %9s %9s %10s %10s\n", "policy", "schedule",
           "budget", "shares", "mass", "recall", "evictions", "peak held");
    printf("%-10s %-14s %7u %10llu %9.6f %9.6f %10llu %10llu\n",
           pb_cli_policy_name(&o->pol),
           o->sched.name, o->budget, (unsigned long long)share_total, mass,
           recall, (unsigned long long)ev, (unsigned long long)peak);
    if (held_total != share_total)
        printf("(each layer holds at least --recent + 1 = %u: %llu positions "
               "held)\n", o->recent + 1u, (unsigned long long)held_total);
    if (used_budget != o->budget)
        printf("(%s's held total at %u exceeds %u x %u: it ran at budget %u, "
               "the largest that fits)\n", o->sched.name, o->budget, L,
               o->budget > o->recent ? o->budget : o->recent + 1u,
               used_budget);
    if (!o->t.per_layer) return;
    printf("\n%5s %8s %8s %9s %9s %10s %8s\n", "layer", "share", "rows", "mass",
           "recall", "evictions", "peak");
    for (uint32_t l = 0; l < L; ++l) {
        const rp_layer *ly = &s->layers[l];
        if (ly->steps == 0u) {
            printf("%5u %8u %8s %9s %9s %10llu %8llu\n", l, ly->share, "0", "-",
                   "-", (unsigned long long)ly->evictions,
                   (unsigned long long)ly->peak);
            continue;
        }
        printf("%5u %8u %8llu %9.6f %9.6f %10llu %8llu\n", l, ly->share,
               (unsigned long long)ly->steps,
               pb_wl_round6(ly->retained_sum / (double)ly->steps),
               pb_wl_round6((double)ly->hits / (double)ly->hit_slots),
               (unsigned long long)ly->evictions, (unsigned long long)ly->peak);
    }
}

int pb_cli_replay(int argc, char **argv) {
    rp_opts o;
    const int prc = parse(argc, argv, &o);
    if (prc == 1) return 0;
    if (prc != 0) return prc;
    char err[320];
    pb_cli_scan scan;
    if (pb_cli_scan_trace(o.t.path, &scan, err, sizeof err) != 0)
        return pb_cli_trace_error("replay", o.t.path, err);
    const uint32_t L = scan.shape.num_layers;
    const uint64_t n_streams = (uint64_t)L * scan.shape.num_kv_heads *
                               ((uint64_t)scan.shape.group_size + 1u);
    if (n_streams > MAX_STREAMS)
        return pb_cli_trace_error("replay", o.t.path,
                                  "too many (layer, head) streams for replay");
    rp_state s;
    memset(&s, 0, sizeof s);
    s.o = &o;
    s.shape = scan.shape;
    s.max_prompt = scan.max_prompt;
    s.err = err;
    s.err_len = sizeof err;
    s.streams = (stream *)calloc((size_t)n_streams, sizeof *s.streams);
    s.n_streams = (size_t)n_streams;
    s.layers = (rp_layer *)calloc(L, sizeof *s.layers);
    uint32_t *weights = (uint32_t *)calloc(L, sizeof *weights);
    uint32_t *shares = (uint32_t *)calloc(L, sizeof *shares);
    s.victims_cap = (size_t)scan.max_len + 2u;
    s.victims = (uint32_t *)malloc(s.victims_cap * sizeof(uint32_t));
    s.attn = (float *)malloc(((size_t)scan.max_len + 2u) * sizeof(float));
    int rc = 0;
    if (s.streams == NULL || s.layers == NULL || weights == NULL ||
        shares == NULL || s.victims == NULL || s.attn == NULL) {
        snprintf(err, sizeof err, "out of memory");
        rc = 1;
    }
    if (rc == 0 && o.sched.kind == PB_SCHEDULE_PROFILE) {
        pb_profile *prof = NULL;
        if (pb_cli_profile_trace(o.t.path, &scan, &prof, err, sizeof err) != 0) {
            rc = 2;
        } else {
            const pb_status st = pb_profile_weights(
                prof, 900000u, o.recent + 1u, weights, L);
            if (st != PB_OK) {
                snprintf(err, sizeof err, "profile schedule: %s", pb_status_str(st));
                rc = 1;
            }
            pb_profile_destroy(prof);
        }
    }
    uint64_t share_total = 0, held_total = 0;
    /* kvfactory's window: the prefill records' rows (8 without any); every
     * layer holds at least --recent + 1 (the instance's effective share). */
    uint32_t used_budget = o.budget;
    const pb_cli_sched_ctx ctx = {o.budget, L,
                                  scan.max_window ? scan.max_window : 8u,
                                  scan.max_prompt, weights, o.recent + 1u,
                                  o.recent + 1u, NULL};
    if (rc == 0 &&
        pb_cli_sched_shares(&o.sched, &ctx, shares, &share_total, &held_total,
                            &used_budget, err, sizeof err) != 0)
        rc = 2; /* the schedule refuses these values */
    for (uint32_t l = 0; rc == 0 && l < L; ++l) s.layers[l].share = shares[l];
    if (rc == 0 && scan.decode == 0u) {
        snprintf(err, sizeof err, "no decode row: replay feeds decode rows");
        rc = 2;
    }
    if (rc == 0 && replay(&s, &scan) != 0) rc = 2;
    if (rc == 0) report(&s, share_total, held_total, used_budget);
    else if (rc == 2) (void)pb_cli_trace_error("replay", o.t.path, err);
    else fprintf(stderr, "pyramidkv replay: %s\n", err);
    for (size_t i = 0; s.streams != NULL && i < s.n_streams; ++i) {
        pb_kvcache_destroy(s.streams[i].kv);
        free(s.streams[i].kept);
    }
    free(s.streams);
    free(s.layers);
    free(weights);
    free(shares);
    free(s.victims);
    free(s.attn);
    return rc;
}
