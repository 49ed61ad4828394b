/*
 * fuzz_head_group.c - libFuzzer target: the layer group
 * (pyramidkv_group.h). The bytes choose the per-head configuration (every
 * scorer, sinks, pooling, any share), the group (1 .. 6 heads, any floor,
 * slack, head cap) and then a program of decode steps (weights from a
 * palette of edge values, NaN and infinities included, wrong lengths and
 * positions), one-call steps (observe, then evict with any ask), evicts
 * with any ask and buffer, resets and prefills. Every call is also
 * made on the naive model of tests/group/group_reference.c: statuses,
 * victims, counts and every head's held positions must agree, and a
 * refused call must leave the held positions as they were. A bit of the
 * sinks byte turns on the pooled K/V rows (docs/spec.md §16.6): a
 * simulated store tagged (head, position) per row must then hold exactly
 * every head's kept positions at the rows the group gives, and never
 * more than pool_rows.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "group/group_reference.h"
#include "pyramidkv/pyramidkv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_HEADS 6u
#define STRIDE 96u
#define MAX_LEN 24u

static float weight(reader *r) {
    const uint8_t b = fuzz_byte(r);
    switch (b >> 5) {
    case 0: return 0.0f;
    case 1: return 0.25f * (float)(b & 3u);
    case 2: return (float)(b & 31u) / 31.0f;
    case 3: return -0.0f;
    case 4: return 1e-40f; /* subnormal */
    case 5: return (b & 1u) ? 1.0f : 0.5f;
    case 6: return (float)(b & 15u) * 0.0625f;
    default: {
        const float bad[] = {NAN, INFINITY, -1.0f, 0.125f};
        return bad[b & 3u];
    }
    }
}

/* The runtime's pooled store: row -> (head, position); NO_ROW: empty. */
#define NO_ROW UINT32_MAX
#define MAX_ROWS (MAX_HEADS * (STRIDE + 2u))
static uint32_t tag_h[MAX_ROWS], tag_p[MAX_ROWS];

static void store_reset(uint32_t rows, uint32_t heads) {
    for (uint32_t i = 0; i < rows; i++) tag_h[i] = NO_ROW;
    for (uint32_t h = 0; h < heads; h++) {
        tag_h[h] = h;
        tag_p[h] = 0u;
    }
}

/* Every head's rows hold its kept positions (the model's), each row once. */
static void same_rows(const pb_kvcache_group *g, const ref_group *ref,
                      uint32_t rows) {
    static unsigned char seen[MAX_ROWS];
    memset(seen, 0, rows);
    uint64_t total = 0;
    for (uint32_t h = 0; h < ref->num_heads; h++) {
        uint32_t rw[STRIDE * 2u];
        size_t n = 0;
        CHECK(pb_kvcache_group_head_rows(g, h, rw, STRIDE * 2u, &n) == PB_OK);
        CHECK(n == ref->heads[h].kept);
        for (size_t i = 0; i < n; i++) {
            CHECK(rw[i] < rows && !seen[rw[i]]);
            seen[rw[i]] = 1;
            CHECK(tag_h[rw[i]] == h && tag_p[rw[i]] == ref->heads[h].pos[i]);
        }
        total += n;
    }
    CHECK(total <= rows);
    for (uint32_t i = 0; i < rows; i++) CHECK(seen[i] == (tag_h[i] != NO_ROW));
}

static int weight_ok(float w) {
    return !isnan(w) && !isinf(w) && !(w < 0.0f);
}

