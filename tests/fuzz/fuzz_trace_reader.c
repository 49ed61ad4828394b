/*
 * fuzz_trace_reader.c - libFuzzer target: the attention trace reader
 * (bench/trace/trace_io.h) on arbitrary bytes. It must never crash, read
 * out of bounds or allocate more than the input can justify; every
 * refusal must come with a one-line message; an accepted file must obey
 * the specification (docs/trace_format.md): every record within the
 * header's shape, kinds and lengths consistent, every value finite and
 * non-negative, and the writer must reproduce it byte for byte.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "mem_source.h"
#include "trace_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_message(const char *err) {
    const size_t len = strlen(err);
    CHECK(len > 0u && len < 256u);
    CHECK(strchr(err, '\n') == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    membuf m = {data, size, 0};
    pb_tr_reader *r = NULL;
    char err[256];
    err[0] = '\0';
    if (pb_tr_reader_open(mem_read, &m, &r, err, sizeof err) != 0) {
        CHECK(r == NULL);
        check_message(err);
        return 0;
    }
    const pb_tr_shape shape = *pb_tr_reader_shape(r);
    CHECK(shape.num_layers >= 1u && shape.num_kv_heads >= 1u &&
          shape.group_size >= 1u);
    pb_tr_record rec;
    const float *v;
    int got;
    uint64_t n = 0, values = 0;
    while ((got = pb_tr_reader_next(r, &rec, &v, err, sizeof err)) == 1) {
        CHECK(rec.index == n);
        CHECK(rec.layer < shape.num_layers && rec.head < shape.num_kv_heads);
        CHECK(rec.qhead == PB_TR_GROUP_REDUCED || rec.qhead < shape.group_size);
        if (rec.kind == PB_TR_DECODE)
            CHECK(rec.rows == 1u && (uint64_t)rec.query + 1u == rec.length);
        else
            CHECK((rec.kind == PB_TR_PREFILL ||
                   (rec.kind == PB_TR_FUTURE && shape.version >= 2u) ||
                   (rec.kind == PB_TR_PREFERENCE && shape.version == 3u)) &&
                  (uint64_t)rec.query + rec.rows == rec.length);
        const size_t count = (size_t)rec.rows * rec.length;
        const size_t width = rec.dtype == PB_TR_F32 ? 4u : 2u;
        values += count * width;
        CHECK(values <= size); /* nothing read that is not in the input */
        for (size_t i = 0; i < count; ++i)
            CHECK(v[i] >= 0.0f && v[i] <= 3.4028234663852886e38f);
        ++n;
    }
    CHECK(pb_tr_reader_next(r, &rec, &v, err, sizeof err) == got);
    pb_tr_reader_close(r);
    if (got < 0) check_message(err);
    return 0;
}
