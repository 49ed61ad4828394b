/*
 * test_cli_bench_plan.c - `pyramidkv bench` and `pyramidkv plan` as a user
 * runs them (the built program, through popen): the commands of
 * docs/performance.md (nine published figures; flat layer 0 at ratio 1), the JSON keys,
 * the plan's arithmetic against pb_kvcache_pyramid_budget and the byte and
 * block formulas, --help, and usage errors: exit status 2 with one line on
 * stderr naming the flag.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "cli_run.h"

#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

static void test_usage_errors(void **state) {
    (void)state;
    cli_expect_usage_error("bench --bogus", "--bogus");
    cli_expect_usage_error("bench --budget abc", "--budget");
    cli_expect_usage_error("bench --budget", "--budget");
    cli_expect_usage_error("bench --budget 16", "--budget");
    cli_expect_usage_error("bench --budget 512,,1024", "--budget");
    cli_expect_usage_error("bench --budget 5000", "--budget");
    cli_expect_usage_error("bench --ratio 0", "--ratio");
    cli_expect_usage_error("bench --ratio 1,x", "--ratio");
    cli_expect_usage_error("bench --layers 0", "--layers");
    cli_expect_usage_error("bench --layers=-3", "--layers");
    cli_expect_usage_error("bench --trace nope", "--trace");
    cli_expect_usage_error("bench --trace funnel,funnel", "--trace");
    cli_expect_usage_error("bench --trace decode-4096 --layers 4", "--layers");
    cli_expect_usage_error("bench --kernel 4", "--kernel");
    cli_expect_usage_error("bench --obs x", "--obs");
    cli_expect_usage_error("bench --recent -1", "--recent");
    cli_expect_usage_error("bench --recent 600", "--budget");
    cli_expect_usage_error("bench --json=yes", "--json");
    cli_expect_usage_error("bench stray", "stray");
    cli_expect_usage_error("bench --layers 4096 --budget 4096 --ratio 1,4096",
                           "--layers");
    cli_expect_usage_error("plan --budget 512 --budget 256", "--budget");
    cli_expect_usage_error("plan --recent 8 --recent-window 8", "--recent");
    cli_expect_usage_error("plan --budget 512 --layers 32 --ratio 4 --block-size 0",
                           "--block-size");
    cli_expect_usage_error("plan --budget 512 --layers 32 --ratio 4 --kv-heads x",
                           "--kv-heads");
    cli_expect_usage_error("plan --budget 0 --layers 32 --ratio 4", "--budget");
    cli_expect_usage_error("plan --budget 512 --layers 32 --ratio 4 --frob 1",
                           "--frob");
    cli_expect_usage_error("plan --budget 512 --layers 32 --ratio 4 --kv-heads "
                       "4294967295 --head-dim 4294967295 --dtype-bytes 4",
                       "--kv-heads");
    cli_expect_usage_error("plan --budget 4294967295 --layers 65536 --ratio 1 "
                       "--kv-heads 65536 --head-dim 65536",
                       "--budget");
}

static void test_help(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(cli_run("bench --help", 0, &out), 0);
    assert_non_null(strstr(out, "usage: pyramidkv bench"));
    free(out);
    assert_int_equal(cli_run("plan --help", 0, &out), 0);
    assert_non_null(strstr(out, "usage: pyramidkv plan"));
    assert_non_null(strstr(out, "\n  cake "));
    free(out);
    assert_int_equal(cli_run("--help", 0, &out), 0);
    assert_non_null(strstr(out, "bench"));
    assert_non_null(strstr(out, "plan"));
    free(out);
}

/* The object has exactly these keys, in this order. */
static void exact_keys(const cJSON *obj, const char *const *keys, size_t n) {
    size_t i = 0;
    for (const cJSON *c = obj->child; c != NULL; c = c->next, ++i) {
        assert_true(i < n);
        assert_string_equal(c->string, keys[i]);
    }
    assert_int_equal(i, n);
}

/* Acceptance: pyramidkv bench --trace decode-4096 --layers 1
 * --budget 256,512,1024 --json reproduces the nine published figures. */
