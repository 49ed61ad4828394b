/*
 * test_trace_io.c - the attention trace format (bench/trace/trace_io.h,
 * docs/trace_format.md): CRC-32 and float16 against known values, a
 * writer -> reader round trip (float32 exact, float16 within rounding), and
 * the malformed files of the specification: every truncation, every single
 * bit flip, wrong magic, wrong version, an oversize header, a wrong count,
 * trailing bytes and bad values, each with its documented message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem_source.h"
#include "trace_io.h"

/* Reads a whole image; returns the number of records, or -1 with the
 * message in err. */
static long read_all(const unsigned char *p, size_t n, char *err,
                     size_t err_len) {
    membuf m = {p, n, 0};
    pb_tr_reader *r = NULL;
    err[0] = '\0';
    if (pb_tr_reader_open(mem_read, &m, &r, err, err_len) != 0) return -1;
    pb_tr_record rec;
    const float *v;
    long count = 0;
    int got;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, err_len)) == 1) ++count;
    /* After the end (or an error) it keeps answering the same. */
    assert_int_equal(pb_tr_reader_next(r, &rec, &v, err, err_len), got);
    pb_tr_reader_close(r);
    return got == 0 ? count : -1;
}

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    const long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)len);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* A small valid file: 2 layers, 2 heads, group 2; a prefill record of 3
 * rows over 5 keys, two decode rows (one float16, one of a reduced group). */
