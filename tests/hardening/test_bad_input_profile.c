/*
 * test_bad_input_profile.c - the bad-input matrix of the attention profile
 * (pyramidkv_profile.h): one cmocka test per row. A row passes one bad (or
 * boundary) argument and asserts the documented status AND, where there is
 * a profile, that everything observable through the API (rows, entropy
 * and the whole mass curve of every layer, memory bytes) is bit for bit
 * what it was. Output arguments a refused call must not write hold a
 * canary that is checked. The first-error order of the header is checked
 * by rows that break two rules at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <string.h>

#include "counting_allocator.h"
#include "fp_env.h"
#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"

#define CANARY 0xC0FFEE11u
#define LAYERS 4u
#define MAXLEN 16u

/* ------------------------------------------------------------------------ */
/* Fixture: layers 0 and 2 measured, 1 and 3 empty                          */

typedef struct snap {
    size_t memory;
    uint64_t rows[LAYERS];
    double bits[LAYERS], support[LAYERS];
    double mass[LAYERS][MAXLEN];
} snap;

typedef struct fx {
    counting_allocator ca;
    pb_allocator alloc;
    pb_profile *p;
    snap before;
    float row[MAXLEN + 1u];
} fx;

static void capture(const pb_profile *p, snap *s) {
    memset(s, 0, sizeof *s);
    s->memory = pb_profile_memory_bytes(p);
    for (uint32_t l = 0; l < LAYERS; ++l) {
        assert_int_equal(pb_profile_layer_rows(p, l, &s->rows[l]), PB_OK);
        if (s->rows[l] == 0u) continue;
        assert_int_equal(
            pb_profile_entropy(p, l, &s->bits[l], &s->support[l]), PB_OK);
        for (uint32_t k = 1; k <= MAXLEN; ++k)
            assert_int_equal(pb_profile_mass(p, l, k, &s->mass[l][k - 1u]),
                             PB_OK);
    }
}

static void expect_unchanged(fx *f) {
    snap now;
    capture(f->p, &now);
    assert_memory_equal(&now, &f->before, sizeof now);
}

static int fx_setup(void **state) {
    static fx f;
    memset(&f, 0, sizeof f);
    ca_init(&f.ca);
    f.alloc = ca_allocator(&f.ca);
    pb_profile_params p = pbt_profile_params(LAYERS, MAXLEN);
    if (pb_profile_create(&p, &f.alloc, &f.p) != PB_OK) return -1;
    for (uint32_t i = 0; i < MAXLEN; ++i) f.row[i] = (float)(i % 5u) * 0.25f;
    if (pb_profile_add_row(f.p, 0u, f.row, MAXLEN) != PB_OK) return -1;
    if (pb_profile_add_row(f.p, 0u, f.row, 5u) != PB_OK) return -1;
    if (pb_profile_add_row(f.p, 2u, f.row + 3, 9u) != PB_OK) return -1;
    for (uint32_t i = 0; i <= MAXLEN; ++i) f.row[i] = 0.125f;
    capture(f.p, &f.before);
    *state = &f;
    return 0;
}

static int fx_done(void **state) {
    fx *f = (fx *)*state;
    pb_profile_destroy(f->p);
    return f->ca.outstanding == 0u && f->ca.bad_frees == 0u ? 0 : -1;
}

static pb_profile_params params(uint32_t layers, uint32_t max_len) {
    pb_profile_params p = pbt_profile_params(layers, max_len);
    return p;
}

/* ------------------------------------------------------------------------ */
/* Sizing and create                                                        */

static void expect_size(const pb_profile_params *p, pb_status want) {
    size_t bytes = CANARY;
    assert_int_equal(pb_profile_size(p, &bytes), want);
    if (want != PB_OK) assert_int_equal(bytes, CANARY);
}

static void profile_size_bytes_null(void **state) {
    (void)state;
    const pb_profile_params p = params(0u, 0u); /* NULL comes first */
    assert_int_equal(pb_profile_size(&p, NULL), PB_ERR_NULL);
}

/* One field of *p (a member of it): 0 and over are refused, ok sized. */
static void expect_field_bounds(pb_profile_params *p, uint32_t *field,
                                uint32_t over, uint32_t ok) {
    *field = 0u;
    expect_size(p, PB_ERR_PARAM);
    *field = over;
    expect_size(p, PB_ERR_PARAM);
    *field = ok;
    expect_size(p, PB_OK);
}

