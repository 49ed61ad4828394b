/*
 * fuzz_policy_driver.c - bytes to a program of policy calls, run on the
 * library and on tests/reference_model side by side (see the header).
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
#include "fuzz_policy_driver.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "counting_allocator.h"
#include "prefill_reference.h"
#include "pyramidkv/pyramidkv.h"
#include "reference_model.h"

#define FZ_MEM_LIMIT ((size_t)1 << 20)
#define FZ_MAX_STEPS 1024u
#define FZ_MAX_WORK ((uint64_t)1 << 22)
#define FZ_SENTINEL 0xA5A5A5A5u
#define FZ_PREFILL_MAX_LEN 48u
/* tests/prefill/prefill_reference.c pools by visiting every kernel slot,
 * so it cannot follow a reference-scope prefill with a kernel of billions
 * (the library's pooling is O(len) whatever the kernel). */
#define FZ_MODEL_MAX_KERNEL 4097u

/* ------------------------------------------------------------------------ */
/* Failure reporting                                                        */

/* What the program was doing, for the message of a finding. The fuzzers are
 * single-threaded, so file-scope state is fine here. */
static const char *fz_op = "create";
static size_t fz_step;

static void fz_fail(int line, const char *what) {
    fprintf(stderr, "FUZZ FINDING: %s:%d: step %zu (%s): check failed: %s\n",
            __FILE__, line, fz_step, fz_op, what);
    fflush(stderr);
    abort();
}

