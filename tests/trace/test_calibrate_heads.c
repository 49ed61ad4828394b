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
 * over them. The ranking (recall, then mass) and the recommendation are
 * checked against the document's own figures.
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

static const char *bin;
static float att[PROMPTS][LAYERS][HEADS][ROWS * LEN];

/* Rows of a softmax over pseudo-random logits, sharper for higher head and
 * layer indices; row j sees positions 0 .. LEN - ROWS + j. */
static void make_rows(void) {
    uint64_t s = 12345u;
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l)
            for (uint32_t h = 0; h < HEADS; ++h) {
                const double temp = 0.4 + 1.2 * (double)(h + l) / 3.0;
                for (uint32_t j = 0; j < ROWS; ++j) {
                    float *row = att[p][l][h] + (size_t)j * LEN;
                    const uint32_t seen = LEN - ROWS + j + 1u;
                    double z = 0.0;
                    for (uint32_t i = 0; i < LEN; ++i) {
                        s = s * 6364136223846793005ull + 1442695040888963407ull;
                        const double u = (double)(s >> 11) / 9007199254740992.0;
                        row[i] =
                            i < seen ? (float)exp(temp * 4.0 * u * u) : 0.0f;
                        z += row[i];
                    }
                    for (uint32_t i = 0; i < seen; ++i)
                        row[i] = (float)(row[i] / z);
                }
            }
}

static void write_trace(const char *path) {
    char err[256];
    const pb_tr_shape shape = {LAYERS, HEADS, 1u, 1u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l)
            for (uint32_t h = 0; h < HEADS; ++h) {
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

/* The naive figures of one allocation: mean over (layer, head) of the
 * mean over prompts. */
static void expected(const uint32_t *shares, int adaptive, double *mass,
                     double *recall) {
    double m[LAYERS][HEADS] = {{0}}, r[LAYERS][HEADS] = {{0}};
    static float block[HEADS * ROWS * LEN];
    uint32_t kept[HEADS * LEN];
    size_t counts[HEADS];
    for (uint32_t p = 0; p < PROMPTS; ++p)
        for (uint32_t l = 0; l < LAYERS; ++l) {
            pb_kvcache_config c = head_config(shares[l]);
            if (adaptive) {
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
                const uint32_t *k = kept;
                for (uint32_t h = 0; h < HEADS; ++h) {
                    m[l][h] += mass_of(att[p][l][h], k, counts[h]);
                    r[l][h] += recall_of(att[p][l][h], k, counts[h]);
                    k += counts[h];
                }
            } else {
                c.prefill_max_len = LEN;
                for (uint32_t h = 0; h < HEADS; ++h) {
                    pb_kvcache *kv = NULL;
                    assert_int_equal(pb_kvcache_create(&c, NULL, &kv), PB_OK);
                    size_t n = 0;
                    assert_int_equal(
                        pb_kvcache_prefill(kv, att[p][l][h], ROWS, LEN,
                                           c.share, NULL, 0, kept, LEN, NULL,
                                           0, &n),
                        PB_OK);
                    pb_kvcache_destroy(kv);
                    m[l][h] += mass_of(att[p][l][h], kept, n);
                    r[l][h] += recall_of(att[p][l][h], kept, n);
                }
            }
        }
    *mass = *recall = 0.0;
    for (uint32_t l = 0; l < LAYERS; ++l)
        for (uint32_t h = 0; h < HEADS; ++h) {
            *mass += m[l][h] / PROMPTS;
            *recall += r[l][h] / PROMPTS;
        }
    *mass /= LAYERS * HEADS;
    *recall /= LAYERS * HEADS;
}

static void calibrate_matches_naive(void **state) {
    (void)state;
    make_rows();
    write_trace("tc_heads.trace");
    char args[128];
    snprintf(args, sizeof args, "calibrate tc_heads.trace --budget %u --json",
             BUDGET);
    char *out = run_json(args);
    cJSON *doc = cJSON_Parse(out);
    free(out);
    assert_non_null(doc);
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(doc, "schedules");
    assert_true(cJSON_IsArray(arr));
    int n = 0, n_adaptive = 0, differ = 0;
    double prev_recall = 2.0, prev_mass = 2.0;
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
        const int adaptive = strcmp(heads, "adaptive") == 0;
        if (!adaptive) assert_string_equal(heads, "uniform");
        double em = 0.0, er = 0.0;
        expected(shares, adaptive, &em, &er);
        if (fabs(em - mass) > 1e-9 || fabs(er - recall) > 1e-9)
            fail_msg("%s/%s: mass %.9f recall %.9f, expected %.9f %.9f", name,
                     heads, mass, recall, em, er);
        /* best first: recall, then mass */
        assert_true(recall < prev_recall ||
                    (recall == prev_recall && mass <= prev_mass));
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
        n_adaptive += adaptive;
        if (adaptive) {
            double um = 0.0, ur = 0.0;
            expected(shares, 0, &um, &ur);
            differ += um != em || ur != er;
        }
    }
    /* every schedule under both modes, and the modes not the same thing */
    assert_true(n >= 14);
    assert_int_equal(n, 2 * n_adaptive);
    assert_true(differ > 0);
    cJSON_Delete(doc);
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
