/*
 * test_calibrate_heads.c - `pyramidkv calibrate` (path in argv[1]) against
 * a naive recomputation of its figures. A small trace of 4 layers x 3 KV
 * heads x 2 prompts, heads of different sharpness, is written with
 * trace_io; calibrate --json's retained mass and heavy-hitter recall of
 * every schedule under both head modes are recomputed here from the
 * schedule's shares: per-head uniform with one ordinary instance per
 * record (pb_kvcache_prefill, not the layer group calibrate uses with a
 * floor of 1000), head-adaptive with one layer group per (prompt, layer),
 * heavy hitters by repeated arg-max, then means per (layer, KV head) and
 * over them; fixed per-head shares from a per-(layer, KV head) profile of
 * the window rows, one instance per record at its head's share. Written
 * as version 2 with future rows, the peak loss (the later rows' attention
 * on each head's 8 most attended prompt positions, the evicted share pooled
 * over a prompt's heads) and the worst-head loss are recomputed the same way, and the same records written in
 * another order of the streams give the same document. The ranking and
 * the recommendation are checked against the document's own figures.
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

#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define LAYERS 4u
#define HEADS 3u
#define PROMPTS 2u
#define LEN 96u
#define ROWS 8u
#define TOP 32u
#define BUDGET 24u
#define FUT 4u
#define FLEN (LEN + FUT)

static const char *bin;
static float att[PROMPTS][LAYERS][HEADS][ROWS * LEN];
static float fut[PROMPTS][LAYERS][HEADS][FUT * FLEN];

/* A row of `width` values: a softmax over pseudo-random logits of
 * sharpness `temp` over positions 0 .. seen - 1, zero above. */
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

/* Rows sharper for higher head and layer indices: window row j sees
 * positions 0 .. LEN - ROWS + j, future row j 0 .. LEN + j. */
static void make_rows(void) {
    uint64_t s = 12345u;
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l)
            for (uint32_t h = 0; h < HEADS; ++h) {
                const double temp = 0.4 + 1.2 * (double)(h + l) / 3.0;
                for (uint32_t j = 0; j < ROWS; ++j)
                    softmax_row(att[p][l][h] + (size_t)j * LEN, LEN,
                                LEN - ROWS + j + 1u, temp * 4.0, &s);
                for (uint32_t j = 0; j < FUT; ++j)
                    softmax_row(fut[p][l][h] + (size_t)j * FLEN, FLEN,
                                LEN + j + 1u, temp * 5.0, &s);
            }
}

/* Version 1 without future rows; version 2 with them, prompt-major, or
 * (reversed) each stream whole in turn from the last stream, its future
 * record before its prefill record. */
static void write_trace(const char *path, uint32_t version, int reversed) {
    char err[256];
    const pb_tr_shape shape = {LAYERS, HEADS, 1u, version};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    for (uint32_t n = 0; n < PROMPTS * LAYERS * HEADS; ++n) {
        const uint32_t stream = reversed ? LAYERS * HEADS - 1u - n / PROMPTS
                                         : n % (LAYERS * HEADS);
        const uint32_t p = reversed ? n % PROMPTS : n / (LAYERS * HEADS);
        const uint32_t l = stream / HEADS, h = stream % HEADS;
        pb_tr_record f;
        memset(&f, 0, sizeof f);
        f.kind = PB_TR_FUTURE;
        f.dtype = PB_TR_F32;
        f.layer = l;
        f.head = h;
        f.query = LEN;
        f.rows = FUT;
        f.length = FLEN;
        if (version == 2u && reversed)
            assert_int_equal(
                pb_tr_writer_add(w, &f, fut[p][l][h], err, sizeof err), 0);
        {
            {
                pb_tr_record rec;
                memset(&rec, 0, sizeof rec);
                rec.kind = PB_TR_PREFILL;
                rec.dtype = PB_TR_F32;
                rec.layer = l;
                rec.head = h;
                rec.qhead = 0u;
                rec.query = LEN - ROWS;
                rec.rows = ROWS;
                rec.length = LEN;
                assert_int_equal(
                    pb_tr_writer_add(w, &rec, att[p][l][h], err, sizeof err),
                    0);
            }
        }
        if (version == 2u && !reversed)
            assert_int_equal(
                pb_tr_writer_add(w, &f, fut[p][l][h], err, sizeof err), 0);
    }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
}

