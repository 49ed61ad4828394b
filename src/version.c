/*
 * version.c - the run-time version of the library, to compare with the
 * PB_VERSION_* macros a caller compiled against.
 */
#include "pyramidkv/pyramidkv.h"

unsigned pb_version_number(void) { return (unsigned)PB_VERSION_NUMBER; }

const char *pb_version_string(void) { return PB_VERSION_STRING; }
