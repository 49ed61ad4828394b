/*
 * hardening_state.h - the full observable state of a policy instance, as a
 * caller can see it through the public API (held count, held positions, the
 * score of every held position under the instance's scorer - for the window
 * scorer its window score - sinks held, effective share, capacity, memory
 * bytes), captured into a value that compares bit for bit. The hardening
 * tests capture it before and after a refused call to prove that the call
 * changed nothing.
 */
#ifndef PB_TESTS_HARDENING_STATE_H
#define PB_TESTS_HARDENING_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

/* The hardening tests use small instances; capture refuses more. */
#define HS_MAX_HELD 256

typedef struct hs_state {
    size_t kept;
    size_t capacity;
    size_t memory;
    uint32_t effective;
    size_t sinks;
    uint32_t pos[HS_MAX_HELD];
    double score[HS_MAX_HELD];
} hs_state;

/* Fills *s from the instance. Returns 0, or -1 if an introspection call
 * failed or the instance holds more than HS_MAX_HELD positions. */
int hs_capture(const pb_kvcache *policy, hs_state *s);

/* 1 when a and b are identical (scores compared as bits), else 0. */
int hs_equal(const hs_state *a, const hs_state *b);

/* For the cmocka tests: asserts that the instance f->p shows the state
 * f->before captured earlier (f: any fixture with those two fields). */
#define HS_ASSERT_UNCHANGED(f)                                \
    do {                                                      \
        hs_state after_;                                      \
        assert_int_equal(hs_capture((f)->p, &after_), 0);     \
        assert_true(hs_equal(&(f)->before, &after_));         \
    } while (0)

#endif /* PB_TESTS_HARDENING_STATE_H */
