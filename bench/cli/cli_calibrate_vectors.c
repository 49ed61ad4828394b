/*
 * cli_calibrate_vectors.c - the "kv-cache/calibrate" golden vectors
 * (docs/vectors.md): a case gives a small trace inline (its records'
 * rows), calibrate's flags, and the figures some rows must show; this
 * file writes the trace to a temporary file, runs `pyramidkv calibrate
 * --json` on it in this process and compares every expected figure of
 * docs/spec.md §18.4-§18.5 with what calibrate printed.
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli_calibrate.h"
#include "cli_commands.h"
#include "trace_io.h"
#include "vector_runner_internal.h"

#define VR_CAL_MAX_ARGS 16
#define VR_CAL_MAX_VALUES 4096u
#define VR_CAL_TOLERANCE 1e-9

static const char *const case_keys[] = {"name", "why", "layers", "kvHeads",
                                        "records", "args", "expect",
                                        "cakePreference", NULL};

/* One record of the case into the writer. 0, or -1 with the case failed. */
static int add_record(case_state *c, pb_tr_writer *w, const cJSON *jr,
                      size_t index) {
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(jr, "kind");
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(jr, "rows");
    uint32_t layer = 0, head = 0;
    if (!cJSON_IsString(kind) || !cJSON_IsArray(rows) ||
        !pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(jr, "layer"),
                        &layer) ||
        !pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(jr, "head"), &head))
        return pb__vr_fail(c, "malformed: record %zu needs \"kind\", "
                              "\"layer\", \"head\" and \"rows\"", index);
    const int n_rows = cJSON_GetArraySize(rows);
    const int len = n_rows > 0 ? cJSON_GetArraySize(rows->child) : 0;
    if (n_rows < 1 || len < n_rows ||
        (size_t)n_rows * (size_t)len > VR_CAL_MAX_VALUES)
        return pb__vr_fail(c, "malformed: record %zu: rows must be 1 .. n "
                              "rows of n values (at most %u values)",
                           index, VR_CAL_MAX_VALUES);
    float v[VR_CAL_MAX_VALUES];
    int j = 0;
    for (const cJSON *row = rows->child; row != NULL; row = row->next, ++j) {
        if (cJSON_GetArraySize(row) != len)
            return pb__vr_fail(c, "malformed: record %zu: rows of unequal "
                                  "length", index);
        int i = 0;
        for (const cJSON *x = row->child; x != NULL; x = x->next, ++i) {
            if (!cJSON_IsNumber(x))
                return pb__vr_fail(c, "malformed: record %zu: a value is "
                                      "not a number", index);
            v[(size_t)j * (size_t)len + (size_t)i] = (float)x->valuedouble;
        }
    }
    pb_tr_record rec;
    memset(&rec, 0, sizeof rec);
    if (strcmp(kind->valuestring, "prefill") == 0) rec.kind = PB_TR_PREFILL;
    else if (strcmp(kind->valuestring, "future") == 0) rec.kind = PB_TR_FUTURE;
    else if (strcmp(kind->valuestring, "preference") == 0)
        rec.kind = PB_TR_PREFERENCE;
    else return pb__vr_fail(c, "malformed: record %zu: \"kind\" is prefill, "
                               "future or preference", index);
    rec.dtype = PB_TR_F32;
    rec.layer = layer;
    rec.head = head;
    rec.qhead = PB_TR_GROUP_REDUCED;
    rec.query = (uint32_t)(len - n_rows);
    rec.rows = (uint32_t)n_rows;
    rec.length = (uint32_t)len;
    char err[256];
    if (pb_tr_writer_add(w, &rec, v, err, sizeof err) != 0)
        return pb__vr_fail(c, "record %zu: %s", index, err);
    return 0;
}

/* Runs calibrate with argv and stdout into a buffer. Its exit status,
 * *out the text (the caller frees), or -1 when stdout cannot be diverted. */
static int run_captured(int argc, char **argv, char **out) {
    *out = NULL;
    FILE *tmp = tmpfile();
    fflush(stdout);
    const int saved = dup(1);
    if (tmp == NULL || saved < 0 || dup2(fileno(tmp), 1) < 0) {
        if (saved >= 0) close(saved);
        if (tmp != NULL) fclose(tmp);
        return -1;
    }
    const int rc = pb_cli_calibrate(argc, argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    const long n = ftell(tmp);
    char *text = n >= 0 ? (char *)malloc((size_t)n + 1u) : NULL;
    if (text != NULL) {
        rewind(tmp);
        text[fread(text, 1, (size_t)n, tmp)] = '\0';
    }
    fclose(tmp);
    *out = text;
    return text != NULL ? rc : -1;
}

/* A number or null that calibrate printed against its expectation. */
static int same(const cJSON *want, const cJSON *got) {
    if (cJSON_IsNull(want)) return cJSON_IsNull(got);
    if (cJSON_IsNumber(want))
        return cJSON_IsNumber(got) &&
               fabs(want->valuedouble - got->valuedouble) <= VR_CAL_TOLERANCE;
    if (cJSON_IsBool(want)) return cJSON_IsBool(got) &&
                                   cJSON_IsTrue(want) == cJSON_IsTrue(got);
    if (!cJSON_IsArray(want) || !cJSON_IsArray(got) ||
        cJSON_GetArraySize(want) != cJSON_GetArraySize(got))
        return 0;
    for (const cJSON *a = want->child, *b = got->child; a != NULL;
         a = a->next, b = b->next)
        if (!same(a, b)) return 0;
    return 1;
}

/* Every expected row's figures against calibrate's JSON. */
static int compare(case_state *c, const cJSON *expect, const cJSON *doc) {
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "schedules");
    for (const cJSON *e = expect->child; e != NULL; e = e->next) {
        const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "schedule");
        const cJSON *jh = cJSON_GetObjectItemCaseSensitive(e, "heads");
        if (!cJSON_IsString(js) || !cJSON_IsString(jh))
            return pb__vr_fail(c, "malformed: an \"expect\" entry needs "
                                  "\"schedule\" and \"heads\"");
        const cJSON *row = NULL;
        for (const cJSON *r = rows != NULL ? rows->child : NULL;
             r != NULL && row == NULL; r = r->next) {
            const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "schedule");
            const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "heads");
            if (cJSON_IsString(s) && cJSON_IsString(h) &&
                strcmp(s->valuestring, js->valuestring) == 0 &&
                strcmp(h->valuestring, jh->valuestring) == 0)
                row = r;
        }
        if (row == NULL)
            return pb__vr_fail(c, "row %s / %s: not printed", js->valuestring,
                               jh->valuestring);
        for (const cJSON *f = e->child; f != NULL; f = f->next) {
            if (f == js || f == jh) continue;
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(row, f->string);
            if (same(f, got)) continue;
            char *w = cJSON_PrintUnformatted(f);
            char *g = got != NULL ? cJSON_PrintUnformatted(got) : NULL;
            pb__vr_fail(c, "row %s / %s: %s: expected %s, got %s",
                        js->valuestring, jh->valuestring, f->string,
                        w != NULL ? w : "?", g != NULL ? g : "nothing");
            cJSON_free(w);
            cJSON_free(g);
            return -1;
        }
    }
    return 0;
}

