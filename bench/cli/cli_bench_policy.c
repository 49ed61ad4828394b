/*
 * cli_bench_policy.c - the policy choice of `pyramidkv bench` (see the
 * header): the seven policybook vtables by name, the five native scorers,
 * and which of --recent, --obs, --kernel and --sinks each reads.
 */
#include "cli_bench_policy.h"

#include <stdio.h>
#include <string.h>

#include "cli_options.h"

/* What each vtable reads besides its budget. */
enum { READS_WINDOW = 1, READS_RECENT = 2, READS_SINKS = 4 };

/* Indexed by pb_cli_policy_id (cli_options.h), whose order this keeps. */
typedef struct vt_entry {
    pb_wl_params_kind kind;
    const pb_kvcache_vtable *vtable;
    pb_scorer scorer; /* the native scorer the vtable runs */
    unsigned reads;
} vt_entry;

static const vt_entry vtables[] = {
    {PB_WL_PARAMS_PYRAMIDKV, &pb_kvcache_pyramidkv,
     PB_SCORER_WINDOW, READS_WINDOW | READS_RECENT},
    {PB_WL_PARAMS_SNAPKV, &pb_kvcache_snapkv, PB_SCORER_WINDOW,
     READS_WINDOW | READS_RECENT},
    {PB_WL_PARAMS_H2O, &pb_kvcache_h2o, PB_SCORER_CUMULATIVE,
     READS_RECENT},
    {PB_WL_PARAMS_SCISSORHANDS, &pb_kvcache_scissorhands,
     PB_SCORER_VOTES, READS_RECENT},
    {PB_WL_PARAMS_TOVA, &pb_kvcache_tova, PB_SCORER_LAST, 0u},
    {PB_WL_PARAMS_STREAMING_LLM, &pb_kvcache_streaming_llm,
     PB_SCORER_NONE, READS_SINKS},
    {PB_WL_PARAMS_SLIDING_WINDOW, &pb_kvcache_sliding_window, PB_SCORER_NONE, 0u},
};
#define N_VTABLES (sizeof vtables / sizeof vtables[0])
_Static_assert(N_VTABLES == PB_CLI_POLICY_COUNT,
               "one vtable per pb_cli_policy_id, in its order");

static const char *const native_names[] = {
    "native window", "native cumulative", "native last", "native votes",
    "native none"};

const char pb_cli_policy_help[] =
    "  --policy P     the policy in every layer, held to the layer's share:\n"
    "                 pyramidkv, snapkv, h2o, scissorhands, tova, streaming-llm\n"
    "                 or sliding-window [pyramidkv] (bench: the policybook\n"
    "                 vtable; replay: the native surface with its scorer)\n"
    "  --scorer S     instead of --policy (a conflict with it): the native\n"
    "                 surface (pb_kvcache_create) ranking by window, cumulative\n"
    "                 (H2O), last (TOVA), votes (Scissorhands) or none\n"
    "                 (recency), with the layer's share\n"
    "  --sinks N      attention sinks: positions below N are never evicted;\n"
    "                 --scorer [0] and --policy streaming-llm [4] only\n";

void pb_cli_policy_init(pb_cli_policy *p, const char *cmd) {
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->policy = PB_CLI_POLICY_PYRAMIDKV;
    p->scorer = -1;
}

int pb_cli_policy_parse(pb_cli_policy *p, const char *flag, const char *value) {
    if (strcmp(flag, "--scorer") == 0) {
        uint32_t scorer = 0;
        if (pb_cli_lookup_scorer(p->cmd, value, &scorer) != 0)
            return PB_CLI_USAGE;
        p->scorer = (int)scorer;
        p->policy = -1;
        p->scorer_set = 1;
    } else {
        int id = 0;
        if (pb_cli_lookup_policy(p->cmd, value, &id) != 0) return PB_CLI_USAGE;
        p->policy = id;
        p->scorer = -1;
        p->policy_set = 1;
    }
    if (p->policy_set && p->scorer_set)
        return pb_cli_usage_error(p->cmd, "--policy and --scorer conflict: "
                                  "give one (--policy a policy, --scorer the "
                                  "native surface with that scorer)");
    return 0;
}

static unsigned reads_of(const pb_cli_policy *p) {
    if (p->policy < 0) return READS_WINDOW | READS_RECENT | READS_SINKS;
    return vtables[p->policy].reads;
}

uint32_t pb_cli_policy_floor(const pb_cli_policy *p, uint32_t recent) {
    if (p->policy < 0) return recent + 1u;
    const vt_entry *e = &vtables[p->policy];
    return pb_wl_floor_of(e->kind, recent,
                          e->kind == PB_WL_PARAMS_STREAMING_LLM
                              ? (p->sinks_set ? p->sinks : PB_CLI_DEFAULT_SINKS)
                              : 0u);
}

