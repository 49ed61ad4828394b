/*
 * pyramid_budget.c - the per-layer share arithmetic of PyramidKV.
 *
 * Owns pb_kvcache_pyramid_budget, pb_kvcache_pyramid_budgets and
 * pb_kvcache_pyramid_total. Depends on nothing but <stdint.h>: no policy
 * state, no allocation, no floating point. Every product that can exceed 64
 * bits goes through the small exact 128-bit helpers below, so the results
 * are the same on every platform and compiler.
 */
#include "pyramidkv/pyramidkv.h"

/* An unsigned 128-bit integer as two 64-bit halves. */
typedef struct u128 {
    uint64_t hi;
    uint64_t lo;
} u128;

static u128 u128_of(uint64_t v) {
    u128 r = {0u, v};
    return r;
}

static int u128_lt(u128 a, u128 b) {
    return a.hi < b.hi || (a.hi == b.hi && a.lo < b.lo);
}

static u128 u128_add(u128 a, u128 b) {
    u128 r;
    r.lo = a.lo + b.lo;
    r.hi = a.hi + b.hi + (r.lo < a.lo ? 1u : 0u);
    return r;
}

static u128 u128_sub(u128 a, u128 b) { /* requires a >= b */
    u128 r;
    r.lo = a.lo - b.lo;
    r.hi = a.hi - b.hi - (a.lo < b.lo ? 1u : 0u);
    return r;
}

/* The full product of two 64-bit values, from 32-bit limbs. */
static u128 u128_mul64(uint64_t a, uint64_t b) {
    const uint64_t a0 = a & 0xFFFFFFFFu, a1 = a >> 32;
    const uint64_t b0 = b & 0xFFFFFFFFu, b1 = b >> 32;
    const uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
    const uint64_t mid = (p00 >> 32) + (p01 & 0xFFFFFFFFu) + (p10 & 0xFFFFFFFFu);
    u128 r;
    r.lo = (mid << 32) | (p00 & 0xFFFFFFFFu);
    r.hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
    return r;
}

/* The low 128 bits of a * b. Callers only use it where the product fits. */
static u128 u128_mul(u128 a, u128 b) {
    u128 r = u128_mul64(a.lo, b.lo);
    r.hi += a.hi * b.lo + a.lo * b.hi;
    return r;
}

static u128 u128_shl1(u128 a) {
    u128 r = {(a.hi << 1) | (a.lo >> 63), a.lo << 1};
    return r;
}

/* q = n / d, *rem = n % d, for d != 0; plain shift-and-subtract. */
static u128 u128_divmod(u128 n, u128 d, u128 *rem) {
    u128 q = {0u, 0u}, r = {0u, 0u};
    for (int i = 127; i >= 0; --i) {
        const uint64_t bit =
            i >= 64 ? (n.hi >> (i - 64)) & 1u : (n.lo >> i) & 1u;
        r = u128_shl1(r);
        r.lo |= bit;
        q = u128_shl1(q);
        if (!u128_lt(r, d)) {
            r = u128_sub(r, d);
            q.lo |= 1u;
        }
    }
    if (rem != NULL) *rem = r;
    return q;
}

/* The unsaturated share written as floor((a*j + b) / m), where j counts
 * layers from the last one (j = L-1-k): a = 2B(r-1), b = 2B(L-1),
 * m = (r+1)(L-1). Valid for L > 1 and r >= 1. */
typedef struct share_line {
    u128 a, b, m;
} share_line;

static share_line share_line_of(uint32_t budget, uint32_t num_layers,
                                uint32_t ratio) {
    const uint64_t two_b = 2u * (uint64_t)budget;
    const uint64_t lm1 = (uint64_t)num_layers - 1u;
    share_line s;
    s.a = u128_mul64(two_b, (uint64_t)ratio - 1u);
    s.b = u128_mul64(two_b, lm1);
    s.m = u128_mul64((uint64_t)ratio + 1u, lm1);
    return s;
}

