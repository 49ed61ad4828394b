/*
 * fuzz_policy_driver.c - bytes to a program of policy calls, run on the
 * library and on tests/reference_model side by side (see the header): the
 * input, the run and its checks, and the observe, evict and reset
 * operations; the creates, the queries and the prefill operation are in
 * fuzz_policy_create.c, fuzz_policy_queries.c and fuzz_policy_prefill.c.
 *
 * Input layout: one create record (flags, then the parameters, each either
 * "sane" - inside its range, small, so programs get deep - or "wild" - a
 * boundary or raw 32-bit value), then operations until the bytes run out.
 * A missing byte reads as 0, so every input is a valid program.
 *
 * After every operation the whole observable state of the instance (held
 * count, held positions, the score of every held position under its scorer
 * - the window score for the window scorer - sinks held, capacity,
 * effective share, memory bytes) is compared with the reference model bit
 * for bit, which also proves that a refused call changed nothing. Calls the
 * model does not model (NULL pointers) are checked against the documented
 * status alone. Evictions are also checked against invariants stated
 * without the model: victims ascending and held before, none of the newest
 * recent_window positions, no sink, no position the last scorer has not
 * observed, and exactly as many as the share asks for or as may go.
 *
 * Memory is bounded: an instance may use at most FZ_MEM_LIMIT bytes (a
 * larger create is run against a limited allocator and must fail with
 * PB_ERR_NOMEM), and the checking work per input is capped, so every input
 * runs in milliseconds.
 */
#include "fuzz_policy_internal.h"

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                        */

/* What the program was doing, for the message of a finding (declared in
 * fuzz_policy_internal.h). */
const char *fz_op = "create";
size_t fz_step;

void fz_fail(const char *file, int line, const char *what) {
    fprintf(stderr, "FUZZ FINDING: %s:%d: step %zu (%s): check failed: %s\n",
            file, line, fz_step, fz_op, what);
    fflush(stderr);
    abort();
}

/* An equality whose two sides are worth printing (statuses, counts). */
void fz_fail_eq(const char *file, int line, const char *what,
                unsigned long long a, unsigned long long b) {
    fprintf(stderr, "FUZZ FINDING: %s:%d: step %zu (%s): %s: %llu != %llu\n",
            file, line, fz_step, fz_op, what, a, b);
    fflush(stderr);
    abort();
}

/* ------------------------------------------------------------------------ */
/* Reading the input                                                        */

uint8_t fz_rd_u8(fz_reader *r) {
    if (r->n == 0u) return 0u;
    r->n -= 1u;
    return *r->p++;
}

static uint32_t rd_u16(fz_reader *r) {
    const uint32_t lo = fz_rd_u8(r);
    return lo | (uint32_t)fz_rd_u8(r) << 8;
}

uint32_t fz_rd_u32(fz_reader *r) {
    const uint32_t lo = rd_u16(r);
    return lo | rd_u16(r) << 16;
}

/* A value for a parameter that may be anything: mostly the boundaries. */
uint32_t fz_wild_u32(fz_reader *r) {
    switch (fz_rd_u8(r) % 10u) {
    case 0: return 0u;
    case 1: return 1u;
    case 2: return 2u;
    case 3: return UINT32_MAX;
    case 4: return UINT32_MAX - 1u;
    case 5: return UINT32_MAX / 2u + fz_rd_u8(r) % 3u;
    case 6: return fz_rd_u8(r);
    case 7: return rd_u16(r);
    case 8: return (uint32_t)1 << (fz_rd_u8(r) % 32u);
    default: return fz_rd_u32(r);
    }
}

