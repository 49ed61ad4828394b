/*
 * trace_io.c - the attention trace file format (docs/trace_format.md):
 * the streaming reader, the writer, CRC-32 and the float16 conversions.
 * The reader holds one record at a time and never trusts a size before it
 * has read the bytes: a payload buffer grows only as payload bytes arrive.
 */
#define _POSIX_C_SOURCE 200809L

#include "trace_io.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const unsigned char MAGIC[8] = {0x89u, 'P', 'B', 'T', 'R',
                                       '\r',  '\n', 0x1Au};
static const unsigned char TAG_REC[4] = {'R', 'E', 'C', '1'};
static const unsigned char TAG_END[4] = {'E', 'N', 'D', '1'};

#define CHUNK 65536u

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

static uint32_t get32(const unsigned char *p);

/* CRC-32 (zlib's), eight bytes a step: table k is the CRC of a byte
 * followed by k zero bytes (slicing-by-8). */
uint32_t pb_tr_crc32(uint32_t crc, const void *data, size_t n) {
    static uint32_t t[8][256];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 256u; ++i) {
            uint32_t c = i;
            for (int k = 0; k < 8; ++k)
                c = (c & 1u) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            t[0][i] = c;
        }
        for (uint32_t i = 0; i < 256u; ++i)
            for (int k = 1; k < 8; ++k)
                t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
        ready = 1;
    }
    const unsigned char *p = (const unsigned char *)data;
    crc = ~crc;
    for (; n >= 8u; n -= 8u, p += 8u) {
        const uint32_t a = crc ^ get32(p), b = get32(p + 4u);
        crc = t[7][a & 0xFFu] ^ t[6][(a >> 8) & 0xFFu] ^
              t[5][(a >> 16) & 0xFFu] ^ t[4][a >> 24] ^ t[3][b & 0xFFu] ^
              t[2][(b >> 8) & 0xFFu] ^ t[1][(b >> 16) & 0xFFu] ^ t[0][b >> 24];
    }
    for (; n > 0u; --n, ++p) crc = t[0][(crc ^ *p) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

float pb_tr_f16_to_f32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h >> 15) << 31;
    const uint32_t exp = (h >> 10) & 0x1Fu;
    const uint32_t man = h & 0x3FFu;
    float f;
    if (exp == 0u) {
        f = (float)man * 0x1p-24f; /* zero or subnormal: exact */
        return sign ? -f : f;
    }
    uint32_t bits;
    if (exp == 31u) bits = sign | 0x7F800000u | (man << 13);
    else bits = sign | ((exp + 112u) << 23) | (man << 13);
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t pb_tr_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    const uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    const uint32_t exp = (x >> 23) & 0xFFu;
    uint32_t man = x & 0x7FFFFFu;
    if (exp == 255u) /* inf or NaN (quiet) */
        return (uint16_t)(sign | 0x7C00u | (man ? 0x200u : 0u));
    const int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7C00u); /* overflow: inf */
    if (e <= 0) {
        if (e < -10) return sign; /* below half the smallest subnormal */
        man |= 0x800000u;
        const unsigned shift = (unsigned)(14 - e);
        uint32_t v = man >> shift;
        const uint32_t rem = man & ((1u << shift) - 1u);
        const uint32_t half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (v & 1u))) v += 1u;
        return (uint16_t)(sign | v);
    }
    uint32_t v = ((uint32_t)e << 10) | (man >> 13);
    const uint32_t rem = man & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (v & 1u))) v += 1u; /* may
        carry into the exponent, up to inf: correct rounding */
    return (uint16_t)(sign | v);
}

static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
           (uint32_t)p[3] << 24;
}

