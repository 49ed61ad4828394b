/*
 * cli_bench_schedule.c - `pyramidkv bench --schedule`: the configurations of
 * a schedule comparison (each schedule's shares from the library, the
 * memory guard with explicit shares), its table with every schedule's real
 * total against layers x budget, and its one-line reading.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_bench.h"
#include "cli_options.h"

/* The ratio a schedule's configuration shows (and arithmetic uses). */
uint32_t pb_cli_bench_schedule_ratio(const bench_opts *o, uint32_t kind) {
    const int reads = kind == PB_SCHEDULE_ARITHMETIC ||
                      kind == PB_SCHEDULE_CURVE || kind == PB_SCHEDULE_GEOMETRIC;
    return reads ? (o->ratios_set ? o->ratios[0] : PB_CLI_DEFAULT_RATIO) : 1u;
}

/* The shares of kinds-list entry `kind` at `budget` over `layers` into a new
 * array (*out, the caller frees it). Returns 0, PB_CLI_USAGE (the schedule
 * is refused, the reason printed) or 1 (out of memory). */
int pb_cli_bench_schedule_shares(const bench_opts *o, uint32_t kind,
                                 uint32_t budget, uint32_t layers,
                                 uint32_t **out) {
    uint32_t *shares, *weights;
    *out = NULL;
    if (pb_cli_schedule_arrays("bench", layers, &shares, &weights) != 0)
        return 1;
    pb_schedule s;
    int rc = pb_cli_schedule_build("bench", &o->sched, kind, budget, layers,
                                   weights, &s);
    s.ratio = pb_cli_bench_schedule_ratio(o, kind);
    /* taper's n_sink is the policies' --sinks (default 4) */
    s.sinks = o->pol.sinks_set ? o->pol.sinks : PB_CLI_DEFAULT_SINKS;
    if (rc == 0) {
        const pb_status st =
            pb_kvcache_schedule_shares(&s, shares, layers, NULL);
        if (st != PB_OK)
            rc = pb_cli_usage_error("bench", "--schedule %s at budget %u, "
                                    "%u layers: the library refuses it: %s",
                                    pb_schedule_kind_name(kind), budget,
                                    layers, pb_status_str(st));
    }
    free(weights);
    if (rc != 0) {
        free(shares);
        return rc;
    }
    *out = shares;
    return 0;
}

int pb_cli_bench_check_memory_schedules(const bench_opts *o) {
    for (size_t t = 0; t < o->n_traces; ++t) {
        const uint32_t layers =
            o->traces[t] == PB_WL_DECODE4096 ? 1u : o->layers;
        uint64_t bytes = 0;
        for (size_t b = 0; b < o->n_budgets; ++b)
            for (size_t k = 0; k < o->n_kinds; ++k) {
                uint32_t *shares = NULL;
                const int rc = pb_cli_bench_schedule_shares(
                    o, o->kinds[k], o->budgets[b], layers, &shares);
                if (rc != 0) return rc;
                for (uint32_t l = 0; l < layers; ++l) {
                    /* The instance holds max(effective share, budget) + 1
                     * positions: a one-layer instance of that budget
                     * needs the same bytes. */
                    const uint32_t floor =
                        pb_cli_policy_floor(&o->pol, o->recent);
                    uint32_t eff = shares[l] > floor ? shares[l] : floor;
                    if (eff < o->budgets[b]) eff = o->budgets[b];
                    size_t size = 0;
                    if (pb_cli_policy_layer_bytes(&o->pol, eff, 1u, 0u, 1u,
                                                  o->recent, o->obs,
                                                  o->kernel, &size) != PB_OK) {
                        free(shares);
                        return pb_cli_usage_error(
                            "bench", "--schedule %s: the library refuses "
                            "share %u for policy %s",
                            pb_schedule_kind_name(o->kinds[k]), eff,
                            pb_cli_policy_name(&o->pol));
                    }
                    bytes += (uint64_t)size + 5u * (uint64_t)PB_WL_POSITIONS;
                }
                free(shares);
            }
        if (bytes > (uint64_t)MAX_RUN_MIB << 20)
            return pb_cli_usage_error(
                "bench", "--layers/--budget/--schedule: this run would hold "
                "%llu MiB of policies at once (at most %u); ask for fewer",
                (unsigned long long)(bytes >> 20), MAX_RUN_MIB);
    }
    return 0;
}

