/*
 * counting_allocator.h - a pb_allocator for tests that counts every call,
 * tracks every live block with its size, can refuse a chosen call (the
 * countdown used by the allocation-failure sweep) or everything past a byte
 * limit (used by the fuzzers to keep inputs cheap), and records misuse
 * (a free of an unknown pointer or with the wrong size) instead of crashing,
 * so a test can assert on it. One instance per thread; no globals.
 */
#ifndef PB_TESTS_COUNTING_ALLOCATOR_H
#define PB_TESTS_COUNTING_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>

#include "pyramidkv/pyramidkv.h"

#define CA_MAX_BLOCKS 64

typedef struct counting_allocator {
    /* Settings. fail_at: the 1-based index of the alloc call that fails (0:
     * none); fail_persist: every call from fail_at on fails; limit_bytes:
     * a call that would take the outstanding bytes past it fails (0: no
     * limit). */
    size_t fail_at;
    int fail_persist;
    size_t limit_bytes;

    /* What happened. */
    size_t alloc_calls;   /* every alloc call, failed ones included */
    size_t alloc_failures;/* calls answered with NULL */
    size_t free_calls;    /* every free call */
    size_t bad_frees;     /* unknown pointer, wrong size or NULL */
    size_t outstanding;   /* bytes allocated and not freed */
    size_t total_bytes;   /* bytes of every successful alloc */
    size_t live_blocks;
    size_t table_overflows;
    struct {
        void *p;
        size_t n;
    } blocks[CA_MAX_BLOCKS];
} counting_allocator;

/* Clears counters and settings: no failure, no limit. */
void ca_init(counting_allocator *ca);

/* An alloc that refuses every request and a free that does nothing: the
 * halves of allocators that a create must refuse, or must never call. */
void *ca_refuse_alloc(void *ctx, size_t n);
void ca_ignore_free(void *ctx, void *p, size_t n);

/* Clears counters and settings, then refuses the fail_at-th alloc call
 * (and, with persist, every later one): the countdown of the
 * allocation-failure sweeps. */
void ca_init_failing(counting_allocator *ca, size_t fail_at, int persist);

/* Clears the counters and keeps the settings. Only valid with no live
 * block. */
void ca_clear_counts(counting_allocator *ca);

/* The pb_allocator whose ctx is ca. */
pb_allocator ca_allocator(counting_allocator *ca);

#endif /* PB_TESTS_COUNTING_ALLOCATOR_H */
