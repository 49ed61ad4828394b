/*
 * test_bad_input_group.c - the bad-input matrix of the layer group
 * (pyramidkv_group.h), and its allocation-failure countdown. A row passes
 * one bad (or boundary) argument and asserts the documented status and
 * that every head's observable state (hardening_state.h) and the group's
 * kept total are what they were; outputs a refused call must not write hold
 * a canary. Rows that break a rule on one head only (the last) prove that
 * every head is checked before any changes. Rows that break two rules at
 * once check the first-error order of the header. The countdown fails the
 * 1st, 2nd, ... allocation of create until it succeeds: PB_ERR_NOMEM,
 * *out NULL, nothing outstanding; then a workload never allocates.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "hardening_state.h"
#include "pyramidkv/pyramidkv.h"

#define CANARY 0xC0FFEE11u
#define HEADS 3u
#define STRIDE 64u

typedef struct fx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_kvcache_group *g;
    hs_state before[HEADS];
    uint64_t total;
    uint32_t rows_before[HEADS][64]; /* each head's pool rows */
    size_t rows_n[HEADS];
    uint32_t new_before[HEADS];
    float attn[HEADS * STRIDE];
    size_t lens[HEADS];
    uint32_t next_pos;
} fx;

static pb_kvcache_config head_config(void) {
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.budget = 8u;
    c.share = 6u;
    c.recent_window = 2u;
    c.obs_window = 3u;
    c.pool_kernel = 3u;
    return c;
}

static pb_kvcache_group_params group_params(void) {
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = HEADS;
    p.floor_permille = 250u;
    p.slack = 2u;
    p.prefill_max_len = 16u;
    p.pooled_rows = 1u; /* every row below also checks the pool's rows */
    return p;
}

/* Valid weights for every head over its held positions, differing by
 * head so that the heads' evicts differ. */
static void fill_rows(fx *f) {
    for (uint32_t h = 0; h < HEADS; h++) {
        const pb_kvcache *head = pb_kvcache_group_head(f->g, h);
        f->lens[h] = pb_kvcache_kept_count(head);
        for (size_t i = 0; i < f->lens[h]; i++)
            f->attn[h * STRIDE + i] =
                (float)((f->next_pos * 7u + (uint32_t)i * (3u + h)) % 5u) *
                0.25f;
    }
}

static void capture(fx *f) {
    for (uint32_t h = 0; h < HEADS; h++)
        assert_int_equal(hs_capture(pb_kvcache_group_head(f->g, h),
                                    &f->before[h]),
                         0);
    f->total = pb_kvcache_group_kept_total(f->g);
    for (uint32_t h = 0; h < HEADS; h++)
        assert_int_equal(pb_kvcache_group_head_rows(f->g, h, f->rows_before[h],
                                                    64, &f->rows_n[h]),
                         PB_OK);
    assert_int_equal(pb_kvcache_group_new_rows(f->g, f->new_before, HEADS),
                     PB_OK);
}

static void expect_unchanged(const fx *f) {
    for (uint32_t h = 0; h < HEADS; h++) {
        hs_state now;
        assert_int_equal(hs_capture(pb_kvcache_group_head(f->g, h), &now), 0);
        assert_true(hs_equal(&now, &f->before[h]));
    }
    assert_int_equal(pb_kvcache_group_kept_total(f->g), f->total);
    for (uint32_t h = 0; h < HEADS; h++) {
        uint32_t rows[64];
        size_t n = 0;
        assert_int_equal(pb_kvcache_group_head_rows(f->g, h, rows, 64, &n),
                         PB_OK);
        assert_int_equal(n, f->rows_n[h]);
        assert_memory_equal(rows, f->rows_before[h], n * sizeof *rows);
    }
    uint32_t now[HEADS];
    assert_int_equal(pb_kvcache_group_new_rows(f->g, now, HEADS), PB_OK);
    assert_memory_equal(now, f->new_before, sizeof now);
}

/* Twelve steps with an evict after every second: the heads hold
 * different counts. */
