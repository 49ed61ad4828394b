/*
 * pooling.c - pooled scores: each held position's window score replaced by
 * the max (or the zero-padded average) over its kept neighbours within
 * (pool_kernel-1)/2 ranks on either side, clamped to the held range.
 *
 * Owns only the arithmetic on a dense array of scores, in place; it knows
 * nothing of the ring, the recent window or selection.
 *
 * Max pooling is exact in any evaluation order (a max never rounds), so it
 * is computed in O(n) whatever the kernel:
 *   - for half-widths up to PB__DOUBLING_MAX_HALF, by doubling: after
 *     ceil(log2(h+1)) in-place passes x[i] is the max of the h+1 values
 *     starting at i, and one more pass combines x[i-h] and x[i]. Every pass
 *     is a branch-free loop the compiler vectorises, so for the usual
 *     kernels (<= 2*PB__DOUBLING_MAX_HALF+1) this beats any queue;
 *   - beyond, by a monotonic queue (van Herk / Gil-Werman would need two
 *     more arrays of n doubles; the queue needs at most min(2h+1, n)
 *     entries, and its amortised cost is O(1) per score).
 * Average pooling is defined as a sum in ascending order divided by the
 * kernel; a running sum would round differently, so each window is summed
 * afresh and the cost is O(n * min(kernel, n)).
 */
#include <assert.h>

#include "pooling.h"

typedef struct pool_entry {
    double value;
    size_t index;
} pool_entry;

size_t pb__pool_work_bytes(uint32_t pool_kernel, size_t n_max) {
    const size_t h = (size_t)(pool_kernel - 1u) / 2u;
    if (h == 0u || n_max == 0u) return 0u;
    /* The queue (max pooling, large h) holds min(2h+1, n) entries; the
     * pending results of average pooling min(h+1, n) doubles. */
    const size_t k = (size_t)pool_kernel < n_max ? (size_t)pool_kernel : n_max;
    return k * sizeof(pool_entry);
}

static double max2(double a, double b) { return a < b ? b : a; }

/* x[i] <- max(x[i], x[i+d]) where i+d < n; ascending, so x[i+d] is still
 * the value of the previous pass when it is read. */
static void widen(double *x, size_t n, size_t d) {
    if (d >= n) return;
    const size_t m = n - d;
    for (size_t i = 0; i < m; ++i) x[i] = max2(x[i], x[i + d]);
}

static void pool_max_doubling(double *x, size_t n, size_t h) {
    /* After each pass x[i] = max of x[i .. i+cover-1] (clamped). */
    const size_t span = h + 1u;
    size_t cover = 1u;
    while (cover * 2u <= span) {
        widen(x, n, cover);
        cover *= 2u;
    }
    if (cover < span) widen(x, n, span - cover); /* overlapping halves */
    /* Now x[i] covers [i, i+h]; the window [i-h, i+h] (clamped) is the
     * union of x[max(0, i-h)] and x[i]. Descending keeps x[i-h] intact. */
    for (size_t i = n; i-- > h;) x[i] = max2(x[i - h], x[i]);
    const size_t head = h < n ? h : n;
    for (size_t i = head; i-- > 1u;) x[i] = max2(x[0], x[i]);
}

static void pool_max_queue(double *x, size_t n, size_t h, pool_entry *q,
                           size_t q_cap) {
    /* q is a ring of q_cap entries holding the indices of a strictly
     * decreasing run of values, all inside the current window. Expired
     * entries leave before a new one arrives, so at most min(2h+1, n) are
     * ever held. */
    size_t head = 0, count = 0;
    for (size_t j = 0; j < n + h; ++j) {
        const size_t i = j - h; /* meaningful when j >= h */
        if (j >= h) {
            const size_t lower = i >= h ? i - h : 0u;
            while (count > 0u && q[head].index < lower) {
                head = head + 1u == q_cap ? 0u : head + 1u;
                --count;
            }
        }
        if (j < n) {
            const double v = x[j];
            while (count > 0u) {
                const size_t back = (head + count - 1u) % q_cap;
                if (q[back].value > v) break;
                --count;
            }
            assert(count < q_cap);
            const size_t at = (head + count) % q_cap;
            q[at].value = v;
            q[at].index = j;
            ++count;
        }
        if (j >= h) x[i] = q[head].value; /* x[i] is never read again */
    }
}

void pb__window_max_span(const pb__kernels *k, double *x, size_t len,
                         size_t h, size_t off, size_t m, double *out) {
    assert(h <= PB__DOUBLING_MAX_HALF && off + m <= len);
    /* As in pool_max_doubling: afterwards x[j] covers [j, j+h] of the span,
     * clamped at its end, which no window of the block reaches past unless
     * the span ends where the ranks do. */
    const size_t span = h + 1u;
    size_t cover = 1u;
    while (cover * 2u <= span) {
        k->widen(x, len, cover);
        cover *= 2u;
    }
    if (cover < span) k->widen(x, len, span - cover);
    /* The span starts at max(0, i0-h), so the left end of block element
     * j's window, clamped at 0, is at max(0, off + j - h) in the span. */
    size_t j = 0;
    for (; j < m && off + j < h; ++j) out[j] = max2(x[0], x[off + j]);
    if (j < m) k->max_of(x + off + j - h, x + off + j, out + j, m - j);
}

void pb__pool_max(double *x, size_t n, size_t h, void *work,
                  size_t work_bytes) {
    if (h == 0u || n <= 1u) return;
    if (h >= n - 1u) {
        /* Every window is the whole array. */
        double m = x[0];
        for (size_t i = 1; i < n; ++i) m = max2(m, x[i]);
        for (size_t i = 0; i < n; ++i) x[i] = m;
        return;
    }
    if (h <= PB__DOUBLING_MAX_HALF) {
        pool_max_doubling(x, n, h);
        return;
    }
    const size_t q_cap = 2u * h + 1u < n ? 2u * h + 1u : n;
    assert(work != NULL && work_bytes >= q_cap * sizeof(pool_entry));
    (void)work_bytes;
    pool_max_queue(x, n, h, (pool_entry *)work, q_cap);
}

void pb__pool_avg(double *x, size_t n, size_t h, uint32_t kernel, void *work,
                  size_t work_bytes) {
    if (h == 0u || n == 0u) return; /* (0.0 + x) / 1 == x */
    /* pending[] keeps the last results whose slots in x are still read by
     * later windows; result i is written back once window i+h+1 starts
     * after it, i.e. after window i+h is done. */
    const size_t p_cap = h + 1u < n ? h + 1u : n;
    assert(work != NULL && work_bytes >= p_cap * sizeof(double));
    (void)work_bytes;
    double *pending = (double *)work;
    const double k = (double)kernel;
    for (size_t i = 0; i < n; ++i) {
        const size_t lo = i >= h ? i - h : 0u;
        const size_t hi = n - 1u - i > h ? i + h : n - 1u;
        double sum = 0.0;
        for (size_t j = lo; j <= hi; ++j) sum += x[j];
        pending[i % p_cap] = sum / k;
        if (i >= h) x[i - h] = pending[(i - h) % p_cap];
    }
    const size_t first_unwritten = n > h ? n - h : 0u;
    for (size_t i = first_unwritten; i < n; ++i) x[i] = pending[i % p_cap];
}
