/*
 * fuzz_prefill.c - libFuzzer target: a native instance opens with
 * pb_kvcache_prefill (any prompt length and row count, workspace exact, one
 * byte short, misaligned or absent, output arrays exact, short or absent,
 * weights from the palette including NaN and infinities), checked against
 * the documented status order and, when it succeeds, against the reference
 * model fed the rows as decode steps (consistent scope) or the paper's
 * selection (reference scope, tests/prefill/prefill_reference.c); then the
 * instance goes on with the same program of observe / evict / reset /
 * introspection calls as fuzz_native_api.c, where a refused prefill must
 * find the instance unchanged and a non-fresh one PB_ERR_NOT_FRESH.
 */
#include <stddef.h>
#include <stdint.h>

#include "fuzz_policy_driver.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    return fz_run_policy_program(data, size, FZ_SURFACE_PREFILL);
}
