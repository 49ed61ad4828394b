/*
 * cli_plan.c - `pyramidkv plan`: the per-layer sizing a runtime needs: every
 * layer's share under a schedule (the arithmetic pyramid of
 * pb_kvcache_pyramid_budget by default, or any of the allocation family,
 * pb_kvcache_schedule_shares), its K+V bytes (2 x kv-heads x head-dim x
 * dtype-bytes x share) and its paged blocks (ceil(share / block-size)),
 * and the positions a layer actually holds: its effective share,
 * max(share, recent window + 1) (pb_kvcache_effective_budget, docs/spec.md
 * §3.2), whose bytes, blocks and total are compared with uniform budgets.
 *
 * Owns the flags and the output of the plan; the share arithmetic is the
 * library's, the schedule flags are cli_schedule.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "cli_commands.h"
#include "cli_options.h"
#include "cli_schedule.h"
#include "pyramidkv/pyramidkv.h"

#define PLAN_MAX_LAYERS 65536u

typedef struct plan_opts {
    uint32_t budget, layers, recent;
    uint32_t kv_heads, head_dim, dtype_bytes, block_size;
    pb_cli_schedule_flags sched;
    int json;
} plan_opts;

typedef struct plan_totals {
    uint64_t positions, bytes, blocks;
} plan_totals;

static void help(FILE *out) {
    fprintf(out,
        "usage: pyramidkv plan [--budget B] [--layers L] [--schedule NAME] [schedule\n"
        "                      options] [--recent N] [--kv-heads H] [--head-dim D]\n"
        "                      [--dtype-bytes N] [--block-size S] [--json]\n"
        "\n"
        "Sizes per-layer KV buffers: for every layer k its share in positions under\n"
        "the schedule and the positions it holds, max(share, N + 1): a policy with\n"
        "recent window N never targets fewer (docs/spec.md, section 3.2; a '*'\n"
        "marks a layer the floor lifts). Bytes 2 x H x D x N x held and paged\n"
        "blocks ceil(held / S) are of the held positions, and their totals are\n"
        "compared with uniform budgets (every layer max(B, N + 1)) at equal total\n"
        "memory: what the layers really hold, not the shares' sum.\n"
        "\n"
        "schedules (docs/guide.md, \"Choosing a schedule\"; the exact rules:\n"
        "docs/spec.md, section 12):\n"
        "  arithmetic          the PyramidKV pyramid, pb_kvcache_pyramid_budget; the\n"
        "                      default. --ratio. Shares' total <= L x B\n"
        "  uniform             B for every layer\n"
        "  kvfactory           the paper's code bit for bit; B is its KV size C.\n"
        "                      --window, --beta (integer), --prompt-len. Its total\n"
        "                      can exceed L x C\n"
        "  kvfactory-balanced  the same endpoints, exact steps: total L x C\n"
        "  taper               VeloxQuant-MLX's linear taper with sink floors:\n"
        "                      --sinks, --beta (decimal). Total L x B up to rounding\n"
        "  curve               the guide's C_min + (C_max - C_min) x^gamma with\n"
        "                      C_max / C_min = --ratio, --gamma; total exactly L x B\n"
        "  geometric           proportional to ratio^(-l/(L-1)); total exactly L x B\n"
        "  profile             proportional to --weights, above --min-share; total\n"
        "                      exactly L x B\n"
        "  cake                CAKE: --window for every layer plus a part of\n"
        "                      L x (B - window) proportional to --weights (the\n"
        "                      layers' preferences); --prompt-len. Total L x B\n"
        "\n"
        "options:\n"
        "  --budget B        average positions per layer (kvfactory: the KV size C),\n"
        "                    1 .. 4294967295 [%u]\n"
        "  --layers L        layers, 1 .. %u [%u]\n"
        "  --schedule NAME   one of the schedules above [arithmetic]\n"
        "  --ratio R         first layer's share over the last's, >= 1 (arithmetic,\n"
        "                    curve, geometric) [%u]\n"
        "  --window W        kvfactory, cake: the observation window, < B [8]\n"
        "  --beta X          kvfactory: integer >= 1 [20]; taper: decimal >= 1 [2.0]\n"
        "  --prompt-len Q    kvfactory, cake: the prompt length, >= 1 [not given: a\n"
        "                    prompt longer than every clamp]\n"
        "  --sinks S         taper: attention sinks; every layer keeps >= S + 1 [%u]\n"
        "  --gamma G         curve: decimal 0.001 .. 1000, three decimals at most;\n"
        "                    1 is linear, 0.7 - 0.8 the guide's suggestion [0.75]\n"
        "  --weights W,...   profile, cake: L non-negative decimals (entropy, CAKE\n"
        "                    ...), scaled exactly to integers by one power of ten\n"
        "  --min-share M     profile: every layer's base, 0 .. B [0]\n"
        "  --recent N        the policies' recent window: a layer holds at least\n"
        "                    N + 1 [%u]\n"
        "  --kv-heads H      KV heads per layer, >= 1 [8]\n"
        "  --head-dim D      dimensions per head, >= 1 [128]\n"
        "  --dtype-bytes N   bytes per element, >= 1 [2]\n"
        "  --block-size S    positions per paged block, >= 1 [16]\n"
        "  --json            one JSON object: \"schedule\", \"shares\" (layer 0 first),\n"
        "                    \"total\" (their exact sum), \"held\" (held positions'\n"
        "                    total), \"perLayer\" (share, held, bytes, blocks,\n"
        "                    floorBinds), \"totals\" (of the held positions),\n"
        "                    \"uniform\"\n"
        "  --help            this text\n"
        "\n"
        "A schedule the library refuses is a usage error, with its reason.\n",
        PB_CLI_DEFAULT_BUDGET, PLAN_MAX_LAYERS, PB_CLI_DEFAULT_LAYERS,
        PB_CLI_DEFAULT_RATIO, PB_CLI_DEFAULT_SINKS, PB_CLI_DEFAULT_RECENT);
    pb_cli_help_common(out);
}

static int parse(int argc, char **argv, plan_opts *o) {
    memset(o, 0, sizeof *o);
    o->kv_heads = 8;
    o->head_dim = 128;
    o->dtype_bytes = 2;
    o->block_size = 16;
    o->budget = PB_CLI_DEFAULT_BUDGET;
    o->layers = PB_CLI_DEFAULT_LAYERS;
    o->recent = PB_CLI_DEFAULT_RECENT;
    pb_cli_walk w;
    pb_cli_walk_init(&w, "plan", argc, argv);
    int rc;
    while ((rc = pb_cli_walk_flag(&w, help)) == 1) {
        const char *f = w.flag, *v = NULL;
        if (strcmp(f, "--json") == 0) {
            if (pb_cli_walk_no_value(&w) != 0) return PB_CLI_USAGE;
            o->json = 1;
            continue;
        }
        const int sf = pb_cli_schedule_flag(&w, &o->sched);
        if (sf == 1) continue;
        if (sf != 0) return PB_CLI_USAGE;
        uint32_t *dst = NULL;
        uint32_t lo = 1, hi = UINT32_MAX;
        if (strcmp(f, "--budget") == 0) {
            dst = &o->budget;
        } else if (strcmp(f, "--layers") == 0) {
            dst = &o->layers;
            hi = PLAN_MAX_LAYERS;
        } else if (strcmp(f, "--recent") == 0) {
            dst = &o->recent;
            lo = 0;
            hi = UINT32_MAX - 1u;
        } else if (strcmp(f, "--kv-heads") == 0) {
            dst = &o->kv_heads;
        } else if (strcmp(f, "--head-dim") == 0) {
            dst = &o->head_dim;
        } else if (strcmp(f, "--dtype-bytes") == 0) {
            dst = &o->dtype_bytes;
        } else if (strcmp(f, "--block-size") == 0) {
            dst = &o->block_size;
        } else {
            return pb_cli_usage_error("plan",
                                      "unknown option '%s' (see pyramidkv "
                                      "plan --help)", f);
        }
        if (pb_cli_walk_value(&w, &v) != 0) return PB_CLI_USAGE;
        if (pb_cli_parse_u32("plan", f, v, lo, hi, dst) != 0)
            return PB_CLI_USAGE;
    }
    if (rc != 0) return rc == PB_CLI_WALK_HELP ? 1 : PB_CLI_USAGE;
    return 0;
}

/* a * b into *out; -1 if it does not fit in 64 bits. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a != 0u && b > UINT64_MAX / a) return -1;
    *out = a * b;
    return 0;
}

static int add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return -1;
    *out = a + b;
    return 0;
}

static uint64_t blocks_of(uint64_t positions, uint32_t block) {
    return positions / block + (positions % block != 0u ? 1u : 0u);
}

/* Bytes of one position's K and V: 2 x H x D x N. */
static int position_bytes(const plan_opts *o, uint64_t *out) {
    uint64_t v = 2u;
    if (mul_u64(v, o->kv_heads, &v) || mul_u64(v, o->head_dim, &v) ||
        mul_u64(v, o->dtype_bytes, &v))
        return -1;
    *out = v;
    return 0;
}

