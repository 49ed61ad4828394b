/*
 * fuzz_policy_create.c - the creates of the policy fuzz driver
 * (fuzz_policy_driver.c): the parameters from the input, the allocator
 * each create gets, and the native, compatible, scorer and family creates
 * checked against the reference model.
 */
#include "fuzz_policy_internal.h"

/* Sane parameters: inside every range, small. Each field is replaced by a
 * wild value when its bit in `wild` is set. */
static void gen_params(fz_reader *r, pb_kvcache_pyramidkv_params *p) {
    const uint8_t wild = fz_rd_u8(r) % 4u == 0u ? fz_rd_u8(r) : 0u;
    p->num_layers = 1u + fz_rd_u8(r) % 8u;
    p->layer = fz_rd_u8(r) % p->num_layers;
    p->pyramid_ratio = 1u + fz_rd_u8(r) % 8u;
    p->budget = 1u + fz_rd_u8(r) % 48u;
    p->recent_window = fz_rd_u8(r) % (p->budget < 12u ? p->budget : 12u);
    p->obs_window = 1u + fz_rd_u8(r) % 6u;
    /* Mostly small kernels; sometimes one of 33 .. 63, whose pooling takes
     * the library's monotonic-queue path once more than 17 are held. */
    p->pool_kernel = fz_rd_u8(r) % 8u == 0u ? 33u + 2u * (fz_rd_u8(r) % 16u)
                                         : 1u + 2u * (fz_rd_u8(r) % 4u);
    if (wild & 0x01u) p->budget = fz_wild_u32(r);
    if (wild & 0x02u) p->layer = fz_wild_u32(r);
    if (wild & 0x04u) p->num_layers = fz_wild_u32(r);
    if (wild & 0x08u) p->pyramid_ratio = fz_wild_u32(r);
    if (wild & 0x10u) p->recent_window = fz_wild_u32(r);
    if (wild & 0x20u) p->obs_window = fz_wild_u32(r);
    if (wild & 0x40u) p->pool_kernel = fz_wild_u32(r);
}

static void gen_options(fz_reader *r, pb_kvcache_options *o,
                        uint32_t recent_window) {
    const uint8_t wild = fz_rd_u8(r) % 4u == 0u ? fz_rd_u8(r) : 0u;
    o->capacity = fz_rd_u8(r) % 2u == 0u
                      ? 0u
                      : recent_window + 2u + fz_rd_u8(r) % 40u;
    o->pool = fz_rd_u8(r) % 2u;
    o->prefill_scope = fz_rd_u8(r) % 2u;
    o->prefill_max_len = fz_rd_u8(r) % 4u == 0u ? fz_rd_u8(r) : 0u;
    if (wild & 0x01u) o->capacity = fz_wild_u32(r);
    if (wild & 0x02u) o->pool = fz_wild_u32(r);
    if (wild & 0x04u) o->prefill_scope = fz_wild_u32(r);
    if (wild & 0x08u) o->prefill_max_len = fz_wild_u32(r);
}

/* ------------------------------------------------------------------------ */
/* Create and destroy                                                       */

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
    if (flags & 0x20u) c->ca.fail_at = 1u + fz_rd_u8(&c->rd) % 3u;
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
        ch->a.alloc = flags & 0x40u ? ca_refuse_alloc : NULL;
        ch->a.free = flags & 0x40u ? NULL : ca_ignore_free;
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
void fz_check_nothing_left(const fz_ctx *c, int counted) {
    if (!counted) return;
    FZ_CHECK(c->ca.outstanding == 0u);
    FZ_CHECK(c->ca.live_blocks == 0u);
    FZ_CHECK(c->ca.bad_frees == 0u);
}

/* The native creates' status cs, for an input whose size query said ss,
 * with allocator ch, small when the instance fits the limit: refused as
 * the rules say (nothing allocated or left), or made. 1 when out is a new
 * instance. */
static int create_made(fz_ctx *c, pb_status ss, pb_status cs,
                       const pb_kvcache *out, const fz_alloc_choice *ch,
                       int small) {
    if (ss != PB_OK) {
        /* Refused params win over a bad allocator only when the allocator
         * is fine; with both wrong either PB_ERR_PARAM or the size error
         * could be first, so only "refused, nothing allocated" holds. */
        FZ_CHECK(out == NULL);
        FZ_CHECK(c->ca.alloc_calls == 0u);
        if (ch->kind != 1) FZ_CHECK(cs == ss);
        else FZ_CHECK(cs == ss || cs == PB_ERR_PARAM);
        return 0;
    }
    if (ch->kind == 1) {
        FZ_CHECK(cs == PB_ERR_PARAM && out == NULL);
        return 0;
    }
    if (cs == PB_ERR_NOMEM) {
        FZ_CHECK(out == NULL);
        FZ_CHECK(ch->kind == 2 && c->ca.alloc_failures > 0u);
        fz_check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(cs == PB_OK && out != NULL);
    /* A create larger than the limit cannot have succeeded. */
    FZ_CHECK(small);
    return 1;
}

/* The verdict on a vtable's create (a pointer, no status), given the
 * model's status ss and the allocator chosen: 0 when it was (correctly)
 * refused, with nothing left allocated; else 1, the instance in c->pol
 * and its memory checked against the sizing query's bytes. */
static int vtable_made(fz_ctx *c, pb_status ss, pb_kvcache *out,
                       const fz_alloc_choice *ch, int small, size_t bytes) {
    if (ss != PB_OK || ch->kind == 1) {
        FZ_CHECK(out == NULL);
        fz_check_nothing_left(c, ch->kind == 2);
        return 0;
    }
    if (out == NULL) {
        FZ_CHECK(ch->kind == 2 && c->ca.alloc_failures > 0u);
        fz_check_nothing_left(c, 1);
        return 0;
    }
    FZ_CHECK(small);
    c->pol = out;
    c->counted = ch->kind == 2;
    if (c->counted) FZ_CHECK(c->ca.outstanding == bytes);
    c->mem = bytes;
    FZ_CHECK(c->vt->memory_bytes(out) == bytes);
    return 1;
}

/* The input of a native create: a flags byte (returned), the params and
 * the options, read in that order. */
static uint8_t gen_native(fz_reader *r, pb_kvcache_pyramidkv_params *p,
                          pb_kvcache_options *o) {
    const uint8_t flags = fz_rd_u8(r);
    gen_params(r, p);
    gen_options(r, o, p->recent_window);
    return flags;
}

/* Returns 1 with c->pol and c->ref created, 0 when the input's create was
 * (correctly) refused. */
int fz_create_native(fz_ctx *c) {
    fz_op = "create (native)";
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    const uint8_t flags = gen_native(&c->rd, &p, &o);
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
    if (!create_made(c, ss, cs, out, &ch, small)) return 0;
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) {
        FZ_CHECK(c->ca.outstanding == bytes);
        FZ_CHECK(c->ca.alloc_failures == 0u);
    }
    c->mem = bytes;
    if (model_refuses_size(pp)) {
        pb_kvcache_destroy(c->pol);
        fz_check_nothing_left(c, c->counted);
        return 0;
    }
    FZ_CHECK(ref_create(&c->ref, pp, po) == PB_OK);
    return 1;
}

