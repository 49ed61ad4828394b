/*
 * head_group_select.c - the choice of victims across a layer's heads
 * (docs/spec.md §16.3): the lowest candidates of each head (its floor
 * excepted) from its scorer's lowest entry, and their merge by key,
 * position and head index. It decides no eviction; the group then has
 * each head evict exactly its chosen positions (evict_ranks), so a layer
 * evict selects once. No pooling, protection or scorer rule lives here:
 * the keys and the evictable range are the scorer table's.
 */
#include <assert.h>

#include "head_group_internal.h"
#include "policy_internal.h"

/* The head's own lowest candidates through the scorer table: its
 * evictable range (as its evict sees it) and its `want` lowest by its
 * scorer's key, in the order its evict takes them. */
void pb__group_peek_lowest(const pb_kvcache_group *g, uint32_t h,
                           size_t want, pb__group_entry *out, size_t *n_out) {
    pb_kvcache *head = g->heads[h];
    const size_t held = pb_kvcache_kept_count(head);
    const size_t e = pb__kvcache_peek_lowest(head, 0u, NULL, NULL, 0u, NULL);
    const size_t cands = e > g->floor ? e - g->floor : 0u;
    const size_t w = want < cands ? want : cands;
    size_t m = 0;
    if (w > 0u) {
        m = pb__kvcache_lowest(head, (uint32_t)(held - w), g->pos_scratch,
                               g->x_scratch, w, g->peek_work);
        if (m > w) m = w;
        for (size_t i = 0; i < m; i++) {
            out[i].key = g->x_scratch[i];
            out[i].pos = g->pos_scratch[i];
            out[i].pad_ = 0u;
        }
    }
    *n_out = m;
}

/* The heads with entries left, as a binary min-heap by their next entry
 * by (key, position, head): the victim a merge takes next is the top
 * head's next entry, found in log H comparisons rather than H. Equal key
 * and position: the lower head first. Held on the stack (2 bytes a
 * head). */
_Static_assert(PB_KVCACHE_GROUP_MAX_HEADS <= 65536u,
               "a head index fits the heap's uint16_t");

typedef struct head_heap {
    const pb__group_entry *lists;
    size_t stride;
    const size_t *cand_n, *take;
    uint32_t n;
    uint16_t h[PB_KVCACHE_GROUP_MAX_HEADS];
} head_heap;

/* Head a's next entry comes before head b's. */
static int heap_before(const head_heap *q, uint32_t a, uint32_t b) {
    const pb__group_entry *ea = &q->lists[a * q->stride + q->take[a]];
    const pb__group_entry *eb = &q->lists[b * q->stride + q->take[b]];
    if (pb__group_entry_less(ea, eb)) return 1;
    if (pb__group_entry_less(eb, ea)) return 0;
    return a < b;
}

static void heap_down(head_heap *q, uint32_t i) {
    const uint16_t v = q->h[i];
    for (;;) {
        uint32_t c = 2u * i + 1u;
        if (c >= q->n) break;
        if (c + 1u < q->n && heap_before(q, q->h[c + 1u], q->h[c])) ++c;
        if (!heap_before(q, q->h[c], v)) break;
        q->h[i] = q->h[c];
        i = c;
    }
    q->h[i] = v;
}

/* Builds the heap of the heads with entries left. */
static void heap_build(head_heap *q, const pb__group_entry *lists,
                       size_t stride, const size_t *cand_n,
                       uint32_t num_heads, const size_t *take) {
    q->lists = lists;
    q->stride = stride;
    q->cand_n = cand_n;
    q->take = take;
    q->n = 0u;
    for (uint32_t h = 0; h < num_heads; h++)
        if (take[h] < cand_n[h]) q->h[q->n++] = (uint16_t)h;
    for (uint32_t i = q->n / 2u; i > 0u; i--) heap_down(q, i - 1u);
}

/* The top head's next entry has changed (take or its list grew): it
 * moves down to its place, or leaves when its list is taken. */
static void heap_top_changed(head_heap *q) {
    const uint32_t h = q->h[0];
    if (q->take[h] >= q->cand_n[h]) {
        q->h[0] = q->h[--q->n];
        if (q->n == 0u) return;
    }
    heap_down(q, 0u);
}

size_t pb__group_merge(const pb__group_entry *lists, size_t stride,
                       const size_t *cand_n, uint32_t num_heads, size_t k,
                       const size_t *must, size_t *take) {
    size_t total = 0;
    for (uint32_t h = 0; h < num_heads; h++) {
        take[h] = must[h] < cand_n[h] ? must[h] : cand_n[h];
        total += take[h];
    }
    if (total >= k) return total;
    head_heap q;
    heap_build(&q, lists, stride, cand_n, num_heads, take);
    while (total < k && q.n > 0u) {
        take[q.h[0]]++;
        total++;
        heap_top_changed(&q);
    }
    return total;
}

/* The candidates head h has: its evictable positions but its floor. */
static size_t candidates(const pb_kvcache_group *g, uint32_t h) {
    const size_t e =
        pb__kvcache_peek_lowest(g->heads[h], 0u, NULL, NULL, 0u, NULL);
    return e > g->floor ? e - g->floor : 0u;
}

size_t pb__group_choose(pb_kvcache_group *g, size_t k) {
    const uint32_t nh = g->num_heads;
    const size_t stride = g->head_capacity;
    size_t total = 0;
    /* Each head lists its musts, its even part of k and one more to
     * compete with: most evicts then list each head once (a second
     * listing costs a head a second pass; measured in
     * docs/head_adaptive.md). */
    const size_t even = k > 0u ? (k - 1u) / nh + 2u : 0u;
    for (uint32_t h = 0; h < nh; h++) {
        const size_t want = g->must[h] + even;
        pb__group_peek_lowest(g, h, want, g->cand + h * stride, &g->cand_n[h]);
        g->take[h] = g->must[h] < g->cand_n[h] ? g->must[h] : g->cand_n[h];
        total += g->take[h];
    }
    if (total >= k) return total;
    head_heap q;
    heap_build(&q, g->cand, stride, g->cand_n, nh, g->take);
    while (total < k && q.n > 0u) {
        const uint32_t best = q.h[0];
        g->take[best]++;
        total++;
        const size_t n = g->cand_n[best];
        if (g->take[best] >= n && total < k) {
            /* Its list is taken: list twice as many while it has more
             * (the new list starts with the old one). */
            const size_t more = candidates(g, best);
            if (more > n)
                pb__group_peek_lowest(g, best, 2u * n < more ? 2u * n : more,
                                      g->cand + best * stride,
                                      &g->cand_n[best]);
        }
        heap_top_changed(&q);
    }
    return total;
}