static void same_heads(const pb_kvcache_group *g, const ref_group *ref) {
    for (uint32_t h = 0; h < ref->num_heads; h++) {
        uint32_t pos[STRIDE * 2u];
        size_t n = 0;
        CHECK(pb_kvcache_kept_positions(pb_kvcache_group_head(g, h), pos,
                                        STRIDE * 2u, &n) == PB_OK);
        CHECK(n == ref->heads[h].kept);
        CHECK(memcmp(pos, ref->heads[h].pos, n * sizeof *pos) == 0);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    c.recent_window = fuzz_byte(&r) % 5u;
    c.share = fuzz_byte(&r) % 12u;
    c.budget = c.recent_window + 1u + fuzz_byte(&r) % 8u;
    c.obs_window = 1u + fuzz_byte(&r) % 4u;
    c.pool_kernel = 1u + 2u * (fuzz_byte(&r) % 3u);
    c.pool = fuzz_byte(&r) % 2u;
    c.scorer = fuzz_byte(&r) % 5u;
    const uint8_t sb = fuzz_byte(&r);
    c.sinks = sb % 4u;
    const uint32_t heads = 1u + fuzz_byte(&r) % MAX_HEADS;
    const uint32_t floor_pm = (uint32_t)(fuzz_byte(&r) * 4u) % 1001u;
    const uint32_t slack = 1u + fuzz_byte(&r) % 4u;
    pb_kvcache_group_params p = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    p.num_heads = heads;
    p.floor_permille = floor_pm;
    p.slack = slack;
    p.prefill_max_len = MAX_LEN;
    const uint8_t cb = fuzz_byte(&r);
    p.head_cap_permille = cb < 128u ? 0u : 1000u + (uint32_t)(cb - 128u) * 8u;
    p.pooled_rows = (sb >> 2) & 1u;

    pb_kvcache_group_plan_info info = PB_KVCACHE_GROUP_PLAN_INFO_INIT;
    const pb_status pst = pb_kvcache_group_plan(&c, &p, &info);
    pb_kvcache_group *g = NULL;
    const pb_status st = pb_kvcache_group_create(&c, &p, NULL, &g);
    CHECK(st == pst);
    if (st != PB_OK) {
        CHECK(g == NULL);
        return 0;
    }
    if (info.head_capacity > STRIDE) {
        pb_kvcache_group_destroy(g);
        return 0;
    }
    ref_group ref;
    CHECK(ref_group_create(&ref, &c, heads, floor_pm, slack,
                           p.head_cap_permille, MAX_LEN) ==
          PB_OK);
    /* The model's heads admit a whole prompt; the group's do not need to,
     * but their held sets must agree, so the model keeps the group's
     * capacity for decode. */
    const uint32_t prow = p.pooled_rows ? (uint32_t)info.pool_rows : 0u;
    CHECK(prow <= MAX_ROWS);
    if (prow) store_reset(prow, heads);
    size_t room[MAX_HEADS];
    for (uint32_t h = 0; h < heads; h++) {
        room[h] = ref.heads[h].capacity;
        ref.heads[h].capacity = info.head_capacity;
    }

    float attn[MAX_HEADS * STRIDE];
    float rows[MAX_HEADS * MAX_LEN * MAX_LEN];
    size_t lens[MAX_HEADS];
    /* Room for a step: every head at its capacity plus the admitted one. */
    uint32_t v1[MAX_HEADS * (STRIDE + 1u)], v2[MAX_HEADS * (STRIDE + 1u)];
    size_t c1[MAX_HEADS], c2[MAX_HEADS];
    uint32_t pos = 0;
    int fresh = 1;
    while (r.n > 0u) {
        const uint8_t op = fuzz_byte(&r);
        switch (op % 8u) {
        case 0: case 1: case 2: case 3: { /* observe */
            const int null_step = (op >> 3) % 7u == 0u;
            const uint32_t next = pos + 1u + ((op >> 6) == 3u ? 2u : 0u);
            const uint32_t at = (op >> 3) % 11u == 1u ? pos : next;
            int ok_w = 1;
            for (uint32_t h = 0; h < heads; h++) {
                lens[h] = ref.heads[h].kept;
                for (size_t i = 0; i < lens[h]; i++) {
                    attn[h * STRIDE + i] = weight(&r);
                    ok_w &= weight_ok(attn[h * STRIDE + i]);
                }
            }
            const int bad_len = (op >> 3) % 13u == 2u;
            if (bad_len) lens[heads - 1u] += 1u;
            pb_status want = PB_OK;
            int full = 0;
            for (uint32_t h = 0; h < heads; h++)
                full |= ref.heads[h].kept >= info.head_capacity;
            uint64_t held = 0;
            for (uint32_t h = 0; h < heads; h++) held += ref.heads[h].kept;
            if (prow && held + heads > prow) full = 1;
            if (at <= pos) want = PB_ERR_POSITION;
            else if (!null_step && bad_len) want = PB_ERR_LENGTH;
            else if (!null_step && !ok_w) want = PB_ERR_WEIGHT;
            else if (full) want = PB_ERR_FULL;
            /* A quarter of the steps go through the one-call step, which
             * must equal an observe and then an evict with that ask. */
            const int via_step = op % 8u == 3u && (op >> 7) != 0u;
            const uint8_t a = via_step ? fuzz_byte(&r) : 0u;
            const uint64_t ask = a < 200u ? UINT64_MAX : (uint64_t)(a - 200u);
            size_t n1 = 0, n2 = 0;
            const pb_status got =
                via_step
                    ? pb_kvcache_group_step(g, at, null_step ? NULL : attn,
                                            STRIDE, lens, ask, v1,
                                            sizeof v1 / sizeof *v1, c1,
                                            heads, &n1)
                    : pb_kvcache_group_observe(g, at, null_step ? NULL : attn,
                                               STRIDE, lens);
            CHECK(got == want);
            if (got == PB_OK) {
                for (uint32_t h = 0; h < heads; h++)
                    CHECK(ref_observe(&ref.heads[h], at,
                                      null_step ? NULL : attn + h * STRIDE,
                                      lens[h]) == PB_OK);
                pos = at;
                fresh = 0;
                if (prow && !via_step) {
                    uint32_t nr[MAX_HEADS];
                    CHECK(pb_kvcache_group_new_rows(g, nr, heads) == PB_OK);
                    for (uint32_t h = 0; h < heads; h++) {
                        CHECK(nr[h] < prow && tag_h[nr[h]] == NO_ROW);
                        tag_h[nr[h]] = h;
                        tag_p[nr[h]] = at;
                    }
                }
            }
            if (got == PB_OK && via_step) {
                CHECK(ref_group_evict(&ref, ask, v2, sizeof v2 / sizeof *v2,
                                      c2, &n2) == PB_OK);
                CHECK(n1 == n2);
                CHECK(memcmp(c1, c2, heads * sizeof *c1) == 0);
                CHECK(memcmp(v1, v2, n1 * sizeof *v1) == 0);
                /* The step's victims free their rows, as an evict's; a
                 * head whose new token went at once (recent window 0)
                 * has no new row to check. */
                size_t vi = 0;
                int gone[MAX_HEADS] = {0};
                for (uint32_t h = 0; prow && h < heads; h++)
                    for (size_t i = 0; i < c1[h]; i++, vi++) {
                        if (v1[vi] == at) {
                            gone[h] = 1;
                            continue;
                        }
                        uint32_t row = NO_ROW;
                        for (uint32_t k = 0; k < prow; k++)
                            if (tag_h[k] == h && tag_p[k] == v1[vi]) row = k;
                        CHECK(row < prow);
                        tag_h[row] = NO_ROW;
                    }
                uint32_t nr[MAX_HEADS];
                if (prow)
                    CHECK(pb_kvcache_group_new_rows(g, nr, heads) == PB_OK);
                for (uint32_t h = 0; prow && h < heads; h++) {
                    if (gone[h]) continue;
                    CHECK(nr[h] < prow && tag_h[nr[h]] == NO_ROW);
                    tag_h[nr[h]] = h;
                    tag_p[nr[h]] = at;
                }
            }
            break;
        }
        case 4: case 5: { /* evict */
            const uint8_t a = fuzz_byte(&r);
            const uint64_t ask = a < 200u ? UINT64_MAX : (uint64_t)(a - 200u);
            const size_t cap = (op >> 3) % 5u == 0u ? fuzz_byte(&r) % 4u
                                                    : sizeof v1 / sizeof *v1;
            size_t n1 = 0, n2 = 0;
            static uint32_t rw[MAX_HEADS * STRIDE];
            const int with_rows = prow && (op & 0x80u);
            const pb_status got =
                with_rows ? pb_kvcache_group_evict_rows(g, ask, v1, rw, cap,
                                                        c1, heads, &n1)
                          : pb_kvcache_group_evict(g, ask, v1, cap, c1,
                                                   heads, &n1);
            const pb_status want =
                ref_group_evict(&ref, ask, v2, cap, c2, &n2);
            CHECK(got == want);
            CHECK(n1 == n2);
            if (got == PB_OK) {
                CHECK(memcmp(c1, c2, heads * sizeof *c1) == 0);
                CHECK(memcmp(v1, v2, n1 * sizeof *v1) == 0);
                if (n1) fresh = 0;
                size_t vi = 0;
                for (uint32_t h = 0; prow && h < heads; h++)
                    for (size_t i = 0; i < c1[h]; i++, vi++) {
                        uint32_t row = NO_ROW;
                        if (with_rows)
                            row = rw[vi];
                        else
                            for (uint32_t k = 0; k < prow; k++)
                                if (tag_h[k] == h && tag_p[k] == v1[vi])
                                    row = k;
                        CHECK(row < prow && tag_h[row] == h &&
                              tag_p[row] == v1[vi]);
                        tag_h[row] = NO_ROW;
                    }
            }
            break;
        }
        case 6: /* reset */
            CHECK(pb_kvcache_group_reset(g) == PB_OK);
            for (uint32_t h = 0; h < heads; h++) ref_reset(&ref.heads[h]);
            if (prow) store_reset(prow, heads);
            pos = 0;
            fresh = 1;
            break;
        default: { /* prefill */
            const size_t len = 1u + fuzz_byte(&r) % MAX_LEN;
            const size_t nrows = 1u + fuzz_byte(&r) % len;
            int ok_w = 1;
            for (size_t i = 0; i < heads * nrows * len; i++) {
                rows[i] = weight(&r);
                ok_w &= weight_ok(rows[i]);
            }
            const uint8_t a = fuzz_byte(&r);
            const uint64_t ask = a < 128u ? UINT64_MAX : (uint64_t)(a - 128u);
            size_t n1 = 0;
            uint32_t kept[MAX_HEADS * MAX_LEN];
            const pb_status got = pb_kvcache_group_prefill(
                g, rows, nrows * len, nrows, len, ask, NULL, 0, kept,
                sizeof kept / sizeof *kept, c1, heads, &n1);
            pb_status want = PB_OK;
            if (c.scorer != PB_SCORER_WINDOW || c.sinks != 0u)
                want = PB_ERR_PARAM;
            else if (!fresh) want = PB_ERR_NOT_FRESH;
            else if (!ok_w) want = PB_ERR_WEIGHT;
            CHECK(got == want);
            if (got != PB_OK) break;
            /* The model: the rows as decode steps, then a group evict. */
            for (uint32_t h = 0; h < heads; h++) {
                ref_policy *m = &ref.heads[h];
                m->capacity = room[h];
                const size_t q0 = len - nrows;
                for (size_t q = 1; q < q0; q++)
                    CHECK(ref_observe(m, (uint32_t)q, NULL, 0) == PB_OK);
                for (size_t j = 0; j < nrows; j++) {
                    const size_t q = q0 + j;
                    if (q == 0) continue;
                    CHECK(ref_observe(m, (uint32_t)q,
                                      rows + h * nrows * len + j * len,
                                      q) == PB_OK);
                }
            }
            size_t n2 = 0;
            CHECK(ref_group_evict(&ref, ask, v2, sizeof v2 / sizeof *v2, c2,
                                  &n2) == PB_OK);
            size_t at = 0;
            for (uint32_t h = 0; h < heads; h++) {
                ref.heads[h].capacity = info.head_capacity;
                CHECK(c1[h] == ref.heads[h].kept);
                CHECK(memcmp(kept + at, ref.heads[h].pos,
                             c1[h] * sizeof *kept) == 0);
                at += c1[h];
            }
            CHECK(at == n1);
            if (prow) { /* the survivors in rows 0, 1, ... in kept order */
                for (uint32_t i = 0; i < prow; i++) tag_h[i] = NO_ROW;
                at = 0;
                for (uint32_t h = 0; h < heads; h++)
                    for (size_t i = 0; i < c1[h]; i++, at++) {
                        tag_h[at] = h;
                        tag_p[at] = kept[at];
                    }
            }
            pos = (uint32_t)(len - 1u);
            fresh = 0;
            break;
        }
        }
        same_heads(g, &ref);
        if (prow) same_rows(g, &ref, prow);
    }
    ref_group_destroy(&ref);
    pb_kvcache_group_destroy(g);
    return 0;
}
