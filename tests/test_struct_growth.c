/*
 * test_struct_growth.c - the growth rule of docs/abi.md for every
 * versioned struct (pb_kvcache_config, pb_profile_params, pb_schedule),
 * through the one reader the doors share (src/struct_growth.c), linked
 * with the library's objects.
 *
 * The case the rule exists for is an older caller's struct, shorter than
 * the library's: it must be read, with the fields it did not know taking
 * their defaults. In this release every struct is still its first
 * released layout, so no call through a door can be that caller; each
 * case here gives the reader the layout a later release will have (the
 * struct with a field appended, whose default is not zero) and a caller's
 * struct of the first released size, in a block of exactly that size (so
 * a sanitizer build catches a read past it). The schedule door used to
 * refuse any struct_size below its own sizeof, which refuses every such
 * caller; these cases fail under that rule. Then the doors themselves:
 * the first released size is accepted and decides as the full one does,
 * anything shorter is refused, a newer caller's zero tail is accepted and
 * a non-zero one refused.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "struct_growth.h"
#include "test_configs.h"
#include "test_main.h"

/* A library layout one field longer than T's: the appended field and its
 * (non-zero) default. */
#define GROWN(T)                                                              \
    struct {                                                                  \
        T base;                                                               \
        uint32_t added;                                                       \
    }

#define ADDED_DEFAULT 0x5EEDu

/* lib (a GROWN(T)) as the library starts it: T's defaults, then the
 * added field's. */
#define GROWN_INIT(lib, T, DEFAULT)                                           \
    do {                                                                      \
        const T grown_defaults_ = DEFAULT;                                    \
        (lib).base = grown_defaults_;                                         \
        (lib).added = ADDED_DEFAULT;                                          \
    } while (0)

/* The caller's struct `full` cut to `size` bytes, in a block of exactly
 * that size, its struct_size set to size. */
static void *older_caller(const void *full, size_t size) {
    unsigned char *b = malloc(size);
    assert_non_null(b);
    memcpy(b, full, size);
    const uint32_t s = (uint32_t)size;
    memcpy(b, &s, sizeof s);
    return b;
}

/* Reads the older caller old (first released size `size`) into lib, a
 * struct of lib_size bytes holding the library's defaults: accepted, and
 * lib's struct_size becomes lib_size. */
static void read_older(const void *old, size_t size, void *lib,
                       size_t lib_size) {
    assert_int_equal(pb__struct_read(old, size, lib_size, lib), PB_OK);
    uint32_t got = 0;
    memcpy(&got, lib, sizeof got);
    assert_int_equal(got, lib_size);
}

/* old's struct_size one byte short of the first released layout:
 * refused. Frees old. */
static void refuse_one_short(void *old, size_t size, void *lib,
                             size_t lib_size) {
    const uint32_t short_size = (uint32_t)size - 1u;
    memcpy(old, &short_size, sizeof short_size);
    assert_int_equal(pb__struct_read(old, size, lib_size, lib), PB_ERR_PARAM);
    free(old);
}

static void older_schedule_read(void **state) {
    (void)state;
    pb_schedule caller = PB_SCHEDULE_DEFAULT;
    caller.kind = PB_SCHEDULE_UNIFORM;
    caller.num_layers = 7u;
    caller.budget = 99u;
    void *old = older_caller(&caller, PB__SCHEDULE_SIZE_0_2);
    GROWN(pb_schedule) lib;
    GROWN_INIT(lib, pb_schedule, PB_SCHEDULE_DEFAULT);
    read_older(old, PB__SCHEDULE_SIZE_0_2, &lib, sizeof lib);
    assert_int_equal(lib.base.kind, PB_SCHEDULE_UNIFORM);
    assert_int_equal(lib.base.num_layers, 7u);
    assert_int_equal(lib.base.budget, 99u);
    assert_int_equal(lib.added, ADDED_DEFAULT);
    refuse_one_short(old, PB__SCHEDULE_SIZE_0_2, &lib, sizeof lib);
}

static void older_config_read(void **state) {
    (void)state;
    pb_kvcache_config caller = PB_KVCACHE_CONFIG_DEFAULT;
    caller.budget = 77u;
    caller.scorer = PB_SCORER_VOTES;
    caller.row_stores = PB_ROW_STORES_STREAMED; /* the last 0.2 field */
    void *old = older_caller(&caller, PB__CONFIG_SIZE_0_2);
    GROWN(pb_kvcache_config) lib;
    GROWN_INIT(lib, pb_kvcache_config, PB_KVCACHE_CONFIG_DEFAULT);
    read_older(old, PB__CONFIG_SIZE_0_2, &lib, sizeof lib);
    assert_int_equal(lib.base.budget, 77u);
    assert_int_equal(lib.base.scorer, PB_SCORER_VOTES);
    assert_int_equal(lib.base.row_stores, PB_ROW_STORES_STREAMED);
    assert_int_equal(lib.added, ADDED_DEFAULT);
    refuse_one_short(old, PB__CONFIG_SIZE_0_2, &lib, sizeof lib);
}