static int fx_warm(void **state) {
    fx *f = calloc(1, sizeof *f);
    if (f == NULL) return -1;
    ca_init(&f->ca);
    f->alloc = ca_allocator(&f->ca);
    const pb_kvcache_config c = head_config();
    const pb_kvcache_group_params p = group_params();
    if (pb_kvcache_group_create(&c, &p, &f->alloc, &f->g) != PB_OK) return -1;
    uint32_t victims[64];
    size_t counts[HEADS], n;
    for (f->next_pos = 1; f->next_pos <= 12u; f->next_pos++) {
        fill_rows(f);
        if (pb_kvcache_group_observe(f->g, f->next_pos, f->attn, STRIDE,
                                     f->lens) != PB_OK)
            return -1;
        if (f->next_pos % 2u == 0u &&
            pb_kvcache_group_evict(f->g, UINT64_MAX, victims, 64, counts,
                                   HEADS, &n) != PB_OK)
            return -1;
    }
    fill_rows(f);
    capture(f);
    *state = f;
    return 0;
}

static int fx_free(void **state) {
    fx *f = *state;
    pb_kvcache_group_destroy(f->g);
    assert_int_equal(f->ca.outstanding, 0u);
    free(f);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Observe                                                                  */

static void observe_null_group(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_group_observe(NULL, 99u, f->attn, STRIDE,
                                              f->lens),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_observe(f->g, 99u, f->attn, STRIDE,
                                              NULL),
                     PB_ERR_NULL);
    expect_unchanged(f);
}

static void observe_position_not_above(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_group_observe(f->g, 12u, f->attn, STRIDE,
                                              f->lens),
                     PB_ERR_POSITION);
    /* Position before length: a bad length too, position reported. */
    f->lens[0]++;
    assert_int_equal(pb_kvcache_group_observe(f->g, 3u, f->attn, STRIDE,
                                              f->lens),
                     PB_ERR_POSITION);
    expect_unchanged(f);
}

static void observe_length_of_last_head(void **state) {
    fx *f = *state;
    f->lens[HEADS - 1u]++;
    assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, STRIDE,
                                              f->lens),
                     PB_ERR_LENGTH);
    f->lens[HEADS - 1u]--;
    /* A stride below a head's length overlaps the rows. */
    assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, 1u,
                                              f->lens),
                     PB_ERR_LENGTH);
    expect_unchanged(f);
}

static void observe_weight_of_last_head(void **state) {
    fx *f = *state;
    const float bad[] = {NAN, INFINITY, -INFINITY, -1.0f, -1e-40f};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        const size_t at = (HEADS - 1u) * STRIDE + f->lens[HEADS - 1u] - 1u;
        const float keep = f->attn[at];
        f->attn[at] = bad[i];
        assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, STRIDE,
                                                  f->lens),
                         PB_ERR_WEIGHT);
        /* A bad weight and a bad length: the length is reported. */
        f->lens[0]++;
        assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, STRIDE,
                                                  f->lens),
                         PB_ERR_LENGTH);
        f->lens[0]--;
        f->attn[at] = keep;
    }
    expect_unchanged(f);
    /* -0.0 is a valid weight. */
    f->attn[0] = -0.0f;
    assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, STRIDE,
                                              f->lens),
                     PB_OK);
}

static void observe_full(void **state) {
    fx *f = *state;
    /* slack 2: two steps without an evict can fill the fullest head. */
    uint32_t pos = 13u;
    pb_status st = PB_OK;
    while (st == PB_OK) {
        fill_rows(f);
        capture(f);
        st = pb_kvcache_group_observe(f->g, pos++, f->attn, STRIDE, f->lens);
    }
    assert_int_equal(st, PB_ERR_FULL);
    expect_unchanged(f);
    /* A null step is refused too. */
    assert_int_equal(pb_kvcache_group_observe(f->g, pos, NULL, 0, NULL),
                     PB_ERR_FULL);
    expect_unchanged(f);
}

/* ------------------------------------------------------------------------ */
/* Evict                                                                    */