int pb_cli_policy_check(const pb_cli_policy *p, const uint32_t *budgets,
                        size_t n_budgets, uint32_t recent) {
    const unsigned reads = reads_of(p);
    const char *name = pb_cli_policy_name(p);
    if (p->sinks_set && !(reads & READS_SINKS))
        return pb_cli_usage_error(p->cmd, "--sinks: policy %s has no sinks "
                                  "(use --scorer with --sinks, or --policy "
                                  "streaming-llm)", name);
    if (p->recent_set && !(reads & READS_RECENT))
        return pb_cli_usage_error(p->cmd, "--recent: policy %s has no "
                                  "protected window", name);
    if ((p->obs_set || p->kernel_set) && !(reads & READS_WINDOW))
        return pb_cli_usage_error(p->cmd, "--%s: policy %s keeps no "
                                  "observation window",
                                  p->obs_set ? "obs" : "kernel", name);
    const uint32_t floor = pb_cli_policy_floor(p, recent);
    for (size_t i = 0; i < n_budgets; ++i)
        if (budgets[i] < floor)
            return pb_cli_usage_error(
                p->cmd, "--budget: %u is below %u, the least policy %s keeps "
                "(%s + 1)", budgets[i], floor, name,
                (reads & READS_RECENT) ? "--recent" : "--sinks");
    return 0;
}

void pb_cli_policy_apply(const pb_cli_policy *p, pb_wl_run_params *run) {
    if (p->policy < 0) {
        run->vtable = NULL;
        run->params_kind = PB_WL_PARAMS_NATIVE;
        run->scorer = (uint32_t)p->scorer;
        run->sinks = p->sinks_set ? p->sinks : 0u;
        return;
    }
    const vt_entry *e = &vtables[p->policy];
    run->vtable = e->vtable;
    run->params_kind = e->kind;
    run->scorer = (uint32_t)e->scorer;
    run->sinks = p->sinks_set ? p->sinks : PB_CLI_DEFAULT_SINKS;
    if (e->kind == PB_WL_PARAMS_TOVA || e->kind == PB_WL_PARAMS_STREAMING_LLM ||
        e->kind == PB_WL_PARAMS_SLIDING_WINDOW)
        run->recent_window = 0u; /* these read none */
}

pb_status pb_cli_policy_layer_bytes(const pb_cli_policy *p, uint32_t budget,
                                    uint32_t ratio, uint32_t layer,
                                    uint32_t layers, uint32_t recent,
                                    uint32_t obs, uint32_t kernel,
                                    size_t *bytes) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = budget;
    c.layer = layer;
    c.num_layers = layers;
    c.pyramid_ratio = ratio;
    c.recent_window = recent;
    c.obs_window = obs;
    c.pool_kernel = kernel;
    if (p->policy < 0) {
        c.scorer = (uint32_t)p->scorer;
        c.sinks = p->sinks_set ? p->sinks : 0u;
        return pb_kvcache_size(&c, bytes);
    }
    const vt_entry *e = &vtables[p->policy];
    if (e->kind != PB_WL_PARAMS_PYRAMIDKV) {
        /* One layer whose budget is the layer's effective share, as the
         * harness creates it. */
        const uint32_t share =
            pb_kvcache_pyramid_budget(budget, layer, layers, ratio);
        const uint32_t floor = pb_cli_policy_floor(p, recent);
        c.budget = share > floor ? share : floor;
        c.layer = 0u;
        c.num_layers = 1u;
        c.scorer = (uint32_t)e->scorer;
        if (!(e->reads & READS_RECENT)) c.recent_window = 0u;
        if (!(e->reads & READS_WINDOW)) {
            c.obs_window = 1u;
            c.pool_kernel = 1u;
        }
        c.sinks = (e->reads & READS_SINKS)
                      ? (p->sinks_set ? p->sinks : PB_CLI_DEFAULT_SINKS)
                      : 0u;
    }
    return pb_kvcache_size(&c, bytes);
}

const char *pb_cli_policy_name(const pb_cli_policy *p) {
    return p->policy < 0 ? native_names[p->scorer]
                         : pb_cli_policy_canonical(p->policy);
}

const char *pb_cli_policy_scorer_name(const pb_cli_policy *p) {
    return p->policy < 0 ? pb_cli_scorer_canonical((uint32_t)p->scorer) : NULL;
}

void pb_cli_policy_native(const pb_cli_policy *p, uint32_t *scorer,
                          uint32_t *sinks, int *reads_recent) {
    const unsigned reads = reads_of(p);
    if (p->policy < 0) {
        *scorer = (uint32_t)p->scorer;
        *sinks = p->sinks_set ? p->sinks : 0u;
    } else {
        *scorer = (uint32_t)vtables[p->policy].scorer;
        *sinks = (reads & READS_SINKS)
                     ? (p->sinks_set ? p->sinks : PB_CLI_DEFAULT_SINKS)
                     : 0u;
    }
    *reads_recent = (reads & READS_RECENT) != 0u;
}

void pb_cli_policy_describe(const pb_cli_policy *p, uint32_t recent,
                            uint32_t obs, uint32_t kernel) {
    const unsigned reads = reads_of(p);
    printf("policy %s", pb_cli_policy_name(p));
    if (reads & READS_RECENT) printf(", recent %u", recent);
    if ((reads & READS_WINDOW) &&
        (p->policy >= 0 || p->scorer == (int)PB_SCORER_WINDOW))
        printf(", obs %u, kernel %u", obs, kernel);
    if (reads & READS_SINKS)
        printf(", sinks %u",
               p->sinks_set ? p->sinks
                             : (p->policy < 0 ? 0u : PB_CLI_DEFAULT_SINKS));
}