static uint64_t get64(const unsigned char *p) {
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v) {
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static void say(char *err, size_t len, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

static void say(char *err, size_t len, const char *fmt, ...) {
    if (err == NULL || len == 0u) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, len, fmt, ap);
    va_end(ap);
}

/* The record checks shared by reader and writer: 0, or -1 with a message
 * (without the record prefix). */
static int check_fields(const pb_tr_shape *s, const pb_tr_record *r,
                        char *err, size_t len) {
    if (r->kind == PB_TR_FUTURE && s->version < 2u) {
        say(err, len, "record kind 3 (future rows) needs trace version 2, "
            "the header says version %u", s->version);
        return -1;
    }
    if (r->kind == PB_TR_PREFERENCE && s->version < 3u) {
        say(err, len, "record kind 4 (preference rows) needs trace version "
            "3, the header says version %u", s->version);
        return -1;
    }
    if (r->kind != PB_TR_PREFILL && r->kind != PB_TR_DECODE &&
        r->kind != PB_TR_FUTURE && r->kind != PB_TR_PREFERENCE) {
        say(err, len, "unknown record kind %u (1 prefill, 2 decode, 3 future, "
            "4 preference)", r->kind);
        return -1;
    }
    if (r->dtype != PB_TR_F32 && r->dtype != PB_TR_F16) {
        say(err, len, "unknown value type %u (1 float32, 2 float16)", r->dtype);
        return -1;
    }
    if (r->layer >= s->num_layers) {
        say(err, len, "layer %u is not below the %u layers of the header",
            r->layer, s->num_layers);
        return -1;
    }
    if (r->head >= s->num_kv_heads) {
        say(err, len, "KV head %u is not below the %u KV heads of the header",
            r->head, s->num_kv_heads);
        return -1;
    }
    if (r->qhead != PB_TR_GROUP_REDUCED && r->qhead >= s->group_size) {
        say(err, len,
            "query head %u is not below the group size %u (nor 0xFFFFFFFF, "
            "the reduced group)", r->qhead, s->group_size);
        return -1;
    }
    if (r->length == 0u || r->length > PB_TR_MAX_LEN) {
        say(err, len, "row length %u is outside 1 .. %u", r->length,
            PB_TR_MAX_LEN);
        return -1;
    }
    if (r->kind == PB_TR_DECODE) {
        if (r->rows != 1u || (uint64_t)r->query + 1u != r->length) {
            say(err, len,
                "a decode record has 1 row and length query + 1 (rows %u, "
                "query %u, length %u)", r->rows, r->query, r->length);
            return -1;
        }
    } else {
        if (r->rows == 0u || r->rows > PB_TR_MAX_ROWS ||
            (uint64_t)r->query + r->rows != r->length) {
            say(err, len,
                "a %s record has 1 .. %u rows and query + rows == length "
                "(rows %u, query %u, length %u)",
                r->kind == PB_TR_FUTURE       ? "future"
                : r->kind == PB_TR_PREFERENCE ? "preference"
                                              : "prefill",
                PB_TR_MAX_ROWS,
                r->rows, r->query, r->length);
            return -1;
        }
        if ((uint64_t)r->rows * r->length > PB_TR_MAX_VALUES) {
            say(err, len, "%u rows x %u keys exceed %u values per record",
                r->rows, r->length, PB_TR_MAX_VALUES);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Reader                                                                   */

struct pb_tr_reader {
    pb_tr_read_fn read;
    void *ctx;
    FILE *file;
    pb_tr_shape shape;
    uint64_t offset;  /* bytes consumed */
    uint64_t records; /* data records read */
    int state;        /* 0 reading, 1 ended, -1 failed */
    char msg[256];
    float *values;
    size_t values_cap;
    unsigned char *raw;
};

static size_t file_read(void *ctx, void *buf, size_t n) {
    return fread(buf, 1, n, (FILE *)ctx);
}

static size_t take(pb_tr_reader *r, void *buf, size_t n) {
    const size_t got = r->read(r->ctx, buf, n);
    r->offset += got;
    return got;
}

static int fail(pb_tr_reader *r, char *err, size_t len) {
    r->state = -1;
    say(err, len, "%s", r->msg);
    return -1;
}

int pb_tr_reader_open(pb_tr_read_fn read, void *ctx, pb_tr_reader **out,
                      char *err, size_t err_len) {
    *out = NULL;
    pb_tr_reader *r = (pb_tr_reader *)calloc(1, sizeof *r);
    unsigned char *raw = (unsigned char *)malloc(CHUNK);
    if (r == NULL || raw == NULL) {
        free(r);
        free(raw);
        say(err, err_len, "out of memory");
        return -1;
    }
    r->read = read;
    r->ctx = ctx;
    r->raw = raw;
    unsigned char h[PB_TR_HEADER_MAX];
    size_t got = take(r, h, 16u);
    const char *bad = NULL;
    char buf[200];
    if (memcmp(h, MAGIC, got < 8u ? got : 8u) != 0) {
        bad = "not a pyramidkv trace (bad magic)";
    } else if (got < 16u) {
        snprintf(buf, sizeof buf,
                 "truncated header: %zu of at least %u bytes", got,
                 PB_TR_HEADER_MIN);
        bad = buf;
    } else if (get32(h + 8) == 0u || get32(h + 8) > PB_TR_VERSION) {
        snprintf(buf, sizeof buf,
                 "unsupported trace version %u (this reader reads versions 1 "
                 "to %u)", get32(h + 8), PB_TR_VERSION);
        bad = buf;
    } else {
        const uint32_t hsize = get32(h + 12);
        if (hsize < PB_TR_HEADER_MIN || hsize > PB_TR_HEADER_MAX) {
            snprintf(buf, sizeof buf,
                     "header size %u is outside %u .. %u bytes", hsize,
                     PB_TR_HEADER_MIN, PB_TR_HEADER_MAX);
            bad = buf;
        } else if ((got += take(r, h + 16, hsize - 16u)) < hsize) {
            snprintf(buf, sizeof buf, "truncated header: %zu of %u bytes",
                     got, hsize);
            bad = buf;
        } else if (pb_tr_crc32(0u, h, hsize - 4u) != get32(h + hsize - 4u)) {
            bad = "header checksum mismatch (corrupt header)";
        } else {
            r->shape.num_layers = get32(h + 16);
            r->shape.num_kv_heads = get32(h + 20);
            r->shape.group_size = get32(h + 24);
            r->shape.version = get32(h + 8);
            int zero = 1;
            for (size_t i = 28; i < hsize - 4u; ++i) zero &= h[i] == 0u;
            if (r->shape.num_layers == 0u ||
                r->shape.num_layers > PB_TR_MAX_LAYERS ||
                r->shape.num_kv_heads == 0u ||
                r->shape.num_kv_heads > PB_TR_MAX_HEADS ||
                r->shape.group_size == 0u ||
                r->shape.group_size > PB_TR_MAX_GROUP) {
                snprintf(buf, sizeof buf,
                         "bad model shape: %u layers (1 .. %u), %u KV heads "
                         "(1 .. %u), group size %u (1 .. %u)",
                         r->shape.num_layers, PB_TR_MAX_LAYERS,
                         r->shape.num_kv_heads, PB_TR_MAX_HEADS,
                         r->shape.group_size, PB_TR_MAX_GROUP);
                bad = buf;
            } else if (!zero) {
                bad = "header flags or reserved bytes are not zero";
            }
        }
    }
    if (bad != NULL) {
        say(err, err_len, "%s", bad);
        free(r->raw);
        free(r);
        return -1;
    }
    *out = r;
    return 0;
}

int pb_tr_reader_open_file(const char *path, pb_tr_reader **out, char *err,
                           size_t err_len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        say(err, err_len, "cannot open the file");
        return -1;
    }
    /* A directory opens for reading but reads as nothing. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        say(err, err_len, "a directory, not a regular file");
        fclose(f);
        return -1;
    }
    if (pb_tr_reader_open(file_read, f, out, err, err_len) != 0) {
        fclose(f);
        return -1;
    }
    (*out)->file = f;
    return 0;
}

const pb_tr_shape *pb_tr_reader_shape(const pb_tr_reader *r) {
    return &r->shape;
}

/* Makes room for n values, growing geometrically. */
static int reserve(pb_tr_reader *r, size_t n) {
    if (n <= r->values_cap) return 0;
    size_t cap = r->values_cap ? r->values_cap : 4096u;
    while (cap < n) cap *= 2u;
    float *v = (float *)realloc(r->values, cap * sizeof *v);
    if (v == NULL) return -1;
    r->values = v;
    r->values_cap = cap;
    return 0;
}

static int read_end(pb_tr_reader *r, const unsigned char *h,
                    uint64_t at, char *err, size_t len) {
    int zero = 1;
    for (size_t i = 4; i < 8u; ++i) zero &= h[i] == 0u;
    for (size_t i = 16; i < 32u; ++i) zero &= h[i] == 0u;
    const uint64_t count = get64(h + 8);
    if (!zero) {
        snprintf(r->msg, sizeof r->msg,
                 "end record at byte %llu: reserved bytes are not zero",
                 (unsigned long long)at);
        return fail(r, err, len);
    }
    if (count != r->records) {
        snprintf(r->msg, sizeof r->msg,
                 "end record says %llu records, the file holds %llu",
                 (unsigned long long)count, (unsigned long long)r->records);
        return fail(r, err, len);
    }
    unsigned char extra;
    if (take(r, &extra, 1u) != 0u) {
        snprintf(r->msg, sizeof r->msg,
                 "trailing bytes after the end record (byte %llu)",
                 (unsigned long long)(r->offset - 1u));
        return fail(r, err, len);
    }
    r->state = 1;
    return 0;
}

int pb_tr_reader_next(pb_tr_reader *r, pb_tr_record *rec,
                      const float **values, char *err, size_t err_len) {
    if (r->state == 1) return 0;
    if (r->state == -1) return fail(r, err, err_len);
    const uint64_t at = r->offset;
    const unsigned long long n_rec = (unsigned long long)r->records;
    unsigned char h[PB_TR_RECORD_HEAD];
    const size_t got = take(r, h, sizeof h);
    if (got == 0u) {
        snprintf(r->msg, sizeof r->msg,
                 "truncated: the file ends after %llu records without the "
                 "end record", n_rec);
        return fail(r, err, err_len);
    }
    if (got < sizeof h) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: truncated (%zu of %u header "
                 "bytes)", n_rec, (unsigned long long)at, got,
                 PB_TR_RECORD_HEAD);
        return fail(r, err, err_len);
    }
    const int is_rec = memcmp(h, TAG_REC, 4) == 0;
    const int is_end = memcmp(h, TAG_END, 4) == 0;
    if (!is_rec && !is_end) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: bad record tag (corrupt file)",
                 n_rec, (unsigned long long)at);
        return fail(r, err, err_len);
    }
    if (pb_tr_crc32(0u, h, 32u) != get32(h + 32)) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: record header checksum mismatch "
                 "(corrupt file)", n_rec, (unsigned long long)at);
        return fail(r, err, err_len);
    }
    if (is_end) return read_end(r, h, at, err, err_len);

    pb_tr_record out;
    out.kind = h[4];
    out.dtype = h[5];
    out.layer = get32(h + 8);
    out.head = get32(h + 12);
    out.qhead = get32(h + 16);
    out.query = get32(h + 20);
    out.rows = get32(h + 24);
    out.length = get32(h + 28);
    out.index = r->records;
    out.offset = at;
    char why[200];
    int bad = check_fields(&r->shape, &out, why, sizeof why);
    if (bad == 0 && (h[6] != 0u || h[7] != 0u)) {
        snprintf(why, sizeof why, "reserved bytes are not zero");
        bad = -1;
    }
    if (bad != 0) {
        snprintf(r->msg, sizeof r->msg, "record %llu at byte %llu: %s", n_rec,
                 (unsigned long long)at, why);
        return fail(r, err, err_len);
    }

    /* The payload, chunk by chunk: CRC, conversion, value checks. */
    const size_t count = (size_t)out.rows * out.length;
    const size_t width = out.dtype == PB_TR_F32 ? 4u : 2u;
    uint32_t crc = 0u;
    size_t done = 0, first_bad = SIZE_MAX;
    while (done < count) {
        size_t n = count - done;
        if (n > CHUNK / width) n = CHUNK / width;
        if (reserve(r, done + n) != 0) {
            snprintf(r->msg, sizeof r->msg,
                     "record %llu: out of memory for %zu values", n_rec, count);
            return fail(r, err, err_len);
        }
        const size_t bytes = take(r, r->raw, n * width);
        if (bytes < n * width) {
            snprintf(r->msg, sizeof r->msg,
                     "record %llu at byte %llu: truncated (%zu of %zu payload "
                     "bytes)", n_rec, (unsigned long long)at,
                     done * width + bytes, count * width);
            return fail(r, err, err_len);
        }
        crc = pb_tr_crc32(crc, r->raw, bytes);
        for (size_t i = 0; i < n; ++i) {
            float v;
            if (width == 4u) {
                const uint32_t bits = get32(r->raw + 4u * i);
                memcpy(&v, &bits, sizeof v);
            } else {
                v = pb_tr_f16_to_f32((uint16_t)(r->raw[2u * i] |
                                                r->raw[2u * i + 1u] << 8));
            }
            if (!(v >= 0.0f && v <= 3.4028234663852886e38f) &&
                first_bad == SIZE_MAX)
                first_bad = done + i;
            r->values[done + i] = v;
        }
        done += n;
    }
    unsigned char c[4];
    if (take(r, c, 4u) < 4u) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: truncated (no payload checksum)",
                 n_rec, (unsigned long long)at);
        return fail(r, err, err_len);
    }
    if (get32(c) != crc) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: payload checksum mismatch "
                 "(corrupt file)", n_rec, (unsigned long long)at);
        return fail(r, err, err_len);
    }
    if (first_bad != SIZE_MAX) {
        snprintf(r->msg, sizeof r->msg,
                 "record %llu at byte %llu: the value at row %zu, key %zu is "
                 "NaN, infinite or negative", n_rec, (unsigned long long)at,
                 first_bad / out.length, first_bad % out.length);
        return fail(r, err, err_len);
    }
    r->records += 1u;
    *rec = out;
    *values = r->values;
    return 1;
}