static void older_profile_params_read(void **state) {
    (void)state;
    pb_profile_params caller = pbt_profile_params(3u, 50u);
    void *old = older_caller(&caller, PB__PROFILE_PARAMS_SIZE_0_2);
    GROWN(pb_profile_params) lib;
    GROWN_INIT(lib, pb_profile_params, PB_PROFILE_PARAMS_DEFAULT);
    read_older(old, PB__PROFILE_PARAMS_SIZE_0_2, &lib, sizeof lib);
    assert_int_equal(lib.base.num_layers, 3u);
    assert_int_equal(lib.base.max_len, 50u);
    assert_int_equal(lib.added, ADDED_DEFAULT);
    refuse_one_short(old, PB__PROFILE_PARAMS_SIZE_0_2, &lib, sizeof lib);
}

/* A newer caller's longer struct: accepted with a zero tail, refused with
 * any non-zero byte in it; NULL reads nothing. */
static void newer_caller_tail(void **state) {
    (void)state;
    GROWN(pb_schedule) newer;
    memset(&newer, 0, sizeof newer);
    const pb_schedule d = PB_SCHEDULE_DEFAULT;
    newer.base = d;
    newer.base.struct_size = (uint32_t)sizeof newer;
    pb_schedule lib = PB_SCHEDULE_DEFAULT;
    assert_int_equal(pb__struct_read(&newer, PB__SCHEDULE_SIZE_0_2,
                                     sizeof lib, &lib),
                     PB_OK);
    assert_int_equal(lib.struct_size, sizeof lib);
    newer.added = 1u;
    assert_int_equal(pb__struct_read(&newer, PB__SCHEDULE_SIZE_0_2,
                                     sizeof lib, &lib),
                     PB_ERR_PARAM);
    lib.budget = 5u;
    assert_int_equal(pb__struct_read(NULL, PB__SCHEDULE_SIZE_0_2,
                                     sizeof lib, &lib),
                     PB_OK);
    assert_int_equal(lib.budget, 5u);
}

/* The doors: a caller's struct of the first released size decides as the
 * full one, one byte less is refused. */
static void doors_take_first_released_size(void **state) {
    (void)state;
    pb_schedule s = PB_SCHEDULE_DEFAULT;
    s.kind = PB_SCHEDULE_ARITHMETIC;
    s.num_layers = 4u;
    uint32_t a[4], b[4];
    assert_int_equal(pb_kvcache_schedule_shares(&s, a, 4u, NULL), PB_OK);
    pb_schedule *old = older_caller(&s, PB__SCHEDULE_SIZE_0_2);
    assert_int_equal(pb_kvcache_schedule_shares(old, b, 4u, NULL), PB_OK);
    assert_memory_equal(a, b, sizeof a);
    old->struct_size -= 1u;
    assert_int_equal(pb_kvcache_schedule_shares(old, b, 4u, NULL),
                     PB_ERR_PARAM);
    free(old);

    pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    size_t full = 0, cut = 0;
    assert_int_equal(pb_kvcache_size(&c, &full), PB_OK);
    pb_kvcache_config *oc = older_caller(&c, PB__CONFIG_SIZE_0_2);
    assert_int_equal(pb_kvcache_size(oc, &cut), PB_OK);
    assert_int_equal(cut, full);
    oc->struct_size -= 1u;
    assert_int_equal(pb_kvcache_size(oc, &cut), PB_ERR_PARAM);
    free(oc);

    pb_profile_params pp = PB_PROFILE_PARAMS_DEFAULT;
    assert_int_equal(pb_profile_size(&pp, &full), PB_OK);
    pb_profile_params *op = older_caller(&pp, PB__PROFILE_PARAMS_SIZE_0_2);
    assert_int_equal(pb_profile_size(op, &cut), PB_OK);
    assert_int_equal(cut, full);
    op->struct_size -= 1u;
    assert_int_equal(pb_profile_size(op, &cut), PB_ERR_PARAM);
    free(op);
}

PB_TEST_MAIN(cmocka_unit_test(older_schedule_read),
             cmocka_unit_test(older_config_read),
             cmocka_unit_test(older_profile_params_read),
             cmocka_unit_test(newer_caller_tail),
             cmocka_unit_test(doors_take_first_released_size))
