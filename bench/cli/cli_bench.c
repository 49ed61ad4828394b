/*
 * cli_bench.c - `pyramidkv bench`: runs libpyramidkv's policies over the
 * decode-4096 trace or the layered workload (bench/workload) and prints the
 * comparison of pyramid ratios at equal total memory, as a table, per layer
 * or as JSON. With no options it is the project's main job: funnel, flat
 * and inverted, 32 layers, budget 512, ratios 1, 2, 4, 8. With --schedule
 * it compares schedules of the allocation family instead of ratios (each
 * layer's instance given its schedule share; cli_bench_schedule.c) and
 * prints every schedule's real total.
 *
 * Owns the flags, the run loop over traces and the output; the traces,
 * metrics and harness are the workload library's, the policy choice
 * (--policy, --scorer, --sinks) is cli_bench_policy.c's.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"
#include "cli_bench_policy.h"
#include "cli_commands.h"
#include "cli_options.h"
#include "pyramidkv/pyramidkv.h"
#include "workload_harness.h"
#include "workload_metrics.h"

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv bench [--trace T[,T...]] [--layers L] [--budget B[,B...]]\n"
        "                       [--ratio R[,R...]] [--recent N] [--obs N] [--kernel N]\n"
        "                       [--policy P | --scorer S] [--sinks N]\n"
        "                       [--per-layer] [--json]\n"
        "       pyramidkv bench --schedule S[,S...] [schedule options] [the options\n"
        "                       above, --ratio with one value]\n"
        "\n"
        "Measures PyramidKV against uniform budgets (ratio 1, SnapKV everywhere) at\n"
        "equal total memory, or the pyramid over any other policy or scorer\n"
        "(--policy, --scorer): one policy per layer, all layers in lockstep over 4,095\n"
        "decode steps, layer l evicted down to its share whenever it holds more.\n"
        "Reports retained attention mass and heavy-hitter recall (top 32), averaged\n"
        "over layers, eviction calls, the sum of shares and the peak positions held.\n"
        "The traces are defined in docs/traces.md.\n"
        "\n"
        "With no options: funnel, flat and inverted, 32 layers, budget 512, ratios\n"
        "1,2,4,8; one table, best first within each trace, and a one-line reading.\n"
        "\n"
        "options:\n"
        "  --trace T      decode-4096, funnel, flat or inverted, or a comma list\n"
        "                 [funnel,flat,inverted]; decode-4096 is the policybook\n"
        "                 registry's single-layer trace (always 1 layer)\n"
        "  --layers L     layers of the layered traces, 1 .. %u [32]\n"
        "  --budget B     average positions per layer, %u values at most, each\n"
        "                 greater than --recent and at most %u [512]\n"
        "  --ratio R      pyramid ratios (first layer's share over the last's),\n"
        "                 1 .. %u [1,2,4,8; 1 for a single-layer trace]\n"
        "  --recent N     newest positions never evicted, 0 .. 4095 [32]\n"
        "  --obs N        observation window in decode steps, 1 .. 4096 [16]\n"
        "  --kernel N     pooling width, odd, 1 .. 4095 [7]\n"
        "%s"
        "  --per-layer    also print every layer: entropy, share, mass, recall\n"
        "  --schedule S   compare schedules instead of ratios, at the same budget:\n"
        "                 arithmetic, uniform, kvfactory, kvfactory-balanced,\n"
        "                 taper, curve, geometric, profile (`pyramidkv plan\n"
        "                 --help`). Each layer's instance gets its share from the\n"
        "                 schedule; the shares column is each schedule's real total\n"
        "                 and \"vs LxB\" what it spends beyond layers x budget (the\n"
        "                 paper's code, kvfactory, spends more at small budgets).\n"
        "                 Schedule options as plan's: --ratio R (one value, [4]),\n"
        "                 --window, --beta, --prompt-len, --gamma, --weights (one\n"
        "                 per layer), --min-share; taper's n_sink is --sinks [4]\n"
        "  --json         print one JSON document instead of tables:\n"
        "                 {\"trace\", \"layers\", \"policy\", (\"sinks\",)\n"
        "                 \"results\": [{\"budget\", \"ratio\",\n"
        "                 \"retainedAttentionMass\", \"heavyHitterRecall\",\n"
        "                 \"evictionCalls\", \"peakHeld\", \"perLayer\": [...]}]}; with\n"
        "                 several traces, a JSON array of such documents\n"
        "  --help         this text\n"
        "\n"
        "Example: pyramidkv bench --schedule uniform,arithmetic,kvfactory,taper\n"
        "         --budget 128 --trace funnel\n"
        "\n"
        "Progress goes to stderr when it is a terminal and the run exceeds a second.\n",
        PB_WL_MAX_LAYERS, MAX_LIST, MAX_BUDGET, MAX_RATIO, pb_cli_policy_help);
    pb_cli_help_common(out);
}

static int parse_traces(const char *text, bench_opts *o) {
    char buf[128];
    if (strlen(text) >= sizeof buf)
        return pb_cli_usage_error("bench", "--trace: '%.40s...' is too long",
                                  text);
    strcpy(buf, text);
    o->n_traces = 0;
    for (char *item = buf;;) {
        char *comma = strchr(item, ',');
        if (comma != NULL) *comma = '\0';
        pb_wl_profile p;
        if (pb_wl_profile_parse(item, &p) != 0)
            return pb_cli_usage_error(
                "bench",
                "--trace: '%s' is not decode-4096, funnel, flat or inverted",
                item);
        for (size_t i = 0; i < o->n_traces; ++i)
            if (o->traces[i] == p)
                return pb_cli_usage_error("bench", "--trace: '%s' given twice",
                                          item);
        o->traces[o->n_traces++] = p;
        if (comma == NULL) break;
        item = comma + 1;
    }
    return 0;
}

static int check_memory(const bench_opts *o) {
    if (o->schedule_mode) return pb_cli_bench_check_memory_schedules(o);
    uint64_t bytes = 0;
    for (size_t t = 0; t < o->n_traces; ++t) {
        const uint32_t layers =
            o->traces[t] == PB_WL_DECODE4096 ? 1u : o->layers;
        for (size_t b = 0; b < o->n_budgets; ++b)
            for (size_t r = 0; r < o->n_ratios; ++r)
                for (uint32_t l = 0; l < layers; ++l) {
                    size_t size = 0;
                    if (pb_cli_policy_layer_bytes(
                            &o->pol, o->budgets[b], o->ratios[r], l, layers,
                            o->recent, o->obs, o->kernel, &size) != PB_OK)
                        return pb_cli_usage_error(
                            "bench", "--budget/--ratio: the library refuses "
                            "budget %u ratio %u for policy %s", o->budgets[b],
                            o->ratios[r], pb_cli_policy_name(&o->pol));
                    bytes += (uint64_t)size + 5u * (uint64_t)PB_WL_POSITIONS;
                }
        /* Only one trace's instances are alive at a time. */
        if (bytes > (uint64_t)MAX_RUN_MIB << 20)
            return pb_cli_usage_error(
                "bench", "--layers/--budget/--ratio: this run would hold %llu "
                "MiB of policies at once (at most %u); ask for fewer",
                (unsigned long long)(bytes >> 20), MAX_RUN_MIB);
        bytes = 0;
    }
    return 0;
}

