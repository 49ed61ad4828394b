/*
 * test_bad_input_runtime.c - the bad-input matrix rows of the runtime
 * helpers (pyramidkv_runtime.h): the Q/K scorer's create, size, attention,
 * observe and prefill, the evicts to the share and with slots, and the
 * row compaction. One cmocka test per row, the documented status, the
 * instance's observable state identical before and after
 * (hardening_state.h), output arrays untouched. tests/runtime/ tests what
 * the successful calls compute.
 */
#include "bad_input_fixture.h"

enum { D = 4, G = 2, MAXK = 16, MAXR = 4 };

/* The scorer of the rows (head_dim 4, group 2, up to 16 keys and 4 rows)
 * and its buffers: queries [head][row][d] with head stride 16, keys of
 * stride 4, all valid. */
static pb_qk *qk;
static float qbuf[G * MAXR * D];
static float kbuf[MAXK * D];
static float out[MAXR * MAXK];

static pb_qk_config qk_config(void) {
    pb_qk_config c = PB_QK_CONFIG_DEFAULT;
    c.head_dim = D;
    c.group = G;
    c.max_keys = MAXK;
    c.max_rows = MAXR;
    return c;
}

static int setup(void **state) {
    fx_warm(state);
    const pb_qk_config c = qk_config();
    assert_int_equal(pb_qk_create(&c, NULL, &qk), PB_OK);
    for (size_t i = 0; i < sizeof qbuf / sizeof *qbuf; ++i)
        qbuf[i] = (float)(i % 5u) * 0.25f - 0.5f;
    for (size_t i = 0; i < sizeof kbuf / sizeof *kbuf; ++i)
        kbuf[i] = (float)(i % 7u) * 0.125f - 0.25f;
    for (size_t i = 0; i < sizeof out / sizeof *out; ++i) out[i] = -1.0f;
    return 0;
}

static int setup_full(void **state) {
    setup(state);
    fx_fill(*state);
    return 0;
}

static int teardown(void **state) {
    pb_qk_destroy(qk);
    qk = NULL;
    return fx_done(state);
}

static void out_untouched(void) {
    for (size_t i = 0; i < sizeof out / sizeof *out; ++i)
        assert_true(out[i] == -1.0f);
}

/* ------------------------------------------------------------------------ */
/* pb_qk_create and pb_qk_size                                              */

static void expect_create(const pb_qk_config *c, pb_status want) {
    const pb_allocator never = {never_alloc, never_free, NULL};
    pb_qk *q = (pb_qk *)&never; /* must come back NULL */
    assert_int_equal(pb_qk_create(c, &never, &q), want);
    assert_null(q);
    size_t bytes = CANARY;
    assert_int_equal(pb_qk_size(c, &bytes), want);
    assert_int_equal(bytes, CANARY);
}

static void qk_create_null_out(void **state) {
    (void)state;
    assert_int_equal(pb_qk_create(NULL, NULL, NULL), PB_ERR_NULL);
    assert_int_equal(pb_qk_size(NULL, NULL), PB_ERR_NULL);
}

static void qk_create_refused_fields(void **state) {
    (void)state;
    pb_qk_config c;
#define ROW(field, value)                   \
    c = qk_config();                        \
    c.field = value;                        \
    expect_create(&c, PB_ERR_PARAM)
    ROW(struct_size, 31u);
    ROW(head_dim, 0u);
    ROW(head_dim, 65537u);
    ROW(group, 0u);
    ROW(group, 1025u);
    ROW(key_type, 3u);
    ROW(reduce, 3u);
    ROW(scale, -1.0f);
    ROW(scale, NAN);
    ROW(scale, INFINITY);
    ROW(max_keys, 0u);
    ROW(max_rows, 0u);
    ROW(max_rows, 65537u);
#undef ROW
}

static void qk_create_unknown_tail_byte(void **state) {
    (void)state;
    struct {
        pb_qk_config c;
        uint32_t later;
    } big;
    memset(&big, 0, sizeof big);
    big.c = qk_config();
    big.c.struct_size = (uint32_t)sizeof big;
    big.later = 1u;
    expect_create(&big.c, PB_ERR_PARAM);
    big.later = 0u; /* zero past the known fields: accepted */
    size_t bytes = 0;
    assert_int_equal(pb_qk_size(&big.c, &bytes), PB_OK);
}

