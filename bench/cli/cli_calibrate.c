/*
 * cli_calibrate.c - `pyramidkv calibrate TRACE`: the model's per-layer
 * attention profile from a trace file (entropy, support, k for 50/90/99 %
 * of the mass), the schedule derived from it, and, at the user's average
 * budget, every schedule under three head modes (per-head uniform,
 * head-adaptive, per-head shares) measured by running prefill compression
 * (the paper's selection) on the recorded window rows at equal held
 * positions: the window figures and, with future records, the peak loss
 * (docs/spec.md §18), best first, with a one-line recommendation.
 * --plot draws the entropy profile and the shares with gnuplot.
 *
 * Owns the flags, the profile and the output; the measuring pass is
 * cli_calibrate_measure.c's. Four passes over
 * the file (scan, profile, prep, compression); nothing is printed before the last
 * one has read the whole file, so a malformed trace gives one error line
 * and no output.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_calibrate.h"
#include "cli_commands.h"
#include "cli_options.h"
#include "cli_trace_common.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define MAX_SCHED 16u
#define MAX_ALLOC (3u * MAX_SCHED)

typedef struct cal_opts {
    pb_cli_trace_args t; /* TRACE, --json, --per-layer */
    const char *plot;
    uint32_t budget, fraction_ppm, floor_w, recent;
    double tau1, tau2;
    int have_budget, have_floor, have_recent, progress;
} cal_opts;

typedef struct cal_layer {
    uint64_t rows, records;
    double bits, support;
    uint32_t k50, k90, k99;
} cal_layer;

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv calibrate TRACE [--budget B] [--recent N] [--fraction F]\n"
        "                 [--floor N] [--tau1 X] [--tau2 X] [--progress on|off]\n"
        "                 [--per-layer] [--json] [--plot FILE.png]\n"
        "\n"
        "Ranks every allocation on a trace of a model's attention\n"
        "(docs/trace_format.md; bench/model/model_trace records the bench\n"
        "model, `pyramidkv trace --make` writes synthetic ones). Every figure\n"
        "is defined in docs/spec.md section 18; docs/calibrate.md shows how\n"
        "far its pick agrees with a model's measured accuracy.\n"
        "\n"
        "1. The profile, per layer: entropy, support, k50/k90/k99, and the\n"
        "   profile schedule's weights (k for --fraction, floored at --floor)\n"
        "   with the best-fitting arithmetic ratio.\n"
        "2. The rows: at average budget B per layer and recent window N (every\n"
        "   layer holds at least N + 1; equal held positions for every row),\n"
        "   uniform, arithmetic:2, :4, :8, kvfactory, kvfactory-balanced,\n"
        "   taper, curve:4, profile and cake (CAKE's preference from the trace,\n"
        "   temperatures --tau1, --tau2), each under three head modes: uniform\n"
        "   (every KV head the layer's share), adaptive (one pool per layer,\n"
        "   Ada-KV) and shares (per-head shares from the trace's per-head\n"
        "   profile).\n"
        "3. Each prompt of each layer compressed under each row (window rows\n"
        "   scoring, pooling 7, max); recall and mass of the window rows; with\n"
        "   future records (version 2), peak: the later queries' attention on\n"
        "   each head's 8 most attended prompt positions lost to eviction,\n"
        "   pooled over a prompt's heads, mean over prompts, with its standard\n"
        "   error. Best first by peak (by recall without future records); tie:\n"
        "   within two paired standard errors of the top row, where the trace\n"
        "   does not decide.\n"
        "\n"
        "options:\n"
        "  --budget B      average positions per layer, above the recent window\n"
        "                  [the longest prompt / 8, at least N + 1]\n"
        "  --recent N      newest positions every head keeps [the window rows]\n"
        "  --fraction F    mass fraction the profile weights hold, in percent,\n"
        "                  1 .. 100 [90]\n"
        "  --floor N       smallest profile weight, >= 1 [the largest window]\n"
        "  --tau1 X, --tau2 X  CAKE's temperatures, (0, 1000] [1.6, 0.6]\n"
        "  --progress on|off   a progress line on stderr [on for a terminal]\n"
        "  --per-layer     also print every layer's share and mass per schedule\n"
        "  --json          one JSON document instead of the tables\n"
        "  --plot FILE     also draw the entropy profile and the shares into FILE\n"
        "                  (PNG, gnuplot; never on stdout). A FILE that cannot be\n"
        "                  written is an input error (2) before anything runs;\n"
        "                  gnuplot failing is 1; without gnuplot the plot is\n"
        "                  skipped with a message\n"
        "  --help          this text\n"
        "\n"
        "Trace sizes: a prefill record is rows x prompt values (4 bytes each in\n"
        "float32, 2 in float16). 32 layers x 8 KV heads x 32 window rows x an\n"
        "8,192-position prompt is 67.1 M values: 256 MiB in float32, 128 MiB in\n"
        "float16; record a subset of layers or heads, or the group reduced, to\n"
        "shrink it (docs/calibrate.md).\n");
    pb_cli_help_common(out);
}