#define FZ_CHECK(cond)                         \
    do {                                       \
        if (!(cond)) fz_fail(__LINE__, #cond); \
    } while (0)

/* An equality whose two sides are worth printing (statuses, counts). */
static void fz_fail_eq(int line, const char *what, unsigned long long a,
                       unsigned long long b) {
    fprintf(stderr, "FUZZ FINDING: %s:%d: step %zu (%s): %s: %llu != %llu\n",
            __FILE__, line, fz_step, fz_op, what, a, b);
    fflush(stderr);
    abort();
}

#define FZ_CHECK_EQ(a, b)                                             \
    do {                                                              \
        const unsigned long long a_ = (unsigned long long)(a);        \
        const unsigned long long b_ = (unsigned long long)(b);        \
        if (a_ != b_) fz_fail_eq(__LINE__, #a " == " #b, a_, b_);     \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Reading the input                                                        */

typedef struct fz_reader {
    const uint8_t *p;
    size_t n;
} fz_reader;

static uint8_t rd_u8(fz_reader *r) {
    if (r->n == 0u) return 0u;
    r->n -= 1u;
    return *r->p++;
}

static uint32_t rd_u16(fz_reader *r) {
    const uint32_t lo = rd_u8(r);
    return lo | (uint32_t)rd_u8(r) << 8;
}

static uint32_t rd_u32(fz_reader *r) {
    const uint32_t lo = rd_u16(r);
    return lo | rd_u16(r) << 16;
}

/* A value for a parameter that may be anything: mostly the boundaries. */
static uint32_t wild_u32(fz_reader *r) {
    switch (rd_u8(r) % 10u) {
    case 0: return 0u;
    case 1: return 1u;
    case 2: return 2u;
    case 3: return UINT32_MAX;
    case 4: return UINT32_MAX - 1u;
    case 5: return UINT32_MAX / 2u + rd_u8(r) % 3u;
    case 6: return rd_u8(r);
    case 7: return rd_u16(r);
    case 8: return (uint32_t)1 << (rd_u8(r) % 32u);
    default: return rd_u32(r);
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
static float good_weight(fz_reader *r) {
    static const float palette[] = {
        0.0f,   -0.0f,  1.0f,        1.0f,          0.5f,   0.25f,
        0.125f, 2.0f,   0.1f,        1.0f / 3.0f,   1e-3f,  FLT_TRUE_MIN,
        1e-40f, FLT_MIN, FLT_EPSILON, 1e30f,        FLT_MAX, 3.0e38f,
        0.5f,   0.0f,
    };
    const uint8_t k = rd_u8(r);
    if (k == 255u) return from_bits(rd_u32(r));
    return palette[k % (sizeof palette / sizeof palette[0])];
}

/* A weight the library must refuse: NaNs (quiet, signalling, negative),
 * infinities, negatives including the smallest negative denormal. */
static float bad_weight(fz_reader *r) {
    static const uint32_t bits[] = {
        0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu, 0x7f800000u,
        0xff800000u, 0xbf800000u, 0x80000001u, 0xff7fffffu, 0x80800000u,
    };
    return from_bits(bits[rd_u8(r) % (sizeof bits / sizeof bits[0])]);
}

/* Sane parameters: inside every range, small. Each field is replaced by a
 * wild value when its bit in `wild` is set. */
static void gen_params(fz_reader *r, pb_kvcache_pyramidkv_params *p) {
    const uint8_t wild = rd_u8(r) % 4u == 0u ? rd_u8(r) : 0u;
    p->num_layers = 1u + rd_u8(r) % 8u;
    p->layer = rd_u8(r) % p->num_layers;
    p->pyramid_ratio = 1u + rd_u8(r) % 8u;
    p->budget = 1u + rd_u8(r) % 48u;
    p->recent_window = rd_u8(r) % (p->budget < 12u ? p->budget : 12u);
    p->obs_window = 1u + rd_u8(r) % 6u;
    /* Mostly small kernels; sometimes one of 33 .. 63, whose pooling takes
     * the library's monotonic-queue path once more than 17 are held. */
    p->pool_kernel = rd_u8(r) % 8u == 0u ? 33u + 2u * (rd_u8(r) % 16u)
                                         : 1u + 2u * (rd_u8(r) % 4u);
    if (wild & 0x01u) p->budget = wild_u32(r);
    if (wild & 0x02u) p->layer = wild_u32(r);
    if (wild & 0x04u) p->num_layers = wild_u32(r);
    if (wild & 0x08u) p->pyramid_ratio = wild_u32(r);
    if (wild & 0x10u) p->recent_window = wild_u32(r);
    if (wild & 0x20u) p->obs_window = wild_u32(r);
    if (wild & 0x40u) p->pool_kernel = wild_u32(r);
}

static void gen_options(fz_reader *r, pb_kvcache_options *o,
                        uint32_t recent_window) {
    const uint8_t wild = rd_u8(r) % 4u == 0u ? rd_u8(r) : 0u;
    o->capacity = rd_u8(r) % 2u == 0u
                      ? 0u
                      : recent_window + 2u + rd_u8(r) % 40u;
    o->pool = rd_u8(r) % 2u;
    o->prefill_scope = rd_u8(r) % 2u;
    o->prefill_max_len = rd_u8(r) % 4u == 0u ? rd_u8(r) : 0u;
    if (wild & 0x01u) o->capacity = wild_u32(r);
    if (wild & 0x02u) o->pool = wild_u32(r);
    if (wild & 0x04u) o->prefill_scope = wild_u32(r);
    if (wild & 0x08u) o->prefill_max_len = wild_u32(r);
}

/* ------------------------------------------------------------------------ */
/* The run                                                                  */

typedef struct fz_ctx {
    fz_reader rd;
    fz_surface surface;
    const pb_kvcache_vtable *vt; /* the compatible or family vtable */
    int tova;        /* vt is pb_kvcache_tova: its own capacity check */
    pb_kvcache *pol;
    pb_kvcache_options options; /* as resolved at create */
    int fresh; /* no observe, evict or prefill since create or reset */
    int full_check; /* compare every window score at the next check */
    int model_lost; /* the model cannot follow: the program ends */
    ref_policy ref;
    counting_allocator ca;
    int counted;            /* pol was allocated through ca */
    size_t calls_at_create; /* ca.alloc_calls right after create */
    size_t mem;             /* memory_bytes, fixed at create */
    size_t capacity;
    uint32_t effective;
    size_t buf_len; /* entries in each buffer below; > any held count + 1 */
    size_t alloc_len; /* their real length: also >= any prefill prompt */
    uint32_t *pos_e, *pos_before, *vic_e, *vic_r;
    unsigned char *observed_before; /* last scorer: the model's flags */
    float *attn;
    uint64_t work;
} fz_ctx;

/* The newest held position. An instance can be empty: evict with budget 0
 * and recent_window 0 drops everything. Then 0 is returned, which the
 * callers treat like any held position (0 itself is still admissible). */
static uint32_t last_pos(const fz_ctx *c) {
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
    const uint8_t mode = rd_u8(&c->rd) % 4u;
    const float same = good_weight(&c->rd);
    for (size_t i = 0; i < len; ++i) {
        switch (mode) {
        case 0: c->attn[i] = same; break;
        case 1: c->attn[i] = good_weight(&c->rd); break;
        case 2: c->attn[i] = (float)(rd_u8(&c->rd) % 4u) * 0.25f; break;
        default: c->attn[i] = (float)(i % 64u); break;
        }
    }
}

/* PB_FUZZ_TRACE=1 in the environment prints every observe and evict, to
 * turn a finding into a minimal reproducer by hand. */
static int fz_trace(void) {
    static int trace = -1;
    if (trace < 0) trace = getenv("PB_FUZZ_TRACE") != NULL;
    return trace;
}

static void observe(fz_ctx *c, uint32_t pos, const float *attn, size_t len) {
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
    if (c->ref.kept == 0u) return rd_u8(&c->rd);
    const uint32_t last = last_pos(c);
    if (last == UINT32_MAX) return last;
    uint32_t step = 1u;
    if (rd_u8(&c->rd) % 4u == 0u) step += rd_u8(&c->rd);
    return UINT32_MAX - last < step ? UINT32_MAX : last + step;
}

static void op_observe(fz_ctx *c) {
    fz_op = "observe";
    const uint32_t pos = next_pos(c);
    fill_attn(c, c->ref.kept);
    observe(c, pos, c->attn, c->ref.kept);
}

static void op_observe_null_attn(fz_ctx *c) {
    fz_op = "observe, attn NULL";
    /* attn_len is ignored with attn NULL, whatever it is. */
    const size_t len = rd_u8(&c->rd) % 2u ? SIZE_MAX : c->ref.kept + 1u;
    observe(c, next_pos(c), NULL, len);
}

static void op_observe_bad_length(fz_ctx *c) {
    fz_op = "observe, length off";
    const size_t kept = c->ref.kept;
    size_t len;
    switch (rd_u8(&c->rd) % 4u) {
    case 0: len = kept - 1u; break;
    case 1: len = kept + 1u; break;
    case 2: len = 0u; break;
    default: len = SIZE_MAX; break;
    }
    /* The buffer holds kept + 1 weights: a library that reads past
     * attn_len, or reads at all before checking it, is caught by ASan. */
    fill_attn(c, kept + 1u);
    observe(c, next_pos(c), c->attn, len);
}

static void op_observe_bad_position(fz_ctx *c) {
    fz_op = "observe, position not increasing";
    const uint32_t last = last_pos(c);
    uint32_t pos;
    switch (rd_u8(&c->rd) % 4u) {
    case 0: pos = last; break;
    case 1: pos = last > 0u ? last - 1u : 0u; break;
    case 2: pos = 0u; break;
    default: pos = rd_u32(&c->rd) % (last + (last < UINT32_MAX)); break;
    }
    /* Sometimes also a wrong length or a bad weight: the position error
     * must still win. */
    const uint8_t also = rd_u8(&c->rd) % 3u;
    const size_t len = also == 1u ? c->ref.kept + 1u : c->ref.kept;
    fill_attn(c, c->ref.kept + 1u);
    if (also == 2u) c->attn[0] = bad_weight(&c->rd);
    observe(c, pos, c->attn, len);
}

static void op_observe_bad_weight(fz_ctx *c) {
    fz_op = "observe, bad weight";
    const size_t kept = c->ref.kept;
    /* An empty instance takes no weights: one is then a length error. */
    const size_t len = kept > 0u ? kept : 1u;
    fill_attn(c, len);
    const size_t at = rd_u8(&c->rd) % len;
    c->attn[at] = bad_weight(&c->rd);
    if (rd_u8(&c->rd) % 4u == 0u) c->attn[len - 1u] = bad_weight(&c->rd);
    observe(c, next_pos(c), c->attn, len);
}

static void op_observe_near_max(fz_ctx *c) {
    fz_op = "observe, position near UINT32_MAX";
    const uint32_t pos = UINT32_MAX - rd_u8(&c->rd) % 3u;
    fill_attn(c, c->ref.kept);
    observe(c, pos, c->attn, c->ref.kept);
}

static uint32_t pick_budget(fz_ctx *c) {
    const uint32_t kept = (uint32_t)c->ref.kept;
    switch (rd_u8(&c->rd) % 8u) {
    case 0: return 0u;
    case 1: return UINT32_MAX;
    case 2: return c->effective;
    case 3: return c->effective - 1u;
    case 4: return kept - 1u;
    case 5: return rd_u8(&c->rd);
    case 6: return c->ref.params.recent_window;
    default: return rd_u32(&c->rd);
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
    const uint32_t budget = pick_budget(c);
    const size_t kept_before = c->ref.kept;
    memcpy(c->pos_before, c->ref.pos, kept_before * sizeof *c->pos_before);
    memcpy(c->observed_before, c->ref.observed, kept_before);

    /* How many the model would drop, from a call that changes nothing. */
    size_t needed = 0;
    if (ref_evict(&c->ref, budget, NULL, 0, &needed) == PB_OK) needed = 0;

    for (size_t i = 0; i < c->buf_len; ++i) c->vic_e[i] = FZ_SENTINEL;
    uint32_t *victims = c->vic_e;
    size_t cap = c->buf_len;
    const uint8_t mode = rd_u8(&c->rd) % 8u;
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
    const uint32_t budget = wild_u32(&c->rd);
    const uint32_t layers = rd_u8(&c->rd) % 65u;
    const uint32_t ratio = wild_u32(&c->rd);
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
    const size_t heads = rd_u8(&c->rd) % 5u;
    const size_t n = rd_u8(&c->rd) % 9u;
    /* n - 1 (refused with several heads) .. n + 3. */
    const size_t delta = rd_u8(&c->rd) % 5u;
    const size_t stride = n + delta > 0u ? n + delta - 1u : 0u;
    const uint32_t mode = rd_u8(&c->rd) % 4u;
    const int in_place = rd_u8(&c->rd) % 4u == 0u;
    for (size_t i = 0; i < 64u; ++i) in[i] = NAN; /* gaps: never inputs */
    int bad = 0;
    for (size_t h = 0; h < heads; ++h)
        for (size_t i = 0; i < n; ++i) {
            float v = good_weight(&c->rd);
            if (rd_u8(&c->rd) % 32u == 0u) v = bad_weight(&c->rd);
            if (!(v >= 0.0f && v <= FLT_MAX)) bad = 1;
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

static void op_query(fz_ctx *c) {
    fz_op = "introspection";
    const size_t kept = c->ref.kept;
    size_t n = SIZE_MAX;
    double s = -1.0;
    switch (rd_u8(&c->rd) % 8u) {
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
        switch (rd_u8(&c->rd) % 4u) {
        case 0: q = last_pos(c) + 1u; break; /* wraps to 0 at UINT32_MAX */
        case 1:
            q = kept > 0u ? c->ref.pos[rd_u8(&c->rd) % kept] + 1u : 0u;
            break;
        case 2: q = UINT32_MAX; break;
        default: q = rd_u32(&c->rd); break;
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
        FZ_CHECK(pb_kvcache_window_score(c->pol, last_pos(c), NULL) ==
                 PB_ERR_NULL);
        break;
    case 5: null_instance_calls(c); break;
    case 6:
        if (rd_u8(&c->rd) % 2u) budget_functions(c);
        else head_reduce(c);
        break;
    default:
        if (c->vt != NULL) FZ_CHECK(c->vt->memory_bytes(c->pol) == c->mem);
        FZ_CHECK(pb_kvcache_pyramidkv.memory_bytes(c->pol) == c->mem);
        break;
    }
}

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

static void op_prefill(fz_ctx *c) {
    fz_op = "prefill";
    c->full_check = 1;
    /* After observe(NULL) and an evict that drops that position again the
     * documented freshness is open to reading; such states are skipped. */
    if (!c->fresh && c->ref.kept == 1u && c->ref.pos[0] == 0u) return;
    const size_t window = c->ref.params.recent_window;
    const int reference = c->options.prefill_scope == PB_PREFILL_REFERENCE;
    const size_t len = rd_u8(&c->rd) % (FZ_PREFILL_MAX_LEN + 1u);
    size_t rows;
    switch (rd_u8(&c->rd) % 8u) {
    case 0: rows = 0u; break;
    case 1: rows = len + 1u; break;
    case 2: case 3: rows = window; break;
    default: rows = len > 0u ? 1u + rd_u8(&c->rd) % len : 1u; break;
    }
    const uint32_t budget = pick_budget(c);
    /* A prompt above UINT32_MAX positions must be refused unread. */
    const int huge = rd_u8(&c->rd) % 32u == 0u;
    const size_t call_len = huge ? (size_t)UINT32_MAX + 1u : len;

    const size_t cells = rows <= len + 1u ? rows * len : 0u;
    float *attn = malloc((cells > 0u ? cells : 1u) * sizeof *attn);
    FZ_CHECK(attn != NULL);
    const uint8_t fill = rd_u8(&c->rd) % 4u;
    for (size_t i = 0; i < cells; ++i) {
        switch (fill) {
        case 0: attn[i] = 0.25f; break;
        case 1: attn[i] = good_weight(&c->rd); break;
        case 2: attn[i] = (float)(rd_u8(&c->rd) % 4u) * 0.25f; break;
        default: attn[i] = (float)((i * 7u) % 11u); break;
        }
    }
    int bad = 0;
    for (size_t i = 0; i < cells; ++i)
        if (!(attn[i] >= 0.0f && attn[i] <= FLT_MAX)) bad = 1;
    if (cells > 0u && rd_u8(&c->rd) % 8u == 0u) {
        attn[rd_u8(&c->rd) % cells] = bad_weight(&c->rd);
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
    switch (rd_u8(&c->rd) % 6u) {
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
    switch (rd_u8(&c->rd) % 5u) {
    case 0: kept = NULL; kept_cap = 0u; break;
    case 1: kept_cap = count; break;
    case 2: kept_cap = count > 0u ? count - 1u : 0u; break;
    default: break;
    }
    switch (rd_u8(&c->rd) % 5u) {
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
     * robustness.md finding 2): no tolerance here. */
    const uint8_t null_arg = rd_u8(&c->rd) % 16u;
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

static void run_program(fz_ctx *c) {
    for (fz_step = 1; fz_step <= FZ_MAX_STEPS && c->rd.n > 0u &&
                      c->work < FZ_MAX_WORK;
         ++fz_step) {
        switch (rd_u8(&c->rd) % 16u) {
        case 0: case 1: case 2: case 3: case 4: op_observe(c); break;
        case 5: op_observe_null_attn(c); break;
        case 6: op_observe_bad_length(c); break;
        case 7: op_observe_bad_position(c); break;
        case 8: op_observe_bad_weight(c); break;
        case 9: op_observe_near_max(c); break;
        case 10: case 11: case 12: op_evict(c); break;
        case 13: {
            const uint8_t r = rd_u8(&c->rd) % 4u;
            if (r == 0u) op_reset(c);
            else if (r == 1u && c->surface == FZ_SURFACE_PREFILL) op_prefill(c);
            else op_observe(c);
            break;
        }
        default: op_query(c); break;
        }
        if (c->model_lost) break;
        check_state(c);
    }
}

/* ------------------------------------------------------------------------ */
/* Create and destroy                                                       */

static void *refuse_alloc(void *ctx, size_t n) {
    (void)ctx;
    (void)n;
    return NULL;
}

static void refuse_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
}

/* Which allocator create gets: 0 NULL (malloc), 1 one lacking a function,
 * 2 the counting one. The pb_allocator itself lives in the caller's frame
 * and dies when create returns: the instance must keep a copy. */
typedef struct fz_alloc_choice {
    int kind;
    pb_allocator a;
} fz_alloc_choice;

static const pb_allocator *choose_allocator(fz_ctx *c, uint8_t flags,
                                            int small, fz_alloc_choice *ch) {
    ca_init(&c->ca);
    c->ca.limit_bytes = FZ_MEM_LIMIT;
    if (flags & 0x20u) c->ca.fail_at = 1u + rd_u8(&c->rd) % 3u;
    ch->kind = 2;
    ch->a = ca_allocator(&c->ca);
    switch ((flags >> 3) & 3u) {
    case 0:
        /* malloc/free only when the instance is known to be small. */
        if (small) ch->kind = 0;
        break;
    case 1:
        ch->kind = 1;
        ch->a.ctx = NULL;
        ch->a.alloc = flags & 0x40u ? refuse_alloc : NULL;
        ch->a.free = flags & 0x40u ? NULL : refuse_free;
        break;
    default: break;
    }
    return ch->kind == 0 ? NULL : &ch->a;
}

/* The model refuses, as too large for a test, observation windows above
 * 4096 steps that the library accepts; such inputs end after create. */
static int model_refuses_size(const pb_kvcache_pyramidkv_params *p) {
    return p != NULL && p->obs_window > 4096u;
}

/* After a refused create: nothing allocated, nothing leaked. */
static void check_nothing_left(const fz_ctx *c, int counted) {
    if (!counted) return;
    FZ_CHECK(c->ca.outstanding == 0u);
    FZ_CHECK(c->ca.live_blocks == 0u);
    FZ_CHECK(c->ca.bad_frees == 0u);
}

/* Returns 1 with c->pol and c->ref created, 0 when the input's create was
 * (correctly) refused. */
static int create_native(fz_ctx *c) {
    fz_op = "create (native)";
    const uint8_t flags = rd_u8(&c->rd);
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    gen_params(&c->rd, &p);
    gen_options(&c->rd, &o, p.recent_window);
    const pb_kvcache_pyramidkv_params *pp = (flags & 3u) == 0u ? NULL : &p;
    const pb_kvcache_options *po = (flags & 4u) == 0u ? NULL : &o;
    const pb_kvcache_options default_options = PB_KVCACHE_OPTIONS_DEFAULT;
    c->options = po != NULL ? o : default_options;

    size_t bytes = FZ_SENTINEL;
    const pb_status ss = pb_kvcache_pyramidkv_size(pp, po, &bytes);
    if (ss != PB_OK) {
        /* The model validates before allocating, so it is safe to ask. */
        FZ_CHECK(ss == PB_ERR_PARAM || ss == PB_ERR_TOO_LARGE);
        FZ_CHECK(ref_create(&c->ref, pp, po) == ss);
    } else {
        FZ_CHECK(bytes != FZ_SENTINEL && bytes > 0u);
        if (bytes <= FZ_MEM_LIMIT) {
            size_t again = 0;
            FZ_CHECK(pb_kvcache_pyramidkv_size(pp, po, &again) == PB_OK &&
                     again == bytes);
        }
    }
    const int small = ss == PB_OK && bytes <= FZ_MEM_LIMIT;

    fz_alloc_choice ch;
    const pb_allocator *a = choose_allocator(c, flags, small, &ch);
    pb_kvcache *out = (pb_kvcache *)(void *)&c->ca; /* not NULL */

    if (ss == PB_OK && ch.kind != 1 && (flags & 0xC0u) == 0xC0u) {
        FZ_CHECK(pb_kvcache_pyramidkv_create(pp, po, a, NULL) == PB_ERR_NULL);
        FZ_CHECK(c->ca.alloc_calls == 0u);
        return 0;
    }
    const pb_status cs = pb_kvcache_pyramidkv_create(pp, po, a, &out);
    if (ss != PB_OK) {
        /* Refused params win over a bad allocator only when the allocator
         * is fine; with both wrong either PB_ERR_PARAM or the size error
         * could be first, so only "refused, nothing allocated" holds. */
        FZ_CHECK(out == NULL);
        FZ_CHECK(c->ca.alloc_calls == 0u);
        if (ch.kind != 1) FZ_CHECK(cs == ss);
        else FZ_CHECK(cs == ss || cs == PB_ERR_PARAM);
        return 0;
    }
    if (ch.kind == 1) {
        FZ_CHECK(cs == PB_ERR_PARAM && out == NULL);
        return 0;
    }
    if (cs == PB_ERR_NOMEM) {
        FZ_CHECK(out == NULL);
        FZ_CHECK(ch.kind == 2 && c->ca.alloc_failures > 0u);
        check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(cs == PB_OK && out != NULL);
    /* A create larger than the limit cannot have succeeded. */
    FZ_CHECK(small);
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) {
        FZ_CHECK(c->ca.outstanding == bytes);
        FZ_CHECK(c->ca.alloc_failures == 0u);
    }
    c->mem = bytes;
    if (model_refuses_size(pp)) {
        pb_kvcache_destroy(c->pol);
        check_nothing_left(c, c->counted);
        return 0;
    }
    FZ_CHECK(ref_create(&c->ref, pp, po) == PB_OK);
    return 1;
}

static int create_compat(fz_ctx *c) {
    fz_op = "create (vtable)";
    const uint8_t flags = rd_u8(&c->rd);
    const int snap = (flags & 1u) != 0u;
    c->vt = snap ? &pb_kvcache_snapkv : &pb_kvcache_pyramidkv;
    pb_kvcache_pyramidkv_params p;
    gen_params(&c->rd, &p);
    pb_kvcache_snapkv_params sp = {p.budget, p.recent_window, p.obs_window,
                                   p.pool_kernel};
    const int defaults = (flags & 6u) == 0u;
    if (defaults) {
        const pb_kvcache_pyramidkv_params dp =
            PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
        const pb_kvcache_snapkv_params dsp = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
        p = dp;
        sp = dsp;
    }
    /* What the model is given: SnapKV is PyramidKV with one layer. */
    pb_kvcache_pyramidkv_params m = p;
    if (snap) {
        m.budget = sp.budget;
        m.layer = 0u;
        m.num_layers = 1u;
        m.pyramid_ratio = 1u;
        m.recent_window = sp.recent_window;
        m.obs_window = sp.obs_window;
        m.pool_kernel = sp.pool_kernel;
    }
    const void *params = defaults ? NULL : snap ? (const void *)&sp
                                                : (const void *)&p;

    size_t bytes = FZ_SENTINEL;
    const pb_status ss = pb_kvcache_pyramidkv_size(&m, NULL, &bytes);
    if (ss != PB_OK) FZ_CHECK(ref_create(&c->ref, &m, NULL) == ss);
    const int small = ss == PB_OK && bytes <= FZ_MEM_LIMIT;

    fz_alloc_choice ch;
    const pb_allocator *a = choose_allocator(c, flags, small, &ch);
    /* The rng is never read; any pointer must do. */
    pb_rng *rng = (flags & 0x80u) ? (pb_rng *)(void *)&c->ca : NULL;
    pb_kvcache *out = c->vt->create(params, a, rng);
    if (ss != PB_OK || ch.kind == 1) {
        FZ_CHECK(out == NULL);
        check_nothing_left(c, ch.kind == 2);
        return 0;
    }
    if (out == NULL) {
        FZ_CHECK(ch.kind == 2 && c->ca.alloc_failures > 0u);
        check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(small);
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) FZ_CHECK(c->ca.outstanding == bytes);
    c->mem = bytes;
    FZ_CHECK(c->vt->memory_bytes(out) == bytes);
    if (model_refuses_size(&m)) {
        c->vt->destroy(c->pol);
        check_nothing_left(c, c->counted);
        return 0;
    }
    FZ_CHECK(ref_create(&c->ref, &m, NULL) == PB_OK);
    return 1;
}

/* The pb_kvcache_config of a scorers program: the params and options of a
 * native one, then the scorer, the sinks and the share, each sane (in
 * range, small) or now and then wild. */
static void gen_config(fz_reader *r, const pb_kvcache_pyramidkv_params *p,
                       const pb_kvcache_options *o, pb_kvcache_config *out) {
    pb_kvcache_config k = PB_KVCACHE_CONFIG_DEFAULT;
    k.budget = p->budget;
    k.layer = p->layer;
    k.num_layers = p->num_layers;
    k.pyramid_ratio = p->pyramid_ratio;
    k.recent_window = p->recent_window;
    k.obs_window = p->obs_window;
    k.pool_kernel = p->pool_kernel;
    k.pool = o->pool;
    k.capacity = o->capacity;
    k.prefill_scope = o->prefill_scope;
    k.prefill_max_len = 0u;
    const uint8_t wild = rd_u8(r) % 4u == 0u ? rd_u8(r) : 0u;
    k.scorer = rd_u8(r) % 5u;
    k.sinks = rd_u8(r) % 3u == 0u ? 0u : rd_u8(r) % 10u;
    k.share = rd_u8(r) % 2u == 0u ? 0u : 1u + rd_u8(r) % 96u;
    if (wild & 0x01u) k.scorer = wild_u32(r);
    if (wild & 0x02u) k.sinks = wild_u32(r);
    if (wild & 0x04u) k.share = wild_u32(r);
    if (wild & 0x08u) k.prefill_max_len = wild_u32(r);
    k.row_stores = (uint32_t)((wild >> 4) & 1u); /* changes no value */
    if (wild & 0x20u) k.row_stores = wild_u32(r);
    *out = k;
}

/* The model refuses obs_window above 4096 (too large for a test); such
 * inputs end after create. */
static int model_refuses_config(const pb_kvcache_config *k) {
    return k->obs_window > 4096u;
}

static int create_scorers(fz_ctx *c) {
    fz_op = "create (scorers)";
    const uint8_t flags = rd_u8(&c->rd);
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    gen_params(&c->rd, &p);
    gen_options(&c->rd, &o, p.recent_window);
    pb_kvcache_config k;
    gen_config(&c->rd, &p, &o, &k);
    const pb_kvcache_config *kp = (flags & 3u) == 0u ? NULL : &k;
    if (kp == NULL) {
        const pb_kvcache_config d = PB_KVCACHE_CONFIG_DEFAULT;
        k = d;
    }
    c->options.capacity = k.capacity;
    c->options.pool = k.pool;
    c->options.prefill_scope = k.prefill_scope;
    c->options.prefill_max_len = k.prefill_max_len;

    size_t bytes = FZ_SENTINEL;
    const pb_status ss = pb_kvcache_size(kp, &bytes);
    if (ss != PB_OK) {
        FZ_CHECK(ss == PB_ERR_PARAM || ss == PB_ERR_TOO_LARGE);
        FZ_CHECK(bytes == FZ_SENTINEL);
        FZ_CHECK(ref_create_config(&c->ref, &k) == ss);
    }
    const int small = ss == PB_OK && bytes <= FZ_MEM_LIMIT;
    fz_alloc_choice ch;
    const pb_allocator *a = choose_allocator(c, flags, small, &ch);
    pb_kvcache *out = (pb_kvcache *)(void *)&c->ca; /* not NULL */
    if (ss == PB_OK && ch.kind != 1 && (flags & 0xC0u) == 0xC0u) {
        FZ_CHECK(pb_kvcache_create(kp, a, NULL) == PB_ERR_NULL);
        FZ_CHECK(c->ca.alloc_calls == 0u);
        return 0;
    }
    const pb_status cs = pb_kvcache_create(kp, a, &out);
    if (ss != PB_OK) {
        FZ_CHECK(out == NULL);
        FZ_CHECK(c->ca.alloc_calls == 0u);
        if (ch.kind != 1) FZ_CHECK(cs == ss);
        else FZ_CHECK(cs == ss || cs == PB_ERR_PARAM);
        return 0;
    }
    if (ch.kind == 1) {
        FZ_CHECK(cs == PB_ERR_PARAM && out == NULL);
        return 0;
    }
    if (cs == PB_ERR_NOMEM) {
        FZ_CHECK(out == NULL);
        FZ_CHECK(ch.kind == 2 && c->ca.alloc_failures > 0u);
        check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(cs == PB_OK && out != NULL);
    FZ_CHECK(small);
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) FZ_CHECK(c->ca.outstanding == bytes);
    c->mem = bytes;
    if (model_refuses_config(&k)) {
        pb_kvcache_destroy(c->pol);
        check_nothing_left(c, c->counted);
        return 0;
    }
    FZ_CHECK(ref_create_config(&c->ref, &k) == PB_OK);
    return 1;
}

/* One of the five family vtables, its params struct {budget, second}
 * (second: recent_window, sinks, or unread), or NULL for the defaults. The
 * model is the native config each one is declared to be. */
static int create_family(fz_ctx *c) {
    fz_op = "create (family vtable)";
    static const pb_kvcache_vtable *const family[5] = {
        &pb_kvcache_h2o, &pb_kvcache_scissorhands, &pb_kvcache_tova,
        &pb_kvcache_streaming_llm, &pb_kvcache_sliding_window};
    static const pb_scorer scorer[5] = {
        PB_SCORER_CUMULATIVE, PB_SCORER_VOTES, PB_SCORER_LAST,
        PB_SCORER_NONE, PB_SCORER_NONE};
    static const uint32_t default_second[5] = {32u, 32u, 0u, 4u, 0u};
    const uint8_t flags = rd_u8(&c->rd);
    const size_t which = rd_u8(&c->rd) % 5u;
    c->vt = family[which];
    c->tova = which == 2u;
    const uint8_t wild = rd_u8(&c->rd) % 4u == 0u ? rd_u8(&c->rd) : 0u;
    uint32_t params[2];
    params[0] = 1u + rd_u8(&c->rd) % 48u;
    params[1] = rd_u8(&c->rd) % (params[0] < 12u ? params[0] : 12u);
    if (wild & 0x01u) params[0] = wild_u32(&c->rd);
    if (wild & 0x02u) params[1] = wild_u32(&c->rd);
    const int defaults = (flags & 6u) == 0u;
    if (defaults) {
        params[0] = 512u;
        params[1] = default_second[which];
    }
    pb_kvcache_config k = PB_KVCACHE_CONFIG_DEFAULT;
    k.budget = params[0];
    k.share = UINT32_MAX;
    k.capacity = params[0] + 1u;
    k.scorer = (uint32_t)scorer[which];
    k.recent_window = which <= 1u ? params[1] : 0u;
    k.sinks = which == 3u ? params[1] : 0u;
    /* StreamingLLM refuses sinks >= budget, which the native rule
     * (sinks + recent < capacity) would take at sinks == budget. */
    const int refused_here = which == 3u && params[1] >= params[0];
    c->options.capacity = k.capacity;

    size_t bytes = FZ_SENTINEL;
    pb_status ss = pb_kvcache_size(&k, &bytes);
    if (ss != PB_OK) FZ_CHECK(ref_create_config(&c->ref, &k) == ss);
    if (refused_here) ss = PB_ERR_PARAM;
    const int small = ss == PB_OK && bytes <= FZ_MEM_LIMIT;
    fz_alloc_choice ch;
    const pb_allocator *a = choose_allocator(c, flags, small, &ch);
    pb_rng *rng = (flags & 0x80u) ? (pb_rng *)(void *)&c->ca : NULL;
    pb_kvcache *out = c->vt->create(defaults ? NULL : params, a, rng);
    if (ss != PB_OK || ch.kind == 1) {
        FZ_CHECK(out == NULL);
        check_nothing_left(c, ch.kind == 2);
        return 0;
    }
    if (out == NULL) {
        FZ_CHECK(ch.kind == 2 && c->ca.alloc_failures > 0u);
        check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(small);
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) FZ_CHECK(c->ca.outstanding == bytes);
    c->mem = bytes;
    FZ_CHECK(c->vt->memory_bytes(out) == bytes);
    FZ_CHECK(ref_create_config(&c->ref, &k) == PB_OK);
    return 1;
}

int fz_run_policy_program(const uint8_t *data, size_t size,
                          fz_surface surface) {
    fz_ctx c;
    memset(&c, 0, sizeof c);
    c.rd.p = data;
    c.rd.n = size;
    c.surface = surface;
    fz_step = 0;

    const int made = surface == FZ_SURFACE_COMPAT    ? create_compat(&c)
                     : surface == FZ_SURFACE_SCORERS ? create_scorers(&c)
                     : surface == FZ_SURFACE_FAMILY  ? create_family(&c)
                                                     : create_native(&c);
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
        op_prefill(&c);
        if (!c.model_lost) check_state(&c);
    }
    if (!c.model_lost) run_program(&c);

    fz_op = "destroy";
    if (c.vt != NULL) c.vt->destroy(c.pol);
    else pb_kvcache_destroy(c.pol);
    if (c.counted) {
        FZ_CHECK(c.ca.alloc_calls == c.calls_at_create);
        check_nothing_left(&c, 1);
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
