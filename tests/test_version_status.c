/*
 * test_version_status.c - the version macros agree with each other and with
 * the library; every status has its own message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "pyramidkv/pyramidkv.h"
#include "test_main.h"

static void version_macros_agree(void **state) {
    (void)state;
    char text[32];
    snprintf(text, sizeof text, "%d.%d.%d", PB_VERSION_MAJOR, PB_VERSION_MINOR,
             PB_VERSION_PATCH);
    assert_string_equal(text, PB_VERSION_STRING);
    assert_string_equal(pb_version_string(), PB_VERSION_STRING);
    assert_int_equal(pb_version_number(), PB_VERSION_NUMBER);
    assert_int_equal(PB_VERSION_NUMBER, PB_VERSION_MAJOR * 10000 +
                                            PB_VERSION_MINOR * 100 +
                                            PB_VERSION_PATCH);
}

static void every_status_has_a_distinct_message(void **state) {
    (void)state;
    assert_int_equal(PB_OK, 0);
    for (int a = 0; a < PB_STATUS_COUNT_; ++a) {
        const char *ma = pb_status_str((pb_status)a);
        assert_non_null(ma);
        assert_string_not_equal(ma, "unknown status");
        for (int b = a + 1; b < PB_STATUS_COUNT_; ++b)
            assert_string_not_equal(ma, pb_status_str((pb_status)b));
    }
    assert_string_equal(pb_status_str(PB_STATUS_COUNT_), "unknown status");
    assert_string_equal(pb_status_str((pb_status)-1), "unknown status");
}

PB_TEST_MAIN(cmocka_unit_test(version_macros_agree),
             cmocka_unit_test(every_status_has_a_distinct_message))