/* a - b as text with its sign, exact for any two uint64 values. */
static void signed_diff(char *buf, size_t len, uint64_t a, uint64_t b) {
    if (a >= b)
        snprintf(buf, len, "+%llu", (unsigned long long)(a - b));
    else
        snprintf(buf, len, "-%llu", (unsigned long long)(b - a));
}

static cJSON *raw_u64(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)v);
    return cJSON_CreateRaw(buf);
}

static cJSON *totals_json(const plan_totals *t) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "positions", raw_u64(t->positions));
    cJSON_AddItemToObject(o, "bytes", raw_u64(t->bytes));
    cJSON_AddItemToObject(o, "blocks", raw_u64(t->blocks));
    return o;
}

/* The shares of the requested schedule into shares[0 .. layers-1] and the
 * schedule itself into *s. Returns 0, PB_CLI_USAGE, or 1 (out of memory). */
static int compute_shares(const plan_opts *o, uint32_t *shares,
                          uint32_t *weights, pb_schedule *s) {
    uint32_t kinds[PB_CLI_MAX_SCHEDULES];
    size_t n = 0;
    if (pb_cli_schedule_kinds("plan", &o->sched, kinds, &n)) return PB_CLI_USAGE;
    if (n != 1)
        return pb_cli_usage_error("plan", "--schedule: one schedule at a time "
                                          "(bench compares several)");
    if (pb_cli_schedule_check_used("plan", &o->sched, kinds, 1))
        return PB_CLI_USAGE;
    if (pb_cli_schedule_build("plan", &o->sched, kinds[0], o->budget,
                              o->layers, weights, s))
        return PB_CLI_USAGE;
    if (kinds[0] == PB_SCHEDULE_ARITHMETIC) {
        /* pb_kvcache_pyramid_budgets, saturating shares included. */
        if (pb_kvcache_pyramid_budgets(o->budget, o->layers, s->ratio, shares,
                                       o->layers) != PB_OK) {
            fprintf(stderr, "pyramidkv plan: the library refused the plan\n");
            return 1;
        }
        return 0;
    }
    const pb_status st =
        pb_kvcache_schedule_shares(s, shares, o->layers, NULL);
    if (st != PB_OK)
        return pb_cli_usage_error("plan", "the library refuses this %s "
                                  "schedule: %s", pb_schedule_kind_name(s->kind),
                                  pb_status_str(st));
    return 0;
}

