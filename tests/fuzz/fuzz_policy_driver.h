/*
 * fuzz_policy_driver.h - the interpreter shared by the policy fuzz targets:
 * it turns fuzz bytes into parameters and a program of create / observe /
 * evict / reset / introspection calls, runs the program on the library and
 * on the reference model side by side, and aborts with a message on the
 * first disagreement or broken invariant. The targets differ only in the
 * surface that creates the instance and feeds and evicts it.
 *
 * A new surface (trace files, ...) gets its own target file; if it drives
 * a policy instance, add an enumerator here and its calls to the driver's
 * files (fuzz_policy_internal.h lists them), as FZ_SURFACE_PREFILL did.
 */
#ifndef PB_TESTS_FUZZ_POLICY_DRIVER_H
#define PB_TESTS_FUZZ_POLICY_DRIVER_H

#include <stddef.h>
#include <stdint.h>

typedef enum fz_surface {
    FZ_SURFACE_NATIVE = 0, /* pb_kvcache_pyramidkv_create, _observe, _evict */
    FZ_SURFACE_COMPAT = 1, /* pb_kvcache_pyramidkv / pb_kvcache_snapkv vtables */
    FZ_SURFACE_PREFILL = 2, /* native, opening with pb_kvcache_prefill */
    FZ_SURFACE_SCORERS = 3, /* pb_kvcache_create with a scorer, sinks and
                               an explicit share; native calls */
    FZ_SURFACE_FAMILY = 4   /* the h2o, scissorhands, tova, streaming_llm
                               and sliding_window vtables */
} fz_surface;

/* Runs one input. Returns 0; aborts the process on a finding, after
 * printing what failed to stderr. */
int fz_run_policy_program(const uint8_t *data, size_t size,
                          fz_surface surface);

#endif /* PB_TESTS_FUZZ_POLICY_DRIVER_H */
