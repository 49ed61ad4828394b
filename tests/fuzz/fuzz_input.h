/*
 * fuzz_input.h - what the one-file fuzz targets share: the check that
 * aborts with a finding, and the reader over the input bytes (a missing
 * byte reads as 0, so every input is a whole run).
 */
#ifndef PB_TESTS_FUZZ_INPUT_H
#define PB_TESTS_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Unless ok: print "FUZZ FINDING: file:line: what" and abort, so that
 * libFuzzer and the corpus replay both stop on the input. */
static inline void fuzz_check_at(int ok, const char *file, int line,
                                 const char *what) {
    if (ok) return;
    fprintf(stderr, "FUZZ FINDING: %s:%d: %s\n", file, line, what);
    fflush(stderr);
    abort();
}

/* CHECK(cond) names the condition, check(ok, what) a message. */
#define CHECK(cond) fuzz_check_at((cond) ? 1 : 0, __FILE__, __LINE__, #cond)
#define check(ok, what) fuzz_check_at((ok) ? 1 : 0, __FILE__, __LINE__, (what))

/* The input: bytes not read yet. */
typedef struct reader {
    const uint8_t *p;
    size_t n;
} reader;

/* The next byte, 0 once the input is spent. */
static inline uint8_t fuzz_byte(reader *r) {
    if (r->n == 0u) return 0u;
    r->n -= 1u;
    return *r->p++;
}

#endif