/* Returns 0 to run, 1 after --help, or PB_CLI_USAGE. */
static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->traces[0] = PB_WL_FUNNEL;
    o->traces[1] = PB_WL_FLAT;
    o->traces[2] = PB_WL_INVERTED;
    o->n_traces = 3;
    o->layers = PB_CLI_DEFAULT_LAYERS;
    o->budgets[0] = PB_CLI_DEFAULT_BUDGET;
    o->n_budgets = 1;
    const uint32_t ratios[] = {1, 2, 4, 8};
    memcpy(o->ratios, ratios, sizeof ratios);
    o->n_ratios = 4;
    o->recent = PB_CLI_DEFAULT_RECENT;
    o->obs = PB_CLI_DEFAULT_OBS;
    o->kernel = PB_CLI_DEFAULT_KERNEL;
    pb_cli_policy_init(&o->pol, "bench");

    pb_cli_walk w;
    pb_cli_walk_init(&w, "bench", argc, argv);
    int rc;
    while ((rc = pb_cli_walk_next(&w)) == 1) {
        const char *f = w.flag, *v = NULL;
        if (strcmp(f, "--help") == 0) {
            help(stdout);
            return 1;
        }
        if (strcmp(f, "--per-layer") == 0 || strcmp(f, "--json") == 0) {
            if (pb_cli_walk_no_value(&w) != 0) return PB_CLI_USAGE;
            if (f[2] == 'p')
                o->per_layer = 1;
            else
                o->json = 1;
            continue;
        }
        if (strcmp(f, "--ratio") == 0) {
            o->sched.ratio = "given"; /* checked against the kinds below */
        } else if (strcmp(f, "--sinks") != 0) { /* --sinks is the policy's */
            const int sf = pb_cli_schedule_flag(&w, &o->sched);
            if (sf == 1) continue;
            if (sf != 0) return PB_CLI_USAGE;
        }
        if (strcmp(f, "--trace") != 0 && strcmp(f, "--layers") != 0 &&
            strcmp(f, "--budget") != 0 && strcmp(f, "--ratio") != 0 &&
            strcmp(f, "--recent") != 0 && strcmp(f, "--obs") != 0 &&
            strcmp(f, "--kernel") != 0 && strcmp(f, "--policy") != 0 &&
            strcmp(f, "--scorer") != 0 && strcmp(f, "--sinks") != 0)
            return pb_cli_usage_error("bench",
                                      "unknown option '%s' (see pyramidkv "
                                      "bench --help)", f);
        if (pb_cli_walk_value(&w, &v) != 0) return PB_CLI_USAGE;
        if (strcmp(f, "--trace") == 0)
            rc = parse_traces(v, o);
        else if (strcmp(f, "--layers") == 0) {
            rc = pb_cli_parse_u32("bench", f, v, 1, PB_WL_MAX_LAYERS,
                                  &o->layers);
            o->layers_set = 1;
        } else if (strcmp(f, "--budget") == 0)
            rc = pb_cli_parse_u32_list("bench", f, v, 1, MAX_BUDGET,
                                       o->budgets, MAX_LIST, &o->n_budgets);
        else if (strcmp(f, "--ratio") == 0)
        {
            rc = pb_cli_parse_u32_list("bench", f, v, 1, MAX_RATIO, o->ratios,
                                       MAX_LIST, &o->n_ratios);
            o->ratios_set = 1;
        }
        else if (strcmp(f, "--policy") == 0 || strcmp(f, "--scorer") == 0)
            rc = pb_cli_policy_parse(&o->pol, f, v);
        else if (strcmp(f, "--sinks") == 0) {
            rc = pb_cli_parse_u32("bench", f, v, 0, 4095, &o->pol.sinks);
            o->pol.sinks_set = 1;
        } else if (strcmp(f, "--recent") == 0) {
            rc = pb_cli_parse_u32("bench", f, v, 0, 4095, &o->recent);
            o->pol.recent_set = 1;
        } else if (strcmp(f, "--obs") == 0) {
            rc = pb_cli_parse_u32("bench", f, v, 1, 4096, &o->obs);
            o->pol.obs_set = 1;
        } else {
            rc = pb_cli_parse_u32("bench", f, v, 1, 4095, &o->kernel);
            o->pol.kernel_set = 1;
        }
        if (rc != 0) return PB_CLI_USAGE;
    }
    if (rc != 0) return PB_CLI_USAGE;

    if (o->kernel % 2u == 0u)
        return pb_cli_usage_error("bench", "--kernel: %u is not odd",
                                  o->kernel);
    if (pb_cli_policy_check(&o->pol, o->budgets, o->n_budgets, o->recent) !=
        0)
        return PB_CLI_USAGE;
    if (pb_cli_bench_schedule_setup(o) != 0) return PB_CLI_USAGE;
    for (size_t i = 0; i < o->n_traces; ++i)
        if (o->traces[i] == PB_WL_DECODE4096 && o->layers_set &&
            o->layers != 1u)
            return pb_cli_usage_error("bench",
                                      "--layers: the decode-4096 trace has "
                                      "exactly 1 layer (use --trace flat for "
                                      "more)");
    return check_memory(o);
}

