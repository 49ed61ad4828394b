/*
 * test_head_group_rows.c - the pooled K/V layout of a layer group
 * (docs/spec.md §16.6) against a simulated runtime: a K/V store of
 * pool_rows rows, each tagged with the (head, position) whose K/V the
 * runtime wrote there, driven through random observe / evict / prefill /
 * reset sequences. After every call each head's gathered rows
 * (pb_kvcache_group_head_rows) must hold exactly its kept positions, in
 * held order; an admission must land on a free row and an evict free
 * exactly the victims' rows; the rows given must be those the spec's LIFO
 * rule predicts (a model of the free stack kept here); the victims must be
 * those of a twin group without the pool; a refused call changes no row.
 * Scenario count and seed from argv (default 200 scenarios).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_rng.h"

#define MAXH 6u
#define NONE UINT32_MAX

static unsigned long g_scenarios = 200;
static uint64_t g_seed = 1;
static size_t g_freed, g_full, g_prefills; /* the runs compared something */

/* The runtime's store and the spec's free stack, modelled. */
typedef struct sim {
    uint32_t rows, heads;
    uint32_t *tag_head, *tag_pos; /* [rows]; tag_head NONE: empty */
    uint32_t *stack;              /* the free stack, top last */
    uint32_t free_n;
} sim;

static void sim_reset(sim *s) {
    for (uint32_t r = 0; r < s->rows; r++) s->tag_head[r] = NONE;
    for (uint32_t h = 0; h < s->heads; h++) {
        s->tag_head[h] = h;
        s->tag_pos[h] = 0u;
    }
    s->free_n = 0;
    for (uint32_t r = s->rows; r-- > s->heads;) s->stack[s->free_n++] = r;
}

/* Every head's gathered rows hold its kept positions; no row is shared;
 * the store's tagged rows are exactly the held ones. */
static void check_store(const pb_kvcache_group *g, const sim *s,
                        unsigned long scenario) {
    static uint32_t rows[8192], pos[8192];
    static unsigned char seen[65536];
    memset(seen, 0, s->rows);
    size_t total = 0;
    for (uint32_t h = 0; h < s->heads; h++) {
        size_t n = 0, m = 0;
        assert_int_equal(pb_kvcache_group_head_rows(g, h, rows, 8192, &n),
                         PB_OK);
        assert_int_equal(pb_kvcache_kept_positions(pb_kvcache_group_head(g, h),
                                                   pos, 8192, &m),
                         PB_OK);
        assert_int_equal(n, m);
        for (size_t i = 0; i < n; i++) {
            assert_true(rows[i] < s->rows);
            if (seen[rows[i]] || s->tag_head[rows[i]] != h ||
                s->tag_pos[rows[i]] != pos[i]) {
                print_error("scenario %lu head %u: row %u holds (%u, %u), "
                            "want (%u, %u)\n",
                            scenario, h, rows[i], s->tag_head[rows[i]],
                            s->tag_pos[rows[i]], h, pos[i]);
                fail();
            }
            seen[rows[i]] = 1;
        }
        total += n;
    }
    assert_true(total <= s->rows);
    assert_int_equal(total + s->free_n, s->rows);
}

static float weight(pbt_rng *r) {
    switch (pbt_below(r, 4)) {
    case 0: return 0.0f;
    case 1: return 0.25f * (float)pbt_below(r, 4);
    default: return (float)pbt_unit(r);
    }
}

