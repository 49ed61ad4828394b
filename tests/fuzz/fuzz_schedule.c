/*
 * fuzz_schedule.c - libFuzzer target: pb_kvcache_schedule_shares on
 * arbitrary schedule descriptions (docs/spec.md §12). The input bytes
 * become a pb_schedule (every field, the struct_size, a tail beyond it, up
 * to 96 layers and their profile weights) and a buffer length. Whatever the
 * input: no crash; a refusal writes nothing (canaries) and is one of the
 * documented statuses; a success fills exactly L shares whose sum is the
 * total; the apportioned kinds add up to exactly L x budget; curve and
 * geometric never rise; profile never goes below min_share; arithmetic is
 * pb_kvcache_pyramid_budget; kvfactory equals a plain transcription of the
 * reference's integer rules.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "pyramidkv/pyramidkv.h"

#define MAX_L 96u
#define CANARY 0xA5A5A5A5u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t take32(reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
        v = (v << 8) | (r->n > 0 ? *r->p : 0u);
        if (r->n > 0) {
            ++r->p;
            --r->n;
        }
    }
    return v;
}

/* Every one of the L shares is at least least, and exactly that where
 * its weight is 0. */
static void check_floor(const uint32_t *shares, const uint32_t *weights,
                        uint32_t L, uint32_t least, const char *at_least,
                        const char *zero_weight) {
    for (uint32_t l = 0; l < L; ++l) {
        check(shares[l] >= least, at_least);
        if (weights[l] == 0u) check(shares[l] == least, zero_weight);
    }
}

/* Small values most of the time, so branches are reached; the top byte
 * picks the range. */
static uint32_t shaped(reader *r) {
    const uint32_t v = take32(r);
    switch (v >> 30) {
    case 0: return v & 0xFFu;
    case 1: return v & 0xFFFFu;
    case 2: return v & 0x3FFFFFFFu;
    default: return v | 0xC0000000u;
    }
}

