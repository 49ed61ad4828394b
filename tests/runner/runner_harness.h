/*
 * runner_harness.h - what the tests of the vector runner share: a document
 * held in memory, written with single quotes for readability (json() turns
 * them into double quotes; no document here needs a literal '), run through
 * pb_vector_run_document with its report captured, and the checks on the
 * report and the counts.
 */
#ifndef PB_TESTS_RUNNER_HARNESS_H
#define PB_TESTS_RUNNER_HARNESS_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "vector_runner.h"

/* The end of a document of one case: its steps, the case, the cases. */
#define DOC_TAIL "]}]}"

typedef struct outcome {
    int rc;
    pb_vector_totals totals;
    char text[16384]; /* the report */
} outcome;

static inline char *json(const char *squoted) {
    const size_t n = strlen(squoted);
    char *s = malloc(n + 1u);
    assert_non_null(s);
    for (size_t i = 0; i <= n; ++i) s[i] = squoted[i] == '\'' ? '"' : squoted[i];
    return s;
}

/* Runs text[0 .. len-1] with the report captured into o->text (max_bytes:
 * the runner's limit, 0 for its default). */
static inline void run_raw(const char *text, size_t len, size_t max_bytes,
                           outcome *o) {
    FILE *f = tmpfile();
    assert_non_null(f);
    const pb_vector_options options = {f, 0, max_bytes};
    const pb_vector_totals zero = PB_VECTOR_TOTALS_INIT;
    o->totals = zero;
    o->rc = pb_vector_run_document(text, len, "doc.json", &options, &o->totals);
    rewind(f);
    const size_t got = fread(o->text, 1, sizeof o->text - 1u, f);
    o->text[got] = '\0';
    fclose(f);
}

static inline void run_doc_limit(const char *squoted, size_t max_bytes,
                                 outcome *o) {
    char *s = json(squoted);
    run_raw(s, strlen(s), max_bytes, o);
    free(s);
}

static inline void run_doc(const char *squoted, outcome *o) {
    run_doc_limit(squoted, 0, o);
}

/* Fails the test, showing the report, unless it contains `needle`. */
static inline void expect_in_report(const outcome *o, const char *needle) {
    if (strstr(o->text, needle) == NULL) {
        print_error("report lacks \"%s\":\n%s\n", needle, o->text);
        fail();
    }
}

/* Fails the test, showing the report, unless the run read the document
 * (rc 0) and counted these cases. */
static inline void expect_counts(const outcome *o, size_t passed,
                                 size_t failed) {
    if (o->rc != 0 || o->totals.passed != passed ||
        o->totals.failed != failed) {
        print_error("rc %d, %zu passed, %zu failed (want %zu, %zu); "
                    "report:\n%s\n", o->rc, o->totals.passed,
                    o->totals.failed, passed, failed, o->text);
        fail();
    }
}

static inline void expect_one_failed_case(const outcome *o) {
    expect_counts(o, 0u, 1u);
}

/* Every strict prefix of doc is unreadable (rc -1, runner limit
 * prefix_max), and every single-byte substitution by one of subst[0 ..
 * n_subst-1] is read as one case or refused whole (runner limit
 * mutate_max; ASan/UBSan builds watch for memory errors). */
static inline void expect_truncations_and_mutations(const char *doc,
                                                    size_t prefix_max,
                                                    const char *subst,
                                                    size_t n_subst,
                                                    size_t mutate_max) {
    const size_t len = strlen(doc);
    outcome o;
    for (size_t n = 0; n < len; ++n) {
        run_raw(doc, n, prefix_max, &o);
        if (o.rc != -1) {
            print_error("prefix of %zu bytes: rc %d\n", n, o.rc);
            fail();
        }
    }
    char *copy = malloc(len + 1u);
    assert_non_null(copy);
    for (size_t i = 0; i < len; ++i) {
        for (size_t k = 0; k < n_subst; ++k) {
            memcpy(copy, doc, len + 1u);
            copy[i] = subst[k];
            run_raw(copy, len, mutate_max, &o);
            assert_true(o.rc == 0 || o.rc == -1);
            assert_true(o.rc == -1 || o.totals.passed + o.totals.failed == 1u);
        }
    }
    free(copy);
}

#endif /* PB_TESTS_RUNNER_HARNESS_H */
