/*
 * allocator.c - the default allocator (malloc and free) and the check of a
 * caller's, shared by every create of the library (policies, profiles).
 */
#include "allocator.h"

#include <stdlib.h>

static void *default_alloc(void *ctx, size_t n) {
    (void)ctx;
    return malloc(n);
}

static void default_free(void *ctx, void *p, size_t n) {
    (void)ctx;
    (void)n;
    free(p);
}

int pb__allocator_of(const pb_allocator *caller, pb_allocator *out) {
    if (caller == NULL) {
        const pb_allocator d = {default_alloc, default_free, NULL};
        *out = d;
        return 1;
    }
    if (caller->alloc == NULL || caller->free == NULL) return 0;
    *out = *caller;
    return 1;
}
