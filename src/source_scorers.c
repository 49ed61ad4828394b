/*
 * source_scorers.c - what the score sources (cumulative, last, votes,
 * none) share before and beside a step: the layout and sizing of their
 * block from their kind (source_internal.h), their set-up, and the peek
 * of their lowest-ranked evictable positions. Their scores and evicts are
 * score_sources.c; each scorer's own rule is its file.
 */
#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lowest_select.h"
#include "source_internal.h"

_Static_assert(sizeof(pb__source) <= PB__STATE_BYTES,
               "the score sources' state fits its reserve");

/* The ranks of room before the arrays' starts (pb__source_kind.slack_div):
 * the last scorer has a 16th of the capacity (3/4 byte per held
 * position), so that a victim's gap can close from the shorter side. Its
 * scores are one step's attention, so its victims lie anywhere; the
 * cumulative and votes scores grow with age, so theirs lie mostly among
 * the newest ranks, where the room would only cost memory and vectors off
 * their alignment (measured: no gain for cumulative, votes 4 % slower),
 * and the none scorer's go from the front, but its 4 bytes per position
 * are its whole budget. */
static size_t source_slack(const pb__source_kind *kind, size_t capacity) {
    return kind->slack_div != 0u ? capacity / kind->slack_div : 0u;
}

/* Offsets of the arrays from the start of the block. */
typedef struct source_layout {
    size_t off_pos, off_scores, off_spare, off_hist;
    size_t total;
} source_layout;

/* The block: the state, the positions, one score per position (as wide
 * as the scorer needs; the last scorer two, its scores and the spare
 * array a step writes its record to), each with source_slack ranks of
 * room, and, when victims are chosen by score, the selection histogram.
 * No ring, no holes, no pooling or prefill scratch. */
static pb_status layout_of(const pb__config *cfg, const pb__source_kind *kind,
                           source_layout *out) {
    memset(out, 0, sizeof *out);
    if (cfg->capacity > (uint64_t)(SIZE_MAX / 64u)) return PB_ERR_TOO_LARGE;
    const size_t capacity = (size_t)cfg->capacity;
    const size_t per = kind->per;
    const int spare = kind->spare;
    const size_t ranks = capacity + source_slack(kind, capacity);
    pb__cursor c = {0, 0};
    const size_t off_state = pb__part(&c, PB__STATE_BYTES);
    out->off_pos = pb__part(&c, ranks * sizeof(uint32_t));
    out->off_scores = pb__part(&c, ranks * per);
    out->off_spare = pb__part(&c, spare ? ranks * per : 0u);
    out->off_hist = pb__part(&c, per ? PB__HIST_BINS * sizeof(size_t) : 0u);
    out->total = pb__block_bytes(&c);
    if (out->total == 0u) return PB_ERR_TOO_LARGE;
    assert(off_state == 0u);
    (void)off_state;
    return PB_OK;
}

pb_status pb__source_size(const pb__config *cfg, const pb__source_kind *kind,
                          size_t *total) {
    source_layout l;
    const pb_status st = layout_of(cfg, kind, &l);
    if (st == PB_OK) *total = l.total;
    return st;
}

void pb__source_init(pb_kvcache *inst, const pb__source_kind *kind) {
    pb__source *p = pb__source_of(inst);
    source_layout l;
    const pb_status st = layout_of(&p->c.cfg, kind, &l);
    assert(st == PB_OK); /* create sized the block by the same layout */
    (void)st;
    unsigned char *base = (unsigned char *)(void *)p;
    p->kind = kind;
    p->per = kind->per;
    p->slack = source_slack(kind, p->c.capacity);
    p->c.pos = (uint32_t *)(void *)(base + l.off_pos);
    p->source = p->per ? (void *)(base + l.off_scores) : NULL;
    if (kind->spare) p->source_spare = base + l.off_spare;
    p->hist = p->per ? (size_t *)(void *)(base + l.off_hist) : NULL;
    pb__source_reset(inst);
}

/* ------------------------------------------------------------------------ */
/* Peek                                                                     */

/* The k lowest of ranks first .. end-1 by (score, rank), in that order,
 * in one pass (lowest_select.h). The keys are the scores' bit patterns
 * (or votes), which order as the scores do; the none scorer has none, so
 * its order is the ranks'. Nothing moves and no scratch is used: the
 * ranks wait in positions[] until mapped. */
