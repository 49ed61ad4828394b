/*
 * cli_bench_output.c - what `pyramidkv bench` prints: the JSON document,
 * the comparison table of ratios (or schedules, through
 * cli_bench_schedule.c's table), its one-line reading and the per-layer
 * table. cli_bench.c owns the flags and the runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_bench.h"
#include "cli_bench_policy.h"
#include "pyramidkv/pyramidkv.h"
#include "workload_harness.h"
#include "workload_metrics.h"

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

int pb_cli_bench_print_json(const bench_opts *o, const trace_run *runs,
                            size_t n) {
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

int pb_cli_bench_rows(const bench_opts *o, const trace_run *runs,
                      size_t n_runs,
                      void (*head)(const trace_run *tr, size_t i)) {
    int floors = 0;
    for (size_t t = 0; t < n_runs; ++t) {
        const trace_run *tr = &runs[t];
        for (size_t b = 0; b < o->n_budgets; ++b) {
            size_t idx[MAX_LIST];
            const size_t n = pb_cli_bench_ranked(tr, o->budgets[b], idx);
            const pb_wl_result *u = pb_cli_bench_uniform_of(tr, o->budgets[b]);
            for (size_t k = 0; k < n; ++k) {
                const pb_wl_result *r = &tr->results[idx[k]];
                floors |= r->floors_binding != 0u;
                head(tr, idx[k]);
                printf("  %8.6f", r->mass);
                pb_cli_bench_delta(r->mass, u, u ? u->mass : 0.0);
                printf("  %8.6f", r->recall);
                pb_cli_bench_delta(r->recall, u, u ? u->recall : 0.0);
                printf("  %9llu  %9llu\n", (unsigned long long)r->evictions,
                       (unsigned long long)r->peak_held);
            }
            if (t + 1 < n_runs || b + 1 < o->n_budgets) printf("\n");
        }
    }
    return floors;
}

/* Ratio mode's row up to the mass: trace, budget, ratio, shares. */
static void ratio_row_head(const trace_run *tr, size_t i) {
    const pb_wl_result *r = &tr->results[i];
    printf("%-11s %6u %5u %6llu%c", pb_wl_profile_name(tr->profile),
           r->config.budget, r->config.ratio,
           (unsigned long long)r->share_total,
           r->floors_binding ? '*' : ' ');
}

void pb_cli_bench_print_table(const bench_opts *o, const trace_run *runs,
                              size_t n_runs) {
    int floors = 0;
    if (o->schedule_mode) {
        floors = pb_cli_bench_schedule_table(o, runs, n_runs);
        goto notes;
    }
    printf("%-11s %6s %5s %7s  %8s  %9s  %8s  %9s  %9s  %9s\n", "trace",
           "budget", "ratio", "shares", "mass", "vs r=1", "recall", "vs r=1",
           "evictions", "peak held");
    floors = pb_cli_bench_rows(o, runs, n_runs, ratio_row_head);
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

/* One line: per trace and budget, which ratio kept the most mass (mass
 * decides; recall is reported) and what it did to mass and recall against
 * uniform. */
void pb_cli_bench_print_reading(const bench_opts *o, const trace_run *runs,
                                size_t n_runs) {
    if (o->schedule_mode) {
        pb_cli_bench_schedule_reading(o, runs, n_runs);
        return;
    }
    printf("\nreading (equal total memory; the ratio with the most retained "
           "mass wins, recall is shown beside and decides nothing; the "
           "traces are deterministic, so a margin is exact, but below "
           "0.0005 it is within the 4-digit rounding printed):");
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

void pb_cli_bench_print_per_layer(const bench_opts *o, const trace_run *runs,
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
