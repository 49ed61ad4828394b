/*
 * test_qk_group.c - pb_qk_group_observe (pyramidkv_group.h): the layer
 * group scored from queries and keys. Its rows against the naive Q/K
 * reference (qk_reference.c) through the cumulative scores of one step;
 * its decisions equal to pb_qk_attention per head + pb_kvcache_group_observe
 * over a long run with evicts, for every key type, GQA group and scorer;
 * and every refusal leaves every head unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "pyramidkv/pyramidkv.h"
#include "qk_reference.h"
#include "test_rng.h"

enum { D = 8, NH = 3, SHARE = 20, MAXK = 128, STEPS = 90 };

/* Key elements of every position, per head, in the three key types. */
static float kf[NH][MAXK * 4][D];
static uint16_t kh[NH][MAXK * 4][D];

static float draw(pbt_rng *g) { return (float)(pbt_unit(g) * 4.0 - 2.0); }

static uint16_t to16(float x, uint32_t type) {
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    if (type == PB_KEYS_BF16) return (uint16_t)(b >> 16);
    /* binary16 of a value in [-2, 2): normal or zero, truncated */
    const uint32_t sign = (b >> 16) & 0x8000u;
    const int e = (int)((b >> 23) & 0xffu) - 127 + 15;
    if (e <= 0) return (uint16_t)sign;
    return (uint16_t)(sign | ((uint32_t)e << 10) | ((b >> 13) & 0x3ffu));
}

static void fill_keys(pbt_rng *g, uint32_t type) {
    for (size_t h = 0; h < NH; h++)
        for (size_t p = 0; p < MAXK * 4; p++)
            for (size_t j = 0; j < D; j++) {
                kf[h][p][j] = draw(g);
                kh[h][p][j] = to16(kf[h][p][j], type);
            }
}

/* Head h's keys of its held positions (and pos's own if own), packed. */
typedef struct keyset {
    float f[NH][MAXK + 1][D];
    uint16_t s[NH][MAXK + 1][D];
    const void *ptr[NH];
    size_t n[NH];
} keyset;

static void gather(const pb_kvcache_group *grp, uint32_t type, uint32_t pos,
                   int own, keyset *ks) {
    for (uint32_t h = 0; h < NH; h++) {
        uint32_t held[MAXK];
        size_t n = 0;
        assert_int_equal(pb_kvcache_kept_positions(pb_kvcache_group_head(grp, h),
                                                   held, MAXK, &n),
                         PB_OK);
        if (own) held[n++] = pos;
        for (size_t i = 0; i < n; i++) {
            memcpy(ks->f[h][i], kf[h][held[i]], sizeof ks->f[h][i]);
            memcpy(ks->s[h][i], kh[h][held[i]], sizeof ks->s[h][i]);
        }
        ks->n[h] = n;
        ks->ptr[h] = type == PB_KEYS_F32 ? (const void *)ks->f[h]
                                         : (const void *)ks->s[h];
    }
}

static pb_kvcache_group *make_group(uint32_t scorer, uint32_t slack) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = SHARE;
    c.share = SHARE;
    c.recent_window = 3u;
    c.obs_window = 4u;
    c.pool_kernel = 3u;
    c.scorer = scorer;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = NH;
    p.slack = slack;
    pb_kvcache_group *g = NULL;
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &g), PB_OK);
    return g;
}

static pb_qk *make_qk(uint32_t type, uint32_t group) {
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = group;
    c.key_type = type;
    c.max_keys = MAXK;
    pb_qk *qk = NULL;
    assert_int_equal(pb_qk_create(&c, NULL, &qk), PB_OK);
    return qk;
}

/* One step's rows equal the reference: positions 1 .. 29 admitted
 * unobserved, then one scored step; each held position's cumulative score
 * is its weight. */
