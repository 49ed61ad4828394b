/*
 * score_sources.c - the scores of the scorers other than the window
 * (docs/spec.md §13), and their evicts.
 *
 * One engine, one more axis: where the window scorer keeps an observation
 * ring and pools its sums, these keep one number per held position, in
 * rank order beside pos[]:
 *   - cumulative (H2O): a double, the attention received since admission,
 *     each step adding (double)attn[i] in index order;
 *   - last (TOVA): the bits of the float received at the latest observed
 *     step (-0.0 stored as +0.0, its equal). A step observes every held
 *     position, so the positions not observed yet are always the newest
 *     ones, admitted since the last observed step: a count says which;
 *   - votes (Scissorhands): a uint32, the steps whose weight was strictly
 *     above that step's fair share 1.0 / (double)attn_len (saturating at
 *     UINT32_MAX, which no real run reaches);
 *   - none (recency): nothing; the oldest evictable position goes first.
 * Selection is the radix cut of selection.c over the evictable range, and
 * one in-place pass reports the victims and closes the gaps, so nothing is
 * allocated and no scratch array is needed.
 *
 * It does not validate (the doors in policy.c have, before any write), and
 * it knows nothing of the ring, pooling or holes.
 */
#include <assert.h>
#include <string.h>

#include "policy_internal.h"

/* The bits of a non-negative float weight, -0.0 made +0.0. */
static uint32_t record_bits(float w) {
    uint32_t b;
    memcpy(&b, &w, sizeof b);
    return b & UINT32_C(0x7FFFFFFF);
}

void pb__source_reset(pb_kvcache *p) {
    p->fresh = 1;
    p->kept = 1u;
    p->pos[0] = 0u;
    /* Only the last scorer spares what it has not observed, position 0
     * among them. */
    p->unobserved = p->cfg.scorer == (uint32_t)PB_SCORER_LAST ? 1u : 0u;
    switch (p->cfg.scorer) {
    case PB_SCORER_CUMULATIVE: ((double *)p->source)[0] = 0.0; break;
    case PB_SCORER_LAST:
    case PB_SCORER_VOTES: ((uint32_t *)p->source)[0] = 0u; break;
    default: break;
    }
}

void pb__source_observe(pb_kvcache *p, uint32_t pos, const float *attn,
                        size_t attn_len) {
    const size_t n = p->kept;
    assert(attn == NULL || attn_len == n);
    assert(n < p->capacity);
    switch (p->cfg.scorer) {
    case PB_SCORER_CUMULATIVE: {
        double *s = p->source;
        if (attn != NULL)
            for (size_t i = 0; i < attn_len; ++i) s[i] += (double)attn[i];
        s[n] = 0.0;
        break;
    }
    case PB_SCORER_LAST: {
        uint32_t *r = p->source;
        if (attn != NULL) {
            for (size_t i = 0; i < attn_len; ++i) r[i] = record_bits(attn[i]);
            p->unobserved = 0u;
        }
        r[n] = 0u;
        p->unobserved += 1u;
        break;
    }
    case PB_SCORER_VOTES: {
        uint32_t *v = p->source;
        if (attn != NULL && attn_len > 0u) {
            const double share = 1.0 / (double)attn_len;
            for (size_t i = 0; i < attn_len; ++i)
                v[i] += (double)attn[i] > share && v[i] != UINT32_MAX;
        }
        v[n] = 0u;
        break;
    }
    default: break;
    }
    p->pos[n] = pos;
    p->kept = n + 1u;
}

/* Moves ranks from .. kept-1 of pos[] and of the scores to start at rank
 * `to` (to <= from). */
static void close_tail(pb_kvcache *p, size_t from, size_t to) {
    const size_t count = p->kept - from;
    memmove(p->pos + to, p->pos + from, count * sizeof *p->pos);
    const size_t per = pb__source_score_bytes(p->cfg.scorer);
    if (per != 0u) {
        unsigned char *s = p->source;
        memmove(s + to * per, s + from * per, count * per);
    }
}

void pb__source_evict(pb_kvcache *p, size_t first, size_t end, size_t needed,
                      uint32_t *victims) {
    assert(first <= end && end <= p->kept && needed <= end - first);
    assert(needed > 0u);
    if (p->cfg.scorer == (uint32_t)PB_SCORER_NONE) {
        memcpy(victims, p->pos + first, needed * sizeof *victims);
        close_tail(p, first + needed, first);
        p->kept -= needed;
        return;
    }
    if (needed == 1u) {
        /* One victim (an evict after every step): the first lowest key,
         * which is what the cut would take, in one pass. */
        size_t best = first;
        if (p->cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE) {
            const double *s = p->source;
            for (size_t i = first + 1u; i < end; ++i)
                if (s[i] < s[best]) best = i;
        } else {
            const uint32_t *s = p->source;
            for (size_t i = first + 1u; i < end; ++i)
                if (s[i] < s[best]) best = i;
        }
        victims[0] = p->pos[best];
        close_tail(p, best + 1u, best);
        p->kept -= 1u;
        return;
    }
    pb__cut cut;
    if (p->cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE)
        pb__select_lowest((const double *)p->source + first, end - first,
                          needed, p->hist, &cut);
    else
        pb__select_lowest_u32((const uint32_t *)p->source + first,
                              end - first, needed, p->hist, &cut);

    /* One pass over the evictable ranks in order: victims out (ascending,
     * ties to the lower rank by the cut), survivors moved down in place. */
    size_t w = first, nv = 0;
    if (p->cfg.scorer == (uint32_t)PB_SCORER_CUMULATIVE) {
        double *s = p->source;
        for (size_t i = first; i < end; ++i) {
            if (pb__cut_takes(&cut, pb__key_bits(s[i]))) {
                victims[nv++] = p->pos[i];
            } else {
                p->pos[w] = p->pos[i];
                s[w++] = s[i];
            }
        }
    } else {
        uint32_t *s = p->source;
        for (size_t i = first; i < end; ++i) {
            if (pb__cut_takes(&cut, (uint64_t)s[i])) {
                victims[nv++] = p->pos[i];
            } else {
                p->pos[w] = p->pos[i];
                s[w++] = s[i];
            }
        }
    }
    assert(nv == needed);
    (void)nv;
    close_tail(p, end, w);
    p->kept -= needed;
}

double pb__source_score(const pb_kvcache *p, size_t rank) {
    assert(rank < p->kept);
    switch (p->cfg.scorer) {
    case PB_SCORER_CUMULATIVE: return ((const double *)p->source)[rank];
    case PB_SCORER_LAST: {
        if (rank >= p->kept - p->unobserved) return -1.0;
        float f;
        memcpy(&f, (const uint32_t *)p->source + rank, sizeof f);
        return (double)f;
    }
    case PB_SCORER_VOTES: return (double)((const uint32_t *)p->source)[rank];
    default: return 0.0;
    }
}