static void profile_size_layers_bounds(void **state) {
    (void)state;
    pb_profile_params p = params(0u, 8u);
    expect_field_bounds(&p, &p.num_layers, PB_PROFILE_MAX_LAYERS + 1u, 1u);
}

static void profile_size_max_len_bounds(void **state) {
    (void)state;
    pb_profile_params p = params(1u, 0u);
    expect_field_bounds(&p, &p.max_len, PB_PROFILE_MAX_LEN + 1u,
                        PB_PROFILE_MAX_LEN);
}

static void profile_size_struct_size_short(void **state) {
    (void)state;
    pb_profile_params p = params(1u, 8u);
    p.struct_size = PB_PROFILE_PARAMS_SIZE_0_2 - 1u;
    expect_size(&p, PB_ERR_PARAM);
    p.struct_size = 0u;
    expect_size(&p, PB_ERR_PARAM);
    p.struct_size = PB_PROFILE_PARAMS_SIZE_0_2;
    expect_size(&p, PB_OK);
}

static void profile_size_unknown_tail_nonzero(void **state) {
    (void)state;
    struct {
        pb_profile_params p;
        unsigned char tail[8];
    } big;
    memset(&big, 0, sizeof big);
    big.p = params(2u, 8u);
    big.p.struct_size = (uint32_t)sizeof big;
    expect_size(&big.p, PB_OK);
    big.tail[7] = 1u;
    expect_size(&big.p, PB_ERR_PARAM);
}

static void profile_create_out_null(void **state) {
    (void)state;
    const pb_profile_params bad = params(0u, 0u);
    assert_int_equal(pb_profile_create(&bad, NULL, NULL), PB_ERR_NULL);
    assert_int_equal(pb_profile_create(NULL, NULL, NULL), PB_ERR_NULL);
}

static void profile_create_refused_params(void **state) {
    (void)state;
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    const pb_profile_params bad[] = {params(0u, 8u), params(1u, 0u),
                                     params(PB_PROFILE_MAX_LAYERS + 1u, 1u)};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        pb_profile *out = (pb_profile *)(void *)&ca;
        assert_int_equal(pb_profile_create(&bad[i], &a, &out), PB_ERR_PARAM);
        assert_null(out);
    }
    assert_int_equal(ca.alloc_calls, 0u);
}

static void profile_create_allocator_lacking(void **state) {
    (void)state;
    const pb_allocator lacks_alloc = {NULL, ca_ignore_free, NULL};
    const pb_allocator lacks_free = {ca_refuse_alloc, NULL, NULL};
    pb_profile *out = NULL;
    assert_int_equal(pb_profile_create(NULL, &lacks_alloc, &out), PB_ERR_PARAM);
    assert_null(out);
    assert_int_equal(pb_profile_create(NULL, &lacks_free, &out), PB_ERR_PARAM);
    assert_null(out);
    /* Refused params come before the allocator check. */
    const pb_profile_params bad = params(0u, 1u);
    assert_int_equal(pb_profile_create(&bad, &lacks_alloc, &out), PB_ERR_PARAM);
}

static void profile_create_nomem(void **state) {
    (void)state;
    counting_allocator ca;
    ca_init(&ca);
    ca.fail_at = 1u;
    const pb_allocator a = ca_allocator(&ca);
    pb_profile *out = (pb_profile *)(void *)&ca;
    const pb_profile_params p = params(2u, 8u);
    assert_int_equal(pb_profile_create(&p, &a, &out), PB_ERR_NOMEM);
    assert_null(out);
    assert_int_equal(ca.outstanding, 0u);
}

static void profile_create_memory_matches_size(void **state) {
    (void)state;
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator a = ca_allocator(&ca);
    const pb_profile_params p = params(3u, 77u);
    size_t bytes = 0;
    assert_int_equal(pb_profile_size(&p, &bytes), PB_OK);
    pb_profile *out = NULL;
    assert_int_equal(pb_profile_create(&p, &a, &out), PB_OK);
    assert_int_equal(pb_profile_memory_bytes(out), bytes);
    assert_int_equal(ca.outstanding, bytes);
    pb_profile_destroy(out);
    assert_int_equal(ca.outstanding, 0u);
    assert_int_equal(ca.bad_frees, 0u);
}

static void profile_null_handles(void **state) {
    (void)state;
    pb_profile_destroy(NULL);
    assert_int_equal(pb_profile_memory_bytes(NULL), 0u);
    assert_int_equal(pb_profile_reset(NULL), PB_ERR_NULL);
}

/* ------------------------------------------------------------------------ */
/* add_row                                                                  */

