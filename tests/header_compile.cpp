// header_compile.cpp - the public header compiled as C++ with
// -Wall -Wextra -Wpedantic -Werror: the probes of header_probe.h with
// extern "C" linkage, suffixed _cxx; test_header_compile.c calls them.
#include <pyramidkv/pyramidkv.h>

#define PB_PROBE(name)                                                         \
    extern "C" int name##_cxx(void);                                           \
    extern "C" int name##_cxx(void)
#define PB_INT(x) static_cast<int>(x)
#define PB_NULL nullptr

#include "header_probe.h"
