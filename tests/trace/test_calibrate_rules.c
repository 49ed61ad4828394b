/*
 * test_calibrate_rules.c - the rules of docs/spec.md §18 that no figure
 * test pins, through the pyramidkv program (path in argv[1]):
 * `calibrate --progress on` prints one progress line on stderr and `off`
 * none (§18, calibrate.md); query heads written separately, their
 * streams interleaved the other way round, give the same document to the
 * last bit, profiles included, and are each a member with a share of its
 * own: the same rows written as KV heads give the same figures (§18.1);
 * the worst head on a tie
 * is the first in (layer, head) order, and rows of equal figures are
 * ordered uniform, adaptive, shares, then by name (§18.5), whatever the
 * file order; replay's floor is --recent + 1 for the window scorers and 1
 * for tova, streaming-llm and sliding-window (§18.6).
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

static const char *bin;

static char *slurp_text(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1u);
    assert_non_null(s);
    s[fread(s, 1, (size_t)n, f)] = '\0';
    fclose(f);
    return s;
}

/* Runs `pyramidkv args`; its exit status, stdout and stderr (freed by
 * the caller). */
static int run(const char *args, char **out, char **err) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s >tcr_out.txt 2>tcr_err.txt", bin, args);
    const int st = system(cmd);
    *out = slurp_text("tcr_out.txt");
    *err = slurp_text("tcr_err.txt");
    return st;
}

static cJSON *run_json(const char *args) {
    char *out, *err;
    if (run(args, &out, &err) != 0) fail_msg("'%s': %s", args, err);
    cJSON *doc = cJSON_Parse(out);
    free(out);
    free(err);
    assert_non_null(doc);
    return doc;
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) fail_msg("no number %s", key);
    return v->valuedouble;
}

static void progress_line(void **state) {
    (void)state;
    char *out, *err;
    assert_int_equal(run("trace --make funnel --out tcr_f.trace --layers 4 "
                         "--kv-heads 2 --prompt 64 --window 8 --decode 0",
                         &out, &err), 0);
    free(out);
    free(err);
    assert_int_equal(run("calibrate tcr_f.trace --progress on", &out, &err), 0);
    /* 4 layers x 1 prompt: "\r... 1 of 4 ..." up to "4 of 4", then \n. */
    if (strstr(err, "pyramidkv calibrate: 4 of 4 prompt-layers measured\n") ==
            NULL || strchr(err, '\n')[1] != '\0')
        fail_msg("stderr '%s'", err);
    assert_non_null(strstr(out, "recommendation: "));
    free(out);
    free(err);
    assert_int_equal(run("calibrate tcr_f.trace --progress off", &out, &err), 0);
    assert_string_equal(err, "");
    free(out);
    free(err);
    remove("tcr_f.trace");
}

/* Copies trace `from` to `to` with its records in the opposite order of
 * the streams: every stream's records keep their own order. */
static void write_streams_reversed(const char *from, const char *to) {
    char err[256];
    pb_tr_reader *r = NULL;
    assert_int_equal(pb_tr_reader_open_file(from, &r, err, sizeof err), 0);
    const pb_tr_shape shape = *pb_tr_reader_shape(r);
    enum { MAX = 64 };
    float *vals[MAX];
    pb_tr_record recs[MAX];
    size_t n = 0;
    const float *v;
    while (pb_tr_reader_next(r, &recs[n], &v, err, sizeof err) == 1) {
        assert_true(n < MAX);
        const size_t c = (size_t)recs[n].rows * recs[n].length;
        vals[n] = malloc(c * sizeof *v);
        assert_non_null(vals[n]);
        memcpy(vals[n], v, c * sizeof *v);
        ++n;
    }
    pb_tr_reader_close(r);
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(to, &shape, &w, err, sizeof err), 0);
    /* streams from the last (layer, head, query head) to the first, each
     * whole in file order */
    for (size_t s = n; s-- > 0;) {
        int first = 1;
        for (size_t i = 0; i < s && first; ++i)
            first = !(recs[i].layer == recs[s].layer &&
                      recs[i].head == recs[s].head &&
                      recs[i].qhead == recs[s].qhead);
        if (!first) continue;
        for (size_t i = s; i < n; ++i)
            if (recs[i].layer == recs[s].layer &&
                recs[i].head == recs[s].head &&
                recs[i].qhead == recs[s].qhead)
                assert_int_equal(
                    pb_tr_writer_add(w, &recs[i], vals[i], err, sizeof err), 0);
    }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    for (size_t i = 0; i < n; ++i) free(vals[i]);
}