static float from_bits(uint32_t bits) {
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* A weight that is valid, or one whose bits came from the input (which
 * may be anything; the reference model says what the status must be). The
 * palette has zeros of both signs, repeated values for exact ties,
 * denormals and huge values. */
float fz_good_weight(fz_reader *r) {
    static const float palette[] = {
        0.0f,   -0.0f,  1.0f,        1.0f,          0.5f,   0.25f,
        0.125f, 2.0f,   0.1f,        1.0f / 3.0f,   1e-3f,  FLT_TRUE_MIN,
        1e-40f, FLT_MIN, FLT_EPSILON, 1e30f,        FLT_MAX, 3.0e38f,
        0.5f,   0.0f,
    };
    const uint8_t k = fz_rd_u8(r);
    if (k == 255u) return from_bits(fz_rd_u32(r));
    return palette[k % (sizeof palette / sizeof palette[0])];
}

/* A weight the library must refuse: NaNs (quiet, signalling, negative),
 * infinities, negatives including the smallest negative denormal. */
float fz_bad_weight(fz_reader *r) {
    static const uint32_t bits[] = {
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0x7f800000u,
        0xff800000u, 0xbf800000u, 0x80000001u, 0xff7fffffu, 0x80800000u,
    };
    return from_bits(bits[fz_rd_u8(r) % (sizeof bits / sizeof bits[0])]);
}
/* ------------------------------------------------------------------------ */
/* The run                                                                  */

/* The newest held position. An instance can be empty: evict with budget 0
 * and recent_window 0 drops everything. Then 0 is returned, which the
 * callers treat like any held position (0 itself is still admissible). */
uint32_t fz_last_pos(const fz_ctx *c) {
    return c->ref.kept > 0u ? c->ref.pos[c->ref.kept - 1u] : 0u;
}

/* Compares everything observable about the instance with the model. */
static void check_state(fz_ctx *c) {
    const size_t kept = c->ref.kept;
    FZ_CHECK_EQ(pb_kvcache_kept_count(c->pol), kept);
    FZ_CHECK(kept <= c->capacity);
    FZ_CHECK(pb_kvcache_capacity(c->pol) == c->capacity);
    FZ_CHECK(pb_kvcache_effective_budget(c->pol) == c->effective);
    FZ_CHECK(pb_kvcache_memory_bytes(c->pol) == c->mem);
    if (c->counted) {
        FZ_CHECK(c->ca.alloc_calls == c->calls_at_create);
        FZ_CHECK(c->ca.outstanding == c->mem);
    }

    size_t n = 0;
    FZ_CHECK(pb_kvcache_kept_positions(c->pol, c->pos_e, c->buf_len, &n) ==
             PB_OK);
    FZ_CHECK(n == kept);
    FZ_CHECK(memcmp(c->pos_e, c->ref.pos, kept * sizeof *c->pos_e) == 0);
    for (size_t i = 1; i < kept; ++i) FZ_CHECK(c->pos_e[i - 1] < c->pos_e[i]);

    /* The window scores. ref_window_score finds a position by a linear
     * scan, which would make this check quadratic in the held count; the
     * model's score of the i-th held position is summed here the way
     * reference_model.c sums it (ring-slot order, double, from 0.0), and
     * ref_window_score itself is asked for one position per call. Every
     * score is compared when few are held, after create, evict, reset and
     * prefill, and on every 4th step; in between (observe, refused calls,
     * queries) 16 positions spread over the held range, rotating, keep the
     * cost per step bounded. A difference persists until the ring moves
     * past it, so it is still met by a full comparison. */
    FZ_CHECK_EQ(pb_kvcache_sink_count(c->pol), ref_sink_count(&c->ref));
    if (c->ref.scorer != (uint32_t)PB_SCORER_WINDOW) {
        /* One number per position: every one is compared, each the way
         * reference_model.c defines it. */
        for (size_t i = 0; i < kept; ++i) {
            double se = -7.0, sr = 0.0;
            FZ_CHECK(pb_kvcache_score(c->pol, c->pos_e[i], &se) == PB_OK);
            switch (c->ref.scorer) {
            case PB_SCORER_CUMULATIVE: sr = c->ref.cum[i]; break;
            case PB_SCORER_LAST:
                sr = c->ref.observed[i] ? c->ref.last[i] : -1.0;
                break;
            case PB_SCORER_VOTES: sr = (double)c->ref.votes[i]; break;
            default: sr = 0.0; break;
            }
            FZ_CHECK(memcmp(&se, &sr, sizeof se) == 0);
        }
        c->work += (uint64_t)kept * 4u + 16u;
        c->full_check = 0;
        return;
    }
    const size_t obs = c->ref.params.obs_window;
    const int all = kept <= 16u || c->full_check || fz_step % 4u == 0u;
    const size_t stride = all ? 1u : kept / 16u;
    for (size_t i = all ? 0u : fz_step % stride; i < kept; i += stride) {
        double se = -1.0, sr = 0.0;
        FZ_CHECK(pb_kvcache_window_score(c->pol, c->pos_e[i], &se) == PB_OK);
        for (size_t s = 0; s < obs; ++s)
            sr += (double)c->ref.ring[i * obs + s];
        FZ_CHECK(memcmp(&se, &sr, sizeof se) == 0);
    }
    if (kept > 0u) {
        const size_t i = fz_step % kept;
        double se = -1.0, sr = -2.0;
        FZ_CHECK(pb_kvcache_window_score(c->pol, c->pos_e[i], &se) == PB_OK);
        FZ_CHECK(ref_window_score(&c->ref, c->pos_e[i], &sr) == PB_OK);
        FZ_CHECK(memcmp(&se, &sr, sizeof se) == 0);
    }
    c->work += (uint64_t)(all ? kept : 16u) * (obs + 8u) + kept / 8u;
    c->full_check = 0;
}

static void fill_attn(fz_ctx *c, size_t len) {
    const uint8_t mode = fz_rd_u8(&c->rd) % 4u;
    const float same = fz_good_weight(&c->rd);
    for (size_t i = 0; i < len; ++i) {
        switch (mode) {
        case 0: c->attn[i] = same; break;
        case 1: c->attn[i] = fz_good_weight(&c->rd); break;
        case 2: c->attn[i] = (float)(fz_rd_u8(&c->rd) % 4u) * 0.25f; break;
        default: c->attn[i] = (float)(i % 64u); break;
        }
    }
}

/* PB_FUZZ_TRACE=1 in the environment prints every observe and evict, to
 * turn a finding into a minimal reproducer by hand. */
int fz_trace(void) {
    static int trace = -1;
    if (trace < 0) trace = getenv("PB_FUZZ_TRACE") != NULL;
    return trace;
}

void fz_observe(fz_ctx *c, uint32_t pos, const float *attn, size_t len) {
    if (fz_trace()) {
        fprintf(stderr, "step %zu: %s pos %u len %zu held %zu:", fz_step,
                fz_op, (unsigned)pos, len, c->ref.kept);
        for (size_t i = 0; attn != NULL && i < len && i <= c->ref.kept; ++i)
            fprintf(stderr, " %a", (double)attn[i]);
        fprintf(stderr, "\n");
    }
    if (c->vt == NULL) {
        const pb_status se = pb_kvcache_observe(c->pol, pos, attn, len);
        const pb_status sr = ref_observe(&c->ref, pos, attn, len);
        FZ_CHECK_EQ(se, sr);
        if (sr == PB_OK) c->fresh = 0;
    } else {
        c->vt->on_decode_step(c->pol, pos, attn, len);
        if (ref_observe(&c->ref, pos, attn, len) == PB_OK) c->fresh = 0;
    }
}

/* A position above every held one (UINT32_MAX again once that is held,
 * which must be refused). */
static uint32_t next_pos(fz_ctx *c) {
    if (c->ref.kept == 0u) return fz_rd_u8(&c->rd);
    const uint32_t last = fz_last_pos(c);
    if (last == UINT32_MAX) return last;
    uint32_t step = 1u;
    if (fz_rd_u8(&c->rd) % 4u == 0u) step += fz_rd_u8(&c->rd);
    return UINT32_MAX - last < step ? UINT32_MAX : last + step;
}

static void op_observe(fz_ctx *c) {
    fz_op = "observe";
    const uint32_t pos = next_pos(c);
    fill_attn(c, c->ref.kept);
    fz_observe(c, pos, c->attn, c->ref.kept);
}

static void op_observe_null_attn(fz_ctx *c) {
    fz_op = "observe, attn NULL";
    /* attn_len is ignored with attn NULL, whatever it is. */
    const size_t len = fz_rd_u8(&c->rd) % 2u ? SIZE_MAX : c->ref.kept + 1u;
    fz_observe(c, next_pos(c), NULL, len);
}

static void op_observe_bad_length(fz_ctx *c) {
    fz_op = "observe, length off";
    const size_t kept = c->ref.kept;
    size_t len;
    switch (fz_rd_u8(&c->rd) % 4u) {
    case 0: len = kept - 1u; break;
    case 1: len = kept + 1u; break;
    case 2: len = 0u; break;
    default: len = SIZE_MAX; break;
    }
    /* The buffer holds kept + 1 weights: a library that reads past
     * attn_len, or reads at all before checking it, is caught by ASan. */
    fill_attn(c, kept + 1u);
    fz_observe(c, next_pos(c), c->attn, len);
}

static void op_observe_bad_position(fz_ctx *c) {
    fz_op = "observe, position not increasing";
    const uint32_t last = fz_last_pos(c);
    uint32_t pos;
    switch (fz_rd_u8(&c->rd) % 4u) {
    case 0: pos = last; break;
    case 1: pos = last > 0u ? last - 1u : 0u; break;
    case 2: pos = 0u; break;
    default: pos = fz_rd_u32(&c->rd) % (last + (last < UINT32_MAX)); break;
    }
    /* Sometimes also a wrong length or a bad weight: the position error
     * must still win. */
    const uint8_t also = fz_rd_u8(&c->rd) % 3u;
    const size_t len = also == 1u ? c->ref.kept + 1u : c->ref.kept;
    fill_attn(c, c->ref.kept + 1u);
    if (also == 2u) c->attn[0] = fz_bad_weight(&c->rd);
    fz_observe(c, pos, c->attn, len);
}

static void op_observe_bad_weight(fz_ctx *c) {
    fz_op = "observe, bad weight";
    const size_t kept = c->ref.kept;
    /* An empty instance takes no weights: one is then a length error. */
    const size_t len = kept > 0u ? kept : 1u;
    fill_attn(c, len);
    const size_t at = fz_rd_u8(&c->rd) % len;
    c->attn[at] = fz_bad_weight(&c->rd);
    if (fz_rd_u8(&c->rd) % 4u == 0u) c->attn[len - 1u] = fz_bad_weight(&c->rd);
    fz_observe(c, next_pos(c), c->attn, len);
}

static void op_observe_near_max(fz_ctx *c) {
    fz_op = "observe, position near UINT32_MAX";
    const uint32_t pos = UINT32_MAX - fz_rd_u8(&c->rd) % 3u;
    fill_attn(c, c->ref.kept);
    fz_observe(c, pos, c->attn, c->ref.kept);
}

uint32_t fz_pick_budget(fz_ctx *c) {
    const uint32_t kept = (uint32_t)c->ref.kept;
    switch (fz_rd_u8(&c->rd) % 8u) {
    case 0: return 0u;
    case 1: return UINT32_MAX;
    case 2: return c->effective;
    case 3: return c->effective - 1u;
    case 4: return kept - 1u;
    case 5: return fz_rd_u8(&c->rd);
    case 6: return c->ref.params.recent_window;
    default: return fz_rd_u32(&c->rd);
    }
}

/* Invariants of a successful evict that need no model: victims strictly
 * ascending, each held before, none among the newest min(recent_window,
 * held) positions, none a sink (below `sinks`), none unobserved (last
 * scorer), and exactly as many as the share asks for or as may go. */
static void check_victims(const fz_ctx *c, uint32_t budget, size_t kept_before,
                          const uint32_t *victims, size_t n) {
    const uint32_t *before = c->pos_before;
    const size_t window = c->ref.params.recent_window;
    const size_t recent = window < kept_before ? window : kept_before;
    const size_t target = budget < c->effective ? budget : c->effective;
    const int last = c->ref.scorer == (uint32_t)PB_SCORER_LAST;
    size_t evictable = 0;
    for (size_t i = 0; i < kept_before - recent; ++i)
        if (before[i] >= c->ref.sinks && (!last || c->observed_before[i]))
            evictable += 1u;
    size_t expected = 0;
    if (kept_before > target) {
        expected = kept_before - target;
        if (expected > evictable) expected = evictable;
    }
    FZ_CHECK(n == expected);
    FZ_CHECK(c->ref.kept == kept_before - n);
    for (size_t i = 0; i < n; ++i) {
        if (i > 0u) FZ_CHECK(victims[i - 1] < victims[i]);
        size_t lo = 0, hi = kept_before;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2u;
            if (before[mid] < victims[i]) lo = mid + 1u;
            else hi = mid;
        }
        FZ_CHECK(lo < kept_before && before[lo] == victims[i]);
        FZ_CHECK(lo < kept_before - recent);
        FZ_CHECK(victims[i] >= c->ref.sinks);
        FZ_CHECK(!last || c->observed_before[lo]);
    }
}

