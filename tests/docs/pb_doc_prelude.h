/*
 * pb_doc_prelude.h - the includes a documentation code block without its
 * own main() is compiled with (tests/docs/CMakeLists.txt): the C library
 * headers a snippet may use, and the library's one header.
 */
#ifndef PB_DOC_PRELUDE_H
#define PB_DOC_PRELUDE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pyramidkv/pyramidkv.h>

#endif
