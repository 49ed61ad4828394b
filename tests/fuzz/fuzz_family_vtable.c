/*
 * fuzz_family_vtable.c - libFuzzer target: the same programs, on an
 * instance created, fed and evicted through one of the policybook family
 * vtables pb_kvcache_h2o, _scissorhands, _tova, _streaming_llm and
 * _sliding_window (statusless calls, NULL on a refused create), with the
 * native introspection functions observing its state.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_policy_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_run_policy_program(data, size, FZ_SURFACE_FAMILY);
}