static int parse(int argc, char **argv, cal_opts *o) {
    memset(o, 0, sizeof *o);
    o->fraction_ppm = 900000u;
    o->tau1 = 1.6;
    o->tau2 = 0.6;
    pb_cli_walk w;
    pb_cli_walk_init(&w, "calibrate", argc, argv);
    for (;;) {
        const char *v = NULL;
        const int rc = pb_cli_trace_walk(&w, &o->t, help, &v);
        if (rc != PB_CLI_WALK_FLAG) {
            if (rc != 0) return rc;
            break;
        }
        const char *f = w.flag;
        if (strcmp(f, "--plot") == 0) {
            o->plot = v;
        } else if (strcmp(f, "--recent") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 0u, 1u << 20,
                                 &o->recent) != 0)
                return PB_CLI_USAGE;
            o->have_recent = 1;
        } else if (strcmp(f, "--progress") == 0) {
            if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
                return pb_cli_usage_error("calibrate", "--progress takes on "
                                          "or off, not '%s'", v);
            o->progress = v[1] == 'n' ? 1 : -1;
        } else if (strcmp(f, "--tau1") == 0 || strcmp(f, "--tau2") == 0) {
            char *end = NULL;
            const double t = strtod(v, &end);
            if (end == v || *end != '\0' || !(t > 0.0 && t <= 1000.0))
                return pb_cli_usage_error("calibrate", "%s takes a number in "
                                          "(0, 1000], not '%s'", f, v);
            if (f[5] == '1') o->tau1 = t;
            else o->tau2 = t;
        } else if (strcmp(f, "--budget") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 1u, UINT32_MAX,
                                 &o->budget) != 0)
                return PB_CLI_USAGE;
            o->have_budget = 1;
        } else if (strcmp(f, "--fraction") == 0) {
            uint32_t pct = 0;
            if (pb_cli_parse_u32("calibrate", f, v, 1u, 100u, &pct) != 0)
                return PB_CLI_USAGE;
            o->fraction_ppm = pct * 10000u;
        } else if (strcmp(f, "--floor") == 0) {
            if (pb_cli_parse_u32("calibrate", f, v, 1u, UINT32_MAX,
                                 &o->floor_w) != 0)
                return PB_CLI_USAGE;
            o->have_floor = 1;
        } else {
            return pb_cli_usage_error("calibrate",
                                      "unknown option '%s' (see pyramidkv "
                                      "calibrate --help)", f);
        }
    }
    return 0;
}

static const char *shape_of(const uint32_t *shares, uint32_t layers) {
    if (layers < 2u || shares[0] == shares[layers - 1u]) return "uniform";
    return shares[0] > shares[layers - 1u] ? "funnel" : "inverted";
}