/* The optional "cakePreference": CAKE's P per layer (the profile's
 * cakePreference, spec §18.2). */
static int compare_pref(case_state *c, const cJSON *want, const cJSON *doc) {
    const cJSON *prof = cJSON_GetObjectItemCaseSensitive(doc, "profile");
    if (!cJSON_IsArray(want) ||
        cJSON_GetArraySize(want) != cJSON_GetArraySize(prof))
        return pb__vr_fail(c, "malformed: \"cakePreference\" has one number "
                              "per layer");
    int l = 0;
    for (const cJSON *w = want->child, *e = prof->child; w != NULL;
         w = w->next, e = e->next, ++l) {
        const cJSON *got = cJSON_GetObjectItemCaseSensitive(e, "cakePreference");
        if (!same(w, got))
            return pb__vr_fail(c, "layer %d: cakePreference: expected %.17g, "
                                  "got %.17g", l, w->valuedouble,
                               cJSON_IsNumber(got) ? got->valuedouble : -1.0);
    }
    return 0;
}

int pb_cli_calibrate_vector_case(case_state *c, const cJSON *cs) {
    if (!pb__vr_check_keys(c, cs, "the case", case_keys)) return -1;
    uint32_t layers = 0, heads = 0;
    const cJSON *recs = cJSON_GetObjectItemCaseSensitive(cs, "records");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(cs, "args");
    const cJSON *expect = cJSON_GetObjectItemCaseSensitive(cs, "expect");
    if (!pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(cs, "layers"),
                        &layers) ||
        !pb__vr_get_u32(cJSON_GetObjectItemCaseSensitive(cs, "kvHeads"),
                        &heads) ||
        !cJSON_IsArray(recs) || !cJSON_IsArray(args) ||
        !cJSON_IsArray(expect) || cJSON_GetArraySize(args) > VR_CAL_MAX_ARGS)
        return pb__vr_fail(c, "malformed: \"layers\", \"kvHeads\", "
                              "\"records\", \"args\" (at most %d strings) "
                              "and \"expect\" are required",
                           VR_CAL_MAX_ARGS);
    char path[] = "/tmp/pyramidkv-vector-XXXXXX";
    const int fd = mkstemp(path);
    if (fd < 0) return pb__vr_fail(c, "no temporary file");
    close(fd);
    const pb_tr_shape shape = {layers, heads, 1u, 3u};
    pb_tr_writer *w = NULL;
    char err[256];
    int rc = pb_tr_writer_open(path, &shape, &w, err, sizeof err) == 0
                 ? 0 : pb__vr_fail(c, "the trace: %s", err);
    size_t index = 0;
    for (const cJSON *r = recs->child; rc == 0 && r != NULL; r = r->next)
        rc = add_record(c, w, r, index++);
    if (w != NULL && pb_tr_writer_close(w, err, sizeof err) != 0 && rc == 0)
        rc = pb__vr_fail(c, "the trace: %s", err);
    char *argv[VR_CAL_MAX_ARGS + 6];
    int argc = 0;
    argv[argc++] = (char *)"calibrate";
    argv[argc++] = path;
    for (const cJSON *a = args->child; rc == 0 && a != NULL; a = a->next) {
        if (!cJSON_IsString(a))
            rc = pb__vr_fail(c, "malformed: \"args\" are strings");
        else
            argv[argc++] = a->valuestring;
    }
    argv[argc++] = (char *)"--json";
    argv[argc++] = (char *)"--progress";
    argv[argc++] = (char *)"off";
    argv[argc] = NULL;
    char *text = NULL;
    if (rc == 0) {
        const int st = run_captured(argc, argv, &text);
        if (st != 0)
            rc = pb__vr_fail(c, "calibrate exited %d", st);
    }
    remove(path);
    cJSON *doc = text != NULL && rc == 0 ? cJSON_Parse(text) : NULL;
    free(text);
    if (rc == 0 && doc == NULL)
        rc = pb__vr_fail(c, "calibrate printed no JSON");
    if (rc == 0) rc = compare(c, expect, doc);
    const cJSON *pref = cJSON_GetObjectItemCaseSensitive(cs, "cakePreference");
    if (rc == 0 && pref != NULL) rc = compare_pref(c, pref, doc);
    cJSON_Delete(doc);
    return rc;
}