static void evict_bad_arguments(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_group_observe(f->g, 13u, f->attn, STRIDE,
                                              f->lens),
                     PB_OK);
    capture(f);
    uint32_t victims[64];
    size_t counts[HEADS] = {CANARY, CANARY, CANARY};
    size_t n = CANARY;
    assert_int_equal(pb_kvcache_group_evict(NULL, 0, victims, 64, counts,
                                            HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, 64, NULL,
                                            HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, 64, counts,
                                            HEADS, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, NULL, 1, counts, HEADS,
                                            &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, 64, counts,
                                            HEADS - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, CANARY);
    /* One slot short of what budget 0 takes. */
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, 0, counts,
                                            HEADS, &n),
                     PB_ERR_BUFFER);
    const size_t needed = n;
    assert_true(needed > 1u);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, needed - 1u,
                                            counts, HEADS, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, needed);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
    assert_int_equal(pb_kvcache_group_evict(f->g, 0, victims, needed, counts,
                                            HEADS, &n),
                     PB_OK);
    assert_int_equal(n, needed);
    assert_int_equal(pb_kvcache_group_kept_total(f->g), f->total - needed);
}

/* ------------------------------------------------------------------------ */
/* The pooled rows                                                          */

static void rows_bad_arguments(void **state) {
    fx *f = *state;
    uint32_t rows[64] = {CANARY};
    uint32_t victims[64] = {CANARY};
    size_t n = CANARY, counts[HEADS] = {CANARY, CANARY, CANARY};
    assert_int_equal(pb_kvcache_group_head_rows(NULL, 0, rows, 64, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_head_rows(f->g, 0, rows, 64, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_head_rows(f->g, 0, NULL, 1, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_head_rows(f->g, HEADS, rows, 64, &n),
                     PB_ERR_PARAM);
    assert_int_equal(n, CANARY);
    assert_true(f->rows_n[1] > 1u);
    assert_int_equal(pb_kvcache_group_head_rows(f->g, 1, rows,
                                                f->rows_n[1] - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, f->rows_n[1]);
    assert_int_equal(rows[0], CANARY);
    assert_int_equal(pb_kvcache_group_new_rows(NULL, rows, HEADS),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_new_rows(f->g, NULL, HEADS),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_new_rows(f->g, rows, HEADS - 1u),
                     PB_ERR_BUFFER);
    assert_int_equal(rows[0], CANARY);
    n = CANARY;
    assert_int_equal(pb_kvcache_group_evict_rows(NULL, 0, victims, rows, 64,
                                                 counts, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, NULL, 1,
                                                 counts, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, NULL, rows, 1,
                                                 counts, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, rows, 64,
                                                 NULL, HEADS, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, rows, 64,
                                                 counts, HEADS, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, rows, 64,
                                                 counts, HEADS - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, CANARY);
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, rows, 1,
                                                 counts, HEADS, &n),
                     PB_ERR_BUFFER);
    assert_true(n > 1u);
    assert_int_equal(rows[0], CANARY);
    assert_int_equal(victims[0], CANARY);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
    /* Then it goes, and frees exactly the rows the victims held. */
    const size_t needed = n;
    assert_int_equal(pb_kvcache_group_evict_rows(f->g, 0, victims, rows,
                                                 needed, counts, HEADS, &n),
                     PB_OK);
    assert_int_equal(n, needed);
    size_t at = 0;
    for (uint32_t h = 0; h < HEADS; h++) {
        for (size_t i = 0; i < counts[h]; i++, at++) {
            size_t j = 0;
            while (j < f->rows_n[h] && f->rows_before[h][j] != rows[at]) j++;
            assert_true(j < f->rows_n[h]);
            assert_int_equal(f->before[h].pos[j], victims[at]);
        }
    }
}

/* A fresh group observed until the pool, not a head, runs out: the step
 * is refused and changes nothing. */
static void observe_pool_full(void **state) {
    (void)state;
    const pb_kvcache_config c = head_config();
    pb_kvcache_group_params p = group_params();
    p.floor_permille = 0u;
    fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, &f->g), PB_OK);
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    assert_int_equal(pb_kvcache_group_info(f->g, &info), PB_OK);
    pb_status st = PB_OK;
    for (f->next_pos = 1; st == PB_OK; f->next_pos++) {
        fill_rows(f);
        capture(f);
        st = pb_kvcache_group_observe(f->g, f->next_pos, f->attn, STRIDE,
                                      f->lens);
    }
    assert_int_equal(st, PB_ERR_FULL);
    assert_true(f->total + HEADS > info.pool_rows);
    for (uint32_t h = 0; h < HEADS; h++)
        assert_true(f->lens[h] < info.head_capacity);
    expect_unchanged(f);
    pb_kvcache_group_destroy(f->g);
    free(f);
}

/* ------------------------------------------------------------------------ */
/* Prefill                                                                  */

static void prefill_not_fresh_and_order(void **state) {
    fx *f = *state;
    float rows[HEADS * 4u * 8u];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) rows[i] = 0.125f;
    size_t counts[HEADS] = {CANARY, CANARY, CANARY}, n = CANARY;
    uint32_t kept[64];
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, 4, 8, UINT64_MAX,
                                              NULL, 0, kept, 64, counts,
                                              HEADS, &n),
                     PB_ERR_NOT_FRESH);
    /* PARAM before NOT_FRESH. */
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, 9, 8, UINT64_MAX,
                                              NULL, 0, kept, 64, counts,
                                              HEADS, &n),
                     PB_ERR_PARAM);
    assert_int_equal(n, CANARY);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
}

