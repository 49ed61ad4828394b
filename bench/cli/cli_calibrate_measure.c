/*
 * cli_calibrate_measure.c - the measuring pass of `pyramidkv calibrate`:
 * every prompt of every layer compressed under every allocation compared
 * (schedule x head mode), its window figures and its future loss measured
 * (docs/spec.md §18.3, §18.4).
 *
 * Prompt k of layer l is the k-th prefill record of each of the layer's
 * streams (cal_prep counted them), so its records are gathered wherever
 * they lie in the file; a prompt is measured once all of them, and the
 * future records of the same streams and prompt, have arrived. Its
 * members are laid out in stream order, so the order of the streams in
 * the file changes nothing. Uniform and adaptive compress the members
 * together by one layer group (pyramidkv_group.h, §16) sized by the
 * schedule's per-head share: a floor of 1000 permille keeps every head at
 * the share, Ada-KV's 200 lets the heads share the layer's pool; fixed
 * per-head shares compress each member alone at its head's share. All use
 * the same selection (window scorer, every record row scoring, max pooling,
 * consistent scope).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_calibrate.h"
#include "pyramidkv/pyramidkv.h"
#include "trace_io.h"

#define ADAPTIVE_FLOOR_PERMILLE 200u

/* One prompt of one layer, gathered until complete. */
typedef struct cal_batch {
    uint32_t layer, k, rows, query, length, n, got_pre, want_fut, got_fut;
    uint32_t *streams;   /* [n] the members' streams, ascending */
    float *values;       /* [n][rows * length] */
    size_t stride;
    float **fut;         /* [n] a member's future rows, or NULL */
    uint32_t *fut_rows, *fut_query;
    uint64_t *fut_index, *fut_offset;
    int have_shape;
} cal_batch;

typedef struct cal_work {
    const cal_prep *prep;
    const cal_measure_opts *mo;
    cal_sched *sc;
    size_t n_sched;
    uint64_t *records;
    uint32_t *kept;   /* [members * max_len] */
    size_t *counts;   /* [members] */
    uint32_t *top;    /* [members][PB_CAL_TOP_K] heavy hitters */
    uint32_t *n_top;  /* [members] */
    double *col;      /* [max_len] */
    uint32_t *order;  /* [max_len] */
    uint32_t max_len, max_members;
    uint64_t done, total;
} cal_work;

static const double *g_col; /* qsort's key, set by heavy_hitters */

/* More window-summed attention first, then the lower position. */
static int cmp_col(const void *a, const void *b) {
    const uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    if (g_col[x] != g_col[y]) return g_col[x] > g_col[y] ? -1 : 1;
    return x < y ? -1 : (x > y);
}

/* Member m's heavy hitters into w->top: the PB_CAL_TOP_K positions
 * before the window with the most attention summed over the window rows,
 * ties to the lower position; fewer when fewer precede it. */
static void heavy_hitters(cal_work *w, const cal_batch *b, uint32_t m) {
    const float *v = b->values + (size_t)m * b->stride;
    for (uint32_t i = 0; i < b->query; ++i) {
        double c = 0.0;
        for (uint32_t j = 0; j < b->rows; ++j)
            c += v[(size_t)j * b->length + i];
        w->col[i] = c;
        w->order[i] = i;
    }
    g_col = w->col;
    qsort(w->order, b->query, sizeof *w->order, cmp_col);
    const uint32_t k = b->query < PB_CAL_TOP_K ? b->query : PB_CAL_TOP_K;
    memcpy(w->top + (size_t)m * PB_CAL_TOP_K, w->order, k * sizeof *w->order);
    w->n_top[m] = k;
}

static int has(const uint32_t *kept, size_t n, uint32_t pos) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (kept[mid] < pos) lo = mid + 1u; else hi = mid;
    }
    return lo < n && kept[lo] == pos;
}

/* The retained mass of the record's rows on the ascending kept
 * positions. */