int pb_cli_bench_schedule_setup(bench_opts *o) {
    if (o->sched.schedule == NULL) {
        const char *only = o->sched.window       ? "--window"
                           : o->sched.beta       ? "--beta"
                           : o->sched.prompt_len ? "--prompt-len"
                           : o->sched.gamma      ? "--gamma"
                           : o->sched.weights    ? "--weights"
                           : o->sched.min_share  ? "--min-share"
                                                 : NULL;
        if (only != NULL)
            return pb_cli_usage_error("bench", "%s needs --schedule", only);
        return 0;
    }
    o->schedule_mode = 1;
    if (pb_cli_schedule_kinds("bench", &o->sched, o->kinds, &o->n_kinds))
        return PB_CLI_USAGE;
    if (pb_cli_schedule_check_used("bench", &o->sched, o->kinds, o->n_kinds))
        return PB_CLI_USAGE;
    if (o->ratios_set && o->n_ratios != 1u)
        return pb_cli_usage_error("bench", "--ratio: with --schedule, one "
                                           "value (the schedules' ratio)");
    o->sched.ratio = NULL; /* the ratio is o->ratios[0] */
    return 0;
}

int pb_cli_bench_schedule_configs(const bench_opts *o, trace_run *tr) {
    for (size_t b = 0; b < o->n_budgets; ++b)
        for (size_t k = 0; k < o->n_kinds; ++k) {
            const int rc = pb_cli_bench_schedule_shares(
                o, o->kinds[k], o->budgets[b], tr->layers, &tr->shares[tr->n]);
            if (rc != 0) return rc;
            tr->kinds[tr->n] = o->kinds[k];
            tr->configs[tr->n].budget = o->budgets[b];
            tr->configs[tr->n].ratio =
                pb_cli_bench_schedule_ratio(o, o->kinds[k]);
            tr->n++;
        }
    return 0;
}

/* Schedule mode's row up to the mass: trace, budget, schedule, its total
 * and what it spends beyond layers x budget. */
static void schedule_row_head(const trace_run *tr, size_t i) {
    const pb_wl_result *r = &tr->results[i];
    const uint64_t lxb = (uint64_t)tr->layers * r->config.budget;
    char label[32], over[24];
    pb_cli_bench_label(tr, i, label, sizeof label);
    if (r->share_total >= lxb)
        snprintf(over, sizeof over, "+%llu",
                 (unsigned long long)(r->share_total - lxb));
    else
        snprintf(over, sizeof over, "-%llu",
                 (unsigned long long)(lxb - r->share_total));
    printf("%-11s %6u %-18s %7llu%c %8s", pb_wl_profile_name(tr->profile),
           r->config.budget, label, (unsigned long long)r->share_total,
           r->floors_binding ? '*' : ' ', over);
}

/* Schedule mode: one row per schedule, its real total and what it spends
 * beyond layers x budget; returns whether a floor binds anywhere. */
int pb_cli_bench_schedule_table(const bench_opts *o, const trace_run *runs,
                                size_t n_runs) {
    printf("%-11s %6s %-18s %8s %8s  %8s  %9s  %8s  %9s  %9s  %9s\n",
           "trace", "budget", "schedule", "shares", "vs LxB", "mass",
           "vs unif", "recall", "vs unif", "evictions", "peak held");
    return pb_cli_bench_rows(o, runs, n_runs, schedule_row_head);
}

/* Schedule mode: per trace and budget, the schedule that kept the most
 * mass, what it spent, and the schedules that spent more than L x B. */
void pb_cli_bench_schedule_reading(const bench_opts *o,
                                   const trace_run *runs, size_t n_runs) {
    printf("\nreading (same average budget; totals as spent):");
    const char *sep = " ";
    for (size_t t = 0; t < n_runs; ++t) {
        const trace_run *tr = &runs[t];
        for (size_t b = 0; b < o->n_budgets; ++b) {
            size_t idx[MAX_LIST];
            pb_cli_bench_ranked(tr, o->budgets[b], idx);
            const pb_wl_result *best = &tr->results[idx[0]];
            const pb_wl_result *u = pb_cli_bench_uniform_of(tr, o->budgets[b]);
            const uint64_t lxb = (uint64_t)tr->layers * o->budgets[b];
            char label[32];
            pb_cli_bench_label(tr, idx[0], label, sizeof label);
            printf("%s%s", sep, pb_wl_profile_name(tr->profile));
            if (o->n_budgets > 1) printf(" B=%u", o->budgets[b]);
            printf(" best %s (mass %.4f", label, best->mass);
            if (u != NULL && u != best)
                printf(", %+.4f vs uniform", best->mass - u->mass);
            printf(", total %llu of %llu)", (unsigned long long)best->share_total,
                   (unsigned long long)lxb);
            for (size_t i = 0; i < tr->n; ++i) {
                const pb_wl_result *r = &tr->results[i];
                if (r->config.budget != o->budgets[b] || r->share_total <= lxb)
                    continue;
                pb_cli_bench_label(tr, i, label, sizeof label);
                printf(", %s spends %+.1f%%", label,
                       100.0 * ((double)r->share_total - (double)lxb) /
                           (double)lxb);
            }
            sep = "; ";
        }
    }
    printf(".\n");
}