/* Progress on stderr: only on a terminal, only once a run passed 1 s. */
typedef struct progress {
    int tty;
    int shown;
    double start, last;
    const char *label;
    size_t index, count; /* trace being run (1-based) of count */
} progress;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void on_progress(void *ctx, uint32_t t, uint32_t steps) {
    progress *pr = ctx;
    if (!pr->tty || (t % 64u != 0u && t != steps)) return;
    const double now = now_s();
    if (now - pr->start < 1.0 || (now - pr->last < 0.2 && t != steps)) return;
    pr->last = now;
    pr->shown = 1;
    fprintf(stderr, "\rpyramidkv bench: %s (%zu/%zu) %3u%%   ", pr->label,
            pr->index, pr->count, (unsigned)((uint64_t)t * 100u / steps));
    fflush(stderr);
}

static int run_trace(const bench_opts *o, pb_wl_profile profile,
                     trace_run *tr, progress *pr) {
    memset(tr, 0, sizeof *tr);
    tr->profile = profile;
    tr->layers = profile == PB_WL_DECODE4096 ? 1u : o->layers;
    /* With one layer every ratio gives the same share, so unless ratios
     * were asked for, a single-layer trace runs ratio 1 only. */
    const size_t n_ratios =
        tr->layers == 1u && !o->ratios_set ? 1u : o->n_ratios;
    if (o->schedule_mode) {
        const int rc = pb_cli_bench_schedule_configs(o, tr);
        if (rc != 0) return rc;
    } else {
        for (size_t b = 0; b < o->n_budgets; ++b)
            for (size_t r = 0; r < n_ratios; ++r) {
                tr->configs[tr->n].budget = o->budgets[b];
                tr->configs[tr->n].ratio = o->ratios[r];
                tr->n++;
            }
    }
    tr->info = calloc(tr->layers, sizeof *tr->info);
    if (tr->info == NULL) {
        fprintf(stderr, "pyramidkv bench: out of memory\n");
        return 1;
    }
    pb_wl_run_params p;
    memset(&p, 0, sizeof p);
    p.profile = profile;
    p.layers = tr->layers;
    p.positions = PB_WL_POSITIONS;
    p.recent_window = o->recent;
    p.obs_window = o->obs;
    p.pool_kernel = o->kernel;
    pb_cli_policy_apply(&o->pol, &p);
    p.kept_count = pb_kvcache_kept_count;
    p.configs = tr->configs;
    p.n_configs = tr->n;
    p.progress = on_progress;
    p.progress_ctx = pr;
    if (o->schedule_mode) p.shares = (const uint32_t *const *)tr->shares;
    tr->sinks = p.sinks;
    pr->label = pb_wl_profile_name(profile);
    char err[256];
    if (pb_wl_run(&p, tr->results, tr->info, err, sizeof err) != 0) {
        if (pr->shown) fputc('\n', stderr);
        fprintf(stderr, "pyramidkv bench: %s: %s\n", pr->label, err);
        free(tr->info);
        tr->info = NULL;
        for (size_t i = 0; i < tr->n; ++i) free(tr->shares[i]);
        tr->n = 0;
        return 1;
    }
    return 0;
}