static double kept_mass(const cal_batch *b, const float *v,
                        const uint32_t *kept, size_t n_kept) {
    double held = 0.0, all = 0.0;
    for (uint32_t j = 0; j < b->rows; ++j) {
        const float *row = v + (size_t)j * b->length;
        const size_t seen = (size_t)b->query + j + 1u;
        for (size_t i = 0; i < seen; ++i) all += row[i];
        for (size_t i = 0; i < n_kept && kept[i] < seen; ++i)
            held += row[kept[i]];
    }
    return all > 0.0 ? held / all : 1.0;
}

/* Member m's future rows: the attention on prompt positions not kept
 * into *lost, all their attention into *seen. */
static void future_loss(const cal_batch *b, uint32_t m, const uint32_t *kept,
                        size_t n_kept, double *lost, double *seen) {
    const float *f = b->fut[m];
    const uint32_t P = b->length, len = P + b->fut_rows[m];
    for (uint32_t j = 0; j < b->fut_rows[m]; ++j) {
        const float *row = f + (size_t)j * len;
        size_t at = 0;
        for (uint32_t i = 0; i <= P + j; ++i) {
            *seen += row[i];
            if (i >= P) continue;
            while (at < n_kept && kept[at] < i) ++at;
            if (!(at < n_kept && kept[at] == i)) *lost += row[i];
        }
    }
}

/* Member m's peak: the PB_CAL_PEAK prompt positions with the most future
 * attention summed over its future rows (ties to the lower position);
 * their attention into *all, that on the evicted ones into *lost. */
static void peak_loss(cal_work *w, const cal_batch *b, uint32_t m,
                      const uint32_t *kept, size_t n_kept, double *lost,
                      double *all) {
    const uint32_t P = b->length, len = P + b->fut_rows[m];
    for (uint32_t i = 0; i < P; ++i) {
        double c = 0.0;
        for (uint32_t j = 0; j < b->fut_rows[m]; ++j)
            c += b->fut[m][(size_t)j * len + i];
        w->col[i] = c;
        w->order[i] = i;
    }
    g_col = w->col;
    qsort(w->order, P, sizeof *w->order, cmp_col);
    for (uint32_t t = 0; t < P && t < PB_CAL_PEAK; ++t) {
        const uint32_t i = w->order[t];
        *all += w->col[i];
        if (!has(kept, n_kept, i)) *lost += w->col[i];
    }
}

/* Compresses `n` members starting at member `first` with one group of
 * per-head budget `share`; kept positions and counts from member first.
 * Returns the library's status. */
static pb_status compress(cal_work *w, const cal_batch *b, uint32_t first,
                          uint32_t n, uint32_t share, uint32_t floor_pm) {
    const uint32_t recent = w->mo->recent;
    pb_kvcache_config head = PB_KVCACHE_CONFIG_DEFAULT;
    head.budget = share > recent ? share : recent + 1u;
    head.share = head.budget;
    head.num_layers = 1u;
    head.pyramid_ratio = 1u;
    head.recent_window = recent;
    head.obs_window = b->rows;
    head.pool_kernel = w->mo->kernel;
    pb_kvcache_group_params gp = PB_KVCACHE_GROUP_PARAMS_DEFAULT;
    gp.num_heads = n;
    gp.floor_permille = floor_pm;
    gp.prefill_max_len = b->length;
    pb_kvcache_group *g = NULL;
    size_t n_kept = 0;
    pb_status st = pb_kvcache_group_create(&head, &gp, NULL, &g);
    if (st == PB_OK)
        st = pb_kvcache_group_prefill(
            g, b->values + (size_t)first * b->stride, b->stride, b->rows,
            b->length, UINT64_MAX, NULL, 0,
            w->kept + (size_t)first * b->length, (size_t)n * b->length,
            w->counts + first, n, &n_kept);
    pb_kvcache_group_destroy(g);
    /* The group packs its heads' positions; member m's go to m * length
     * (a later member's packed start is never past its slot, so moving the
     * last member first overwrites nothing unread). */
    if (st == PB_OK) {
        size_t at = 0;
        for (uint32_t m = 0; m < n; ++m) at += w->counts[first + m];
        for (uint32_t m = n; m-- > 0u;) {
            at -= w->counts[first + m];
            uint32_t *base = w->kept + (size_t)first * b->length;
            memmove(base + (size_t)m * b->length, base + at,
                    w->counts[first + m] * sizeof *base);
        }
    }
    return st;
}

