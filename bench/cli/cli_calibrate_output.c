/*
 * cli_calibrate_output.c - what `pyramidkv calibrate` prints: the profile
 * and row tables with the recommendation line, the same figures as one
 * JSON document, and the --plot drawing (gnuplot). Reads the finished
 * rows only; every figure is computed by cli_calibrate_rank.c
 * (docs/spec.md §18).
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_calibrate.h"
#include "cli_commands.h"
#include "cli_trace_common.h"

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
    if (scan->preference > 0u && o->cake_pref == NULL)
        printf("CAKE's preference from %llu preference records (the text "
               "the runtime measures it on)\n\n",
               (unsigned long long)scan->preference);
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
        cJSON_AddNumberToObject(e, "cakePreference", ly[l].cake_pref);
        cJSON_AddStringToObject(e, "cakePreferenceFrom", ly[l].cake_from);
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

int pb_cli_calibrate_report(const cal_opts *o, const pb_cli_scan *scan,
                            const cal_layer *ly, const uint32_t *weights,
                            uint32_t fit, const cal_sched *sc,
                            size_t n_sched, const char *skipped) {
    if (o->t.json) {
        if (print_json(o, scan, ly, weights, fit, sc, n_sched, skipped) != 0)
            return 1;
    } else {
        print_tables(o, scan, ly, weights, fit, sc, n_sched);
        if (skipped[0] != '\0') printf("not compared: %s\n", skipped);
    }
    return o->plot != NULL ? plot(o, scan, ly, sc, n_sched) : 0;
}