static void print_tables(const cal_opts *o, const pb_cli_scan *scan,
                         const cal_layer *ly, const uint32_t *weights,
                         uint32_t fit, const cal_sched *sc, size_t n_sched) {
    const uint32_t L = scan->shape.num_layers;
    const int fut = scan->future > 0u;
    printf("trace %s: %u layers, %u KV heads, group %u; %llu prefill records "
           "(up to %u window rows over %u positions), %llu decode rows, "
           "%llu future records\n\n",
           o->t.path, L, scan->shape.num_kv_heads, scan->shape.group_size,
           (unsigned long long)scan->prefill, scan->max_window,
           scan->max_prompt, (unsigned long long)scan->decode,
           (unsigned long long)scan->future);
    printf("layer profile (k50/k90/k99: positions holding 50/90/99 %% of a "
           "row's mass)\n");
    printf("%5s %9s %9s %9s %7s %7s %7s %7s\n", "layer", "rows", "entropy",
           "support", "k50", "k90", "k99", "weight");
    for (uint32_t l = 0; l < L; ++l) {
        if (ly[l].rows == 0u) {
            printf("%5u %9s %9s %9s %7s %7s %7s %7u\n", l, "-", "-", "-", "-",
                   "-", "-", weights[l]);
            continue;
        }
        printf("%5u %9llu %9.3f %9.1f %7u %7u %7u %7u\n", l,
               (unsigned long long)ly[l].rows, ly[l].bits, ly[l].support,
               ly[l].k50, ly[l].k90, ly[l].k99, weights[l]);
    }
    printf("\nprofile weights: k%u floored at %u; best-fitting arithmetic "
           "ratio %u (%s profile)\n\n", o->fraction_ppm / 10000u, o->floor_w,
           fit, shape_of(weights, L));
    printf("each (layer, KV head) at budget %u per layer, prefill "
           "compression, equal total memory (held positions, each head at "
           "least %u); heads: uniform = every KV head keeps the layer's "
           "share, adaptive = the layer's KV heads share one pool; recall = "
           "heavy hitters kept (the top %u positions before the window by "
           "its attention), mass = window attention kept, both means over "
           "(layer, KV head); worst = the lowest head's recall, at "
           "layer.head; %s\n",
           o->budget, o->recent + 1u, PB_CAL_TOP_K,
           fut ? "peak = the later queries' attention on the 8 prompt "
                 "positions each (layer, KV head) attends to most, the "
                 "evicted share pooled over a prompt's heads, mean over "
                 "prompts, +-se its standard error; tie = within two paired "
                 "standard errors of the top row; loss = the share of all "
                 "their attention lost, the worst head per prompt, mean = "
                 "over every (prompt, layer, KV head); best first by peak"
               : "best first by recall");
    printf("%-18s %-8s %6s %7s %7s %6s %6s %8s %8s %8s %8s %6s",
           "schedule", "heads", "budget", "shares", "held", "first", "last",
           "shape", "recall", "mass", "worst", "at");
    if (fut) printf(" %8s %8s %3s %8s %8s", "peak", "+-se", "tie", "loss",
                    "mean");
    printf("\n");
    for (size_t s = 0; s < n_sched; ++s) {
        char at[24];
        snprintf(at, sizeof at, "%u.%u", sc[s].worst_layer, sc[s].worst_head);
        printf("%-18s %-8s %6u %7llu %7llu %6u %6u %8s %8.6f %8.6f %8.6f "
               "%6s",
               sc[s].s.name, pb_cli_calibrate_heads_name(sc[s].heads), sc[s].used,
               (unsigned long long)sc[s].total,
               (unsigned long long)sc[s].held, sc[s].shares[0],
               sc[s].shares[L - 1u], shape_of(sc[s].shares, L), sc[s].recall,
               sc[s].mass, sc[s].worst, at);
        if (fut)
            printf(" %8.6f %8.6f %3s %8.6f %8.6f", sc[s].peak, sc[s].peak_se,
                   sc[s].tied ? "yes" : "no", sc[s].loss, sc[s].loss_mean);
        printf("\n");
    }
    if (o->t.per_layer) {
        printf("\nper layer: share / retained mass (mean over the layer's "
               "records)\n%5s", "layer");
        for (size_t s = 0; s < n_sched; ++s)
            printf(" %18s%s", sc[s].s.name,
                   sc[s].heads == PB_CAL_HEADS_ADAPTIVE ? "+a" : "  ");
        printf("\n");
        for (uint32_t l = 0; l < L; ++l) {
            printf("%5u", l);
            for (size_t s = 0; s < n_sched; ++s) {
                if (ly[l].records == 0u)
                    printf(" %11u / %6s", sc[s].shares[l], "-");
                else
                    printf(" %11u / %6.4f", sc[s].shares[l],
                           sc[s].mass_sum[l] / (double)ly[l].records);
            }
            printf("\n");
        }
    }
    const cal_sched *best = &sc[0];
    const cal_sched *uni = NULL;
    for (size_t s = 0; s < n_sched; ++s)
        if (strcmp(sc[s].s.name, "uniform") == 0 &&
            sc[s].heads == PB_CAL_HEADS_UNIFORM)
            uni = &sc[s];
    if (fut) {
        size_t tied = 0;
        for (size_t s = 1; s < n_sched; ++s) tied += (size_t)sc[s].tied;
        printf("\nrecommendation: %s (%s), heads %s: the later queries lose "
               "%.6f +- %.6f of the attention they put on their heads' peak "
               "positions; uniform budgets on every head: %.6f. ",
               best->s.name, shape_of(best->shares, L),
               pb_cli_calibrate_heads_name(best->heads), best->peak,
               best->peak_se, uni != NULL ? uni->peak : 0.0);
        if (tied == 0u)
            printf("Every other row is worse by more than two paired "
                   "standard errors.\n");
        else
            printf("%zu other rows are within two paired standard errors "
                   "of it (tie = yes): between those the trace does not "
                   "decide.\n", tied);
        return;
    }
    printf("\nrecommendation: %s (%s), heads %s: keeps %.6f of the heads' "
           "heavy hitters (worst head %.6f) and %.6f of the window's "
           "attention; uniform budgets on every head: %.6f (worst %.6f), "
           "%.6f\n", best->s.name, shape_of(best->shares, L),
           pb_cli_calibrate_heads_name(best->heads), best->recall, best->worst, best->mass,
           uni != NULL ? uni->recall : 0.0, uni != NULL ? uni->worst : 0.0,
           uni != NULL ? uni->mass : 0.0);
}