/* The batch under one allocation. 0, or -1 with a message. */
static int run_batch(cal_work *w, const cal_batch *b, cal_sched *s,
                     char *err, size_t err_len) {
    const uint32_t H = w->prep->kv_heads, slots = w->prep->slots;
    pb_status st = PB_OK;
    if (s->heads == PB_CAL_HEADS_SHARES) {
        for (uint32_t m = 0; st == PB_OK && m < b->n; ++m) {
            const uint32_t head = (b->streams[m] / slots) % H;
            st = compress(w, b, m, 1u,
                          s->head_shares[(size_t)b->layer * H + head], 1000u);
        }
    } else {
        st = compress(w, b, 0u, b->n, s->shares[b->layer],
                      s->heads == PB_CAL_HEADS_ADAPTIVE
                          ? ADAPTIVE_FLOOR_PERMILLE : 1000u);
    }
    if (st != PB_OK) {
        snprintf(err, err_len, "layer %u, prompt %u: group prefill of %u "
                 "heads: %s", b->layer, b->k, b->n, pb_status_str(st));
        return -1;
    }
    for (uint32_t m = 0; m < b->n; ++m) {
        const uint32_t head = (b->streams[m] / slots) % H;
        const uint32_t *kept = w->kept + (size_t)m * b->length;
        const size_t cell = (size_t)b->layer * H + head;
        const double mass = kept_mass(b, b->values + (size_t)m * b->stride,
                                      kept, w->counts[m]);
        const size_t at = (size_t)b->k * w->prep->layers * H + cell;
        s->pmass[at] += mass;
        if (b->fut[m] != NULL) {
            future_loss(b, m, kept, w->counts[m], &s->lost[at], &s->seen[at]);
            peak_loss(w, b, m, kept, w->counts[m], &s->peak_lost[at],
                      &s->peak_all[at]);
        }
    }
    return 0;
}

/* Recall needs each member's heavy hitters once, then a look-up per
 * allocation; the kept positions of each allocation are recomputed. */
static int flush(cal_work *w, cal_batch *b, char *err, size_t err_len) {
    const uint32_t H = w->prep->kv_heads, slots = w->prep->slots;
    for (uint32_t m = 0; m < b->n; ++m) {
        if (b->fut[m] != NULL && b->fut_query[m] != b->length) {
            snprintf(err, err_len, "record %llu at byte %llu: a future record "
                     "starts at query %u, its prompt (layer %u, prompt %u) "
                     "has %u positions",
                     (unsigned long long)b->fut_index[m],
                     (unsigned long long)b->fut_offset[m], b->fut_query[m],
                     b->layer, b->k, b->length);
            return -1;
        }
        w->records[(size_t)b->layer * H + (b->streams[m] / slots) % H] += 1u;
        heavy_hitters(w, b, m);
    }
    for (size_t s = 0; s < w->n_sched; ++s) {
        if (run_batch(w, b, &w->sc[s], err, err_len) != 0) return -1;
        for (uint32_t m = 0; m < b->n; ++m) {
            const uint32_t n_top = w->n_top[m];
            const uint32_t *top = w->top + (size_t)m * PB_CAL_TOP_K;
            const uint32_t *kept = w->kept + (size_t)m * b->length;
            uint32_t hit = 0;
            for (uint32_t t = 0; t < n_top; ++t)
                hit += (uint32_t)has(kept, w->counts[m], top[t]);
            w->sc[s].precall[((size_t)b->k * w->prep->layers + b->layer) *
                                 H + (b->streams[m] / slots) % H] +=
                n_top ? (double)hit / n_top : 1.0;
        }
    }
    w->done += 1u;
    if (w->mo->progress)
        fprintf(stderr, "\rpyramidkv calibrate: %llu of %llu prompt-layers "
                "measured", (unsigned long long)w->done,
                (unsigned long long)w->total);
    return 0;
}

static void batch_free(cal_batch *b) {
    if (b == NULL) return;
    for (uint32_t m = 0; m < b->n; ++m) free(b->fut[m]);
    free(b->streams);
    free(b->values);
    free(b->fut);
    free(b->fut_rows);
    free(b->fut_query);
    free(b->fut_index);
    free(b->fut_offset);
    free(b);
}

