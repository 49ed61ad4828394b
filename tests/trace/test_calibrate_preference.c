/*
 * test_calibrate_preference.c - CAKE's layer preference in `pyramidkv
 * calibrate` (path in argv[1]) from preference records (trace version 3,
 * docs/spec.md §18.2). A trace of 2 layers x 2 KV heads x 2 query heads:
 * reduced prefill and future records for 2 prompts, and, on layer 0
 * only, preference records of every query head for 3 texts. calibrate
 * --json's cakePreference of layer 0 is recomputed here from the spec's
 * formulas alone (entropy and sample variance summed over a text's
 * records in (KV head, query head) order, P the mean over the texts);
 * layer 1 has none and takes P from its prompts. The preference records
 * change no other figure (the same trace without them gives the same
 * profile and the same non-cake rows), and the streams written in
 * another order give the same document to the last bit.
 */
#define _POSIX_C_SOURCE 200809L

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "trace_io.h"

#define LAYERS 2u
#define HEADS 2u
#define GROUP 2u
#define PROMPTS 2u
#define TEXTS 3u
#define LEN 64u
#define ROWS 6u
#define FUT 3u
#define FLEN (LEN + FUT)
#define TLEN 48u

static const char *bin;
static float att[PROMPTS][LAYERS][HEADS][ROWS * LEN];
static float fut[PROMPTS][LAYERS][HEADS][FUT * FLEN];
static float txt[TEXTS][HEADS][GROUP][ROWS * TLEN];

/* A softmax row over pseudo-random logits of sharpness temp over
 * positions 0 .. seen - 1, zero above. */
static void softmax_row(float *row, uint32_t width, uint32_t seen,
                        double temp, uint64_t *s) {
    double z = 0.0;
    for (uint32_t i = 0; i < width; ++i) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(*s >> 11) / 9007199254740992.0;
        row[i] = i < seen ? (float)exp(temp * u * u) : 0.0f;
        z += row[i];
    }
    for (uint32_t i = 0; i < seen; ++i) row[i] = (float)(row[i] / z);
}

static void make_rows(void) {
    uint64_t s = 977u;
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l)
            for (uint32_t h = 0; h < HEADS; ++h) {
                for (uint32_t j = 0; j < ROWS; ++j)
                    softmax_row(att[p][l][h] + (size_t)j * LEN, LEN,
                                LEN - ROWS + j + 1u, 2.0 + 3.0 * h + l, &s);
                for (uint32_t j = 0; j < FUT; ++j)
                    softmax_row(fut[p][l][h] + (size_t)j * FLEN, FLEN,
                                LEN + j + 1u, 4.0 + 2.0 * l, &s);
            }
    for (uint32_t t = 0; t < TEXTS; ++t)
        for (uint32_t h = 0; h < HEADS; ++h)
            for (uint32_t g = 0; g < GROUP; ++g)
                for (uint32_t j = 0; j < ROWS; ++j)
                    softmax_row(txt[t][h][g] + (size_t)j * TLEN, TLEN,
                                TLEN - ROWS + j + 1u, 1.0 + 5.0 * g + t, &s);
}

static void add(pb_tr_writer *w, uint32_t kind, uint32_t l, uint32_t h,
                uint32_t g, uint32_t query, uint32_t rows, uint32_t len,
                const float *v) {
    char err[256];
    pb_tr_record r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.dtype = PB_TR_F32;
    r.layer = l;
    r.head = h;
    r.qhead = g;
    r.query = query;
    r.rows = rows;
    r.length = len;
    if (pb_tr_writer_add(w, &r, v, err, sizeof err) != 0) fail_msg("%s", err);
}

/* with_pref: version 3 with the preference records (reversed: every
 * stream in the opposite order, preference records last); else version
 * 2 without them. */
