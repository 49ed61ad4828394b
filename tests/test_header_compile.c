/*
 * test_header_compile.c - links the C11 and C++ compilations of the public
 * header and checks that both see the same defaults and vtables.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

int pb_header_probe_c11(void);
int pb_header_probe_cxx(void);
int pb_header_probe_family_c11(void);
int pb_header_probe_family_cxx(void);
int pb_header_probe_runtime_c11(void);
int pb_header_probe_runtime_cxx(void);
int pb_header_probe_group_c11(void);
int pb_header_probe_group_cxx(void);

static void both_languages_agree(void **state) {
    (void)state;
    assert_int_equal(pb_header_probe_c11(), 512 + 512 + 0 + 1 + 1 + 1);
    assert_int_equal(pb_header_probe_cxx(), pb_header_probe_c11());
    /* 512 + 32 + 512 + 32 + 512 + 512 + 4 + 512, seven pointers, and
     * PB_SCORER_NONE (4). */
    assert_int_equal(pb_header_probe_family_c11(), 2628 + 7 + 4);
    assert_int_equal(pb_header_probe_family_cxx(),
                     pb_header_probe_family_c11());
}

/* pyramidkv_runtime.h: 128 + 1 + 32 from PB_QK_CONFIG_DEFAULT, five
 * truths, and PB_KEYS_BF16 (2). */
static void runtime_header_agrees(void **state) {
    (void)state;
    assert_int_equal(pb_header_probe_runtime_c11(), 161 + 5 + 2);
    assert_int_equal(pb_header_probe_runtime_cxx(),
                     pb_header_probe_runtime_c11());
}

/* pyramidkv_group.h: 8 + 200 + 1 from PB_KVCACHE_GROUP_PARAMS_DEFAULT and
 * five truths. */
static void group_header_agrees(void **state) {
    (void)state;
    assert_int_equal(pb_header_probe_group_c11(), 209 + 5);
    assert_int_equal(pb_header_probe_group_cxx(),
                     pb_header_probe_group_c11());
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(both_languages_agree),
                                       cmocka_unit_test(runtime_header_agrees),
                                       cmocka_unit_test(group_header_agrees)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
