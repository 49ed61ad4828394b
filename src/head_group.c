/*
 * head_group.c - the layer group (docs/spec.md §16): its plan, its one
 * allocation holding every head's instance and the scratch, the decode step
 * and the layer-wide evict. The heads are ordinary instances driven through
 * the public operations and the scorer table (the lowest keys of a head,
 * the evict of given ranks); the choice of victims across heads lives in
 * head_group_select.c, the prefill in head_group_prefill.c.
 */
#include <assert.h>
#include <string.h>

#include "allocator.h"
#include "block_layout.h"
#include "head_group_internal.h"
#include "policy_internal.h"
#include "struct_growth.h"


/* The parts of the one block, in order. */
typedef struct group_layout {
    size_t heads, take, must, cand_n, pos, x, cand, peek, prefill, rows,
        instances,
        total;
    size_t head_bytes;     /* one instance, as pb_kvcache_size reports */
    size_t prefill_bytes;  /* reserved prefill workspace */
} group_layout;

/* The resolved plan: the caller's config and params checked and turned
 * into each head's config and the group's sizes. */
typedef struct group_plan {
    uint32_t head_cap; /* C, 0 without a cap */
    pb_kvcache_config head;
    pb_kvcache_group_params params;
    pb_kvcache_group_plan_info info;
} group_plan;

static pb_status read_params(const pb_kvcache_group_params *p,
                             pb_kvcache_group_params *out) {
    const pb_kvcache_group_params d = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    *out = d;
    if (pb__struct_read(p, PB__GROUP_PARAMS_SIZE_0_2, sizeof *out,
                        out) != PB_OK)
        return PB_ERR_PARAM;
    if (out->num_heads == 0u || out->num_heads > PB_KVCACHE_GROUP_MAX_HEADS ||
        out->floor_permille > 1000u || out->slack == 0u ||
        out->pooled_rows > 1u ||
        out->slack > 65536u ||
        (out->head_cap_permille != 0u && out->head_cap_permille < 1000u))
        return PB_ERR_PARAM;
    return PB_OK;
}

static pb_status make_plan(const pb_kvcache_config *head,
                           const pb_kvcache_group_params *params,
                           group_plan *plan) {
    const pb_kvcache_config dc = PB_KVCACHE_CONFIG_DEFAULT;
    pb_kvcache_config c = dc;
    /* The growth rule of docs/abi.md, as pb_kvcache_create reads it. */
    pb_status st = pb__struct_read(head, PB__CONFIG_SIZE_0_2, sizeof c, &c);
    if (st != PB_OK) return st;
    st = read_params(params, &plan->params);
    if (st != PB_OK) return st;
    if (c.capacity != 0u || c.prefill_max_len != 0u ||
        c.prefill_scope != PB_PREFILL_CONSISTENT)
        return PB_ERR_PARAM;
    const uint32_t share =
        c.share != 0u ? c.share
                      : pb_kvcache_pyramid_budget(c.budget, c.layer,
                                                  c.num_layers,
                                                  c.pyramid_ratio);
    const uint64_t r = c.recent_window;
    const uint64_t s = share > r ? share : r + 1u;
    const uint64_t h = plan->params.num_heads;
    const uint64_t f = (s - r) * plan->params.floor_permille / 1000u;
    uint64_t spread = s + (h - 1u) * (s - r - f);
    const uint64_t cap_c =
        plan->params.head_cap_permille
            ? s * plan->params.head_cap_permille / 1000u
            : 0u;
    if (cap_c != 0u && cap_c < spread) spread = cap_c;
    const uint64_t guard = r + c.sinks + f;
    const uint64_t hmax = spread > guard ? spread : guard;
    const uint64_t cap = hmax + plan->params.slack;
    if (cap > UINT32_MAX - 1u) return PB_ERR_TOO_LARGE;
    /* The pooled layout's rows: what the heads hold together after an
     * evict to T, or their protected positions and floors when those
     * exceed it, plus one admission per head per slack step. A scorer
     * may also spare its newest, unobserved position, which
     * recent_window 0 does not cover (the engine says). */
    const uint64_t kept_r = pb__recent_protected(c.scorer, c.recent_window);
    const uint64_t pguard = kept_r + c.sinks + f;
    const uint64_t pool_rows = h * ((s > pguard ? s : pguard) +
                                    plan->params.slack);
    if (plan->params.pooled_rows != 0u && pool_rows > UINT32_MAX)
        return PB_ERR_TOO_LARGE;
    plan->head_cap = cap_c > UINT32_MAX ? UINT32_MAX : (uint32_t)cap_c;
    /* The instance's own target never binds: the group asks each head for
     * its exact count, which never exceeds what it holds. */
    c.share = (uint32_t)cap;
    c.capacity = (uint32_t)cap;
    /* Every other field as pb_kvcache_create checks it, for the head's
     * own capacity. */
    size_t probe = 0;
    st = pb_kvcache_size(&c, &probe);
    if (st != PB_OK) return st;
    plan->head = c;
    pb_kvcache_group_plan_info *i = &plan->info;
    i->struct_size = PB__GROUP_INFO_SIZE_0_2;
    i->num_heads = (uint32_t)h;
    i->head_share = (uint32_t)s;
    i->floor = (uint32_t)f;
    i->head_min = (uint32_t)(r + f);
    i->head_max = (uint32_t)hmax;
    i->head_capacity = (uint32_t)cap;
    i->reserved = 0u;
    i->layer_total = h * s;
    i->pool_rows = pool_rows;
    return PB_OK;
}