static unsigned char *small_file(size_t *n) {
    const char *path = "test_trace_io_small.trace";
    const pb_tr_shape shape = {2u, 2u, 2u, 1u};
    pb_tr_writer *w = NULL;
    char err[256];
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    float block[15];
    for (int i = 0; i < 15; ++i) block[i] = (float)i * 0.0625f;
    pb_tr_record r = {PB_TR_PREFILL, PB_TR_F32, 1u, 0u, 1u, 2u, 3u, 5u, 0, 0};
    assert_int_equal(pb_tr_writer_add(w, &r, block, err, sizeof err), 0);
    pb_tr_record d = {PB_TR_DECODE, PB_TR_F16, 0u, 1u, PB_TR_GROUP_REDUCED,
                      5u, 1u, 6u, 0, 0};
    assert_int_equal(pb_tr_writer_add(w, &d, block, err, sizeof err), 0);
    d.dtype = PB_TR_F32;
    d.query = 6u;
    d.length = 7u;
    assert_int_equal(pb_tr_writer_add(w, &d, block + 1, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    unsigned char *buf = slurp(path, n);
    remove(path);
    return buf;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = (unsigned char)(v >> (8 * i));
}

static void expect_error(const unsigned char *p, size_t n, const char *want) {
    char err[256];
    if (read_all(p, n, err, sizeof err) != -1) fail_msg("accepted: %s", want);
    if (strstr(err, want) == NULL)
        fail_msg("message '%s' lacks '%s'", err, want);
}

static void crc32_known_value(void **state) {
    (void)state;
    assert_int_equal(pb_tr_crc32(0u, "123456789", 9u), 0xCBF43926u);
    assert_int_equal(pb_tr_crc32(pb_tr_crc32(0u, "1234", 4u), "56789", 5u),
                     0xCBF43926u);
    assert_int_equal(pb_tr_crc32(0u, "", 0u), 0u);
}

static void float16_conversions(void **state) {
    (void)state;
    assert_int_equal(pb_tr_f32_to_f16(1.0f), 0x3C00u);
    assert_int_equal(pb_tr_f32_to_f16(65504.0f), 0x7BFFu);
    assert_int_equal(pb_tr_f32_to_f16(65520.0f), 0x7C00u); /* rounds to inf */
    assert_int_equal(pb_tr_f32_to_f16(ldexpf(1.0f, -24)), 0x0001u);
    assert_int_equal(pb_tr_f32_to_f16(ldexpf(1.0f, -25)), 0x0000u); /* tie: even */
    assert_int_equal(pb_tr_f32_to_f16(ldexpf(3.0f, -25)), 0x0002u); /* tie: even */
    assert_int_equal(pb_tr_f32_to_f16(0.1f), 0x2E66u);
    assert_int_equal(pb_tr_f32_to_f16(-2.0f), 0xC000u);
    assert_true(pb_tr_f16_to_f32(0x3555u) == 0.333251953125f);
    /* Every finite half survives half -> float -> half, and the float is
     * the exact value. */
    for (uint32_t h = 0; h < 0x10000u; ++h) {
        if ((h & 0x7C00u) == 0x7C00u) continue;
        const float f = pb_tr_f16_to_f32((uint16_t)h);
        assert_int_equal(pb_tr_f32_to_f16(f), h);
    }
    /* Rounding of floats between halves: within half an ulp. */
    for (uint32_t i = 0; i < 100000u; ++i) {
        const float f = (float)i * 0.0003f;
        const float back = pb_tr_f16_to_f32(pb_tr_f32_to_f16(f));
        assert_true(fabsf(back - f) <= fabsf(f) * 0x1p-11f + 0x1p-25f);
    }
}

static void round_trip(void **state) {
    (void)state;
    const char *path = "test_trace_io_rt.trace";
    const pb_tr_shape shape = {3u, 1u, 1u, 1u};
    char err[256];
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &shape, &w, err, sizeof err), 0);
    static float block[8 * 300];
    uint32_t x = 12345u;
    for (size_t i = 0; i < sizeof block / sizeof block[0]; ++i) {
        x = x * 1664525u + 1013904223u;
        block[i] = (float)(x >> 8) * 0x1p-24f * (i % 7u == 0u ? 1e-6f : 1.0f);
    }
    for (uint32_t k = 0; k < 6u; ++k) {
        pb_tr_record r = {PB_TR_PREFILL, k % 2u ? PB_TR_F16 : PB_TR_F32,
                          k % 3u, 0u, 0u, 292u, 8u, 300u, 0, 0};
        assert_int_equal(pb_tr_writer_add(w, &r, block, err, sizeof err), 0);
    }
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    pb_tr_reader *rd = NULL;
    assert_int_equal(pb_tr_reader_open_file(path, &rd, err, sizeof err), 0);
    assert_int_equal(pb_tr_reader_shape(rd)->num_layers, 3u);
    pb_tr_record rec;
    const float *v;
    for (uint32_t k = 0; k < 6u; ++k) {
        assert_int_equal(pb_tr_reader_next(rd, &rec, &v, err, sizeof err), 1);
        assert_int_equal(rec.layer, k % 3u);
        assert_int_equal(rec.index, k);
        for (size_t i = 0; i < 8u * 300u; ++i) {
            if (rec.dtype == PB_TR_F32) {
                assert_memory_equal(&v[i], &block[i], sizeof v[i]);
            } else {
                assert_true(v[i] ==
                            pb_tr_f16_to_f32(pb_tr_f32_to_f16(block[i])));
            }
        }
    }
    assert_int_equal(pb_tr_reader_next(rd, &rec, &v, err, sizeof err), 0);
    pb_tr_reader_close(rd);
    remove(path);
}

static void every_truncation_is_detected(void **state) {
    (void)state;
    size_t n = 0;
    unsigned char *f = small_file(&n);
    char err[256];
    assert_int_equal(read_all(f, n, err, sizeof err), 3);
    for (size_t cut = 0; cut < n; ++cut) {
        if (read_all(f, cut, err, sizeof err) != -1)
            fail_msg("a file cut at %zu of %zu bytes was accepted", cut, n);
        assert_true(strstr(err, "truncated") != NULL ||
                    (cut < 8u && strstr(err, "bad magic") != NULL) ||
                    cut == 0u);
    }
    /* Cut exactly after the last data record: the end record is missing. */
    expect_error(f, n - PB_TR_RECORD_HEAD,
                 "truncated: the file ends after 3 records without the end "
                 "record");
    free(f);
}