static void run(pbt_rng *r, unsigned long scenario) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.recent_window = pbt_below(r, 4);
    c.share = c.recent_window + 1u + pbt_below(r, 12);
    c.budget = c.share + 1u;
    c.obs_window = 1u + pbt_below(r, 4);
    c.pool_kernel = 1u + 2u * pbt_below(r, 3);
    c.pool = pbt_below(r, 2);
    c.scorer = pbt_below(r, 5);
    c.sinks = pbt_below(r, 3) == 0 ? pbt_below(r, 4) : 0u;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = 1u + pbt_below(r, MAXH);
    const uint32_t fl[] = {0u, 200u, 500u, 1000u};
    p.floor_permille = fl[pbt_below(r, 4)];
    p.slack = 1u + pbt_below(r, 6);
    p.head_cap_permille = pbt_below(r, 3) == 0 ? 1500u : 0u;
    p.prefill_max_len = 48u;
    /* Disciplined: evicts to the layer's total every slack steps and
     * never skips observing, so the pool must never run out. */
    const int disciplined = pbt_below(r, 2) != 0u;
    pb_kvcache_group *g = NULL, *twin = NULL;
    pb_kvcache_group_params tp = p;
    p.pooled_rows = 1u;
    if (pb_kvcache_group_create(&c, &p, NULL, &g) != PB_OK) {
        assert_int_not_equal(pb_kvcache_group_create(&c, &tp, NULL, &twin),
                             PB_OK);
        return;
    }
    assert_int_equal(pb_kvcache_group_create(&c, &tp, NULL, &twin), PB_OK);
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_info(g, &info), PB_OK);
    const uint64_t kept_r =
        c.scorer == PB_SCORER_LAST && c.recent_window == 0u ? 1u
                                                            : c.recent_window;
    const uint64_t guard = kept_r + c.sinks + info.floor;
    const uint64_t per = info.head_share > guard ? info.head_share : guard;
    assert_int_equal(info.pool_rows, p.num_heads * (per + p.slack));
    if (c.sinks == 0u && kept_r == c.recent_window)
        assert_int_equal(info.pool_rows,
                         info.layer_total + (uint64_t)p.num_heads * p.slack);
    sim s = {(uint32_t)info.pool_rows, p.num_heads, NULL, NULL, NULL, 0};
    s.tag_head = malloc(sizeof(uint32_t) * s.rows);
    s.tag_pos = malloc(sizeof(uint32_t) * s.rows);
    s.stack = malloc(sizeof(uint32_t) * s.rows);
    sim_reset(&s);
    check_store(g, &s, scenario);

    const size_t stride = info.head_capacity;
    float *attn = malloc(sizeof(float) * stride * p.num_heads);
    static float pre[MAXH * 48u * 48u];
    static uint32_t v1[8192], v2[8192], rw[8192], snap[8192];
    size_t lens[MAXH], c1[MAXH], c2[MAXH], n1, n2;
    uint32_t newr[MAXH];
    uint32_t pos = 0, since = 0;
    int fresh = 1;
    const uint32_t ops = 40u + pbt_below(r, 120);
    for (uint32_t t = 0; t < ops; t++) {
        const uint32_t op = pbt_below(r, 20);
        if (op == 0) { /* reset */
            assert_int_equal(pb_kvcache_group_reset(g), PB_OK);
            assert_int_equal(pb_kvcache_group_reset(twin), PB_OK);
            sim_reset(&s);
            pos = 0;
            since = 0;
            fresh = 1;
        } else if (op == 1 && fresh && c.scorer == PB_SCORER_WINDOW &&
                   c.sinks == 0u) { /* prefill of a fresh group */
            const size_t len = 1u + pbt_below(r, 48);
            const size_t rows = 1u + pbt_below(r, (uint32_t)len);
            for (size_t i = 0; i < p.num_heads * rows * len; i++)
                pre[i] = weight(r);
            const uint64_t ask =
                pbt_below(r, 3) == 0 ? pbt_below(r, (uint32_t)info.layer_total + 2u)
                                     : UINT64_MAX;
            assert_int_equal(pb_kvcache_group_prefill(
                                 g, pre, rows * len, rows, len, ask, NULL, 0,
                                 v1, 8192, c1, MAXH, &n1),
                             PB_OK);
            assert_int_equal(pb_kvcache_group_prefill(
                                 twin, pre, rows * len, rows, len, ask, NULL,
                                 0, v2, 8192, c2, MAXH, &n2),
                             PB_OK);
            assert_int_equal(n1, n2);
            assert_memory_equal(v1, v2, n1 * sizeof *v1);
            /* The survivors took rows 0, 1, ... in kept order. */
            for (uint32_t r2 = 0; r2 < s.rows; r2++) s.tag_head[r2] = NONE;
            size_t at = 0;
            for (uint32_t h = 0; h < p.num_heads; h++)
                for (size_t i = 0; i < c1[h]; i++, at++) {
                    s.tag_head[at] = h;
                    s.tag_pos[at] = v1[at];
                }
            s.free_n = 0;
            for (uint32_t r2 = s.rows; r2-- > (uint32_t)at;)
                s.stack[s.free_n++] = r2;
            pos = (uint32_t)(len - 1u);
            since = 0;
            fresh = 0;
            g_prefills++;
        } else if (op < 14) { /* a decode step */
            pos += 1u;
            const int null_step = !disciplined && pbt_below(r, 8) == 0;
            for (uint32_t h = 0; h < p.num_heads; h++) {
                lens[h] = pb_kvcache_kept_count(pb_kvcache_group_head(g, h));
                for (size_t i = 0; i < lens[h]; i++)
                    attn[h * stride + i] = weight(r);
            }
            if (pbt_below(r, 16) == 0) { /* a refused step */
                const uint32_t bh = pbt_below(r, p.num_heads);
                if (lens[bh] > 0u) {
                    const float keep = attn[bh * stride];
                    attn[bh * stride] = -1.0f;
                    size_t n0 = 0;
                    assert_int_equal(
                        pb_kvcache_group_head_rows(g, bh, snap, 8192, &n0),
                        PB_OK);
                    assert_int_equal(pb_kvcache_group_observe(
                                         g, pos, attn, stride, lens),
                                     PB_ERR_WEIGHT);
                    check_store(g, &s, scenario);
                    size_t n3 = 0;
                    assert_int_equal(
                        pb_kvcache_group_head_rows(g, bh, rw, 8192, &n3),
                        PB_OK);
                    assert_int_equal(n0, n3);
                    assert_memory_equal(snap, rw, n0 * sizeof *rw);
                    attn[bh * stride] = keep;
                }
            }
            const pb_status st = pb_kvcache_group_observe(
                g, pos, null_step ? NULL : attn, stride, lens);
            const pb_status st2 = pb_kvcache_group_observe(
                twin, pos, null_step ? NULL : attn, stride, lens);
            if (st == PB_ERR_FULL) {
                /* Disciplined, the pool always has a row per head (a
                 * head's own capacity may still refuse: the last scorer
                 * at recent_window 0 protects its newest beyond
                 * head_capacity's bound). */
                if (disciplined)
                    assert_true(pb_kvcache_group_kept_total(g) +
                                    p.num_heads <= s.rows);
                g_full++;
                /* Pool or head full: the twin may still admit. Keep the
                 * two in step by undoing nothing: evict both to T. */
                assert_true(st2 == PB_OK || st2 == PB_ERR_FULL);
                if (st2 == PB_OK) {
                    /* The twin took the step; restart both. */
                    assert_int_equal(pb_kvcache_group_reset(g), PB_OK);
                    assert_int_equal(pb_kvcache_group_reset(twin), PB_OK);
                    sim_reset(&s);
                    pos = 0;
                    since = 0;
                    fresh = 1;
                }
                check_store(g, &s, scenario);
                continue;
            }
            assert_int_equal(st, PB_OK);
            assert_int_equal(st2, PB_OK);
            assert_int_equal(pb_kvcache_group_new_rows(g, newr, MAXH), PB_OK);
            for (uint32_t h = 0; h < p.num_heads; h++) {
                /* The spec's pop order: head 0 first. */
                assert_true(s.free_n > 0u);
                const uint32_t want = s.stack[--s.free_n];
                assert_int_equal(newr[h], want);
                assert_int_equal(s.tag_head[want], NONE);
                s.tag_head[want] = h;
                s.tag_pos[want] = pos;
            }
            since++;
            fresh = 0;
        }
        if (op >= 14 || (disciplined && since >= p.slack)) { /* evict */
            const uint64_t ask =
                !disciplined && pbt_below(r, 4) == 0
                    ? pbt_below(r, (uint32_t)info.layer_total + 2u)
                    : UINT64_MAX;
            if (pbt_below(r, 8) == 0) { /* a refused evict: cap too small */
                size_t need = 0;
                const pb_status st = pb_kvcache_group_evict_rows(
                    g, ask, v1, rw, 0, c1, MAXH, &need);
                if (st == PB_ERR_BUFFER) {
                    assert_true(need > 0u);
                    check_store(g, &s, scenario);
                } else {
                    assert_int_equal(st, PB_OK);
                    assert_int_equal(need, 0u);
                }
            }
            const int plain = pbt_below(r, 4) == 0;
            if (plain) { /* the plain evict keeps the rows too */
                assert_int_equal(pb_kvcache_group_evict(g, ask, v1, 8192, c1,
                                                        MAXH, &n1),
                                 PB_OK);
            } else {
                assert_int_equal(pb_kvcache_group_evict_rows(
                                     g, ask, v1, rw, 8192, c1, MAXH, &n1),
                                 PB_OK);
            }
            assert_int_equal(pb_kvcache_group_evict(twin, ask, v2, 8192, c2,
                                                    MAXH, &n2),
                             PB_OK);
            assert_int_equal(n1, n2);
            assert_memory_equal(v1, v2, n1 * sizeof *v1);
            assert_memory_equal(c1, c2, p.num_heads * sizeof *c1);
            size_t at = 0;
            for (uint32_t h = 0; h < p.num_heads; h++)
                for (size_t i = 0; i < c1[h]; i++, at++) {
                    uint32_t row = NONE;
                    if (plain) { /* find it by its tag */
                        for (uint32_t r2 = 0; r2 < s.rows; r2++)
                            if (s.tag_head[r2] == h && s.tag_pos[r2] == v1[at])
                                row = r2;
                    } else {
                        row = rw[at];
                    }
                    assert_true(row < s.rows);
                    assert_int_equal(s.tag_head[row], h);
                    assert_int_equal(s.tag_pos[row], v1[at]);
                    s.tag_head[row] = NONE;
                    s.stack[s.free_n++] = row; /* pushed in victim order */
                }
            g_freed += n1;
            if (n1 > 0u) fresh = 0;
            since = 0;
        }
        check_store(g, &s, scenario);
    }
    free(attn);
    free(s.tag_head);
    free(s.tag_pos);
    free(s.stack);
    pb_kvcache_group_destroy(g);
    pb_kvcache_group_destroy(twin);
}

