/*
 * header_compile.c - the public header compiled as strict C11 with
 * -Wall -Wextra -Wpedantic -Werror: the probes of header_probe.h with C
 * linkage, suffixed _c11; test_header_compile.c calls them.
 */
#include <stddef.h>

#include <pyramidkv/pyramidkv.h>

#define PB_PROBE(name)                                                         \
    int name##_c11(void);                                                      \
    int name##_c11(void)
#define PB_INT(x) ((int)(x))
#define PB_NULL NULL

#include "header_probe.h"
