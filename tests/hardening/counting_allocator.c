/*
 * counting_allocator.c - the counting, failing pb_allocator of the hardening
 * tests and the fuzzers (see the header). Blocks come from malloc so that
 * AddressSanitizer and valgrind still see every overrun and leak.
 */
#include "counting_allocator.h"

#include <stdlib.h>
#include <string.h>

void ca_init(counting_allocator *ca) { memset(ca, 0, sizeof *ca); }

void *ca_refuse_alloc(void *ctx, size_t n) {
    (void)ctx;
    (void)n;
    return NULL;
}

void ca_ignore_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)p;
    (void)n;
}

void ca_init_failing(counting_allocator *ca, size_t fail_at, int persist) {
    ca_init(ca);
    ca->fail_at = fail_at;
    ca->fail_persist = persist;
}

void ca_clear_counts(counting_allocator *ca) {
    const size_t fail_at = ca->fail_at;
    const int fail_persist = ca->fail_persist;
    const size_t limit_bytes = ca->limit_bytes;
    memset(ca, 0, sizeof *ca);
    ca->fail_at = fail_at;
    ca->fail_persist = fail_persist;
    ca->limit_bytes = limit_bytes;
}

static int should_fail(const counting_allocator *ca, size_t n) {
    if (ca->fail_at != 0u) {
        if (ca->alloc_calls == ca->fail_at) return 1;
        if (ca->fail_persist && ca->alloc_calls > ca->fail_at) return 1;
    }
    if (ca->limit_bytes != 0u &&
        (n > ca->limit_bytes || ca->outstanding > ca->limit_bytes - n))
        return 1;
    return 0;
}

static void *ca_alloc(void *ctx, size_t n) {
    counting_allocator *ca = ctx;
    ca->alloc_calls += 1u;
    if (should_fail(ca, n)) {
        ca->alloc_failures += 1u;
        return NULL;
    }
    /* The table is full: refusing would fake an allocation failure the
     * test did not ask for, so the overflow is recorded for the test to
     * see instead. */
    if (ca->live_blocks == CA_MAX_BLOCKS) {
        ca->table_overflows += 1u;
        ca->alloc_failures += 1u;
        return NULL;
    }
    /* malloc(0) may return NULL; one byte keeps "NULL means failure". */
    void *p = malloc(n != 0u ? n : 1u);
    if (p == NULL) {
        ca->alloc_failures += 1u;
        return NULL;
    }
    ca->blocks[ca->live_blocks].p = p;
    ca->blocks[ca->live_blocks].n = n;
    ca->live_blocks += 1u;
    ca->outstanding += n;
    ca->total_bytes += n;
    return p;
}

static void ca_free(void *ctx, void *p, size_t n) {
    counting_allocator *ca = ctx;
    ca->free_calls += 1u;
    for (size_t i = 0; i < ca->live_blocks; ++i) {
        if (ca->blocks[i].p != p) continue;
        if (ca->blocks[i].n != n) ca->bad_frees += 1u;
        ca->outstanding -= ca->blocks[i].n;
        ca->blocks[i] = ca->blocks[ca->live_blocks - 1u];
        ca->live_blocks -= 1u;
        free(p);
        return;
    }
    /* Unknown pointer (or NULL): not ours to free. */
    ca->bad_frees += 1u;
}

pb_allocator ca_allocator(counting_allocator *ca) {
    pb_allocator a;
    a.alloc = ca_alloc;
    a.free = ca_free;
    a.ctx = ca;
    return a;
}
