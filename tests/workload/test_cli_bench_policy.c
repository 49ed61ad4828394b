/*
 * test_cli_bench_policy.c - `pyramidkv bench --policy/--scorer/--sinks` as
 * a user runs it (the built program, through popen): the registry's 15
 * published decode-4096 figures of H2O, Scissorhands, TOVA, StreamingLLM
 * and the sliding window through their vtables; the same 15 through the
 * native surface, each policy being one scorer with the right recent
 * window and sinks; the pyramid over every vtable and scorer on a layered
 * trace at equal total memory; and the usage errors of the new flags.
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
#include "test_main.h"

typedef struct figure {
    double mass, recall;
} figure;

typedef struct member {
    const char *policy;     /* --policy NAME */
    const char *native;     /* the same policy on the native surface */
    const char *native_name; /* its "policy" in the JSON */
    figure at[3];           /* budgets 256, 512, 1024 */
} member;

/* The registry's figures; evictions are 3840, 3584, 3072 for all. */
static const member family[5] = {
    {"h2o", "--scorer cumulative", "native cumulative",
     {{0.643895, 0.886261}, {0.714859, 0.913715}, {0.784413, 0.945091}}},
    {"scissorhands", "--scorer votes", "native votes",
     {{0.641318, 0.882339}, {0.711377, 0.906047}, {0.784746, 0.945091}}},
    {"tova", "--scorer last --recent 0", "native last",
     {{0.778128, 0.882339}, {0.824012, 0.909793}, {0.885888, 0.937247}}},
    {"streaming-llm", "--scorer none --recent 0 --sinks 4", "native none",
     {{0.736691, 0.859419}, {0.786153, 0.88348}, {0.866203, 0.927572}}},
    {"sliding-window", "--scorer none --recent 0", "native none",
     {{0.596637, 0.742171}, {0.655518, 0.774107}, {0.754149, 0.833734}}},
};

static const double budgets[3] = {256, 512, 1024};
static const double evictions[3] = {3840, 3584, 3072};

static void check_figures(const char *choice, const char *name,
                          const member *m) {
    char args[256];
    snprintf(args, sizeof args,
             "bench --trace decode-4096 --layers 1 %s --budget 256,512,1024 "
             "--json", choice);
    cJSON *doc = cli_json(args);
    const cJSON *jp = cJSON_GetObjectItemCaseSensitive(doc, "policy");
    assert_true(cJSON_IsString(jp));
    assert_string_equal(jp->valuestring, name);
    assert_true(cli_num(doc, "layers") == 1.0);
    const cJSON *results = cli_array(doc, "results", 3);
    for (int i = 0; i < 3; ++i) {
        const cJSON *r = cJSON_GetArrayItem(results, i);
        const double mass = cli_num(r, "retainedAttentionMass");
        const double recall = cli_num(r, "heavyHitterRecall");
        const double ev = cli_num(r, "evictionCalls");
        if (mass != m->at[i].mass || recall != m->at[i].recall ||
            ev != evictions[i])
            print_error("pyramidkv %s: budget %.0f: %.6f, %.6f, %.0f; "
                        "published %.6f, %.6f, %.0f\n", args, budgets[i],
                        mass, recall, ev, m->at[i].mass, m->at[i].recall,
                        evictions[i]);
        assert_true(cli_num(r, "budget") == budgets[i]);
        assert_true(mass == m->at[i].mass);
        assert_true(recall == m->at[i].recall);
        assert_true(ev == evictions[i]);
        assert_true(cli_num(r, "peakHeld") == budgets[i] + 1.0);
    }
    cJSON_Delete(doc);
}

/* The 15 published pairs through the vtables, as the acceptance command
 * runs them. */
static void test_fifteen_figures_vtables(void **state) {
    (void)state;
    char choice[64];
    for (size_t k = 0; k < 5; ++k) {
        snprintf(choice, sizeof choice, "--policy %s", family[k].policy);
        check_figures(choice, family[k].policy, &family[k]);
    }
}

/* The same 15 through pb_kvcache_create: each policy is a scorer with its
 * recent window and sinks (TOVA, StreamingLLM and the sliding window
 * protect no recent window; StreamingLLM keeps 4 sinks). */
static void test_fifteen_figures_native(void **state) {
    (void)state;
    for (size_t k = 0; k < 5; ++k)
        check_figures(family[k].native, family[k].native_name, &family[k]);
}

/* Pyramid against uniform over every vtable and every scorer on a small
 * layered trace: equal total memory (the sum of shares never above layers
 * x budget; at ratio 1 exactly), one eviction per layer and step once
 * full, and the pyramid differs from uniform. */