static void op_evict(fz_ctx *c) {
    fz_op = "evict";
    c->full_check = 1;
    const uint32_t budget = fz_pick_budget(c);
    const size_t kept_before = c->ref.kept;
    memcpy(c->pos_before, c->ref.pos, kept_before * sizeof *c->pos_before);
    memcpy(c->observed_before, c->ref.observed, kept_before);

    /* How many the model would drop, from a call that changes nothing. */
    size_t needed = 0;
    if (ref_evict(&c->ref, budget, NULL, 0, &needed) == PB_OK) needed = 0;

    for (size_t i = 0; i < c->buf_len; ++i) c->vic_e[i] = FZ_SENTINEL;
    uint32_t *victims = c->vic_e;
    size_t cap = c->buf_len;
    const uint8_t mode = fz_rd_u8(&c->rd) % 8u;
    if (mode == 0u) {
        victims = NULL;
        cap = 0;
    } else if (mode == 1u) {
        cap = needed > 0u ? needed - 1u : 0u;
    } else if (mode == 2u) {
        cap = needed;
    } else if (mode == 3u) {
        fz_op = "evict, NULL arguments";
        size_t n = 7;
        if (c->vt != NULL) {
            FZ_CHECK(c->vt->evict(NULL, budget, c->vic_e, cap) == 0u);
            return;
        }
        FZ_CHECK(pb_kvcache_evict(NULL, budget, c->vic_e, cap, &n) ==
                 PB_ERR_NULL);
        FZ_CHECK(pb_kvcache_evict(c->pol, budget, c->vic_e, cap, NULL) ==
                 PB_ERR_NULL);
        FZ_CHECK(pb_kvcache_evict(c->pol, budget, NULL, 1u + needed, &n) ==
                 PB_ERR_NULL);
        return;
    }

    if (fz_trace())
        fprintf(stderr, "step %zu: evict budget %u cap %zu%s held %zu\n",
                fz_step, (unsigned)budget, cap, victims ? "" : " (NULL)",
                c->ref.kept);
    /* TOVA's vtable refuses a buffer below held - budget before it spares
     * the unobserved positions; the model is then not asked. */
    if (c->tova && kept_before > budget && cap < kept_before - budget) {
        FZ_CHECK(c->vt->evict(c->pol, budget, victims, cap) == 0u);
        for (size_t i = 0; i < c->buf_len; ++i)
            FZ_CHECK(c->vic_e[i] == FZ_SENTINEL);
        return;
    }
    size_t n_r = 0;
    const pb_status sr = ref_evict(&c->ref, budget, c->vic_r, cap, &n_r);
    size_t n_e;
    if (n_r > 0u) c->fresh = 0;
    if (c->vt == NULL) {
        n_e = SIZE_MAX;
        const pb_status se = pb_kvcache_evict(c->pol, budget, victims, cap,
                                              &n_e);
        FZ_CHECK_EQ(se, sr);
        FZ_CHECK_EQ(n_e, n_r);
        if (se == PB_ERR_BUFFER) FZ_CHECK(n_e == needed && cap < needed);
    } else {
        n_e = c->vt->evict(c->pol, budget, victims, cap);
        FZ_CHECK(n_e == (sr == PB_OK ? n_r : 0u));
    }
    if (sr != PB_OK) return;
    FZ_CHECK(n_e == needed);
    FZ_CHECK(n_e == 0u || memcmp(victims, c->vic_r, n_e * sizeof *victims) == 0);
    /* Nothing is written past the victims. */
    for (size_t i = n_e; i < cap; ++i) FZ_CHECK(c->vic_e[i] == FZ_SENTINEL);
    check_victims(c, budget, kept_before, c->vic_r, n_r);
}

