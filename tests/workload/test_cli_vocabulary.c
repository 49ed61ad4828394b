/*
 * test_cli_vocabulary.c - the one vocabulary of the pyramidkv subcommands
 * (bench/cli/cli_options.c, docs/cli.md) as a user meets it: in bench,
 * plan, replay, calibrate, trace and vectors a canonical spelling and its
 * alias give the same output, the defaults are the same, a flag given
 * twice or two conflicting flags and a bad name are usage errors (exit 2,
 * one line naming the flag, nothing on stdout), a file that cannot be
 * read is exit 2 in every subcommand, and every --help lists the aliases
 * and the exit statuses.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cli_run.h"

#define TRACE "tv_vocab.trace"

/* `a` and `b` both exit 0 with equal JSON documents. */
static void same_json(const char *a, const char *b) {
    cJSON *x = cli_json(a), *y = cli_json(b);
    if (!cJSON_Compare(x, y, 1))
        print_error("'%s' and '%s' differ\n", a, b);
    assert_true(cJSON_Compare(x, y, 1));
    cJSON_Delete(x);
    cJSON_Delete(y);
}

static int make_trace(void **state) {
    (void)state;
    char *out = NULL;
    const int rc = cli_run("trace --make funnel --out " TRACE " --layers 4 "
                           "--kv-heads 1 --prompt 96 --window 8 --decode 8",
                           0, &out);
    free(out);
    return rc;
}

static int remove_trace(void **state) {
    (void)state;
    remove(TRACE);
    return 0;
}

/* Canonical names and aliases of policies, scorers and schedules. */
static void names_and_aliases(void **state) {
    (void)state;
    same_json("bench --trace decode-4096 --budget 64 --policy streaming-llm "
              "--json",
              "bench --trace decode-4096 --budget 64 --policy streamingllm "
              "--json");
    same_json("replay " TRACE " --policy streaming-llm --budget 40 --json",
              "replay " TRACE " --policy streamingllm --budget 40 --json");
    same_json("replay " TRACE " --policy sliding-window --budget 40 --json",
              "replay " TRACE " --policy slidingwindow --budget 40 --json");
    same_json("replay " TRACE " --scorer none --budget 40 --json",
              "replay " TRACE " --scorer recency --budget 40 --json");
    same_json("bench --trace decode-4096 --budget 64 --scorer none --json",
              "bench --trace decode-4096 --budget 64 --scorer recency --json");
    /* pyramid = arithmetic, in plan, bench and replay. */
    same_json("plan --schedule pyramid --json",
              "plan --schedule arithmetic --json");
    same_json("bench --trace decode-4096 --budget 64 --schedule pyramid "
              "--json",
              "bench --trace decode-4096 --budget 64 --schedule arithmetic "
              "--json");
    same_json("replay " TRACE " --schedule pyramid --budget 40 --json",
              "replay " TRACE " --schedule arithmetic --budget 40 --json");
    /* The replay output names the policy canonically. */
    cJSON *doc = cli_json("replay " TRACE " --policy streamingllm --budget 40 "
                          "--json");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(doc, "policy")->valuestring,
        "streaming-llm");
    cJSON_Delete(doc);
}

/* Flag aliases, in every subcommand that reads the flag. */
static void flag_aliases(void **state) {
    (void)state;
    same_json("plan --recent 8 --json", "plan --recent-window 8 --json");
    same_json("plan --recent=8 --json", "plan --recent-window=8 --json");
    same_json("bench --trace decode-4096 --budget 64 --recent 16 --obs 8 "
              "--kernel 5 --json",
              "bench --trace decode-4096 --budget 64 --recent-window 16 "
              "--obs-window 8 --pool-kernel 5 --json");
    same_json("replay " TRACE " --budget 40 --recent 16 --obs 8 --kernel 5 "
              "--json",
              "replay " TRACE " --budget 40 --recent-window 16 --obs-window 8 "
              "--pool-kernel 5 --json");
}

/* The bytes of a file. */
static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    char *buf = malloc(1u << 20);
    assert_non_null(buf);
    *n = fread(buf, 1, 1u << 20, f);
    fclose(f);
    return buf;
}

/* trace --make: --prompt is --prompt-len's alias. */
static void trace_aliases(void **state) {
    (void)state;
    char *out = NULL;
    assert_int_equal(cli_run("trace --make flat --out tv_a.trace --layers 2 "
                             "--kv-heads 1 --prompt-len 40 --window 4 "
                             "--decode 2", 0, &out), 0);
    free(out);
    assert_int_equal(cli_run("trace --make flat --out tv_b.trace --layers 2 "
                             "--kv-heads 1 --prompt=40 --window 4 "
                             "--decode 2", 0, &out), 0);
    free(out);
    size_t na = 0, nb = 0;
    char *a = slurp("tv_a.trace", &na), *b = slurp("tv_b.trace", &nb);
    assert_true(na > 0u && na == nb && memcmp(a, b, na) == 0);
    free(a);
    free(b);
    remove("tv_a.trace");
    remove("tv_b.trace");
    cli_expect_usage_error("trace --make flat --out tv_c.trace --prompt 40 "
                           "--prompt-len 40", "--prompt-len");
}

/* One default per flag: --ratio 4, --budget 512, --layers 32, --recent
 * 32, --policy pyramidkv, --schedule arithmetic. */