/* A new batch for prompt k of layer l: its members the layer's streams
 * with more than k prefill records. */
static cal_batch *batch_new(const cal_prep *p, uint32_t l, uint32_t k) {
    cal_batch *b = (cal_batch *)calloc(1, sizeof *b);
    const size_t per = (size_t)p->kv_heads * p->slots, first = (size_t)l * per;
    if (b == NULL) return NULL;
    b->layer = l;
    b->k = k;
    for (size_t s = first; s < first + per; ++s) {
        b->n += p->n_pre[s] > k;
        b->want_fut += p->n_fut[s] > k;
    }
    b->streams = (uint32_t *)calloc(b->n, sizeof *b->streams);
    b->fut = (float **)calloc(b->n, sizeof *b->fut);
    b->fut_rows = (uint32_t *)calloc(b->n, sizeof *b->fut_rows);
    b->fut_query = (uint32_t *)calloc(b->n, sizeof *b->fut_query);
    b->fut_index = (uint64_t *)calloc(b->n, sizeof *b->fut_index);
    b->fut_offset = (uint64_t *)calloc(b->n, sizeof *b->fut_offset);
    if (b->streams == NULL || b->fut == NULL || b->fut_rows == NULL ||
        b->fut_query == NULL || b->fut_index == NULL ||
        b->fut_offset == NULL) {
        batch_free(b);
        return NULL;
    }
    uint32_t m = 0;
    for (size_t s = first; s < first + per; ++s)
        if (p->n_pre[s] > k) b->streams[m++] = (uint32_t)s;
    return b;
}

static uint32_t member_of(const cal_batch *b, uint32_t stream) {
    uint32_t m = 0;
    while (m < b->n && b->streams[m] != stream) ++m;
    return m;
}