static void every_bit_flip_is_detected(void **state) {
    (void)state;
    size_t n = 0;
    unsigned char *f = small_file(&n);
    char err[256];
    for (size_t byte = 0; byte < n; ++byte) {
        for (int bit = 0; bit < 8; ++bit) {
            f[byte] ^= (unsigned char)(1u << bit);
            if (read_all(f, n, err, sizeof err) != -1)
                fail_msg("a flip of bit %d of byte %zu was accepted", bit, byte);
            f[byte] ^= (unsigned char)(1u << bit);
        }
    }
    /* A payload flip is the payload checksum's. */
    f[40 + 36 + 5] ^= 0x10u;
    expect_error(f, n, "record 0 at byte 40: payload checksum mismatch");
    f[40 + 36 + 5] ^= 0x10u;
    f[40 + 9] ^= 0x01u; /* the record's layer */
    expect_error(f, n, "record 0 at byte 40: record header checksum mismatch");
    f[40 + 9] ^= 0x01u;
    f[20] ^= 0x04u; /* the header's KV heads */
    expect_error(f, n, "header checksum mismatch");
    free(f);
}

static void wrong_magic_version_and_header_size(void **state) {
    (void)state;
    size_t n = 0;
    unsigned char *f = small_file(&n);
    unsigned char *g = malloc(n + 8192u);
    assert_non_null(g);

    memcpy(g, f, n);
    memcpy(g, "PK\3\4abcd", 8);
    expect_error(g, n, "not a pyramidkv trace (bad magic)");
    expect_error((const unsigned char *)"hello", 5u,
                 "not a pyramidkv trace (bad magic)");

    memcpy(g, f, n);
    put32(g + 8, 4u);
    put32(g + 36, pb_tr_crc32(0u, g, 36u)); /* a well-formed version 4 */
    expect_error(g, n, "unsupported trace version 4 (this reader reads "
                       "versions 1 to 3)");
    put32(g + 8, 0u);
    put32(g + 36, pb_tr_crc32(0u, g, 36u));
    expect_error(g, n, "unsupported trace version 0");

    memcpy(g, f, n);
    put32(g + 12, 5000u); /* oversize header */
    expect_error(g, n, "header size 5000 is outside 40 .. 4096 bytes");
    put32(g + 12, 39u);
    expect_error(g, n, "header size 39 is outside 40 .. 4096 bytes");

    /* The largest header, zero padded, is read; non-zero padding is not. */
    const size_t extra = 4096u - 40u;
    memcpy(g, f, 36);
    memset(g + 36, 0, extra);
    put32(g + 12, 4096u);
    put32(g + 4092, pb_tr_crc32(0u, g, 4092u));
    memcpy(g + 4096, f + 40, n - 40u);
    char err[256];
    assert_int_equal(read_all(g, n + extra, err, sizeof err), 3);
    g[100] = 1u;
    put32(g + 4092, pb_tr_crc32(0u, g, 4092u));
    expect_error(g, n + extra, "header flags or reserved bytes are not zero");
    free(g);
    free(f);
}

static void end_record_count_and_trailing_bytes(void **state) {
    (void)state;
    size_t n = 0;
    unsigned char *f = small_file(&n);
    unsigned char *g = malloc(n + 1u);
    assert_non_null(g);
    memcpy(g, f, n);
    g[n] = 0u;
    expect_error(g, n + 1u, "trailing bytes after the end record");
    unsigned char *end = g + n - PB_TR_RECORD_HEAD;
    put32(end + 8, 4u);
    put32(end + 32, pb_tr_crc32(0u, end, 32u));
    expect_error(g, n, "end record says 4 records, the file holds 3");
    /* A record dropped from the middle: the count catches it. */
    free(g);
    free(f);
}

