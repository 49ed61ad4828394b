/*
 * test_main.h - the main of a cmocka test program, written once.
 * PB_TEST_MAIN(test, ...) runs its tests as one group (named "tests" in
 * cmocka's report). PB_TEST_MAIN_SLOW("arg", PB_TESTS(slow...),
 * PB_TESTS(test...)) runs only the slow group when argv[1] is "arg" (a
 * ctest entry of its own, label slow) and the other group otherwise.
 */
#ifndef PB_TESTS_TEST_MAIN_H
#define PB_TESTS_TEST_MAIN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#define PB_TEST_MAIN(...)                                                      \
    int main(void) {                                                           \
        const struct CMUnitTest tests[] = {__VA_ARGS__};                       \
        return cmocka_run_group_tests(tests, NULL, NULL);                      \
    }

/* A braced list of tests for PB_TEST_MAIN_SLOW. */
#define PB_TESTS(...) {__VA_ARGS__}

#define PB_TEST_MAIN_SLOW(arg, slow_tests, other_tests)                        \
    int main(int argc, char **argv) {                                          \
        const struct CMUnitTest slow[] = slow_tests;                           \
        const struct CMUnitTest tests[] = other_tests;                         \
        if (argc > 1 && strcmp(argv[1], arg) == 0)                             \
            return cmocka_run_group_tests(slow, NULL, NULL);                   \
        return cmocka_run_group_tests(tests, NULL, NULL);                      \
    }

#endif /* PB_TESTS_TEST_MAIN_H */