static void write_trace(const char *path, int with_pref, int reversed) {
    char err[256];
    const pb_tr_shape shape = {LAYERS, HEADS, GROUP, with_pref ? 3u : 2u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    const uint32_t R = PB_TR_GROUP_REDUCED;
    for (uint32_t t = 0; with_pref && !reversed && t < TEXTS; ++t)
        for (uint32_t hg = 0; hg < HEADS * GROUP; ++hg)
            add(w, PB_TR_PREFERENCE, 0u, hg / GROUP, hg % GROUP,
                TLEN - ROWS, ROWS, TLEN, txt[t][hg / GROUP][hg % GROUP]);
    for (uint32_t n = 0; n < PROMPTS * LAYERS * HEADS; ++n) {
        const uint32_t st = reversed ? LAYERS * HEADS - 1u - n / PROMPTS
                                     : n % (LAYERS * HEADS);
        const uint32_t p = reversed ? n % PROMPTS : n / (LAYERS * HEADS);
        const uint32_t l = st / HEADS, h = st % HEADS;
        add(w, PB_TR_PREFILL, l, h, R, LEN - ROWS, ROWS, LEN, att[p][l][h]);
        add(w, PB_TR_FUTURE, l, h, R, LEN, FUT, FLEN, fut[p][l][h]);
    }
    for (uint32_t hg = HEADS * GROUP; with_pref && reversed && hg-- > 0u;)
        for (uint32_t t = 0; t < TEXTS; ++t)
            add(w, PB_TR_PREFERENCE, 0u, hg / GROUP, hg % GROUP,
                TLEN - ROWS, ROWS, TLEN, txt[t][hg / GROUP][hg % GROUP]);
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
}

static cJSON *run_json(const char *path) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s calibrate %s --budget 16 --recent 4 --json "
             "--progress off", bin, path);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1u << 20, n = 0, got;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0) n += got;
    buf[n] = '\0';
    assert_int_equal(pclose(f), 0);
    cJSON *doc = cJSON_Parse(buf);
    free(buf);
    assert_non_null(doc);
    return doc;
}

/* §17.1 for one record, from the definition: H = -sum a ln(a + 1e-10)
 * and V = sum over prefix columns of the rows' sample variance. */
static void entropy_variance(const float *v, uint32_t rows, uint32_t len,
                             double *h, double *var) {
    const uint32_t prefix = len - rows;
    *h = 0.0;
    *var = 0.0;
    for (uint32_t j = 0; j < rows; ++j)
        for (uint32_t p = 0; p < prefix; ++p) {
            const double a = v[(size_t)j * len + p];
            *h -= a * log(a + 1e-10);
        }
    for (uint32_t p = 0; p < prefix; ++p) {
        double m = 0.0, ss = 0.0;
        for (uint32_t j = 0; j < rows; ++j) m += v[(size_t)j * len + p];
        m /= rows;
        for (uint32_t j = 0; j < rows; ++j) {
            const double d = v[(size_t)j * len + p] - m;
            ss += d * d;
        }
        *var += ss / (rows - 1u);
    }
    if (*h < 0.0) *h = 0.0;
}

/* P over a set of records per text: the sums over its records, then the
 * mean over texts of pow(H, 1/1.6) * pow(V, 1/0.6). */
static double expected_layer0(void) {
    double sum = 0.0;
    for (uint32_t t = 0; t < TEXTS; ++t) {
        double hs = 0.0, vs = 0.0;
        for (uint32_t hg = 0; hg < HEADS * GROUP; ++hg) {
            double h, v;
            entropy_variance(txt[t][hg / GROUP][hg % GROUP], ROWS, TLEN, &h,
                             &v);
            hs += h;
            vs += v;
        }
        sum += pow(hs, 1.0 / 1.6) * pow(vs, 1.0 / 0.6);
    }
    return sum / TEXTS;
}

static double expected_prompts(uint32_t l) {
    double sum = 0.0;
    for (uint32_t p = 0; p < PROMPTS; ++p) {
        double hs = 0.0, vs = 0.0;
        for (uint32_t h = 0; h < HEADS; ++h) {
            double e, v;
            entropy_variance(att[p][l][h], ROWS, LEN, &e, &v);
            hs += e;
            vs += v;
        }
        sum += pow(hs, 1.0 / 1.6) * pow(vs, 1.0 / 0.6);
    }
    return sum / PROMPTS;
}