static pb_status make_layout(const group_plan *plan, group_layout *lay) {
    const size_t h = plan->info.num_heads;
    const size_t cap = plan->info.head_capacity;
    pb__cursor at = {0, 0};
    (void)pb__part(&at, sizeof(pb_kvcache_group));
    pb_status st = pb_kvcache_size(&plan->head, &lay->head_bytes);
    if (st != PB_OK) return st;
    lay->heads = pb__part(&at, h * sizeof(pb_kvcache *));
    lay->take = pb__part(&at, h * sizeof(size_t));
    lay->must = pb__part(&at, h * sizeof(size_t));
    lay->cand_n = pb__part(&at, h * sizeof(size_t));
    lay->pos = pb__part(&at, cap * sizeof(uint32_t));
    lay->x = pb__part(&at, cap * sizeof(double));
    if (cap > SIZE_MAX / sizeof(pb__group_entry) / h) return PB_ERR_TOO_LARGE;
    lay->cand = pb__part(&at, h * cap * sizeof(pb__group_entry));
    lay->peek = pb__part(&at, pb__peek_work_bound(&plan->head));
    lay->prefill_bytes = 0;
    if (plan->params.prefill_max_len != 0u &&
        pb__group_prefill_bytes(plan->info.num_heads, &plan->head,
                                plan->params.prefill_max_len,
                                &lay->prefill_bytes) != PB_OK)
        return PB_ERR_TOO_LARGE;
    lay->prefill = pb__part(&at, lay->prefill_bytes);
    lay->rows = pb__part(
        &at, plan->params.pooled_rows
                 ? pb__row_pool_bytes((uint32_t)h,
                                      (uint32_t)plan->info.pool_rows)
                 : 0u);
    lay->instances = at.at;
    for (size_t i = 0; i < h; i++) (void)pb__part(&at, lay->head_bytes);
    if (at.overflow) return PB_ERR_TOO_LARGE;
    /* The group's record needs no more than the allocator's alignment;
     * each head aligns its own slice. */
    lay->total = at.at;
    return PB_OK;
}

/* The plan and the block's layout for a config and params, as size and
 * create both need them. */
static pb_status plan_and_layout(const pb_kvcache_config *head,
                                 const pb_kvcache_group_params *params,
                                 group_plan *plan, group_layout *lay) {
    const pb_status st = make_plan(head, params, plan);
    return st == PB_OK ? make_layout(plan, lay) : st;
}