static void test_layered_every_policy(void **state) {
    (void)state;
    const char *const choices[] = {
        "--policy pyramidkv", "--policy snapkv", "--policy h2o",
        "--policy scissorhands", "--policy tova", "--policy streaming-llm",
        "--policy sliding-window", "--scorer window --sinks 4",
        "--scorer cumulative --sinks 4", "--scorer last --sinks 4",
        "--scorer votes --sinks 4", "--scorer none --sinks 4"};
    for (size_t k = 0; k < sizeof choices / sizeof choices[0]; ++k) {
        char args[256];
        snprintf(args, sizeof args,
                 "bench --trace funnel --layers 4 --budget 96 --ratio 1,4 %s "
                 "--json", choices[k]);
        cJSON *doc = cli_json(args);
        const cJSON *results = cli_array(doc, "results", 2);
        const cJSON *uni = cJSON_GetArrayItem(results, 0);
        const cJSON *pyr = cJSON_GetArrayItem(results, 1);
        assert_true(cli_num(uni, "ratio") == 1.0 && cli_num(pyr, "ratio") == 4.0);
        double shares[2] = {0, 0};
        for (int c = 0; c < 2; ++c) {
            const cJSON *per =
                cJSON_GetObjectItemCaseSensitive(c ? pyr : uni, "perLayer");
            assert_int_equal(cJSON_GetArraySize(per), 4);
            const cJSON *l;
            cJSON_ArrayForEach(l, per) {
                shares[c] += cli_num(l, "share");
                /* From the step its held count first passes its effective
                 * share E (t = E), a layer evicts once per step, back to
                 * E: 4095 - E + 1 calls. */
                assert_true(cli_num(l, "evictionCalls") ==
                            4096.0 - cli_num(l, "effectiveShare"));
                assert_true(cli_num(l, "peakHeld") ==
                            cli_num(l, "effectiveShare") + 1.0);
            }
        }
        assert_true(shares[0] == 4.0 * 96.0);
        assert_true(shares[1] <= 4.0 * 96.0);
        assert_true(cli_num(uni, "evictionCalls") == 4.0 * 4000.0);
        assert_true(cli_num(uni, "retainedAttentionMass") !=
                        cli_num(pyr, "retainedAttentionMass") ||
                    cli_num(uni, "heavyHitterRecall") !=
                        cli_num(pyr, "heavyHitterRecall"));
        cJSON_Delete(doc);
    }
}

/* Sinks and the recent window together can protect more than a layer's
 * effective share (docs/spec.md §13.4): with recent 32 and sinks 2 a layer
 * whose effective share is 33 holds 34 after every evict (sinks 0 and 1
 * plus the 32 newest) and peaks at 35, while a layer with a larger share
 * peaks one above it. */
static void test_sinks_beyond_the_share(void **state) {
    (void)state;
    cJSON *doc = cli_json("bench --scorer window --sinks 2 --layers 6 "
                          "--trace flat --budget 40 --ratio 8 --json");
    const cJSON *results = cli_array(doc, "results", 1);
    const cJSON *per = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetArrayItem(results, 0), "perLayer");
    assert_int_equal(cJSON_GetArraySize(per), 6);
    int beyond = 0;
    const cJSON *l;
    cJSON_ArrayForEach(l, per) {
        const double e = cli_num(l, "effectiveShare");
        if (e < 34.0) {
            beyond += 1;
            assert_true(cli_num(l, "peakHeld") == 35.0);
        } else {
            assert_true(cli_num(l, "peakHeld") == e + 1.0);
        }
    }
    assert_true(beyond > 0);
    cJSON_Delete(doc);
}

static void test_usage_errors(void **state) {
    (void)state;
    cli_expect_usage_error("bench --policy nope", "--policy");
    cli_expect_usage_error("bench --scorer nope", "--scorer");
    cli_expect_usage_error("bench --policy h2o --sinks 4", "--sinks");
    cli_expect_usage_error("bench --policy pyramidkv --sinks 4", "--sinks");
    cli_expect_usage_error("bench --sinks x --scorer none", "--sinks");
    cli_expect_usage_error("bench --policy tova --recent 8", "--recent");
    cli_expect_usage_error("bench --policy h2o --obs 8", "--obs");
    cli_expect_usage_error("bench --policy scissorhands --kernel 3", "--kernel");
    cli_expect_usage_error("bench --policy streaming-llm --sinks 8 --budget 8",
                           "--budget");
    cli_expect_usage_error("bench --policy h2o --budget 32", "--budget");
}

static void test_help_names_the_flags(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(cli_run("bench --help", 0, &out), 0);
    assert_non_null(strstr(out, "--policy P"));
    assert_non_null(strstr(out, "--scorer S"));
    assert_non_null(strstr(out, "--sinks N"));
    assert_non_null(strstr(out, "sliding-window"));
    free(out);
}

/* `test_cli_bench_policy slow` runs the native-surface figures and the
 * layered runs (their own ctest entry, label slow); with no argument, the
 * acceptance figures through the vtables and the flags. */
PB_TEST_MAIN_SLOW("slow",
                  PB_TESTS(cmocka_unit_test(test_fifteen_figures_native),
                           cmocka_unit_test(test_layered_every_policy),
                           cmocka_unit_test(test_sinks_beyond_the_share)),
                  PB_TESTS(cmocka_unit_test(test_fifteen_figures_vtables),
                           cmocka_unit_test(test_usage_errors),
                           cmocka_unit_test(test_help_names_the_flags)))