static void op_reset(fz_ctx *c) {
    fz_op = "reset";
    c->full_check = 1;
    FZ_CHECK(pb_kvcache_reset(c->pol) == PB_OK);
    ref_reset(&c->ref);
    c->fresh = 1;
}

static void run_program(fz_ctx *c) {
    for (fz_step = 1; fz_step <= FZ_MAX_STEPS && c->rd.n > 0u &&
                      c->work < FZ_MAX_WORK;
         ++fz_step) {
        switch (fz_rd_u8(&c->rd) % 16u) {
        case 0: case 1: case 2: case 3: case 4: op_observe(c); break;
        case 5: op_observe_null_attn(c); break;
        case 6: op_observe_bad_length(c); break;
        case 7: op_observe_bad_position(c); break;
        case 8: op_observe_bad_weight(c); break;
        case 9: op_observe_near_max(c); break;
        case 10: case 11: case 12: op_evict(c); break;
        case 13: {
            const uint8_t r = fz_rd_u8(&c->rd) % 4u;
            if (r == 0u) op_reset(c);
            else if (r == 1u && c->surface == FZ_SURFACE_PREFILL)
                fz_op_prefill(c);
            else op_observe(c);
            break;
        }
        default: fz_op_query(c); break;
        }
        if (c->model_lost) break;
        check_state(c);
    }
}