void pb_tr_reader_close(pb_tr_reader *r) {
    if (r == NULL) return;
    if (r->file != NULL) fclose(r->file);
    free(r->values);
    free(r->raw);
    free(r);
}

/* ------------------------------------------------------------------------ */
/* Writer                                                                   */

struct pb_tr_writer {
    FILE *file;
    pb_tr_shape shape;
    uint64_t records;
    int failed;
};

int pb_tr_writer_open(const char *path, const pb_tr_shape *shape,
                      pb_tr_writer **out, char *err, size_t err_len) {
    *out = NULL;
    if (shape->num_layers == 0u || shape->num_layers > PB_TR_MAX_LAYERS ||
        shape->num_kv_heads == 0u || shape->num_kv_heads > PB_TR_MAX_HEADS ||
        shape->group_size == 0u || shape->group_size > PB_TR_MAX_GROUP) {
        say(err, err_len, "bad model shape");
        return -1;
    }
    pb_tr_writer *w = (pb_tr_writer *)calloc(1, sizeof *w);
    if (w == NULL) {
        say(err, err_len, "out of memory");
        return -1;
    }
    w->file = fopen(path, "wb");
    if (w->file == NULL) {
        free(w);
        say(err, err_len, "cannot create the file");
        return -1;
    }
    w->shape = *shape;
    w->shape.version =
        shape->version == 2u || shape->version == 3u ? shape->version : 1u;
    unsigned char h[PB_TR_HEADER_MIN];
    memset(h, 0, sizeof h);
    memcpy(h, MAGIC, 8);
    put32(h + 8, w->shape.version);
    put32(h + 12, PB_TR_HEADER_MIN);
    put32(h + 16, shape->num_layers);
    put32(h + 20, shape->num_kv_heads);
    put32(h + 24, shape->group_size);
    put32(h + 36, pb_tr_crc32(0u, h, 36u));
    if (fwrite(h, 1, sizeof h, w->file) != sizeof h) w->failed = 1;
    *out = w;
    return 0;
}