static void test_bench_nine_figures(void **state) {
    (void)state;
    static const char *const top_keys[] = {"trace", "layers", "policy",
                                           "results"};
    static const char *const result_keys[] = {
        "budget", "ratio", "retainedAttentionMass", "heavyHitterRecall",
        "evictionCalls", "peakHeld", "perLayer"};
    const double want[3][4] = {{256, 0.783378, 0.890183, 3840},
                               {512, 0.82119, 0.901949, 3584},
                               {1024, 0.888049, 0.941169, 3072}};
    cJSON *doc = cli_json("bench --trace decode-4096 --layers 1 "
                          "--budget 256,512,1024 --json");
    exact_keys(doc, top_keys, 4);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(doc, "trace")->valuestring,
        "decode-4096");
    assert_true(cli_num(doc, "layers") == 1.0);
    const cJSON *results = cli_array(doc, "results", 3);
    for (int i = 0; i < 3; ++i) {
        const cJSON *r = cJSON_GetArrayItem(results, i);
        exact_keys(r, result_keys, 7);
        assert_true(cli_num(r, "budget") == want[i][0]);
        assert_true(cli_num(r, "ratio") == 1.0);
        assert_true(cli_num(r, "retainedAttentionMass") == want[i][1]);
        assert_true(cli_num(r, "heavyHitterRecall") == want[i][2]);
        assert_true(cli_num(r, "evictionCalls") == want[i][3]);
        assert_true(cli_num(r, "peakHeld") == want[i][0] + 1.0);
        cli_array(r, "perLayer", 1);
    }
    cJSON_Delete(doc);
}

/* Acceptance: --trace flat at ratio 1 gives layer 0 the decode-4096
 * figures exactly (32 layers, the default, named explicitly). */
static void test_bench_flat_layer0(void **state) {
    (void)state;
    const double want[3][4] = {{256, 0.783378, 0.890183, 3840},
                               {512, 0.82119, 0.901949, 3584},
                               {1024, 0.888049, 0.941169, 3072}};
    cJSON *doc = cli_json("bench --trace flat --layers 32 --ratio 1 "
                          "--budget 256,512,1024 --json");
    assert_true(cli_num(doc, "layers") == 32.0);
    const cJSON *results = cli_array(doc, "results", 3);
    for (int i = 0; i < 3; ++i) {
        const cJSON *r = cJSON_GetArrayItem(results, i);
        const cJSON *pl = cli_array(r, "perLayer", 32);
        const cJSON *l0 = cJSON_GetArrayItem(pl, 0);
        assert_true(cli_num(l0, "layer") == 0.0);
        assert_true(cli_num(l0, "share") == want[i][0]);
        assert_true(cli_num(l0, "retainedAttentionMass") == want[i][1]);
        assert_true(cli_num(l0, "heavyHitterRecall") == want[i][2]);
        assert_true(cli_num(l0, "evictionCalls") == want[i][3]);
    }
    cJSON_Delete(doc);
}

/* A small layered run prints the table, every trace, and the reading. */
static void test_bench_table(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(cli_run("bench --layers 4 --budget 64 --ratio 1,4 "
                             "--per-layer", 0, &out), 0);
    assert_non_null(strstr(out, "funnel"));
    assert_non_null(strstr(out, "flat"));
    assert_non_null(strstr(out, "inverted"));
    assert_non_null(strstr(out, "\nreading ("));
    assert_non_null(strstr(out, "per layer"));
    free(out);
    /* Several traces with --json: an array of documents. */
    cJSON *doc = cli_json("bench --trace funnel,inverted --layers 2 "
                          "--budget 64 --ratio 1,2 --json");
    assert_true(cJSON_IsArray(doc));
    assert_int_equal(cJSON_GetArraySize(doc), 2);
    const cJSON *first = cJSON_GetArrayItem(doc, 0);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(first, "trace")->valuestring,
        "funnel");
    cJSON_Delete(doc);
}

typedef struct plan_case {
    uint32_t budget, layers, ratio, heads, dim, dtype, block;
} plan_case;

