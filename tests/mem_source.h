/*
 * mem_source.h - a byte source over a buffer in memory, the read callback
 * that the trace reader takes (pb_tr_reader_open), for the tests and the
 * fuzz target that read a trace from bytes rather than a file.
 */
#ifndef PB_TESTS_MEM_SOURCE_H
#define PB_TESTS_MEM_SOURCE_H

#include <stddef.h>
#include <string.h>

typedef struct membuf {
    const unsigned char *p;
    size_t n, at;
} membuf;

/* Copies up to n of the bytes not read yet; returns how many (0 at the
 * end). */
static inline size_t mem_read(void *ctx, void *buf, size_t n) {
    membuf *m = (membuf *)ctx;
    const size_t left = m->n - m->at;
    if (n > left) n = left;
    memcpy(buf, m->p + m->at, n);
    m->at += n;
    return n;
}

#endif