static void rows_match_reference(void **state) {
    (void)state;
    for (uint32_t type = 0; type <= (uint32_t)PB_KEYS_BF16; type++)
        for (uint32_t gq = 1; gq <= 3u; gq += 2u) {
            pbt_rng g = {11u + type * 7u + gq};
            fill_keys(&g, type);
            pb_kvcache_group *grp = make_group(PB_SCORER_CUMULATIVE, 64u);
            pb_qk *qk = make_qk(type, gq);
            uint32_t pos = 1;
            for (; pos < 30u; pos++)
                assert_int_equal(
                    pb_kvcache_group_observe(grp, pos, NULL, 0, NULL), PB_OK);
            float q[NH * 3 * D];
            for (size_t i = 0; i < NH * 3 * D; i++) q[i] = draw(&g);
            static keyset ks;
            gather(grp, type, pos, (int)(type & 1u), &ks);
            assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, gq * D, D,
                                                 ks.ptr, D, ks.n),
                             PB_OK);
            for (uint32_t h = 0; h < NH; h++) {
                double want[MAXK + 1];
                qkr_attention(D, gq, type, PB_HEAD_REDUCE_MEAN, 0.0,
                              q + h * gq * D, D, 0u, 1u, ks.ptr[h], D,
                              ks.n[h], want);
                const pb_kvcache *head = pb_kvcache_group_head(grp, h);
                for (uint32_t p = 0; p < 30u; p++) {
                    double s = 0.0;
                    assert_int_equal(pb_kvcache_score(head, p, &s), PB_OK);
                    assert_true(qkr_close((float)s, want[p]));
                }
            }
            pb_qk_destroy(qk);
            pb_kvcache_group_destroy(grp);
        }
}

/* The same decisions as pb_qk_attention per head + the group observe. */
static void decisions_equal_rows_feed(void **state) {
    (void)state;
    for (uint32_t scorer = 0; scorer <= (uint32_t)PB_SCORER_NONE; scorer++)
        for (uint32_t type = 0; type <= (uint32_t)PB_KEYS_BF16; type++) {
            const uint32_t gq = 1u + (scorer + type) % 3u;
            pbt_rng g = {101u + scorer * 5u + type};
            fill_keys(&g, type);
            pb_kvcache_group *a = make_group(scorer, 4u);
            pb_kvcache_group *b = make_group(scorer, 4u);
            pb_qk *qk = make_qk(type, gq);
            static keyset ks;
            static float rows[NH][MAXK + 1];
            for (uint32_t pos = 1; pos < STEPS; pos++) {
                float q[NH * 3 * D];
                for (size_t i = 0; i < NH * 3 * D; i++) q[i] = draw(&g);
                const int own = (int)(pos % 2u);
                gather(a, type, pos, own, &ks);
                assert_int_equal(pb_qk_group_observe(qk, a, pos, q, gq * D,
                                                     D, ks.ptr, D, ks.n),
                                 PB_OK);
                size_t lens[NH];
                for (uint32_t h = 0; h < NH; h++) {
                    assert_int_equal(
                        pb_qk_attention(qk, q + h * gq * D, D, 0u, 1u,
                                        ks.ptr[h], D, ks.n[h], rows[h]),
                        PB_OK);
                    lens[h] = ks.n[h] - (size_t)own;
                }
                assert_int_equal(pb_kvcache_group_observe(b, pos, &rows[0][0],
                                                          MAXK + 1, lens),
                                 PB_OK);
                if (pos % 4u != 3u) continue;
                uint32_t va[NH * MAXK], vb[NH * MAXK];
                size_t ca[NH], cb[NH], na = 0, nb = 0;
                assert_int_equal(pb_kvcache_group_evict(a, UINT64_MAX, va,
                                                        NH * MAXK, ca, NH,
                                                        &na),
                                 PB_OK);
                assert_int_equal(pb_kvcache_group_evict(b, UINT64_MAX, vb,
                                                        NH * MAXK, cb, NH,
                                                        &nb),
                                 PB_OK);
                assert_int_equal(na, nb);
                assert_memory_equal(ca, cb, sizeof ca);
                assert_memory_equal(va, vb, na * sizeof *va);
            }
            pb_qk_destroy(qk);
            pb_kvcache_group_destroy(a);
            pb_kvcache_group_destroy(b);
        }
}

