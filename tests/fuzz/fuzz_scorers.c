/*
 * fuzz_scorers.c - libFuzzer target: the programs of fuzz_native_api.c on
 * an instance made by pb_kvcache_create with a fuzzed scorer (window,
 * cumulative, last, votes, none, or an invalid one), sinks and explicit
 * share, checked against tests/reference_model on every call.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_policy_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_run_policy_program(data, size, FZ_SURFACE_SCORERS);
}