static void kvfactory_plain(const pb_schedule *s, uint64_t *out) {
    const uint64_t C = s->budget, w = s->window, L = s->num_layers,
                   q = s->prompt_len, p = C - w;
    if ((q != 0 && q < C) || (q != 0 && q < 2 * p) || L == 1) {
        const uint64_t v = q != 0 && q < C ? q : C;
        for (uint64_t l = 0; l < L; ++l) out[l] = v;
        return;
    }
    uint64_t mn = p / s->beta, mx = 2 * p - mn;
    if (q != 0 && mx >= q - w) {
        mx = q - w;
        mn = 2 * p - mx;
    }
    const uint64_t steps = (mx - mn) / (L - 1);
    for (uint64_t l = 0; l < L; ++l) out[l] = mx - l * steps + w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    reader r = {data, size};
    struct {
        pb_schedule s;
        unsigned char tail[16];
    } box;
    memset(&box, 0, sizeof box);
    static uint32_t weights[MAX_L];
    pb_schedule *s = &box.s;
    const uint32_t head = take32(&r);
    s->struct_size = (head & 0x7u) == 0u ? (uint32_t)sizeof box.s - (head >> 3 & 7u)
                     : (head & 0x7u) == 1u
                         ? (uint32_t)sizeof box
                         : (uint32_t)sizeof box.s;
    if ((head & 0x38u) == 0x38u) box.tail[head >> 8 & 15u] = 1u;
    s->kind = (head >> 12) % 10u; /* 9 is not a kind */
    s->num_layers = (head >> 16) % (MAX_L + 1u);
    s->budget = shaped(&r);
    s->ratio = shaped(&r);
    s->window = shaped(&r);
    s->beta = shaped(&r);
    s->prompt_len = shaped(&r);
    s->sinks = shaped(&r);
    s->gamma_milli = shaped(&r) % 1100000u;
    s->min_share = shaped(&r);
    const uint32_t tb = take32(&r);
    s->taper_beta = (tb >> 31) ? 1.0 + (double)(tb & 0xFFFFu) / 4096.0
                               : (double)(int32_t)tb / 65536.0;
    for (uint32_t l = 0; l < MAX_L; ++l) {
        const uint32_t w = take32(&r);
        weights[l] = (w >> 31) ? w : w & 0xFFu;
    }
    s->weights = (head >> 24 & 1u) ? NULL : weights;
    const size_t len = (head >> 25 & 1u) ? s->num_layers - (s->num_layers > 0)
                                         : MAX_L;

    static uint32_t shares[MAX_L + 1];
    for (uint32_t l = 0; l <= MAX_L; ++l) shares[l] = CANARY;
    uint64_t total = 0xDEADBEEFu;
    const pb_status st = pb_kvcache_schedule_shares(s, shares, len, &total);
    if (st != PB_OK) {
        check(st == PB_ERR_NULL || st == PB_ERR_PARAM || st == PB_ERR_BUFFER ||
                  st == PB_ERR_TOO_LARGE,
              "a refusal is a documented status");
        for (uint32_t l = 0; l <= MAX_L; ++l)
            check(shares[l] == CANARY, "a refusal writes no share");
        check(total == 0xDEADBEEFu, "a refusal writes no total");
        return 0;
    }
    const uint32_t L = s->num_layers;
    check(L >= 1u && L <= len, "success needs layers and room");
    check(shares[L] == CANARY, "nothing written past the layers");
    uint64_t sum = 0;
    for (uint32_t l = 0; l < L; ++l) sum += shares[l];
    check(sum == total, "the total is the sum of the shares");
    const uint64_t lb = (uint64_t)s->budget * L;
    switch (s->kind) {
    case PB_SCHEDULE_ARITHMETIC:
        for (uint32_t l = 0; l < L; ++l)
            check(shares[l] == pb_kvcache_pyramid_budget(s->budget, l, L,
                                                          s->ratio),
                  "arithmetic is pb_kvcache_pyramid_budget");
        check(total <= lb, "arithmetic never exceeds L x B");
        break;
    case PB_SCHEDULE_UNIFORM:
        check(total == lb, "uniform is L x B");
        break;
    case PB_SCHEDULE_KVFACTORY: {
        static uint64_t want[MAX_L];
        kvfactory_plain(s, want);
        for (uint32_t l = 0; l < L; ++l)
            check(shares[l] == want[l], "kvfactory is its transcription");
        break;
    }
    case PB_SCHEDULE_KVFACTORY_BALANCED:
        if (!(s->prompt_len != 0u &&
              (s->prompt_len < s->budget ||
               s->prompt_len < 2u * ((uint64_t)s->budget - s->window))))
            check(total == lb, "kvfactory-balanced is L x C");
        break;
    case PB_SCHEDULE_TAPER:
        for (uint32_t l = 0; l < L; ++l)
            check(shares[l] >= s->sinks + 1u, "taper keeps its floor");
        break;
    case PB_SCHEDULE_CURVE:
    case PB_SCHEDULE_GEOMETRIC:
        check(total == lb, "curve and geometric are L x B");
        for (uint32_t l = 1; l < L; ++l)
            check(shares[l] <= shares[l - 1], "curve and geometric never rise");
        break;
    case PB_SCHEDULE_CAKE:
        if (s->prompt_len != 0u && s->prompt_len <= s->budget) {
            for (uint32_t l = 0; l < L; ++l)
                check(shares[l] == s->prompt_len, "cake keeps a short prompt");
            break;
        }
        check(total == lb, "cake is L x B");
        check_floor(shares, s->weights, L, s->window, "cake keeps the window",
                    "weight 0 gets the window");
        break;
    default:
        check(total == lb, "profile is L x B");
        check_floor(shares, s->weights, L, s->min_share,
                    "profile keeps min_share", "weight 0 gets min_share");
        break;
    }
    return 0;
}
