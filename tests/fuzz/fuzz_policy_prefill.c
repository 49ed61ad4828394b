/*
 * fuzz_policy_prefill.c - the prefill operation of the policy fuzz driver
 * (fuzz_policy_driver.c, FZ_SURFACE_PREFILL), checked against the prefill
 * tests' reference.
 */
#include "fuzz_policy_internal.h"

/* ------------------------------------------------------------------------ */
/* Prefill (FZ_SURFACE_PREFILL)                                             */

/* How many positions a successful prefill keeps, from the documented rules
 * alone: the count does not depend on the weights, so it also decides
 * PB_ERR_FULL and PB_ERR_BUFFER, which are checked before the weights. */
static size_t prefill_survivors(const fz_ctx *c, size_t rows, size_t len,
                                uint32_t budget) {
    /* A shape refused with PB_ERR_PARAM keeps nothing. */
    if (rows == 0u || rows > len) return 0u;
    const size_t target = budget < c->effective ? budget : c->effective;
    if (len <= target) return len;
    if (c->options.prefill_scope == PB_PREFILL_REFERENCE) {
        size_t prefix_kept = target > rows ? target - rows : 0u;
        if (prefix_kept > len - rows) prefix_kept = len - rows;
        return rows + prefix_kept;
    }
    const size_t window = c->ref.params.recent_window;
    const size_t recent = window < len ? window : len;
    size_t needed = len - target;
    if (needed > len - recent) needed = len - recent;
    return len - needed;
}

/* Keeps the positions of r flagged in keep[] (indices of held positions),
 * with their records, as a reference-scope prefill does. */
static void ref_keep_only(ref_policy *r, const unsigned char *keep) {
    const size_t obs = r->params.obs_window;
    size_t w = 0;
    for (size_t i = 0; i < r->kept; ++i) {
        if (!keep[i]) continue;
        r->pos[w] = r->pos[i];
        memmove(r->ring + w * obs, r->ring + i * obs, obs * sizeof(float));
        ++w;
    }
    r->kept = w;
}

/* The model of a successful prefill: a reference instance large enough for
 * the whole prompt is fed the rows as decode steps (the definition in
 * pyramidkv_prefill.h), then evicted (consistent scope) or cut to the
 * paper's selection (reference scope, tests/prefill/prefill_reference.c);
 * its state then replaces c->ref. Returns the victims in c->vic_r and
 * their count. */
static size_t model_prefill(fz_ctx *c, const float *attn, size_t rows,
                            size_t len, uint32_t budget) {
    pb_kvcache_options o = c->options;
    const uint32_t least = c->ref.params.recent_window + 2u;
    o.capacity = (uint32_t)len > least ? (uint32_t)len : least;
    ref_policy big;
    FZ_CHECK(ref_create(&big, &c->ref.params, &o) == PB_OK);
    FZ_CHECK(pfref_feed_reference(&big, attn, rows, len) == PB_OK);
    FZ_CHECK_EQ(big.kept, len);
    size_t n_victims = 0;
    if (c->options.prefill_scope == PB_PREFILL_REFERENCE) {
        unsigned char keep[FZ_PREFILL_MAX_LEN];
        const size_t target = budget < c->effective ? budget : c->effective;
        const size_t kept =
            pfref_select(attn, rows, len, target, c->ref.params.pool_kernel,
                         c->options.pool, keep);
        FZ_CHECK(kept != (size_t)-1);
        for (size_t i = 0; i < len; ++i)
            if (!keep[i]) c->vic_r[n_victims++] = big.pos[i];
        ref_keep_only(&big, keep);
        FZ_CHECK_EQ(big.kept, kept);
    } else {
        FZ_CHECK(ref_evict(&big, budget, c->vic_r, len, &n_victims) == PB_OK);
    }
    /* The survivors fit (PB_ERR_FULL was ruled out): adopt them. */
    const size_t obs = c->ref.params.obs_window;
    FZ_CHECK(big.kept <= c->ref.capacity);
    c->ref.kept = big.kept;
    c->ref.slot = big.slot;
    memcpy(c->ref.pos, big.pos, big.kept * sizeof *big.pos);
    memcpy(c->ref.ring, big.ring, big.kept * obs * sizeof *big.ring);
    ref_destroy(&big);
    return n_victims;
}