static void query_heads_any_order(void **state) {
    (void)state;
    char *out, *err;
    assert_int_equal(run("trace --make funnel --out tcr_g.trace --layers 3 "
                         "--kv-heads 2 --group 3 --prompt 48 --window 6 "
                         "--decode 0", &out, &err), 0);
    free(out);
    free(err);
    write_streams_reversed("tcr_g.trace", "tcr_g_rev.trace");
    cJSON *a = run_json("calibrate tcr_g.trace --budget 16 --recent 4 --json "
                        "--progress off");
    cJSON *b = run_json("calibrate tcr_g_rev.trace --budget 16 --recent 4 "
                        "--json --progress off");
    cJSON_DeleteItemFromObjectCaseSensitive(a, "trace");
    cJSON_DeleteItemFromObjectCaseSensitive(b, "trace");
    char *ta = cJSON_PrintUnformatted(a), *tb = cJSON_PrintUnformatted(b);
    assert_string_equal(ta, tb);
    free(ta);
    free(tb);
    cJSON_Delete(a);
    cJSON_Delete(b);
    remove("tcr_g.trace");
    remove("tcr_g_rev.trace");
}

/* A softmax row over pseudo-random logits of sharpness temp over keys
 * 0 .. seen - 1, zero above. */
static void soft_row(float *row, int width, int seen, double temp,
                     uint64_t *s) {
    double z = 0.0;
    for (int i = 0; i < width; ++i) {
        *s = *s * 6364136223846793005ull + 1442695040888963407ull;
        const double u = (double)(*s >> 11) / 9007199254740992.0;
        row[i] = i < seen ? (float)exp(temp * u * u) : 0.0f;
        z += row[i];
    }
    for (int i = 0; i < seen; ++i) row[i] = (float)(row[i] / z);
}

/* 2 layers, 2 prompts, two heads per layer of different rows: as the 2
 * query heads of one KV head written separately (as_query_heads), or as
 * 2 KV heads of one query head each. */
