/*
 * vector_runner.c - the document side of the golden vector runner (see
 * vector_runner.h and docs/vectors.md for the schema): parses a buffer
 * with cJSON, checks the top level, picks the family from the "policy"
 * (vector_families.c), runs every case, and reports each failure and the
 * closing counts (bench/cli/cli_input.c reads the files).
 *
 * It owns documents and reports; cases belong to their family's file and
 * steps to the step files (vector_runner_internal.h maps them). It does
 * not own the library's semantics, which it only calls.
 */
#include "vector_runner.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vector_runner_internal.h"

/* ------------------------------------------------------------------------ */
/* Documents.                                                               */

static void report_doc_error(const run_state *rs, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void report_doc_error(const run_state *rs, const char *fmt, ...) {
    rs->totals->unreadable += 1u;
    if (rs->report == NULL) return;
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(rs->report, "%s: error: %s\n", rs->label, text);
}

static int run_parsed(run_state *rs, const cJSON *doc) {
    static const char *const top_keys[] = {"policy", "version", "cases",
                                           "description", NULL};
    if (!cJSON_IsObject(doc)) {
        report_doc_error(rs, "the document is not a JSON object");
        return -1;
    }
    const cJSON *e;
    cJSON_ArrayForEach(e, doc) {
        size_t k = 0;
        while (top_keys[k] && (e->string == NULL || strcmp(top_keys[k], e->string)))
            ++k;
        if (top_keys[k] == NULL) {
            report_doc_error(rs, "unknown top-level key (the keys are policy, "
                                 "version, cases, description)");
            return -1;
        }
    }
    const cJSON *jpol = cJSON_GetObjectItemCaseSensitive(doc, "policy");
    if (!cJSON_IsString(jpol) || jpol->valuestring == NULL) {
        report_doc_error(rs, "\"policy\" must be a string");
        return -1;
    }
    const pb__vr_family *family = pb__vr_families;
    while (family->policy != NULL && strcmp(jpol->valuestring, family->policy) != 0)
        ++family;
    if (family->policy == NULL) {
        /* "expected A, B or C", from the table. */
        char list[384];
        size_t len = 0;
        list[0] = '\0';
        for (const pb__vr_family *f = pb__vr_families; f->policy != NULL; ++f) {
            const char *sep = f == pb__vr_families ? ""
                              : (f + 1)->policy == NULL ? " or " : ", ";
            const int n = snprintf(list + len, sizeof list - len, "%s%s", sep,
                                   f->policy);
            if (n < 0 || (size_t)n >= sizeof list - len) break;
            len += (size_t)n;
        }
        report_doc_error(rs, "unknown policy (expected %s)", list);
        return -1;
    }
    const cJSON *jver = cJSON_GetObjectItemCaseSensitive(doc, "version");
    if (!cJSON_IsNumber(jver) || jver->valuedouble != 1.0) {
        report_doc_error(rs, "\"version\" must be 1");
        return -1;
    }
    const cJSON *jcases = cJSON_GetObjectItemCaseSensitive(doc, "cases");
    if (!cJSON_IsArray(jcases)) {
        report_doc_error(rs, "\"cases\" must be a list");
        return -1;
    }
    rs->totals->documents += 1u;

    size_t index = 0;
    const cJSON *cs;
    cJSON_ArrayForEach(cs, jcases) {
        case_state c;
        memset(&c, 0, sizeof c);
        c.run = rs;
        pb__vr_set_case_name(&c, cJSON_GetObjectItemCaseSensitive(cs, "name"), index);
        if (!cJSON_IsObject(cs))
            pb__vr_fail(&c, "malformed: a case must be an object");
        else if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cs, "name")))
            pb__vr_fail(&c, "malformed: \"name\" must be a string");
        else if (cJSON_GetObjectItemCaseSensitive(cs, "why") != NULL &&
                 !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(cs, "why")))
            pb__vr_fail(&c, "malformed: \"why\" must be a string");
        else
            family->run_case(&c, family->policy_family, cs);

        if (c.failed) {
            rs->totals->failed += 1u;
            if (rs->report)
                fprintf(rs->report, "%s: case \"%s\": FAILED: %s\n", rs->label,
                        c.name, c.msg.text);
        } else {
            rs->totals->passed += 1u;
            if (rs->report && rs->verbose)
                fprintf(rs->report, "%s: case \"%s\": ok\n", rs->label, c.name);
        }
        ++index;
    }
    return 0;
}

int pb_vector_run_document(const char *text, size_t len, const char *label,
                           const pb_vector_options *options,
                           pb_vector_totals *totals) {
    run_state rs;
    rs.report = options ? options->report : NULL;
    rs.verbose = options ? options->verbose : 0;
    rs.max_bytes = options && options->max_instance_bytes
                       ? options->max_instance_bytes
                       : PB_VECTOR_DEFAULT_MAX_BYTES;
    rs.label = label ? label : "<memory>";
    rs.totals = totals;
    if (text == NULL && len > 0u) {
        report_doc_error(&rs, "no document");
        return -1;
    }
    if (len > 0u && memchr(text, '\0', len) != NULL) {
        report_doc_error(&rs, "the document contains a NUL byte");
        return -1;
    }
    char *copy = malloc(len + 1u);
    if (copy == NULL) {
        report_doc_error(&rs, "out of memory reading the document");
        return -1;
    }
    if (len > 0u) memcpy(copy, text, len);
    copy[len] = '\0';
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithOpts(copy, &end, 1);
    if (doc == NULL) {
        const size_t at = end != NULL && end >= copy && end <= copy + len
                              ? (size_t)(end - copy)
                              : len;
        report_doc_error(&rs, "not valid JSON (at byte %zu of %zu)", at, len);
        free(copy);
        return -1;
    }
    const int rc = run_parsed(&rs, doc);
    cJSON_Delete(doc);
    free(copy);
    return rc;
}

void pb_vector_print_summary(FILE *out, const pb_vector_totals *totals) {
    fprintf(out, "%zu passed, %zu failed\n", totals->passed, totals->failed);
}

void pb_vector_print_step_counts(FILE *out, const pb_vector_totals *totals) {
    fprintf(out,
            "steps run: onDecodeStep %zu, evict %zu, effectiveBudget %zu, "
            "windowScoreOf %zu, keptCount %zu, keptPositions %zu, capacity %zu, "
            "reset %zu, prefill %zu, sinkCount %zu, scoreOf %zu, votesOf %zu, "
            "lastAttentionOf %zu; budget layers checked %zu\n",
            totals->steps_decode, totals->steps_evict, totals->steps_effective,
            totals->steps_window, totals->steps_kept_count,
            totals->steps_kept_positions, totals->steps_capacity,
            totals->steps_reset, totals->steps_prefill,
            totals->steps_sink_count, totals->steps_score, totals->steps_votes,
            totals->steps_last_attention, totals->budget_layers);
}

int pb_vector_exit_status(const pb_vector_totals *totals) {
    if (totals->unreadable != 0u) return 2; /* an input error */
    return totals->failed == 0u ? 0 : 1;
}