void pb__source_peek_lowest(const pb_kvcache *inst, size_t first,
                            size_t end, size_t k, uint32_t *positions,
                            double *scores, void *work) {
    const pb__source *p = (const pb__source *)(const void *)inst;
    (void)work;
    assert(first <= end && k <= end - first);
    if (k == 0u) return;
    const unsigned width = p->per == sizeof(double) ? 8u
                           : p->per != 0u           ? 4u
                                                    : 0u;
    pb__lowest_ranks(p->source, width, first, end, k, positions);
    for (size_t t = 0; t < k; ++t) {
        const size_t r = positions[t];
        positions[t] = p->c.pos[r];
        scores[t] = pb__source_score(inst, r);
    }
}

/* Asked for at most this many keys, the lowest entry takes one
 * vectorised pass per key after the first (a layer group's decode step
 * asks each head for two); beyond, the evict's cut and a sort of the k
 * it takes (pb__lowest_ranks_cut) is cheaper. */
#define PB__SOURCE_FEW_KEYS ((size_t)4)

/* The least key of ranks lo .. hi-1 (lo < hi) and, in *at, the first rank
 * holding it: one vectorised pass. */
static uint64_t least_in(const pb__source *p, size_t lo, size_t hi,
                         size_t *at) {
    size_t r = 0;
    const uint64_t key =
        p->per == sizeof(double)
            ? p->c.k->least_bits((const double *)p->source + lo, hi - lo, &r)
            : p->c.k->least_u32((const uint32_t *)p->source + lo, hi - lo,
                                &r);
    *at = lo + r;
    return key;
}

void pb__source_lowest(pb_kvcache *inst, size_t first, size_t end, size_t k,
                       uint32_t *positions, double *scores, void *work) {
    pb__source *p = pb__source_of(inst);
    if (k > PB__SOURCE_FEW_KEYS && p->per != 0u) {
        assert(k <= end - first);
        /* The evict's cut in its histogram: the bounds it held go. */
        p->bounds_ok = 0;
        pb__lowest_ranks_cut(p->source, p->per == sizeof(double) ? 8u : 4u,
                             first, end, k, p->hist, positions);
        for (size_t t = 0; t < k; ++t) {
            const size_t r = positions[t];
            positions[t] = p->c.pos[r];
            scores[t] = pb__source_score(inst, r);
        }
        return;
    }
    if (k == 0u || p->per == 0u) {
        pb__source_peek_lowest(inst, first, end, k, positions, scores, work);
        return;
    }
    assert(k <= end - first);
    /* The keys in (key, rank) order, one at a time: the first is the
     * first rank holding the least key, from the observe's hint where it
     * covers this range (as the evict of one finds it); each next is the
     * least (key, rank) over the ranks not yet taken, the runs between
     * them scanned in rank order so that an equal key keeps the lower
     * rank. taken[] holds the ranks so far, ascending. */
    size_t taken[PB__SOURCE_FEW_KEYS];
    for (size_t t = 0; t < k; ++t) {
        size_t best = SIZE_MAX;
        if (t == 0u && p->least_ok && p->least_first == first &&
            p->least_end == end) {
            best = p->least_at;
        } else {
            uint64_t best_key = 0u;
            size_t lo = first;
            for (size_t u = 0; u <= t; ++u) {
                const size_t hi = u < t ? taken[u] : end;
                if (lo < hi) {
                    size_t at;
                    const uint64_t key = least_in(p, lo, hi, &at);
                    if (best == SIZE_MAX || key < best_key) {
                        best = at;
                        best_key = key;
                    }
                }
                lo = hi + 1u;
            }
        }
        assert(best != SIZE_MAX);
        positions[t] = p->c.pos[best];
        scores[t] = pb__source_score(inst, best);
        size_t u = t;
        while (u > 0u && taken[u - 1u] > best) {
            taken[u] = taken[u - 1u];
            --u;
        }
        taken[u] = best;
    }
}

size_t pb__source_peek_work_bytes(const pb_kvcache *inst) {
    (void)inst;
    return 0u;
}
