// header_compile.cpp - the public header compiled as C++ with
// -Wall -Wextra -Wpedantic -Werror; test_header_compile.c calls the probe.
#include <pyramidkv/pyramidkv.h>

extern "C" int pb_header_probe_cxx(void);

extern "C" int pb_header_probe_cxx(void) {
    const pb_kvcache_pyramidkv_params p = PB_KVCACHE_PYRAMIDKV_PARAMS_DEFAULT;
    const pb_kvcache_snapkv_params s = PB_KVCACHE_SNAPKV_PARAMS_DEFAULT;
    const pb_kvcache_options o = PB_KVCACHE_OPTIONS_DEFAULT;
    const pb_kvcache_config c = PB_KVCACHE_CONFIG_DEFAULT;
    const pb_kvcache_vtable *v = &pb_kvcache_pyramidkv;
    return static_cast<int>(p.budget + s.budget + o.capacity) +
           (v->create != nullptr) + (pb_kvcache_snapkv.evict != nullptr) +
           (c.struct_size == sizeof c);
}