static int print_json(const cal_opts *o, const pb_cli_scan *scan,
                      const cal_layer *ly, const uint32_t *weights,
                      uint32_t fit, const cal_sched *sc, size_t n_sched,
                      const char *skipped) {
    const uint32_t L = scan->shape.num_layers;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "trace", o->t.path);
    cJSON_AddNumberToObject(doc, "layers", L);
    cJSON_AddNumberToObject(doc, "kvHeads", scan->shape.num_kv_heads);
    cJSON_AddNumberToObject(doc, "groupSize", scan->shape.group_size);
    cJSON_AddNumberToObject(doc, "budget", o->budget);
    cJSON_AddNumberToObject(doc, "fractionPercent", o->fraction_ppm / 10000u);
    cJSON_AddNumberToObject(doc, "floor", o->floor_w);
    cJSON *prof = cJSON_AddArrayToObject(doc, "profile");
    for (uint32_t l = 0; l < L; ++l) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddNumberToObject(e, "layer", l);
        cJSON_AddNumberToObject(e, "rows", (double)ly[l].rows);
        if (ly[l].rows != 0u) {
            cJSON_AddNumberToObject(e, "entropyBits", ly[l].bits);
            cJSON_AddNumberToObject(e, "support", ly[l].support);
            cJSON_AddNumberToObject(e, "k50", ly[l].k50);
            cJSON_AddNumberToObject(e, "k90", ly[l].k90);
            cJSON_AddNumberToObject(e, "k99", ly[l].k99);
        }
        cJSON_AddNumberToObject(e, "weight", weights[l]);
        cJSON_AddItemToArray(prof, e);
    }
    cJSON_AddNumberToObject(doc, "fitRatio", fit);
    cJSON *arr = cJSON_AddArrayToObject(doc, "schedules");
    for (size_t s = 0; s < n_sched; ++s) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "schedule", sc[s].s.name);
        cJSON_AddStringToObject(e, "heads", pb_cli_calibrate_heads_name(sc[s].heads));
        cJSON_AddStringToObject(e, "shape", shape_of(sc[s].shares, L));
        cJSON_AddNumberToObject(e, "budget", sc[s].used);
        cJSON_AddNumberToObject(e, "total", (double)sc[s].total);
        cJSON_AddNumberToObject(e, "held", (double)sc[s].held);
        cJSON_AddNumberToObject(e, "retainedAttentionMass", sc[s].mass);
        cJSON_AddNumberToObject(e, "heavyHitterRecall", sc[s].recall);
        cJSON_AddNumberToObject(e, "worstHeadRecall", sc[s].worst);
        cJSON_AddNumberToObject(e, "worstLayer", sc[s].worst_layer);
        cJSON_AddNumberToObject(e, "worstHead", sc[s].worst_head);
        if (scan->future > 0u) {
            cJSON_AddNumberToObject(e, "peakLoss", sc[s].peak);
            cJSON_AddNumberToObject(e, "peakLossSE", sc[s].peak_se);
            cJSON_AddNumberToObject(e, "worstHeadLoss", sc[s].loss);
            cJSON_AddNumberToObject(e, "worstHeadLossSE", sc[s].loss_se);
            cJSON_AddNumberToObject(e, "meanLoss", sc[s].loss_mean);
            cJSON_AddBoolToObject(e, "withinNoise", sc[s].tied);
            /* Per (layer, KV head): the peak loss pooled over the prompts,
             * where the rows disagree (docs/calibrate.md). */
            const size_t cells = (size_t)L * scan->shape.num_kv_heads;
            cJSON *hp = cJSON_AddArrayToObject(e, "headPeakLoss");
            for (size_t c = 0; c < cells; ++c) {
                double lost = 0.0, all = 0.0;
                for (size_t i = c; i < sc[s].n_cells; i += cells) {
                    lost += sc[s].peak_lost[i];
                    all += sc[s].peak_all[i];
                }
                cJSON_AddItemToArray(hp, all > 0.0 ? cJSON_CreateNumber(lost / all)
                                                   : cJSON_CreateNull());
            }
        }
        cJSON *sh = cJSON_AddArrayToObject(e, "shares");
        cJSON *lm = cJSON_AddArrayToObject(e, "layerMass");
        for (uint32_t l = 0; l < L; ++l) {
            cJSON_AddItemToArray(sh, cJSON_CreateNumber(sc[s].shares[l]));
            cJSON_AddItemToArray(
                lm, ly[l].records == 0u
                        ? cJSON_CreateNull()
                        : cJSON_CreateNumber(sc[s].mass_sum[l] /
                                             (double)ly[l].records));
        }
        cJSON_AddItemToArray(arr, e);
    }
    cJSON_AddStringToObject(doc, "recommendation", sc[0].s.name);
    cJSON_AddStringToObject(doc, "recommendedHeads", pb_cli_calibrate_heads_name(sc[0].heads));
    if (skipped[0] != '\0') cJSON_AddStringToObject(doc, "notCompared", skipped);
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    if (text == NULL) return -1;
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
}

