/*
 * test_scorer_names.c - pb_scorer_name and pb_scorer_from_name: every
 * pb_scorer has its canonical name and back, the alias "recency" is the
 * none scorer, and anything else is refused with *scorer untouched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

static void names_round_trip(void **state) {
    (void)state;
    static const char *const want[] = {"window", "cumulative", "last",
                                       "votes", "none"};
    for (uint32_t s = 0; s <= PB_SCORER_NONE; ++s) {
        const char *name = pb_scorer_name(s);
        assert_non_null(name);
        assert_string_equal(name, want[s]);
        uint32_t back = 99u;
        assert_int_equal(pb_scorer_from_name(name, &back), PB_OK);
        assert_int_equal(back, s);
    }
    assert_null(pb_scorer_name(PB_SCORER_NONE + 1u));
    assert_null(pb_scorer_name(UINT32_MAX));
}

static void aliases_and_refusals(void **state) {
    (void)state;
    uint32_t s = 42u;
    assert_int_equal(pb_scorer_from_name("recency", &s), PB_OK);
    assert_int_equal(s, PB_SCORER_NONE);
    s = 42u;
    assert_int_equal(pb_scorer_from_name("Window", &s), PB_ERR_PARAM);
    assert_int_equal(pb_scorer_from_name("", &s), PB_ERR_PARAM);
    assert_int_equal(pb_scorer_from_name("h2o", &s), PB_ERR_PARAM);
    assert_int_equal(pb_scorer_from_name("window ", &s), PB_ERR_PARAM);
    assert_int_equal(s, 42u);
    assert_int_equal(pb_scorer_from_name(NULL, &s), PB_ERR_NULL);
    assert_int_equal(pb_scorer_from_name("last", NULL), PB_ERR_NULL);
}

/* A name from the call creates an instance of that scorer. */
static void names_create(void **state) {
    (void)state;
    for (uint32_t s = 0; s <= PB_SCORER_NONE; ++s) {
        pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
        assert_int_equal(pb_scorer_from_name(pb_scorer_name(s), &c.scorer),
                         PB_OK);
        pb_kvcache *p = NULL;
        assert_int_equal(pb_kvcache_create(&c, NULL, &p), PB_OK);
        double score = 1.0;
        const pb_status st = pb_kvcache_window_score(p, 0u, &score);
        assert_int_equal(st, s == PB_SCORER_WINDOW ? PB_OK : PB_ERR_PARAM);
        pb_kvcache_destroy(p);
    }
}

PB_TEST_MAIN(cmocka_unit_test(names_round_trip),
             cmocka_unit_test(aliases_and_refusals),
             cmocka_unit_test(names_create))
