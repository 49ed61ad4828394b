/*
 * fuzz_policy_queries.c - the queries of the policy fuzz driver
 * (fuzz_policy_driver.c): the introspection calls, every NULL-instance
 * call, and the pure functions (the budgets, the head reduction) on fuzzed
 * inputs.
 */
#include "fuzz_policy_internal.h"

/* Every NULL-instance call of the public API, on either surface. */
static void null_instance_calls(fz_ctx *c) {
    fz_op = "NULL instance";
    size_t n = 5;
    double s = 1.0;
    FZ_CHECK(pb_kvcache_observe(NULL, 1u, NULL, 0u) == PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_observe(NULL, 1u, c->attn, 1u) == PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_reset(NULL) == PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_effective_budget(NULL) == 0u);
    FZ_CHECK(pb_kvcache_kept_count(NULL) == 0u);
    FZ_CHECK(pb_kvcache_capacity(NULL) == 0u);
    FZ_CHECK(pb_kvcache_memory_bytes(NULL) == 0u);
    FZ_CHECK(pb_kvcache_kept_positions(NULL, c->pos_e, c->buf_len, &n) ==
             PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_window_score(NULL, 0u, &s) == PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_score(NULL, 0u, &s) == PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_sink_count(NULL) == 0u);
    pb_kvcache_destroy(NULL);
    const pb_kvcache_vtable *vts[7] = {
        &pb_kvcache_pyramidkv,     &pb_kvcache_snapkv,
        &pb_kvcache_h2o,           &pb_kvcache_scissorhands,
        &pb_kvcache_tova,          &pb_kvcache_streaming_llm,
        &pb_kvcache_sliding_window};
    for (size_t i = 0; i < 7u; ++i) {
        vts[i]->on_decode_step(NULL, 1u, c->attn, 1u);
        FZ_CHECK(vts[i]->evict(NULL, 0u, c->vic_e, c->buf_len) == 0u);
        FZ_CHECK(vts[i]->memory_bytes(NULL) == 0u);
        vts[i]->destroy(NULL);
    }
}

/* The budget functions agree with each other on fuzzed inputs. */
static void budget_functions(fz_ctx *c) {
    fz_op = "budget functions";
    uint32_t shares[65];
    const uint32_t budget = fz_wild_u32(&c->rd);
    const uint32_t layers = fz_rd_u8(&c->rd) % 65u;
    const uint32_t ratio = fz_wild_u32(&c->rd);
    for (size_t i = 0; i < 65u; ++i) shares[i] = FZ_SENTINEL;
    const pb_status st = pb_kvcache_pyramid_budgets(budget, layers, ratio,
                                                    shares, 64u);
    if (layers == 0u || ratio == 0u) {
        FZ_CHECK(st == PB_ERR_PARAM);
        FZ_CHECK(pb_kvcache_pyramid_total(budget, layers, ratio) == 0u);
    } else if (layers > 64u) {
        FZ_CHECK(st == PB_ERR_BUFFER);
    } else {
        FZ_CHECK(st == PB_OK);
        uint64_t sum = 0;
        for (uint32_t k = 0; k < layers; ++k) {
            FZ_CHECK(shares[k] ==
                     pb_kvcache_pyramid_budget(budget, k, layers, ratio));
            if (k > 0u) FZ_CHECK(shares[k] <= shares[k - 1u]);
            sum += shares[k];
        }
        FZ_CHECK(pb_kvcache_pyramid_total(budget, layers, ratio) == sum);
        FZ_CHECK(sum <= (uint64_t)layers * budget);
    }
    if (st != PB_OK)
        for (size_t i = 0; i < 65u; ++i) FZ_CHECK(shares[i] == FZ_SENTINEL);
    FZ_CHECK(shares[64] == FZ_SENTINEL);
}

/* pb_kvcache_head_reduce on fuzzed blocks against the rule in its doc
 * comment: the statuses in order, nothing written on error, the gaps
 * between heads (head_stride > n) never read as inputs, and the result
 * bit for bit (double sum in ascending head order, rounded once). */