static void free_trace(trace_run *tr) {
    pb_wl_result_free(tr->results, tr->n);
    for (size_t i = 0; i < tr->n; ++i) free(tr->shares[i]);
    free(tr->info);
    tr->info = NULL;
}

/* ----------------------------------------------------------------- JSON */

static cJSON *trace_json(const bench_opts *bo, const trace_run *tr) {
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "trace", pb_wl_profile_name(tr->profile));
    cJSON_AddNumberToObject(doc, "layers", tr->layers);
    cJSON_AddStringToObject(doc, "policy", pb_cli_policy_name(&bo->pol));
    if (bo->pol.policy < 0 || strcmp(pb_cli_policy_name(&bo->pol),
                                     "streaming-llm") == 0)
        cJSON_AddNumberToObject(doc, "sinks", tr->sinks);
    cJSON *results = cJSON_AddArrayToObject(doc, "results");
    for (size_t i = 0; i < tr->n; ++i) {
        const pb_wl_result *r = &tr->results[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "budget", r->config.budget);
        if (tr->shares[i] != NULL)
            cJSON_AddStringToObject(o, "schedule",
                                    pb_schedule_kind_name(tr->kinds[i]));
        cJSON_AddNumberToObject(o, "ratio", r->config.ratio);
        if (tr->shares[i] != NULL)
            cJSON_AddNumberToObject(o, "shareTotal", (double)r->share_total);
        cJSON_AddNumberToObject(o, "retainedAttentionMass", r->mass);
        cJSON_AddNumberToObject(o, "heavyHitterRecall", r->recall);
        cJSON_AddNumberToObject(o, "evictionCalls", (double)r->evictions);
        cJSON_AddNumberToObject(o, "peakHeld", (double)r->peak_held);
        cJSON *layers = cJSON_AddArrayToObject(o, "perLayer");
        for (uint32_t l = 0; l < tr->layers; ++l) {
            const pb_wl_layer_stats *ls = &r->layers[l];
            cJSON *lj = cJSON_CreateObject();
            cJSON_AddNumberToObject(lj, "layer", l);
            cJSON_AddNumberToObject(lj, "share", ls->share);
            cJSON_AddNumberToObject(lj, "effectiveShare", ls->effective);
            cJSON_AddNumberToObject(lj, "retainedAttentionMass", ls->mass);
            cJSON_AddNumberToObject(lj, "heavyHitterRecall", ls->recall);
            cJSON_AddNumberToObject(lj, "evictionCalls",
                                    (double)ls->evictions);
            cJSON_AddNumberToObject(lj, "peakHeld", ls->peak_held);
            cJSON_AddNumberToObject(lj, "entropy",
                                    pb_wl_round6(tr->info[l].entropy));
            cJSON_AddItemToArray(layers, lj);
        }
        cJSON_AddItemToArray(results, o);
    }
    return doc;
}