static void qk_create_allocator(void **state) {
    (void)state;
    const pb_qk_config c = qk_config();
    const pb_allocator half = {never_alloc, NULL, NULL};
    pb_qk *q = NULL;
    assert_int_equal(pb_qk_create(&c, &half, &q), PB_ERR_PARAM);
    assert_null(q);
    counting_allocator ca;
    ca_init(&ca);
    ca.fail_at = 1u;
    const pb_allocator failing = ca_allocator(&ca);
    assert_int_equal(pb_qk_create(&c, &failing, &q), PB_ERR_NOMEM);
    assert_null(q);
    assert_int_equal(ca.outstanding, 0u);
}

/* ------------------------------------------------------------------------ */
/* pb_qk_attention                                                          */

static void expect_attention(size_t qhs, size_t qrs, size_t rows,
                             size_t k_stride, size_t n_keys, pb_status want) {
    assert_int_equal(pb_qk_attention(qk, qbuf, qhs, qrs, rows, kbuf, k_stride,
                                     n_keys, out),
                     want);
    out_untouched();
}

static void attention_null(void **state) {
    (void)state;
    assert_int_equal(pb_qk_attention(NULL, qbuf, 16u, 4u, 1u, kbuf, 4u, 4u,
                                     out),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_attention(qk, NULL, 16u, 4u, 1u, kbuf, 4u, 4u, out),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_attention(qk, qbuf, 16u, 4u, 1u, NULL, 4u, 4u, out),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_attention(qk, qbuf, 16u, 4u, 1u, kbuf, 4u, 4u,
                                     NULL),
                     PB_ERR_NULL);
    out_untouched();
}

static void attention_shapes(void **state) {
    (void)state;
    expect_attention(16u, 4u, 1u, 4u, 0u, PB_ERR_PARAM);      /* no key */
    expect_attention(16u, 4u, 1u, 4u, MAXK + 1u, PB_ERR_PARAM);
    expect_attention(16u, 4u, 0u, 4u, 4u, PB_ERR_PARAM);      /* no row */
    expect_attention(16u, 4u, MAXR + 1u, 4u, 8u, PB_ERR_PARAM);
    expect_attention(16u, 4u, 3u, 4u, 2u, PB_ERR_PARAM);      /* rows > keys */
    expect_attention(16u, 4u, 1u, 3u, 4u, PB_ERR_PARAM);      /* k_stride */
    expect_attention(3u, 4u, 1u, 4u, 4u, PB_ERR_PARAM);       /* head stride */
    expect_attention(16u, 3u, 2u, 4u, 4u, PB_ERR_PARAM);      /* row stride */
    /* the strides that do not apply are not checked */
    assert_int_equal(pb_qk_attention(qk, qbuf, 16u, 0u, 1u, kbuf, 4u, 4u, out),
                     PB_OK);
}

static void attention_bad_values(void **state) {
    (void)state;
    const float bad[3] = {NAN, INFINITY, -INFINITY};
    for (int b = 0; b < 3; ++b) {
        /* a query of the second head's last row */
        qbuf[16u + 3u * D + 2u] = bad[b];
        expect_attention(16u, 4u, 4u, 4u, 8u, PB_ERR_WEIGHT);
        qbuf[16u + 3u * D + 2u] = 0.5f;
        /* the first key: seen by every row */
        kbuf[1] = bad[b];
        expect_attention(16u, 4u, 4u, 4u, 8u, PB_ERR_WEIGHT);
        kbuf[1] = 0.0f;
        /* the last key: seen by the last row only */
        kbuf[7u * D + 3u] = bad[b];
        expect_attention(16u, 4u, 4u, 4u, 8u, PB_ERR_WEIGHT);
        kbuf[7u * D + 3u] = 0.0f;
    }
    /* a key past n_keys is not read */
    kbuf[8u * D] = NAN;
    assert_int_equal(pb_qk_attention(qk, qbuf, 16u, 4u, 4u, kbuf, 4u, 8u, out),
                     PB_OK);
    kbuf[8u * D] = 0.0f;
}

static void attention_bad_half_keys(void **state) {
    (void)state;
    pb_qk_config c = qk_config();
    const uint16_t bad[4] = {0x7C00u, 0xFC00u, 0x7E00u, 0x7F80u};
    for (uint32_t t = PB_KEYS_F16; t <= PB_KEYS_BF16; ++t) {
        c.key_type = t;
        pb_qk *q16 = NULL;
        assert_int_equal(pb_qk_create(&c, NULL, &q16), PB_OK);
        uint16_t k16[8 * D];
        for (size_t i = 0; i < 8u * D; ++i) k16[i] = 0x3C00u; /* 1.0 f16 */
        for (int b = 0; b < 4; ++b) {
            /* f16: inf, -inf, NaN, NaN; bf16: only 0x7F80 (inf), the
             * others are finite (2^121, -2^121, 2^125) */
            k16[5] = bad[b];
            const int is_bad = t == PB_KEYS_F16 || b == 3;
            const pb_status st = pb_qk_attention(q16, qbuf, 16u, 4u, 1u, k16,
                                                 4u, 8u, out);
            assert_int_equal(st, is_bad ? PB_ERR_WEIGHT : PB_OK);
            if (is_bad) out_untouched();
            for (size_t i = 0; i < sizeof out / sizeof *out; ++i) out[i] = -1.0f;
        }
        pb_qk_destroy(q16);
    }
}

