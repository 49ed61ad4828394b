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
 * Owns the flags and the run loop over traces; the output is
 * cli_bench_output.c's, the traces, metrics and harness are the workload
 * library's, the policy choice (--policy, --scorer, --sinks) is
 * cli_bench_policy.c's.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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
        "                 taper, curve, geometric, profile, cake (`pyramidkv plan\n"
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
    while ((rc = pb_cli_walk_flag(&w, help)) == 1) {
        const char *f = w.flag, *v = NULL;
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
    if (rc != 0) return rc == PB_CLI_WALK_HELP ? 1 : PB_CLI_USAGE;

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


int pb_cli_bench(int argc, char **argv) {
    bench_opts o;
    const int prc = parse(argc, argv, &o); /* 1: --help printed */
    if (prc != 0) return prc == 1 ? 0 : prc;

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
            rc = pb_cli_bench_print_json(&o, runs, o.n_traces);
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
            pb_cli_bench_print_table(&o, runs, o.n_traces);
            pb_cli_bench_print_reading(&o, runs, o.n_traces);
            if (o.per_layer) pb_cli_bench_print_per_layer(&o, runs, o.n_traces);
            printf("\n(%.1f s)\n", elapsed);
        }
    }
    for (size_t i = 0; i < done; ++i) free_trace(&runs[i]);
    free(runs);
    return rc;
}