static int print_json(const bench_opts *o, const trace_run *runs, size_t n) {
    cJSON *top = n == 1 ? trace_json(o, &runs[0]) : cJSON_CreateArray();
    if (n != 1)
        for (size_t i = 0; i < n; ++i)
            cJSON_AddItemToArray(top, trace_json(o, &runs[i]));
    char *text = cJSON_Print(top);
    cJSON_Delete(top);
    if (text == NULL) {
        fprintf(stderr, "pyramidkv bench: out of memory\n");
        return 1;
    }
    puts(text);
    cJSON_free(text);
    return 0;
}

/* ---------------------------------------------------------------- tables */

/* Configuration i is uniform: ratio 1, or the uniform schedule. */
static int is_uniform(const trace_run *tr, size_t i) {
    if (tr->shares[i] != NULL) return tr->kinds[i] == PB_SCHEDULE_UNIFORM;
    return tr->results[i].config.ratio == 1u;
}

const pb_wl_result *pb_cli_bench_uniform_of(const trace_run *tr,
                                            uint32_t budget) {
    for (size_t i = 0; i < tr->n; ++i)
        if (tr->results[i].config.budget == budget && is_uniform(tr, i))
            return &tr->results[i];
    return NULL;
}

void pb_cli_bench_label(const trace_run *tr, size_t i, char *buf, size_t len) {
    if (tr->shares[i] != NULL)
        snprintf(buf, len, "%s", pb_schedule_kind_name(tr->kinds[i]));
    else
        snprintf(buf, len, "%u", tr->results[i].config.ratio);
}

/* Best first: more retained mass, then more recall, then the lower ratio. */
static int better(const pb_wl_result *a, const pb_wl_result *b) {
    if (a->mass != b->mass) return a->mass > b->mass;
    if (a->recall != b->recall) return a->recall > b->recall;
    return a->config.ratio < b->config.ratio;
}

size_t pb_cli_bench_ranked(const trace_run *tr, uint32_t budget, size_t *idx) {
    size_t n = 0;
    for (size_t i = 0; i < tr->n; ++i) {
        if (tr->results[i].config.budget != budget) continue;
        size_t j = n++;
        while (j > 0 && better(&tr->results[i], &tr->results[idx[j - 1]])) {
            idx[j] = idx[j - 1];
            --j;
        }
        idx[j] = i;
    }
    return n;
}

void pb_cli_bench_delta(double v, const pb_wl_result *u, double uv) {
    if (u == NULL)
        printf("  %9s", "-");
    else
        printf("  %+9.6f", v - uv);
}