static void write_pair(const char *path, int as_query_heads) {
    enum { N = 48, R = 6, F = 3, L = 2, P = 2 };
    char err[256];
    const pb_tr_shape shape = {L, as_query_heads ? 1u : 2u,
                               as_query_heads ? 2u : 1u, 2u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    static float pre[R * N], fut[F * (N + F)];
    for (int p = 0; p < P; ++p)
        for (int l = 0; l < L; ++l)
            for (int h = 0; h < 2; ++h) {
                uint64_t s = 1000u + 100u * (uint64_t)p + 10u * (uint64_t)l +
                             (uint64_t)h;
                for (int j = 0; j < R; ++j)
                    soft_row(pre + j * N, N, N - R + j + 1, 3.0 + 9.0 * h, &s);
                for (int j = 0; j < F; ++j)
                    soft_row(fut + j * (N + F), N + F, N + j + 1,
                             4.0 + 8.0 * h, &s);
                pb_tr_record r = {PB_TR_PREFILL, PB_TR_F32, (uint32_t)l,
                                  as_query_heads ? 0u : (uint32_t)h,
                                  as_query_heads ? (uint32_t)h : 0u,
                                  N - R, R, N, 0, 0};
                assert_int_equal(pb_tr_writer_add(w, &r, pre, err, sizeof err),
                                 0);
                r.kind = PB_TR_FUTURE;
                r.query = N;
                r.rows = F;
                r.length = N + F;
                assert_int_equal(pb_tr_writer_add(w, &r, fut, err, sizeof err),
                                 0);
            }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
}

/* Query heads written separately are each a head of the layer group with
 * a share of its own (§18.1): the same rows as two KV heads give the same
 * held positions, recall, mass and peak under uniform and adaptive heads
 * (a reduced or shared group would keep one set for both). */
static void query_heads_are_members(void **state) {
    (void)state;
    write_pair("tcr_q.trace", 1);
    write_pair("tcr_k.trace", 0);
    cJSON *q = run_json("calibrate tcr_q.trace --budget 12 --recent 2 --json "
                        "--progress off");
    cJSON *k = run_json("calibrate tcr_k.trace --budget 12 --recent 2 --json "
                        "--progress off");
    const char *keys[] = {"held", "heavyHitterRecall", "retainedAttentionMass",
                          "peakLoss", "peakLossSE"};
    int compared = 0;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItemCaseSensitive(q, "schedules")) {
        const char *sc = cJSON_GetObjectItemCaseSensitive(a, "schedule")->valuestring;
        const char *hm = cJSON_GetObjectItemCaseSensitive(a, "heads")->valuestring;
        if (!strcmp(hm, "shares")) continue;
        const cJSON *b = NULL, *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(k, "schedules"))
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(x, "schedule")->valuestring, sc) &&
                !strcmp(cJSON_GetObjectItemCaseSensitive(x, "heads")->valuestring, hm))
                b = x;
        if (b == NULL) fail_msg("%s / %s: not in the KV-head trace", sc, hm);
        for (size_t i = 0; i < sizeof keys / sizeof keys[0]; ++i)
            if (fabs(num(a, keys[i]) - num(b, keys[i])) > 1e-12)
                fail_msg("%s / %s: %s %.17g as query heads, %.17g as KV "
                         "heads", sc, hm, keys[i], num(a, keys[i]),
                         num(b, keys[i]));
        compared += 1;
    }
    if (compared < 10) fail_msg("only %d rows compared", compared);
    cJSON_Delete(q);
    cJSON_Delete(k);
    remove("tcr_q.trace");
    remove("tcr_k.trace");
}

/* 2 layers x 2 KV heads, every record the same rows: every head's figures
 * tie. reversed: the streams in the opposite file order. */