static void expect_add(fx *f, uint32_t layer, const float *row, size_t len,
                       pb_status want) {
    assert_int_equal(pb_profile_add_row(f->p, layer, row, len), want);
    expect_unchanged(f);
}

static void add_row_profile_null(void **state) {
    fx *f = (fx *)*state;
    assert_int_equal(pb_profile_add_row(NULL, 0u, f->row, 4u), PB_ERR_NULL);
    expect_unchanged(f);
}

static void add_row_row_null(void **state) {
    fx *f = (fx *)*state;
    expect_add(f, 0u, NULL, 4u, PB_ERR_NULL);
    expect_add(f, LAYERS, NULL, 0u, PB_ERR_NULL); /* NULL first */
}

static void add_row_layer_out_of_range(void **state) {
    fx *f = (fx *)*state;
    expect_add(f, LAYERS, f->row, 4u, PB_ERR_PARAM);
    expect_add(f, UINT32_MAX, f->row, 4u, PB_ERR_PARAM);
    expect_add(f, LAYERS, f->row, MAXLEN + 1u, PB_ERR_PARAM); /* before len */
}

static void add_row_length_zero(void **state) {
    fx *f = (fx *)*state;
    expect_add(f, 1u, f->row, 0u, PB_ERR_PARAM);
}

static void add_row_length_over_max(void **state) {
    fx *f = (fx *)*state;
    expect_add(f, 1u, f->row, MAXLEN + 1u, PB_ERR_LENGTH);
    expect_add(f, 1u, f->row, SIZE_MAX, PB_ERR_LENGTH);
}

static void add_row_bad_weights(void **state) {
    fx *f = (fx *)*state;
    const float bad[] = {NAN, INFINITY, -INFINITY, -1.0f, -FLT_MIN,
                         -FLT_TRUE_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        for (size_t at = 0; at < MAXLEN; at += 5u) {
            f->row[at] = bad[i];
            expect_add(f, 3u, f->row, MAXLEN, PB_ERR_WEIGHT);
            f->row[at] = 0.125f;
        }
    }
}

/* The same with x86's flush-to-zero and denormals-are-zero bits set
 * (tests/fp_env.h): -FLT_MIN and -FLT_TRUE_MIN, which DAZ would read as
 * -0.0, are still refused. */
static void add_row_bad_weights_under_daz(void **state) {
    PBT_RUN_UNDER_DAZ(add_row_bad_weights, state);
}

static void add_row_all_zero(void **state) {
    fx *f = (fx *)*state;
    for (size_t i = 0; i < MAXLEN; ++i) f->row[i] = 0.0f;
    expect_add(f, 1u, f->row, MAXLEN, PB_ERR_WEIGHT);
    f->row[3] = -0.0f;
    expect_add(f, 1u, f->row, MAXLEN, PB_ERR_WEIGHT);
    /* A weight error comes after the length check. */
    expect_add(f, 1u, f->row, MAXLEN + 1u, PB_ERR_LENGTH);
}

static void add_row_edges_accepted(void **state) {
    fx *f = (fx *)*state;
    f->row[0] = FLT_MAX;
    f->row[1] = FLT_TRUE_MIN;
    f->row[2] = -0.0f;
    assert_int_equal(pb_profile_add_row(f->p, 1u, f->row, MAXLEN), PB_OK);
    f->row[0] = FLT_TRUE_MIN; /* a denormal alone */
    for (size_t i = 1; i < MAXLEN; ++i) f->row[i] = 0.0f;
    assert_int_equal(pb_profile_add_row(f->p, 1u, f->row, MAXLEN), PB_OK);
    double bits = -1.0;
    assert_int_equal(pb_profile_entropy(f->p, 1u, &bits, NULL), PB_OK);
    assert_true(isfinite(bits) && bits >= 0.0);
}

/* ------------------------------------------------------------------------ */
/* Queries                                                                  */

static void layer_rows_bad(void **state) {
    fx *f = (fx *)*state;
    uint64_t rows = CANARY;
    assert_int_equal(pb_profile_layer_rows(NULL, 0u, &rows), PB_ERR_NULL);
    assert_int_equal(pb_profile_layer_rows(f->p, 0u, NULL), PB_ERR_NULL);
    assert_int_equal(pb_profile_layer_rows(f->p, LAYERS, &rows), PB_ERR_PARAM);
    assert_true(rows == CANARY);
    expect_unchanged(f);
}