static void pooled_rows_follow_the_heads(void **state) {
    (void)state;
    for (unsigned long sc = 0; sc < g_scenarios; sc++) {
        pbt_rng r = {g_seed * 1000033u + sc};
        run(&r, sc);
    }
    assert_true(g_freed > 1000u && g_full > 0u && g_prefills > 10u);
}

/* The group's memory grows by the pool only when it is asked for; the
 * rows calls refuse a group without it. */
static void pool_is_opt_in(void **state) {
    (void)state;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    size_t off = 0, on = 0;
    assert_int_equal(pb_kvcache_group_size(&c, &p, &off), PB_OK);
    p.pooled_rows = 1u;
    assert_int_equal(pb_kvcache_group_size(&c, &p, &on), PB_OK);
    assert_true(on > off);
    p.pooled_rows = 2u;
    assert_int_equal(pb_kvcache_group_size(&c, &p, &on), PB_ERR_PARAM);
    p.pooled_rows = 0u;
    pb_kvcache_group *g = NULL;
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &g), PB_OK);
    assert_int_equal(pb_kvcache_group_memory_bytes(g), off);
    uint32_t rows[8];
    size_t n = 0, counts[8];
    assert_int_equal(pb_kvcache_group_head_rows(g, 0, rows, 8, &n),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_group_new_rows(g, rows, 8), PB_ERR_PARAM);
    assert_int_equal(
        pb_kvcache_group_evict_rows(g, UINT64_MAX, rows, rows, 8, counts, 8,
                                    &n),
        PB_ERR_PARAM);
    pb_kvcache_group_destroy(g);
}

