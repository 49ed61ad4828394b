/*
 * fuzz_native_api.c - libFuzzer target: programs of calls on the native
 * surface (pb_kvcache_pyramidkv_create, _observe, _evict, _reset and the
 * introspection functions), checked against the reference model after
 * every call. The interpreter is fuzz_policy_driver.c.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_policy_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_run_policy_program(data, size, FZ_SURFACE_NATIVE);
}