static void check_plan(const plan_case *c) {
    char args[256];
    snprintf(args, sizeof args,
             "plan --budget %u --layers %u --ratio %u --kv-heads %u "
             "--head-dim %u --dtype-bytes %u --block-size %u --json",
             c->budget, c->layers, c->ratio, c->heads, c->dim, c->dtype,
             c->block);
    cJSON *doc = cli_json(args);
    const double per_pos = 2.0 * c->heads * (double)c->dim * c->dtype;
    const uint32_t floor = 33u; /* the default --recent 32, plus one */
    assert_true(cli_num(doc, "bytesPerPosition") == per_pos);
    const cJSON *pl = cJSON_GetObjectItemCaseSensitive(doc, "perLayer");
    assert_int_equal(cJSON_GetArraySize(pl), (int)c->layers);
    double total_share = 0, total_held = 0, total_bytes = 0, total_blocks = 0;
    for (uint32_t k = 0; k < c->layers; ++k) {
        const cJSON *l = cJSON_GetArrayItem(pl, (int)k);
        const uint32_t share =
            pb_kvcache_pyramid_budget(c->budget, k, c->layers, c->ratio);
        const uint32_t held = share > floor ? share : floor;
        const uint64_t blocks = held / c->block + (held % c->block != 0u);
        assert_true(cli_num(l, "layer") == (double)k);
        assert_true(cli_num(l, "share") == (double)share);
        assert_true(cli_num(l, "held") == (double)held);
        assert_true(cli_num(l, "bytes") == per_pos * (double)held);
        assert_true(cli_num(l, "blocks") == (double)blocks);
        total_share += share;
        total_held += held;
        total_bytes += per_pos * (double)held;
        total_blocks += (double)blocks;
    }
    assert_true(cli_num(doc, "total") == total_share);
    assert_true(cli_num(doc, "held") == total_held);
    const cJSON *shares = cJSON_GetObjectItemCaseSensitive(doc, "shares");
    assert_int_equal(cJSON_GetArraySize(shares), (int)c->layers);
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(doc, "schedule")->valuestring,
        "arithmetic");
    assert_true(total_share == (double)pb_kvcache_pyramid_total(
                                   c->budget, c->layers, c->ratio));
    const cJSON *total = cJSON_GetObjectItemCaseSensitive(doc, "totals");
    assert_true(cli_num(total, "positions") == total_held);
    assert_true(cli_num(total, "bytes") == total_bytes);
    assert_true(cli_num(total, "blocks") == total_blocks);
    const cJSON *uni = cJSON_GetObjectItemCaseSensitive(doc, "uniform");
    const uint32_t uheld = c->budget > floor ? c->budget : floor;
    const double ublocks = (double)(uheld / c->block + (uheld % c->block != 0u));
    assert_true(cli_num(uni, "positions") == (double)uheld * c->layers);
    assert_true(cli_num(uni, "bytes") == per_pos * uheld * c->layers);
    assert_true(cli_num(uni, "blocks") == ublocks * c->layers);
    cJSON_Delete(doc);
}