static void prefill_fresh_rows(void **state) {
    fx *f = *state;
    assert_int_equal(pb_kvcache_group_reset(f->g), PB_OK);
    capture(f);
    float rows[HEADS * 32u];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rows[i] = 0.0625f * (float)(i % 7u);
    size_t counts[HEADS] = {CANARY, CANARY, CANARY}, n = CANARY;
    uint32_t kept[64];
    const size_t len = 8, r = 4;
    /* Bad weight in the last head's causal part. */
    rows[(HEADS - 1u) * 32u + 31u] = NAN;
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, NULL, 0, kept, 64,
                                              counts, HEADS, &n),
                     PB_ERR_WEIGHT);
    rows[(HEADS - 1u) * 32u + 31u] = 0.0f;
    /* Stride below rows x len. */
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 31, r, len,
                                              UINT64_MAX, NULL, 0, kept, 64,
                                              counts, HEADS, &n),
                     PB_ERR_PARAM);
    /* Beyond the reserved length; a caller workspace one byte short. */
    static float big[HEADS * 4u * 17u];
    assert_int_equal(pb_kvcache_group_prefill(f->g, big, 4u * 17u, 4, 17,
                                              UINT64_MAX, NULL, 0, kept, 64,
                                              counts, HEADS, &n),
                     PB_ERR_WORKSPACE);
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_group_prefill_workspace_size(f->g, len,
                                                             &bytes),
                     PB_OK);
    double *ws = malloc(bytes);
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, ws, bytes - 1u,
                                              kept, 64, counts, HEADS, &n),
                     PB_ERR_WORKSPACE);
    /* Misaligned workspace. */
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, (char *)ws + 4,
                                              bytes, kept, 64, counts, HEADS,
                                              &n),
                     PB_ERR_PARAM);
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, ws, bytes, kept, 64,
                                              counts, HEADS - 1u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, ws, bytes, kept, 1,
                                              counts, HEADS, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, CANARY);
    assert_int_equal(counts[0], CANARY);
    expect_unchanged(f);
    assert_int_equal(pb_kvcache_group_prefill(f->g, rows, 32, r, len,
                                              UINT64_MAX, ws, bytes, kept, 64,
                                              counts, HEADS, &n),
                     PB_OK);
    assert_int_equal(n, 18u); /* T = 3 x 6 */
    free(ws);
}

/* ------------------------------------------------------------------------ */
/* Create, plan, size                                                       */

