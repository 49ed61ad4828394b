/*
 * header_compile.c - the public header compiled as strict C11 with
 * -Wall -Wextra -Wpedantic -Werror; test_header_compile.c calls the probe.
 */
#include <pyramidkv/pyramidkv.h>

int pb_header_probe_c11(void);

int pb_header_probe_c11(void) {
    const pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params s = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    const pb_kvcache_vtable *v = &pb_kvcache_pyramidkv;
    return (int)(p.budget + s.budget + o.capacity) + (v->create != NULL) +
           (pb_kvcache_snapkv.evict != NULL) +
           (c.struct_size == sizeof c);
}