static void test_plan_arithmetic(void **state) {
    (void)state;
    const plan_case cases[] = {
        {512u, 32u, 4u, 8u, 128u, 2u, 16u},
        {512u, 32u, 1u, 8u, 128u, 2u, 16u},
        {100u, 7u, 3u, 2u, 64u, 4u, 7u},
        {1u, 5u, 1000u, 1u, 1u, 1u, 1u},
        {40u, 80u, 8u, 32u, 128u, 1u, 256u},
        {4294967295u, 3u, 4294967295u, 8u, 128u, 2u, 16u},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
        check_plan(&cases[i]);

    /* Equal total memory counts what the layers hold: taper at budget 64
     * over 8 layers gives the deep layers 22 and 5, below the floor of 33
     * (recent 32 + 1), so they hold 33 each: 551 positions, +39 against
     * uniform's 512, not the shares' +0. */
    cJSON *tp = cli_json("plan --schedule taper --budget 64 --layers 8 --json");
    assert_true(cli_num(tp, "total") == 512.0);
    assert_true(cli_num(tp, "held") == 551.0);
    assert_true(cli_num(cJSON_GetObjectItemCaseSensitive(tp, "totals"),
                        "positions") == 551.0);
    cJSON_Delete(tp);
    char *text = NULL;
    assert_int_equal(cli_run("plan --schedule taper --budget 64 --layers 8", 0,
                             &text), 0);
    assert_non_null(strstr(text, "+39"));
    free(text);
    /* With --recent 0 nothing is lifted: held is the shares' sum. */
    tp = cli_json("plan --schedule taper --budget 64 --layers 8 --recent 0 "
                  "--json");
    assert_true(cli_num(tp, "held") == 512.0);
    cJSON_Delete(tp);

    /* The text form has a row per layer and the totals. */
    char *out = NULL;
    assert_int_equal(cli_run("plan --budget 512 --layers 32 --ratio 4", 0,
                             &out), 0);
    assert_non_null(strstr(out, "\ntotal "));
    assert_non_null(strstr(out, "\nuniform "));
    free(out);
}

/* plan --schedule NAME --json: the shares and total are the library's,
 * for every schedule; the floor marks follow --recent-window. */
static void test_plan_schedules(void **state) {
    (void)state;
    static const struct {
        const char *flags;
        uint32_t kind, layers, budget;
    } cases[] = {
        {"--schedule uniform", PB_SCHEDULE_UNIFORM, 5, 77},
        {"--schedule arithmetic --ratio 4", PB_SCHEDULE_ARITHMETIC, 32, 128},
        {"--schedule kvfactory --window 8 --beta 20", PB_SCHEDULE_KVFACTORY,
         32, 64},
        {"--schedule kvfactory-balanced --window 8 --beta 20",
         PB_SCHEDULE_KVFACTORY_BALANCED, 32, 64},
        {"--schedule taper --sinks 4 --beta 2.0", PB_SCHEDULE_TAPER, 12, 512},
        {"--schedule curve --ratio 4 --gamma 0.75", PB_SCHEDULE_CURVE, 32,
         2048},
        {"--schedule geometric --ratio 8", PB_SCHEDULE_GEOMETRIC, 32, 128},
        {"--schedule profile --weights 1,0.5,0.25,0 --min-share 10",
         PB_SCHEDULE_PROFILE, 4, 100},
        {"--schedule cake --weights 1,0.5,0.25,0 --window 8",
         PB_SCHEDULE_CAKE, 4, 64},
    };
    static const uint32_t profile_w[4] = {100u, 50u, 25u, 0u};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        char args[256];
        snprintf(args, sizeof args, "plan --budget %u --layers %u %s --json",
                 cases[i].budget, cases[i].layers, cases[i].flags);
        cJSON *doc = cli_json(args);
        pb_schedule s = PB_SCHEDULE_DEFAULT;
        s.kind = cases[i].kind;
        s.num_layers = cases[i].layers;
        s.budget = cases[i].budget;
        s.ratio = cases[i].kind == PB_SCHEDULE_GEOMETRIC ? 8u : 4u;
        s.taper_beta = 2.0;
        s.weights = profile_w;
        s.min_share = cases[i].kind == PB_SCHEDULE_PROFILE ? 10u : 0u;
        uint32_t want[32];
        uint64_t total = 0;
        assert_int_equal(pb_kvcache_schedule_shares(&s, want, 32, &total),
                         PB_OK);
        assert_string_equal(
            cJSON_GetObjectItemCaseSensitive(doc, "schedule")->valuestring,
            pb_schedule_kind_name(cases[i].kind));
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(doc, "shares");
        assert_int_equal(cJSON_GetArraySize(sh), (int)cases[i].layers);
        for (uint32_t l = 0; l < cases[i].layers; ++l) {
            assert_true(cJSON_GetArrayItem(sh, (int)l)->valuedouble ==
                        (double)want[l]);
            const cJSON *pl = cJSON_GetArrayItem(
                cJSON_GetObjectItemCaseSensitive(doc, "perLayer"), (int)l);
            assert_int_equal(
                cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(pl, "floorBinds")),
                want[l] < 33u);
        }
        assert_true(cli_num(doc, "total") == (double)total);
        cJSON_Delete(doc);
    }
    /* The paper-code overshoot shows in the text form: shares 2288, held
     * 2303 (three deep layers lifted to 33), +255 against uniform. */
    char *out = NULL;
    assert_int_equal(cli_run("plan --budget 64 --layers 32 --schedule "
                             "kvfactory --window 8 --beta 20", 0, &out), 0);
    assert_non_null(strstr(out, "\ntotal            2288"));
    assert_non_null(strstr(out, "+255"));
    free(out);
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule nope",
                           "--schedule");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule taper,curve",
                           "--schedule");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule kvfactory "
                       "--gamma 0.5", "--gamma");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule kvfactory "
                       "--window 64", "--window");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule kvfactory "
                       "--beta 2.5", "--beta");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule curve "
                       "--gamma 0", "--gamma");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule curve "
                       "--gamma 0.0005", "--gamma");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule profile "
                       "--weights 1,2,3", "--weights");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule profile",
                           "--weights");
    /* cake: --weights are the layers' preferences, the message says so. */
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule cake",
                           "--weights is required for the cake schedule (the "
                           "layers' CAKE preferences");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule cake "
                       "--weights 1,2,3,4 --window 64", "--window");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule cake "
                       "--weights 1,2,3,4 --min-share 1", "--min-share");
    cli_expect_usage_error("plan --budget 64 --layers 2 --schedule profile "
                       "--weights 0,0", "refuses");
    cli_expect_usage_error("plan --budget 64 --layers 4 --schedule taper "
                       "--beta 0.5", "--beta");
}

