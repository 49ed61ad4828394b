/*
 * cli_calibrate_measure.c - the third pass of `pyramidkv calibrate`: every
 * prefill record of a trace compressed under every allocation compared
 * (schedule x head mode), with the retained mass of each record measured.
 *
 * One prompt's records of one layer (consecutive, same rows, query and
 * length) go through one layer group (pyramidkv_group.h, docs/spec.md §16)
 * sized by the schedule's per-head share: with a floor of 1000 permille
 * every head keeps exactly the share (per-head uniform), with Ada-KV's
 * default 200 the heads share the layer's pool (head-adaptive). Both modes
 * use the same selection (window scorer, the record's rows as the window,
 * max pooling of width 7, consistent scope), so they differ only in how
 * the layer's positions are spread over its heads. Each record's heavy
 * hitters (the positions before the window its rows attend to most) are
 * found once, then looked up in every allocation's kept positions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_calibrate.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define POOL_KERNEL 7u
#define ADAPTIVE_FLOOR_PERMILLE 200u

/* One prompt's records of one layer, waiting to be compressed together. */
typedef struct cal_batch {
    uint32_t layer, rows, query, length, n, cap;
    uint32_t *heads;  /* [cap] each member's KV head */
    float *values;    /* [cap][max_window * max_len] */
    size_t stride;    /* floats per member */
    uint32_t *kept;   /* [cap * max_len] */
    size_t *counts;   /* [cap] */
    uint32_t *top;    /* [cap][PB_CAL_TOP_K] each member's heavy hitters */
    uint32_t *n_top;  /* [cap] */
    double *col;      /* [max_len] scratch: window-summed attention */
    uint32_t *order;  /* [max_len] scratch */
} cal_batch;

static const double *g_col; /* qsort's key, set by heavy_hitters */

/* More window-summed attention first, then the lower position. */
static int cmp_col(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g_col[x] != g_col[y]) return g_col[x] > g_col[y] ? -1 : 1;
    return x < y ? -1 : (x > y);
}

/* Member m's heavy hitters: the PB_CAL_TOP_K positions before the window
 * (below query) with the most attention summed over the window rows, ties
 * to the lower position; fewer when fewer precede the window. */
static void heavy_hitters(cal_batch *b, uint32_t m) {
    const float *v = b->values + (size_t)m * b->stride;
    const uint32_t q = b->query < b->length ? b->query : b->length;
    for (uint32_t i = 0; i < q; ++i) {
        double c = 0.0;
        for (uint32_t j = 0; j < b->rows; ++j)
            c += v[(size_t)j * b->length + i];
        b->col[i] = c;
        b->order[i] = i;
    }
    g_col = b->col;
    qsort(b->order, q, sizeof *b->order, cmp_col);
    const uint32_t k = q < PB_CAL_TOP_K ? q : PB_CAL_TOP_K;
    memcpy(b->top + (size_t)m * PB_CAL_TOP_K, b->order, k * sizeof *b->order);
    b->n_top[m] = k;
}

/* The share of member m's heavy hitters among the ascending kept
 * positions (1 when it has none). */
static double top_recall(const cal_batch *b, uint32_t m,
                         const uint32_t *kept, size_t n_kept) {
    const uint32_t *top = b->top + (size_t)m * PB_CAL_TOP_K;
    const uint32_t k = b->n_top[m];
    if (k == 0u) return 1.0;
    uint32_t hit = 0;
    for (uint32_t t = 0; t < k; ++t) {
        size_t lo = 0, hi = n_kept;
        while (lo < hi) {
            const size_t mid = lo + (hi - lo) / 2u;
            if (kept[mid] < top[t]) lo = mid + 1u; else hi = mid;
        }
        hit += lo < n_kept && kept[lo] == top[t];
    }
    return (double)hit / (double)k;
}

/* The retained mass of rows x length values `v` (rows at positions query
 * .. query + rows - 1) on the ascending positions kept[0 .. n_kept-1]. */
static double kept_mass(const float *v, uint32_t rows, uint32_t query,
                        uint32_t length, const uint32_t *kept, size_t n_kept) {
    double held = 0.0, all = 0.0;
    for (uint32_t j = 0; j < rows; ++j) {
        const float *row = v + (size_t)j * length;
        const size_t seen = (size_t)query + j + 1u;
        for (size_t i = 0; i < seen && i < length; ++i) all += row[i];
        for (size_t i = 0; i < n_kept && kept[i] < seen; ++i)
            held += row[kept[i]];
    }
    return all > 0.0 ? held / all : 1.0;
}

/* The batch under one allocation: one group, one prefill, every member's
 * mass added. 0, or -1 with a message. */
