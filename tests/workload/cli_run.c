/*
 * cli_run.c - running the built `pyramidkv` program for the CLI tests
 * (cli_run.h): one copy of the popen loop, the JSON reader and the usage
 * error check that test_cli_bench_plan and test_cli_bench_policy share.
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

#include <cmocka.h>

#include "cli_run.h"

#ifndef PB_CLI_PATH
#error "PB_CLI_PATH must name the pyramidkv program"
#endif

int cli_run(const char *args, int want_stderr, char **out) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s %s", PB_CLI_PATH, args,
             want_stderr ? "2>&1 >/dev/null" : "2>/dev/null");
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    for (;;) {
        if (n + 4096 > cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        const size_t got = fread(buf + n, 1, 4096, f);
        if (got == 0) break;
        n += got;
    }
    buf[n] = '\0';
    const int st = pclose(f);
    *out = buf;
    assert_true(WIFEXITED(st));
    return WEXITSTATUS(st);
}

cJSON *cli_json(const char *args) {
    char *out = NULL;
    const int rc = cli_run(args, 0, &out);
    if (rc != 0) print_error("pyramidkv %s: exit %d\n", args, rc);
    assert_int_equal(rc, 0);
    cJSON *doc = cJSON_Parse(out);
    free(out);
    assert_non_null(doc);
    return doc;
}

double cli_num(const cJSON *obj, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) print_error("missing number '%s'\n", key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

const cJSON *cli_array(const cJSON *obj, const char *key, int n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    assert_int_equal(cJSON_GetArraySize(v), n);
    return v;
}

void cli_expect_usage_error(const char *args, const char *names) {
    char *err = NULL, *out = NULL;
    const int rc = cli_run(args, 1, &err);
    if (rc != 2 || strstr(err, names) == NULL)
        print_error("pyramidkv %s: exit %d, stderr '%s' (want 2 naming %s)\n",
                    args, rc, err, names);
    assert_int_equal(rc, 2);
    assert_non_null(strstr(err, names));
    /* Exactly one line. */
    const char *nl = strchr(err, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], '\0');
    free(err);
    /* Nothing on stdout. */
    assert_int_equal(cli_run(args, 0, &out), 2);
    assert_string_equal(out, "");
    free(out);
}
