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
    uint32_t *streams;   /* [n] the members' streams, ascending; one block
                            with fut_rows and fut_query */
    float *values;       /* [n][rows * length] */
    size_t stride;
    float **fut;         /* [n] a member's future rows, or NULL */
    uint32_t *fut_rows, *fut_query;
    uint64_t *fut_index, *fut_offset; /* one block */
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
    /* Per member, what no allocation changes (measured once per batch):
     * the window rows' total attention, the future rows' attention summed
     * per prompt position, its total over the prompt, all their attention,
     * and the PB_CAL_PEAK most attended prompt positions. */
    double *win_all, *fcol, *fprompt, *fseen;
    uint32_t *peak, *n_peak;
    uint32_t max_len, max_members;
    uint64_t done, total;
} cal_work;

/* The k positions below n with the most col, ties to the lower position,
 * most first, into out; returns how many (fewer when n < k). */
static uint32_t top_of(const double *col, uint32_t n, uint32_t k,
                       uint32_t *out) {
    uint32_t got = 0;
    for (uint32_t i = 0; i < n; ++i) {
        if (got == k && !(col[i] > col[out[k - 1u]])) continue;
        uint32_t j = got < k ? got++ : k - 1u;
        for (; j > 0u && col[i] > col[out[j - 1u]]; --j) out[j] = out[j - 1u];
        out[j] = i;
    }
    return got;
}

static int has(const uint32_t *kept, size_t n, uint32_t pos) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2u;
        if (kept[mid] < pos) lo = mid + 1u; else hi = mid;
    }
    return lo < n && kept[lo] == pos;
}

/* What member m's rows say whatever is kept: its heavy hitters (the
 * PB_CAL_TOP_K positions before the window with the most attention summed
 * over the window rows), the window rows' total attention, and from its
 * future rows the per-position sums, their totals and the peak positions
 * (the PB_CAL_PEAK prompt positions with the most future attention). */
static void member_figures(cal_work *w, const cal_batch *b, uint32_t m) {
    const float *v = b->values + (size_t)m * b->stride;
    for (uint32_t i = 0; i < b->query; ++i) {
        double c = 0.0;
        for (uint32_t j = 0; j < b->rows; ++j)
            c += v[(size_t)j * b->length + i];
        w->col[i] = c;
    }
    w->n_top[m] = top_of(w->col, b->query, PB_CAL_TOP_K,
                         w->top + (size_t)m * PB_CAL_TOP_K);
    double all = 0.0;
    for (uint32_t j = 0; j < b->rows; ++j) {
        const float *row = v + (size_t)j * b->length;
        for (size_t i = 0; i < (size_t)b->query + j + 1u; ++i) all += row[i];
    }
    w->win_all[m] = all;
    w->fprompt[m] = w->fseen[m] = 0.0;
    w->n_peak[m] = 0;
    if (b->fut[m] == NULL) return;
    const uint32_t P = b->length, len = P + b->fut_rows[m];
    double *fc = w->fcol + (size_t)m * w->max_len;
    for (uint32_t i = 0; i < P; ++i) fc[i] = 0.0;
    double seen = 0.0;
    for (uint32_t j = 0; j < b->fut_rows[m]; ++j) {
        const float *row = b->fut[m] + (size_t)j * len;
        for (uint32_t i = 0; i < P; ++i) fc[i] += row[i];
        for (uint32_t i = 0; i <= P + j; ++i) seen += row[i];
    }
    double prompt = 0.0;
    for (uint32_t i = 0; i < P; ++i) prompt += fc[i];
    w->fprompt[m] = prompt;
    w->fseen[m] = seen;
    w->n_peak[m] = top_of(fc, P, PB_CAL_PEAK,
                          w->peak + (size_t)m * PB_CAL_PEAK);
}

/* The retained mass of member m's window rows on the ascending kept
 * positions. */
static double kept_mass(const cal_work *w, const cal_batch *b, uint32_t m,
                        const uint32_t *kept, size_t n_kept) {
    const float *v = b->values + (size_t)m * b->stride;
    double held = 0.0;
    for (uint32_t j = 0; j < b->rows; ++j) {
        const float *row = v + (size_t)j * b->length;
        const size_t seen = (size_t)b->query + j + 1u;
        for (size_t i = 0; i < n_kept && kept[i] < seen; ++i)
            held += row[kept[i]];
    }
    return w->win_all[m] > 0.0 ? held / w->win_all[m] : 1.0;
}

/* Member m's future loss under the kept positions: the future rows'
 * attention on evicted prompt positions (the prompt's total less the kept
 * positions' sums) into *lost, all their attention into *seen; their peak
 * positions' attention into *peak_all, that on evicted ones *peak_lost. */