pb_status pb_kvcache_group_plan(const pb_kvcache_config *head,
                                const pb_kvcache_group_params *params,
                                pb_kvcache_group_plan_info *info) {
    if (info == NULL) return PB_ERR_NULL;
    if (pb__struct_check_out(info, PB__GROUP_INFO_SIZE_0_2) != PB_OK)
        return PB_ERR_PARAM;
    group_plan plan;
    const pb_status st = make_plan(head, params, &plan);
    if (st != PB_OK) return st;
    pb__struct_write(info, &plan.info, sizeof plan.info);
    return PB_OK;
}

pb_status pb_kvcache_group_size(const pb_kvcache_config *head,
                                const pb_kvcache_group_params *params,
                                size_t *bytes) {
    if (bytes == NULL) return PB_ERR_NULL;
    group_plan plan;
    group_layout lay;
    const pb_status st = plan_and_layout(head, params, &plan, &lay);
    if (st != PB_OK) return st;
    *bytes = lay.total;
    return PB_OK;
}

/* Hands each head its slice of the group's block: create asks for exactly
 * pb_kvcache_size bytes once; free is a no-op, the group frees the block. */
typedef struct slice_alloc {
    unsigned char *next;
    size_t size;
} slice_alloc;

static void *slice_take(void *ctx, size_t n) {
    slice_alloc *s = (slice_alloc *)ctx;
    if (n != s->size || s->next == NULL) return NULL;
    void *p = s->next;
    s->next = NULL;
    return p;
}

static void slice_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
}

pb_status pb_kvcache_group_create(const pb_kvcache_config *head,
                                  const pb_kvcache_group_params *params,
                                  const pb_allocator *allocator,
                                  pb_kvcache_group **out) {
    if (out == NULL) return PB_ERR_NULL;
    *out = NULL;
    group_plan plan;
    group_layout lay;
    pb_status st = plan_and_layout(head, params, &plan, &lay);
    if (st != PB_OK) return st;
    pb_allocator a;
    if (!pb__allocator_of(allocator, &a)) return PB_ERR_PARAM;
    unsigned char *block = (unsigned char *)a.alloc(a.ctx, lay.total);
    if (block == NULL) return PB_ERR_NOMEM;
    memset(block, 0, lay.instances);
    pb_kvcache_group *g = (pb_kvcache_group *)block;
    g->allocator = a;
    g->bytes = lay.total;
    g->head = plan.head;
    g->num_heads = plan.info.num_heads;
    g->head_share = plan.info.head_share;
    g->floor = plan.info.floor;
    g->head_max = plan.info.head_max;
    g->head_capacity = plan.info.head_capacity;
    g->recent = plan.head.recent_window;
    g->layer_total = plan.info.layer_total;
    g->heads = (pb_kvcache **)(block + lay.heads);
    g->take = (size_t *)(block + lay.take);
    g->must = (size_t *)(block + lay.must);
    g->head_cap = plan.head_cap;
    g->cand_n = (size_t *)(block + lay.cand_n);
    g->pos_scratch = (uint32_t *)(block + lay.pos);
    g->x_scratch = (double *)(block + lay.x);
    /* The evict's victim ranks reuse the listing's scores: those are dead
     * once the candidates are chosen, before any head evicts. */
    _Static_assert(sizeof(size_t) <= sizeof(double),
                   "a rank fits in a score's bytes");
    g->rank_scratch = (size_t *)(block + lay.x);
    g->cand = (pb__group_entry *)(block + lay.cand);
    g->peek_work = block + lay.peek;
    g->prefill_ws = lay.prefill_bytes ? block + lay.prefill : NULL;
    g->prefill_ws_bytes = lay.prefill_bytes;
    g->prefill_ws_len = plan.params.prefill_max_len;
    g->pool_rows = plan.info.pool_rows;
    if (plan.params.pooled_rows)
        pb__row_pool_init(&g->pool, block + lay.rows, g->num_heads,
                          (uint32_t)plan.info.pool_rows);
    for (uint32_t h = 0; h < g->num_heads; h++) {
        slice_alloc s = {block + lay.instances +
                             (size_t)h * pb__lines(lay.head_bytes),
                         lay.head_bytes};
        const pb_allocator sa = {slice_take, slice_free, &s};
        st = pb_kvcache_create(&g->head, &sa, &g->heads[h]);
        /* The config passed pb_kvcache_size and the slice has its size. */
        assert(st == PB_OK);
        if (st != PB_OK) {
            a.free(a.ctx, block, lay.total);
            return st;
        }
    }
    g->last_pos = 0u;
    g->fresh = 1;
    *out = g;
    return PB_OK;
}