static void entropy_bad(void **state) {
    fx *f = (fx *)*state;
    double bits = 7.0, support = 7.0;
    assert_int_equal(pb_profile_entropy(NULL, 0u, &bits, &support),
                     PB_ERR_NULL);
    assert_int_equal(pb_profile_entropy(f->p, LAYERS, &bits, &support),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_entropy(f->p, 1u, &bits, &support),
                     PB_ERR_PARAM); /* no row */
    assert_true(bits == 7.0 && support == 7.0);
    assert_int_equal(pb_profile_entropy(f->p, 0u, NULL, NULL), PB_OK);
    assert_int_equal(pb_profile_entropy(f->p, 0u, NULL, &support), PB_OK);
    assert_true(support >= 1.0);
    expect_unchanged(f);
}

static void mass_bad(void **state) {
    fx *f = (fx *)*state;
    double m = 7.0;
    assert_int_equal(pb_profile_mass(NULL, 0u, 1u, &m), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass(f->p, 0u, 1u, NULL), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass(f->p, LAYERS, 1u, &m), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass(f->p, 1u, 1u, &m), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass(f->p, 0u, 0u, &m), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass(f->p, 0u, MAXLEN + 1u, &m), PB_ERR_PARAM);
    assert_true(m == 7.0);
    assert_int_equal(pb_profile_mass(f->p, 0u, MAXLEN, &m), PB_OK);
    assert_true(m == 1.0);
    expect_unchanged(f);
}

static void mass_curve_bad(void **state) {
    fx *f = (fx *)*state;
    double out[MAXLEN + 1u];
    for (size_t i = 0; i <= MAXLEN; ++i) out[i] = 7.0;
    assert_int_equal(pb_profile_mass_curve(NULL, 0u, out, 4u), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass_curve(f->p, 0u, NULL, 4u), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass_curve(f->p, LAYERS, out, 4u),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_curve(f->p, 1u, out, 4u), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_curve(f->p, 0u, out, 0u), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_curve(f->p, 0u, out, MAXLEN + 1u),
                     PB_ERR_PARAM);
    for (size_t i = 0; i <= MAXLEN; ++i) assert_true(out[i] == 7.0);
    assert_int_equal(pb_profile_mass_curve(f->p, 0u, out, MAXLEN), PB_OK);
    assert_true(out[MAXLEN - 1u] == 1.0 && out[MAXLEN] == 7.0);
    expect_unchanged(f);
}

static void mass_k_bad(void **state) {
    fx *f = (fx *)*state;
    uint32_t k = CANARY;
    assert_int_equal(pb_profile_mass_k(NULL, 0u, 500000u, &k), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass_k(f->p, 0u, 500000u, NULL), PB_ERR_NULL);
    assert_int_equal(pb_profile_mass_k(f->p, LAYERS, 500000u, &k),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_k(f->p, 3u, 500000u, &k), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_k(f->p, 0u, 0u, &k), PB_ERR_PARAM);
    assert_int_equal(pb_profile_mass_k(f->p, 0u, 1000001u, &k), PB_ERR_PARAM);
    assert_int_equal(k, CANARY);
    assert_int_equal(pb_profile_mass_k(f->p, 0u, 1000000u, &k), PB_OK);
    assert_true(k >= 1u && k <= MAXLEN);
    expect_unchanged(f);
}

static void weights_bad(void **state) {
    fx *f = (fx *)*state;
    uint32_t w[LAYERS + 1u];
    for (size_t i = 0; i <= LAYERS; ++i) w[i] = CANARY;
    assert_int_equal(pb_profile_weights(NULL, 900000u, 1u, w, LAYERS),
                     PB_ERR_NULL);
    assert_int_equal(pb_profile_weights(f->p, 900000u, 1u, NULL, LAYERS),
                     PB_ERR_NULL);
    assert_int_equal(pb_profile_weights(f->p, 0u, 1u, w, LAYERS),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_weights(f->p, 1000001u, 1u, w, LAYERS),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_weights(f->p, 900000u, 0u, w, LAYERS),
                     PB_ERR_PARAM);
    assert_int_equal(pb_profile_weights(f->p, 900000u, 1u, w, LAYERS - 1u),
                     PB_ERR_BUFFER);
    assert_int_equal(pb_profile_weights(f->p, 900000u, 0u, w, 0u),
                     PB_ERR_PARAM); /* PARAM before BUFFER */
    for (size_t i = 0; i <= LAYERS; ++i) assert_int_equal(w[i], CANARY);
    assert_int_equal(pb_profile_weights(f->p, 900000u, 1u, w, LAYERS), PB_OK);
    assert_int_equal(w[LAYERS], CANARY);
    assert_int_equal(w[1], w[0]); /* the nearest measured layer, lower */
    assert_int_equal(w[3], w[2]);
    expect_unchanged(f);
}