/* floor((a*j + b) / m): below 2^34, since a*j + b = 2B*M with M < m. */
static u128 share_at(const share_line *s, uint64_t j) {
    const u128 num = u128_add(u128_mul(s->a, u128_of(j)), s->b);
    return u128_divmod(num, s->m, NULL);
}

static uint32_t saturate(u128 v) {
    return (v.hi != 0u || v.lo > UINT32_MAX) ? UINT32_MAX : (uint32_t)v.lo;
}

uint32_t pb_kvcache_pyramid_budget(uint32_t budget, uint32_t layer,
                                   uint32_t num_layers,
                                   uint32_t pyramid_ratio) {
    if (num_layers == 0u || layer >= num_layers || pyramid_ratio == 0u)
        return 0u;
    if (num_layers == 1u) return budget;
    const share_line s = share_line_of(budget, num_layers, pyramid_ratio);
    return saturate(share_at(&s, (uint64_t)(num_layers - 1u - layer)));
}

pb_status pb_kvcache_pyramid_budgets(uint32_t budget, uint32_t num_layers,
                                     uint32_t pyramid_ratio, uint32_t *shares,
                                     size_t shares_len) {
    if (shares == NULL) return PB_ERR_NULL;
    if (num_layers == 0u || pyramid_ratio == 0u) return PB_ERR_PARAM;
    if (shares_len < num_layers) return PB_ERR_BUFFER;
    for (uint32_t k = 0; k < num_layers; ++k)
        shares[k] =
            pb_kvcache_pyramid_budget(budget, k, num_layers, pyramid_ratio);
    return PB_OK;
}

/* sum_{i=0}^{n-1} floor((a*i + b) / m), the classic Euclid-like reduction.
 * Every partial sum is bounded by the full sum, which the caller knows fits
 * in 64 bits, and every intermediate fits in 128 bits (a, b, m < 2^66,
 * n < 2^33). */
static u128 floor_sum(u128 n, u128 m, u128 a, u128 b) {
    u128 ans = u128_of(0u);
    for (;;) {
        if (!u128_lt(a, m)) {
            u128 rem;
            const u128 q = u128_divmod(a, m, &rem);
            /* n(n-1)/2 with n < 2^33 fits in 64 bits. */
            const uint64_t nn = n.lo, tri = (nn & 1u) ? nn * ((nn - 1u) / 2u)
                                                      : (nn / 2u) * (nn - 1u);
            if (nn != 0u) ans = u128_add(ans, u128_mul(u128_of(tri), q));
            a = rem;
        }
        if (!u128_lt(b, m)) {
            u128 rem;
            const u128 q = u128_divmod(b, m, &rem);
            ans = u128_add(ans, u128_mul(n, q));
            b = rem;
        }
        const u128 y_max = u128_add(u128_mul(a, n), b);
        if (u128_lt(y_max, m)) break;
        u128 rem;
        n = u128_divmod(y_max, m, &rem);
        b = rem;
        const u128 t = m;
        m = a;
        a = t;
    }
    return ans;
}

uint64_t pb_kvcache_pyramid_total(uint32_t budget, uint32_t num_layers,
                                  uint32_t pyramid_ratio) {
    if (num_layers == 0u || pyramid_ratio == 0u) return 0u;
    if (num_layers == 1u) return budget;
    const share_line s = share_line_of(budget, num_layers, pyramid_ratio);
    const u128 cap = u128_of(UINT32_MAX);
    /* Shares grow with j; find the first j whose share saturates. */
    uint64_t lo = 0u, hi = num_layers; /* answer in [lo, hi] */
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2u;
        if (u128_lt(cap, share_at(&s, mid)))
            hi = mid;
        else
            lo = mid + 1u;
    }
    const u128 exact = floor_sum(u128_of(lo), s.m, s.a, s.b);
    return exact.lo + ((uint64_t)num_layers - lo) * (uint64_t)UINT32_MAX;
}