void pb_kvcache_group_destroy(pb_kvcache_group *group) {
    if (group == NULL) return;
    const pb_allocator a = group->allocator;
    a.free(a.ctx, group, group->bytes);
}

pb_status pb_kvcache_group_info(const pb_kvcache_group *group,
                                pb_kvcache_group_plan_info *info) {
    if (group == NULL || info == NULL) return PB_ERR_NULL;
    if (pb__struct_check_out(info, PB__GROUP_INFO_SIZE_0_2) != PB_OK)
        return PB_ERR_PARAM;
    pb_kvcache_group_plan_info i;
    i.struct_size = PB__GROUP_INFO_SIZE_0_2;
    i.num_heads = group->num_heads;
    i.head_share = group->head_share;
    i.floor = group->floor;
    i.head_min = group->recent + group->floor;
    i.head_max = group->head_max;
    i.head_capacity = group->head_capacity;
    i.reserved = 0u;
    i.layer_total = group->layer_total;
    i.pool_rows = group->pool_rows;
    pb__struct_write(info, &i, sizeof i);
    return PB_OK;
}

const pb_kvcache *pb_kvcache_group_head(const pb_kvcache_group *group,
                                        uint32_t h) {
    if (group == NULL || h >= group->num_heads) return NULL;
    return group->heads[h];
}

uint64_t pb_kvcache_group_kept_total(const pb_kvcache_group *group) {
    if (group == NULL) return 0u;
    uint64_t t = 0u;
    for (uint32_t h = 0; h < group->num_heads; h++)
        t += pb_kvcache_kept_count(group->heads[h]);
    return t;
}

size_t pb_kvcache_group_memory_bytes(const pb_kvcache_group *group) {
    return group == NULL ? 0u : group->bytes;
}

pb_status pb_kvcache_group_reset(pb_kvcache_group *group) {
    if (group == NULL) return PB_ERR_NULL;
    for (uint32_t h = 0; h < group->num_heads; h++) {
        const pb_status st = pb_kvcache_reset(group->heads[h]);
        assert(st == PB_OK);
        (void)st;
    }
    pb__row_pool_reset(&group->pool);
    group->last_pos = 0u;
    group->fresh = 1;
    return PB_OK;
}

pb_status pb_kvcache_group_observe(pb_kvcache_group *group, uint32_t pos,
                                   const float *attn, size_t head_stride,
                                   const size_t *attn_len) {
    if (group == NULL || (attn != NULL && attn_len == NULL))
        return PB_ERR_NULL;
    return pb__group_observe(group, pos, attn, head_stride, attn_len);
}

pb_status pb__group_observe(pb_kvcache_group *group, uint32_t pos,
                            const float *attn, size_t head_stride,
                            const size_t *attn_len) {
    if (pos <= group->last_pos) return PB_ERR_POSITION;
    const uint32_t nh = group->num_heads;
    if (attn != NULL) {
        for (uint32_t h = 0; h < nh; h++) {
            if (attn_len[h] != pb_kvcache_kept_count(group->heads[h]))
                return PB_ERR_LENGTH;
            if (nh > 1u && attn_len[h] > head_stride) return PB_ERR_LENGTH;
        }
    }
    /* Every row is checked once, by each head's own check, before any
     * head steps; take[] holds what each found until then. */
    for (uint32_t h = 0; h < nh; h++) {
        group->take[h] = 0u;
        if (attn == NULL) continue;
        const unsigned f = pb__kvcache_check_row(
            group->heads[h], attn + (size_t)h * head_stride, attn_len[h]);
        if (f & PB__WEIGHT_BAD) return PB_ERR_WEIGHT;
        group->take[h] = f;
    }
    for (uint32_t h = 0; h < nh; h++)
        if (pb_kvcache_kept_count(group->heads[h]) >=
            pb_kvcache_capacity(group->heads[h]))
            return PB_ERR_FULL;
    if (!pb__row_pool_can_admit(&group->pool)) return PB_ERR_FULL;
    for (uint32_t h = 0; h < nh; h++) {
        const pb_status st = pb__kvcache_observe_checked(
            group->heads[h], pos,
            attn != NULL ? attn + (size_t)h * head_stride : NULL,
            attn != NULL ? attn_len[h] : 0u, (unsigned)group->take[h]);
        assert(st == PB_OK);
        (void)st;
    }
    pb__row_pool_admit(&group->pool, pos);
    group->last_pos = pos;
    group->fresh = 0;
    return PB_OK;
}