static void bad_fields_and_values(void **state) {
    (void)state;
    size_t n = 0;
    unsigned char *f = small_file(&n);
    unsigned char *rec = f + 40;
    /* Each field breaks a rule, the record CRC recomputed. */
    struct {
        size_t at;
        uint32_t value;
        int byte;
        const char *want;
    } cases[] = {
        {4, 3u, 1, "record kind 3 (future rows) needs trace version 2"},
        {4, 4u, 1, "record kind 4 (preference rows) needs trace version 3"},
        {4, 5u, 1, "unknown record kind 5"},
        {5, 9u, 1, "unknown value type 9"},
        {8, 2u, 0, "layer 2 is not below the 2 layers"},
        {12, 7u, 0, "KV head 7 is not below the 2 KV heads"},
        {16, 2u, 0, "query head 2 is not below the group size 2"},
        {24, 2u, 0, "a prefill record has 1 .. 65536 rows and query + rows"},
        {6, 1u, 1, "reserved bytes are not zero"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        unsigned char save[36];
        memcpy(save, rec, 36);
        if (cases[c].byte) rec[cases[c].at] = (unsigned char)cases[c].value;
        else put32(rec + cases[c].at, cases[c].value);
        put32(rec + 32, pb_tr_crc32(0u, rec, 32u));
        expect_error(f, n, cases[c].want);
        memcpy(rec, save, 36);
    }
    /* A NaN in the payload with a correct CRC: the value message. */
    const size_t payload = 3u * 5u * 4u;
    const uint32_t nan_bits = 0x7FC00000u;
    put32(rec + 36 + 4u * 7u, nan_bits);
    put32(rec + 36 + payload, pb_tr_crc32(0u, rec + 36, payload));
    expect_error(f, n, "the value at row 1, key 2 is NaN, infinite or negative");
    free(f);
}

/* Version 2: a future record (the queries after a prompt) reads back with
 * its fields; a version-1 writer refuses one; its rows rule and the kind's
 * version rule are each named by the reader. */
static void version2_future_records(void **state) {
    (void)state;
    const char *path = "test_trace_io_v2.trace";
    char err[256];
    float block[15];
    for (int i = 0; i < 15; ++i) block[i] = (float)(i + 1) * 0.0625f;
    pb_tr_record f = {PB_TR_FUTURE, PB_TR_F32, 0u, 0u, 0u, 3u, 2u, 5u, 0, 0};
    const pb_tr_shape v1 = {1u, 1u, 1u, 1u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &v1, &w, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_add(w, &f, block, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs trace version 2"));
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);

    const pb_tr_shape v2 = {1u, 1u, 1u, 2u};
    assert_int_equal(pb_tr_writer_open(path, &v2, &w, err, sizeof err), 0);
    pb_tr_record p = {PB_TR_PREFILL, PB_TR_F32, 0u, 0u, 0u, 1u, 2u, 3u, 0, 0};
    assert_int_equal(pb_tr_writer_add(w, &p, block, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_add(w, &f, block, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    size_t n = 0;
    unsigned char *buf = slurp(path, &n);
    remove(path);
    membuf m = {buf, n, 0};
    pb_tr_reader *r = NULL;
    assert_int_equal(pb_tr_reader_open(mem_read, &m, &r, err, sizeof err), 0);
    assert_int_equal(pb_tr_reader_shape(r)->version, 2u);
    pb_tr_record got;
    const float *v;
    assert_int_equal(pb_tr_reader_next(r, &got, &v, err, sizeof err), 1);
    assert_int_equal(pb_tr_reader_next(r, &got, &v, err, sizeof err), 1);
    assert_int_equal(got.kind, PB_TR_FUTURE);
    assert_int_equal(got.query, 3u);
    assert_int_equal(got.rows, 2u);
    assert_int_equal(got.length, 5u);
    assert_memory_equal(v, block, 10u * sizeof *v);
    assert_int_equal(pb_tr_reader_next(r, &got, &v, err, sizeof err), 0);
    pb_tr_reader_close(r);

    /* The future record (after the 40-byte header and the prefill record
     * of 6 values) with query + rows != length. */
    unsigned char *rec = buf + 40 + 36 + 6 * 4 + 4;
    put32(rec + 20, 2u);
    put32(rec + 32, pb_tr_crc32(0u, rec, 32u));
    expect_error(buf, n, "record 1 at byte 104: a future record has 1 .. "
                         "65536 rows and query + rows == length");
    put32(rec + 20, 3u);
    put32(rec + 32, pb_tr_crc32(0u, rec, 32u));
    /* The same file labelled version 1: kind 3 is refused by name. */
    put32(buf + 8, 1u);
    put32(buf + 36, pb_tr_crc32(0u, buf, 36u));
    expect_error(buf, n, "record 1 at byte 104: record kind 3 (future rows) "
                         "needs trace version 2, the header says version 1");
    free(buf);
}

/* Version 3: a preference record (window rows of text that is not a
 * prompt) reads back with its fields; a version-2 writer refuses one; its
 * rows rule and the kind's version rule are each named by the reader. */
static void version3_preference_records(void **state) {
    (void)state;
    const char *path = "test_trace_io_v3.trace";
    char err[256];
    float block[15];
    for (int i = 0; i < 15; ++i) block[i] = (float)(i + 1) * 0.03125f;
    pb_tr_record c = {PB_TR_PREFERENCE, PB_TR_F32, 0u, 0u, 1u, 2u, 3u, 5u,
                      0, 0};
    const pb_tr_shape v2 = {1u, 1u, 2u, 2u};
    pb_tr_writer *w = NULL;
    assert_int_equal(pb_tr_writer_open(path, &v2, &w, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_add(w, &c, block, err, sizeof err), -1);
    assert_non_null(strstr(err, "needs trace version 3"));
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);

    const pb_tr_shape v3 = {1u, 1u, 2u, 3u};
    assert_int_equal(pb_tr_writer_open(path, &v3, &w, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_add(w, &c, block, err, sizeof err), 0);
    assert_int_equal(pb_tr_writer_close(w, err, sizeof err), 0);
    size_t n = 0;
    unsigned char *buf = slurp(path, &n);
    remove(path);
    membuf m = {buf, n, 0};
    pb_tr_reader *r = NULL;
    assert_int_equal(pb_tr_reader_open(mem_read, &m, &r, err, sizeof err), 0);
    assert_int_equal(pb_tr_reader_shape(r)->version, 3u);
    pb_tr_record got;
    const float *v;
    assert_int_equal(pb_tr_reader_next(r, &got, &v, err, sizeof err), 1);
    assert_int_equal(got.kind, PB_TR_PREFERENCE);
    assert_int_equal(got.qhead, 1u);
    assert_int_equal(got.query, 2u);
    assert_int_equal(got.rows, 3u);
    assert_int_equal(got.length, 5u);
    assert_memory_equal(v, block, 15u * sizeof *v);
    assert_int_equal(pb_tr_reader_next(r, &got, &v, err, sizeof err), 0);
    pb_tr_reader_close(r);

    unsigned char *rec = buf + 40;
    put32(rec + 20, 1u); /* query + rows != length */
    put32(rec + 32, pb_tr_crc32(0u, rec, 32u));
    expect_error(buf, n, "record 0 at byte 40: a preference record has 1 .. "
                         "65536 rows and query + rows == length");
    put32(rec + 20, 2u);
    put32(rec + 32, pb_tr_crc32(0u, rec, 32u));
    /* The same file labelled version 2: kind 4 is refused by name. */
    put32(buf + 8, 2u);
    put32(buf + 36, pb_tr_crc32(0u, buf, 36u));
    expect_error(buf, n, "record 0 at byte 40: record kind 4 (preference "
                         "rows) needs trace version 3, the header says "
                         "version 2");
    free(buf);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(version2_future_records),
        cmocka_unit_test(version3_preference_records),
        cmocka_unit_test(crc32_known_value),
        cmocka_unit_test(float16_conversions),
        cmocka_unit_test(round_trip),
        cmocka_unit_test(every_truncation_is_detected),
        cmocka_unit_test(every_bit_flip_is_detected),
        cmocka_unit_test(wrong_magic_version_and_header_size),
        cmocka_unit_test(end_record_count_and_trailing_bytes),
        cmocka_unit_test(bad_fields_and_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
