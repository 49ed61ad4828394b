/*
 * ca_checks.h - the cmocka check of a create that succeeded under a
 * counting allocator (counting_allocator.h), shared by the create rows of
 * the bad-input matrix and the config tests: the instance exists, its
 * memory_bytes is the size query's answer and exactly what the allocator
 * holds; then it is destroyed. Include after <cmocka.h>.
 */
#ifndef PB_TESTS_CA_CHECKS_H
#define PB_TESTS_CA_CHECKS_H

#include "counting_allocator.h"
#include "pyramidkv/pyramidkv.h"

static inline void ca_check_created(const counting_allocator *ca,
                                    pb_kvcache *out, size_t bytes) {
    assert_non_null(out);
    assert_int_equal(pb_kvcache_memory_bytes(out), bytes);
    assert_int_equal(ca->outstanding, bytes);
    pb_kvcache_destroy(out);
}

#endif /* PB_TESTS_CA_CHECKS_H */