static void shared_defaults(void **state) {
    (void)state;
    same_json("plan --json",
              "plan --schedule arithmetic --ratio 4 --budget 512 --layers 32 "
              "--recent 32 --json");
    same_json("replay " TRACE " --json",
              "replay " TRACE " --policy pyramidkv --schedule arithmetic:4 "
              "--budget 512 --recent 32 --obs 16 --kernel 7 --json");
    same_json("replay " TRACE " --budget 40 --schedule curve --json",
              "replay " TRACE " --budget 40 --schedule curve --ratio 4 "
              "--json");
    same_json("bench --trace decode-4096 --schedule uniform,curve --json",
              "bench --trace decode-4096 --schedule uniform,curve --ratio 4 "
              "--budget 512 --recent 32 --json");
}

/* Conflicts, repeats and bad names: exit 2, one line naming the flag. */
static void usage_errors(void **state) {
    (void)state;
    cli_expect_usage_error("bench --policy h2o --scorer none", "conflict");
    cli_expect_usage_error("replay " TRACE " --policy h2o --scorer none",
                           "conflict");
    cli_expect_usage_error("bench --recent 8 --recent-window 8", "--recent");
    cli_expect_usage_error("plan --recent 8 --recent-window 8", "--recent");
    cli_expect_usage_error("replay " TRACE " --recent 8 --recent-window 8",
                           "--recent");
    cli_expect_usage_error("bench --budget 64 --budget 64", "given twice");
    cli_expect_usage_error("calibrate " TRACE " --budget 40 --budget=40",
                           "given twice");
    cli_expect_usage_error("trace --make flat --out x --seed 1 --seed 2",
                           "--seed");
    cli_expect_usage_error("trace " TRACE " --dump --dump", "--dump");
    cli_expect_usage_error("replay " TRACE " --schedule arithmetic:2 --ratio 2",
                           "conflict");
    cli_expect_usage_error("replay " TRACE " --schedule taper --ratio 2",
                           "--ratio");
    /* A bad name lists the canonical names. */
    cli_expect_usage_error("bench --policy lru", "streaming-llm");
    cli_expect_usage_error("replay " TRACE " --policy lru", "streaming-llm");
    cli_expect_usage_error("bench --scorer lru", "cumulative");
    cli_expect_usage_error("replay " TRACE " --scorer lru", "cumulative");
    cli_expect_usage_error("bench --schedule spiral", "kvfactory-balanced");
    cli_expect_usage_error("plan --schedule spiral", "kvfactory-balanced");
    cli_expect_usage_error("replay " TRACE " --schedule spiral",
                           "kvfactory-balanced");
    cli_expect_usage_error("frobnicate", "unknown command");
}

/* A missing, unreadable or unwritable file is exit 2 in every subcommand,
 * with one stderr line and nothing on stdout; a missing file and a
 * directory get the same words in every command that reads a file. */
static void file_errors(void **state) {
    (void)state;
    static const char *const cmds[] = {
        "trace --make flat --out tv_no_such_dir/x.trace",
        "calibrate " TRACE " --plot tv_no_such_dir/x.png",
        "bench --trace tv_no_such.trace",
        "plan --schedule profile --weights tv_no_such",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i)
        cli_expect_usage_error(cmds[i], "tv_no_such");
    static const char *const readers[] = {"vectors", "trace", "calibrate",
                                          "replay"};
    static const char *const inputs[][2] = {
        {"tv_no_such.json", "cannot open the file"},
        {".", "a directory, not a regular file"},
        {"tv_not_json.txt", ""},
    };
    FILE *f = fopen("tv_not_json.txt", "wb");
    assert_non_null(f);
    fputs("not json, not a trace\n", f);
    fclose(f);
    for (size_t i = 0; i < sizeof readers / sizeof readers[0]; ++i)
        for (size_t k = 0; k < sizeof inputs / sizeof inputs[0]; ++k) {
            char args[128], want[128];
            snprintf(args, sizeof args, "%s %s", readers[i], inputs[k][0]);
            snprintf(want, sizeof want, "pyramidkv %s: %s: %s", readers[i],
                     inputs[k][0], inputs[k][1]);
            cli_expect_usage_error(args, want);
        }
    remove("tv_not_json.txt");
    /* A readable file before a bad one: still nothing on stdout. */
    cli_expect_usage_error("vectors " PB_VECTORS_DIR "/pyramid_budget.json .",
                           "pyramidkv vectors: .: a directory");
}

/* Every --help lists the aliases and the exit statuses. */
static void help_lists_vocabulary(void **state) {
    (void)state;
    static const char *const cmds[] = {"bench", "plan", "replay",
                                       "calibrate", "trace"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; ++i) {
        char args[64], *out = NULL;
        snprintf(args, sizeof args, "%s --help", cmds[i]);
        assert_int_equal(cli_run(args, 0, &out), 0);
        if (strstr(out, "--recent-window = --recent") == NULL ||
            strstr(out, "--policy streamingllm = streaming-llm") == NULL ||
            strstr(out, "--schedule pyramid = arithmetic") == NULL ||
            strstr(out, "exit status: 0 success; 1") == NULL)
            print_error("pyramidkv %s lacks the vocabulary lines\n", args);
        assert_non_null(strstr(out, "exit status: 0 success; 1"));
        assert_non_null(strstr(out, "--recent-window = --recent"));
        assert_non_null(strstr(out, "--schedule pyramid = arithmetic"));
        free(out);
    }
    char *out = NULL;
    assert_int_equal(cli_run("vectors --help", 0, &out), 0);
    assert_non_null(strstr(out, "2 on\na usage error or a file"));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(names_and_aliases),
        cmocka_unit_test(flag_aliases),
        cmocka_unit_test(trace_aliases),
        cmocka_unit_test(shared_defaults),
        cmocka_unit_test(usage_errors),
        cmocka_unit_test(file_errors),
        cmocka_unit_test(help_lists_vocabulary),
    };
    return cmocka_run_group_tests(tests, make_trace, remove_trace);
}
