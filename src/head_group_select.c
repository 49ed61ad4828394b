/*
 * head_group_select.c - the choice of victims across a layer's heads
 * (docs/spec.md §16.3): each head's ranking keys read back from its
 * instance, the lowest candidates of each head (its floor excepted) and
 * their merge by key, position and head index. It changes no instance; the
 * group then asks each head's own evict for its exact count.
 */
#include <assert.h>

#include "head_group_internal.h"
#include "policy_internal.h"

/* The key rank i is ranked by: pooled window score, the scorer's score, or
 * the position itself (no scorer: the oldest go first). */
static double key_of(const pb_kvcache_group *g, const double *x,
                     const uint32_t *pos, size_t n, size_t i) {
    if (g->scorer == PB_SCORER_NONE) return (double)pos[i];
    if (g->scorer != PB_SCORER_WINDOW || g->pool_kernel == 1u) {
        if (g->scorer == PB_SCORER_WINDOW && g->pool == PB_POOL_AVG)
            return x[i] / 1.0;
        return x[i];
    }
    const size_t half = (g->pool_kernel - 1u) / 2u;
    const size_t lo = i > half ? i - half : 0u;
    const size_t hi = n - 1u - i > half ? i + half : n - 1u;
    if (g->pool == PB_POOL_MAX) {
        double m = x[lo];
        for (size_t j = lo + 1u; j <= hi; j++)
            if (x[j] > m) m = x[j];
        return m;
    }
    double sum = 0.0;
    for (size_t j = lo; j <= hi; j++) sum += x[j];
    return sum / (double)g->pool_kernel;
}

/* Max-heap on pb__group_entry_less: the root is the worst kept so far. */
static void sift_down(pb__group_entry *h, size_t n, size_t i) {
    for (;;) {
        size_t big = i;
        const size_t l = 2u * i + 1u, r = l + 1u;
        if (l < n && pb__group_entry_less(&h[big], &h[l])) big = l;
        if (r < n && pb__group_entry_less(&h[big], &h[r])) big = r;
        if (big == i) return;
        const pb__group_entry t = h[i];
        h[i] = h[big];
        h[big] = t;
        i = big;
    }
}

static void sift_up(pb__group_entry *h, size_t i) {
    while (i > 0u) {
        const size_t p = (i - 1u) / 2u;
        if (!pb__group_entry_less(&h[p], &h[i])) return;
        const pb__group_entry t = h[i];
        h[i] = h[p];
        h[p] = t;
        i = p;
    }
}

void pb__group_lowest_of(const pb_kvcache_group *g, const double *x,
                         const uint32_t *pos, size_t n, size_t first,
                         size_t end, size_t want, pb__group_entry *out,
                         size_t *n_out) {
    const size_t evictable = end > first ? end - first : 0u;
    const size_t cands = evictable > g->floor ? evictable - g->floor : 0u;
    const size_t w = want < cands ? want : cands;
    size_t m = 0;
    if (w > 0u) {
        for (size_t i = first; i < end; i++) {
            pb__group_entry e;
            e.key = key_of(g, x, pos, n, i);
            e.pos = pos[i];
            e.pad_ = 0u;
            if (m < w) {
                out[m] = e;
                sift_up(out, m);
                m++;
            } else if (pb__group_entry_less(&e, &out[0])) {
                out[0] = e;
                sift_down(out, m, 0u);
            }
        }
        /* Heap sort: the largest to the end, so out ascends. */
        for (size_t k = m; k > 1u; k--) {
            const pb__group_entry t = out[0];
            out[0] = out[k - 1u];
            out[k - 1u] = t;
            sift_down(out, k - 1u, 0u);
        }
    }
    *n_out = m;
}

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

/* The head whose next listed entry is the lowest by (key, position, head):
 * num_heads when every list is taken. Equal key and position: the lower
 * head (met first) wins. */
static uint32_t lowest_head(const pb__group_entry *lists, size_t stride,
                            const size_t *cand_n, uint32_t num_heads,
                            const size_t *take) {
    uint32_t best = num_heads;
    const pb__group_entry *be = NULL;
    for (uint32_t h = 0; h < num_heads; h++) {
        if (take[h] >= cand_n[h]) continue;
        const pb__group_entry *e = &lists[h * stride + take[h]];
        if (be == NULL || pb__group_entry_less(e, be)) {
            be = e;
            best = h;
        }
    }
    return best;
}

size_t pb__group_merge(const pb__group_entry *lists, size_t stride,
                       const size_t *cand_n, uint32_t num_heads, size_t k,
                       const size_t *must, size_t *take) {
    size_t total = 0;
    for (uint32_t h = 0; h < num_heads; h++) {
        take[h] = must[h] < cand_n[h] ? must[h] : cand_n[h];
        total += take[h];
    }
    while (total < k) {
        const uint32_t best =
            lowest_head(lists, stride, cand_n, num_heads, take);
        if (best == num_heads) break;
        take[best]++;
        total++;
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
    for (uint32_t h = 0; h < nh; h++) {
        /* Its musts, and one more to compete with while k asks for any. */
        const size_t want = g->must[h] + (k > 0u ? 1u : 0u);
        pb__group_peek_lowest(g, h, want, g->cand + h * stride, &g->cand_n[h]);
        g->take[h] = g->must[h] < g->cand_n[h] ? g->must[h] : g->cand_n[h];
        total += g->take[h];
    }
    while (total < k) {
        const uint32_t best =
            lowest_head(g->cand, stride, g->cand_n, nh, g->take);
        if (best == nh) break;
        g->take[best]++;
        total++;
        const size_t n = g->cand_n[best];
        if (g->take[best] < n || total >= k) continue;
        /* Its list is taken: list twice as many while it has more (the
         * new list starts with the old one). */
        const size_t more = candidates(g, best);
        if (more > n)
            pb__group_peek_lowest(g, best, 2u * n < more ? 2u * n : more,
                                  g->cand + best * stride,
                                  &g->cand_n[best]);
    }
    return total;
}
