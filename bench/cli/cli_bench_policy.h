/*
 * cli_bench_policy.h - which policy `pyramidkv bench` puts in every layer:
 * a policybook vtable by name (--policy) or the native surface with a
 * scorer (--scorer) and attention sinks (--sinks), for `bench` and
 * `replay`. Owns the flags' validity for each choice (the names are
 * cli_options.h's), the memory estimate of one layer and
 * the one-line description; cli_bench.c owns the rest of the command.
 */
#ifndef PB_CLI_BENCH_POLICY_H
#define PB_CLI_BENCH_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"
#include "workload_harness.h"

/* The choice and the parameters it reads. */
typedef struct pb_cli_policy {
    const char *cmd; /* the subcommand, for messages */
    int policy;     /* a pb_cli_policy_id; -1 with a scorer */
    int scorer;     /* a pb_scorer with --scorer, else -1 */
    uint32_t sinks; /* --sinks (streaming-llm's default 4, native 0) */
    int sinks_set;
    int recent_set, obs_set, kernel_set; /* the window flags given */
    int policy_set, scorer_set;
} pb_cli_policy;

/* The default: --policy pyramidkv; `cmd` names the subcommand in
 * messages. */
void pb_cli_policy_init(pb_cli_policy *p, const char *cmd);

/* Parses --policy NAME or --scorer NAME (flag is either; names and aliases
 * are cli_options.h's). Returns 0 or PB_CLI_USAGE (message printed), also
 * when both flags are given. */
int pb_cli_policy_parse(pb_cli_policy *p, const char *flag, const char *value);

/* After every flag: refuses --sinks, --recent, --obs or --kernel where the
 * choice does not read them, and a budget the choice cannot keep. Returns
 * 0 or PB_CLI_USAGE (message printed). */
int pb_cli_policy_check(const pb_cli_policy *p, const uint32_t *budgets,
                        size_t n_budgets, uint32_t recent);

/* Fills the harness's policy fields: vtable, params kind, sinks, scorer. */
void pb_cli_policy_apply(const pb_cli_policy *p, pb_wl_run_params *run);

/* The bytes layer `layer` of `layers` would allocate at (budget, ratio),
 * as the library reports them. Returns the library's status. */
pb_status pb_cli_policy_layer_bytes(const pb_cli_policy *p, uint32_t budget,
                                    uint32_t ratio, uint32_t layer,
                                    uint32_t layers, uint32_t recent,
                                    uint32_t obs, uint32_t kernel,
                                    size_t *bytes);

/* "h2o", "native cumulative": the name in the output. */
const char *pb_cli_policy_name(const pb_cli_policy *p);
/* The scorer's name with --scorer, else NULL. */
const char *pb_cli_policy_scorer_name(const pb_cli_policy *p);

/* The native configuration (pb_kvcache_create) the choice runs as: its
 * scorer, its attention sinks, and whether it reads --recent. */
void pb_cli_policy_native(const pb_cli_policy *p, uint32_t *scorer,
                          uint32_t *sinks, int *reads_recent);

/* The least a layer keeps whatever its share (the harness's floor; for the
 * native surface recent + 1, which the library may raise). */
uint32_t pb_cli_policy_floor(const pb_cli_policy *p, uint32_t recent);

/* Prints the parameters the choice reads, e.g. "policy h2o, recent 32". */
void pb_cli_policy_describe(const pb_cli_policy *p, uint32_t recent,
                            uint32_t obs, uint32_t kernel);

/* The --help lines of --policy, --scorer and --sinks. */
extern const char pb_cli_policy_help[];

#endif /* PB_CLI_BENCH_POLICY_H */
