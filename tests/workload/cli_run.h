/*
 * cli_run.h - the `pyramidkv` program as the CLI tests run it: through
 * popen, with its exit status, its stdout or stderr, its JSON document, and
 * the check of a usage error (exit 2, one line on stderr naming the flag,
 * nothing on stdout). The tests that include it define PB_CLI_PATH.
 */
#ifndef PB_TEST_CLI_RUN_H
#define PB_TEST_CLI_RUN_H

#include <cjson/cJSON.h>

/* Runs `pyramidkv <args>` and returns its exit status; its stdout (or
 * stderr if `want_stderr`) goes to a malloc'd, NUL-terminated *out. */
int cli_run(const char *args, int want_stderr, char **out);

/* Runs `pyramidkv <args>`, which must exit 0 with one JSON document on
 * stdout; returns it parsed (cJSON_Delete it). */
cJSON *cli_json(const char *args);

/* The number `key` of `obj`, which must be there. */
double cli_num(const cJSON *obj, const char *key);

/* The array `key` of `obj`, which must hold exactly n items. */
const cJSON *cli_array(const cJSON *obj, const char *key, int n);

/* `pyramidkv <args>` must exit 2 with exactly one line on stderr that
 * contains `names`, and print nothing on stdout. */
void cli_expect_usage_error(const char *args, const char *names);

#endif /* PB_TEST_CLI_RUN_H */