static char *run_json(const char *args) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s %s", bin, args);
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t cap = 1u << 20, n = 0;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - 1 - n, f)) > 0) n += got;
    buf[n] = '\0';
    assert_int_equal(pclose(f), 0);
    return buf;
}

static double mass_of(const float *v, const uint32_t *kept, size_t n) {
    double held = 0.0, all = 0.0;
    for (uint32_t j = 0; j < ROWS; ++j) {
        const uint32_t seen = LEN - ROWS + j + 1u;
        for (uint32_t i = 0; i < seen; ++i) {
            all += v[(size_t)j * LEN + i];
            for (size_t k = 0; k < n; ++k)
                if (kept[k] == i) held += v[(size_t)j * LEN + i];
        }
    }
    return held / all;
}

static double recall_of(const float *v, const uint32_t *kept, size_t n) {
    double col[LEN - ROWS];
    for (uint32_t i = 0; i < LEN - ROWS; ++i) {
        col[i] = 0.0;
        for (uint32_t j = 0; j < ROWS; ++j) col[i] += v[(size_t)j * LEN + i];
    }
    uint32_t hit = 0;
    for (uint32_t t = 0; t < TOP; ++t) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < LEN - ROWS; ++i)
            if (col[i] > col[best]) best = i;
        for (size_t k = 0; k < n; ++k) hit += kept[k] == best;
        col[best] = -1.0;
    }
    return (double)hit / TOP;
}

static pb_kvcache_config head_config(uint32_t share) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = share > ROWS ? share : ROWS + 1u;
    c.share = c.budget;
    c.num_layers = 1u;
    c.pyramid_ratio = 1u;
    c.recent_window = ROWS;
    c.obs_window = ROWS;
    c.pool_kernel = 7u;
    return c;
}

/* The future rows' attention on prompt positions not kept, over all of
 * it. */
static double loss_of(const float *f, const uint32_t *kept, size_t n) {
    double lost = 0.0, all = 0.0;
    for (uint32_t j = 0; j < FUT; ++j)
        for (uint32_t i = 0; i <= LEN + j; ++i) {
            const double a = f[(size_t)j * FLEN + i];
            int in = 0;
            for (size_t k = 0; k < n; ++k) in |= kept[k] == i;
            all += a;
            if (i < LEN && !in) lost += a;
        }
    return lost / all;
}

/* The future rows' attention summed per prompt position, its 8 largest
 * (ties to the lower position): their sum into *all, that on the positions
 * not kept into *lost. */
static void peak_of(const float *f, const uint32_t *kept, size_t n,
                    double *lost, double *all) {
    double col[LEN];
    for (uint32_t i = 0; i < LEN; ++i) {
        col[i] = 0.0;
        for (uint32_t j = 0; j < FUT; ++j) col[i] += f[(size_t)j * FLEN + i];
    }
    for (uint32_t t = 0; t < 8u; ++t) {
        uint32_t best = 0;
        for (uint32_t i = 1; i < LEN; ++i)
            if (col[i] > col[best]) best = i;
        int in = 0;
        for (size_t k = 0; k < n; ++k) in |= kept[k] == best;
        *all += col[best];
        if (!in) *lost += col[best];
        col[best] = -1.0;
    }
}

/* Per-head shares of layer l at held share S, from the window rows of
 * every prompt. */
static void head_shares(uint32_t l, uint32_t S, uint32_t *hs) {
    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    pp.num_layers = HEADS;
    pp.max_len = LEN;
    pb_profile *prof = NULL;
    assert_int_equal(pb_profile_create(&pp, NULL, &prof), PB_OK);
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t h = 0; h < HEADS; ++h)
            for (uint32_t j = 0; j < ROWS; ++j)
                assert_int_equal(
                    pb_profile_add_row(prof, h, att[p][l][h] + (size_t)j * LEN,
                                       LEN - ROWS + j + 1u), PB_OK);
    assert_int_equal(pb_profile_head_shares(prof, 0, HEADS, S, ROWS + 1u,
                                            900000u, hs, HEADS), PB_OK);
    pb_profile_destroy(prof);
}

typedef struct figures {
    double mass, recall, loss, peak;
} figures;