int pb_tr_writer_add(pb_tr_writer *w, const pb_tr_record *rec,
                     const float *values, char *err, size_t err_len) {
    if (check_fields(&w->shape, rec, err, err_len) != 0) return -1;
    const size_t count = (size_t)rec->rows * rec->length;
    for (size_t i = 0; i < count; ++i) {
        if (!(values[i] >= 0.0f && values[i] <= 3.4028234663852886e38f)) {
            say(err, err_len, "value %zu is NaN, infinite or negative", i);
            return -1;
        }
    }
    unsigned char h[PB_TR_RECORD_HEAD];
    memset(h, 0, sizeof h);
    memcpy(h, TAG_REC, 4);
    h[4] = (unsigned char)rec->kind;
    h[5] = (unsigned char)rec->dtype;
    put32(h + 8, rec->layer);
    put32(h + 12, rec->head);
    put32(h + 16, rec->qhead);
    put32(h + 20, rec->query);
    put32(h + 24, rec->rows);
    put32(h + 28, rec->length);
    put32(h + 32, pb_tr_crc32(0u, h, 32u));
    if (fwrite(h, 1, sizeof h, w->file) != sizeof h) w->failed = 1;
    unsigned char buf[4096];
    const size_t width = rec->dtype == PB_TR_F32 ? 4u : 2u;
    uint32_t crc = 0u;
    for (size_t i = 0; i < count;) {
        size_t n = 0;
        for (; i < count && n + width <= sizeof buf; ++i, n += width) {
            if (width == 4u) {
                uint32_t bits;
                memcpy(&bits, &values[i], sizeof bits);
                put32(buf + n, bits);
            } else {
                const uint16_t hv = pb_tr_f32_to_f16(values[i]);
                buf[n] = (unsigned char)hv;
                buf[n + 1u] = (unsigned char)(hv >> 8);
            }
        }
        crc = pb_tr_crc32(crc, buf, n);
        if (fwrite(buf, 1, n, w->file) != n) w->failed = 1;
    }
    unsigned char c[4];
    put32(c, crc);
    if (fwrite(c, 1, 4, w->file) != 4u) w->failed = 1;
    if (w->failed) {
        say(err, err_len, "write failed");
        return -1;
    }
    w->records += 1u;
    return 0;
}

int pb_tr_writer_close(pb_tr_writer *w, char *err, size_t err_len) {
    if (w == NULL) return 0;
    unsigned char h[PB_TR_RECORD_HEAD];
    memset(h, 0, sizeof h);
    memcpy(h, TAG_END, 4);
    put64(h + 8, w->records);
    put32(h + 32, pb_tr_crc32(0u, h, 32u));
    if (fwrite(h, 1, sizeof h, w->file) != sizeof h) w->failed = 1;
    if (fclose(w->file) != 0) w->failed = 1;
    const int failed = w->failed;
    free(w);
    if (failed) {
        say(err, err_len, "write failed");
        return -1;
    }
    return 0;
}