static void head_reduce(fz_ctx *c) {
    fz_op = "head reduce";
    float in[64], out[16], expect[16];
    const size_t heads = fz_rd_u8(&c->rd) % 5u;
    const size_t n = fz_rd_u8(&c->rd) % 9u;
    /* n - 1 (refused with several heads) .. n + 3. */
    const size_t delta = fz_rd_u8(&c->rd) % 5u;
    const size_t stride = n + delta > 0u ? n + delta - 1u : 0u;
    const uint32_t mode = fz_rd_u8(&c->rd) % 4u;
    const int in_place = fz_rd_u8(&c->rd) % 4u == 0u;
    for (size_t i = 0; i < 64u; ++i) in[i] = NAN; /* gaps: never inputs */
    int bad = 0;
    for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < n; ++i) {
            float v = fz_good_weight(&c->rd);
            if (fz_rd_u8(&c->rd) % 32u == 0u) v = fz_bad_weight(&c->rd);
            if (!pbt_weight_valid(v)) bad = 1;
            in[h * stride + i] = v;
        }
    for (size_t i = 0; i < 16u; ++i) out[i] = expect[i] = -3.0f;
    pb_status want = PB_OK;
    int open = 0; /* a SUM that rounds to FLT_MAX: both readings allowed */
    if (heads == 0u || mode > 2u || (heads > 1u && stride < n))
        want = PB_ERR_PARAM;
    else if (bad)
        want = PB_ERR_WEIGHT;
    else
        for (size_t i = 0; i < n; ++i) {
            double sum = 0.0, max = 0.0;
            for (size_t h = 0; h < heads; ++h) {
                const double v = (double)in[h * stride + i];
                sum += v;
                if (h == 0u || v > max) max = v;
            }
            if (mode == PB_HEAD_REDUCE_MEAN) expect[i] = (float)(sum / (double)heads);
            else if (mode == PB_HEAD_REDUCE_MAX) expect[i] = (float)max;
            else if (sum > (double)FLT_MAX) {
                if ((float)sum == FLT_MAX) open = 1;
                else want = PB_ERR_WEIGHT;
            } else expect[i] = (float)sum;
        }
    float *dst = in_place && want == PB_OK ? in : out;
    const pb_status got =
        pb_kvcache_head_reduce(in, heads, stride, n, mode, dst);
    if (open && (got == PB_OK || got == PB_ERR_WEIGHT)) return;
    FZ_CHECK_EQ(got, want);
    if (got != PB_OK) {
        for (size_t i = 0; i < 16u; ++i) FZ_CHECK(out[i] == -3.0f);
        return;
    }
    if (open) return;
    /* Equal as floats: bit for bit but for the sign of a zero sum or
     * maximum, which the doc does not fix. */
    for (size_t i = 0; i < n; ++i) FZ_CHECK(dst[i] == expect[i]);
    FZ_CHECK(pb_kvcache_head_reduce(NULL, heads, stride, n, mode, out) ==
             PB_ERR_NULL);
    FZ_CHECK(pb_kvcache_head_reduce(in, heads, stride, n, mode, NULL) ==
             PB_ERR_NULL);
}

void fz_op_query(fz_ctx *c) {
    fz_op = "introspection";
    const size_t kept = c->ref.kept;
    size_t n = SIZE_MAX;
    double s = -1.0;
    switch (fz_rd_u8(&c->rd) % 8u) {
    case 0:
        /* One short, then 0: PB_ERR_BUFFER, *n set, out untouched. */
        if (kept == 0u) break;
        for (size_t i = 0; i < c->buf_len; ++i) c->pos_e[i] = FZ_SENTINEL;
        FZ_CHECK(pb_kvcache_kept_positions(c->pol, c->pos_e, kept - 1u, &n) ==
                 PB_ERR_BUFFER);
        FZ_CHECK(n == kept);
        n = 0;
        FZ_CHECK(pb_kvcache_kept_positions(c->pol, c->pos_e, 0u, &n) ==
                 PB_ERR_BUFFER);
        FZ_CHECK(n == kept);
        for (size_t i = 0; i < c->buf_len; ++i)
            FZ_CHECK(c->pos_e[i] == FZ_SENTINEL);
        break;
    case 1:
        FZ_CHECK(pb_kvcache_kept_positions(c->pol, NULL, c->buf_len, &n) ==
                 PB_ERR_NULL);
        FZ_CHECK(pb_kvcache_kept_positions(c->pol, c->pos_e, c->buf_len,
                                           NULL) == PB_ERR_NULL);
        break;
    case 2: {
        /* Room to spare: nothing written past the held count. */
        const size_t cap = kept + 1u;
        for (size_t i = 0; i < c->buf_len; ++i) c->pos_e[i] = FZ_SENTINEL;
        FZ_CHECK(pb_kvcache_kept_positions(c->pol, c->pos_e, cap, &n) ==
                 PB_OK);
        FZ_CHECK(n == kept);
        FZ_CHECK(c->pos_e[kept] == FZ_SENTINEL);
        break;
    }
    case 3: {
        /* A position that may or may not be held. */
        uint32_t q;
        switch (fz_rd_u8(&c->rd) % 4u) {
        case 0: q = fz_last_pos(c) + 1u; break; /* wraps to 0 at UINT32_MAX */
        case 1:
            q = kept > 0u ? c->ref.pos[fz_rd_u8(&c->rd) % kept] + 1u : 0u;
            break;
        case 2: q = UINT32_MAX; break;
        default: q = fz_rd_u32(&c->rd); break;
        }
        double sr = -3.0;
        const pb_status se = pb_kvcache_window_score(c->pol, q, &s);
        FZ_CHECK(se == ref_window_score(&c->ref, q, &sr));
        if (se == PB_OK) FZ_CHECK(memcmp(&s, &sr, sizeof s) == 0);
        const pb_status ss = pb_kvcache_score(c->pol, q, &s);
        FZ_CHECK(ss == ref_score(&c->ref, q, &sr));
        if (ss == PB_OK) FZ_CHECK(memcmp(&s, &sr, sizeof s) == 0);
        FZ_CHECK(pb_kvcache_score(c->pol, q, NULL) == PB_ERR_NULL);
        break;
    }
    case 4:
        FZ_CHECK(pb_kvcache_window_score(c->pol, fz_last_pos(c), NULL) ==
                 PB_ERR_NULL);
        break;
    case 5: null_instance_calls(c); break;
    case 6:
        if (fz_rd_u8(&c->rd) % 2u) budget_functions(c);
        else head_reduce(c);
        break;
    default:
        if (c->vt != NULL) FZ_CHECK(c->vt->memory_bytes(c->pol) == c->mem);
        FZ_CHECK(pb_kvcache_pyramidkv.memory_bytes(c->pol) == c->mem);
        break;
    }
}