static void future_loss(const cal_work *w, uint32_t m, const uint32_t *kept,
                        size_t n_kept, cal_sched *s, size_t at) {
    const double *fc = w->fcol + (size_t)m * w->max_len;
    double held = 0.0;
    for (size_t i = 0; i < n_kept; ++i) held += fc[kept[i]];
    const double lost = w->fprompt[m] - held;
    s->lost[at] += lost > 0.0 ? lost : 0.0;
    s->seen[at] += w->fseen[m];
    const uint32_t *pk = w->peak + (size_t)m * PB_CAL_PEAK;
    for (uint32_t t = 0; t < w->n_peak[m]; ++t) {
        s->peak_all[at] += fc[pk[t]];
        if (!has(kept, n_kept, pk[t])) s->peak_lost[at] += fc[pk[t]];
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
        const size_t at = (size_t)b->k * w->prep->layers * H + cell;
        s->pmass[at] += kept_mass(w, b, m, kept, w->counts[m]);
        if (b->fut[m] != NULL) future_loss(w, m, kept, w->counts[m], s, at);
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
        member_figures(w, b, m);
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
    free(b->fut_index);
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
    b->streams = (uint32_t *)calloc(3u * (size_t)b->n + 1u, sizeof(uint32_t));
    b->fut = (float **)calloc(b->n + 1u, sizeof *b->fut);
    b->fut_index = (uint64_t *)calloc(2u * (size_t)b->n + 1u, sizeof(uint64_t));
    if (b->streams == NULL || b->fut == NULL || b->fut_index == NULL) {
        batch_free(b);
        return NULL;
    }
    b->fut_rows = b->streams + b->n;
    b->fut_query = b->fut_rows + b->n;
    b->fut_offset = b->fut_index + b->n;
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

/* The measuring pass's state between records: the open batches. */
typedef struct measure_pass {
    cal_work *w;
    uint32_t *seen_pre, *seen_fut; /* per stream: records so far */
    cal_batch **open;
    size_t n_open, cap_open;
} measure_pass;

/* The open batch of prompt k of layer l, made if there is none. */
static cal_batch *batch_for(measure_pass *mp, uint32_t l, uint32_t k,
                            size_t *at) {
    size_t i = 0;
    while (i < mp->n_open && !(mp->open[i]->layer == l && mp->open[i]->k == k))
        ++i;
    *at = i;
    if (i < mp->n_open) return mp->open[i];
    if (mp->n_open == mp->cap_open) {
        cal_batch **g = (cal_batch **)realloc(
            mp->open, 2u * mp->cap_open * sizeof *mp->open);
        if (g == NULL) return NULL;
        mp->open = g;
        mp->cap_open *= 2u;
    }
    cal_batch *b = batch_new(mp->w->prep, l, k);
    if (b != NULL) mp->open[mp->n_open++] = b;
    return b;
}

/* One record: filed into its prompt's batch, which is measured and freed
 * once complete. */
static int measure_record(void *ctx, const pb_tr_record *rec, const float *v,
                          char *err, size_t err_len) {
    measure_pass *mp = (measure_pass *)ctx;
    const cal_prep *prep = mp->w->prep;
    if (rec->kind == PB_TR_DECODE || rec->kind == PB_TR_PREFERENCE) return 0;
    const uint32_t stream = pb_cli_calibrate_stream(prep, rec);
    const uint32_t k = rec->kind == PB_TR_FUTURE ? mp->seen_fut[stream]++
                                                 : mp->seen_pre[stream]++;
    if (rec->kind == PB_TR_FUTURE && k >= prep->n_pre[stream]) {
        snprintf(err, err_len, "record %llu at byte %llu: future record %u of "
                 "its stream (layer %u, KV head %u) has no prefill record %u",
                 (unsigned long long)rec->index,
                 (unsigned long long)rec->offset, k, rec->layer, rec->head, k);
        return -1;
    }
    size_t i = 0;
    cal_batch *b = batch_for(mp, rec->layer, k, &i);
    if (b == NULL) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    if (file_record(b, rec, v, stream, err, err_len) != 0) return -1;
    if (b->got_pre < b->n || b->got_fut < b->want_fut) return 0;
    const int rc = flush(mp->w, b, err, err_len);
    batch_free(b);
    mp->open[i] = mp->open[--mp->n_open];
    return rc;
}

int pb_cli_calibrate_measure(const char *path, const pb_cli_scan *scan,
                             const cal_prep *prep,
                             const cal_measure_opts *mo, cal_sched *sc,
                             size_t n_sched, uint64_t *records, char *err,
                             size_t err_len) {
    cal_work w = {.prep = prep, .mo = mo, .sc = sc, .n_sched = n_sched,
                  .records = records, .max_len = scan->max_len,
                  .max_members = prep->kv_heads * prep->slots};
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
    const size_t mm = w.max_members;
    w.win_all = (double *)calloc(3u * mm, sizeof(double));
    w.fcol = (double *)malloc(mm * w.max_len * sizeof *w.fcol);
    w.peak = (uint32_t *)malloc(mm * (PB_CAL_PEAK + 1u) * sizeof *w.peak);
    measure_pass mp = {&w, NULL, NULL, NULL, 0u, prep->layers + 1u};
    mp.seen_pre = (uint32_t *)calloc(per * prep->layers, sizeof(uint32_t));
    mp.seen_fut = (uint32_t *)calloc(per * prep->layers, sizeof(uint32_t));
    mp.open = (cal_batch **)calloc(mp.cap_open, sizeof *mp.open);
    int got = -1;
    if (w.kept == NULL || w.counts == NULL || w.top == NULL ||
        w.n_top == NULL || w.col == NULL || w.win_all == NULL ||
        w.fcol == NULL || w.peak == NULL ||
        mp.seen_pre == NULL || mp.seen_fut == NULL || mp.open == NULL)
        snprintf(err, err_len, "out of memory");
    else {
        w.fprompt = w.win_all + mm;
        w.fseen = w.fprompt + mm;
        w.n_peak = w.peak + mm * PB_CAL_PEAK;
        got = pb_cli_calibrate_visit(path, measure_record, &mp, err, err_len);
    }
    if (mo->progress && w.done > 0u) fputc('\n', stderr);
    for (size_t i = 0; i < mp.n_open; ++i) batch_free(mp.open[i]);
    free(mp.open);
    free(mp.seen_pre);
    free(mp.seen_fut);
    free(w.kept);
    free(w.counts);
    free(w.top);
    free(w.n_top);
    free(w.col);
    free(w.win_all);
    free(w.fcol);
    free(w.peak);
    return got < 0 ? -1 : 0;
}