/* Draws the entropy per layer and every schedule's shares with gnuplot,
 * whose own output goes nowhere near stdout (the tables or the JSON are
 * there). Returns 0 (drawn, or skipped without gnuplot) or PB_CLI_FAILED. */
static int plot(const cal_opts *o, const pb_cli_scan *scan,
                const cal_layer *ly, const cal_sched *sc, size_t n_sched) {
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, "pyramidkv calibrate: gnuplot not found; --plot %s "
                        "skipped (Debian: apt-get install gnuplot-nox)\n",
                o->plot);
        return PB_CLI_OK;
    }
    char data[] = "/tmp/pyramidkv-calibrate-XXXXXX";
    const int fd = mkstemp(data);
    if (fd < 0) {
        fprintf(stderr, "pyramidkv calibrate: --plot: no temporary file\n");
        return PB_CLI_FAILED;
    }
    FILE *f = fdopen(fd, "w");
    const uint32_t L = scan->shape.num_layers;
    for (uint32_t l = 0; f != NULL && l < L; ++l) {
        fprintf(f, "%u %.6f", l, ly[l].rows ? ly[l].bits : 0.0);
        for (size_t s = 0; s < n_sched; ++s) fprintf(f, " %u", sc[s].shares[l]);
        fprintf(f, "\n");
    }
    if (f != NULL) fclose(f);
    fflush(stdout);
    /* gnuplot draws on its stdout when `set output` fails: send that to
     * /dev/null. Reading a pipe, it exits non-zero at the first error. */
    FILE *gp = popen("gnuplot >/dev/null", "w");
    if (gp == NULL) {
        remove(data);
        return PB_CLI_FAILED;
    }
    fprintf(gp,
            "set terminal pngcairo size 900,700 noenhanced\n"
            "set output '%s'\n"
            "set multiplot layout 2,1 title 'pyramidkv calibrate: %s'\n"
            "set xlabel 'layer'\nset grid\nset key outside right\n"
            "set ylabel 'mean entropy (bits)'\n"
            "plot '%s' using 1:2 with linespoints title 'entropy'\n"
            "set ylabel 'share at budget %u'\n"
            "plot ", o->plot, o->t.path, data, o->budget);
    /* Each schedule once (its two head modes have the same shares). */
    int first = 1;
    for (size_t s = 0; s < n_sched; ++s) {
        if (sc[s].heads != PB_CAL_HEADS_UNIFORM) continue;
        fprintf(gp, "%s'%s' using 1:%zu with lines lw 2 title '%s'",
                first ? "" : ", ", data, s + 3u, sc[s].s.name);
        first = 0;
    }
    fprintf(gp, "\nunset multiplot\n");
    const int rc = pclose(gp);
    remove(data);
    if (rc != 0) {
        fprintf(stderr, "pyramidkv calibrate: gnuplot failed; %s not "
                        "written\n", o->plot);
        return PB_CLI_FAILED;
    }
    return PB_CLI_OK;
}