/* Every held position and score of every head, for the unchanged check. */
typedef struct snapshot {
    uint32_t pos[NH][MAXK];
    double score[NH][MAXK];
    size_t n[NH];
} snapshot;

static void snap(const pb_kvcache_group *grp, snapshot *s) {
    memset(s, 0, sizeof *s);
    for (uint32_t h = 0; h < NH; h++) {
        const pb_kvcache *head = pb_kvcache_group_head(grp, h);
        assert_int_equal(pb_kvcache_kept_positions(head, s->pos[h], MAXK,
                                                   &s->n[h]),
                         PB_OK);
        for (size_t i = 0; i < s->n[h]; i++)
            assert_int_equal(pb_kvcache_score(head, s->pos[h][i],
                                              &s->score[h][i]),
                             PB_OK);
    }
}

static void refusals_leave_state(void **state) {
    (void)state;
    pbt_rng g = {5u};
    fill_keys(&g, PB_KEYS_F32);
    pb_kvcache_group *grp = make_group(PB_SCORER_WINDOW, 1u);
    pb_qk *qk = make_qk(PB_KEYS_F32, 2u);
    static keyset ks;
    float q[NH * 2 * D];
    for (size_t i = 0; i < NH * 2 * D; i++) q[i] = draw(&g);
    uint32_t pos = 1;
    for (; pos < 10u; pos++) {
        gather(grp, PB_KEYS_F32, pos, 1, &ks);
        assert_int_equal(
            pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr, D, ks.n),
            PB_OK);
    }
    snapshot before, after;
    snap(grp, &before);
    gather(grp, PB_KEYS_F32, pos, 0, &ks);
    assert_int_equal(pb_qk_group_observe(NULL, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_group_observe(qk, NULL, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, NULL, 2 * D, D,
                                         ks.ptr, D, ks.n),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, NULL, D,
                                         ks.n),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, NULL),
                     PB_ERR_NULL);
    const void *saved = ks.ptr[2];
    ks.ptr[2] = NULL;
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_NULL);
    ks.ptr[2] = saved;
    ks.n[1] += 2u;
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_LENGTH);
    ks.n[1] -= 2u;
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D - 1u, ks.n),
                     PB_ERR_PARAM);
    ks.f[2][3][1] = NAN; /* a bad key of the last head */
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_WEIGHT);
    ks.f[2][3][1] = INFINITY;
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_WEIGHT);
    ks.f[2][3][1] = 0.5f;
    q[2 * 2 * D + D + 3] = NAN; /* a bad query of the last head's group */
    assert_int_equal(pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr,
                                         D, ks.n),
                     PB_ERR_WEIGHT);
    q[2 * 2 * D + D + 3] = 0.25f;
    assert_int_equal(pb_qk_group_observe(qk, grp, pos - 1u, q, 2 * D, D,
                                         ks.ptr, D, ks.n),
                     PB_ERR_POSITION);
    snap(grp, &after);
    assert_memory_equal(&before, &after, sizeof before);
    /* Full: every head at its capacity until the group evicts. */
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_info(grp, &info), PB_OK);
    pb_status st = PB_OK;
    for (; st == PB_OK; pos++) {
        gather(grp, PB_KEYS_F32, pos, 1, &ks);
        snap(grp, &before);
        st = pb_qk_group_observe(qk, grp, pos, q, 2 * D, D, ks.ptr, D, ks.n);
    }
    assert_int_equal(st, PB_ERR_FULL);
    snap(grp, &after);
    assert_memory_equal(&before, &after, sizeof before);
    pb_qk_destroy(qk);
    pb_kvcache_group_destroy(grp);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(rows_match_reference),
        cmocka_unit_test(decisions_equal_rows_feed),
        cmocka_unit_test(refusals_leave_state),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