/* Files one record into its batch. 0, or -1 with a message. */
static int file_record(cal_batch *b, const pb_tr_record *rec,
                       const float *v, uint32_t stream, char *err,
                       size_t err_len) {
    const uint32_t m = member_of(b, stream);
    if (rec->kind == PB_TR_FUTURE) {
        b->fut[m] = (float *)malloc((size_t)rec->rows * rec->length *
                                    sizeof *v);
        if (b->fut[m] == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        memcpy(b->fut[m], v, (size_t)rec->rows * rec->length * sizeof *v);
        b->fut_rows[m] = rec->rows;
        b->fut_query[m] = rec->query;
        b->fut_index[m] = rec->index;
        b->fut_offset[m] = rec->offset;
        b->got_fut += 1u;
        return 0;
    }
    if (!b->have_shape) {
        b->rows = rec->rows;
        b->query = rec->query;
        b->length = rec->length;
        b->stride = (size_t)rec->rows * rec->length;
        b->values = (float *)malloc((size_t)b->n * b->stride * sizeof *v);
        if (b->values == NULL) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        b->have_shape = 1;
    } else if (rec->rows != b->rows || rec->length != b->length) {
        snprintf(err, err_len, "record %llu at byte %llu: prompt %u of layer "
                 "%u has %u rows over %u positions in another stream, this "
                 "record %u over %u", (unsigned long long)rec->index,
                 (unsigned long long)rec->offset, b->k, b->layer, b->rows,
                 b->length, rec->rows, rec->length);
        return -1;
    }
    memcpy(b->values + (size_t)m * b->stride, v, b->stride * sizeof *v);
    b->got_pre += 1u;
    return 0;
}

int pb_cli_calibrate_measure(const char *path, const pb_cli_scan *scan,
                             const cal_prep *prep,
                             const cal_measure_opts *mo, cal_sched *sc,
                             size_t n_sched, uint64_t *records, char *err,
                             size_t err_len) {
    cal_work w;
    memset(&w, 0, sizeof w);
    w.prep = prep;
    w.mo = mo;
    w.sc = sc;
    w.n_sched = n_sched;
    w.records = records;
    w.max_len = scan->max_len;
    w.max_members = prep->kv_heads * prep->slots;
    const size_t per = (size_t)prep->kv_heads * prep->slots;
    for (uint32_t l = 0; l < prep->layers; ++l) {
        uint32_t most = 0;
        for (size_t s = (size_t)l * per; s < (size_t)(l + 1u) * per; ++s)
            if (prep->n_pre[s] > most) most = prep->n_pre[s];
        w.total += most;
    }
    w.kept = (uint32_t *)malloc((size_t)w.max_members * w.max_len *
                                sizeof *w.kept);
    w.counts = (size_t *)calloc(w.max_members, sizeof *w.counts);
    w.top = (uint32_t *)malloc((size_t)w.max_members * PB_CAL_TOP_K *
                               sizeof *w.top);
    w.n_top = (uint32_t *)calloc(w.max_members, sizeof *w.n_top);
    w.col = (double *)malloc((size_t)w.max_len * sizeof *w.col);
    w.order = (uint32_t *)malloc((size_t)w.max_len * sizeof *w.order);
    uint32_t *seen_pre = (uint32_t *)calloc(per * prep->layers, sizeof(uint32_t));
    uint32_t *seen_fut = (uint32_t *)calloc(per * prep->layers, sizeof(uint32_t));
    cal_batch **open = (cal_batch **)calloc(prep->layers + 1u, sizeof *open);
    size_t n_open = 0, cap_open = prep->layers + 1u;
    pb_tr_reader *r = NULL;
    int got = -1;
    if (w.kept == NULL || w.counts == NULL || w.top == NULL ||
        w.n_top == NULL ||
        w.col == NULL || w.order == NULL || seen_pre == NULL ||
        seen_fut == NULL || open == NULL)
        snprintf(err, err_len, "out of memory");
    else if (pb_tr_reader_open_file(path, &r, err, err_len) == 0)
        got = 1;
    pb_tr_record rec;
    const float *v;
    while (got == 1 &&
           (got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1) {
        if (rec.kind == PB_TR_DECODE) continue;
        const uint32_t stream = pb_cli_calibrate_stream(prep, &rec);
        const uint32_t k = rec.kind == PB_TR_FUTURE ? seen_fut[stream]++
                                                    : seen_pre[stream]++;
        if (rec.kind == PB_TR_FUTURE && k >= prep->n_pre[stream]) {
            snprintf(err, err_len, "record %llu at byte %llu: future record "
                     "%u of its stream (layer %u, KV head %u) has no prefill "
                     "record %u", (unsigned long long)rec.index,
                     (unsigned long long)rec.offset, k, rec.layer, rec.head,
                     k);
            got = -1;
            break;
        }
        size_t i = 0;
        while (i < n_open && !(open[i]->layer == rec.layer && open[i]->k == k))
            ++i;
        if (i == n_open) {
            if (n_open == cap_open) {
                cal_batch **g = (cal_batch **)realloc(
                    open, 2u * cap_open * sizeof *open);
                if (g == NULL) {
                    snprintf(err, err_len, "out of memory");
                    got = -1;
                    break;
                }
                open = g;
                cap_open *= 2u;
            }
            open[n_open] = batch_new(prep, rec.layer, k);
            if (open[n_open] == NULL) {
                snprintf(err, err_len, "out of memory");
                got = -1;
                break;
            }
            n_open += 1u;
        }
        cal_batch *b = open[i];
        if (file_record(b, &rec, v, stream, err, err_len) != 0) {
            got = -1;
            break;
        }
        if (b->got_pre == b->n && b->got_fut == b->want_fut) {
            if (flush(&w, b, err, err_len) != 0) {
                got = -1;
                break;
            }
            batch_free(b);
            open[i] = open[--n_open];
        }
    }
    if (mo->progress && w.done > 0u) fputc('\n', stderr);
    pb_tr_reader_close(r);
    for (size_t i = 0; i < n_open; ++i) batch_free(open[i]);
    free(open);
    free(seen_pre);
    free(seen_fut);
    free(w.kept);
    free(w.counts);
    free(w.top);
    free(w.n_top);
    free(w.col);
    free(w.order);
    return got < 0 ? -1 : 0;
}