static void create_refusals(void **state) {
    (void)state;
    pb_kvcache_config c = head_config();
    pb_kvcache_group_params p = group_params();
    pb_kvcache_group *g = (pb_kvcache_group *)&c;
    assert_int_equal(pb_kvcache_group_create(&c, &p, NULL, NULL),
                     PB_ERR_NULL);
    size_t bytes = CANARY;
    struct {
        const char *what;
        uint32_t field;
        uint32_t value;
    } rows[] = {{"num_heads 0", 0, 0u}, {"num_heads 4097", 0, 4097u},
                {"floor 1001", 1, 1001u}, {"slack 0", 2, 0u},
                {"slack 65537", 2, 65537u}, {"struct_size 23", 3, 23u},
                {"cap 999", 4, 999u}, {"cap 1", 4, 1u},
                {"pooled_rows 2", 5, 2u}};
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++) {
        pb_kvcache_group_params q = p;
        uint32_t *f = rows[i].field == 0   ? &q.num_heads
                      : rows[i].field == 1 ? &q.floor_permille
                      : rows[i].field == 2 ? &q.slack
                      : rows[i].field == 3 ? &q.struct_size
                      : rows[i].field == 4 ? &q.head_cap_permille
                                           : &q.pooled_rows;
        *f = rows[i].value;
        assert_int_equal(pb_kvcache_group_create(&c, &q, NULL, &g),
                         PB_ERR_PARAM);
        assert_null(g);
        assert_int_equal(pb_kvcache_group_size(&c, &q, &bytes), PB_ERR_PARAM);
        assert_int_equal(bytes, CANARY);
        g = (pb_kvcache_group *)&c;
    }
    /* The head's own fields, and those the group sets. */
    pb_kvcache_config d = c;
    d.capacity = 40u;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes), PB_ERR_PARAM);
    d = c;
    d.prefill_max_len = 8u;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes), PB_ERR_PARAM);
    d = c;
    d.prefill_scope = PB_PREFILL_REFERENCE;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes), PB_ERR_PARAM);
    d = c;
    d.pool_kernel = 2u;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes), PB_ERR_PARAM);
    d = c;
    d.struct_size = 63u;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes), PB_ERR_PARAM);
    /* A head capacity beyond uint32. */
    d = c;
    d.share = UINT32_MAX - 2u;
    d.budget = UINT32_MAX - 1u;
    assert_int_equal(pb_kvcache_group_size(&d, &p, &bytes),
                     PB_ERR_TOO_LARGE);
    assert_int_equal(bytes, CANARY);
    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    info.struct_size = 39u;
    assert_int_equal(pb_kvcache_group_plan(&c, &p, &info), PB_ERR_PARAM);
    /* A 0.2.0 caller's plan info: pool_rows lies past its struct. */
    info.struct_size = 40u;
    info.pool_rows = CANARY;
    assert_int_equal(pb_kvcache_group_plan(&c, &p, &info), PB_OK);
    assert_int_equal(info.pool_rows, CANARY);
    assert_int_equal(info.struct_size, 40u);
    info.struct_size = (uint32_t)sizeof info;
    assert_int_equal(pb_kvcache_group_plan(&c, &p, NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_size(&c, &p, NULL), PB_ERR_NULL);
    /* An allocator lacking a function. */
    pb_allocator half = {NULL, NULL, NULL};
    assert_int_equal(pb_kvcache_group_create(&c, &p, &half, &g), PB_ERR_PARAM);
    assert_null(g);
    /* Queries on NULL. */
    assert_null(pb_kvcache_group_head(NULL, 0));
    assert_int_equal(pb_kvcache_group_kept_total(NULL), 0u);
    assert_int_equal(pb_kvcache_group_memory_bytes(NULL), 0u);
    assert_int_equal(pb_kvcache_group_reset(NULL), PB_ERR_NULL);
    assert_int_equal(pb_kvcache_group_info(NULL, &info), PB_ERR_NULL);
    pb_kvcache_group_destroy(NULL);
}

/* ------------------------------------------------------------------------ */
/* Allocation-failure countdown                                             */

