/*
 * fuzz_vector_runner.c - libFuzzer target: the golden vector reader and
 * runner (bench/cli/vector_runner.c) on arbitrary documents held in memory:
 * malformed, truncated, huge or wrongly typed JSON must be reported, never
 * crash, and the totals must account for the document exactly once.
 * Instances are capped at 1 MiB so a hostile document cannot exhaust
 * memory.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "fuzz_input.h"
#include "vector_runner.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    pb_vector_options options = {NULL, 0, (size_t)1 << 20};
    pb_vector_totals totals = PB_VECTOR_TOTALS_INIT;
    const int rc = pb_vector_run_document((const char *)data, size, "fuzz",
                                          &options, &totals);
    check(rc == 0 || rc == -1, "returns 0 or -1");
    if (rc == -1) {
        check(totals.unreadable == 1u && totals.documents == 0u,
              "an unreadable document is counted once as unreadable");
        check(totals.passed == 0u && totals.failed == 0u,
              "an unreadable document counts no case");
    } else {
        check(totals.documents == 1u && totals.unreadable == 0u,
              "a read document is counted once");
    }
    check(pb_vector_exit_status(&totals) ==
              (totals.unreadable != 0u ? 2 : totals.failed != 0u ? 1 : 0),
          "exit status is 2 for an unreadable document, else 1 for a "
          "failing case, else 0");
    if (rc == 0 && totals.failed == 0u)
        check(pb_vector_exit_status(&totals) == 0,
              "a document whose cases all pass exits 0");
    return 0;
}