static void print_table(const bench_opts *o, const trace_run *runs,
                        size_t n_runs) {
    int floors = 0;
    if (o->schedule_mode) {
        floors = pb_cli_bench_schedule_table(o, runs, n_runs);
        goto notes;
    }
    printf("%-11s %6s %5s %7s  %8s  %9s  %8s  %9s  %9s  %9s\n", "trace",
           "budget", "ratio", "shares", "mass", "vs r=1", "recall", "vs r=1",
           "evictions", "peak held");
    for (size_t t = 0; t < n_runs; ++t) {
        const trace_run *tr = &runs[t];
        for (size_t b = 0; b < o->n_budgets; ++b) {
            size_t idx[MAX_LIST];
            const size_t n = pb_cli_bench_ranked(tr, o->budgets[b], idx);
            const pb_wl_result *u = pb_cli_bench_uniform_of(tr, o->budgets[b]);
            for (size_t k = 0; k < n; ++k) {
                const pb_wl_result *r = &tr->results[idx[k]];
                const char mark = r->floors_binding ? '*' : ' ';
                floors |= r->floors_binding != 0u;
                printf("%-11s %6u %5u %6llu%c  %8.6f", pb_wl_profile_name(tr->profile),
                       r->config.budget, r->config.ratio,
                       (unsigned long long)r->share_total, mark, r->mass);
                pb_cli_bench_delta(r->mass, u, u ? u->mass : 0.0);
                printf("  %8.6f", r->recall);
                pb_cli_bench_delta(r->recall, u, u ? u->recall : 0.0);
                printf("  %9llu  %9llu\n", (unsigned long long)r->evictions,
                       (unsigned long long)r->peak_held);
            }
            if (t + 1 < n_runs || b + 1 < o->n_budgets) printf("\n");
        }
    }
notes:
    if (floors) {
        printf("\n* some layers' shares are below the least policy %s keeps "
               "(%u); it keeps at least that there (its effective share):\n",
               pb_cli_policy_name(&o->pol),
               pb_cli_policy_floor(&o->pol, o->recent));
        for (size_t t = 0; t < n_runs; ++t)
            for (size_t i = 0; i < runs[t].n; ++i) {
                const pb_wl_result *r = &runs[t].results[i];
                if (r->floors_binding == 0u) continue;
                char label[32];
                pb_cli_bench_label(&runs[t], i, label, sizeof label);
                printf("  %s budget %u %s %s: %u layer%s at the floor; "
                       "sum of shares %llu, of effective shares %llu "
                       "(layers x budget = %llu)\n",
                       pb_wl_profile_name(runs[t].profile), r->config.budget,
                       o->schedule_mode ? "schedule" : "ratio", label,
                       r->floors_binding,
                       r->floors_binding == 1u ? "" : "s",
                       (unsigned long long)r->share_total,
                       (unsigned long long)r->effective_total,
                       (unsigned long long)runs[t].layers * r->config.budget);
            }
    }
}

/* One line: per trace and budget, which ratio kept the most mass and what
 * it did to mass and recall against uniform. */
static void print_reading(const bench_opts *o, const trace_run *runs,
                          size_t n_runs) {
    if (o->schedule_mode) {
        pb_cli_bench_schedule_reading(o, runs, n_runs);
        return;
    }
    printf("\nreading (equal total memory):");
    const char *sep = " ";
    for (size_t t = 0; t < n_runs; ++t) {
        const trace_run *tr = &runs[t];
        for (size_t b = 0; b < o->n_budgets; ++b) {
            size_t idx[MAX_LIST];
            const size_t n = pb_cli_bench_ranked(tr, o->budgets[b], idx);
            const pb_wl_result *best = &tr->results[idx[0]];
            const pb_wl_result *worst = &tr->results[idx[n - 1]];
            const pb_wl_result *u = pb_cli_bench_uniform_of(tr, o->budgets[b]);
            printf("%s%s", sep, pb_wl_profile_name(tr->profile));
            if (o->n_budgets > 1) printf(" B=%u", o->budgets[b]);
            if (u == NULL || n == 1)
                printf(" best ratio %u (mass %.4f)", best->config.ratio,
                       best->mass);
            else if (best->config.ratio != 1u)
                printf(" pyramid wins, ratio %u %+.4f mass %+.4f recall",
                       best->config.ratio, best->mass - u->mass,
                       best->recall - u->recall);
            else
                printf(" uniform wins, ratio %u %+.4f mass %+.4f recall",
                       worst->config.ratio, worst->mass - u->mass,
                       worst->recall - u->recall);
            sep = "; ";
        }
    }
    printf(".\n");
}