static int run_batch(const cal_batch *b, cal_sched *s, uint32_t kv_heads,
                     char *err, size_t err_len) {
    const uint32_t share = s->shares[b->layer];
    pb_kvcache_config head = PB_KVCACHE_CONFIG_DEFAULT;
    head.budget = share > b->rows ? share : b->rows + 1u;
    head.share = head.budget;
    head.num_layers = 1u;
    head.pyramid_ratio = 1u;
    head.recent_window = b->rows;
    head.obs_window = b->rows;
    head.pool_kernel = POOL_KERNEL;
    pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    gp.num_heads = b->n;
    gp.floor_permille = s->heads == PB_CAL_HEADS_ADAPTIVE
                            ? ADAPTIVE_FLOOR_PERMILLE
                            : 1000u;
    gp.prefill_max_len = b->length;
    pb_kvcache_group *g = NULL;
    size_t n_kept = 0;
    pb_status st = pb_kvcache_group_create(&head, &gp, NULL, &g);
    if (st == PB_OK)
        st = pb_kvcache_group_prefill(
            g, b->values, b->stride, b->rows, b->length, UINT64_MAX, NULL, 0,
            b->kept, (size_t)b->n * b->length, b->counts, b->n, &n_kept);
    pb_kvcache_group_destroy(g);
    if (st != PB_OK) {
        snprintf(err, err_len, "layer %u: group prefill of %u heads: %s",
                 b->layer, b->n, pb_status_str(st));
        return -1;
    }
    const uint32_t *kept = b->kept;
    for (uint32_t m = 0; m < b->n; ++m) {
        const double mass =
            kept_mass(b->values + (size_t)m * b->stride, b->rows, b->query,
                      b->length, kept, b->counts[m]);
        s->recall_sum[(size_t)b->layer * kv_heads + b->heads[m]] +=
            top_recall(b, m, kept, b->counts[m]);
        kept += b->counts[m];
        s->mass_sum[b->layer] += mass;
        s->head_sum[(size_t)b->layer * kv_heads + b->heads[m]] += mass;
    }
    return 0;
}

/* Every allocation on the batch; its records counted and their heavy
 * hitters found first. */
static int flush(cal_batch *b, cal_sched *sc, size_t n_sched,
                 uint32_t kv_heads, uint64_t *records, char *err,
                 size_t err_len) {
    if (b->n == 0u) return 0;
    for (uint32_t m = 0; m < b->n; ++m) {
        records[(size_t)b->layer * kv_heads + b->heads[m]] += 1u;
        heavy_hitters(b, m);
    }
    for (size_t s = 0; s < n_sched; ++s)
        if (run_batch(b, &sc[s], kv_heads, err, err_len) != 0) return -1;
    b->n = 0;
    return 0;
}

int pb_cli_calibrate_measure(const char *path, const pb_cli_scan *scan,
                             cal_sched *sc, size_t n_sched,
                             uint64_t *records, char *err, size_t err_len) {
    const uint32_t kv_heads = scan->shape.num_kv_heads;
    cal_batch b;
    memset(&b, 0, sizeof b);
    b.cap = kv_heads * (scan->shape.group_size ? scan->shape.group_size : 1u);
    b.stride = (size_t)scan->max_window * scan->max_len;
    b.heads = (uint32_t *)calloc(b.cap, sizeof *b.heads);
    b.values = (float *)malloc((size_t)b.cap * b.stride * sizeof *b.values);
    b.kept = (uint32_t *)malloc((size_t)b.cap * scan->max_len *
                                sizeof *b.kept);
    b.counts = (size_t *)calloc(b.cap, sizeof *b.counts);
    b.top = (uint32_t *)malloc((size_t)b.cap * PB_CAL_TOP_K * sizeof *b.top);
    b.n_top = (uint32_t *)calloc(b.cap, sizeof *b.n_top);
    b.col = (double *)malloc((size_t)scan->max_len * sizeof *b.col);
    b.order = (uint32_t *)malloc((size_t)scan->max_len * sizeof *b.order);
    pb_tr_reader *r = NULL;
    int got = -1;
    if (b.heads == NULL || b.values == NULL || b.kept == NULL ||
        b.counts == NULL || b.top == NULL || b.n_top == NULL ||
        b.col == NULL || b.order == NULL)
        snprintf(err, err_len, "out of memory");
    else if (pb_tr_reader_open_file(path, &r, err, err_len) == 0)
        got = 1;
    pb_tr_record rec;
    const float *v;
    while (got == 1 &&
           (got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1) {
        if (rec.kind != PB_TR_PREFILL) continue;
        const int same = b.n > 0u && b.n < b.cap && rec.layer == b.layer &&
                         rec.rows == b.rows && rec.query == b.query &&
                         rec.length == b.length;
        if (!same && flush(&b, sc, n_sched, kv_heads, records, err,
                           err_len) != 0) {
            got = -1;
            break;
        }
        b.layer = rec.layer;
        b.rows = rec.rows;
        b.query = rec.query;
        b.length = rec.length;
        b.heads[b.n] = rec.head;
        memcpy(b.values + (size_t)b.n * b.stride, v,
               (size_t)rec.rows * rec.length * sizeof *v);
        b.n += 1u;
    }
    if (got == 0 &&
        flush(&b, sc, n_sched, kv_heads, records, err, err_len) != 0)
        got = -1;
    pb_tr_reader_close(r);
    free(b.heads);
    free(b.values);
    free(b.kept);
    free(b.counts);
    free(b.top);
    free(b.n_top);
    free(b.col);
    free(b.order);
    return got < 0 ? -1 : 0;
}