static void oom_countdown(void **state) {
    (void)state;
    const pb_kvcache_config c = head_config();
    const pb_kvcache_group_params p = group_params();
    size_t bytes = 0;
    assert_int_equal(pb_kvcache_group_size(&c, &p, &bytes), PB_OK);
    counting_allocator ca;
    pb_kvcache_group *g = NULL;
    size_t k = 1;
    for (;; k++) {
        ca_init(&ca);
        ca.fail_at = k;
        const pb_allocator a = ca_allocator(&ca);
        const pb_status st = pb_kvcache_group_create(&c, &p, &a, &g);
        if (st == PB_OK) break;
        assert_int_equal(st, PB_ERR_NOMEM);
        assert_null(g);
        assert_int_equal(ca.outstanding, 0u);
        assert_int_equal(ca.bad_frees, 0u);
        assert_true(k < 8u);
    }
    /* One allocation of exactly the reported size. */
    assert_int_equal(k, 2u);
    assert_int_equal(ca.total_bytes, bytes);
    assert_int_equal(pb_kvcache_group_memory_bytes(g), bytes);
    /* Every further allocation fails; a workload never allocates. */
    ca.fail_at = ca.alloc_calls + 1u;
    ca.fail_persist = 1;
    const size_t calls = ca.alloc_calls;
    float attn[HEADS * STRIDE];
    size_t lens[HEADS], counts[HEADS], n;
    uint32_t victims[256];
    for (uint32_t pos = 1; pos < 40u; pos++) {
        for (uint32_t h = 0; h < HEADS; h++) {
            lens[h] = pb_kvcache_kept_count(pb_kvcache_group_head(g, h));
            for (size_t i = 0; i < lens[h]; i++)
                attn[h * STRIDE + i] = (float)((pos + i * (h + 1u)) % 4u);
        }
        assert_int_equal(pb_kvcache_group_observe(g, pos, attn, STRIDE, lens),
                         PB_OK);
        uint32_t rows_now[256];
        assert_int_equal(pb_kvcache_group_new_rows(g, rows_now, HEADS), PB_OK);
        assert_int_equal(pb_kvcache_group_head_rows(g, 0, rows_now, 256, &n),
                         PB_OK);
        if (pos % 4u == 0u)
            assert_int_equal(pb_kvcache_group_evict_rows(g, UINT64_MAX,
                                                         victims, rows_now,
                                                         256, counts, HEADS,
                                                         &n),
                             PB_OK);
        else if (pos % 2u == 0u)
            assert_int_equal(pb_kvcache_group_evict(g, UINT64_MAX, victims,
                                                    256, counts, HEADS, &n),
                             PB_OK);
    }
    assert_int_equal(pb_kvcache_group_reset(g), PB_OK);
    float rows[HEADS * 4u * 16u];
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rows[i] = (float)(i % 3u);
    assert_int_equal(pb_kvcache_group_prefill(g, rows, 64, 4, 16, UINT64_MAX,
                                              NULL, 0, NULL, 0, counts, HEADS,
                                              &n),
                     PB_OK);
    assert_int_equal(ca.alloc_calls, calls);
    pb_kvcache_group_destroy(g);
    assert_int_equal(ca.outstanding, 0u);
    assert_int_equal(ca.bad_frees, 0u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(observe_null_group, fx_warm, fx_free),
        cmocka_unit_test_setup_teardown(observe_position_not_above, fx_warm,
                                        fx_free),
        cmocka_unit_test_setup_teardown(observe_length_of_last_head, fx_warm,
                                        fx_free),
        cmocka_unit_test_setup_teardown(observe_weight_of_last_head, fx_warm,
                                        fx_free),
        cmocka_unit_test_setup_teardown(observe_full, fx_warm, fx_free),
        cmocka_unit_test_setup_teardown(evict_bad_arguments, fx_warm, fx_free),
        cmocka_unit_test_setup_teardown(rows_bad_arguments, fx_warm, fx_free),
        cmocka_unit_test(observe_pool_full),
        cmocka_unit_test_setup_teardown(prefill_not_fresh_and_order, fx_warm,
                                        fx_free),
        cmocka_unit_test_setup_teardown(prefill_fresh_rows, fx_warm, fx_free),
        cmocka_unit_test(create_refusals),
        cmocka_unit_test(oom_countdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