int pb_cli_plan(int argc, char **argv) {
    plan_opts o;
    const int prc = parse(argc, argv, &o); /* 1: --help printed */
    if (prc != 0) return prc == 1 ? 0 : prc;

    uint64_t per_pos;
    if (position_bytes(&o, &per_pos) != 0)
        return pb_cli_usage_error("plan",
                                  "--kv-heads x --head-dim x --dtype-bytes: "
                                  "K+V bytes per position overflow 64 bits");
    uint32_t *shares, *weights;
    if (pb_cli_schedule_arrays("plan", o.layers, &shares, &weights) != 0)
        return 1;
    pb_schedule sched;
    int rc = compute_shares(&o, shares, weights, &sched);
    free(weights); /* read only by the call above */
    sched.weights = NULL;
    if (rc != 0) {
        free(shares);
        return rc;
    }
    const uint32_t floor = o.recent + 1u;
#define HELD(share) ((share) > floor ? (share) : floor)

    /* The positions held: every layer max(share, floor); uniform: every
     * layer max(B, floor). Overflow anywhere is a usage error: the sizes
     * given cannot be represented. */
    plan_totals total = {0u, 0u, 0u}, uni = {0u, 0u, 0u};
    uint64_t share_total = 0;
    int overflow = 0;
    uint64_t uni_bytes_layer = 0;
    const uint32_t uni_held = HELD(o.budget);
    overflow |= mul_u64(per_pos, uni_held, &uni_bytes_layer);
    overflow |= mul_u64(uni_held, o.layers, &uni.positions);
    overflow |= mul_u64(uni_bytes_layer, o.layers, &uni.bytes);
    overflow |= mul_u64(blocks_of(uni_held, o.block_size), o.layers,
                        &uni.blocks);
    for (uint32_t k = 0; k < o.layers && !overflow; ++k) {
        uint64_t bytes = 0;
        const uint32_t held = HELD(shares[k]);
        share_total += shares[k];
        overflow |= mul_u64(per_pos, held, &bytes);
        overflow |= add_u64(total.positions, held, &total.positions);
        overflow |= add_u64(total.bytes, bytes, &total.bytes);
        overflow |= add_u64(total.blocks, blocks_of(held, o.block_size),
                            &total.blocks);
    }
    if (overflow) {
        free(shares);
        return pb_cli_usage_error("plan",
                                  "--budget x --layers: the byte totals "
                                  "overflow 64 bits");
    }

    char desc[160];
    pb_cli_schedule_describe(&sched, desc, sizeof desc);
    if (o.json) {
        cJSON *doc = cJSON_CreateObject();
        cJSON_AddStringToObject(doc, "schedule",
                                pb_schedule_kind_name(sched.kind));
        cJSON_AddStringToObject(doc, "description", desc);
        cJSON_AddNumberToObject(doc, "budget", o.budget);
        cJSON_AddNumberToObject(doc, "layers", o.layers);
        if (sched.kind == PB_SCHEDULE_ARITHMETIC ||
            sched.kind == PB_SCHEDULE_CURVE ||
            sched.kind == PB_SCHEDULE_GEOMETRIC)
            cJSON_AddNumberToObject(doc, "ratio", sched.ratio);
        cJSON_AddNumberToObject(doc, "kvHeads", o.kv_heads);
        cJSON_AddNumberToObject(doc, "headDim", o.head_dim);
        cJSON_AddNumberToObject(doc, "dtypeBytes", o.dtype_bytes);
        cJSON_AddNumberToObject(doc, "blockSize", o.block_size);
        cJSON_AddNumberToObject(doc, "recent", o.recent);
        cJSON_AddNumberToObject(doc, "floor", floor);
        cJSON_AddItemToObject(doc, "bytesPerPosition", raw_u64(per_pos));
        cJSON *sh = cJSON_AddArrayToObject(doc, "shares");
        for (uint32_t k = 0; k < o.layers; ++k)
            cJSON_AddItemToArray(sh, raw_u64(shares[k]));
        cJSON_AddItemToObject(doc, "total", raw_u64(share_total));
        cJSON_AddItemToObject(doc, "held", raw_u64(total.positions));
        cJSON *arr = cJSON_AddArrayToObject(doc, "perLayer");
        for (uint32_t k = 0; k < o.layers; ++k) {
            const uint32_t held = HELD(shares[k]);
            cJSON *l = cJSON_CreateObject();
            cJSON_AddNumberToObject(l, "layer", k);
            cJSON_AddNumberToObject(l, "share", shares[k]);
            cJSON_AddNumberToObject(l, "held", held);
            cJSON_AddItemToObject(l, "bytes", raw_u64(per_pos * held));
            cJSON_AddItemToObject(l, "blocks",
                                  raw_u64(blocks_of(held, o.block_size)));
            cJSON_AddBoolToObject(l, "floorBinds", shares[k] < floor);
            cJSON_AddItemToArray(arr, l);
        }
        cJSON_AddItemToObject(doc, "totals", totals_json(&total));
        cJSON_AddItemToObject(doc, "uniform", totals_json(&uni));
        char *text = cJSON_Print(doc);
        cJSON_Delete(doc);
        if (text == NULL) {
            fprintf(stderr, "pyramidkv plan: out of memory\n");
            rc = PB_CLI_FAILED;
        } else {
            puts(text);
            cJSON_free(text);
        }
    } else {
        printf("pyramidkv plan: %s x %u layers; K+V per position 2 x %u "
               "heads x %u dims x %u bytes = %llu bytes; blocks of %u "
               "positions; a layer holds at least %u (recent %u + 1)\n\n",
               desc, o.layers, o.kv_heads, o.head_dim, o.dtype_bytes,
               (unsigned long long)per_pos, o.block_size, floor, o.recent);
        printf("%-8s %12s %12s %22s %14s\n", "layer", "share", "held",
               "K+V bytes", "blocks");
        uint32_t below = 0;
        for (uint32_t k = 0; k < o.layers; ++k) {
            const int binds = shares[k] < floor;
            const uint32_t held = HELD(shares[k]);
            printf("%-8u %12u %11u%c %22llu %14llu\n", k, shares[k], held,
                   binds ? '*' : ' ', (unsigned long long)(per_pos * held),
                   (unsigned long long)blocks_of(held, o.block_size));
            below += (uint32_t)binds;
        }
        printf("%-8s %12llu %12llu %22llu %14llu\n", "total",
               (unsigned long long)share_total,
               (unsigned long long)total.positions,
               (unsigned long long)total.bytes,
               (unsigned long long)total.blocks);
        printf("%-8s %12s %12llu %22llu %14llu\n", "uniform", "",
               (unsigned long long)uni.positions,
               (unsigned long long)uni.bytes, (unsigned long long)uni.blocks);
        char dp[24], db[24], dk[24];
        signed_diff(dp, sizeof dp, total.positions, uni.positions);
        signed_diff(db, sizeof db, total.bytes, uni.bytes);
        signed_diff(dk, sizeof dk, total.blocks, uni.blocks);
        printf("%-8s %12s %12s %22s %14s\n", "diff", "", dp, db, dk);
        if (below > 0u)
            printf("\n* %u layer%s below %u positions: a policy with recent "
                   "window %u holds %u there; held, bytes and blocks count "
                   "%u.\n",
                   below, below == 1u ? " gets a share" : "s get shares",
                   floor, o.recent, floor, floor);
    }
#undef HELD
    free(shares);
    return rc;
}
