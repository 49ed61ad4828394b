/*
 * fuzz_compat_vtable.c - libFuzzer target: the same programs as
 * fuzz_native_api.c, but the instance is created, fed and evicted through
 * the policybook-compatible vtables pb_kvcache_pyramidkv and
 * pb_kvcache_snapkv (statusless calls, NULL on a refused create); the
 * native introspection functions observe its state.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_policy_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_run_policy_program(data, size, FZ_SURFACE_COMPAT);
}