/* The naive figures of one allocation (mode 0 uniform, 1 adaptive, 2
 * shares): mass and recall, means over (layer, head) of the means over
 * prompts; loss, the mean over prompts of the worst head's future loss. */
static figures expected(const uint32_t *shares, int mode) {
    double m[LAYERS][HEADS] = {{0}}, r[LAYERS][HEADS] = {{0}};
    double worst[PROMPTS] = {0}, plost[PROMPTS] = {0}, pall[PROMPTS] = {0};
    static float block[HEADS * ROWS * LEN];
    uint32_t kept[HEADS * LEN];
    size_t counts[HEADS];
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l) {
            pb_kvcache_config c = head_config(shares[l]);
            if (mode == 1) {
                pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
                gp.num_heads = HEADS;
                gp.prefill_max_len = LEN;
                pb_kvcache_group *g = NULL;
                assert_int_equal(pb_kvcache_group_create(&c, &gp, NULL, &g),
                                 PB_OK);
                for (uint32_t h = 0; h < HEADS; ++h)
                    memcpy(block + (size_t)h * ROWS * LEN, att[p][l][h],
                           sizeof att[p][l][h]);
                size_t n = 0;
                assert_int_equal(
                    pb_kvcache_group_prefill(g, block, ROWS * LEN, ROWS, LEN,
                                             UINT64_MAX, NULL, 0, kept,
                                             HEADS * LEN, counts, HEADS, &n),
                    PB_OK);
                pb_kvcache_group_destroy(g);
            } else {
                uint32_t hs[HEADS];
                for (uint32_t h = 0; h < HEADS; ++h) hs[h] = c.share;
                if (mode == 2) head_shares(l, c.share, hs);
                for (uint32_t h = 0; h < HEADS; ++h) {
                    pb_kvcache_config ch = head_config(hs[h]);
                    ch.prefill_max_len = LEN;
                    pb_kvcache *kv = NULL;
                    assert_int_equal(pb_kvcache_create(&ch, NULL, &kv), PB_OK);
                    assert_int_equal(
                        pb_kvcache_prefill(kv, att[p][l][h], ROWS, LEN,
                                           ch.share, NULL, 0,
                                           kept + (size_t)h * LEN, LEN, NULL,
                                           0, &counts[h]),
                        PB_OK);
                    pb_kvcache_destroy(kv);
                }
            }
            const uint32_t *k = kept;
            for (uint32_t h = 0; h < HEADS; ++h) {
                m[l][h] += mass_of(att[p][l][h], k, counts[h]);
                r[l][h] += recall_of(att[p][l][h], k, counts[h]);
                const double x = loss_of(fut[p][l][h], k, counts[h]);
                if (x > worst[p]) worst[p] = x;
                peak_of(fut[p][l][h], k, counts[h], &plost[p], &pall[p]);
                k += mode == 1 ? counts[h] : LEN;
            }
        }
    figures f = {0.0, 0.0, 0.0, 0.0};
    for (uint32_t l = 0; l < LAYERS; ++l)
        for (uint32_t h = 0; h < HEADS; ++h) {
            f.mass += m[l][h] / PROMPTS;
            f.recall += r[l][h] / PROMPTS;
        }
    f.mass /= LAYERS * HEADS;
    f.recall /= LAYERS * HEADS;
    for (uint32_t p = 0; p < PROMPTS; ++p) {
        f.loss += worst[p] / PROMPTS;
        f.peak += plost[p] / pall[p] / PROMPTS;
    }
    return f;
}

static int mode_of(const char *heads) {
    if (strcmp(heads, "adaptive") == 0) return 1;
    if (strcmp(heads, "shares") == 0) return 2;
    assert_string_equal(heads, "uniform");
    return 0;
}

/* Checks one document against the naive figures; with_future: its rows
 * ranked by the future loss. */