/* pb_kvcache_group_evict after its NULL checks; rows_out (or NULL) gets
 * each victim's pool row. */
static pb_status group_evict(pb_kvcache_group *group, uint64_t budget,
                             uint32_t *victims, uint32_t *rows_out,
                             size_t victims_cap, size_t *counts,
                             size_t counts_len, size_t *n_victims) {
    const uint32_t nh = group->num_heads;
    if (counts_len < nh) return PB_ERR_BUFFER;
    const uint64_t held = pb_kvcache_group_kept_total(group);
    const uint64_t target =
        budget < group->layer_total ? budget : group->layer_total;
    const uint64_t k64 = held > target ? held - target : 0u;
    const size_t k = k64 > SIZE_MAX ? SIZE_MAX : (size_t)k64;
    int any = k > 0u;
    for (uint32_t h = 0; h < nh; h++) {
        const size_t kept = pb_kvcache_kept_count(group->heads[h]);
        group->must[h] = group->head_cap != 0u && kept > group->head_cap
                             ? kept - group->head_cap
                             : 0u;
        any |= group->must[h] > 0u;
    }
    const size_t needed = any ? pb__group_choose(group, k) : 0u;
    if (needed > victims_cap) {
        *n_victims = needed;
        return PB_ERR_BUFFER;
    }
    size_t at = 0;
    for (uint32_t h = 0; h < nh; h++) {
        const size_t take = needed ? group->take[h] : 0u;
        counts[h] = take;
        if (take == 0u) continue;
        /* Exactly the head's chosen positions, by its evict of ranks. */
        const pb__group_entry *c = group->cand + (size_t)h * group->head_capacity;
        for (size_t i = 0; i < take; i++) group->pos_scratch[i] = c[i].pos;
        pb__kvcache_evict_positions(group->heads[h], group->pos_scratch, take,
                                    group->rank_scratch, victims + at);
        pb__row_pool_release(&group->pool, h, victims + at, take,
                             rows_out != NULL ? rows_out + at : NULL);
        at += take;
    }
    if (needed) group->fresh = 0;
    *n_victims = at;
    return PB_OK;
}

pb_status pb_kvcache_group_evict(pb_kvcache_group *group, uint64_t budget,
                                 uint32_t *victims, size_t victims_cap,
                                 size_t *counts, size_t counts_len,
                                 size_t *n_victims) {
    if (group == NULL || counts == NULL || n_victims == NULL ||
        (victims == NULL && victims_cap > 0u))
        return PB_ERR_NULL;
    return group_evict(group, budget, victims, NULL, victims_cap, counts,
                       counts_len, n_victims);
}

pb_status pb_kvcache_group_evict_rows(pb_kvcache_group *group,
                                      uint64_t budget, uint32_t *victims,
                                      uint32_t *rows, size_t cap,
                                      size_t *counts, size_t counts_len,
                                      size_t *n_victims) {
    if (group == NULL || counts == NULL || n_victims == NULL ||
        ((victims == NULL || rows == NULL) && cap > 0u))
        return PB_ERR_NULL;
    if (!group->pool.on) return PB_ERR_PARAM;
    return group_evict(group, budget, victims, rows, cap, counts, counts_len,
                       n_victims);
}