int fz_create_compat(fz_ctx *c) {
    fz_op = "create (vtable)";
    const uint8_t flags = fz_rd_u8(&c->rd);
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
    if (!vtable_made(c, ss, out, &ch, small, bytes)) return 0;
    if (model_refuses_size(&m)) {
        c->vt->destroy(c->pol);
        fz_check_nothing_left(c, c->counted);
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
    pb_kvcache_config k = ref_config_of(p, o);
    k.prefill_max_len = 0u;
    const uint8_t wild = fz_rd_u8(r) % 4u == 0u ? fz_rd_u8(r) : 0u;
    k.scorer = fz_rd_u8(r) % 5u;
    k.sinks = fz_rd_u8(r) % 3u == 0u ? 0u : fz_rd_u8(r) % 10u;
    k.share = fz_rd_u8(r) % 2u == 0u ? 0u : 1u + fz_rd_u8(r) % 96u;
    if (wild & 0x01u) k.scorer = fz_wild_u32(r);
    if (wild & 0x02u) k.sinks = fz_wild_u32(r);
    if (wild & 0x04u) k.share = fz_wild_u32(r);
    if (wild & 0x08u) k.prefill_max_len = fz_wild_u32(r);
    k.row_stores = (uint32_t)((wild >> 4) & 1u); /* changes no value */
    if (wild & 0x20u) k.row_stores = fz_wild_u32(r);
    *out = k;
}

/* The model refuses obs_window above 4096 (too large for a test); such
 * inputs end after create. */
static int model_refuses_config(const pb_kvcache_config *k) {
    return k->obs_window > 4096u;
}

int fz_create_scorers(fz_ctx *c) {
    fz_op = "create (scorers)";
    pb_kvcache_pyramidkv_params p;
    pb_kvcache_options o;
    const uint8_t flags = gen_native(&c->rd, &p, &o);
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
    if (!create_made(c, ss, cs, out, &ch, small)) return 0;
    c->pol = out;
    c->counted = ch.kind == 2;
    if (c->counted) FZ_CHECK(c->ca.outstanding == bytes);
    c->mem = bytes;
    if (model_refuses_config(&k)) {
        pb_kvcache_destroy(c->pol);
        fz_check_nothing_left(c, c->counted);
        return 0;
    }
    FZ_CHECK(ref_create_config(&c->ref, &k) == PB_OK);
    return 1;
}

/* One of the five family vtables, its params struct {budget, second}
 * (second: recent_window, sinks, or unread), or NULL for the defaults. The
 * model is the native config each one is declared to be. */
int fz_create_family(fz_ctx *c) {
    fz_op = "create (family vtable)";
    static const pb_kvcache_vtable *const family[5] = {
        &pb_kvcache_h2o, &pb_kvcache_scissorhands, &pb_kvcache_tova,
        &pb_kvcache_streaming_llm, &pb_kvcache_sliding_window};
    static const pb_scorer scorer[5] = {
        PB_SCORER_CUMULATIVE, PB_SCORER_VOTES, PB_SCORER_LAST,
        PB_SCORER_NONE, PB_SCORER_NONE};
    static const uint32_t default_second[5] = {32u, 32u, 0u, 4u, 0u};
    const uint8_t flags = fz_rd_u8(&c->rd);
    const size_t which = fz_rd_u8(&c->rd) % 5u;
    c->vt = family[which];
    c->tova = which == 2u;
    const uint8_t wild = fz_rd_u8(&c->rd) % 4u == 0u ? fz_rd_u8(&c->rd) : 0u;
    uint32_t params[2];
    params[0] = 1u + fz_rd_u8(&c->rd) % 48u;
    params[1] = fz_rd_u8(&c->rd) % (params[0] < 12u ? params[0] : 12u);
    if (wild & 0x01u) params[0] = fz_wild_u32(&c->rd);
    if (wild & 0x02u) params[1] = fz_wild_u32(&c->rd);
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
    if (!vtable_made(c, ss, out, &ch, small, bytes)) return 0;
    FZ_CHECK(ref_create_config(&c->ref, &k) == PB_OK);
    return 1;
}