/* ------------------------------------------------------------------------ */
/* pb_qk_observe (warm: 7 held, last position 12)                           */

static void expect_observe(fx *f, uint32_t pos, size_t n_keys,
                           pb_status want) {
    assert_int_equal(pb_qk_observe(qk, f->p, pos, qbuf, 16u, kbuf, 4u, n_keys),
                     want);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_null(void **state) {
    fx *f = *state;
    assert_int_equal(pb_qk_observe(NULL, f->p, 13u, qbuf, 16u, kbuf, 4u, 7u),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_observe(qk, NULL, 13u, qbuf, 16u, kbuf, 4u, 7u),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_observe(qk, f->p, 13u, NULL, 16u, kbuf, 4u, 7u),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_observe(qk, f->p, 13u, qbuf, 16u, NULL, 4u, 7u),
                     PB_ERR_NULL);
    HS_ASSERT_UNCHANGED(f);
}

static void observe_length(void **state) {
    fx *f = *state;
    expect_observe(f, 13u, 6u, PB_ERR_LENGTH);
    expect_observe(f, 13u, 9u, PB_ERR_LENGTH);
    expect_observe(f, 13u, 0u, PB_ERR_LENGTH);
}

static void observe_shape_and_values(void **state) {
    fx *f = *state;
    assert_int_equal(pb_qk_observe(qk, f->p, 13u, qbuf, 3u, kbuf, 4u, 7u),
                     PB_ERR_PARAM);
    assert_int_equal(pb_qk_observe(qk, f->p, 13u, qbuf, 16u, kbuf, 2u, 7u),
                     PB_ERR_PARAM);
    kbuf[6u * D] = NAN;
    expect_observe(f, 13u, 7u, PB_ERR_WEIGHT);
    kbuf[6u * D] = 0.0f;
    kbuf[7u * D] = INFINITY; /* the new token's own key */
    expect_observe(f, 13u, 8u, PB_ERR_WEIGHT);
    kbuf[7u * D] = 0.0f;
    qbuf[16u + 1u] = NAN; /* the second head's query */
    expect_observe(f, 13u, 7u, PB_ERR_WEIGHT);
    qbuf[16u + 1u] = 0.0f;
}

static void observe_position(void **state) {
    fx *f = *state;
    expect_observe(f, 12u, 7u, PB_ERR_POSITION);
    expect_observe(f, 3u, 8u, PB_ERR_POSITION);
}

static void observe_full(void **state) {
    fx *f = *state;
    expect_observe(f, 100u, 12u, PB_ERR_FULL);
}

/* ------------------------------------------------------------------------ */
/* pb_qk_prefill                                                            */

static void prefill_rows(void **state) {
    fx *f = *state;
    uint32_t kept[MAXK];
    for (size_t i = 0; i < MAXK; ++i) kept[i] = CANARY;
    size_t n = CANARY;
    assert_int_equal(pb_qk_prefill(qk, f->p, qbuf, 16u, 4u, 2u, kbuf, 4u, 8u,
                                   8u, kept, MAXK, NULL, 0u, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_qk_prefill(qk, f->p, qbuf, 16u, 4u, 2u, kbuf, 4u,
                                   MAXK + 1u, 8u, kept, MAXK, NULL, 0u, &n),
                     PB_ERR_PARAM);
    kbuf[3] = NAN;
    assert_int_equal(pb_qk_prefill(qk, f->p, qbuf, 16u, 4u, 2u, kbuf, 4u, 8u,
                                   8u, kept, MAXK, NULL, 0u, &n),
                     PB_ERR_WEIGHT);
    kbuf[3] = 0.0f;
    /* the warm instance has observed steps: not fresh */
    assert_int_equal(pb_qk_prefill(qk, f->p, qbuf, 16u, 4u, 2u, kbuf, 4u, 8u,
                                   8u, kept, MAXK, NULL, 0u, &n),
                     PB_ERR_NOT_FRESH);
    assert_int_equal(n, CANARY);
    for (size_t i = 0; i < MAXK; ++i) assert_int_equal(kept[i], CANARY);
    HS_ASSERT_UNCHANGED(f);
}

/* ------------------------------------------------------------------------ */
/* Evicts                                                                   */

static void evict_share_rows(void **state) {
    fx *f = *state;
    for (uint32_t pos = 13; pos < 17u; ++pos) feed(f->p, pos); /* 11 held */
    set_before(f);
    uint32_t victims[4] = {CANARY, CANARY, CANARY, CANARY};
    uint32_t slots[4] = {CANARY, CANARY, CANARY, CANARY};
    size_t n = CANARY;
    assert_int_equal(pb_kvcache_evict_to_share(NULL, victims, 4u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_to_share(f->p, victims, 4u, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_to_share(f->p, NULL, 2u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_to_share(f->p, victims, 2u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 3u); /* 11 held, share 8 */
    n = CANARY;
    assert_int_equal(pb_kvcache_evict_slots(f->p, PB_KVCACHE_BUDGET_SHARE,
                                            victims, NULL, 4u, &n),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_slots(f->p, PB_KVCACHE_BUDGET_SHARE,
                                            victims, slots, 4u, NULL),
                     PB_ERR_NULL);
    assert_int_equal(pb_kvcache_evict_slots(f->p, PB_KVCACHE_BUDGET_SHARE,
                                            victims, slots, 2u, &n),
                     PB_ERR_BUFFER);
    assert_int_equal(n, 3u);
    for (int i = 0; i < 4; ++i) {
        assert_int_equal(victims[i], CANARY);
        assert_int_equal(slots[i], CANARY);
    }
    HS_ASSERT_UNCHANGED(f);
}

/* ------------------------------------------------------------------------ */
/* pb_kvcache_compact_rows                                                  */

static void compact_rows(void **state) {
    (void)state;
    unsigned char k[16], v[16];
    memset(k, 1, sizeof k);
    memset(v, 2, sizeof v);
    const uint32_t up[2] = {1u, 3u}, down[2] = {3u, 1u}, same[2] = {1u, 1u};
    const uint32_t past[1] = {4u};
#define ROW(want, ...) \
    assert_int_equal(pb_kvcache_compact_rows(__VA_ARGS__), want)
    ROW(PB_ERR_NULL, up, 2u, 4u, NULL, 4u, 4u, v, 4u, 4u);
    ROW(PB_ERR_NULL, NULL, 1u, 4u, k, 4u, 4u, v, 4u, 4u);
    ROW(PB_ERR_PARAM, up, 2u, 4u, k, 0u, 4u, v, 4u, 4u);
    ROW(PB_ERR_PARAM, up, 2u, 4u, k, 5u, 4u, v, 4u, 4u);
    ROW(PB_ERR_PARAM, up, 2u, 4u, k, 4u, 4u, v, 0u, 4u);
    ROW(PB_ERR_PARAM, up, 2u, 4u, k, 4u, 4u, v, 5u, 4u);
    ROW(PB_ERR_PARAM, down, 2u, 4u, k, 4u, 4u, v, 4u, 4u);
    ROW(PB_ERR_PARAM, same, 2u, 4u, k, 4u, 4u, v, 4u, 4u);
    ROW(PB_ERR_PARAM, past, 1u, 4u, k, 4u, 4u, v, 4u, 4u);
    /* PARAM before TOO_LARGE */
    ROW(PB_ERR_PARAM, past, 1u, 4u, k, 4u, SIZE_MAX / 2u, v, 4u, 4u);
    ROW(PB_ERR_TOO_LARGE, up, 2u, 4u, k, 4u, SIZE_MAX / 2u, v, 4u, 4u);
    ROW(PB_ERR_TOO_LARGE, up, 2u, 4u, k, 4u, 4u, v, 4u, SIZE_MAX / 2u);
#undef ROW
    for (size_t i = 0; i < sizeof k; ++i) {
        assert_int_equal(k[i], 1);
        assert_int_equal(v[i], 2);
    }
    /* nothing to drop, v NULL with its fields ignored */
    assert_int_equal(pb_kvcache_compact_rows(NULL, 0u, 0u, k, 4u, 4u, NULL,
                                             0u, 0u),
                     PB_OK);
}

#define ROW(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(qk_create_null_out),
        ROW(qk_create_refused_fields),
        ROW(qk_create_unknown_tail_byte),
        ROW(qk_create_allocator),
        ROW(attention_null),
        ROW(attention_shapes),
        ROW(attention_bad_values),
        ROW(attention_bad_half_keys),
        ROW(observe_null),
        ROW(observe_length),
        ROW(observe_shape_and_values),
        ROW(observe_position),
        cmocka_unit_test_setup_teardown(observe_full, setup_full, teardown),
        ROW(prefill_rows),
        ROW(evict_share_rows),
        ROW(compact_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
