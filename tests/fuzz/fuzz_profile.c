/*
 * fuzz_profile.c - libFuzzer target: the attention profile accumulator and
 * the schedule derivation (pyramidkv_profile.h). The bytes choose the shape
 * (layers, max_len, any struct_size), then a program of add_row (any layer,
 * length and weights, NaN and infinities included), reset and every query.
 * Checked on every step: a refused add_row leaves the profile bit for bit
 * unchanged and returns the first documented status; two profiles fed the
 * same accepted rows agree bit for bit (one is fed through a counting
 * allocator that refuses everything after create); the mass curve is
 * non-decreasing, within [0, 1] and 1 at max_len; mass_k is the first k of
 * the quantised curve; the weights are at least the floor and equal the
 * measured k of every measured layer; the fitted ratio is within range and
 * no ratio has a smaller distance.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "counting_allocator.h"
#include "fp_env.h"
#include "pyramidkv/pyramidkv.h"
#include "test_configs.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FZ_MAX_LAYERS 8u
#define FZ_MAX_LEN 40u

static uint32_t u32(reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= (uint32_t)fuzz_byte(r) << (8 * i);
    return v;
}

/* A weight from a palette (edge values) or raw bits. */
static float weight(reader *r) {
    const uint8_t b = fuzz_byte(r);
    switch (b >> 4) {
    case 0: return 0.0f;
    case 1: return NAN;
    case 2: return INFINITY;
    case 3: return -1.0f;
    case 4: return 1e-45f;
    case 5: {
        const uint32_t bits = u32(r);
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    case 6: return 3.0e38f;
    default: return (float)(b & 15u) * 0.0625f;
    }
}

typedef struct view {
    uint64_t rows[FZ_MAX_LAYERS];
    double bits[FZ_MAX_LAYERS];
    double mass[FZ_MAX_LAYERS][FZ_MAX_LEN];
} view;

static void capture(const pb_profile *p, uint32_t layers, uint32_t max_len,
                    view *v) {
    memset(v, 0, sizeof *v);
    for (uint32_t l = 0; l < layers; ++l) {
        CHECK(pb_profile_layer_rows(p, l, &v->rows[l]) == PB_OK);
        if (v->rows[l] == 0u) {
            CHECK(pb_profile_entropy(p, l, NULL, NULL) == PB_ERR_PARAM);
            continue;
        }
        CHECK(pb_profile_entropy(p, l, &v->bits[l], NULL) == PB_OK);
        CHECK(v->bits[l] >= 0.0 && v->bits[l] <= log2((double)max_len) + 1e-9);
        CHECK(pb_profile_mass_curve(p, l, v->mass[l], max_len) == PB_OK);
        double prev = 0.0;
        for (uint32_t k = 1; k <= max_len; ++k) {
            const double m = v->mass[l][k - 1u];
            CHECK(m >= prev - 1e-12 && m <= 1.0 + 1e-12);
            prev = m;
        }
        /* One point through the O(k) query: the same bits. */
        const uint32_t k = 1u + (uint32_t)(v->rows[l] % max_len);
        double m = -1.0;
        CHECK(pb_profile_mass(p, l, k, &m) == PB_OK);
        CHECK(memcmp(&m, &v->mass[l][k - 1u], sizeof m) == 0);
        CHECK(v->mass[l][max_len - 1u] == 1.0);
    }
}

static void check_derivations(const pb_profile *p, const view *v,
                              uint32_t layers, uint32_t max_len,
                              uint32_t ppm, uint32_t floor_w) {
    uint32_t k_of[FZ_MAX_LAYERS] = {0};
    int any = 0;
    for (uint32_t l = 0; l < layers; ++l) {
        if (v->rows[l] == 0u) continue;
        any = 1;
        uint32_t k = 0;
        CHECK(pb_profile_mass_k(p, l, ppm, &k) == PB_OK);
        uint32_t want = 0;
        for (uint32_t kk = 1; kk <= max_len && want == 0u; ++kk)
            if (floor(v->mass[l][kk - 1u] * 1e6 + 0.5) >= (double)ppm)
                want = kk;
        CHECK(k == want);
        k_of[l] = k;
    }
    uint32_t w[FZ_MAX_LAYERS + 1u];
    w[layers] = 0xA5A5A5A5u;
    const pb_status st = pb_profile_weights(p, ppm, floor_w, w, layers);
    if (!any || floor_w == 0u) {
        CHECK(st == PB_ERR_PARAM);
        return;
    }
    CHECK(st == PB_OK);
    CHECK(w[layers] == 0xA5A5A5A5u);
    for (uint32_t l = 0; l < layers; ++l) {
        CHECK(w[l] >= floor_w);
        if (v->rows[l] != 0u)
            CHECK(w[l] == (k_of[l] > floor_w ? k_of[l] : floor_w));
    }
    uint32_t r = 0;
    uint64_t d = 0;
    const uint32_t max_ratio = 1u + (ppm % 32u);
    CHECK(pb_profile_fit_ratio(w, layers, max_ratio, &r, &d) == PB_OK);
    CHECK(r >= 1u && r <= max_ratio);
    for (uint32_t q = 1; q <= max_ratio; ++q) {
        uint32_t rq = 0;
        uint64_t dq = 0;
        CHECK(pb_profile_fit_ratio(w, layers, q, &rq, &dq) == PB_OK);
        CHECK(dq >= d); /* fewer candidates never fit better */
        if (q >= r) CHECK(rq == r && dq == d);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader in = {data, size};
    const uint8_t shape = fuzz_byte(&in);
    /* The params live in a zeroed 256-byte block, so any struct_size up to
     * 255 is backed by memory; the bytes past the struct may be fuzzed. */
    union {
        pb_profile_params p;
        unsigned char raw[256];
    } blk;
    memset(&blk, 0, sizeof blk);
    pb_profile_params *pp = &blk.p;
    pp->struct_size = (uint32_t)sizeof *pp;
    pp->num_layers = 1u + (fuzz_byte(&in) % FZ_MAX_LAYERS);
    pp->max_len = 1u + (fuzz_byte(&in) % FZ_MAX_LEN);
    if (shape & 1u) { /* 0 .. 31 or far too many: cheap either way */
        const uint32_t v = u32(&in);
        pp->num_layers = (v & 31u) | (v & 0x80000000u);
    }
    if (shape & 2u) pp->struct_size = fuzz_byte(&in);
    if (shape & 4u) blk.raw[sizeof *pp + fuzz_byte(&in) % 16u] = fuzz_byte(&in);
    size_t bytes = 0;
    const pb_status sz = pb_profile_size(pp, &bytes);
    pb_profile *a = NULL, *b = NULL;
    CHECK(pb_profile_create(pp, NULL, &a) == sz);
    if (sz != PB_OK) {
        CHECK(a == NULL);
        return 0;
    }
    CHECK(pb_profile_memory_bytes(a) == bytes);
    CHECK(pp->struct_size >= PB_PROFILE_PARAMS_SIZE_0_2);
    const uint32_t layers = pp->num_layers;
    const uint32_t max_len = pp->max_len;
    {
        uint64_t rows = 1u;
        CHECK(pb_profile_layer_rows(a, layers - 1u, &rows) == PB_OK);
        CHECK(rows == 0u);
        CHECK(pb_profile_layer_rows(a, layers, &rows) == PB_ERR_PARAM);
        const float one = 1.0f;
        CHECK(pb_profile_add_row(a, 0u, &one, 1u) == PB_OK);
        CHECK(pb_profile_reset(a) == PB_OK);
    }
    if (layers > FZ_MAX_LAYERS || max_len > FZ_MAX_LEN) {
        pb_profile_destroy(a); /* a wide shape: the program is not run */
        return 0;
    }
    pb_profile_params pb_params = pbt_profile_params(layers, max_len);
    counting_allocator ca;
    ca_init(&ca);
    const pb_allocator alloc = ca_allocator(&ca);
    CHECK(pb_profile_create(&pb_params, &alloc, &b) == PB_OK);
    ca.fail_at = ca.alloc_calls + 1u;
    ca.fail_persist = 1;

    float row[FZ_MAX_LEN + 2u];
    /* cur: what the API shows of profile a since its last change. */
    view cur, now, other;
    capture(a, layers, max_len, &cur);
    for (int step = 0; step < 48 && in.n > 0u; ++step) {
        const uint8_t op = fuzz_byte(&in);
        if (op < 200u) {
            const uint32_t layer = fuzz_byte(&in) % (layers + 1u);
            const uint32_t len = fuzz_byte(&in) % (max_len + 2u);
            const int pass_null = (op & 0x3Fu) == 0x3Fu;
            int bad = 0, positive = 0;
            for (uint32_t i = 0; i < len; ++i) {
                row[i] = (op & 1u) ? weight(&in) : (float)(fuzz_byte(&in) & 7u);
                if (!pbt_weight_valid(row[i])) bad = 1;
                if (row[i] > 0.0f) positive = 1;
            }
            pb_status want = PB_OK;
            if (pass_null) want = PB_ERR_NULL;
            else if (layer >= layers || len == 0u) want = PB_ERR_PARAM;
            else if (len > max_len) want = PB_ERR_LENGTH;
            else if (bad || !positive) want = PB_ERR_WEIGHT;
            const pb_status st =
                pb_profile_add_row(a, layer, pass_null ? NULL : row, len);
            CHECK(st == want);
            capture(a, layers, max_len, &now);
            if (st != PB_OK) {
                CHECK(memcmp(&cur, &now, sizeof cur) == 0);
            } else {
                CHECK(pb_profile_add_row(b, layer, row, len) == PB_OK);
                capture(b, layers, max_len, &other);
                CHECK(memcmp(&now, &other, sizeof now) == 0);
                cur = now;
            }
        } else if (op < 210u) {
            CHECK(pb_profile_reset(a) == PB_OK);
            CHECK(pb_profile_reset(b) == PB_OK);
            capture(a, layers, max_len, &cur);
        } else {
            const uint32_t ppm = 1u + u32(&in) % 1000000u;
            check_derivations(a, &cur, layers, max_len, ppm, fuzz_byte(&in) % 40u);
        }
    }
    CHECK(ca.alloc_calls == ca.fail_at - 1u);
    pb_profile_destroy(a);
    pb_profile_destroy(b);
    CHECK(ca.outstanding == 0u);
    return 0;
}