/* bench --schedule: each configuration runs its schedule's shares (the
 * library's, per layer) and reports its real total; usage errors name the
 * flag. */
static void test_bench_schedules(void **state) {
    (void)state;
    cJSON *doc = cli_json("bench --schedule uniform,kvfactory,taper "
                          "--budget 64 --trace flat --layers 6 --window 8 "
                          "--beta 3 --json");
    const cJSON *results = cli_array(doc, "results", 3);
    for (int i = 0; i < 3; ++i) {
        const cJSON *r = cJSON_GetArrayItem(results, i);
        const char *name =
            cJSON_GetObjectItemCaseSensitive(r, "schedule")->valuestring;
        pb_schedule s = PB_SCHEDULE_DEFAULT;
        assert_int_equal(pb_schedule_kind_from_name(name, &s.kind), PB_OK);
        s.num_layers = 6;
        s.budget = 64;
        s.window = 8;
        s.sinks = 4; /* taper's n_sink: the policies' --sinks, default 4 */
        s.beta = 3;
        s.taper_beta = 3.0;
        uint32_t want[6];
        uint64_t total = 0;
        assert_int_equal(pb_kvcache_schedule_shares(&s, want, 6, &total),
                         PB_OK);
        assert_true(cli_num(r, "shareTotal") == (double)total);
        const cJSON *pl = cJSON_GetObjectItemCaseSensitive(r, "perLayer");
        for (int l = 0; l < 6; ++l) {
            const cJSON *lj = cJSON_GetArrayItem(pl, l);
            assert_true(cli_num(lj, "share") == (double)want[l]);
            assert_true(cli_num(lj, "effectiveShare") ==
                        (double)(want[l] > 32u ? want[l] : 33u));
        }
        /* beta 3: min 56 / 3 = 18, max 94, steps 76 / 5 = 15 (floored);
         * 6 x 102 - 15 x 15 = 387 overshoots 6 x 64 = 384 */
        if (strcmp(name, "kvfactory") == 0) assert_int_equal(total, 387u);
    }
    cJSON_Delete(doc);
    char *out = NULL;
    assert_int_equal(cli_run("bench --schedule uniform,kvfactory --budget 64 "
                             "--trace flat --layers 6",
                             0, &out),
                     0);
    assert_non_null(strstr(out, "vs LxB"));
    assert_non_null(strstr(out, "kvfactory spends +"));
    free(out);
    cli_expect_usage_error("bench --schedule nope", "--schedule");
    cli_expect_usage_error("bench --schedule cake --layers 4",
                           "--weights is required for the cake schedule");
    doc = cli_json("bench --schedule uniform,cake --weights 4,3,2,1 "
                   "--budget 64 --trace flat --layers 4 --json");
    const cJSON *res = cli_array(doc, "results", 2);
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(
                            cJSON_GetArrayItem(res, 1), "schedule")
                            ->valuestring,
                        "cake");
    cJSON_Delete(doc);
    cli_expect_usage_error("bench --schedule kvfactory --gamma 1", "--gamma");
    cli_expect_usage_error("bench --schedule curve --ratio 2,4", "--ratio");
    cli_expect_usage_error("bench --schedule uniform --ratio 2", "--ratio");
    cli_expect_usage_error("bench --window 8", "--window");
    cli_expect_usage_error("bench --schedule profile --layers 4 --weights 1,2",
                           "--weights");
}

/* `test_cli_bench_plan flat32` runs only the 32-layer flat acceptance run
 * (registered as its own ctest entry because it is the slow one); with no
 * argument, every other test. */
PB_TEST_MAIN_SLOW("flat32",
                  PB_TESTS(cmocka_unit_test(test_bench_flat_layer0)),
                  PB_TESTS(cmocka_unit_test(test_usage_errors),
                           cmocka_unit_test(test_help),
                           cmocka_unit_test(test_bench_nine_figures),
                           cmocka_unit_test(test_bench_table),
                           cmocka_unit_test(test_plan_arithmetic),
                           cmocka_unit_test(test_plan_schedules),
                           cmocka_unit_test(test_bench_schedules)))