int fz_run_policy_program(const uint8_t *data, size_t size,
                          fz_surface surface) {
    fz_ctx c;
    memset(&c, 0, sizeof c);
    c.rd.p = data;
    c.rd.n = size;
    c.surface = surface;
    fz_step = 0;

    const int made = surface == FZ_SURFACE_COMPAT    ? fz_create_compat(&c)
                     : surface == FZ_SURFACE_SCORERS ? fz_create_scorers(&c)
                     : surface == FZ_SURFACE_FAMILY  ? fz_create_family(&c)
                                                     : fz_create_native(&c);
    if (!made) return 0;
    c.calls_at_create = c.ca.alloc_calls;
    c.capacity = pb_kvcache_capacity(c.pol);
    c.effective = pb_kvcache_effective_budget(c.pol);
    FZ_CHECK(c.capacity == c.ref.capacity);
    FZ_CHECK(c.effective == c.ref.effective);

    /* Held counts never exceed 1 + the number of observe calls (below the
     * input size) + the longest prefill prompt: buffers need not be
     * capacity long. */
    c.buf_len = (c.capacity < size + FZ_PREFILL_MAX_LEN
                     ? c.capacity
                     : size + FZ_PREFILL_MAX_LEN) +
                2u;
    /* The model writes a whole prompt's victims whatever the capacity. */
    const size_t alloc_len = c.buf_len > FZ_PREFILL_MAX_LEN
                                 ? c.buf_len
                                 : FZ_PREFILL_MAX_LEN;
    c.alloc_len = alloc_len;
    c.pos_e = malloc(alloc_len * sizeof *c.pos_e);
    c.pos_before = malloc(alloc_len * sizeof *c.pos_before);
    c.vic_e = malloc(alloc_len * sizeof *c.vic_e);
    c.vic_r = malloc(alloc_len * sizeof *c.vic_r);
    c.attn = malloc(alloc_len * sizeof *c.attn);
    c.observed_before = malloc(alloc_len);
    FZ_CHECK(c.pos_e && c.pos_before && c.vic_e && c.vic_r && c.attn &&
             c.observed_before);

    c.fresh = 1;
    c.full_check = 1;
    if (fz_trace()) {
        const pb_kvcache_pyramidkv_params *q = &c.ref.params;
        fprintf(stderr,
                "create: budget %u layer %u/%u ratio %u recent %u obs %u "
                "pool_kernel %u; capacity %zu pool %u scope %u "
                "prefill_max_len %u; effective %u\n",
                (unsigned)q->budget, (unsigned)q->layer,
                (unsigned)q->num_layers, (unsigned)q->pyramid_ratio,
                (unsigned)q->recent_window, (unsigned)q->obs_window,
                (unsigned)q->pool_kernel, c.capacity, (unsigned)c.options.pool,
                (unsigned)c.options.prefill_scope,
                (unsigned)c.options.prefill_max_len, (unsigned)c.effective);
    }
    check_state(&c);
    if (surface == FZ_SURFACE_PREFILL) {
        fz_step = 0;
        fz_op_prefill(&c);
        if (!c.model_lost) check_state(&c);
    }
    if (!c.model_lost) run_program(&c);

    fz_op = "destroy";
    if (c.vt != NULL) c.vt->destroy(c.pol);
    else pb_kvcache_destroy(c.pol);
    if (c.counted) {
        FZ_CHECK(c.ca.alloc_calls == c.calls_at_create);
        fz_check_nothing_left(&c, 1);
    }
    ref_destroy(&c.ref);
    free(c.pos_e);
    free(c.pos_before);
    free(c.vic_e);
    free(c.vic_r);
    free(c.attn);
    free(c.observed_before);
    return 0;
}