static void check_doc(const char *out, int with_future) {
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "schedules");
    assert_true(cJSON_IsArray(arr));
    int n = 0, n_mode[3] = {0, 0, 0}, differ = 0, cake = 0;
    double prev_recall = 2.0, prev_mass = 2.0, prev_loss = -1.0;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        const char *name =
            cJSON_GetObjectItemCaseSensitive(e, "schedule")->valuestring;
        const char *heads =
            cJSON_GetObjectItemCaseSensitive(e, "heads")->valuestring;
        const double mass = cJSON_GetObjectItemCaseSensitive(
                                e, "retainedAttentionMass")->valuedouble;
        const double recall = cJSON_GetObjectItemCaseSensitive(
                                  e, "heavyHitterRecall")->valuedouble;
        const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shares");
        assert_int_equal(cJSON_GetArraySize(sh), LAYERS);
        uint32_t shares[LAYERS];
        for (uint32_t l = 0; l < LAYERS; ++l)
            shares[l] = (uint32_t)cJSON_GetArrayItem(sh, (int)l)->valuedouble;
        const int mode = mode_of(heads);
        const figures x = expected(shares, mode);
        if (fabs(x.mass - mass) > 1e-9 || fabs(x.recall - recall) > 1e-9)
            fail_msg("%s/%s: mass %.9f recall %.9f, expected %.9f %.9f", name,
                     heads, mass, recall, x.mass, x.recall);
        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(e, "worstHeadLoss");
        const cJSON *pk = cJSON_GetObjectItemCaseSensitive(e, "peakLoss");
        if (with_future) {
            assert_non_null(fl);
            assert_non_null(pk);
            if (fabs(x.loss - fl->valuedouble) > 1e-9 ||
                fabs(x.peak - pk->valuedouble) > 1e-9)
                fail_msg("%s/%s: worst-head loss %.9f peak loss %.9f, "
                         "expected %.9f %.9f", name, heads, fl->valuedouble,
                         pk->valuedouble, x.loss, x.peak);
            assert_true(pk->valuedouble >= prev_loss);
            prev_loss = pk->valuedouble;
        } else {
            assert_null(fl);
            assert_true(recall < prev_recall ||
                        (recall == prev_recall && mass <= prev_mass));
        }
        prev_recall = recall;
        prev_mass = mass;
        if (n == 0) {
            assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(doc, "recommendation")
                    ->valuestring, name);
            assert_string_equal(
                cJSON_GetObjectItemCaseSensitive(doc, "recommendedHeads")
                    ->valuestring, heads);
        }
        n += 1;
        n_mode[mode] += 1;
        cake += strcmp(name, "cake") == 0;
        if (mode == 1) {
            const figures u = expected(shares, 0);
            differ += u.mass != x.mass || u.recall != x.recall;
        }
    }
    /* every schedule, cake included, under the three modes, and the modes
     * not the same thing */
    assert_true(n >= 21);
    assert_int_equal(n_mode[0], n_mode[1]);
    assert_int_equal(n_mode[0], n_mode[2]);
    assert_int_equal(cake, 3);
    assert_true(differ > 0);
    cJSON_Delete(doc);
}

static void calibrate_matches_naive(void **state) {
    (void)state;
    make_rows();
    char args[128];
    write_trace("tc_heads.trace", 1u, 0);
    snprintf(args, sizeof args, "calibrate tc_heads.trace --budget %u --json",
             BUDGET);
    char *out = run_json(args);
    check_doc(out, 0);
    free(out);

    write_trace("tc_heads.trace", 2u, 0);
    out = run_json(args);
    check_doc(out, 1);
    /* The streams in another order: every allocation's figures and the
     * order of the rows the same to the last bit (the layer profile's
     * sums follow the file's order, docs/spec.md §14.4, and are not
     * compared). */
    write_trace("tc_heads.trace", 2u, 1);
    char *again = run_json(args);
    cJSON *d1 = cJSON_Parse(out), *d2 = cJSON_Parse(again);
    assert_non_null(d1);
    assert_non_null(d2);
    char *s1 = cJSON_Print(cJSON_GetObjectItemCaseSensitive(d1, "schedules"));
    char *s2 = cJSON_Print(cJSON_GetObjectItemCaseSensitive(d2, "schedules"));
    assert_string_equal(s1, s2);
    cJSON_free(s1);
    cJSON_free(s2);
    cJSON_Delete(d1);
    cJSON_Delete(d2);
    free(again);
    free(out);
    remove("tc_heads.trace");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: test_calibrate_heads PATH-TO-pyramidkv\n");
        return 2;
    }
    bin = argv[1];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(calibrate_matches_naive),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