void fz_op_prefill(fz_ctx *c) {
    fz_op = "prefill";
    c->full_check = 1;
    /* After fz_observe(NULL) and an evict that drops that position again the
     * documented freshness is open to reading; such states are skipped. */
    if (!c->fresh && c->ref.kept == 1u && c->ref.pos[0] == 0u) return;
    const size_t window = c->ref.params.recent_window;
    const int reference = c->options.prefill_scope == PB_PREFILL_REFERENCE;
    const size_t len = fz_rd_u8(&c->rd) % (FZ_PREFILL_MAX_LEN + 1u);
    size_t rows;
    switch (fz_rd_u8(&c->rd) % 8u) {
    case 0: rows = 0u; break;
    case 1: rows = len + 1u; break;
    case 2: case 3: rows = window; break;
    default: rows = len > 0u ? 1u + fz_rd_u8(&c->rd) % len : 1u; break;
    }
    const uint32_t budget = fz_pick_budget(c);
    /* A prompt above UINT32_MAX positions must be refused unread. */
    const int huge = fz_rd_u8(&c->rd) % 32u == 0u;
    const size_t call_len = huge ? (size_t)UINT32_MAX + 1u : len;

    const size_t cells = rows <= len + 1u ? rows * len : 0u;
    float *attn = malloc((cells > 0u ? cells : 1u) * sizeof *attn);
    FZ_CHECK(attn != NULL);
    const uint8_t fill = fz_rd_u8(&c->rd) % 4u;
    for (size_t i = 0; i < cells; ++i) {
        switch (fill) {
        case 0: attn[i] = 0.25f; break;
        case 1: attn[i] = fz_good_weight(&c->rd); break;
        case 2: attn[i] = (float)(fz_rd_u8(&c->rd) % 4u) * 0.25f; break;
        default: attn[i] = (float)((i * 7u) % 11u); break;
        }
    }
    int bad = 0;
    for (size_t i = 0; i < cells; ++i)
        if (!pbt_weight_valid(attn[i])) bad = 1;
    if (cells > 0u && fz_rd_u8(&c->rd) % 8u == 0u) {
        attn[fz_rd_u8(&c->rd) % cells] = fz_bad_weight(&c->rd);
        bad = 1;
    }

    size_t need = 0;
    FZ_CHECK(pb_kvcache_prefill_workspace_size(c->pol, len, &need) == PB_OK);
    const size_t ws_len = need + 16u;
    double *ws_block = malloc(ws_len);
    FZ_CHECK(ws_block != NULL);
    unsigned char *ws = (unsigned char *)ws_block;
    size_t ws_bytes = need;
    int misaligned = 0;
    switch (fz_rd_u8(&c->rd) % 6u) {
    case 0: ws = NULL; ws_bytes = 0u; break;
    case 1: ws_bytes = need > 0u ? need - 1u : 0u; break;
    case 2: ws += 1; misaligned = 1; break;
    case 3: ws_bytes = need + 8u; break;
    default: break;
    }

    const size_t count = prefill_survivors(c, rows, len, budget);
    uint32_t *kept = c->vic_e;
    uint32_t *victims = c->pos_before;
    size_t kept_cap = c->alloc_len, victims_cap = c->alloc_len;
    switch (fz_rd_u8(&c->rd) % 5u) {
    case 0: kept = NULL; kept_cap = 0u; break;
    case 1: kept_cap = count; break;
    case 2: kept_cap = count > 0u ? count - 1u : 0u; break;
    default: break;
    }
    switch (fz_rd_u8(&c->rd) % 5u) {
    case 0: victims = NULL; victims_cap = 0u; break;
    case 1: victims_cap = len - (count < len ? count : len); break;
    case 2: victims_cap = len > count + 1u ? len - count - 1u : 0u; break;
    default: break;
    }
    FZ_CHECK(kept_cap <= c->alloc_len && victims_cap <= c->alloc_len);
    for (size_t i = 0; i < c->alloc_len; ++i)
        c->vic_e[i] = c->pos_before[i] = FZ_SENTINEL;

    /* The documented order: NULL, PARAM, TOO_LARGE, NOT_FRESH, WORKSPACE,
     * FULL, BUFFER, WEIGHT. */
    pb_status want = PB_OK;
    /* Without a workspace, the create-time reservation serves every prompt
     * up to options.prefill_max_len, whatever the kernel (the header, since
     * a fuzz finding settled it): no tolerance here. */
    const uint8_t null_arg = fz_rd_u8(&c->rd) % 16u;
    if (null_arg < 3u) want = PB_ERR_NULL;
    else if (call_len == 0u || rows == 0u || rows > call_len ||
             (reference && rows != window) || misaligned)
        want = PB_ERR_PARAM;
    else if (huge) want = PB_ERR_TOO_LARGE;
    else if (!c->fresh) want = PB_ERR_NOT_FRESH;
    else if (ws != NULL ? ws_bytes < need
                        : len > c->options.prefill_max_len)
        want = PB_ERR_WORKSPACE;
    else if (count > c->capacity) want = PB_ERR_FULL;
    else if ((kept != NULL && kept_cap < count) ||
             (victims != NULL && victims_cap < len - count))
        want = PB_ERR_BUFFER;
    else if (bad) want = PB_ERR_WEIGHT;

    if (fz_trace())
        fprintf(stderr,
                "step %zu: prefill len %zu rows %zu budget %u ws %zu/%zu%s "
                "kept %zu victims %zu fresh %d: want %d\n",
                fz_step, call_len, rows, (unsigned)budget, ws_bytes, need,
                ws ? "" : " (NULL)", kept_cap, victims_cap, c->fresh,
                (int)want);
    size_t n = SIZE_MAX;
    const pb_status got = pb_kvcache_prefill(
        null_arg == 0u ? NULL : c->pol, null_arg == 1u ? NULL : attn, rows,
        call_len, budget, ws, ws_bytes, kept, kept_cap, victims, victims_cap,
        null_arg == 2u ? NULL : &n);
    FZ_CHECK_EQ(got, want);
    if (got == PB_ERR_BUFFER) FZ_CHECK_EQ(n, count);
    if (got == PB_OK && reference &&
        c->ref.params.pool_kernel > FZ_MODEL_MAX_KERNEL) {
        /* What needs no model; then the program ends. */
        FZ_CHECK_EQ(n, count);
        FZ_CHECK_EQ(pb_kvcache_kept_count(c->pol), count);
        c->model_lost = 1;
    } else if (got == PB_OK) {
        FZ_CHECK_EQ(n, count);
        const size_t n_victims = model_prefill(c, attn, rows, len, budget);
        FZ_CHECK_EQ(n_victims, len - count);
        FZ_CHECK_EQ(c->ref.kept, count);
        if (kept != NULL) {
            FZ_CHECK(memcmp(kept, c->ref.pos, count * sizeof *kept) == 0);
            for (size_t i = count; i < kept_cap; ++i)
                FZ_CHECK(kept[i] == FZ_SENTINEL);
        }
        if (victims != NULL) {
            FZ_CHECK(n_victims == 0u ||
                     memcmp(victims, c->vic_r, n_victims * sizeof *victims) ==
                         0);
            for (size_t i = n_victims; i < victims_cap; ++i)
                FZ_CHECK(victims[i] == FZ_SENTINEL);
        }
        c->fresh = 0;
    } else {
        /* A refused prefill writes no output array. */
        for (size_t i = 0; i < c->alloc_len; ++i) {
            FZ_CHECK(c->vic_e[i] == FZ_SENTINEL);
            FZ_CHECK(c->pos_before[i] == FZ_SENTINEL);
        }
    }
    free(attn);
    free(ws_block);
}