static void write_equal(const char *path, int reversed) {
    char err[256];
    const pb_tr_shape shape = {2u, 2u, 1u, 2u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    enum { N = 40, R = 4, F = 2 };
    static float pre[R * N], fut[F * (N + F)];
    for (int j = 0; j < R; ++j)
        for (int i = 0; i <= N - R + j; ++i)
            pre[j * N + i] = (float)((i * 7 + j) % 11 + 1) / 64.0f;
    for (int j = 0; j < F; ++j)
        for (int i = 0; i <= N + j; ++i)
            fut[j * (N + F) + i] = (float)((i * 5 + j) % 13 + 1) / 128.0f;
    for (int n = 0; n < 4; ++n) {
        const int s = reversed ? 3 - n : n;
        pb_tr_record p = {PB_TR_PREFILL, PB_TR_F32, (uint32_t)s / 2u,
                          (uint32_t)s % 2u, PB_TR_GROUP_REDUCED, N - R, R, N,
                          0, 0};
        pb_tr_record f = p;
        f.kind = PB_TR_FUTURE;
        f.query = N;
        f.rows = F;
        f.length = N + F;
        assert_int_equal(pb_tr_writer_add(w, &p, pre, err, sizeof err), 0);
        assert_int_equal(pb_tr_writer_add(w, &f, fut, err, sizeof err), 0);
    }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
}

static int mode_rank(const char *m) {
    return !strcmp(m, "uniform") ? 0 : !strcmp(m, "adaptive") ? 1 : 2;
}

static void ties_in_order(void **state) {
    (void)state;
    for (int rev = 0; rev < 2; ++rev) {
        write_equal("tcr_t.trace", rev);
        cJSON *d = run_json("calibrate tcr_t.trace --budget 12 --recent 2 "
                            "--json --progress off");
        const cJSON *r, *prev = NULL;
        int equal_pairs = 0;
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(d, "schedules")) {
            /* uniform shares, every head alike: every head ties, the
             * worst is layer 0, head 0 */
            if (!strcmp(cJSON_GetObjectItemCaseSensitive(r, "schedule")
                            ->valuestring, "uniform") &&
                (num(r, "worstLayer") != 0.0 || num(r, "worstHead") != 0.0))
                fail_msg("worst head %g.%g", num(r, "worstLayer"),
                         num(r, "worstHead"));
            if (prev != NULL && num(prev, "peakLoss") == num(r, "peakLoss") &&
                num(prev, "heavyHitterRecall") == num(r, "heavyHitterRecall") &&
                num(prev, "retainedAttentionMass") ==
                    num(r, "retainedAttentionMass")) {
                const char *pm = cJSON_GetObjectItemCaseSensitive(prev, "heads")->valuestring;
                const char *rm = cJSON_GetObjectItemCaseSensitive(r, "heads")->valuestring;
                const char *pn = cJSON_GetObjectItemCaseSensitive(prev, "schedule")->valuestring;
                const char *rn = cJSON_GetObjectItemCaseSensitive(r, "schedule")->valuestring;
                if (mode_rank(pm) > mode_rank(rm) ||
                    (mode_rank(pm) == mode_rank(rm) && strcmp(pn, rn) > 0))
                    fail_msg("equal rows out of order: %s/%s before %s/%s",
                             pn, pm, rn, rm);
                equal_pairs += 1;
            }
            prev = r;
        }
        /* the uniform schedule's three head modes at least tie */
        if (equal_pairs < 2) fail_msg("only %d equal neighbours", equal_pairs);
        cJSON_Delete(d);
    }
    remove("tcr_t.trace");
}

static void replay_floor(void **state) {
    (void)state;
    char *out, *err;
    assert_int_equal(run("trace --make funnel --out tcr_d.trace --layers 4 "
                         "--kv-heads 1 --prompt 64 --window 8 --decode 3",
                         &out, &err), 0);
    free(out);
    free(err);
    const struct {
        const char *args;
        double floor;
    } cases[] = {
        {"--policy tova --budget 1", 1.0},
        {"--policy streaming-llm --sinks 0 --budget 1", 1.0},
        {"--policy sliding-window --budget 1", 1.0},
        {"--policy snapkv --budget 12 --recent 8", 9.0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        char args[256];
        snprintf(args, sizeof args, "replay tcr_d.trace --schedule "
                 "arithmetic:8 %s --json", cases[c].args);
        cJSON *d = run_json(args);
        double held = 0.0, below = 0.0;
        const cJSON *l;
        cJSON_ArrayForEach(l, cJSON_GetObjectItemCaseSensitive(d, "perLayer")) {
            const double s = num(l, "share");
            held += s > cases[c].floor ? s : cases[c].floor;
            below += s < cases[c].floor;
        }
        if (held != num(d, "heldTotal") || below == 0.0)
            fail_msg("'%s': held %g, sum of max(share, %g) %g, %g layers "
                     "below the floor", args, num(d, "heldTotal"),
                     cases[c].floor, held, below);
        cJSON_Delete(d);
    }
    remove("tcr_d.trace");
    remove("tcr_out.txt");
    remove("tcr_err.txt");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_calibrate_rules PATH-TO-PYRAMIDKV\n");
        return 2;
    }
    bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(progress_line),
        cmocka_unit_test(query_heads_any_order),
        cmocka_unit_test(query_heads_are_members),
        cmocka_unit_test(ties_in_order),
        cmocka_unit_test(replay_floor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
