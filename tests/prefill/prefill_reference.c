/*
 * prefill_reference.c - the paper's prefill selection written the plainest
 * way (see prefill_reference.h): one loop for the scores, one for pooling,
 * a full sort for the top-k. Plus the decode-step feed and the random blocks
 * the prefill tests share.
 */
#include "prefill_reference.h"

#include <stdlib.h>
#include <string.h>

typedef struct pfref_entry {
    double pooled;
    size_t pos;
} pfref_entry;

/* Highest pooled score first; on equal scores the lower position first. */
static int by_pooled_desc(const void *a, const void *b) {
    const pfref_entry *x = a, *y = b;
    if (x->pooled > y->pooled) return -1;
    if (x->pooled < y->pooled) return 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

size_t pfref_select(const float *attn, size_t rows, size_t len, size_t share,
                    uint32_t kernel, uint32_t pool, unsigned char *keep) {
    const size_t w = rows;
    if (len <= share) {
        memset(keep, 1, len);
        return len;
    }
    const size_t prefix = len - w;
    double *s = malloc((prefix ? prefix : 1) * sizeof *s);
    pfref_entry *e = malloc((prefix ? prefix : 1) * sizeof *e);
    if (s == NULL || e == NULL) {
        free(s);
        free(e);
        return (size_t)-1;
    }

    /* s[p]: the W rows' attention to prefix position p, summed row by row. */
    for (size_t p = 0; p < prefix; ++p) {
        s[p] = 0.0;
        for (size_t row = 0; row < w; ++row)
            s[p] += (double)attn[row * len + p];
    }

    /* Pooling over the prefix only, stride 1, padding kernel/2. */
    const size_t h = kernel / 2u;
    for (size_t p = 0; p < prefix; ++p) {
        double best = -1.0, sum = 0.0;
        for (size_t d = 0; d < kernel; ++d) {
            /* Neighbour p - h + d, skipped when it falls outside the prefix. */
            if (p + d < h || p + d - h >= prefix) continue;
            const double v = s[p + d - h];
            sum += v;
            if (v > best) best = v;
        }
        e[p].pooled = pool == PB_POOL_AVG ? sum / (double)kernel : best;
        e[p].pos = p;
    }

    qsort(e, prefix, sizeof *e, by_pooled_desc);
    const size_t top = share > w ? share - w : 0;
    memset(keep, 0, len);
    for (size_t i = 0; i < top && i < prefix; ++i) keep[e[i].pos] = 1;
    for (size_t p = prefix; p < len; ++p) keep[p] = 1;

    size_t n = 0;
    for (size_t p = 0; p < len; ++p) n += keep[p];
    free(s);
    free(e);
    return n;
}

pb_status pfref_feed_reference(ref_policy *r, const float *attn, size_t rows,
                               size_t len) {
    const size_t first = len - rows; /* position of row 0 */
    for (size_t q = 1; q < len; ++q) {
        const float *row = q >= first ? attn + (q - first) * len : NULL;
        const pb_status st = ref_observe(r, (uint32_t)q, row, q);
        if (st != PB_OK) return st;
    }
    return PB_OK;
}

pb_status pfref_feed_library(pb_kvcache *policy, const float *attn,
                             size_t rows, size_t len) {
    const size_t first = len - rows;
    for (size_t q = 1; q < len; ++q) {
        const float *row = q >= first ? attn + (q - first) * len : NULL;
        const pb_status st = pb_kvcache_observe(policy, (uint32_t)q, row, q);
        if (st != PB_OK) return st;
    }
    return PB_OK;
}

void pfref_random_block(pbt_rng *g, float *attn, size_t rows, size_t len) {
    for (size_t j = 0; j < rows; ++j) {
        const size_t q = len - rows + j;
        float *row = attn + j * len;
        double total = 0.0;
        for (size_t p = 0; p <= q; ++p) {
            row[p] = (float)((pbt_next(g) >> 40) + 1u);
            total += (double)row[p];
        }
        for (size_t p = 0; p <= q; ++p)
            row[p] = (float)((double)row[p] / total);
        for (size_t p = q + 1; p < len; ++p) row[p] = 0.0f;
    }
}