/* --plot FILE must be a file this process can write, checked before the
 * run (a quote would end gnuplot's string). 0 or PB_CLI_USAGE. */
static int check_plot_path(const char *path) {
    if (strchr(path, '\'') != NULL)
        return pb_cli_usage_error("calibrate", "--plot: '%s' holds a quote",
                                  path);
    const int existed = access(path, F_OK) == 0;
    FILE *f = fopen(path, "ab");
    if (f == NULL)
        return pb_cli_usage_error("calibrate", "--plot: %s: cannot be "
                                  "written (%s)", path, strerror(errno));
    fclose(f);
    if (!existed) remove(path); /* gnuplot creates it */
    return 0;
}

/* The rows of one schedule: its shares at equal memory, then one row per
 * head mode. A schedule the values refuse is noted in `skipped`; a
 * head-shares row whose profile lacks a layer's heads likewise. 0, or 1
 * out of memory. */
static int add_rows(const pb_cli_sched *sched, const pb_cli_sched_ctx *ctx,
                    const cal_prep *prep, uint32_t recent, cal_sched *sc,
                    size_t *n_sched, char *skipped, size_t skipped_len) {
    const uint32_t L = prep->layers, H = prep->kv_heads;
    cal_sched one;
    memset(&one, 0, sizeof one);
    one.s = *sched;
    uint32_t *shares = (uint32_t *)calloc(L, sizeof *shares);
    uint32_t *hs = (uint32_t *)calloc((size_t)L * H, sizeof *hs);
    char why[160];
    int rc = shares == NULL || hs == NULL;
    if (rc == 0 && pb_cli_sched_shares(&one.s, ctx, shares, &one.total,
                                       &one.held, &one.used, why,
                                       sizeof why) != 0) {
        const size_t used = strlen(skipped);
        snprintf(skipped + used, skipped_len - used, "%s%s", used ? "; " : "",
                 why);
        free(shares);
        free(hs);
        return 0;
    }
    int have_hs = rc == 0;
    for (uint32_t l = 0; have_hs && l < L; ++l) {
        const uint32_t held = shares[l] > recent ? shares[l] : recent + 1u;
        have_hs = pb_profile_head_shares(prep->head_prof, l, H, held,
                                         recent + 1u, 900000u,
                                         hs + (size_t)l * H, H) == PB_OK;
    }
    if (rc == 0 && !have_hs) {
        const size_t used = strlen(skipped);
        snprintf(skipped + used, skipped_len - used, "%s%s shares: a layer's "
                 "heads have no window rows", used ? "; " : "", one.s.name);
    }
    const size_t prompt_cells = (size_t)prep->prompts * L * H;
    for (int heads = PB_CAL_HEADS_UNIFORM;
         rc == 0 && heads <= PB_CAL_HEADS_SHARES; ++heads) {
        if (heads == PB_CAL_HEADS_SHARES && !have_hs) continue;
        cal_sched *e = &sc[(*n_sched)++];
        *e = one;
        e->heads = heads;
        e->shares = (uint32_t *)malloc(L * sizeof *e->shares);
        e->head_shares = (uint32_t *)malloc((size_t)L * H * sizeof *hs);
        e->mass_sum = (double *)calloc(L, sizeof *e->mass_sum);
        e->head_sum = (double *)calloc((size_t)L * H, sizeof(double));
        e->recall_sum = (double *)calloc((size_t)L * H, sizeof(double));
        e->pmass = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->precall = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->n_cells = prompt_cells;
        e->lost = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->peak_lost = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->peak_all = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->seen = (double *)calloc(prompt_cells + 1u, sizeof(double));
        e->prompt_loss = (double *)calloc(prep->prompts + 1u, sizeof(double));
        if (e->shares == NULL || e->head_shares == NULL ||
            e->mass_sum == NULL || e->head_sum == NULL ||
            e->recall_sum == NULL || e->pmass == NULL ||
            e->precall == NULL || e->lost == NULL || e->seen == NULL ||
            e->peak_lost == NULL || e->peak_all == NULL ||
            e->prompt_loss == NULL) {
            rc = 1;
        } else {
            memcpy(e->shares, shares, L * sizeof *shares);
            memcpy(e->head_shares, hs, (size_t)L * H * sizeof *hs);
        }
    }
    free(shares);
    free(hs);
    return rc;
}