static void weights_no_layer_measured(void **state) {
    fx *f = (fx *)*state;
    assert_int_equal(pb_profile_reset(f->p), PB_OK);
    uint32_t w[LAYERS] = {CANARY, CANARY, CANARY, CANARY};
    assert_int_equal(pb_profile_weights(f->p, 900000u, 1u, w, LAYERS),
                     PB_ERR_PARAM);
    for (size_t i = 0; i < LAYERS; ++i) assert_int_equal(w[i], CANARY);
}

static void fit_ratio_bad(void **state) {
    (void)state;
    uint32_t w[4] = {4u, 3u, 2u, 1u}, zero[4] = {0u, 0u, 0u, 0u};
    uint32_t r = CANARY;
    uint64_t d = CANARY;
    assert_int_equal(pb_profile_fit_ratio(NULL, 4u, 8u, &r, &d), PB_ERR_NULL);
    assert_int_equal(pb_profile_fit_ratio(w, 4u, 8u, NULL, &d), PB_ERR_NULL);
    assert_int_equal(pb_profile_fit_ratio(w, 0u, 8u, &r, &d), PB_ERR_PARAM);
    assert_int_equal(
        pb_profile_fit_ratio(w, PB_PROFILE_MAX_LAYERS + 1u, 8u, &r, &d),
        PB_ERR_PARAM);
    assert_int_equal(pb_profile_fit_ratio(w, 4u, 0u, &r, &d), PB_ERR_PARAM);
    assert_int_equal(
        pb_profile_fit_ratio(w, 4u, PB_PROFILE_MAX_FIT_RATIO + 1u, &r, &d),
        PB_ERR_PARAM);
    assert_int_equal(pb_profile_fit_ratio(zero, 4u, 8u, &r, &d), PB_ERR_PARAM);
    assert_int_equal(r, CANARY);
    assert_true(d == CANARY);
    assert_int_equal(pb_profile_fit_ratio(w, 4u, 8u, &r, NULL), PB_OK);
    assert_true(r >= 1u && r <= 8u);
    /* Extreme weights: no overflow, the largest ratio wins a steep
     * funnel. */
    uint32_t steep[4] = {UINT32_MAX, 1u, 1u, 1u};
    assert_int_equal(pb_profile_fit_ratio(steep, 4u, PB_PROFILE_MAX_FIT_RATIO,
                                          &r, &d),
                     PB_OK);
    assert_true(r > 1u);
}

static void reset_keeps_memory(void **state) {
    fx *f = (fx *)*state;
    const size_t calls = f->ca.alloc_calls;
    assert_int_equal(pb_profile_reset(f->p), PB_OK);
    assert_int_equal(f->ca.alloc_calls, calls);
    uint64_t rows = 1u;
    for (uint32_t l = 0; l < LAYERS; ++l) {
        assert_int_equal(pb_profile_layer_rows(f->p, l, &rows), PB_OK);
        assert_true(rows == 0u);
    }
    assert_int_equal(pb_profile_memory_bytes(f->p), f->before.memory);
}

#define ROW(fn) cmocka_unit_test(fn)
#define FX(fn) cmocka_unit_test_setup_teardown(fn, fx_setup, fx_done)

int main(void) {
    const struct CMUnitTest tests[] = {
        ROW(profile_size_bytes_null),
        ROW(profile_size_layers_bounds),
        ROW(profile_size_max_len_bounds),
        ROW(profile_size_struct_size_short),
        ROW(profile_size_unknown_tail_nonzero),
        ROW(profile_create_out_null),
        ROW(profile_create_refused_params),
        ROW(profile_create_allocator_lacking),
        ROW(profile_create_nomem),
        ROW(profile_create_memory_matches_size),
        ROW(profile_null_handles),
        FX(add_row_profile_null),
        FX(add_row_row_null),
        FX(add_row_layer_out_of_range),
        FX(add_row_length_zero),
        FX(add_row_length_over_max),
        FX(add_row_bad_weights),
        FX(add_row_bad_weights_under_daz),
        FX(add_row_all_zero),
        FX(add_row_edges_accepted),
        FX(layer_rows_bad),
        FX(entropy_bad),
        FX(mass_bad),
        FX(mass_curve_bad),
        FX(mass_k_bad),
        FX(weights_bad),
        FX(weights_no_layer_measured),
        ROW(fit_ratio_bad),
        FX(reset_keeps_memory),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