/* The worked example of docs/spec.md §16.6 (§16.5's group). */
static void worked_example(void **state) {
    (void)state;
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.scorer = PB_SCORER_WINDOW;
    c.obs_window = 1u;
    c.pool_kernel = 1u;
    c.recent_window = 1u;
    c.share = 3u;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = 2u;
    p.floor_permille = 200u;
    p.prefill_max_len = 5u;
    p.pooled_rows = 1u;
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_plan(&c, &p, &info), PB_OK);
    assert_int_equal(info.pool_rows, 8u);
    pb_kvcache_group *g = NULL;
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &g), PB_OK);
    uint32_t rows[8], kept[16], v[8], rv[8];
    size_t n = 0, counts[2];
    assert_int_equal(pb_kvcache_group_new_rows(g, rows, 2), PB_OK);
    assert_int_equal(rows[0], 0u);
    assert_int_equal(rows[1], 1u);
    const float pre[10] = {0.5f, 0.125f, 0.125f, 0.25f, 0.0f,
                           0.75f, 0.0625f, 0.125f, 0.0625f, 0.0f};
    assert_int_equal(pb_kvcache_group_prefill(g, pre, 5, 1, 5, UINT64_MAX,
                                              NULL, 0, kept, 16, counts, 2,
                                              &n),
                     PB_OK);
    const uint32_t want_kept[6] = {0, 3, 4, 0, 2, 4};
    assert_int_equal(n, 6u);
    assert_memory_equal(kept, want_kept, sizeof want_kept);
    assert_int_equal(pb_kvcache_group_head_rows(g, 1, rows, 8, &n), PB_OK);
    const uint32_t want_rows1[3] = {3, 4, 5};
    assert_int_equal(n, 3u);
    assert_memory_equal(rows, want_rows1, sizeof want_rows1);
    const float step[6] = {0.25f, 0.5f, 0.25f, 0.5f, 0.25f, 0.25f};
    const size_t lens[2] = {3, 3};
    assert_int_equal(pb_kvcache_group_observe(g, 5, step, 3, lens), PB_OK);
    assert_int_equal(pb_kvcache_group_new_rows(g, rows, 2), PB_OK);
    assert_int_equal(rows[0], 6u);
    assert_int_equal(rows[1], 7u);
    assert_int_equal(pb_kvcache_group_evict_rows(g, UINT64_MAX, v, rv, 8,
                                                 counts, 2, &n),
                     PB_OK);
    assert_int_equal(n, 2u);
    assert_int_equal(v[0], 0u);
    assert_int_equal(rv[0], 0u);
    assert_int_equal(v[1], 2u);
    assert_int_equal(rv[1], 4u);
    assert_int_equal(pb_kvcache_group_observe(g, 6, NULL, 0, NULL), PB_OK);
    assert_int_equal(pb_kvcache_group_new_rows(g, rows, 2), PB_OK);
    assert_int_equal(rows[0], 4u);
    assert_int_equal(rows[1], 0u);
    pb_kvcache_group_destroy(g);
}

int main(int argc, char **argv) {
    if (argc > 1) g_scenarios = strtoul(argv[1], NULL, 10);
    if (argc > 2) g_seed = strtoull(argv[2], NULL, 10);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pooled_rows_follow_the_heads),
        cmocka_unit_test(pool_is_opt_in),
        cmocka_unit_test(worked_example),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