static void expect_near(double got, double want, const char *what) {
    if (!(fabs(got - want) <= 1e-9 * fabs(want) + 1e-300))
        fail_msg("%s: calibrate %.17g, recomputed %.17g", what, got, want);
}

/* The document without the preference figures and the cake rows. */
static char *without_cake(cJSON *doc) {
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "trace");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "recommendation");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "recommendedHeads");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(doc, "profile")) {
        cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)e, "cakePreference");
        cJSON_DeleteItemFromObjectCaseSensitive((cJSON *)e,
                                                "cakePreferenceFrom");
    }
    cJSON *rows = cJSON_GetObjectItemCaseSensitive(doc, "schedules");
    for (int i = cJSON_GetArraySize(rows); i-- > 0;) {
        cJSON *r = cJSON_GetArrayItem(rows, i);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(r, "schedule");
        if (strcmp(s->valuestring, "cake") == 0) cJSON_DeleteItemFromArray(rows, i);
        else cJSON_DeleteItemFromObjectCaseSensitive(r, "withinNoise");
    }
    return cJSON_PrintUnformatted(doc);
}

static void preference_records_give_p(void **state) {
    (void)state;
    make_rows();
    write_trace("tcp_pref.trace", 1, 0);
    write_trace("tcp_pref_rev.trace", 1, 1);
    write_trace("tcp_plain.trace", 0, 0);
    cJSON *doc = run_json("tcp_pref.trace");
    const cJSON *prof = cJSON_GetObjectItemCaseSensitive(doc, "profile");
    assert_int_equal(cJSON_GetArraySize(prof), (int)LAYERS);
    const cJSON *l0 = cJSON_GetArrayItem(prof, 0), *l1 = cJSON_GetArrayItem(prof, 1);
    expect_near(cJSON_GetObjectItemCaseSensitive(l0, "cakePreference")->valuedouble,
                expected_layer0(), "layer 0 (preference records)");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(l0, "cakePreferenceFrom")->valuestring,
        "preference");
    expect_near(cJSON_GetObjectItemCaseSensitive(l1, "cakePreference")->valuedouble,
                expected_prompts(1u), "layer 1 (its prompts)");
    assert_string_equal(
        cJSON_GetObjectItemCaseSensitive(l1, "cakePreferenceFrom")->valuestring,
        "prompts");

    /* Another order of the streams: the same document, to the last bit
     * (the profiles are fed in stream order, §18.1). */
    cJSON *rev = run_json("tcp_pref_rev.trace");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "trace");
    cJSON_DeleteItemFromObjectCaseSensitive(rev, "trace");
    cJSON *same = cJSON_Duplicate(doc, 1);
    assert_non_null(same);
    char *a = cJSON_PrintUnformatted(same), *b = cJSON_PrintUnformatted(rev);
    assert_string_equal(a, b);
    free(a);
    free(b);

    /* Without the preference records: layer 0 from its prompts, every
     * figure but CAKE's the same. */
    cJSON *plain = run_json("tcp_plain.trace");
    const cJSON *p0 = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(plain, "profile"), 0);
    expect_near(cJSON_GetObjectItemCaseSensitive(p0, "cakePreference")->valuedouble,
                expected_prompts(0u), "layer 0 without preference records");
    a = without_cake(doc);
    b = without_cake(plain);
    assert_string_equal(a, b);
    free(a);
    free(b);
    cJSON_Delete(doc);
    cJSON_Delete(same);
    cJSON_Delete(rev);
    cJSON_Delete(plain);

    /* `pyramidkv trace` counts them. */
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s trace tcp_pref.trace | grep -q "
             "'8 prefill, 0 decode, 8 future, 12 preference'", bin);
    assert_int_equal(system(cmd), 0);
    remove("tcp_pref.trace");
    remove("tcp_pref_rev.trace");
    remove("tcp_plain.trace");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_calibrate_preference PATH-TO-PYRAMIDKV\n");
        return 2;
    }
    bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(preference_records_give_p),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