static void print_per_layer(const bench_opts *o, const trace_run *runs,
                            size_t n_runs) {
    for (size_t t = 0; t < n_runs; ++t) {
        const trace_run *tr = &runs[t];
        for (size_t b = 0; b < o->n_budgets; ++b) {
            printf("\n%s, budget %u, per layer (entropy in nats; share / "
                   "mass / recall per ratio):\n",
                   pb_wl_profile_name(tr->profile), o->budgets[b]);
            printf("%5s %7s", "layer", "entropy");
            for (size_t i = 0; i < tr->n; ++i) {
                if (tr->results[i].config.budget != o->budgets[b]) continue;
                char label[32];
                pb_cli_bench_label(tr, i, label, sizeof label);
                if (o->schedule_mode)
                    printf(" | %-6.6s %5s %8s %8s", label, "share", "mass",
                           "recall");
                else
                    printf(" | r=%-4s %5s %8s %8s", label, "share", "mass",
                           "recall");
            }
            printf("\n");
            for (uint32_t l = 0; l < tr->layers; ++l) {
                printf("%5u %7.4f", l, tr->info[l].entropy);
                for (size_t i = 0; i < tr->n; ++i) {
                    const pb_wl_result *r = &tr->results[i];
                    if (r->config.budget != o->budgets[b]) continue;
                    const pb_wl_layer_stats *ls = &r->layers[l];
                    printf(" | %6s %5u %8.6f %8.6f", "", ls->share, ls->mass,
                           ls->recall);
                }
                printf("\n");
            }
        }
    }
}

int pb_cli_bench(int argc, char **argv) {
    bench_opts o;
    const int prc = parse(argc, argv, &o);
    if (prc == 1) return 0;
    if (prc != 0) return prc;

    progress pr;
    memset(&pr, 0, sizeof pr);
    pr.tty = isatty(fileno(stderr));
    pr.start = now_s();
    trace_run *runs = calloc(o.n_traces, sizeof *runs);
    if (runs == NULL) {
        fprintf(stderr, "pyramidkv bench: out of memory\n");
        return 1;
    }
    int rc = 0;
    size_t done = 0;
    pr.count = o.n_traces;
    for (; done < o.n_traces && rc == 0; ++done) {
        pr.index = done + 1;
        rc = run_trace(&o, o.traces[done], &runs[done], &pr);
    }
    if (pr.shown) fprintf(stderr, "\r%50s\r", "");
    const double elapsed = now_s() - pr.start;

    if (rc == 0) {
        if (o.json) {
            rc = print_json(&o, runs, o.n_traces);
        } else {
            printf("pyramidkv bench: 4,095 decode steps; ");
            if (o.n_traces == 1 && o.traces[0] == PB_WL_DECODE4096)
                printf("1 layer");
            else
                printf("%u layers", o.layers);
            printf("; ");
            pb_cli_policy_describe(&o.pol, o.recent, o.obs, o.kernel);
            if (o.schedule_mode)
                printf("\nshares = each schedule's real total, vs LxB = "
                       "minus layers x budget; mass, recall = means over "
                       "layers; vs unif = minus the uniform schedule; best "
                       "first\n\n");
            else
                printf("\nshares = sum of the layers' shares (<= layers x "
                       "budget); mass, recall = means over layers; vs r=1 = "
                       "minus uniform; best first\n\n");
            print_table(&o, runs, o.n_traces);
            print_reading(&o, runs, o.n_traces);
            if (o.per_layer) print_per_layer(&o, runs, o.n_traces);
            printf("\n(%.1f s)\n", elapsed);
        }
    }
    for (size_t i = 0; i < done; ++i) free_trace(&runs[i]);
    free(runs);
    return rc;
}
