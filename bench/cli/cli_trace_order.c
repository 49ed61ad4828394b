/*
 * cli_trace_order.c - a trace's records in stream order (see
 * cli_trace_common.h): a first pass notes every record's stream and byte
 * offset, then each chosen record is read again at its offset, stream by
 * stream, so sums fed by the callback do not depend on how the file
 * interleaves its streams (docs/spec.md §18.1).
 */
#define _POSIX_C_SOURCE 200809L

#include "cli_trace_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

/* One record's place: its stream key and where it lies. */
typedef struct rec_at {
    uint32_t layer, head, slot;
    uint64_t index, offset;
} rec_at;

static int by_stream(const void *a, const void *b) {
    const rec_at *x = (const rec_at *)a, *y = (const rec_at *)b;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->head != y->head) return x->head < y->head ? -1 : 1;
    if (x->slot != y->slot) return x->slot < y->slot ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* The source of a reader that sees the header, then the file from the
 * position the FILE was moved to. */
typedef struct at_src {
    FILE *f;
    const unsigned char *hdr;
    size_t hdr_len, pos;
} at_src;

static size_t at_read(void *ctx, void *buf, size_t n) {
    at_src *s = (at_src *)ctx;
    size_t got = 0;
    if (s->pos < s->hdr_len) {
        got = s->hdr_len - s->pos < n ? s->hdr_len - s->pos : n;
        memcpy(buf, s->hdr + s->pos, got);
        s->pos += got;
    }
    if (got < n) got += fread((unsigned char *)buf + got, 1, n - got, s->f);
    return got;
}

/* The first pass: every record of a chosen kind, in file order. */
static int note_records(const char *path, uint32_t kinds, rec_at **out,
                        size_t *n_out, char *err, size_t err_len) {
    pb_tr_reader *r = NULL;
    if (pb_tr_reader_open_file(path, &r, err, err_len) != 0) return -1;
    const uint32_t G = pb_tr_reader_shape(r)->group_size;
    rec_at *v = NULL;
    size_t n = 0, cap = 0;
    pb_tr_record rec;
    const float *values;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &values, err, err_len)) == 1) {
        if (!(kinds & (1u << rec.kind))) continue;
        if (n == cap) {
            const size_t want = cap ? 2u * cap : 256u;
            rec_at *g = (rec_at *)realloc(v, want * sizeof *v);
            if (g == NULL) {
                snprintf(err, err_len, "out of memory");
                got = -1;
                break;
            }
            v = g;
            cap = want;
        }
        v[n].layer = rec.layer;
        v[n].head = rec.head;
        v[n].slot = rec.qhead == PB_TR_GROUP_REDUCED ? G : rec.qhead;
        v[n].index = rec.index;
        v[n].offset = rec.offset;
        ++n;
    }
    pb_tr_reader_close(r);
    if (got < 0) {
        free(v);
        return -1;
    }
    qsort(v, n, sizeof *v, by_stream);
    *out = v;
    *n_out = n;
    return 0;
}

int pb_cli_visit_stream_order(const char *path, uint32_t kinds,
                              pb_cli_record_fn fn, void *ctx, char *err,
                              size_t err_len) {
    rec_at *at = NULL;
    size_t n = 0;
    if (note_records(path, kinds, &at, &n, err, err_len) != 0) return -1;
    FILE *f = fopen(path, "rb");
    unsigned char head[PB_TR_HEADER_MAX];
    size_t hl = 0;
    int rc = -1;
    if (f != NULL && fread(head, 1, 16u, f) == 16u) {
        hl = (size_t)head[12] | (size_t)head[13] << 8 |
             (size_t)head[14] << 16 | (size_t)head[15] << 24;
        if (hl >= 16u && hl <= sizeof head &&
            fread(head + 16, 1, hl - 16u, f) == hl - 16u)
            rc = 0;
    }
    if (rc != 0) snprintf(err, err_len, "cannot read the file again");
    for (size_t i = 0; rc == 0 && i < n; ++i) {
        at_src src = {f, head, hl, 0u};
        pb_tr_reader *r = NULL;
        pb_tr_record rec;
        const float *v = NULL;
        if (fseeko(f, (off_t)at[i].offset, SEEK_SET) != 0 ||
            pb_tr_reader_open(at_read, &src, &r, err, err_len) != 0 ||
            pb_tr_reader_next(r, &rec, &v, err, err_len) != 1) {
            if (r == NULL || v == NULL)
                snprintf(err, err_len, "record %llu at byte %llu: cannot be "
                         "read again", (unsigned long long)at[i].index,
                         (unsigned long long)at[i].offset);
            rc = -1;
        } else {
            rec.index = at[i].index;
            rec.offset = at[i].offset;
            rc = fn(ctx, &rec, v, err, err_len) != 0 ? -1 : 0;
        }
        pb_tr_reader_close(r);
    }
    if (f != NULL) fclose(f);
    free(at);
    return rc;
}