static void free_rows(cal_sched *sc, size_t n_sched) {
    for (size_t s = 0; s < n_sched; ++s) {
        free(sc[s].shares);
        free(sc[s].head_shares);
        free(sc[s].mass_sum);
        free(sc[s].head_sum);
        free(sc[s].recall_sum);
        free(sc[s].pmass);
        free(sc[s].precall);
        free(sc[s].lost);
        free(sc[s].peak_lost);
        free(sc[s].peak_all);
        free(sc[s].seen);
        free(sc[s].prompt_loss);
    }
}

int pb_cli_calibrate(int argc, char **argv) {
    cal_opts o;
    const int prc = parse(argc, argv, &o);
    if (prc == 1) return 0;
    if (prc != 0) return prc;
    if (o.plot != NULL && check_plot_path(o.plot) != 0) return PB_CLI_USAGE;
    char err[320];
    pb_cli_scan scan;
    if (pb_cli_scan_trace(o.t.path, &scan, err, sizeof err) != 0)
        return pb_cli_trace_error("calibrate", o.t.path, err);
    if (scan.prefill == 0u)
        return pb_cli_trace_error("calibrate", o.t.path,
                                  "no prefill record: calibrate compresses "
                                  "the recorded window rows");
    if (!o.have_recent) o.recent = scan.max_window;
    if (!o.have_budget) {
        o.budget = scan.max_prompt / 8u;
        if (o.budget <= o.recent) o.budget = o.recent + 1u;
    }
    if (o.budget <= o.recent)
        return pb_cli_usage_error("calibrate", "--budget %u does not exceed "
                                  "the recent window %u: every layer holds "
                                  "at least %u, no allocation fits",
                                  o.budget, o.recent, o.recent + 1u);
    if (!o.have_floor) o.floor_w = scan.max_window;
    if (o.progress == 0) o.progress = isatty(2) ? 1 : -1;
    pb_profile *prof = NULL;
    if (pb_cli_profile_trace(o.t.path, &scan, &prof, err, sizeof err) != 0)
        return pb_cli_trace_error("calibrate", o.t.path, err);
    cal_prep prep;
    if (pb_cli_calibrate_prep(o.t.path, &scan, o.tau1, o.tau2, &prep, err,
                              sizeof err) != 0) {
        pb_profile_destroy(prof);
        return pb_cli_trace_error("calibrate", o.t.path, err);
    }

    const uint32_t L = scan.shape.num_layers;
    const uint32_t H = scan.shape.num_kv_heads;
    cal_layer *ly = (cal_layer *)calloc(L, sizeof *ly);
    uint32_t *weights = (uint32_t *)calloc(L, sizeof *weights);
    uint32_t *cake_w = (uint32_t *)calloc(L, sizeof *cake_w);
    uint64_t *recs = (uint64_t *)calloc((size_t)L * H, sizeof *recs);
    cal_sched sc[MAX_ALLOC];
    memset(sc, 0, sizeof sc);
    pb_cli_sched all[MAX_SCHED];
    const size_t n_all = pb_cli_sched_all(all, MAX_SCHED);
    size_t n_sched = 0;
    int rc = (ly == NULL || weights == NULL || cake_w == NULL ||
              recs == NULL) ? 1 : 0;
    if (rc != 0) snprintf(err, sizeof err, "out of memory");
    for (uint32_t l = 0; rc == 0 && l < L; ++l) {
        (void)pb_profile_layer_rows(prof, l, &ly[l].rows);
        if (ly[l].rows == 0u) continue;
        (void)pb_profile_entropy(prof, l, &ly[l].bits, &ly[l].support);
        (void)pb_profile_mass_k(prof, l, 500000u, &ly[l].k50);
        (void)pb_profile_mass_k(prof, l, 900000u, &ly[l].k90);
        (void)pb_profile_mass_k(prof, l, 990000u, &ly[l].k99);
    }
    uint32_t fit = 1u;
    if (rc == 0) {
        pb_status st = pb_profile_weights(prof, o.fraction_ppm, o.floor_w,
                                          weights, L);
        if (st == PB_OK) st = pb_profile_fit_ratio(weights, L, 64u, &fit, NULL);
        if (st != PB_OK) {
            snprintf(err, sizeof err, "profile schedule: %s",
                     pb_status_str(st));
            rc = 1;
        }
    }
    pb_profile_destroy(prof);
    /* CAKE's weights from the preference; all zero (no prefix attention)
     * leaves cake out. */
    const int have_cake =
        rc == 0 && pb_cake_weights(prep.cake_pref, L, cake_w, L) == PB_OK;
    /* Every schedule under every head mode. A schedule that refuses these
     * values (kvfactory with a budget not above the window) is left out,
     * with a note. */
    const pb_cli_sched_ctx ctx = {o.budget, L, o.recent, scan.max_prompt,
                                  weights, o.recent + 1u, o.recent + 1u,
                                  have_cake ? cake_w : NULL};
    char skipped[512] = "";
    for (size_t a = 0; rc == 0 && a < n_all; ++a)
        if (add_rows(&all[a], &ctx, &prep, o.recent, sc, &n_sched, skipped,
                     sizeof skipped) != 0) {
            snprintf(err, sizeof err, "out of memory");
            rc = 1;
        }
    const cal_measure_opts mo = {o.recent, 7u, o.progress > 0};
    if (rc == 0 && pb_cli_calibrate_measure(o.t.path, &scan, &prep, &mo, sc,
                                            n_sched, recs, err,
                                            sizeof err) != 0)
        rc = 2;
    if (rc == 0) {
        pb_cli_calibrate_rank(sc, n_sched, recs, &prep, scan.future > 0u);
        for (uint32_t l = 0; l < L; ++l)
            for (uint32_t h = 0; h < H; ++h)
                ly[l].records += recs[(size_t)l * H + h];
        if (o.t.json) {
            if (print_json(&o, &scan, ly, weights, fit, sc, n_sched,
                           skipped) != 0)
                rc = 1;
        } else {
            print_tables(&o, &scan, ly, weights, fit, sc, n_sched);
            if (skipped[0] != '\0') printf("not compared: %s\n", skipped);
        }
        if (rc == 0 && o.plot != NULL) rc = plot(&o, &scan, ly, sc, n_sched);
    } else if (rc == 2) {
        (void)pb_cli_trace_error("calibrate", o.t.path, err);
    } else {
        fprintf(stderr, "pyramidkv calibrate: %s\n", err);
    }
    free_rows(sc, n_sched);
    pb_cli_calibrate_prep_free(&prep);
    free(ly);
    free(weights);
    free(cake_w);
    free(recs);
    return rc;
}
